"""Claude Code's settings.json keys this agent does not honour are said so, once, naming the file
and the key (issue: the probe's ``defaultMode``, ``env`` and ``sandbox.enabled`` dropped without a
word); ``permissions.defaultMode`` is honoured from the user's own file, and from a project's only
when it makes the mode stricter. Real files in tmp folders; the end-to-end cases run the real
binary with ``--faux-script``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from coding_agent.settings import claude_settings
from coding_agent.settings.permissions import PermissionFiles
from coding_agent.settings.trust import TrustStore, trust_path
from tests.app.settings.conftest import write_json

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120

# Anthropic's published examples (examples/settings in anthropics/claude-code), abridged.
BASH_SANDBOX = {
    "permissions": {"disableBypassPermissionsMode": "disable", "ask": ["Bash(git push:*)"]},
    "sandbox": {"enabled": True, "autoAllowBashIfSandboxed": False, "network": {}},
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
}
PROBE = {
    "permissions": {"defaultMode": "acceptEdits", "allow": ["Bash(git diff:*)"]},
    "env": {"PROBE": "hello"},
    "hooks": {},
    "disableAllHooks": True,
    "enableAllProjectMcpServers": True,
    "statusLine": {"type": "command", "command": "echo hi"},
}


def keys_noted(problems: list[str], path: Path) -> list[str]:
    return [p.removeprefix(f"{path}: ").split(":")[0] for p in problems if p.startswith(f"{path}:")]


def test_every_key_not_honoured_is_one_note_naming_the_file_and_the_key(
    env: dict[str, str], project: Path
) -> None:
    user = write_json(Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json", BASH_SANDBOX)
    local = write_json(project / ".claude" / "settings.local.json", PROBE)
    TrustStore(trust_path(env)).set(project, True)
    problems = PermissionFiles(project, env).load()["problems"]
    assert keys_noted(problems, user) == ["`sandbox.enabled`"]  # disableBypass… is honoured
    assert f"{user}: `sandbox.enabled`: this agent does not read Claude Code's sandbox settings; " \
        "bash is NOT sandboxed by it — use [sandbox] enabled = true in config.toml or " \
        "--permission-mode sandbox" in problems  # fmt: skip
    # hooks (facets-hooks) and permissions.allow are read; $schema is an editor's hint
    assert keys_noted(problems, local) == [
        "`permissions.defaultMode`",  # a project may not loosen the mode
        "`env`",
        "`disableAllHooks`",
        "`enableAllProjectMcpServers`",
        "`statusLine`",
    ]
    assert any("the variables are NOT set" in p for p in problems)
    assert any("the hooks in these files still run" in p for p in problems)
    assert len(problems) == len(set(problems)) == 6
    # the sandbox's note names the key even when the sandbox is off in the file
    write_json(user, {"sandbox": {"enabled": False}})
    assert keys_noted(PermissionFiles(project, env).load()["problems"], user) == ["`sandbox`"]


def test_a_late_2026_setups_keys_get_precise_notes_or_none_when_already_so(
    env: dict[str, str], project: Path
) -> None:
    user = write_json(
        Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json",
        {
            "outputStyle": "Explanatory",
            "statusLine": {"type": "command", "command": "~/.claude/statusline.sh"},
            "includeCoAuthoredBy": False,  # this agent adds none anyway
            "attribution": {"commit": "", "pr": ""},  # likewise
            "respectGitignore": True,  # what grep, find, ls and @ do here
            "cleanupPeriodDays": 30,
            "spinnerTipsEnabled": False,
            "language": "french",
        },
    )
    problems = PermissionFiles(project, env).load()["problems"]
    assert keys_noted(problems, user) == [
        "`outputStyle`",
        "`statusLine`",
        "`cleanupPeriodDays`",
        "`spinnerTipsEnabled`",
        "`language`",
    ]
    text = "\n".join(problems)
    assert "put the style's instructions in APPEND_SYSTEM.md" in text
    assert "its footer shows the model, the context used and the cost" in text
    assert "never deletes old sessions by itself" in text
    assert "`spinnerTipsEnabled`: a Claude Code setting this agent does not read" in text
    write_json(user, {"respectGitignore": False, "attribution": {"commit": "Made with AI"}})
    problems = PermissionFiles(project, env).load()["problems"]
    assert keys_noted(problems, user) == ["`respectGitignore`", "`attribution`"]
    assert "always skip .gitignored files" in "\n".join(problems)


def test_enabled_plugins_is_honoured_and_extra_marketplaces_is_a_note(
    env: dict[str, str], project: Path
) -> None:
    user = write_json(
        Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json",
        {
            "enabledPlugins": {"commit-commands@claude-plugins-official": True},
            "extraKnownMarketplaces": {"team": {"source": {"source": "github", "repo": "o/r"}}},
        },
    )
    problems = PermissionFiles(project, env).load()["problems"]
    assert problems == [
        f"{user}: `extraKnownMarketplaces`: this agent does not install plugins; a plugin "
        "Claude Code installed from a marketplace loads here when enabledPlugins turns it on"
    ]


def test_claude_md_excludes_is_honoured_and_a_value_of_another_shape_is_a_note(
    env: dict[str, str], project: Path
) -> None:
    user = write_json(
        Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json",
        {"claudeMdExcludes": ["**/packages/legacy-*/**"]},
    )
    assert PermissionFiles(project, env).load()["problems"] == []
    write_json(user, {"claudeMdExcludes": "**/packages/legacy-*/**"})  # one text, not a list
    assert PermissionFiles(project, env).load()["problems"] == [
        f"{user}: `claudeMdExcludes`: must be a list of glob patterns "
        '(["**/packages/legacy/**", "/abs/path/CLAUDE.md"]); it excludes nothing, so every '
        "CLAUDE.md and rule file is read"
    ]


def test_claude_md_excludes_in_settings_flag_is_a_note_saying_it_is_not_taken() -> None:
    notes = claude_settings.flag_notes(
        "--settings (JSON)", {"claudeMdExcludes": ["**/legacy/**"], "enabledPlugins": {}}
    )
    assert notes == [
        "--settings (JSON): `enabledPlugins`: not taken from --settings; plugins load when "
        "~/.claude/settings.json enables them",
        "--settings (JSON): `claudeMdExcludes`: not taken from --settings; every CLAUDE.md and "
        "rule file is read — put the patterns in ~/.claude/settings.json or the project's "
        ".claude/settings.local.json",
    ]


def test_auto_memory_keys_are_honoured_and_a_projects_folder_is_a_note(
    env: dict[str, str], project: Path
) -> None:
    user = write_json(
        Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json",
        {"autoMemoryEnabled": True, "autoMemoryDirectory": "~/notes/claude"},
    )
    local = write_json(
        project / ".claude" / "settings.local.json",
        {"autoMemoryEnabled": "no", "autoMemoryDirectory": "~/.ssh"},
    )
    TrustStore(trust_path(env)).set(project, True)
    problems = PermissionFiles(project, env).load()["problems"]
    assert keys_noted(problems, user) == []
    assert [p for p in problems if p.startswith(f"{local}:")] == [
        f"{local}: `autoMemoryEnabled`: must be true or false; Claude Code's auto memory is read "
        "as if it were true",
        f"{local}: `autoMemoryDirectory`: not taken from a project's settings (a cloned "
        "repository could point it at any file of yours to have it read into the prompt); put "
        "it in ~/.claude/settings.json",
    ]


def test_an_untrusted_projects_keys_are_not_read_so_not_noted(
    env: dict[str, str], project: Path
) -> None:
    path = write_json(project / ".claude" / "settings.json", PROBE)
    problems = PermissionFiles(project, env).load()["problems"]
    assert problems == [f"{path}: not read, the project is not trusted (/trust to trust it)"]


def test_default_mode_maps_claude_codes_names_and_projects_only_tighten(tmp_path: Path) -> None:
    user, proj = tmp_path / "user.json", tmp_path / "proj.json"
    mode = claude_settings.default_mode
    assert mode((user, "acceptEdits"), [], None) == ("accept-edits", str(user))
    assert mode((user, "plan"), [], None) == ("plan", str(user))
    assert mode((user, "acceptEdits"), [], "auto") is None  # config.toml's permission_mode wins
    assert mode((user, "bypassPermissions"), [], None) is None  # never from a settings file
    assert mode(None, [(proj, "acceptEdits")], None) is None  # a project cannot loosen
    assert mode((user, "acceptEdits"), [(proj, "default")], None) == ("ask", str(proj))
    assert mode(None, [(proj, "plan")], "auto") == ("plan", str(proj))
    assert mode((user, "default"), [(proj, "default")], None) == ("ask", str(user))  # no tighter


def test_the_strictness_order_is_the_approval_contracts() -> None:
    from facets_approval.contract import STRICTEST_FIRST

    assert claude_settings.STRICTEST_FIRST == STRICTEST_FIRST


async def _run(
    project: Path, env: dict[str, str], steps: list[object], *args: str
) -> subprocess.CompletedProcess[bytes]:
    script = project.parent / "faux-script.json"
    script.write_text(json.dumps(steps))
    with anyio.fail_after(TIMEOUT):
        return await anyio.run_process(
            [str(BINARY), "--faux-script", str(script), *args],
            env=env, cwd=project, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip


WRITE = [
    {"toolCalls": [{"name": "write", "arguments": {"path": "note.txt", "content": "hi\n"}}]},
    {"text": "done"},
]


@pytest.mark.anyio
async def test_the_users_accept_edits_lets_a_headless_write_run_and_the_notes_reach_stderr(
    project: Path, agent_env: dict[str, str]
) -> None:
    claude = Path(agent_env["CLAUDE_CONFIG_DIR"])
    published = {**BASH_SANDBOX, "permissions": {"defaultMode": "acceptEdits"}}
    write_json(claude / "settings.json", published)
    result = await _run(project, agent_env, WRITE, "-p", "go")
    assert result.returncode == 0, result.stderr.decode()
    assert (project / "note.txt").read_text() == "hi\n"
    stderr = result.stderr.decode()
    assert stderr.count("`sandbox.enabled`: this agent does not read Claude Code's sandbox") == 1
    assert f"{claude / 'settings.json'}: `sandbox.enabled`" in stderr


@pytest.mark.anyio
async def test_a_projects_plan_mode_tightens_and_its_accept_edits_does_not_loosen(
    project: Path, agent_env: dict[str, str]
) -> None:
    settings = write_json(
        project / ".claude" / "settings.json", {"permissions": {"defaultMode": "acceptEdits"}}
    )
    result = await _run(project, agent_env, WRITE, "--trust", "-p", "go")
    assert not (project / "note.txt").exists()  # still asks, and -p asks nobody
    assert (
        f"{settings}: `permissions.defaultMode`: 'acceptEdits' is not taken"
        in result.stderr.decode()
    )
    write_json(
        Path(agent_env["CLAUDE_CONFIG_DIR"]) / "settings.json",
        {"permissions": {"defaultMode": "acceptEdits"}},
    )
    write_json(settings, {"permissions": {"defaultMode": "plan"}})
    result = await _run(project, agent_env, WRITE, "-p", "go", "--approve", "allow")
    assert not (project / "note.txt").exists()  # plan: read-only, whatever --approve says
    config = (await anyio.run_process([str(BINARY), "config"], env=agent_env, cwd=project)).stdout
    assert f"# {settings} (permissions.defaultMode)" in config.decode()
    assert "permission_mode = plan" in config.decode()


@pytest.mark.anyio
async def test_config_names_the_claude_code_settings_it_read_among_the_files_read(
    project: Path, agent_env: dict[str, str]
) -> None:
    """A Claude Code user's first ``coding-agent config``: its rules are listed from
    ~/.claude/settings.json, so its first line says that file was read, not ``none``."""
    mine = write_json(
        Path(agent_env["CLAUDE_CONFIG_DIR"]) / "settings.json",
        {"permissions": {"allow": ["Bash(git status)"]}, "model": "opus"},
    )
    result = await anyio.run_process([str(BINARY), "config"], env=agent_env, cwd=project)
    lines = result.stdout.decode().splitlines()
    assert lines[0] == f"# files read: {mine}", lines[:3]
    assert any(line.startswith("permissions.allow = Bash(git status)") for line in lines)
