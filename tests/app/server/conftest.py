"""Fixtures of the session server tests: a real ``coding-agent serve`` process, real sockets,
real TLS (certificates made by ``trustme`` in the test), real session workers on the faux model.

:class:`ServerProcess` starts the server, reads its ``LISTENING`` lines and follows its stderr
events (``worker started``, ``reaped``, ``refused``), so tests wait on what the server says,
never on time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import anyio
import anyio.abc
import pytest
import trustme
from anyio.streams.buffered import BufferedByteReceiveStream

TIMEOUT = 60.0
TOKEN = "s3cret-token-of-the-test-0123456789"


@pytest.fixture
def agent_env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """``tests/conftest.py``'s environment, with a private ``XDG_CONFIG_HOME`` too."""
    return {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}


@pytest.fixture
def tls_files(tmp_path: Path) -> dict[str, Path]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    files = {
        "ca": tmp_path / "ca.pem",
        "cert": tmp_path / "server.pem",
        "key": tmp_path / "server.key",
        "token": tmp_path / "token",
    }
    ca.cert_pem.write_to_path(str(files["ca"]))
    cert.cert_chain_pems[0].write_to_path(str(files["cert"]))
    for pem in cert.cert_chain_pems[1:]:
        pem.write_to_path(str(files["cert"]), append=True)
    cert.private_key_pem.write_to_path(str(files["key"]))
    files["token"].write_text(TOKEN + "\n")
    os.chmod(files["token"], 0o600)
    return files


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "README.md").write_text("# Sample project\n")
    return folder


@pytest.fixture
def faux_script(tmp_path: Path) -> Path:
    path = tmp_path / "faux.json"
    path.write_text('[{"text": "Hello from the server."}, {"text": "Second answer."}]')
    return path


class ServerProcess:
    """A running ``coding-agent serve`` and what it said so far."""

    def __init__(self, process: anyio.abc.Process, addresses: list[str]) -> None:
        self.process = process
        self.addresses = addresses
        self.events: list[str] = []
        self._changed = anyio.Event()

    @property
    def unix(self) -> str:
        return next(a for a in self.addresses if a.startswith("unix:"))

    @property
    def tcp(self) -> str:
        return next(a for a in self.addresses if a.startswith("tcp://"))

    async def follow(self) -> None:
        assert self.process.stderr is not None
        stream = BufferedByteReceiveStream(self.process.stderr)
        while True:
            try:
                line = await stream.receive_until(b"\n", 1 << 20)
            except (anyio.EndOfStream, anyio.IncompleteRead):
                break
            text = line.decode(errors="replace")
            print(f"server: {text}")  # shown when a test fails
            self.events.append(text)
            self._changed.set()
            self._changed = anyio.Event()
        self._changed.set()

    async def wait_event(self, predicate: Callable[[str], bool], what: str, start: int = 0) -> str:
        """The first event from index ``start`` on that ``predicate`` accepts (waits for it)."""
        with anyio.fail_after(TIMEOUT):
            seen = start
            while True:
                for line in self.events[seen:]:
                    if predicate(line):
                        return line
                seen = len(self.events)
                if self.process.returncode is not None:
                    raise AssertionError(f"the server exited while waiting for: {what}")
                await self._changed.wait()


async def start_server(
    env: dict[str, str],
    args: Sequence[str],
    group: anyio.abc.TaskGroup,
    *,
    lines: int = 1,
    prefix: Sequence[str] = (),
) -> ServerProcess:
    """``prefix`` goes before the interpreter (``prlimit --nofile=256:256``, say)."""
    command = [*prefix, sys.executable, "-m", "coding_agent.cli.main", *args]
    process = await anyio.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert process.stdout is not None
    out = BufferedByteReceiveStream(process.stdout)
    addresses: list[str] = []
    with anyio.fail_after(TIMEOUT):
        while len(addresses) < lines:
            line = (await out.receive_until(b"\n", 65536)).decode()
            assert line.startswith("LISTENING "), line
            addresses.append(line.removeprefix("LISTENING "))
    server = ServerProcess(process, addresses)
    group.start_soon(server.follow)
    return server


async def stop_server(server: ServerProcess) -> int:
    if server.process.returncode is None:
        server.process.send_signal(signal.SIGTERM)
    with anyio.fail_after(TIMEOUT):
        return await server.process.wait()


@pytest.fixture
async def servers() -> AsyncIterator[Callable[..., object]]:
    """``await servers(env, args, lines=1, prefix=())``: a server stopped (SIGTERM, then waited)
    after the test."""
    started: list[ServerProcess] = []
    async with anyio.create_task_group() as group:

        async def start(
            env: dict[str, str], args: Sequence[str], lines: int = 1, prefix: Sequence[str] = ()
        ) -> ServerProcess:
            server = await start_server(env, args, group, lines=lines, prefix=prefix)
            started.append(server)
            return server

        try:
            yield start
        finally:
            with anyio.CancelScope(shield=True):
                for server in started:
                    await stop_server(server)
            group.cancel_scope.cancel()
