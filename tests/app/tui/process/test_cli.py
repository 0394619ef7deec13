"""The command line: which session each mode picks, headless delegation, and clear usage errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from coding_agent.cli.main import build_parser, main, pick_session, prebuild_parser
from coding_agent.session_files.folders import create_session, list_sessions
from coding_agent.supervisor import worker_command


@pytest.fixture
def in_project(project: Path, agent_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run ``main`` in the project folder with the test's state home and no provider keys."""
    monkeypatch.chdir(project)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", agent_env["XDG_STATE_HOME"])
    return project


def test_the_parser_knows_every_mode() -> None:
    parser = build_parser()
    default = parser.parse_args([])
    assert default.command is None and not default.continue_ and default.resume is None
    assert parser.parse_args(["--resume"]).resume == ""
    assert parser.parse_args(["--resume", "2026"]).resume == "2026"
    attach = parser.parse_args(["attach", "abc"])
    assert attach.command == "attach" and attach.session == "abc"
    options = parser.parse_args(
        ["--model", "openai/gpt-4o", "--dev", "--facets-dir", "a", "--facets-dir", "b"]
    )
    assert options.model == "openai/gpt-4o" and options.dev and options.facets_dir == ["a", "b"]


def test_a_prebuilt_parser_serves_the_next_command_line_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What the warm start's server does before it forks: the next ``main`` (the child's)
    parses with the parser built before, and the one after builds its own."""
    prebuild_parser().epilog = "the prebuilt parser"
    for expected in (True, False):
        with pytest.raises(SystemExit) as exited:
            main(["--help"])
        assert exited.value.code == 0
        printed = capsys.readouterr().out
        assert printed.startswith("usage: coding-agent")
        assert ("the prebuilt parser" in printed) is expected


_HEAVY = ("textual", "openai", "anthropic", "jsonschema", "pico3", "chord", "msgspec")


def test_help_imports_none_of_the_heavy_modules() -> None:
    # --help must be fast: none of the frameworks, SDKs or the harness is imported to print it.
    probe = (
        "import sys\n"
        "from coding_agent.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {_HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert "--permission-mode" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_continue_and_resume_cannot_be_combined(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--continue", "--resume", "x"])
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_worker_command_carries_the_flags(tmp_path: Path) -> None:
    argv = worker_command(
        tmp_path, model="faux/faux-1", dev=True, facets_dirs=["/f"], faux_script="/s.json",
        exit_with_parent=True, python="python3",
    )  # fmt: skip
    assert argv == [
        "python3", "-m", "coding_agent.worker.main", str(tmp_path), "--model", "faux/faux-1",
        "--dev", "--facets-dir", "/f", "--faux-script", "/s.json", "--exit-on-stdin-eof",
    ]  # fmt: skip


def test_print_mode_prints_the_final_answer(
    in_project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "answer.json"
    script.write_text(json.dumps([{"text": "Forty-two."}]))
    assert main(["-p", "what is the answer?", "--faux-script", str(script)]) == 0
    assert capsys.readouterr().out.strip() == "Forty-two."
    [session] = list_sessions(in_project)
    assert not session.worker_running()


def test_json_mode_streams_events_and_continue_reuses_the_session(
    in_project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"text": "First."}, {"text": "Second."}]))
    assert main(["-p", "one", "--faux-script", str(script)]) == 0
    capsys.readouterr()
    assert main(["--continue", "--json", "two", "--faux-script", str(script)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[-1]["type"] == "result" and lines[-1]["text"] == "Second."
    assert any(line["type"] == "turn.ended" for line in lines)
    assert len(list_sessions(in_project)) == 1, "--continue used the newest session"


def test_usage_errors_say_what_is_wrong(
    in_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["attach"]) == 2
    assert "no session in" in capsys.readouterr().err
    assert main(["--resume", "no-such-session", "-p", "hi"]) == 2
    assert "no-such-session" in capsys.readouterr().err
    assert main(["--json"]) == 2
    assert "--json needs a prompt" in capsys.readouterr().err


def test_attach_names_a_session_that_does_not_exist(
    in_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a session without a worker gets one started (tests/app/tui/process/test_first_day.py)
    assert main(["attach", "no-such-session"]) == 2
    assert "no session 'no-such-session'" in capsys.readouterr().err


def test_the_resume_picker_takes_a_number_or_the_newest(
    project: Path, agent_env: dict[str, str]
) -> None:
    older = create_session(project, env=agent_env)
    newer = create_session(project, env=agent_env)
    sessions = list_sessions(project, env=agent_env)
    assert {s.id for s in sessions} == {older.id, newer.id}
    shown = io.StringIO()
    assert pick_session(sessions, stdin=io.StringIO("\n"), stdout=shown).id == sessions[0].id
    assert older.id in shown.getvalue() and "Resume which session?" in shown.getvalue()
    assert pick_session(sessions, stdin=io.StringIO("2\n"), stdout=io.StringIO()).id == (
        sessions[1].id
    )
