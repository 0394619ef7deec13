"""Reload's registration swap: new code's registrations under a running session
(docs/design/reload.md#registrations, #session-worker-reload).

This module owns the harness's side of a reload only. Watching sources and loading new facet
generations is chord's (:mod:`chord.facet_packages.reload_coordinator`), wrapping a facet reload in this swap is the
session worker's (:mod:`pico3.facets.around_reload`), and ``/reload`` on demand is the app's
(:mod:`coding_agent.settings.package_reload`).

Reload replaces code, never durable state. What each registration does when it is undone and
redone while the session is open (docs/design/reload.md#registrations):

=============== ======================================= ======================================
contribution    on unregister                           on re-register
=============== ======================================= ======================================
namespace       token stale (``StaleDefinition``)       new token, same stored state and memos
hooks           out of future chains; running ones end  joins the chain
task kind       pending tasks wait (never orphaned);    pending tasks dispatch with the new
                running invocations keep their kind     kind; config keys re-checked
tool / section  revision bump; in-flight keep theirs    same
entry kind      nothing                                 nothing
=============== ======================================= ======================================

Two ways to swap, chosen by :func:`reload`:

* **quiescent** — no invocation exists: ``release = hold()``, swap registrations, ``release()``.
  Nothing is interrupted; pending work dispatches with the new code.
* **suspend and reopen** — otherwise: cancel every invocation and close the storage (records
  stay live), swap, open again; recovery reruns pre-effect phases, replays safe started tools,
  and re-enters in-flight phases. Memos make reruns cheap (a decision already made is not
  asked again). The session is opened again even when ``swap()`` raises (the error then goes to
  the caller), so a failed reload never leaves it suspended.

The target is anything with the harness's four reload methods (:class:`Swappable`): a
:class:`~pico3.handle.HarnessHandle`, or the ``pi.harness`` service
(:mod:`pico3.facets.around_reload` guards a facet reload with it).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Literal, Protocol

from chord.context import Context
from pico3.tasks.scheduler import NotQuiescent

__all__ = ["Swappable", "reload"]


class Swappable(Protocol):
    """What a registration swap needs of a session (HarnessHandle, HarnessServiceApi)."""

    def quiescent(self) -> bool: ...

    def hold(self) -> Callable[[], None]: ...

    async def suspend(self, ctx: Context, *, abort_removed: bool = False) -> None: ...

    def reopen(self, ctx: Context) -> Awaitable[object]: ...


async def reload(
    handle: Swappable,
    swap: Callable[[], Awaitable[None] | None],
    ctx: Context,
    *,
    abort_removed: bool = False,
) -> Literal["quiescent", "reopened"]:
    """Swap registrations with ``swap()`` (which unregisters old and registers new
    contributions, normally through :meth:`HarnessHandle.add_registration` removers) in the
    least disruptive way; returns which path was taken."""
    if handle.quiescent():
        try:
            release = handle.hold()
        except NotQuiescent:
            pass  # an invocation started in between: fall through to suspend/reopen
        else:
            try:
                result = swap()
                if inspect.isawaitable(result):
                    await result
            finally:
                release()
            return "quiescent"
    await handle.suspend(ctx, abort_removed=abort_removed)
    try:
        result = swap()
        if inspect.isawaitable(result):
            await result
    finally:
        await handle.reopen(ctx)
    return "reopened"
