"""Crash injection against the real session worker (issue 9 item 1), CI-sized.

Five sessions, ten ``SIGKILL``s each (50 kill points): every trial of
:mod:`crash_scenario` drives ``python -m coding_agent.worker.main --no-fsync`` through scripted
turns with parallel tool calls, approvals, questions and the indexer, kills the worker at random
points, starts it again and checks every invariant after each kill and at the end. The long runs
are ``benchmarks/crash_injection.py --trials N`` (figures in ``docs/reliability.md``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crash_scenario import CrashConfig, run_trial, transcript_problems

KILLS_PER_SESSION = 10
SEEDS = (1, 2, 3, 4, 5)  # 5 x 10 = 50 kill points


@pytest.mark.anyio
@pytest.mark.parametrize("seed", SEEDS)
async def test_a_worker_killed_at_random_points_keeps_every_invariant(
    seed: int, tmp_path: Path
) -> None:
    report = await run_trial(seed, CrashConfig(kills=KILLS_PER_SESSION), tmp_path)
    assert report.violations == [], (report.kill_points, report.violations)
    assert report.kills == KILLS_PER_SESSION
    assert len(report.restart_seconds) == KILLS_PER_SESSION
    assert report.rounds >= 2
    assert report.dialogs > 0  # approvals and questions were answered (before and after kills)
    assert report.effects > 0  # commands ran; none twice (checked as ``effect-repeated``)


@pytest.mark.anyio
async def test_the_trial_reports_effects_that_ran_twice_or_despite_a_denial(tmp_path: Path) -> None:
    # Round 0's tokens are already in the effects file, as if a previous life had run them: the
    # check must see each of them twice, and seed 7 denies the call of r0-a.
    (tmp_path / "effects.log").write_text("r0-a\nr0-b\nr0-c\n")
    report = await run_trial(7, CrashConfig(kills=1, rounds=1), tmp_path)
    found = [(v.kind, v.detail) for v in report.violations]
    assert ("effect-repeated", "bash token r0-b ran 2 times") in found
    assert any(kind == "denied-effect" and "(token r0-a)" in detail for kind, detail in found)
    assert {v.kind for v in report.violations} <= {
        "effect-repeated",
        "denied-effect",
        "effect-missing",
    }


# -- the transcript check itself ------------------------------------------------------------------
def _assistant(entry_id: int, *calls: tuple[str, str], stop: str = "toolUse") -> dict[str, Any]:
    content = [{"type": "toolCall", "id": i, "name": n, "arguments": {}} for i, n in calls]
    return {
        "id": entry_id,
        "kind": "pi.assistant",
        "model": [{"role": "assistant", "content": content, "stopReason": stop}],
    }


def _result(entry_id: int, call_id: str, name: str) -> dict[str, Any]:
    message = {"role": "toolResult", "toolCallId": call_id, "toolName": name, "content": []}
    return {"id": entry_id, "kind": "pi.tool_result", "model": [message]}


def test_the_transcript_check_accepts_results_that_answer_their_calls() -> None:
    entries = [
        _assistant(1, ("a", "bash"), ("b", "read")),
        _result(2, "b", "read"),
        _result(3, "a", "bash"),
    ]
    assert transcript_problems(entries, complete=True) == []


def test_the_transcript_check_reports_every_kind_of_mismatch() -> None:
    entries = [
        _result(1, "early", "bash"),
        _assistant(2, ("a", "bash"), ("b", "read"), ("c", "ls")),
        _result(3, "a", "bash"),
        _result(4, "a", "bash"),
        _result(5, "b", "ls"),
        _assistant(6, ("a", "bash")),
    ]
    assert transcript_problems(entries, complete=True) == [
        "entry 1: result for unknown call early",
        "entry 4: second result for call a",
        "entry 5: result named 'ls' for a 'read' call",
        "entry 6: call a made twice",
        "call c has no result",
    ]


def test_calls_of_an_unfinished_answer_need_no_result_and_live_turns_are_not_complete() -> None:
    entries = [_assistant(1, ("a", "bash"), stop="aborted"), _assistant(2, ("b", "bash"))]
    assert transcript_problems(entries, complete=True) == ["call b has no result"]
    assert transcript_problems(entries, complete=False) == []
