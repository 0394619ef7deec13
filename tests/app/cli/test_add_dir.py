"""``--add-dir`` through the real binary: a headless read of a file outside the project is
refused (nobody can approve it) without it and runs with it; a missing folder, or the flag where
no session starts, is one line; ``block_reads_outside_working_directories`` refuses the read even
in auto mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from coding_agent.session_files.folders import list_sessions

BINARY = Path(sys.executable).with_name("coding-agent")
SECRET = "OUTSIDE-CONTENT-42"


@pytest.fixture
def setup(tmp_path: Path, agent_env: dict[str, str]) -> tuple[Path, Path, Path, dict[str, str]]:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "notes.txt").write_text(SECRET + "\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"text": "Reading.",
         "toolCalls": [{"name": "read", "arguments": {"path": str(outside / "notes.txt")}}]},
        {"text": "Read it."},
    ]))  # fmt: skip
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}  # no config.toml of yours
    return project, outside, script, env


def run(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BINARY), *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip


def test_a_headless_read_outside_the_project_needs_add_dir(
    setup: tuple[Path, Path, Path, dict[str, str]],
) -> None:
    project, outside, script, env = setup
    refused = run(project, env, "--faux-script", str(script), "-p", "read it")
    assert refused.returncode == 3, refused.stderr  # blocked for lack of approval
    assert f"outside the working directories ({project})" in refused.stderr
    assert f"--add-dir {outside}" in refused.stderr
    assert "allow it with --approve allow or --permission-mode auto (or --add-dir" in refused.stderr
    allowed = run(project, env, "--faux-script", str(script), "--add-dir", str(outside),
                  "--json", "read it")  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    assert SECRET in allowed.stdout  # the tool result in the event stream


def test_a_missing_folder_or_a_session_started_elsewhere_is_one_line(
    setup: tuple[Path, Path, Path, dict[str, str]],
) -> None:
    project, outside, _script, env = setup
    missing = run(project, env, "--add-dir", str(outside / "nope"), "-p", "go")
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [
        f"coding-agent: error: --add-dir {outside / 'nope'}: no such folder "
        "(see coding-agent --help)"
    ]
    for command in (["acp"], ["serve"], ["attach"]):
        refused = run(project, env, "--add-dir", str(outside), *command)
        assert refused.returncode == 2
        assert refused.stderr.startswith(
            "coding-agent: error: --add-dir is for a session started here"
        )
        assert "permissions.additionalDirectories" in refused.stderr


def test_block_reads_outside_refuses_the_read_even_in_auto_mode(
    setup: tuple[Path, Path, Path, dict[str, str]],
) -> None:
    project, outside, script, env = setup
    config = Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[permissions]\nblock_reads_outside_working_directories = true\n")
    shown = run(project, env, "config")
    assert "permissions.block_reads_outside_working_directories = True" in shown.stdout
    done = run(project, env, "--faux-script", str(script), "--permission-mode", "auto",
               "--json", "read it")  # fmt: skip
    assert SECRET not in done.stdout
    assert "blockReadsOutsideWorkingDirectories refuses reads there" in done.stdout
    assert f"--add-dir {outside}" in done.stdout
    added = run(project, env, "--faux-script", str(script), "--permission-mode", "auto",
                "--add-dir", str(outside), "--json", "read it")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert SECRET in added.stdout


def test_the_agents_own_files_are_read_headless_without_add_dir(
    setup: tuple[Path, Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    """What the agent itself tells the model to read outside the project: a skill's file (the
    system prompt lists it), a prompt template, a context file above the project."""
    project, _outside, script, env = setup
    claude = Path(env["CLAUDE_CONFIG_DIR"])
    own = {
        "skill": claude / "skills" / "pdf" / "SKILL.md",
        "template": Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "prompts" / "review.md",
        "context": tmp_path / "CLAUDE.md",  # the folder above the project
    }
    calls = []
    for name, path in own.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\nname: pdf\ndescription: d\n---\nOWN-{name.upper()}\n")
        calls.append({"name": "read", "arguments": {"path": str(path)}})
    script.write_text(json.dumps([{"text": "Reading.", "toolCalls": calls}, {"text": "Read."}]))
    done = run(project, env, "--faux-script", str(script), "--json", "read them")
    assert done.returncode == 0, done.stderr
    for name in own:
        assert f"OWN-{name.upper()}" in done.stdout


def test_a_later_add_dir_adds_to_the_stored_ones(
    setup: tuple[Path, Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    project, outside, script, env = setup
    other = tmp_path / "other"
    other.mkdir()
    steps = json.loads(script.read_text())
    script.write_text(json.dumps([*steps, *steps]))  # the continued run answers on from step 3
    first = run(project, env, "--faux-script", str(script), "--add-dir", str(other), "-p", "go")
    assert first.returncode == 3, first.stderr  # the read is outside both
    assert f"outside the working directories ({project}, {other})" in first.stderr
    again = run(project, env, "--continue", "--add-dir", str(outside), "--json", "go")
    assert again.returncode == 0, again.stderr
    assert SECRET in again.stdout
    (session,) = list_sessions(project, env=env)
    assert session.settings.add_dirs == (str(other), str(outside))


def test_a_stored_folder_removed_since_does_not_stop_the_session_and_counts_once_back(
    setup: tuple[Path, Path, Path, dict[str, str]],
) -> None:
    """A folder added with ``--add-dir`` and deleted later (a temporary folder, an unmounted
    drive) used to stop every later start of the session; now the session goes on without it,
    each start says so, and it counts again once it is back."""
    project, outside, script, env = setup
    read = {"name": "read", "arguments": {"path": str(outside / "notes.txt")}}
    script.write_text(json.dumps([  # step n answers the request that holds n answers
        {"text": "Reading.", "toolCalls": [read]}, {"text": "Read it."},
        {"text": "Going on."},
        {"text": "Reading again.", "toolCalls": [read]}, {"text": "Read it again."},
    ]))  # fmt: skip
    first = run(project, env, "--faux-script", str(script), "--add-dir", str(outside),
                "--json", "read it")  # fmt: skip
    assert first.returncode == 0, first.stderr
    kept = outside.with_name("kept-aside")
    outside.rename(kept)
    gone = run(project, env, "--faux-script", str(script), "--continue", "-p", "go on")
    assert gone.returncode != 2, gone.stderr  # not a start-up error any more
    assert (
        f"coding-agent: warning: --add-dir {outside} (kept with this session) is no longer a "
        "folder: it does not count until it is back, so reads there ask"
    ) in gone.stderr
    kept.rename(outside)
    back = run(project, env, "--faux-script", str(script), "--continue", "--json", "read it")
    assert back.returncode == 0, back.stderr
    assert "no longer a folder" not in back.stderr
    assert SECRET in back.stdout  # read without asking: a working directory again
    (session,) = list_sessions(project, env=env)
    assert session.settings.add_dirs == (str(outside),)  # stored all along
