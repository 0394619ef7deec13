"""Clients move on to the next server of their list on any connection failure (issue 42: a
reset TLS handshake used to end ``-p --server a,b`` with an ``anyio.BrokenResourceError``
traceback), say so in one line, and a TUI attached to a server that is stopped (its next
dials meet reset handshakes) waits for it instead of crashing.

The broken servers are real listeners on loopback: one resets the connection after reading the
TLS ClientHello (``SO_LINGER`` 0: an RST, as a dying server or a load balancer sends), one
closes it at once (EOF), one answers something that is not TLS."""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from coding_agent.server.preface import Request
from coding_agent.server.remote import (
    client_tls_context,
    connect_server,
    parse_server_url,
    session_connector,
)
from tests.app.server.conftest import TOKEN

pytestmark = pytest.mark.anyio


class BrokenServer:
    """A TCP listener that breaks every connection in one way (``how``), counting them."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.port = 0
        self.connections = 0
        self._seen = anyio.Event()

    async def serve(
        self, port: int = 0, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        listener = await anyio.create_tcp_listener(
            local_host="127.0.0.1", local_port=port, reuse_port=port != 0
        )
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with listener:
            task_status.started()
            await listener.serve(self._break)

    async def _break(self, stream: anyio.abc.SocketStream) -> None:
        self.connections += 1
        self._seen.set()
        self._seen = anyio.Event()
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        if self.how == "reset":
            with anyio.move_on_after(10):
                await stream.receive()  # the ClientHello
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif self.how == "not_tls":
            await stream.send(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        await stream.aclose()

    async def wait_connections(self, count: int) -> None:
        with anyio.fail_after(60):
            while self.connections < count:
                await self._seen.wait()


@pytest.fixture
async def task_group() -> AsyncIterator[anyio.abc.TaskGroup]:
    async with anyio.create_task_group() as group:
        yield group
        group.cancel_scope.cancel()


def _serve_args(files: dict[str, Path], project: Path, faux: Path) -> list[str]:
    return [
        "--faux-script", str(faux), "serve", "--cwd", str(project),
        "--listen", "tcp://127.0.0.1:0", "--tls-cert", str(files["cert"]),
        "--tls-key", str(files["key"]), "--token-file", str(files["token"]),
    ]  # fmt: skip


@pytest.mark.parametrize("how", ["reset", "eof", "not_tls"])
async def test_a_client_fails_over_past_a_broken_first_server_in_one_line(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    tls_files: dict[str, Path],
    task_group: anyio.abc.TaskGroup,
    how: str,
) -> None:
    broken = BrokenServer(how)
    await task_group.start(broken.serve)
    server = await servers(agent_env, _serve_args(tls_files, project, faux_script), lines=2)
    first = f"tcp://127.0.0.1:{broken.port}"
    done = await anyio.to_thread.run_sync(
        lambda: subprocess.run(
            [
                sys.executable,
                "-m",
                "coding_agent.cli.main",
                "-p",
                "hi",
                "--server",
                f"{first},{server.tcp}",
                "--tls-ca",
                str(tls_files["ca"]),
            ],
            env={**agent_env, "CODING_AGENT_TOKEN": TOKEN},
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello from the server.\n"
    assert broken.connections >= 1
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"coding-agent: {first}: ") and lines[0].endswith(
        f"; trying {server.tcp}"
    ), lines[0]


async def test_connect_server_turns_every_connection_failure_into_an_os_error(
    tls_files: dict[str, Path], task_group: anyio.abc.TaskGroup
) -> None:
    """The reconnecting wire source retries exactly the ``OSError``\\ s: a reset TLS handshake
    must be one, or the client crashes on the next dial."""
    tls = client_tls_context(tls_files["ca"])
    for how in ("reset", "eof", "not_tls"):
        broken = BrokenServer(how)
        await task_group.start(broken.serve)
        address, _ = parse_server_url(f"tcp://127.0.0.1:{broken.port}")
        with pytest.raises(OSError) as failed:
            await connect_server(address, Request(new=True), token=TOKEN, tls=tls)
        assert str(failed.value), how


async def test_insecure_against_a_tls_listener_says_to_drop_insecure(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    tls_files: dict[str, Path],
) -> None:
    """Plain TCP (``--insecure``) to a server that speaks TLS: the server ends the connection
    at the preface, and the one line says what to do instead."""
    server = await servers(agent_env, _serve_args(tls_files, project, faux_script), lines=2)
    address, _ = parse_server_url(server.tcp)
    with pytest.raises(ConnectionResetError) as failed:
        await connect_server(address, Request(new=True), token=TOKEN, insecure=True)
    assert str(failed.value) == (
        f"{address}: the server closed the connection before it answered (with --insecure the "
        "connection is plain TCP: if the server listens with TLS, drop --insecure and give "
        "--tls-ca for its certificate)"
    )


async def test_stopping_the_server_does_not_crash_an_attached_tui(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    tls_files: dict[str, Path],
    task_group: anyio.abc.TaskGroup,
) -> None:
    """The TUI on a server's session; the server gets SIGINT (Ctrl+C) and its port is then
    taken by a listener that resets every TLS handshake. The TUI shows it is reconnecting,
    keeps dialling (each dial a reset handshake), and quits normally when asked."""
    from coding_agent.cli.attach import remote_session
    from coding_agent.tui import run_client

    server = await servers(agent_env, _serve_args(tls_files, project, faux_script), lines=2)
    address, _ = parse_server_url(server.tcp)
    tls = client_tls_context(tls_files["ca"])
    first, info = await connect_server(address, Request(new=True), token=TOKEN, tls=tls)
    again = session_connector(address, info["session"], token=TOKEN, tls=tls, insecure=False)
    pending = [first]

    async def connect() -> Any:
        return pending.pop() if pending else await again()

    async def until(pilot: Any, predicate: Any, what: str) -> None:
        try:
            with anyio.fail_after(60):
                while not predicate():
                    await pilot.pause(0.02)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for: {what}") from None

    resetter = BrokenServer("reset")

    async def pilot_test(pilot: Any) -> None:
        await until(pilot, lambda: isinstance(pilot.app.view, dict), "the session's view")
        banner = pilot.app.query_one("#unavailable")
        server.process.send_signal(signal.SIGINT)
        with anyio.fail_after(60):
            assert await server.process.wait() == 130  # Ctrl+C, as for any command
        await until(pilot, lambda: banner.display, "the reconnecting banner")
        await task_group.start(resetter.serve, address.port)
        await resetter.wait_connections(2)  # two dials met a reset handshake, and it runs on
        assert banner.display
        pilot.app.exit()

    with anyio.fail_after(240):
        run = await run_client(
            remote_session(info, address),
            supervisor=None,
            connect=connect,
            headless=True,
            size=(110, 45),
            auto_pilot=pilot_test,
        )
    assert run.session is not None and run.session.id == info["session"]
