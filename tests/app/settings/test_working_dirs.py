"""The working directories' settings (coding_agent.worker.working_dirs): which files add folders
(your own only), which refuse reads outside (any), the notes and errors naming the file, and the
agent's own files, which a read never asks about."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from coding_agent.session_files.folders import LaunchSettings, create_session
from coding_agent.settings.config import ConfigError, load_config
from coding_agent.settings.permissions import PermissionFiles
from coding_agent.settings.trust import TrustStore, trust_path
from coding_agent.worker.main import session_worker_config
from coding_agent.worker.working_dirs import WorkingDirectories, agent_files
from facets_approval.workdirs import read_outside, working_directories


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def folder(path: Path) -> str:
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


def test_only_your_own_files_add_folders_and_any_file_may_refuse_reads_outside(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    notes, docs, shared = (folder(tmp_path / n) for n in ("notes", "docs", "shared"))
    claude = Path(env["CLAUDE_CONFIG_DIR"])
    user = write(claude / "settings.json", json.dumps({
        "permissions": {"additionalDirectories": [notes, "~/gone"]}}))  # fmt: skip
    write(Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml",
          f'[permissions]\nadditional_directories = ["{docs}"]\n')  # fmt: skip
    local = write(project / ".claude" / "settings.local.json", json.dumps({
        "permissions": {"additionalDirectories": [shared],
                        "blockReadsOutsideWorkingDirectories": True}}))  # fmt: skip
    files = PermissionFiles(project, env)
    assert files.working_directories().added == (docs, notes)  # the project file's is not read
    # Claude Code's switch is one of the restrictive ones: read even from an untrusted project
    assert files.restrictions()["blockReadsOutsideWorkingDirectories"] == str(local)
    assert files.working_directories().block_reads_outside is False  # config.toml's switch
    problems = files.load()["problems"]
    assert f"{user}: `permissions.additionalDirectories`: ~/gone is not a folder; its reads " \
        "still ask (create it, or remove it from the list)" in problems  # fmt: skip
    TrustStore(trust_path(env)).set(project, True)
    files = PermissionFiles(project, env)
    assert files.working_directories().added == (docs, notes)  # trusted: still not from it
    (note,) = [p for p in files.load()["problems"] if p.startswith(str(local))]
    assert note.startswith(f"{local}: `permissions.additionalDirectories`: not taken from a "
                           "project's settings (a cloned repository could add ~")  # fmt: skip
    assert "~/.claude/settings.json" in note and "--add-dir" in note  # where to put it


def test_config_toml_refuses_a_projects_folders_and_a_missing_one(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    user = write(Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml",
                 '[permissions]\nadditional_directories = ["~/nowhere"]\n')  # fmt: skip
    with pytest.raises(ConfigError, match=r"config.toml:2: .*~/nowhere is not a folder"):
        load_config(project, env=env)
    write(user, '[permissions]\nadditional_directories = ["relative/dir"]\n')
    with pytest.raises(ConfigError, match=r"'relative/dir' is not an absolute path"):
        load_config(project, env=env)
    folder(Path(env["HOME"]) / "notes")
    write(user, '[permissions]\nadditional_directories = ["~/notes"]\n'
          "block_reads_outside_working_directories = true\n")  # fmt: skip
    load_config(project, env=env)  # fine
    write(project / ".coding-agent" / "config.toml",
          f'[permissions]\nadditional_directories = ["{tmp_path}"]\n')  # fmt: skip
    with pytest.raises(ConfigError, match=r"only your own config\.toml may add working dir"):
        load_config(project, env=env, trusted=True)


def test_a_stored_add_dir_since_removed_does_not_count_and_does_not_stop_the_start(
    env: dict[str, str], project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    gone = folder(tmp_path / "gone")
    session = create_session(project, settings=LaunchSettings(add_dirs=(gone,)))
    assert session_worker_config(session, env=env).add_dirs == (gone,)
    assert session.settings.gone_add_dirs() == []
    os.rmdir(gone)
    assert session_worker_config(session, env=env).add_dirs == ()  # the worker starts without it
    assert session.settings.gone_add_dirs() == [
        f"--add-dir {gone} (kept with this session) is no longer a folder: it does not count "
        "until it is back, so reads there ask (/add-dir lists the folders)"
    ]
    os.mkdir(gone)
    assert session_worker_config(session, env=env).add_dirs == (gone,)  # back: it counts again


def test_the_agents_own_files_do_not_ask_and_the_rest_of_home_does(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    home = Path(env["HOME"])
    session_path = tmp_path / "state" / "sessions" / "s1"
    skill = write(Path(env["CLAUDE_CONFIG_DIR"]) / "skills" / "pdf" / "SKILL.md", "x")
    write(Path(env["CLAUDE_CONFIG_DIR"]) / "CLAUDE.md", "See @~/notes/style.md\n")
    write(home / "notes" / "style.md", "Use tabs.\n")  # your memory imports it
    plugin = tmp_path / "plugins" / "demo"  # an enabled Claude Code plugin, installed anywhere
    write(plugin / "skills" / "lint" / "SKILL.md", "x")
    write(Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json",
          json.dumps({"enabledPlugins": {"demo@market": True}}))  # fmt: skip
    write(Path(env["CLAUDE_CONFIG_DIR"]) / "plugins" / "installed_plugins.json",
          json.dumps({"version": 2, "plugins": {"demo@market": [
              {"scope": "user", "installPath": str(plugin)}]}}))  # fmt: skip
    own = [
        session_path / "spill" / "coding-agent-bash-1.log",  # bash's "Full output: <path>"
        Path(tempfile.gettempdir()) / "coding-agent-acp-x" / "out.log",  # its temporary files
        skill,
        Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "prompts" / "review.md",
        Path(env["CLAUDE_CONFIG_DIR"]) / "commands" / "fix.md",  # prompt templates
        Path(env["CLAUDE_CONFIG_DIR"]) / "agents" / "reviewer.md",  # subagent definitions
        home / ".claude" / "agents" / "reviewer.md",
        Path(env["CLAUDE_CONFIG_DIR"]) / "CLAUDE.md",  # context files
        home / ".pi" / "agent" / "AGENTS.md",
        tmp_path / "CLAUDE.md",  # a folder above the project
        home / "notes" / "style.md",
        plugin / "skills" / "lint" / "SKILL.md",  # a plugin's skill
        plugin / "skills" / "lint" / "scripts" / "run.sh",  # what its SKILL.md points at
    ]
    service = WorkingDirectories([], agent_files(project, env, session_path),
                                 PermissionFiles(project, env))  # fmt: skip
    dirs = working_directories(str(project), {"working_directories": service})
    for path in own:
        assert read_outside("read", {"path": str(path)}, dirs, str(home)) is None, path
    keys = [  # the configuration files may hold keys (api_key, env): reading them asks
        Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml",
        Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json",
    ]
    for path in (home / "notes.txt", home / "notes" / "x", Path(env["CLAUDE_CONFIG_DIR"]), *keys):
        assert read_outside("read", {"path": str(path)}, dirs, str(home)) is not None, path
    assert read_outside("grep", {"path": str(tmp_path)}, dirs, str(home)) is not None


def test_a_trusted_projects_prompt_folder_linking_outside_is_not_an_own_file(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    """A cloned repository (trusted after a glance) links its skill and prompt folders to your
    home and your configuration: as the agent's own files, reading your keys would not ask."""
    home = Path(env["HOME"])
    config = write(Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml",
                   '[providers.openai]\napi_key = "sk-secret"\n')  # fmt: skip
    write(home / ".bash_history", "export TOKEN=secret\n")
    (project / ".claude").mkdir()
    (project / ".claude" / "skills").symlink_to(config.parent)
    (project / ".claude" / "commands").symlink_to(home)
    write(project / ".pi" / "settings.json", json.dumps({"skills": ["linked"]}))
    (project / ".pi" / "linked").symlink_to(tmp_path)
    write(project / ".agents" / "skills" / "lint" / "SKILL.md", "x")  # a real one stays own
    (tmp_path / "AGENTS.md").symlink_to(config.parent)  # above the project (an unpacked archive)
    TrustStore(trust_path(env)).set(project, True)
    session_path = tmp_path / "state" / "sessions" / "s1"
    own = agent_files(project / "sub", env, session_path)
    service = WorkingDirectories([], own, PermissionFiles(project, env))
    dirs = working_directories(str(project / "sub"), {"working_directories": service})
    for path in (config, home / ".bash_history", project / ".claude" / "skills" / "config.toml"):
        assert read_outside("read", {"path": str(path)}, dirs, str(home)) is not None, path
    skill = project / ".agents" / "skills" / "lint" / "SKILL.md"
    assert read_outside("read", {"path": str(skill)}, dirs, str(home)) is None


def test_config_names_no_file_as_the_source_of_no_working_directory(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    """A fresh home: ``coding-agent config`` said the (empty) list came from "your config.toml
    and ~/.claude/settings.json", files that do not exist; it is the default, with how to add."""
    import subprocess
    import sys

    binary = Path(sys.executable).with_name("coding-agent")
    run_env = {**os.environ, **env}

    def line() -> str:
        done = subprocess.run(
            [str(binary), "config"], cwd=project, env=run_env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return next(
            " ".join(row.split())
            for row in done.stdout.splitlines()
            if row.startswith("permissions.additional_directories")
        )

    assert line().startswith("permissions.additional_directories = [] # default (--add-dir,")
    notes = folder(tmp_path / "notes")
    write(
        Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml",
        f'[permissions]\nadditional_directories = ["{notes}"]\n',
    )
    assert line() == (
        f"permissions.additional_directories = ['{notes}'] # your config.toml and "
        "~/.claude/settings.json (--add-dir and /add-dir add more)"
    )
