"""``coding-agent import``: a pi or Claude Code session continues here, through the real binary.

The fixtures (tests/app/fixtures/session_imports) are written by hand in the shapes pi's
session manager and Claude Code write: tool calls and results, thinking (signed and redacted),
an image, a tool we do not have, a branch, a compaction, a subagent's sidechain. Each import is
then continued with ``-p`` on a faux script whose ``echo`` step answers with the messages the
model was sent: the imported history is what the model reads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coding_agent.session_files.folders import list_sessions
from coding_agent.session_files.index import session_name

BINARY = Path(sys.executable).with_name("coding-agent")
FIXTURES = Path(__file__).parents[1] / "fixtures" / "session_imports"
RECORDED_CWD = "/home/dev/src/shop"


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BINARY), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "shop"
    folder.mkdir()
    return folder


@pytest.fixture
def env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    agent_env["PI_CODING_AGENT_DIR"] = str(tmp_path / "pi")
    return agent_env


def echoed(project: Path, env: dict[str, str], tmp_path: Path, *how: str) -> list[str]:
    """The messages the model is sent when the session is continued with ``how``."""
    script = tmp_path / "echo.json"
    script.write_text(json.dumps([{"echo": True}] * 30))
    done = run(["--faux-script", str(script), "-p", "what next?", *how], project, env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


def importing(project: Path, env: dict[str, str], *args: str) -> tuple[str, str]:
    """Import; returns the new session's id (checked against the printed resume command)
    and what the command printed."""
    done = run(["import", *args], project, env)
    assert done.returncode == 0, done.stderr
    session_id = done.stdout.split(" into session ", 1)[1].split()[0]
    assert f"coding-agent --resume {session_id}\n" in done.stdout
    return session_id, done.stdout


def imported(project: Path, env: dict[str, str], *args: str) -> str:
    """Import; returns the new session's id."""
    return importing(project, env, *args)[0]


def test_a_claude_code_session_continues_with_its_history(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    source = FIXTURES / "claude_tools.jsonl"
    before = source.read_bytes()
    done = run(["import", str(source), "--cwd", str(project)], project, env)
    assert done.returncode == 0, done.stderr
    assert "Imported 6 messages of Claude Code session 7c1f4d2e-" in done.stdout
    assert "2 line(s) of subagents' conversations were left out" in done.stdout
    assert (
        "  it ran on anthropic/claude-opus-4-1 there; here it continues on the model you start "
        "it with (--model provider/id)\n"
    ) in done.stdout
    (session,) = list_sessions(project, env=env)
    assert session.cwd == project
    assert session_name(session) == "Fix the flaky checkout test"  # its summary line
    assert source.read_bytes() == before  # the source is only read
    seen = echoed(project, env, tmp_path, "--continue")
    path = f"{RECORDED_CWD}/tests/test_checkout.py"
    assert seen == [
        # isMeta's /clear note is left out; the image stays an image
        "user: The checkout test is flaky, see the screenshot. [image image/png]",
        "thinking: Look at the test first.",  # three lines of one answer are one message
        "thinking: ",  # redacted: kept, but never sent to a provider (see the export test)
        f'call read {{"path":"{path}","limit":50}}',
        "result read: 1 import time 2 def test_checkout(): 3 time.sleep(0.1)",
        "assistant: It sleeps; I will track this.",
        # a tool we do not have is text, its result a user message after our tools' results
        'assistant: [tool call TodoWrite: {"todos": [{"activeForm": "Removing", "content": '
        '"Remove the sleep", "status": "pending"}]}]',
        f'call edit {{"path":"{path}","edits":[{{"oldText":"    time.sleep(0.1)\\n",'
        '"newText":""}]}',
        "result edit: The file has been updated.",
        "user: [result of TodoWrite: Todos have been modified successfully.]",
        # the rewound answer ("abandoned by a rewind") and the sidechain are not there
        'call bash {"command":"pytest tests/test_checkout.py -q"}',
        "result bash: 1 passed in 0.02s",
        "assistant: The test passes now.",
        "user: what next?",
    ]


def test_imported_thinking_is_never_resent_as_signed(project: Path, env: dict[str, str]) -> None:
    session_id = imported(project, env, str(FIXTURES / "claude_tools.jsonl"), "--cwd", str(project))
    export = run(["export", session_id, "-o", "-", "--format", "jsonl"], project, env)
    assert export.returncode == 0, export.stderr
    entries = [json.loads(line) for line in export.stdout.splitlines()[1:]]
    answer = next(e for e in entries if e["kind"] == "pi.assistant")["model"][0]
    # no provider adapter takes import:* signatures for its own: thinking goes as text or not
    assert answer["api"] == "import:claude-code"
    assert answer["content"][1] == {
        "type": "thinking",
        "thinking": "",
        "signature": "EmwKAhgBEgy3va3pzix",
        "redacted": True,
    }
    assert entries[0]["data"]["imported"]["tool"] == "claude-code"


def test_a_claude_code_compaction_imports_the_summary_and_what_followed(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    session_id, said = importing(
        project, env, str(FIXTURES / "claude_compacted.jsonl"), "--cwd", str(project)
    )
    assert "  Claude Code compacted this session: the summary stands for what came before" in said
    seen = echoed(project, env, tmp_path, "--resume", session_id)
    assert seen[0].startswith("user: This session is being continued from a previous")
    assert seen[1:] == [
        "user: Now run pyright.",
        "assistant: pyright reports 0 errors.",
        "user: what next?",
    ]


def test_a_pi_session_imports_the_branch_it_was_on(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    session_id = imported(
        project, env, str(FIXTURES / "pi_tools_branch.jsonl"), "--cwd", str(project)
    )
    (session,) = list_sessions(project, env=env)
    assert session_name(session) == "CI matrix"  # pi's /name
    assert echoed(project, env, tmp_path, "--resume", session_id) == [
        "user: Which Python does the shop run on?",
        "thinking: Check pyproject.",
        "assistant: Let me check.",
        'call bash {"command":"grep python pyproject.toml"}',
        'result bash: requires-python = ">=3.11"',
        'assistant: [tool call subagent: {"task": "scan the CI files"}]',
        "user: [result of subagent: CI uses 3.12]",
        "assistant: Python 3.11 or newer; CI runs 3.12.",
        # the abandoned branch ("Drop 3.11 support") is left; its summary is read, as in pi
        "user: A summary of a branch this conversation came back from: <summary> The user "
        "considered dropping 3.11 and decided against it. </summary>",
        "user: I ran `python --version`: ``` Python 3.12.4 ```",
        "user: Keep 3.11 and add a 3.13 job.",
        "assistant: Added a 3.13 job to CI.",
        "user: what next?",
    ]


def test_a_pi_compaction_keeps_the_summary_and_the_kept_messages(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    session_id, said = importing(
        project, env, str(FIXTURES / "pi_compacted.jsonl"), "--cwd", str(project)
    )
    assert "  2 message(s) before pi's compaction are imported as its summary" in said
    assert echoed(project, env, tmp_path, "--resume", session_id) == [
        "user: The conversation before this point was compacted into this summary: "
        "<summary> The cart module was split into three functions. </summary>",
        "user: Now the checkout module.",  # from firstKeptEntryId on
        "assistant: Checkout is refactored too.",
        "user: Run the tests.",
        "assistant: All 42 tests pass.",
        "user: what next?",
    ]


def test_a_missing_project_folder_is_named_with_the_way_out(
    project: Path, env: dict[str, str]
) -> None:
    done = run(["import", str(FIXTURES / "pi_tools_branch.jsonl")], project, env)
    assert done.returncode == 2
    assert done.stderr == (
        f"coding-agent: error: the session's project folder {RECORDED_CWD} does not exist "
        "here: import it into another with --cwd FOLDER\n"
    )
    assert list_sessions(None, env=env) == []


def test_a_cut_off_last_line_is_skipped_and_counted(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    source = tmp_path / "cut.jsonl"
    whole = (FIXTURES / "claude_compacted.jsonl").read_bytes()
    source.write_bytes(whole[: whole.rindex(b"pyright reports")])  # mid-line, no newline
    before = source.read_bytes()
    done = run(["import", str(source), "--cwd", str(project)], project, env)
    assert done.returncode == 0, done.stderr
    assert "skipped 1 line(s) that are not whole JSON (the last one was cut off)" in done.stdout
    assert source.read_bytes() == before
    assert echoed(project, env, tmp_path, "--continue")[-2:] == [
        "user: Now run pyright.",
        "user: what next?",
    ]


def test_import_takes_one_of_path_list_latest(project: Path, env: dict[str, str]) -> None:
    for args in ([], ["--list", "--latest"]):
        done = run(["import", *args], project, env)
        assert done.returncode == 2
        assert done.stderr == (
            "coding-agent: error: import takes one of PATH, --list or --latest "
            "(coding-agent import --list shows what can be imported here)\n"
        )
    empty = run(["import", "--list"], project, env)
    assert empty.stdout == f"No pi or Claude Code sessions of {project}\n"
    latest = run(["import", "--latest"], project, env)
    assert latest.returncode == 2
    assert "no pi or Claude Code session of" in latest.stderr


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "pi_future_version.jsonl",
            "pi session format version 9 is not one this agent reads (it reads versions 1, 2, 3)",
        ),
        (
            "claude_future_version.jsonl",
            "written by Claude Code 7.2.0, whose session format this agent does not know (it "
            "reads Claude Code 0.x, 1.x, 2.x)",
        ),
        ("pi_empty.jsonl", "the session has no conversation to import (no message)"),
        ("not_a_session.txt", "not a session file of pi or Claude Code"),
    ],
)
def test_what_cannot_be_imported_is_refused_with_the_reason(
    project: Path, env: dict[str, str], name: str, message: str
) -> None:
    done = run(["import", str(FIXTURES / name), "--cwd", str(project)], project, env)
    assert done.returncode == 2
    assert done.stderr.startswith(f"coding-agent: error: {FIXTURES / name}: {message}")
    assert list_sessions(None, env=env) == []


def test_a_second_import_makes_a_session_and_names_the_first(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    source = tmp_path / "session.jsonl"
    shutil.copy(FIXTURES / "pi_compacted.jsonl", source)
    first = imported(project, env, str(source), "--cwd", str(project))
    done = run(["import", str(source), "--cwd", str(project)], project, env)
    assert done.returncode == 0, done.stderr
    assert f"this file was imported before, unchanged, as {first}\n" in done.stdout
    assert len(list_sessions(project, env=env)) == 2
    with source.open("a") as file:  # pi wrote on: a changed file is a new import
        file.write("\n")
    again = run(["import", str(source), "--cwd", str(project)], project, env)
    assert "imported before" not in again.stdout


def test_list_shows_both_agents_sessions_of_this_folder_and_latest_imports_the_newest(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    pi_folder = (
        tmp_path / "pi" / "sessions" / ("--" + str(project).lstrip("/").replace("/", "-") + "--")
    )
    claude_folder = (
        tmp_path / "claude" / "projects" / "".join(c if c.isalnum() else "-" for c in str(project))
    )
    pi_folder.mkdir(parents=True)
    claude_folder.mkdir(parents=True)
    older = pi_folder / "2026-11-20T09-00-00-000Z_0199a1b2.jsonl"
    newer = claude_folder / "7c1f4d2e-5b6a-4c3d-9e8f-0a1b2c3d4e5f.jsonl"
    shutil.copy(FIXTURES / "pi_tools_branch.jsonl", older)
    shutil.copy(FIXTURES / "claude_compacted.jsonl", newer)
    shutil.copy(FIXTURES / "claude_tools.jsonl", claude_folder / "agent-1a2b3c.jsonl")
    os.utime(older, (1_790_000_000, 1_790_000_000))
    os.utime(newer, (1_790_100_000, 1_790_100_000))
    listing = run(["import", "--list"], project, env)
    assert listing.returncode == 0, listing.stderr
    rows = listing.stdout.splitlines()
    assert len(rows) == 4  # two sessions, two lines each; a subagent's file is not one
    assert rows[0].startswith("claude-code")
    assert rows[0].endswith("   3 messages  Add type hints to the cart module.")
    assert rows[1].strip() == str(newer)
    assert rows[2].startswith("pi ")
    assert rows[2].endswith("   9 messages  Which Python does the shop run on?")
    assert rows[3].strip() == str(older)
    session_id = imported(project, env, "--latest")  # into this folder, which listed it
    (session,) = list_sessions(project, env=env)
    assert session.id == session_id
    assert echoed(project, env, tmp_path, "--continue")[-2:] == [
        "assistant: pyright reports 0 errors.",
        "user: what next?",
    ]
