"""``coding-agent serve --listen tcp://…``: TLS (a CA and certificate made by ``trustme`` here)
and a bearer token. A wrong token, no token and plain TCP to the TLS port are each refused
before any session or worker is reached, and the server goes on serving good clients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_agent.server.preface import MAGIC, Request
from coding_agent.server.remote import (
    ServerRefused,
    client_tls_context,
    connect_server,
    parse_server_url,
)
from coding_agent.session_files.folders import list_sessions
from tests.app.server.conftest import TOKEN

pytestmark = pytest.mark.anyio


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coding_agent.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def _serve_args(files: dict[str, Path], project: Path, faux: Path) -> list[str]:
    return [
        "--faux-script", str(faux), "serve", "--cwd", str(project),
        "--listen", "tcp://127.0.0.1:0", "--tls-cert", str(files["cert"]),
        "--tls-key", str(files["key"]), "--token-file", str(files["token"]),
    ]  # fmt: skip


@pytest.fixture
async def tls_server(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    tls_files: dict[str, Path],
) -> Any:
    """A server on ``tcp://127.0.0.1`` with TLS and the token (and its Unix socket)."""
    return await servers(agent_env, _serve_args(tls_files, project, faux_script), lines=2)


async def _cli_in_thread(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return await anyio.to_thread.run_sync(lambda: _cli(env, *args))


async def _send_and_read_to_the_end(stream: Any, data: bytes) -> bytes:
    """Send ``data``, then read all the server sends until it hangs up; the stream is closed."""
    await stream.send(data)
    received = b""
    with anyio.fail_after(30):
        try:
            while True:
                received += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            pass
    await stream.aclose()
    return received


def _no_worker(server: Any) -> bool:
    return not any("worker started" in line for line in server.events)


async def test_bad_clients_are_refused_before_any_service_and_a_good_one_works_after(
    tls_server: Any, agent_env: dict[str, str], tls_files: dict[str, Path]
) -> None:
    server = tls_server
    address, _ = parse_server_url(server.tcp)
    tls = client_tls_context(tls_files["ca"])

    # A wrong token, with a request that is not even JSON: the token is checked first.
    stream = await anyio.connect_tcp(
        address.host, address.port, ssl_context=tls, tls_standard_compatible=False
    )
    answer = await _send_and_read_to_the_end(
        stream, MAGIC + b" wrong-token-0000000000000 {not json\n"
    )
    assert answer.startswith(b"ERR unauthorized "), answer
    await server.wait_event(lambda e: "unauthorized" in e, "the refusal of a wrong token")

    for token in ("another-wrong-token-000000000", None):
        with pytest.raises(ServerRefused) as refused:
            await connect_server(address, Request(new=True), token=token, tls=tls)
        assert refused.value.code == "unauthorized"
        assert "--token-file" in str(refused.value)

    # Plain TCP to the TLS port, with the right token: the TLS handshake fails first.
    plain = await anyio.connect_tcp(address.host, address.port)
    received = await _send_and_read_to_the_end(
        plain, MAGIC + f" {TOKEN} ".encode() + b'{"new": {}}\n'
    )
    assert b"OK" not in received
    await server.wait_event(lambda e: "TLS handshake failed" in e, "the plain TCP refusal")

    # A client that hangs up right after the TLS handshake, before any preface: the server's
    # refusal then meets a stream that has ended. Only that connection ends (the unhandled
    # EndOfStream used to stop the server).
    hung_up = await anyio.connect_tcp(
        address.host, address.port, ssl_context=tls, tls_standard_compatible=False
    )
    await hung_up.aclose()
    await server.wait_event(lambda e: "ended before the preface" in e, "the hung-up client")
    # A token file that holds no token the client can present is refused before dialling.
    bad_token = tls_files["token"].with_name("bad-token")
    bad_token.write_text("three spaced words\n")
    refused_file = await _cli_in_thread(
        agent_env, "-p", "hi", "--server", server.tcp, "--tls-ca", str(tls_files["ca"]),
        "--token-file", str(bad_token),
    )  # fmt: skip
    assert refused_file.returncode == 2, refused_file.stderr
    assert "neither a token alone nor NAME TOKEN" in refused_file.stderr

    assert list_sessions(env=agent_env) == [], "no refused client made a session"
    assert _no_worker(server), "no refused client started a worker"
    assert server.process.returncode is None

    # The server is unaffected: -p with the token and the CA runs end to end.
    env = {**agent_env, "CODING_AGENT_TOKEN": TOKEN}
    done = await _cli_in_thread(
        env, "--json", "hello", "--server", server.tcp, "--tls-ca", str(tls_files["ca"])
    )
    assert done.returncode == 0, done.stderr
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["ok"] is True and last["text"] == "Hello from the server."
    session_id = json.loads(done.stdout.splitlines()[0])["session"]
    # And the same session again, by URL, with the token from a file.
    again = await _cli_in_thread(
        agent_env, "-p", "again", "--server", f"{server.tcp}/{session_id}",
        "--tls-ca", str(tls_files["ca"]), "--token-file", str(tls_files["token"]),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout == "Second answer.\n"


async def test_a_client_refuses_a_certificate_it_cannot_check_and_says_how_to_fix_it(
    tls_server: Any, agent_env: dict[str, str], tls_files: dict[str, Path]
) -> None:
    server = tls_server
    env = {**agent_env, "CODING_AGENT_TOKEN": TOKEN}
    done = await _cli_in_thread(env, "-p", "hi", "--server", server.tcp)
    assert done.returncode == 1
    assert "not trusted" in done.stderr and "--tls-ca FILE" in done.stderr
    wrong = await _cli_in_thread(
        agent_env, "-p", "hi", "--server", server.tcp, "--tls-ca", str(tls_files["ca"])
    )
    assert wrong.returncode == 2, "no token: refused"
    assert "wrong or missing token" in wrong.stderr
    assert list_sessions(env=agent_env) == []


def test_tcp_without_tls_or_token_is_refused_at_start_naming_the_fix(
    agent_env: dict[str, str], project: Path, tls_files: dict[str, Path]
) -> None:
    token = ["--token-file", str(tls_files["token"])]
    no_tls = _cli(agent_env, "serve", "--cwd", str(project), "--listen", "tcp://0.0.0.0:0", *token)
    assert no_tls.returncode == 2
    assert "needs TLS: give --tls-cert FILE and --tls-key FILE" in no_tls.stderr
    open_insecure = _cli(agent_env, "serve", "--listen", "tcp://0.0.0.0:0", "--insecure", *token)
    assert open_insecure.returncode == 2
    assert "only allowed on a loopback address" in open_insecure.stderr
    no_token = _cli(
        agent_env, "serve", "--listen", "tcp://127.0.0.1:0", "--tls-cert",
        str(tls_files["cert"]), "--tls-key", str(tls_files["key"]),
    )  # fmt: skip
    assert no_token.returncode == 2 and "needs --token-file FILE" in no_token.stderr
    os.chmod(tls_files["token"], 0o644)
    readable = _cli(
        agent_env, "serve", "--listen", "tcp://127.0.0.1:0", "--tls-cert",
        str(tls_files["cert"]), "--tls-key", str(tls_files["key"]), *token,
    )  # fmt: skip
    assert readable.returncode == 2 and f"chmod 600 {tls_files['token']}" in readable.stderr


async def test_insecure_plain_tcp_on_loopback_still_needs_the_token(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    tls_files: dict[str, Path],
) -> None:
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--listen",
         "tcp://127.0.0.1:0", "--insecure", "--token-file", str(tls_files["token"])],
        lines=2,
    )  # fmt: skip
    address, _ = parse_server_url(server.tcp)
    with pytest.raises(ServerRefused):
        await connect_server(address, Request(new=True), insecure=True)
    env = {**agent_env, "CODING_AGENT_TOKEN": TOKEN}
    done = await _cli_in_thread(env, "-p", "hi", "--server", server.tcp, "--insecure")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello from the server.\n"


async def test_the_servers_own_token_file_works_for_a_client_and_a_shared_one_is_refused_clearly(
    servers: Any, agent_env: dict[str, str], project: Path, faux_script: Path, tmp_path: Path
) -> None:
    """The README's ``serve --token-file T`` file is ``NAME TOKEN`` lines (with comments): a
    client given that same file sent its first line whole and failed with "a token is one word
    of printable characters"; now one named token is presented, and a file of several is
    refused naming them and the fix."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# NAME TOKEN\nme  {TOKEN}\n")
    os.chmod(tokens, 0o600)
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--listen",
         "tcp://127.0.0.1:0", "--insecure", "--token-file", str(tokens)],
        lines=2,
    )  # fmt: skip
    done = await _cli_in_thread(
        agent_env, "-p", "hi", "--server", server.tcp, "--insecure", "--token-file", str(tokens)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello from the server.\n"
    shared = tmp_path / "team-tokens"
    shared.write_text(f"me {TOKEN}\nci another-token-0123456789abcdef\n")
    refused = await _cli_in_thread(
        agent_env, "-p", "hi", "--server", server.tcp, "--insecure", "--token-file", str(shared)
    )
    assert refused.returncode == 2
    assert "it holds 2 tokens (me, ci)" in refused.stderr
    assert "$CODING_AGENT_TOKEN" in refused.stderr


async def test_the_tui_attaches_to_a_session_on_the_server_over_tls(
    tls_server: Any, tls_files: dict[str, Path]
) -> None:
    from coding_agent.cli.attach import remote_session
    from coding_agent.server.remote import session_connector
    from coding_agent.tui import run_client

    address, _ = parse_server_url(tls_server.tcp)
    tls = client_tls_context(tls_files["ca"])
    first, info = await connect_server(address, Request(new=True), token=TOKEN, tls=tls)
    again = session_connector(address, info["session"], token=TOKEN, tls=tls, insecure=False)
    pending = [first]

    async def connect() -> Any:
        return pending.pop() if pending else await again()

    def answers(app: Any) -> list[str]:
        view = app.view
        found: list[str] = []
        for entry in view["entries"] if isinstance(view, dict) else []:
            for message in entry.get("model") or []:
                for block in message.get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "text":
                        found.append(block["text"])
        return found

    async def until(pilot: Any, predicate: Any, what: str) -> None:
        try:
            with anyio.fail_after(60):
                while not predicate():
                    await pilot.pause(0.02)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for: {what}") from None

    async def pilot_test(pilot: Any) -> None:
        await until(pilot, lambda: isinstance(pilot.app.view, dict), "the session's view")
        await pilot.press(*"hello", "enter")
        await until(pilot, lambda: "Hello from the server." in answers(pilot.app), "the answer")
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
    assert not pending, "the TUI used the first connection"
