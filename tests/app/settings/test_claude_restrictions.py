"""Claude Code's restrictive switches in the coding agent: read from every settings file, handed
to the approval feature, and applied end to end.

Before, ``permissions.disableBypassPermissionsMode`` was a note saying ``--permission-mode auto``
was still available, and ``denyInsteadOfPrompting`` and ``blockWritesOutsideWorkingDirectories``
a note that they had no effect: an organisation's safety settings silently did nothing. Real
files in tmp folders; the end-to-end cases run the real binary with ``--faux-script``
(the approval feature's own tables: tests/facets/approval/test_restrictions.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from coding_agent.settings.claude_settings import auto_disabled, restrictions
from coding_agent.settings.permissions import PermissionFiles
from coding_agent.settings.trust import TrustStore, trust_path
from tests.app.settings.conftest import write_json

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120
ALL_ON = {
    "disableBypassPermissionsMode": "disable",
    "denyInsteadOfPrompting": True,
    "blockWritesOutsideWorkingDirectories": True,
}


def test_each_switch_comes_from_any_file_and_none_turns_one_off(
    env: dict[str, str], project: Path
) -> None:
    user = write_json(Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json", {"permissions": ALL_ON})
    local = write_json(
        project / ".claude" / "settings.local.json",
        {  # a project cannot turn them off
            "permissions": {
                "denyInsteadOfPrompting": False,
                "blockWritesOutsideWorkingDirectories": False,
            }
        },
    )
    TrustStore(trust_path(env)).set(project, True)
    files = PermissionFiles(project, env)
    assert files.restrictions() == {key: str(user) for key in ALL_ON}
    problems = files.load()["problems"]
    assert problems == []  # honoured: no notes
    write_json(user, {})
    write_json(local, {"permissions": {"denyInsteadOfPrompting": True}})  # a project turns one on
    assert PermissionFiles(project, env).restrictions() == {"denyInsteadOfPrompting": str(local)}


def test_an_untrusted_projects_switches_apply_and_its_note_says_so(
    env: dict[str, str], project: Path
) -> None:
    path = write_json(
        project / ".claude" / "settings.json",
        {"permissions": {"denyInsteadOfPrompting": True, "allow": ["Bash"]}},
    )
    files = PermissionFiles(project, env)
    assert files.restrictions() == {"denyInsteadOfPrompting": str(path)}
    assert files.load()["rules"] == []  # its allow rule is not read: it is not trusted
    assert files.load()["problems"] == [
        f"{path}: not read, the project is not trusted (/trust to trust it); its "
        "permissions.denyInsteadOfPrompting applies all the same (it only restricts)"
    ]


def test_a_value_of_the_wrong_kind_is_a_note_naming_the_key_and_restricts_nothing(
    env: dict[str, str], project: Path
) -> None:
    user = write_json(
        Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json",
        {
            "permissions": {
                "disableBypassPermissionsMode": True,
                "denyInsteadOfPrompting": "true",
                "blockWritesOutsideWorkingDirectories": 1,
            }
        },
    )
    files = PermissionFiles(project, env)
    assert files.restrictions() == {}
    assert files.load()["problems"] == [
        f'{user}: `permissions.disableBypassPermissionsMode`: must be "disable", got true; it '
        "is ignored, so it restricts nothing (Claude Code skips such a file too)",
        f'{user}: `permissions.denyInsteadOfPrompting`: must be true or false, got "true"; it '
        "is ignored, so it restricts nothing (Claude Code skips such a file too)",
        f"{user}: `permissions.blockWritesOutsideWorkingDirectories`: must be true or false, got "
        "1; it is ignored, so it restricts nothing (Claude Code skips such a file too)",
    ]


def test_the_refusal_of_auto_names_what_asked_for_it_and_the_file() -> None:
    found = restrictions([(Path("/u/settings.json"), {"permissions": ALL_ON})])
    assert auto_disabled(found, "--permission-mode auto") == (
        "--permission-mode auto: the auto permission mode is disabled by "
        "permissions.disableBypassPermissionsMode in /u/settings.json; use ask, accept-edits, "
        "sandbox or plan"
    )
    assert auto_disabled({}, "--permission-mode auto") is None


# -- end to end: the real binary, the faux model -----------------------------------------------
async def _run(
    project: Path, env: dict[str, str], steps: Sequence[object], *args: str
) -> subprocess.CompletedProcess[bytes]:
    script = project.parent / "faux-script.json"
    script.write_text(json.dumps(steps))
    with anyio.fail_after(TIMEOUT):
        return await anyio.run_process(
            [str(BINARY), "--faux-script", str(script), *args],
            env=env, cwd=project, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip


def _sessions(env: dict[str, str]) -> list[Path]:
    folder = Path(env["XDG_STATE_HOME"]) / "coding-agent" / "sessions"
    return sorted(folder.rglob("main.jsonl")) if folder.exists() else []


@pytest.mark.anyio
async def test_permission_mode_auto_is_refused_at_start_when_disabled(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    settings = write_json(
        Path(agent_env["CLAUDE_CONFIG_DIR"]) / "settings.json",
        {"permissions": {"disableBypassPermissionsMode": "disable"}},
    )
    steps = [{"text": "never"}]
    result = await _run(project, agent_env, steps, "-p", "go", "--permission-mode", "auto")
    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr.decode().splitlines() == [
        "coding-agent: error: --permission-mode auto: the auto permission mode is disabled by "
        f"permissions.disableBypassPermissionsMode in {settings}; use ask, accept-edits, sandbox "
        "or plan"
    ]
    assert _sessions(agent_env) == []  # a refused start leaves no session behind
    # config.toml's permission_mode = "auto" (a new session's mode) is refused the same way
    config = tmp_path / "xdg-config"
    (config / "coding-agent").mkdir(parents=True)
    (config / "coding-agent" / "config.toml").write_text('permission_mode = "auto"\n')
    env = {**agent_env, "XDG_CONFIG_HOME": str(config)}
    result = await _run(project, env, steps, "-p", "go")
    assert result.returncode == 2
    (line,) = result.stderr.decode().splitlines()
    assert line.startswith(
        f'coding-agent: error: permission_mode = "auto" ({config / "coding-agent" / "config.toml"}'
    )
    assert f"disabled by permissions.disableBypassPermissionsMode in {settings}" in line
    result = await _run(project, env, [{"text": "fine"}], "-p", "go", "--permission-mode", "ask")
    assert result.returncode == 0, result.stderr.decode()  # another mode starts
    assert result.stdout.decode() == "fine\n"
    shown = (await anyio.run_process([str(BINARY), "config"], env=env, cwd=project)).stdout
    assert "permissions.disableBypassPermissionsMode = on" in shown.decode()
    assert f"# {settings} (Claude Code; a file only turns it on)" in shown.decode()


@pytest.mark.anyio
async def test_approve_allow_is_refused_at_start_when_auto_is_disabled(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    """``--approve allow`` says yes to every call that would ask (credentials and guarded
    files too): the switch disabling ``auto`` must not be passed over by it."""
    settings = write_json(
        Path(agent_env["CLAUDE_CONFIG_DIR"]) / "settings.json",
        {"permissions": {"disableBypassPermissionsMode": "disable"}},
    )
    marker = tmp_path / "ran"
    steps = [{"toolCalls": [{"name": "bash", "arguments": {"command": f"touch {marker}"}}]},
             {"text": "done"}]  # fmt: skip
    result = await _run(project, agent_env, steps, "-p", "go", "--approve", "allow")
    assert result.returncode == 2
    assert not marker.exists()
    assert result.stderr.decode().splitlines() == [
        "coding-agent: error: --approve allow: it runs every call that would ask, as the auto "
        f"permission mode does, and permissions.disableBypassPermissionsMode in {settings} "
        "disables that; allow what the run needs with permission rules (permissions.allow) or "
        "answer each call from another client (--wait-for-approval)"
    ]
    assert _sessions(agent_env) == []
    result = await _run(project, agent_env, steps, "-p", "go", "--approve", "deny")
    assert result.returncode == 3, result.stderr.decode()  # asked, refused: nothing ran
    assert not marker.exists()


@pytest.mark.anyio
async def test_a_call_that_would_ask_is_refused_headless_and_the_turn_goes_on(
    project: Path, agent_env: dict[str, str]
) -> None:
    settings = write_json(
        project / ".claude" / "settings.json", {"permissions": {"denyInsteadOfPrompting": True}}
    )
    steps = [
        {"toolCalls": [{"name": "write", "arguments": {"path": "note.txt", "content": "hi\n"}}]},
        {"text": "carried on"},
    ]
    # --approve allow would answer a dialog; none is opened (and the project is not even trusted)
    result = await _run(project, agent_env, steps, "-p", "go", "--approve", "allow", "--json")
    assert not (project / "note.txt").exists()
    assert result.returncode == 0, result.stderr.decode()
    lines = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert lines[-1]["text"] == "carried on" and "blocked" not in lines[-1]
    assert "write was not run: it needs approval, and permissions.denyInsteadOfPrompting in " \
        f"{settings} refuses such calls instead of asking anyone." in result.stdout.decode()  # fmt: skip


@pytest.mark.anyio
async def test_a_write_outside_the_project_is_refused_even_in_auto(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    write_json(
        Path(agent_env["CLAUDE_CONFIG_DIR"]) / "settings.json",
        {"permissions": {"blockWritesOutsideWorkingDirectories": True}},
    )
    outside = tmp_path / "outside.txt"
    steps = [
        {
            "toolCalls": [
                {"name": "write", "arguments": {"path": str(outside), "content": "x"}},
                {"name": "write", "arguments": {"path": "inside.txt", "content": "y"}},
            ]
        },
        {"text": "done"},
    ]
    result = await _run(project, agent_env, steps, "-p", "go", "--permission-mode", "auto")
    assert result.returncode == 0, result.stderr.decode()
    assert not outside.exists()
    assert (project / "inside.txt").read_text() == "y"


@pytest.mark.anyio
async def test_claude_codes_dont_ask_mode_refuses_what_would_ask(
    project: Path, agent_env: dict[str, str]
) -> None:
    """``"defaultMode": "dontAsk"`` (Claude Code: anything that would prompt is denied) is the
    denyInsteadOfPrompting switch here, from any file, with no note; ``--approve allow`` would
    have answered a dialog."""
    settings = write_json(
        project / ".claude" / "settings.json", {"permissions": {"defaultMode": "dontAsk"}}
    )
    steps = [
        {"toolCalls": [{"name": "write", "arguments": {"path": "note.txt", "content": "hi\n"}}]},
        {"text": "carried on"},
    ]
    result = await _run(project, agent_env, steps, "-p", "go", "--approve", "allow", "--json")
    assert not (project / "note.txt").exists()
    assert result.returncode == 0, result.stderr.decode()
    assert "write was not run: it needs approval, and permissions.denyInsteadOfPrompting in " \
        f"{settings} (permissions.defaultMode: dontAsk) refuses such calls" in result.stdout.decode()  # fmt: skip


def test_manual_is_default_and_claude_codes_auto_mode_is_not_this_agents(
    env: dict[str, str], project: Path
) -> None:
    from coding_agent.settings.claude_settings import default_mode

    user = Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json"
    assert default_mode((user, "manual"), [], None) == ("ask", str(user))
    assert default_mode((user, "auto"), [], None) is None  # never this agent's auto
    write_json(user, {"permissions": {"defaultMode": "auto"}})
    (note,) = PermissionFiles(project, env).load()["problems"]
    assert note == (
        f"{user}: `permissions.defaultMode`: Claude Code's auto mode (a classifier reviews calls) "
        "has no counterpart here; this agent's own auto mode runs every call unasked, so it is "
        "not taken and calls ask — for fewer questions with confinement use --permission-mode "
        "sandbox or accept-edits"
    )
    write_json(user, {"permissions": {"defaultMode": "manual"}})
    assert PermissionFiles(project, env).load()["problems"] == []
