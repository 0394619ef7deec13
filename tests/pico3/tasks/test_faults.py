"""Contract faults end the task ``faulted`` and the session lives on (docs/design/decisions.md#d8-g6)."""

from __future__ import annotations

from typing import Any

import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.kernel import Authority, Transaction
from pico3.storage import Task
from pico3.tasks import Completion, Done, Next, Runtime, TaskFaulted, TaskInfo, define_task

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


async def noop_abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return lambda tx, cur, c: None


async def raises(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    raise RuntimeError("handler bug")


async def bad_step(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return {"phase": "x"}  # a dict, not Next(...)


async def into_inflight(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return Next({"phase": "sending"})


async def unknown_phase(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return Next({"phase": "nowhere"})


async def bad_completion(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    wrong: Any = lambda tx, cur, c: {"status": "completed"}  # noqa: E731
    return Done(wrong)


async def non_json_checkpoint(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return Next({"phase": "other", "value": float("nan")})


async def unreachable(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    raise AssertionError("never entered")


CASES = {
    "raise": (raises, "RuntimeError: handler bug"),
    "bad step": (bad_step, "expected Next(...) or Done(...)"),
    "next into in-flight": (into_inflight, "in-flight phase 'sending'"),
    "unknown phase": (unknown_phase, "'nowhere' is not a phase"),
    "invalid completion": (bad_completion, "expected a Completion"),
    "non-JSON checkpoint": (non_json_checkpoint, "$.checkpoint.value"),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_contract_fault_terminalizes_the_task_faulted_and_reports(
    harness: Harness, reports: list[BaseException], case: str
) -> None:
    initial, expected = CASES[case]
    kind = define_task(
        "test.faulty",
        initial=initial,
        phases={"sending": unreachable, "other": unreachable},
        inflight=("sending",),
        abort=noop_abort,
    )
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    final = await harness.wait_for_task(task_id, ctx)
    assert final.outcome is not None and final.outcome["status"] == "faulted"  # type: ignore[index]
    assert expected in final.outcome["error"]  # type: ignore[index]
    faults = [r for r in reports if isinstance(r, TaskFaulted)]
    assert [f.task_id for f in faults] == [task_id]
    # the session lives on
    assert await c.commit(lambda tx, _c: tx.write(c.id, "note", data={"after": True}), ctx)


async def test_a_core_kind_fault_hook_adds_writes_to_the_faulted_commit(harness: Harness) -> None:
    def on_fault(tx: Transaction, current: Task, error: str) -> None:
        sticky = tx.document("sticky", current.conversation_id)
        sticky["lastFault"] = error

    kind = define_task(
        "pi.testfault", initial=raises, phases={}, abort=noop_abort, core=True, fault=on_fault
    )
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await harness.kernel.commit(
        lambda tx, _c: tx.create_task("pi.testfault", None),
        ctx,
        conversation_id=c.id,
        authority=Authority.CORE,
    )
    final = await harness.wait_for_task(task_id, ctx)
    assert final.outcome == {"status": "faulted", "error": "RuntimeError: handler bug"}
    assert (await c.sticky(ctx))["lastFault"] == "RuntimeError: handler bug"


async def test_a_domain_failure_is_an_outcome_not_a_fault(
    harness: Harness, reports: list[BaseException]
) -> None:
    async def fails(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        return Done(lambda tx, cur, c: Completion.failed({"reason": "provider"}))

    kind = define_task("test.fails", initial=fails, phases={}, abort=noop_abort)
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    final = await harness.wait_for_task(task_id, ctx)
    assert final.outcome == {"status": "failed", "failure": {"reason": "provider"}}
    assert not [r for r in reports if isinstance(r, TaskFaulted)]
