"""Ctrl+C (SIGINT) and SIGTERM in ``-p``/``--json`` abort the turn durably, as Esc does in the
TUI: the run writes its last line (``--json``'s result, ``"status": "interrupted"``; ``-p``'s
error line) and exits 130, and a ``--resume`` does not run the aborted turn again. The real
binary, in process and with the session in its worker (``--wait-for-approval``); each signal
is sent once the run's ``generation.started`` line is out (the faux model then waits its
``latency``), or for ``-p`` once ``--verbose`` said the session (the turn is being sent)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from coding_agent.session_files.folders import list_sessions
from tests.conftest import sigint_as_in_a_terminal

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    slow = {"steps": [{"text": "The slow answer."}], "latency": 60}
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    (tmp_path / "fast.json").write_text(json.dumps([{"text": "The next answer."}] * 3))
    return folder


@pytest.fixture
def env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    # the run in this process (the warm start's fork server would outlive the test)
    return {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "CODING_AGENT_WARM_START": "0"}  # fmt: skip


def _interrupted(
    project: Path, env: dict[str, str], flags: list[str], signals: list[signal.Signals]
) -> tuple[int, list[str], str]:
    """Run ``flags`` on the slow script, send ``signals`` once the generation started; the
    exit status, stdout's lines and stderr."""
    script = str(project.parent / "slow.json")
    with sigint_as_in_a_terminal():  # a suite run from a background job ignores SIGINT
        process = subprocess.Popen(
            [str(BINARY), "--faux-script", script, "--linger", "0.1", *flags], cwd=project,
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    lines: list[str] = []
    try:
        if "-p" in flags:  # -p writes nothing before the answer: --verbose's line on stderr,
            # written as the turn is sent (the signal is handled from then on as an abort)
            assert "coding-agent: session" in process.stderr.readline()
        else:
            for line in process.stdout:
                lines.append(line)
                if json.loads(line)["type"] == "generation.started":
                    break
            else:
                raise AssertionError(f"no generation.started: {lines} {process.stderr.read()}")
        for number in signals:
            process.send_signal(number)
        out, err = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, [*lines, *out.splitlines(keepends=True)], err


def _events(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]


def _resume_runs_only_the_next_prompt(project: Path, env: dict[str, str], session: str) -> None:
    sessions = list_sessions(project, env=env)
    worker = next(s for s in sessions if s.id == session)
    deadline = time.monotonic() + TIMEOUT
    while worker.worker_running():  # a --wait-for-approval run's worker lingers 0.1 s
        assert time.monotonic() < deadline, "the worker did not end"
        time.sleep(0.05)
    done = subprocess.run(
        [str(BINARY), "--resume", session, "--faux-script", str(project.parent / "fast.json"),
         "--json", "next"],
        cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = _events(done.stdout.splitlines())
    kinds = [event["type"] for event in events]
    assert "generation.retrying" not in kinds, "the aborted turn is not resumed"
    assert kinds.count("generation.started") == 1 and kinds.count("turn.started") == 1
    assert events[-1] == {
        "type": "result",
        "ok": True,
        "status": "done",
        "text": "The next answer.",
    }


@pytest.mark.parametrize(
    ("flags", "number"),
    [
        (["--json", "go"], signal.SIGINT),
        (["--json", "go"], signal.SIGTERM),
        (["--wait-for-approval", "--json", "go"], signal.SIGINT),  # the session's worker
    ],
    ids=["sigint", "sigterm", "worker"],
)
def test_a_signal_aborts_the_json_turn_and_resume_does_not_run_it_again(
    project: Path, env: dict[str, str], flags: list[str], number: signal.Signals
) -> None:
    code, lines, err = _interrupted(project, env, flags, [number])
    assert code == 130, err
    events = _events(lines)
    assert events[-1] == {
        "type": "result", "ok": False, "status": "interrupted", "text": "",
        "error": f"interrupted ({number.name}): the turn was aborted",
    }  # fmt: skip
    ended = [event for event in events if event["type"] == "turn.ended"]
    assert ended == [{"type": "turn.ended", "inputs": ended[0]["inputs"],
                      "status": "unanswered", "reason": "aborted"}]  # fmt: skip
    assert err == ""
    _resume_runs_only_the_next_prompt(project, env, events[0]["session"])


def test_ctrl_c_in_print_mode_is_one_error_line(project: Path, env: dict[str, str]) -> None:
    code, lines, err = _interrupted(project, env, ["--verbose", "-p", "go"], [signal.SIGINT])
    (session,) = list_sessions(project, env=env)
    assert (code, lines) == (130, [])
    assert err == (
        "coding-agent: error: interrupted (SIGINT): the turn was aborted (continue the session: "
        f"coding-agent --resume {session.id})\n"
    )
    _resume_runs_only_the_next_prompt(project, env, session.id)


def test_a_second_ctrl_c_exits_at_once_with_the_result_line(
    project: Path, env: dict[str, str]
) -> None:
    code, lines, _err = _interrupted(project, env, ["--json", "go"], [signal.SIGINT] * 2)
    assert code == 130
    result = _events(lines)[-1]
    assert (result["type"], result["status"], result["ok"]) == ("result", "interrupted", False)
    assert result["error"].startswith("interrupted (SIGINT)")
    assert os.path.isdir(project)
