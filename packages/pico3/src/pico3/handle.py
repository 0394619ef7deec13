"""``HarnessHandle``: one session across suspends and reopens (docs/design/decisions.md#d8-g7).

A :class:`~pico3.harness.Harness` is one opening of one storage. Reloading code while work is
running needs more: close the session without terminalizing anything, swap registrations, and
open it again so ordinary recovery runs against the new code. The handle owns what survives
that cycle:

* the **storage factory** (a fresh storage object over the same place for every opening);
* the **registrations**: functions ``install(harness) -> unregister`` that the handle applies to
  every opening, before ``resume``, so kinds whose tasks exist in storage are present for
  recovery;
* the **task group** invocations run in, so a reopen does not need a new ``async with``.

::

    async with HarnessHandle(lambda: JsonlStorage(path), HarnessOptions(...)) as handle:
        handle.add_registration(lambda h: h.register_task_kind(indexer))
        await handle.open(ctx)            # open + registrations + resume
        ...
        await handle.suspend(ctx)         # cancel invocations, clear waitingOn, close storage
        remove_old(); handle.add_registration(new_install)
        await handle.reopen(ctx)          # open again; recovery runs with the new code

Services handed to tasks through ``HarnessOptions.services`` (a process host, models) belong to
the handle's options and so outlive every opening, which is what lets a running job reconcile
through ``status(key)`` after a reopen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio

from chord.context import BACKGROUND, Context
from pico3.harness import Harness, HarnessOptions
from pico3.storage.base import Storage

__all__ = ["HarnessHandle", "Registration"]

Registration = Callable[[Harness], Callable[[], None]]
"""``install(harness) -> unregister``: applied to every opening of the session."""


class HarnessHandle:
    """Owns a session's storage factory, registrations and task group (see module docs)."""

    def __init__(
        self, storage_factory: Callable[[], Storage], options: HarnessOptions | None = None
    ) -> None:
        self._factory = storage_factory
        self._options = options or HarnessOptions()
        self._registrations: list[Registration] = []
        self._removers: dict[int, Callable[[], None]] = {}
        self._harness: Harness | None = None
        self._stack: AsyncExitStack | None = None
        self._task_group: Any = None

    async def __aenter__(self) -> HarnessHandle:
        stack = AsyncExitStack()
        self._task_group = await stack.enter_async_context(anyio.create_task_group())
        self._stack = stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack = self._stack, None
        try:
            with anyio.CancelScope(shield=True):
                await self.close(BACKGROUND)
        finally:
            if stack is not None:
                await stack.aclose()

    @property
    def harness(self) -> Harness:
        """The current opening (raises when suspended or never opened)."""
        if self._harness is None:
            raise RuntimeError("the session is not open (open() or reopen() it)")
        return self._harness

    @property
    def services(self) -> Mapping[str, Any]:
        """``HarnessOptions.services``, the same for every opening (readable while suspended:
        a facet activated during a reload reads its settings here)."""
        return self._options.services

    @property
    def is_open(self) -> bool:
        """True while a harness is open."""
        return self._harness is not None

    def add_registration(self, install: Registration) -> Callable[[], None]:
        """Keep ``install`` for every opening and apply it now if open. Returns an idempotent
        remover that unregisters it from the current opening and from later ones."""
        self._registrations.append(install)
        if self._harness is not None:
            self._removers[id(install)] = install(self._harness)

        def remove() -> None:
            if install in self._registrations:
                self._registrations.remove(install)
                undo = self._removers.pop(id(install), None)
                if undo is not None:
                    undo()

        return remove

    async def open(self, ctx: Context, *, resume: bool = True) -> Harness:
        """Open the storage, apply every registration, and (by default) resume."""
        if self._task_group is None:
            raise RuntimeError("enter the handle first: `async with HarnessHandle(...) as handle`")
        if self._harness is not None:
            raise RuntimeError("the session is already open")
        harness = await Harness.open(self._factory(), self._options, ctx)
        harness.scheduler.attach(self._task_group)
        self._harness = harness
        self._removers.clear()
        for install in list(self._registrations):
            self._removers[id(install)] = install(harness)
        if resume:
            await harness.resume(ctx)
        return harness

    async def resume(self, ctx: Context) -> list[int]:
        """Resume the current opening (when opened with ``resume=False``)."""
        return await self.harness.resume(ctx)

    def quiescent(self) -> bool:
        """See :meth:`Harness.quiescent`."""
        return self.harness.quiescent()

    def hold(self) -> Callable[[], None]:
        """See :meth:`Harness.hold` (raises ``NotQuiescent``)."""
        return self.harness.hold()

    async def suspend(self, ctx: Context, *, abort_removed: bool = False) -> None:
        """Cancel every invocation, clear ``waitingOn``, close the storage; records stay live.

        With ``abort_removed`` (explicit host policy), live tasks whose kind is no longer
        registered end ``aborted`` first."""
        harness = self.harness
        self._harness = None
        self._removers.clear()
        await harness.suspend(ctx, abort_removed=abort_removed)

    async def reopen(self, ctx: Context) -> Harness:
        """Open again with the current registrations; ordinary recovery runs."""
        return await self.open(ctx)

    async def close(self, ctx: Context) -> None:
        """Close the current opening, if any (idempotent)."""
        harness, self._harness = self._harness, None
        self._removers.clear()
        if harness is not None:
            await harness.close(ctx)
