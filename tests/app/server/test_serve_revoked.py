"""A token revoked on the server (``serve``'s SIGHUP) while clients are attached with it: their
reconnect is refused ``unauthorized``, and that refusal is final, as on the first dial. Each
client says one line and exits 2 (the real ``attach`` TUI on a pseudo-terminal, and a ``-p
--server`` turn), and dials no more: the server logs one refusal per client, not one a second.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from coding_agent.server.preface import Request
from coding_agent.server.remote import client_tls_context, connect_server, parse_server_url

pytestmark = pytest.mark.anyio

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
REVOKED = "the server refused this token: it was revoked or changed; {how} again with a valid token"
TIMEOUT = 60.0


def _private(path: Path, text: str) -> Path:
    path.write_text(text)
    os.chmod(path, 0o600)
    return path


@pytest.fixture
def team(tls_files: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    """The server's token file (alice's token only) and alice's own token file."""
    return {
        "tokens": _private(tmp_path / "tokens", f"alice {ALICE}\n"),
        "alice": _private(tmp_path / "alice-token", f"{ALICE}\n"),
    }


async def _serve(
    servers: Any, env: dict[str, str], project: Path, faux: Path, files: dict[str, Path]
) -> Any:
    return await servers(
        env,
        ["--faux-script", str(faux), "serve", "--cwd", str(project), "--listen",
         "tcp://127.0.0.1:0", "--tls-cert", str(files["cert"]), "--tls-key", str(files["key"]),
         "--token-file", str(files["tokens"])],
        lines=2,
    )  # fmt: skip


async def _revoke_alice(server: Any, tokens: Path, closed: int) -> int:
    """Alice's token replaced by Bob's, then SIGHUP; the index of the reload line."""
    _private(tokens, f"bob {BOB}\n")
    mark = len(server.events)
    server.process.send_signal(signal.SIGHUP)
    reload = await server.wait_event(lambda e: " reload " in e, "the reload line", mark)
    assert "ok=yes" in reload and "revoked=alice" in reload, reload
    assert f"closed={closed}" in reload, reload
    return mark


def _refusals(server: Any, start: int) -> list[str]:
    return [e for e in server.events[start:] if " refused " in e and "unauthorized" in e]


class _Terminal:
    """``coding-agent ARGS`` on a pseudo-terminal of its own (a real TUI); what it writes is
    read by a thread (so it never blocks on a full terminal) and kept."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "coding_agent.cli.main", *args],
            stdin=follower, stdout=follower, stderr=follower, env={**env, "TERM": "xterm-256color"},
            start_new_session=True,
        )  # fmt: skip
        os.close(follower)
        self._leader = leader
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._leader, 65536)
            except OSError:  # EIO: every end of the terminal is closed (the process exited)
                break
            if not chunk:
                break
            self._chunks.append(chunk)

    @property
    def output(self) -> str:
        return b"".join(self._chunks).decode(errors="replace")

    async def exit_code(self) -> int:
        """The exit code (waits for it, at most ``TIMEOUT``); the output is read to its end."""
        try:
            code = await anyio.to_thread.run_sync(lambda: self.process.wait(TIMEOUT))
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"still running after {TIMEOUT:g} s; it wrote: {self.output[-2000:]!r}"
            ) from None
        await anyio.to_thread.run_sync(lambda: self._reader.join(TIMEOUT))
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(TIMEOUT)
        os.close(self._leader)


async def test_attached_tuis_whose_token_is_revoked_say_so_and_exit_2(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    tls_files: dict[str, Path],
    team: dict[str, Path],
) -> None:
    files = {**tls_files, **team}
    server = await _serve(servers, agent_env, project, faux_script, files)
    address, _ = parse_server_url(server.tcp)
    tls = client_tls_context(tls_files["ca"])
    made, info = await connect_server(address, Request(new=True), token=ALICE, tls=tls)
    await made.aclose()
    line = await server.wait_event(lambda e: " accepted " in e, "the session made")
    mark = server.events.index(line) + 1
    url = f"{server.tcp}/{info['session']}"
    tuis = [
        _Terminal(agent_env, "attach", url, "--tls-ca", str(tls_files["ca"]),
                  "--token-file", str(team["alice"]))
        for _ in range(2)
    ]  # fmt: skip
    try:
        for which in ("first", "second"):  # both attached with alice's token
            line = await server.wait_event(
                lambda e: " accepted " in e and "token=alice" in e, f"the {which} attach", mark
            )
            mark = server.events.index(line) + 1
        reloaded = await _revoke_alice(server, team["tokens"], closed=2)
        for tui in tuis:
            assert await tui.exit_code() == 2, tui.output[-2000:]
            assert REVOKED.format(how="attach") in tui.output, tui.output[-2000:]
            assert f"coding-agent: error: {server.tcp}: " in tui.output
            assert "Detached from session" not in tui.output
            assert "Traceback" not in tui.output
    finally:
        for tui in tuis:
            tui.close()
    # One refused reconnect each, then no more dialling.
    assert len(_refusals(server, reloaded)) == 2, _refusals(server, reloaded)


async def test_a_p_server_turn_whose_token_is_revoked_says_so_and_exits_2(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    tls_files: dict[str, Path],
    team: dict[str, Path],
    tmp_path: Path,
) -> None:
    script = tmp_path / "parked.json"
    script.write_text(json.dumps([
        {"toolCalls": [{"name": "bash", "arguments": {"command": "touch parked.txt"}}]},
        {"text": "done"},
    ]))  # fmt: skip
    server = await _serve(servers, agent_env, project, script, {**tls_files, **team})
    process = await anyio.open_process(
        [sys.executable, "-m", "coding_agent.cli.main", "-p", "go", "--server", server.tcp,
         "--tls-ca", str(tls_files["ca"]), "--token-file", str(team["alice"]),
         "--wait-for-approval"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=agent_env,
    )  # fmt: skip
    assert process.stderr is not None and process.stdout is not None
    errors = BufferedByteReceiveStream(process.stderr)
    lines: list[str] = []
    try:
        with anyio.fail_after(TIMEOUT):  # the turn is parked on its approval
            while not any("waiting for approval" in line for line in lines):
                lines.append((await errors.receive_until(b"\n", 65536)).decode())
        reloaded = await _revoke_alice(server, team["tokens"], closed=1)
        with anyio.fail_after(TIMEOUT):
            while True:
                try:
                    lines.append((await errors.receive_until(b"\n", 65536)).decode())
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    break
            code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = "\n".join(lines)
    assert code == 2, text
    errors_said = [line for line in lines if line.startswith("coding-agent: error:")]
    assert errors_said == [f"coding-agent: error: {server.tcp}: {REVOKED.format(how='run')}"], text
    assert "Traceback" not in text
    assert len(_refusals(server, reloaded)) == 1, _refusals(server, reloaded)
