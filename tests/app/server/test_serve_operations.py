"""Running ``coding-agent serve`` for a team (issue 42): SIGHUP reads the named tokens and the
TLS certificate again without a restart (a removed token's connections are closed), a reload
that does not load changes nothing, every log line is timestamped and structured, ``--migrate``
migrates the database before listening, and no server serves a session whose working folder it
cannot see."""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
import trustme
from psycopg import sql

from coding_agent.server.preface import Request
from coding_agent.server.remote import (
    ServerRefused,
    client_tls_context,
    connect_server,
    parse_server_url,
)
from coding_agent.session_files.folders import list_sessions
from pico3.storage.postgres import SCHEMA_VERSION

pytestmark = pytest.mark.anyio

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
CAROL = "carol-token-0123456789abcdef"
LINE = re.compile(
    r"^coding-agent serve: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z [a-z_]+"
    r'( [a-z_]+=("(?:[^"\\]|\\.)*"|[^\s"=]+))*(: \S.*)?$'
)


def _write_tokens(path: Path, lines: str) -> None:
    path.write_text(lines)
    os.chmod(path, 0o600)


def _write_cert(ca: trustme.CA, cert: Path, key: Path) -> None:
    issued = ca.issue_cert("127.0.0.1", "localhost")
    cert.write_bytes(b"".join(pem.bytes() for pem in issued.cert_chain_pems))
    key.write_bytes(issued.private_key_pem.bytes())


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coding_agent.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


async def _until_closed(stream: Any) -> None:
    with anyio.fail_after(60):
        try:
            while True:
                await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            return


async def test_sighup_rotates_tokens_and_certificate_without_a_restart(
    servers: Any, agent_env: dict[str, str], project: Path, faux_script: Path, tmp_path: Path
) -> None:
    first_ca, second_ca = trustme.CA(), trustme.CA()
    cert, key, tokens = tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "tokens"
    first_ca_file, second_ca_file = tmp_path / "ca1.pem", tmp_path / "ca2.pem"
    first_ca.cert_pem.write_to_path(str(first_ca_file))
    second_ca.cert_pem.write_to_path(str(second_ca_file))
    _write_cert(first_ca, cert, key)
    _write_tokens(tokens, f"# the team\nalice {ALICE}\nbob {BOB}\n")
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--listen",
         "tcp://127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key),
         "--token-file", str(tokens)],
        lines=2,
    )  # fmt: skip
    address, _ = parse_server_url(server.tcp)
    old_tls, new_tls = client_tls_context(first_ca_file), client_tls_context(second_ca_file)

    alice, _ = await connect_server(address, Request(new=True), token=ALICE, tls=old_tls)
    await alice.aclose()
    bob, _ = await connect_server(address, Request(new=True), token=BOB, tls=old_tls)
    await server.wait_event(lambda e: " accepted " in e and "token=bob" in e, "bob accepted")
    workers = sum("worker started" in e for e in server.events)

    # Bob's token removed, Carol's added, a certificate from another CA: then SIGHUP.
    _write_tokens(tokens, f"alice {ALICE}\ncarol {CAROL}\n")
    _write_cert(second_ca, cert, key)
    mark = len(server.events)
    server.process.send_signal(signal.SIGHUP)
    reload = await server.wait_event(lambda e: " reload " in e, "the reload line", mark)
    assert "ok=yes" in reload and "revoked=bob" in reload and "closed=1" in reload, reload
    await _until_closed(bob.stream)  # bob's connection was closed by the revocation
    await bob.aclose()

    with pytest.raises(ServerRefused) as refused:
        await connect_server(address, Request(new=True), token=BOB, tls=new_tls)
    assert refused.value.code == "unauthorized"
    with pytest.raises(ssl.SSLCertVerificationError):
        await connect_server(address, Request(new=True), token=ALICE, tls=old_tls)
    carol, _ = await connect_server(address, Request(new=True), token=CAROL, tls=new_tls)
    await carol.aclose()
    await server.wait_event(lambda e: " accepted " in e and "token=carol" in e, "carol accepted")

    # A token file others may read is not loaded: what is in force stays.
    os.chmod(tokens, 0o644)
    mark = len(server.events)
    server.process.send_signal(signal.SIGHUP)
    kept = await server.wait_event(lambda e: " reload " in e, "the failed reload", mark)
    assert "ok=no" in kept and "chmod 600" in kept, kept
    again, _ = await connect_server(address, Request(new=True), token=CAROL, tls=new_tls)
    await again.aclose()

    assert server.process.returncode is None, "no restart"
    assert not any("worker exited" in e for e in server.events), "no worker stopped"
    assert sum("worker started" in e for e in server.events) >= workers
    for line in server.events:
        assert LINE.match(line), line
    tls_line = next((e for e in server.events if " tls_failed " in e), None)
    assert tls_line is not None and re.search(r"TLS handshake failed: \S", tls_line), tls_line


@pytest.fixture
def fresh_url(postgres_cluster: Any) -> Iterator[str]:
    name = f"db_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"postgresql://{postgres_cluster.user}@127.0.0.1:{postgres_cluster.port}/{name}"
    finally:
        with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


async def test_migrate_at_serve_migrates_before_listening(
    servers: Any, agent_env: dict[str, str], project: Path, fresh_url: str
) -> None:
    sockets = Path(tempfile.mkdtemp(prefix="ca-"))
    args = ["serve", "--cwd", str(project), "--storage", fresh_url, "--migrate"]
    first = await servers(agent_env, [*args, "--socket", str(sockets / "a.sock")])
    line = await first.wait_event(lambda e: " migration " in e, "the migration line")
    assert f"ok=yes found=0 now={SCHEMA_VERSION}" in line, line
    with psycopg.connect(fresh_url) as conn:
        assert conn.execute("SELECT version FROM pico3_schema").fetchone() == (SCHEMA_VERSION,)
    second = await servers(agent_env, [*args, "--socket", str(sockets / "b.sock")])
    line = await second.wait_event(lambda e: " migration " in e, "the second migration line")
    assert "nothing to do" in line, line

    unreachable = await anyio.to_thread.run_sync(
        lambda: _cli(agent_env, "serve", "--cwd", str(project), "--socket",
                     str(sockets / "c.sock"), "--storage",
                     "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", "--migrate")
    )  # fmt: skip
    assert unreachable.returncode == 5, unreachable.stderr
    errors = [e for e in unreachable.stderr.splitlines() if "error:" in e]
    assert len(errors) == 1 and "--migrate" in errors[0], unreachable.stderr
    assert "Traceback" not in unreachable.stderr


async def test_no_server_serves_a_session_whose_folder_it_cannot_see(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    tmp_path: Path,
    postgres_cluster: Any,
) -> None:
    """Two servers of one database, a state folder each (two machines); the session's project
    folder is moved away: the other server refuses to take the session over (and makes no
    folder for it), and so does its own server, each with one line naming the fix."""
    url = f"postgresql://{postgres_cluster.user}@127.0.0.1:{postgres_cluster.port}/postgres"
    token = tmp_path / "token"
    _write_tokens(token, ALICE + "\n")
    sockets = Path(tempfile.mkdtemp(prefix="ca-"))
    common = [
        "--faux-script", str(faux_script), "serve", "--cwd", str(project), "--storage", url,
        "--listen", "tcp://127.0.0.1:0", "--insecure", "--token-file", str(token),
    ]  # fmt: skip
    first = await servers(agent_env, [*common, "--socket", str(sockets / "a.sock")], lines=2)
    other_env = {**agent_env, "XDG_STATE_HOME": str(tmp_path / "state-of-the-other-machine")}
    second = await servers(other_env, [*common, "--socket", str(sockets / "b.sock")], lines=2)
    client_env = {**agent_env, "CODING_AGENT_TOKEN": ALICE}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return _cli(client_env, *args, "--insecure")

    made = await anyio.to_thread.run_sync(lambda: run("--json", "hi", "--server", first.tcp))
    assert made.returncode == 0, made.stderr
    session = json.loads(made.stdout.splitlines()[0])["session"]

    moved = project.with_name("moved-away")
    os.rename(project, moved)
    for server in (second, first):
        refused = await anyio.to_thread.run_sync(
            lambda server=server: run("-p", "again", "--server", f"{server.tcp}/{session}")
        )
        assert refused.returncode == 1, refused.stderr
        lines = refused.stderr.splitlines()
        assert len(lines) == 1 and "cannot see" in lines[0] and str(project) in lines[0], lines
        assert "folder_missing" in lines[0] and "docs/server.md" in lines[0]
        await server.wait_event(lambda e: "reason=folder_missing" in e, "the refusal")
    assert list_sessions(env=other_env) == [], "no folder was made for it"
    assert not any("worker started" in e or "host started" in e for e in second.events)
    assert not any(" takeover " in e for e in second.events)

    os.rename(moved, project)  # back: its own server serves it again
    back = await anyio.to_thread.run_sync(
        lambda: run("-p", "again", "--server", f"{first.tcp}/{session}")
    )
    assert back.returncode == 0, back.stderr
