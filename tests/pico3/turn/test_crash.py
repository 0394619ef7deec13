"""Crash tests: a real child process runs a turn on JSONL storage and is SIGKILLed at a crash
point; the session is reopened here and checked (issue 6 "Tests")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from pico3.harness import Harness, HarnessOptions
from pico3.models.faux import FauxProvider, faux_response
from pico3.storage import JsonlStorage
from pico3.storage.records import UNSET
from pico3.tasks.clock import ManualClock
from pico3.turn.models import Models

pytestmark = pytest.mark.anyio

CHILD = Path(__file__).with_name("crash_child.py")
sys.path.insert(0, str(CHILD.parent))
from crash_child import effect_tool  # noqa: E402


def _crash(scenario: str, directory: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, str(CHILD), scenario, str(directory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line == b"READY\n", (line, process.stderr.read() if process.stderr else b"")
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    assert process.returncode == -signal.SIGKILL


async def crash(scenario: str, directory: Path) -> None:
    """Run the child until it prints READY, then SIGKILL it."""
    await anyio.to_thread.run_sync(_crash, scenario, directory)


async def reopen(
    directory: Path, script: list[Any], **tool: Any
) -> tuple[Harness, Any, ManualClock]:
    clock = ManualClock(2_000_000_000_000)
    options = HarnessOptions(
        require_approval=False, clock=clock, services={"models": Models([FauxProvider(script)])}
    )
    harness = await Harness.open(
        JsonlStorage(directory / "store", fsync=False), options, BACKGROUND
    )
    if tool:
        harness.register_tool(effect_tool(directory, **tool))
    return harness, await harness.root(BACKGROUND), clock


def effects(directory: Path) -> list[str]:
    path = directory / "effects.txt"
    return path.read_text().splitlines() if path.exists() else []


async def transcript(root: Any) -> list[Any]:
    return list(reversed(await root.entries(BACKGROUND, limit=1000)))


def text(entry: Any) -> str:
    return "".join(block.get("text", "") for block in entry.model[0]["content"])


async def test_crash_before_started_runs_the_tool_once_after_reopen(tmp_path: Path) -> None:
    await crash("before_started", tmp_path)
    assert effects(tmp_path) == []
    harness, root, _ = await reopen(tmp_path, [faux_response("after")], replay="unsafe", hang=False)
    async with harness:
        await harness.resume(BACKGROUND)
        await root.wait_for_idle(BACKGROUND)
        entries = await transcript(root)
    assert len(effects(tmp_path)) == 1
    (result,) = [e for e in entries if e.kind == "pi.tool_result"]
    assert text(result).startswith("effect ") and not result.model[0]["isError"]
    assert entries[-1].kind == "pi.assistant" and text(entries[-1]) == "after"


async def test_crash_after_started_replays_a_safe_tool_with_the_same_memo(tmp_path: Path) -> None:
    await crash("safe_started", tmp_path)
    (key,) = effects(tmp_path)
    harness, root, _ = await reopen(tmp_path, [faux_response("after")], replay="safe", hang=False)
    async with harness:
        await harness.resume(BACKGROUND)
        await root.wait_for_idle(BACKGROUND)
        entries = await transcript(root)
    assert effects(tmp_path) == [key, key]  # the keyed effect repeated with the same key
    (result,) = [e for e in entries if e.kind == "pi.tool_result"]
    assert text(result) == f"effect {key}"


async def test_crash_after_started_never_reruns_an_unsafe_tool(tmp_path: Path) -> None:
    await crash("unsafe_started", tmp_path)
    assert len(effects(tmp_path)) == 1
    harness, root, _ = await reopen(tmp_path, [faux_response("after")], replay="unsafe", hang=False)
    async with harness:
        await harness.resume(BACKGROUND)
        await root.wait_for_idle(BACKGROUND)
        entries = await transcript(root)
    assert len(effects(tmp_path)) == 1
    (result,) = [e for e in entries if e.kind == "pi.tool_result"]
    assert result.model[0]["isError"] and "interrupted" in text(result)
    assert result.data["diagnostics"][0]["code"] == "interrupted"


async def test_crash_during_a_generation_stream_retries_without_a_duplicate_assistant(
    tmp_path: Path,
) -> None:
    await crash("stream", tmp_path)
    harness, root, clock = await reopen(tmp_path, [faux_response("the whole answer")])
    async with harness:
        sticky = await root.sticky(BACKGROUND)
        assert sticky["turn"]["message"]["content"][0]["text"].startswith("partial")
        await harness.resume(BACKGROUND)
        await clock.wait_for_sleepers(1)
        clock.advance(2000)
        await root.wait_for_idle(BACKGROUND)
        entries = await transcript(root)
    kinds = [e.kind for e in entries if e.kind != "pi.system"]
    assert kinds == ["pi.user", "pi.usage", "pi.assistant"]  # one assistant, no partial copy
    usage, assistant = entries[-2], entries[-1]
    assert usage.data == {"attempt": 1, "error": "interrupted"}
    assert text(assistant) == "the whole answer" and assistant.data == {"attempt": 2}


async def test_crash_during_a_stream_without_retries_fails_with_no_assistant_entry(
    tmp_path: Path,
) -> None:
    # recovery from requesting with retry disabled -> failed, inputs unanswered/failed
    await crash("stream_no_retry", tmp_path)
    harness, root, _ = await reopen(tmp_path, [])
    async with harness:
        await harness.resume(BACKGROUND)
        await root.wait_for_idle(BACKGROUND)
        entries = await transcript(root)
        (user,) = [e for e in entries if e.kind == "pi.user"]
        view = (await root.watch(BACKGROUND)).view
    assert [e.kind for e in entries if e.kind != "pi.system"] == ["pi.user"]
    assert "turn" not in view
    del user


async def test_a_crash_before_the_request_loses_only_the_prepared_checkpoint(
    tmp_path: Path,
) -> None:
    """The "prepared" checkpoint is committed without waiting for its write (it shares one
    with "requesting"): killed while the hooks before the request run, the session reopens with
    the prompt and the turn as they were acknowledged, the model call prepares again and
    answers once."""
    await crash("before_request", tmp_path)
    harness, root, _ = await reopen(tmp_path, [faux_response("the answer")])
    async with harness:
        (call,) = [t for t in harness.kernel.task_index.values() if t.kind == "pi.generation"]
        assert call.checkpoint is None or call.checkpoint is UNSET  # "prepared" was not written
        await harness.resume(BACKGROUND)
        await root.wait_for_idle(BACKGROUND)
        entries = await transcript(root)
    assert [e.kind for e in entries if e.kind != "pi.system"] == ["pi.user", "pi.assistant"]
    assert text(entries[-1]) == "the answer"
