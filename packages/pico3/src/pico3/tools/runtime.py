"""Adapters over the task runtime: :func:`runtime_slot` (a tool task's :class:`SlotCommit`) and
:class:`RuntimeTools` (the :class:`~pico3.tools.ToolRuntime` the turn loop hands a tool)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from chord.context import Context
from chord.json import copy_json
from pico3.kernel.errors import Forbidden
from pico3.kernel.tx import Transaction
from pico3.tools.memo import MISSING, SlotCommit, memo_key, slot_memo

__all__ = ["RuntimeTools", "runtime_slot"]


# -- adapters over the task runtime ------------------------------------------------------------
_CORE_KIND_NAMES = frozenset({"pi.generation", "pi.tool", "pi.post_tools", "pi.collapse"})


def runtime_slot(rt: Any) -> SlotCommit:
    """The :data:`SlotCommit` of the task ``rt`` runs: ``fn(tx, tx.slot(current))`` inside
    ``rt.commit`` (for ``pi.tool`` the slot is ``sticky.turn.tools[input.index]``)."""

    async def commit(
        fn: Callable[[Transaction, MutableMapping[str, Any]], Any], ctx: Context
    ) -> Any:
        return await rt.commit(lambda tx, current, _ctx: fn(tx, tx.slot(current)), ctx)

    return commit


class RuntimeTools:
    """:class:`ToolRuntime` over a task runtime ``rt`` (what ``pi.tool`` hands to
    :class:`ToolApi`). Reads and waits stay inside the tool task's conversation and the
    conversations it owns; tools create ordinary tasks only (never the core turn kinds).
    ``owned(rt, spec, ctx)`` creates a subagent (the owned-conversations layer provides it)."""

    def __init__(
        self, rt: Any, owned: Callable[[Any, Any, Context], Awaitable[Any]] | None = None
    ) -> None:
        self._rt = rt
        self._owned = owned

    async def create_task(
        self, kind: Any, input: Any, options: Mapping[str, Any], ctx: Context
    ) -> Any:
        name = getattr(kind, "name", None)
        if not isinstance(name, str) or name in _CORE_KIND_NAMES or getattr(kind, "turn", False):
            raise Forbidden(f"tools may create ordinary tasks only, not {kind!r}")
        unknown = set(options) - {"after", "background", "memo"}
        if unknown:
            raise ValueError(f"task options: unknown {sorted(unknown)} (after, background, memo)")
        after = list(options.get("after", ()))
        background = bool(options.get("background", False))
        memo = options.get("memo")
        if memo is None:
            return await self._rt.commit(
                lambda tx, _cur, _ctx: tx.create_task(
                    kind, input, after=after, background=background
                ),
                ctx,
            )
        key = memo_key("tool", memo)

        def once(tx: Transaction, current: Any, _ctx: Context) -> Any:
            slot = tx.slot(current)
            stored = slot_memo(slot, key)
            if stored is not MISSING:
                return stored
            task_id = tx.create_task(kind, input, after=after, background=background)
            return slot_memo(slot, key, task_id)

        return await self._rt.commit(once, ctx)

    async def _task_in_reach(self, tx: Any, task_id: int) -> Any:
        task = await tx.task(task_id)
        if task is None:
            return None
        if not tx.in_subtree(self._rt.task_id, task.conversation_id):
            raise Forbidden(f"task {task_id} is outside task {self._rt.task_id}'s subtree")
        return task

    async def get_task(self, task_id: int, ctx: Context) -> Any:
        return await self._rt.commit(lambda tx, _cur, _ctx: self._task_in_reach(tx, task_id), ctx)

    async def wait_for_task(self, task_id: int, ctx: Context) -> Any:
        await self.get_task(task_id, ctx)
        return await self._rt.wait_for_task(task_id, ctx)

    async def task_slot(self, task_id: int, ctx: Context) -> Any:
        async def read(tx: Any, _cur: Any, _ctx: Context) -> Any:
            task = await self._task_in_reach(tx, task_id)
            if task is None or task.status == "terminal":
                return None
            if task.kind == "pi.tool":
                slot = tx.slot(task)  # lives in turn.tools; reading it creates nothing
            else:
                # A read must not seed another task's slot (tx.slot creates it lazily).
                await tx.load(task.conversation_id)
                tasks = tx.document("sticky", task.conversation_id).get("tasks")
                slot = None if tasks is None else tasks.get(str(task.id))
                if slot is None:
                    return {}
            return slot.to_plain() if hasattr(slot, "to_plain") else copy_json(slot)

        return await self._rt.commit(read, ctx)

    async def create_owned_conversation(self, spec: Any, ctx: Context) -> Any:
        if self._owned is None:
            raise RuntimeError("owned conversations are not available to this tool runtime")
        return await self._owned(self._rt, spec, ctx)
