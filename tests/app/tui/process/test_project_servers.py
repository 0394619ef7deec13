"""A trusted project's ``.mcp.json`` servers start only as the user approved them (Claude Code's
per-server approval of project servers).

The escape this closes, through the real binary: in a trusted project that had no
``.mcp.json``, a command the agent ran in the OS sandbox created one (the sandbox keeps an
existing ``.mcp.json`` read-only, but cannot keep a missing file from being created), and the
next ``coding-agent -p`` in that folder started the planted server: a program outside any
sandbox, with the user's permissions. Now the planted server waits, named in one warning line,
until ``--trust`` (or ``/trust``) approves it; an approved server whose entry changes waits too.

Each server here is a program that leaves a marker and exits: ``-p`` waits for every server to
be ready or failed before its first request, so once ``-p`` has returned, a missing marker means
the server was never started.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pico3 import sandbox_available

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120

_STATUS = sandbox_available()
if not _STATUS.available and os.environ.get("CODING_AGENT_REQUIRE_SANDBOX"):  # CI: .ci/run
    raise RuntimeError(f"the sandbox tests need bubblewrap: {_STATUS.reason}")


@pytest.fixture
def env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The agent's environment with a private config home whose config.toml turns the sandbox
    on."""
    environ = dict(agent_env)
    environ["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    config = tmp_path / "config" / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[sandbox]\nenabled = true\n")
    return environ


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BINARY), *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def marking(marker: Path) -> dict[str, object]:
    """A server entry whose program only leaves ``marker`` (then exits: a failed server)."""
    return {"command": sys.executable, "args": ["-c", f"open({str(marker)!r}, 'w').close()"]}


def answers(folder: Path, steps: list[dict[str, object]]) -> Path:
    path = folder / "script.json"
    path.write_text(json.dumps(steps))
    return path


def waiting_line(project: Path, name: str) -> str:
    return (
        f"{project / '.mcp.json'}: server {name!r} is new or changed since you approved this "
        "project's servers: not started (/trust shows it and asks; coding-agent --trust "
        "approves it)\n"
    )


@pytest.mark.skipif(not _STATUS.available, reason=_STATUS.reason)
def test_a_server_planted_from_the_sandbox_waits_for_approval(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    planted = tmp_path / "planted-ran"
    servers = {"mcpServers": {"planted": marking(planted)}}
    plant = f"printf '%s' {shlex.quote(json.dumps(servers))} > .mcp.json && echo planted"
    script = answers(
        tmp_path,
        [{"toolCalls": [{"name": "bash", "arguments": {"command": plant}}]}, {"text": "Done."}],
    )
    first = run(
        ["-p", "go", "--trust", "--permission-mode", "sandbox", "--faux-script", str(script)],
        project,
        env,
    )
    assert first.returncode == 0, first.stderr
    assert json.loads((project / ".mcp.json").read_text()) == servers  # the command wrote it

    quiet = answers(tmp_path, [{"text": "Hello."}])
    second = run(["-p", "hi", "--faux-script", str(quiet)], project, env)
    assert (second.returncode, second.stdout) == (0, "Hello.\n"), second.stderr
    assert waiting_line(project, "planted") in second.stderr
    assert not planted.exists()

    approved = run(["-p", "hi", "--trust", "--faux-script", str(quiet)], project, env)
    assert approved.returncode == 0, approved.stderr
    assert "new or changed" not in approved.stderr
    assert planted.exists()


def test_only_the_servers_approved_as_written_start(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    kept, changed, added = (tmp_path / f"{name}-ran" for name in ("kept", "changed", "added"))
    config = project / ".mcp.json"
    entries = {"kept": marking(kept), "changed": marking(changed)}
    config.write_text(json.dumps({"mcpServers": entries}))
    quiet = answers(tmp_path, [{"text": "Hello."}])
    trusted = run(["-p", "hi", "--trust", "--faux-script", str(quiet)], project, env)
    assert trusted.returncode == 0, trusted.stderr
    assert kept.exists() and changed.exists()
    kept.unlink()
    changed.unlink()

    # Key order and spacing are not a change; another argument, or a new server, is.
    entries["changed"] = {**marking(changed), "env": {"EXTRA": "1"}}
    entries["added"] = marking(added)
    reordered = {name: dict(reversed(entry.items())) for name, entry in entries.items()}
    config.write_text(json.dumps({"mcpServers": reordered}, indent=4))
    done = run(["-p", "hi", "--faux-script", str(quiet)], project, env)
    assert (done.returncode, done.stdout) == (0, "Hello.\n"), done.stderr
    assert waiting_line(project, "changed") in done.stderr
    assert waiting_line(project, "added") in done.stderr
    assert kept.exists()
    assert not changed.exists() and not added.exists()
