"""The web page's listener under the server's caps and its SIGHUP (issue 43 deliver 2's gaps):
idle connections past ``--max-per-address`` and ``--max-pending`` are shed while a real page's
WebSocket still gets in, a page past ``--max-connections`` is told ``busy``, a page that never
sends its hello is closed at the deadline, and SIGHUP's new certificate is the one the page's
listener presents.

The flood is real sockets from loopback addresses other than the real client's (Linux routes
all of ``127/8`` to ``lo``): plain ones that send nothing, and WebSocket clients (the
``websockets`` library) that finish the handshake and never send their hello."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
import trustme
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from coding_agent.server.remote import client_tls_context
from tests.app.server.conftest import TOKEN

pytestmark = pytest.mark.anyio

TIMEOUT = 120
FD_LIMIT = 256


def _ws_url(server: Any) -> str:
    web = next(a for a in server.addresses if a.startswith(("http://", "https://")))
    return web.replace("http", "ws", 1) + "ws"


async def _hello(page: ClientConnection) -> dict[str, Any]:
    """Send the token (a new session) and return the server's first answer."""
    await page.send(json.dumps({"token": TOKEN, "new": {}}))
    with anyio.fail_after(TIMEOUT):
        return json.loads(await page.recv())


async def _closed(page: ClientConnection) -> tuple[int | None, str | None]:
    """Wait (with a deadline) for the server to close ``page``; its close code and reason."""
    with anyio.fail_after(TIMEOUT):
        try:
            while True:
                await page.recv()
        except ConnectionClosed:
            pass
    return page.close_code, page.close_reason


@pytest.fixture
async def held() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def test_a_flood_of_idle_connections_is_shed_and_a_real_page_still_gets_in(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    tls_files: dict[str, Path],
    held: AsyncExitStack,
) -> None:
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--web",
         "tcp://127.0.0.1:0", "--insecure", "--token-file", str(tls_files["token"]),
         "--max-per-address", "3", "--max-pending", "6", "--max-connections", "1"],
        lines=2,
    )  # fmt: skip
    url = _ws_url(server)
    port = int(url.rsplit(":", 1)[1].split("/")[0])

    # 10 plain idle sockets from one address: past its cap of 3 pending, the rest are closed.
    def plain() -> list[socket.socket]:
        return [
            socket.create_connection(("127.0.0.1", port), timeout=30, source_address=("127.0.0.2", 0))
            for _ in range(10)
        ]  # fmt: skip

    for sock in await anyio.to_thread.run_sync(plain):
        held.callback(sock.close)
    await server.wait_event(lambda e: "reason=per_address_cap" in e, "the per-address cap")

    # 8 WebSocket clients that never say hello, from 8 addresses: past 6 pending, the oldest go.
    for n in range(1, 9):
        await held.enter_async_context(connect(url, local_addr=(f"127.0.1.{n}", 0)))
    await server.wait_event(lambda e: "reason=pending_full" in e, "the oldest pending shed")

    # A real page still gets in while the flood is held.
    page = await held.enter_async_context(connect(url))
    welcome = await _hello(page)
    assert welcome["type"] == "welcome" and welcome["session"], welcome
    await server.wait_event(lambda e: " accepted " in e and "peer=web:" in e, "the page admitted")

    # Past --max-connections a page is told so, with a close reason, not left hanging.
    second = await held.enter_async_context(connect(url))
    refused = await _hello(second)
    assert refused["type"] == "error" and refused["code"] == "busy", refused
    assert "--max-connections" in refused["message"]
    assert await _closed(second) == (1013, "busy")

    # A page that never sends its hello is closed at the deadline (4408), and logged.
    silent = await held.enter_async_context(connect(url))
    assert await _closed(silent) == (4408, "no hello in time")
    await server.wait_event(lambda e: "reason=preface_timeout" in e, "the hello deadline")

    # The admitted page is still served.
    await page.send(json.dumps({"id": 1, "type": "branches"}))
    with anyio.fail_after(TIMEOUT):
        while (reply := json.loads(await page.recv()))["type"] != "reply":
            pass
    assert reply["id"] == 1, reply
    assert server.process.returncode is None, "the server is still up"


def _write_cert(ca: trustme.CA, cert: Path, key: Path) -> None:
    issued = ca.issue_cert("127.0.0.1", "localhost")
    cert.write_bytes(b"".join(pem.bytes() for pem in issued.cert_chain_pems))
    key.write_bytes(issued.private_key_pem.bytes())


async def test_sighup_rotates_the_certificate_of_the_web_listener(
    servers: Any, agent_env: dict[str, str], project: Path, faux_script: Path, tmp_path: Path
) -> None:
    first_ca, second_ca = trustme.CA(), trustme.CA()
    cert, key, tokens = tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "tokens"
    first_ca_file, second_ca_file = tmp_path / "ca1.pem", tmp_path / "ca2.pem"
    first_ca.cert_pem.write_to_path(str(first_ca_file))
    second_ca.cert_pem.write_to_path(str(second_ca_file))
    _write_cert(first_ca, cert, key)
    tokens.write_text(f"{TOKEN}\n")
    os.chmod(tokens, 0o600)
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--web",
         "tcp://127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key),
         "--token-file", str(tokens)],
        lines=2,
    )  # fmt: skip
    url = _ws_url(server)
    assert url.startswith("wss://"), url
    old_tls, new_tls = client_tls_context(first_ca_file), client_tls_context(second_ca_file)

    async with connect(url, ssl=old_tls) as page:
        assert (await _hello(page))["type"] == "welcome"
        with pytest.raises(ssl.SSLCertVerificationError):
            async with connect(url, ssl=new_tls):
                pass

        _write_cert(second_ca, cert, key)
        mark = len(server.events)
        server.process.send_signal(signal.SIGHUP)
        reload = await server.wait_event(lambda e: " reload " in e, "the reload line", mark)
        assert "ok=yes" in reload, reload

        with pytest.raises(ssl.SSLCertVerificationError):
            async with connect(url, ssl=old_tls):
                pass
        async with connect(url, ssl=new_tls) as again:
            assert (await _hello(again))["type"] == "welcome"
        # the page that was open before the reload is not cut off
        await page.send(json.dumps({"id": 1, "type": "branches"}))
        with anyio.fail_after(TIMEOUT):
            while (reply := json.loads(await page.recv()))["type"] != "reply":
                pass
        assert reply["id"] == 1, reply
    assert server.process.returncode is None, "no restart"


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit (util-linux)")
async def test_out_of_descriptors_the_web_listener_sheds_load_and_still_serves_a_page(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    tls_files: dict[str, Path],
    held: AsyncExitStack,
) -> None:
    """Caps set above the descriptors the process has: accepting runs into ``EMFILE``."""
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--web",
         "tcp://127.0.0.1:0", "--insecure", "--token-file", str(tls_files["token"]),
         "--max-pending", "1000", "--max-per-address", "1000", "--max-connections", "1000"],
        lines=2,
        prefix=["prlimit", f"--nofile={FD_LIMIT}:{FD_LIMIT}", "--"],
    )  # fmt: skip
    url = _ws_url(server)
    port = int(url.rsplit(":", 1)[1].split("/")[0])

    def plain() -> list[socket.socket]:
        return [
            socket.create_connection(("127.0.0.1", port), timeout=30, source_address=("127.0.0.2", 0))
            for _ in range(400)
        ]  # fmt: skip

    for sock in await anyio.to_thread.run_sync(plain):
        held.callback(sock.close)
    shed = await server.wait_event(
        lambda e: "reason=no_file_descriptors" in e, "load shed out of descriptors"
    )
    assert " shed " in shed and "out of file descriptors" in shed

    page = await held.enter_async_context(connect(url))  # the flood still held
    welcome = await _hello(page)
    assert welcome["type"] == "welcome" and welcome["session"], welcome
    assert server.process.returncode is None, "the server is still up"
