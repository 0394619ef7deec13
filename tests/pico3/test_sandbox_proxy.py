"""The sandbox's domain proxy (pico3.DomainProxy): an allowed domain means its web ports.

A real proxy on a unix socket and a real TCP server on 127.0.0.1: a port of an allowed host
that is not 80 or 443 is refused with a 403 naming the port and the entry that allows it,
unless ``sandbox.allow_domains`` names that port (``host:port``)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pico3 import DomainProxy, domain_allowed


@pytest.fixture
def echo_port() -> Iterator[int]:
    """A TCP server on 127.0.0.1 (a port other than 80 and 443) that answers ``hello`` to
    every connection; the test sees no connection when the proxy refuses."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"hello\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    # close() alone leaves a blocked accept() waiting (the join then took its whole 5 s timeout);
    # shutting the listening socket down wakes it with an error, and the thread ends at once
    server.shutdown(socket.SHUT_RDWR)
    server.close()
    thread.join(timeout=5)


def _connect(proxy: DomainProxy, target: str) -> bytes:
    """``CONNECT target`` through ``proxy``; everything it sends back until it closes (or, once
    the tunnel is up, the first reply through it)."""
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(10)
        conn.connect(proxy.path)
        conn.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(4096):
            data += chunk
            if data.endswith(b"hello\n"):
                break
        return data


def test_an_entry_without_a_port_means_ports_80_and_443() -> None:
    allow = ["example.com", "*.pythonhosted.org", "db.example.com:6379", "[::1]:8443"]
    assert domain_allowed("example.com", allow, 443) and domain_allowed("example.com", allow, 80)
    assert not domain_allowed("example.com", allow, 22)
    assert not domain_allowed("example.com", allow, 6379)  # named for another host only
    assert domain_allowed("files.pythonhosted.org", allow, 443)
    assert not domain_allowed("files.pythonhosted.org", allow, 8080)
    # an entry naming a port allows that port alone
    assert domain_allowed("db.example.com", allow, 6379)
    assert not domain_allowed("db.example.com", allow, 443)
    assert domain_allowed("::1", allow, 8443) and domain_allowed("[::1]", allow, 8443)
    assert not domain_allowed("::1", allow, 443)
    # without a port (web_fetch's first check, by name) any entry for the host will do
    assert domain_allowed("db.example.com", allow) and domain_allowed("::1", allow)
    # a port that is no port allows nothing, rather than every port
    assert not domain_allowed("example.org", ["example.org:http"], 80)
    assert not domain_allowed("example.org", ["example.org:0"], 0)


def test_the_proxy_refuses_another_port_of_an_allowed_domain(
    tmp_path: Path, echo_port: int
) -> None:
    proxy = DomainProxy(tmp_path / "proxy" / "proxy.sock", ["127.0.0.1"]).start()
    try:
        reply = _connect(proxy, f"127.0.0.1:{echo_port}").decode()
        status, _, body = reply.partition("\r\n\r\n")
        assert status.startswith(
            "HTTP/1.1 403 Forbidden: port not allowed by the sandbox (sandbox.allow_domains)"
        )
        assert body == (
            f"port not allowed by the sandbox: 127.0.0.1:{echo_port} (an allowed domain is "
            f'reached on ports 80 and 443 only; add "127.0.0.1:{echo_port}" to '
            "sandbox.allow_domains in your config.toml to allow this port)\n"
        )
        assert "hello" not in reply  # never connected
        # a domain not allowed at all is refused as before, its own reason
        reply = _connect(proxy, f"localhost:{echo_port}").decode()
        assert reply.startswith("HTTP/1.1 403 Forbidden: domain not allowed by the sandbox")
        assert "domain not allowed by the sandbox: localhost (sandbox.allow_domains)" in reply
        assert proxy.refused == [f"127.0.0.1:{echo_port}", "localhost"]
    finally:
        proxy.close()


def test_an_entry_naming_the_port_opens_it(tmp_path: Path, echo_port: int) -> None:
    proxy = DomainProxy(tmp_path / "proxy.sock", [f"127.0.0.1:{echo_port}"]).start()
    try:
        reply = _connect(proxy, f"127.0.0.1:{echo_port}")
        assert reply == b"HTTP/1.1 200 Connection established\r\n\r\nhello\n"
        assert proxy.refused == []
    finally:
        proxy.close()
