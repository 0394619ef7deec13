"""``@file`` in a ``-p``/``--json`` prompt is attached as the TUI attaches it (the file's text in a
fence, a folder's entries, one line saying why not), through the real binary; the export shows
the attachment's mark, not its text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from coding_agent.session_files.folders import list_sessions

BINARY = Path(sys.executable).with_name("coding-agent")


def _run(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    script = project.parent / "faux-script.json"
    script.write_text(json.dumps([{"text": "Read it."}]))
    return subprocess.run(
        [str(BINARY), "--faux-script", str(script), *args], cwd=project, env=env,
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _user_content(stdout: str) -> Any:
    lines = [json.loads(line) for line in stdout.splitlines()]
    (user,) = [
        line["entry"] for line in lines
        if line["type"] == "entry.added" and line["entry"]["kind"] == "pi.user"
    ]  # fmt: skip
    assert lines[-1]["ok"] is True, lines[-1]
    return user["model"][0]["content"]


def test_a_mentioned_file_and_folder_reach_the_model_and_a_missing_one_is_named(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("print('hello')\nx = 1\ny = 2\n")
    prompt = "Explain @src/app.py and @src/ but not @src/nope.py, thanks @alice"
    done = _run(project, agent_env, "--json", prompt)
    assert done.returncode == 0, done.stderr
    content = _user_content(done.stdout)
    assert [block["text"] for block in content] == [
        prompt,  # the prompt as typed, then one block per mention, in order
        "[📎 src/app.py (3 lines)]\nsrc/app.py:\n```\nprint('hello')\nx = 1\ny = 2\n```\n",
        "[📎 src/ (1 entry)]\nsrc/:\n```\napp.py\n```\n",
        "[📎 src/nope.py: no such file or folder, not attached]",
    ]
    # A prompt that mentions no file is sent as a string, as before.
    plain = _run(project, agent_env, "--json", "mail @alice about it")
    assert plain.returncode == 0, plain.stderr
    assert _user_content(plain.stdout) == "mail @alice about it"


def test_p_with_a_missing_file_still_runs_and_the_export_shows_the_marks(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.md").write_text("SECRET-LOOKING BODY <b>\n")
    done = _run(project, agent_env, "-p", "Summarise @notes.md and @gone.md")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Read it.\n"
    (session,) = list_sessions(project, env=agent_env)
    page = subprocess.run(
        [str(BINARY), "export", session.id, "-o", "-"], cwd=project, env=agent_env,
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert page.returncode == 0, page.stderr
    assert "Summarise @notes.md and @gone.md" in page.stdout
    assert '<p class="attachment">📎 notes.md (1 line)</p>' in page.stdout
    assert (
        '<p class="attachment">📎 gone.md: no such file or folder, not attached</p>' in page.stdout
    )
    assert "SECRET-LOOKING BODY" not in page.stdout  # the mark, not the file's text


def test_the_session_list_shows_the_prompt_as_typed_not_the_attached_file(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.md").write_text("the secret recipe\n")
    done = _run(project, agent_env, "-p", "summarise @notes.md")
    assert done.returncode == 0, done.stderr
    listed = subprocess.run(
        [str(BINARY), "sessions"], cwd=project, env=agent_env, capture_output=True, text=True,
        timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "summarise @notes.md" in listed.stdout
    assert "secret recipe" not in listed.stdout and "📎" not in listed.stdout


def test_pis_file_arguments_before_the_message_are_mentions_in_it(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """pi's ``pi -p @code.ts @test.ts "Review these files"``: each ``@file`` word joins the
    prompt as a mention (was: 'one prompt, given 3')."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "code.py").write_text("x = 1\n")
    (project / "test_code.py").write_text("assert x\n")
    done = _run(project, agent_env, "--json", "@code.py", "@test_code.py", "Review these files")
    assert done.returncode == 0, done.stderr
    assert [block["text"] for block in _user_content(done.stdout)] == [
        "@code.py @test_code.py Review these files",
        "[📎 code.py (1 line)]\ncode.py:\n```\nx = 1\n```\n",
        "[📎 test_code.py (1 line)]\ntest_code.py:\n```\nassert x\n```\n",
    ]
