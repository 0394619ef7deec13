"""The API a running tool gets (docs/design/harness.md#tool-api): :class:`ToolApi` and the :class:`ToolRuntime`
it reaches tasks and owned conversations through."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Mapping, MutableMapping
from contextlib import asynccontextmanager
from typing import Any, Protocol, overload

import anyio

from chord.context import Context
from chord.json import JsonError, copy_json
from pico3.kernel.tx import Transaction
from pico3.tools.memo import SlotCommit, SlotRejected, memo_key, slot_memo, split_memo_args
from pico3.tools.output import OutputBounds, OutputBuffer

__all__ = ["FREE_SLOT_FIELDS", "ToolApi", "ToolRuntime"]


FREE_SLOT_FIELDS = frozenset({"progress", "details", "continuedBy"})
"""The slot fields a tool may change through :meth:`ToolApi.progress`; the rest (``callId``,
``name``, ``args``, ``status``, ``output``, ``waitingOn``, ``entry``, ``memos``) are protected."""


# -- the API a running tool gets -------------------------------------------------------------
class ToolRuntime(Protocol):
    """What :class:`ToolApi` needs from the tool task's runtime for task and subagent work."""

    async def create_task(
        self, kind: Any, input: Any, options: Mapping[str, Any], ctx: Context, /
    ) -> Any: ...
    async def get_task(self, task_id: int, ctx: Context, /) -> Any: ...
    async def wait_for_task(self, task_id: int, ctx: Context, /) -> Any: ...
    async def task_slot(self, task_id: int, ctx: Context, /) -> Any: ...
    async def create_owned_conversation(self, spec: Any, ctx: Context, /) -> Any: ...


class ToolApi:
    """What ``execute(args, api, ctx)`` receives (docs/design/harness.md#tool-api). Tools never get commit,
    entry append, write or admission helpers; everything durable goes through the slot, or rides
    in the commit that stores the call's result (:meth:`with_result`)."""

    def __init__(
        self,
        *,
        task_id: int,
        conversation_id: int,
        call_id: str,
        slot: SlotCommit,
        runtime: ToolRuntime | None = None,
        bounds: OutputBounds | None = None,
        flush_interval: float = 0.1,
    ) -> None:
        self.task_id = task_id
        self.conversation_id = conversation_id
        self.call_id = call_id
        self._slot = slot
        self._runtime = runtime
        self.buffer = OutputBuffer(bounds)
        self._flush_interval = flush_interval
        self._dirty = anyio.Event()
        self._flushed_text: str | None = None
        self._flush_error: BaseException | None = None
        self._result_writes: list[Callable[[Transaction], None]] = []

    # writes riding in the result's commit ----------------------------------------------------
    def with_result(self, build: Callable[[Transaction], None]) -> None:
        """Run ``build(tx)`` in the commit that stores this call's result (in registration
        order, before the result entry): what it writes is durable with the result, never
        before it, and takes no commit of its own. Nothing is written for a call that ends
        without its result commit (a crash before it re-runs or interrupts the call). For
        bookkeeping the call's own effects imply (a file it read), not for what another
        call or a reader must see while this one still runs."""
        self._result_writes.append(build)

    @property
    def result_writes(self) -> list[Callable[[Transaction], None]]:
        """The builders :meth:`with_result` registered (the result closure runs them)."""
        return list(self._result_writes)

    # streaming ---------------------------------------------------------------------------
    def stream(self, chunk: str | bytes) -> None:
        """Push output (synchronous, bounded). It is flushed to ``slot.output`` by
        :meth:`streaming`, and becomes the result content if ``execute`` returns none."""
        self.buffer.push(chunk)
        self._dirty.set()

    @property
    def streamed(self) -> bool:
        """True when the tool pushed anything through :meth:`stream`."""
        return self.buffer.pushed

    async def flush(self, ctx: Context) -> None:
        """Write the retained output to ``slot.output`` now (skipped when unchanged)."""
        text = self.buffer.text()
        if text == self._flushed_text:
            return

        def build(_tx: Transaction, slot: MutableMapping[str, Any]) -> None:
            slot["output"] = text

        await self._slot(build, ctx)
        self._flushed_text = text

    @asynccontextmanager
    async def streaming(self, ctx: Context) -> AsyncIterator[ToolApi]:
        """Run the body (``execute``) while flushing streamed output at most every
        ``flush_interval`` seconds; flush once more at the end. The first flush failure is
        re-raised when the body finishes (a persistence failure is never hidden)."""
        failure: Exception | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(self._flusher, ctx)
            try:
                yield self
            except Exception as exc:  # re-raised as itself below, not inside an ExceptionGroup
                failure = exc
            finally:
                group.cancel_scope.cancel()
        if failure is not None:
            raise failure
        if self._flush_error is not None:
            raise self._flush_error
        if self.buffer.pushed:
            await self.flush(ctx)

    async def _flusher(self, ctx: Context) -> None:
        while True:
            await self._dirty.wait()
            self._dirty = anyio.Event()
            try:
                await self.flush(ctx)
            except Exception as exc:
                self._flush_error = exc
                return
            if self._flush_interval > 0:
                await anyio.sleep(self._flush_interval)

    # slot fields ---------------------------------------------------------------------------
    async def progress(self, update: Callable[[dict[str, Any]], object], ctx: Context) -> None:
        """Change the free slot fields in one commit. ``update`` gets a plain dict holding the
        present free fields (``progress``: str, ``details``: JSON, ``continuedBy``: task id)
        and mutates it; a key it deletes is deleted from the slot. Any other key rejects the
        whole update with :class:`SlotRejected` (identity fields are protected)."""

        def build(_tx: Transaction, slot: MutableMapping[str, Any]) -> None:
            free: dict[str, Any] = {}
            for key in FREE_SLOT_FIELDS:
                if key in slot:
                    value = slot[key]
                    free[key] = value.to_plain() if hasattr(value, "to_plain") else value
            returned = update(free)
            if inspect.iscoroutine(returned):
                returned.close()
                raise TypeError("progress(update): update must be a plain (non-async) function")
            stray = sorted(set(free) - FREE_SLOT_FIELDS)
            if stray:
                raise SlotRejected(
                    f"progress may change only {sorted(FREE_SLOT_FIELDS)}; "
                    f"protected or unknown slot field(s): {stray}"
                )
            _check_free(free)
            for key in sorted(FREE_SLOT_FIELDS):
                if key in free:
                    slot[key] = free[key]
                elif key in slot:
                    del slot[key]

        await self._slot(build, ctx)

    @overload
    async def memo(self, name: str, ctx: Context, /) -> Any: ...
    @overload
    async def memo(self, name: str, candidate: Any, ctx: Context, /) -> Any: ...
    async def memo(self, name: str, *args: Any) -> Any:
        """``memo(name, ctx)`` reads (:data:`MISSING` when absent); ``memo(name, candidate,
        ctx)`` stores ``candidate`` unless a value is already stored and returns the durable
        winner. One commit on this tool's slot, key ``tool:<name>``."""
        candidate, ctx = split_memo_args(args)
        key = memo_key("tool", name)
        return await self._slot(lambda _tx, slot: slot_memo(slot, key, candidate), ctx)

    # tasks and subagents ------------------------------------------------------------------
    def _rt(self, what: str) -> ToolRuntime:
        if self._runtime is None:
            raise RuntimeError(f"{what} needs a task runtime; this ToolApi was built without one")
        return self._runtime

    async def task(
        self, kind: Any, input: Any, options: Mapping[str, Any] | None, ctx: Context
    ) -> Any:
        """Create an ordinary task (``options``: ``background``, ``after``, ``memo``) in this
        tool's conversation; returns its reference.

        With ``memo: name`` the task is made at most once per call: the commit that creates it
        also stores its id as the memo ``name`` (see :meth:`memo`), and a call that finds the
        memo (the tool running again after a crash) returns the stored id and creates nothing.
        One commit either way, so no crash can leave a task without its memo."""
        return await self._rt("task").create_task(kind, input, dict(options or {}), ctx)

    async def conversation(self, spec: Any, ctx: Context) -> Any:
        """Create an owned conversation (a subagent) owned by this tool's task."""
        return await self._rt("conversation").create_owned_conversation(spec, ctx)

    async def get_task(self, ref: Any, ctx: Context) -> Any:
        """A point read of a task record (own conversation and owned subtree)."""
        return await self._rt("get_task").get_task(_task_id(ref), ctx)

    async def wait_for_task(self, ref: Any, ctx: Context) -> Any:
        """Wait until the task is terminal; returns its record."""
        return await self._rt("wait_for_task").wait_for_task(_task_id(ref), ctx)

    async def slot(self, ref: Any, ctx: Context) -> Any:
        """A read-only snapshot of another task's slot (memos removed), or ``None``."""
        value = await self._rt("slot").task_slot(_task_id(ref), ctx)
        if isinstance(value, dict) and "memos" in value:
            value = {k: v for k, v in value.items() if k != "memos"}  # pyright: ignore[reportUnknownVariableType]
        return value


def _task_id(ref: Any) -> int:
    value = ref if isinstance(ref, int) else getattr(ref, "id", None)
    if type(value) is not int:
        raise TypeError(f"expected a task id or a task reference, got {type(ref).__name__}")
    return value


def _check_free(free: dict[str, Any]) -> None:
    if "progress" in free and not isinstance(free["progress"], str):
        raise SlotRejected(f"slot.progress must be a str, got {type(free['progress']).__name__}")
    if "continuedBy" in free and (type(free["continuedBy"]) is not int or free["continuedBy"] < 1):
        raise SlotRejected(f"slot.continuedBy must be a task id, got {free['continuedBy']!r}")
    if "details" in free:
        try:
            free["details"] = copy_json(free["details"], ("slot", "details"))
        except JsonError as exc:
            raise SlotRejected(str(exc)) from None
