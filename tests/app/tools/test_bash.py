"""The bash tool (docs/design/agent.md#bash): exit codes, tail truncation, spill file, tree kill."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, with_cancel
from coding_agent.worker.tools import BASH_TOOL, ToolContext, ToolResult, run_bash

TREE = "sleep 1000 & echo pid $!; sleep 1000 & echo pid $!; echo pid $$; wait"


@pytest.fixture
def tools(tmp_path: Path) -> ToolContext:
    spill = tmp_path / "spill"
    spill.mkdir()
    return ToolContext(cwd=tmp_path, temp_dir=str(spill))


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def pids_in(text: str) -> list[int]:
    return [int(pid) for pid in re.findall(r"pid (\d+)", text)]


@pytest.mark.anyio
async def test_output_and_exit_code_zero(tools: ToolContext) -> None:
    result = await BASH_TOOL.execute({"command": "echo hi; echo err >&2; pwd"}, tools)
    assert not result.is_error
    assert result.plain_text == f"hi\nerr\n{tools.cwd}"
    assert result.details["exit_code"] == 0


@pytest.mark.anyio
async def test_no_output_says_so(tools: ToolContext) -> None:
    result = await BASH_TOOL.execute({"command": "true"}, tools)
    assert result.plain_text == "(no output)"


@pytest.mark.anyio
async def test_non_zero_exit_is_an_error_naming_the_code(tools: ToolContext) -> None:
    result = await BASH_TOOL.execute({"command": "echo failing; exit 3"}, tools)
    assert result.is_error
    assert result.plain_text == "failing\n\nCommand exited with code 3"
    assert result.details["exit_code"] == 3


@pytest.mark.anyio
async def test_timeout_kills_the_whole_process_tree(tools: ToolContext, processes: Any) -> None:
    result = await BASH_TOOL.execute({"command": TREE, "timeout": 1}, tools)
    assert result.is_error
    assert result.plain_text.endswith("\n\nCommand timed out after 1 seconds")
    assert result.details["timed_out"] is True
    pids = pids_in(result.plain_text)
    assert len(pids) == 3
    await processes.ended(pids)


@pytest.mark.anyio
async def test_context_abort_kills_the_tree_and_reports_aborted(
    tools: ToolContext, processes: Any
) -> None:
    ctx, cancel = with_cancel(BACKGROUND)
    tools.ctx = ctx
    seen: list[int] = []

    def on_update(partial: ToolResult) -> None:
        seen[:] = pids_in(partial.plain_text)
        if len(seen) == 3:
            cancel("user pressed escape")

    result = await BASH_TOOL.execute({"command": TREE}, tools, on_update=on_update)
    assert result.is_error
    assert result.plain_text.endswith("\n\nCommand aborted")
    assert result.details["aborted"] is True
    assert len(seen) == 3
    await processes.ended(seen)


@pytest.mark.anyio
async def test_anyio_cancellation_kills_the_tree_and_propagates(
    tools: ToolContext, processes: Any
) -> None:
    seen: list[int] = []
    with anyio.CancelScope() as scope:

        def on_output(chunk: str) -> None:
            seen.extend(pids_in(chunk))
            if len(seen) == 3:
                scope.cancel()

        await run_bash(TREE, cwd=tools.cwd, ctx=BACKGROUND, on_output=on_output)
        pytest.fail("run_bash returned although its task was cancelled")
    assert scope.cancelled_caught
    await processes.ended(seen)


@pytest.mark.anyio
async def test_long_output_keeps_the_tail_and_spills_everything(tools: ToolContext) -> None:
    result = await BASH_TOOL.execute({"command": "seq 1 30000"}, tools)
    assert not result.is_error
    body, footer = result.plain_text.rsplit("\n\n", 1)
    assert body.split("\n") == [str(n) for n in range(28001, 30001)]
    path = result.details["full_output_path"]
    assert footer == f"[Showing lines 28001-30000 of 30000. Full output: {path}]"
    assert Path(path).parent == Path(tools.spill_dir)
    assert await anyio.Path(path).read_text() == "".join(f"{n}\n" for n in range(1, 30001))


@pytest.mark.anyio
async def test_line_capped_small_output_still_gets_a_spill_file(tools: ToolContext) -> None:
    result = await BASH_TOOL.execute({"command": "seq 1 2500"}, tools)  # < 50KB, > 2000 lines
    path = result.details["full_output_path"]
    assert result.plain_text.endswith(f"[Showing lines 501-2500 of 2500. Full output: {path}]")
    assert await anyio.Path(path).read_text() == "".join(f"{n}\n" for n in range(1, 2501))


@pytest.mark.anyio
async def test_byte_capped_output_names_the_limit(tools: ToolContext) -> None:
    command = "for i in $(seq 1 100); do printf '%0999d\\n' $i; done"
    result = await BASH_TOOL.execute({"command": command}, tools)
    body, footer = result.plain_text.rsplit("\n\n", 1)
    kept = body.split("\n")
    assert len(body.encode()) <= 50 * 1024
    assert kept[-1] == f"{100:0999d}"
    first = 100 - len(kept) + 1
    path = result.details["full_output_path"]
    assert footer == f"[Showing lines {first}-100 of 100 (50.0KB limit). Full output: {path}]"
    assert len(await anyio.Path(path).read_bytes()) == 100_000


@pytest.mark.anyio
async def test_short_output_has_no_spill_file(tools: ToolContext) -> None:
    result = await BASH_TOOL.execute({"command": "echo small"}, tools)
    assert "full_output_path" not in result.details
    assert os.listdir(tools.spill_dir) == []


@pytest.mark.anyio
async def test_a_background_process_holding_stdout_does_not_hang_the_call(
    tools: ToolContext, processes: Any
) -> None:
    # pi#7636: the shell exits, a child keeps the pipe; the call must still return.
    result = await BASH_TOOL.execute({"command": "sleep 1000 & echo pid $!"}, tools)
    pids = pids_in(result.plain_text)
    try:
        assert not result.is_error
        assert result.details["exit_code"] == 0
        assert len(pids) == 1
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    await processes.ended(pids)


@pytest.mark.anyio
async def test_progress_updates_stream_partial_output(tools: ToolContext) -> None:
    updates: list[str] = []
    result = await BASH_TOOL.execute(
        {"command": "echo first; echo second"},
        tools,
        on_update=lambda r: updates.append(r.plain_text),
    )
    assert updates
    assert updates[-1] == "first\nsecond"
    assert result.plain_text == "first\nsecond"


@pytest.mark.anyio
async def test_very_long_output_keeps_exact_tail_and_full_spill(tools: ToolContext) -> None:
    # ~590 KB: far past the in-memory tail bound, so the bounded tail buffer is exercised.
    result = await BASH_TOOL.execute({"command": "seq 1 100000"}, tools)
    body, footer = result.plain_text.rsplit("\n\n", 1)
    assert body.split("\n") == [str(n) for n in range(98001, 100001)]
    path = result.details["full_output_path"]
    assert footer == f"[Showing lines 98001-100000 of 100000. Full output: {path}]"
    expected = "".join(f"{n}\n" for n in range(1, 100001))
    assert await anyio.Path(path).read_text() == expected
    assert result.details["total_bytes"] == len(expected)


# Job control gives each background child a process group of its own (issue 24 deliver 8):
# killing the shell's group alone would leave them running.
SET_M_TREE = (
    "set -m; "
    "sleep 300 & echo pid $!; "
    "(sleep 300 & echo pid $!; wait) & echo pid $!; "
    # -w: setsid (a job leader under set -m, so it forks) waits for its new-session child,
    # which keeps the printed pid alive in a group of its own and the child reachable.
    "setsid -w sleep 300 & echo pid $!; "
    "wait"
)


def group_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])


@pytest.mark.anyio
async def test_abort_kills_set_m_children_in_other_process_groups(
    tools: ToolContext, processes: Any
) -> None:
    ctx, cancel = with_cancel(BACKGROUND)
    tools.ctx = ctx
    seen: list[int] = []
    groups: set[int] = set()

    def on_update(partial: ToolResult) -> None:
        seen[:] = pids_in(partial.plain_text)
        if len(seen) == 4 and not groups:
            groups.update(group_of(pid) for pid in seen if alive(pid))
            cancel("user pressed escape")

    result = await BASH_TOOL.execute({"command": SET_M_TREE}, tools, on_update=on_update)
    assert result.details["aborted"] is True
    assert len(groups) >= 3  # they really were in groups of their own
    await processes.ended(seen)


@pytest.mark.anyio
async def test_timeout_kills_set_m_children_in_other_process_groups(
    tools: ToolContext, processes: Any
) -> None:
    result = await BASH_TOOL.execute({"command": SET_M_TREE, "timeout": 1}, tools)
    assert result.details["timed_out"] is True
    pids = pids_in(result.plain_text)
    assert len(pids) == 4
    await processes.ended(pids)


@pytest.mark.anyio
async def test_a_failing_start_record_runs_nothing(tools: ToolContext) -> None:
    async def refuse(record: object) -> None:
        raise OSError("no space left on device")

    marker = Path(tools.cwd) / "ran"
    with pytest.raises(OSError, match="no space"):
        await run_bash("touch ran", cwd=tools.cwd, ctx=BACKGROUND, on_start=refuse)
    assert not marker.exists()
