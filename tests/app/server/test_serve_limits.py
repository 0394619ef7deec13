"""A connection flood against ``coding-agent serve`` run under a low open-file limit
(``prlimit --nofile=256:256``): the server sheds the flood (per-address cap, the oldest pending
connection, or, out of descriptors, load) and keeps serving a real client during it; it never
exits (issue 42: ~1,000 idle connections used to end it with ``cannot listen: [Errno 24]``).

The flood is plain sockets that connect and send nothing, from loopback addresses other than
the real client's (``127.0.0.2``, ``127.0.1.N``: Linux routes all of ``127/8`` to ``lo``), held
open until the real client's run has finished."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_agent.server.remote import parse_server_url
from tests.app.server.conftest import TOKEN

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit (util-linux)"),
]

FD_LIMIT = 256


def _serve_args(files: dict[str, Path], project: Path, faux: Path, *extra: str) -> list[str]:
    return [
        "--faux-script", str(faux), "serve", "--cwd", str(project),
        "--listen", "tcp://127.0.0.1:0", "--tls-cert", str(files["cert"]),
        "--tls-key", str(files["key"]), "--token-file", str(files["token"]), *extra,
    ]  # fmt: skip


def _flood(port: int, sources: list[str], each: int) -> list[socket.socket]:
    """``each`` idle connections from every address of ``sources`` (connected: in the server's
    backlog or accepted)."""
    held: list[socket.socket] = []
    for source in sources:
        for _ in range(each):
            held.append(
                socket.create_connection(
                    ("127.0.0.1", port), timeout=30, source_address=(source, 0)
                )
            )
    return held


@pytest.fixture
def flood() -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    try:
        yield held
    finally:
        for sock in held:
            sock.close()


async def _real_client(env: dict[str, str], server: Any, ca: Path) -> dict[str, Any]:
    """``--json`` on a new session through the server, to the end; its last line."""
    done = await anyio.to_thread.run_sync(
        lambda: subprocess.run(
            [
                sys.executable,
                "-m",
                "coding_agent.cli.main",
                "--json",
                "hello",
                "--server",
                server.tcp,
                "--tls-ca",
                str(ca),
            ],
            env={**env, "CODING_AGENT_TOKEN": TOKEN},
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


async def test_a_flood_past_the_fd_limit_is_shed_and_a_real_client_is_served_during_it(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    tls_files: dict[str, Path],
    flood: list[socket.socket],
) -> None:
    server = await servers(
        agent_env,
        _serve_args(tls_files, project, faux_script),
        lines=2,
        prefix=["prlimit", f"--nofile={FD_LIMIT}:{FD_LIMIT}", "--"],
    )
    limits = await server.wait_event(lambda e: " limits " in e, "the limits line")
    assert f"fd_limit={FD_LIMIT}" in limits, limits
    address, _ = parse_server_url(server.tcp)
    # 300 from one address, then 6 from each of 60 others: more connections than descriptors.
    flood += await anyio.to_thread.run_sync(_flood, address.port, ["127.0.0.2"], 300)
    others = [f"127.0.1.{n}" for n in range(1, 61)]
    flood += await anyio.to_thread.run_sync(_flood, address.port, others, 6)
    assert len(flood) > FD_LIMIT

    last = await _real_client(agent_env, server, tls_files["ca"])  # the flood still held
    assert last["ok"] is True and last["text"] == "Hello from the server."
    await server.wait_event(lambda e: "reason=per_address_cap" in e, "the per-address cap")
    await server.wait_event(lambda e: "reason=pending_full" in e, "the oldest pending shed")
    assert server.process.returncode is None, "the server is still up"
    assert not any("cannot listen" in line for line in server.events)


async def test_out_of_descriptors_the_server_sheds_load_and_still_serves(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    tls_files: dict[str, Path],
    flood: list[socket.socket],
) -> None:
    """Caps set above the descriptors the process has: accepting runs into ``EMFILE``."""
    server = await servers(
        agent_env,
        _serve_args(
            tls_files, project, faux_script,
            "--max-pending", "1000", "--max-per-address", "1000", "--max-connections", "1000",
        ),
        lines=2,
        prefix=["prlimit", f"--nofile={FD_LIMIT}:{FD_LIMIT}", "--"],
    )  # fmt: skip
    address, _ = parse_server_url(server.tcp)
    flood += await anyio.to_thread.run_sync(_flood, address.port, ["127.0.0.2"], 400)
    shed = await server.wait_event(
        lambda e: "reason=no_file_descriptors" in e, "load shed out of descriptors"
    )
    assert " shed " in shed and "out of file descriptors" in shed

    last = await _real_client(agent_env, server, tls_files["ca"])  # the flood still held
    assert last["ok"] is True and last["text"] == "Hello from the server."
    assert server.process.returncode is None, "the server is still up"


async def test_the_server_raises_its_soft_fd_limit_to_the_hard_one(
    servers: Any, agent_env: dict[str, str], project: Path
) -> None:
    server = await servers(
        agent_env, ["serve", "--cwd", str(project)], prefix=["prlimit", "--nofile=256:4096", "--"]
    )
    limits = await server.wait_event(lambda e: " limits " in e, "the limits line")
    assert "fd_limit=4096" in limits and "raised_from=256" in limits, limits
