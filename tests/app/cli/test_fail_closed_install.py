"""Approvals fail closed, through an installed agent (issue 36, item 1).

The agent is installed the way a user would, ``uv tool install ./apps/coding-agent`` (into a
temporary ``UV_TOOL_DIR``, offline from uv's cache, as tests/docs/test_authoring_walkthrough.py
does), and driven through its real console script:

* the install brings the default feature packages, and ``coding-agent doctor`` says the approval
  package is live;
* ``coding-agent facets remove facets-approval`` refuses without ``--force`` and says what follows;
* with it removed (``--force``: the package is then absent from facet discovery, exactly as an
  install that never had it), ``doctor`` exits 1, ``-p`` and ``--json`` exit 3 with the blocked
  line naming the package and the command that restores it, the TUI (in tmux) shows the block
  as the tool's error, and nothing ran;
* the command the block names restores it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from coding_agent.session_files.folders import list_sessions

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = 120.0
RESTORE = f"coding-agent facets add {ROOT / 'packages' / 'facets-approval'}"
_PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


class Installed:
    """A ``uv tool install`` of the app in a temporary folder: its binary and environment."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("VIRTUAL_ENV", "UV_", "XDG_")) and key not in _PROVIDER_KEYS
        }
        env.pop("CODING_AGENT_TOKEN", None)
        env |= {
            "UV_OFFLINE": "1",
            "UV_PYTHON_DOWNLOADS": "never",
            "UV_TOOL_DIR": str(folder / "tools"),
            "UV_TOOL_BIN_DIR": str(folder / "bin"),
            "XDG_CONFIG_HOME": str(folder / "config"),
            "XDG_STATE_HOME": str(folder / "state"),
            "XDG_CACHE_HOME": str(folder / "cache"),
            "XDG_DATA_HOME": str(folder / "data"),  # where `facets add` installs
        }
        cache = Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
        if cache.is_dir():
            env["UV_CACHE_DIR"] = str(cache)
        self.env = env
        self.binary = folder / "bin" / "coding-agent"
        self.project = folder / "project"
        self.project.mkdir(parents=True)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), *args],
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )

    def script(self, name: str, command: str) -> Path:
        """A faux script: one ``bash`` call, then the answer ``done``."""
        path = self.folder / f"{name}.json"
        steps = [
            {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]},
            {"text": "done"},
        ]
        path.write_text(json.dumps(steps))
        return path

    def stop_workers(self) -> None:
        for session in list_sessions(env=self.env):
            if not session.worker_running():
                continue
            try:
                os.kill(int(session.lock_path.read_text().split()[0]), signal.SIGTERM)
            except (OSError, ValueError, IndexError):
                pass


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    uv = shutil.which("uv")
    assert uv is not None, "uv is on PATH wherever this workspace's tests run (uv run pytest)"
    agent = Installed(tmp_path_factory.mktemp("uv-tool"))
    # --reinstall: build this checkout's packages afresh (uv reuses a cached build of a local
    # package whose pyproject.toml did not change)
    app = str(ROOT / "apps" / "coding-agent")
    done = subprocess.run(
        [uv, "tool", "install", "--reinstall", "--python", sys.executable, app],
        env=agent.env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, (
        done.stdout
        + done.stderr
        + ("\n\nuv ran offline (UV_OFFLINE=1) from its cache: an online `uv sync` fills it.")
    )
    try:
        yield agent
    finally:
        agent.stop_workers()


def test_uv_tool_install_brings_the_default_packages_and_refuses_to_remove_approval(
    installed: Installed,
) -> None:
    doctor = installed.run("doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    lines = doctor.stdout.splitlines()
    assert lines[1].startswith("  facets-approval: live: installed (facets-approval 0.1.0, ")
    assert lines[1].endswith("), loads, approves tool calls")
    for name in ("facets-question", "facets-indexer", "facets-mcp", "facets-subagents"):
        assert f"  {name}: installed ({name} 0.1.0)" in lines
    assert doctor.stderr == ""

    refused = installed.run("facets", "remove", "facets-approval")
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr == (
        "coding-agent facets remove: error: refusing to remove facets-approval: the agent's "
        "safety depends on it (without facets-approval, every tool call that needs approval "
        "(write, edit, bash, MCP tools, job tools that start or kill processes) will be "
        "blocked, in every permission mode, and the permission mode cannot be changed). "
        "Remove it anyway with `coding-agent facets remove facets-approval --force`.\n"
    )
    assert installed.run("doctor").returncode == 0  # still there


def test_with_approval_removed_every_route_blocks_and_the_named_command_restores_it(
    installed: Installed, tmp_path: Path
) -> None:
    removed = installed.run("facets", "remove", "facets-approval", "--force")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == (
        "removed facets-approval (facets-approval); a running agent retires it on /reload\n"
    )
    assert f"restore it with `{RESTORE}`" in removed.stderr

    doctor = installed.run("doctor")
    assert doctor.returncode == 1
    assert "  facets-approval: MISSING: not installed" in doctor.stdout.splitlines()
    assert doctor.stderr.startswith("coding-agent doctor: error: facets-approval is not live, ")
    assert doctor.stderr.endswith(f"restore it with `{RESTORE}`\n")

    blocked_line = (
        "coding-agent: error: blocked the bash call (touch {name}): bash needs approval and no "
        "approval package serves this session, so it was not run: facets-approval is not "
        f"installed; restore it with `{RESTORE}`, then /reload (or start the agent again).\n"
    )
    # -p: the default --approve deny has nobody to deny; the core blocks, exit 3
    printed = installed.run("-p", "go", "--faux-script", str(installed.script("p", "touch p.txt")))
    assert printed.returncode == 3, printed.stderr
    assert printed.stdout == "done\n"
    assert printed.stderr == blocked_line.format(name="p.txt")
    # --approve allow does not help: nothing can approve
    allowed = installed.run(
        "--json",
        "go",
        "--approve",
        "allow",
        "--faux-script",
        str(installed.script("j", "touch j.txt")),
    )
    assert allowed.returncode == 3, allowed.stderr
    result = json.loads(allowed.stdout.splitlines()[-1])
    assert result == {
        "type": "result", "ok": True, "status": "done", "text": "done", "blocked": ["bash (touch j.txt)"]
    }  # fmt: skip
    assert allowed.stderr == blocked_line.format(name="j.txt")
    _tui_shows_the_block(installed)
    assert sorted(p.name for p in installed.project.iterdir()) == []  # nothing ran

    restore = installed.run(*shlex.split(RESTORE)[1:])  # the command the block names
    assert restore.returncode == 0, restore.stderr
    assert "added facets-approval (facets-approval 0.1.0, editable): enabled" in restore.stdout
    assert installed.run("doctor").returncode == 0
    again = installed.run("-p", "go", "--faux-script", str(installed.script("a", "touch a.txt")))
    assert again.returncode == 3
    assert again.stderr == (  # the usual headless denial again: approval is back
        "coding-agent: error: blocked the bash call (touch a.txt): it needs approval, and "
        "-p/--json asks nobody; allow it with --allowedTools 'Bash(touch a.txt)', --approve "
        "allow or --permission-mode auto\n"
    )


class _Pane:
    """One private tmux server (its own socket) running one program in one pane."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.socket = Path(tempfile.gettempdir()) / f"ca-tmux-{uuid.uuid4().hex[:10]}.sock"

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", str(self.socket), *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return done.stdout

    def wait_text(self, needle: str) -> str:
        """Poll the pane until it shows ``needle``; fail with the last screen at the deadline."""
        return self.wait(lambda text: needle in text, repr(needle))

    def wait(self, check: Callable[[str], bool], what: str) -> str:
        """Poll the pane until ``check(text)``; fail with the last screen at the deadline."""
        deadline = time.monotonic() + TIMEOUT
        text = ""
        while time.monotonic() < deadline:
            text = self.tmux("capture-pane", "-p", "-J", "-t", "main")
            if check(text):
                return text
            time.sleep(0.1)  # polling the pane; the condition is what is waited on
        raise AssertionError(f"timed out waiting for {what}; the screen was:\n{text}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], env=self.env, check=False)
        self.socket.unlink(missing_ok=True)


def _words(screen: str) -> str:
    """The screen's text as one line of words (the tool box's left bar left out)."""
    return " ".join(screen.replace("▌", " ").split())


def _tui_shows_the_block(installed: Installed) -> None:
    """The real TUI in tmux: the blocked call shows as the tool's error, naming the package and
    the command that restores it."""
    if shutil.which("tmux") is None:
        message = "tmux is not installed (apt-get install tmux; .ci/run does it)"
        if os.environ.get("CI") or os.environ.get("CODING_AGENT_REQUIRE_TMUX"):
            pytest.fail(message)
        pytest.skip(message)
    env = dict(installed.env, TERM="xterm-256color", COLORTERM="truecolor", LANG="C.UTF-8")
    env.pop("TMUX", None)
    pane = _Pane(env)
    script = installed.script("tui", "touch tui.txt")
    command = f"{installed.binary} --faux-script {script} --linger 1; exec sleep 600"
    try:
        pane.tmux("new-session", "-d", "-s", "main", "-x", "200", "-y", "50",
                  "-c", str(installed.project), command)  # fmt: skip
        pane.wait_text("enter sends")
        pane.tmux("send-keys", "-t", "main", "-l", "go")
        pane.tmux("send-keys", "-t", "main", "Enter")
        # the tool's block as its error (wrapped in the tool's box: read as one line of words),
        # waited for whole: a frame drawn in part can show its first line without the rest
        block = "✗ bash: touch tui.txt ▼ Error · 1 line(s) Tool call blocked: bash needs approval"
        told = (
            "facets-approval is not installed; restore it with "
            f"`{RESTORE}`, then /reload (or start the agent again)."
        )
        screen = pane.wait(
            lambda text: block in _words(text) and told in _words(text), "the blocked call"
        )
        assert "Allow bash?" not in screen  # no dialog: nothing can approve
    finally:
        pane.close()
        installed.stop_workers()
