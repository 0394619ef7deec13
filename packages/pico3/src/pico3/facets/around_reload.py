"""Around a facet reload: what the session worker does to the harness while facet code is
swapped (docs/design/reload.md#session-worker-reload).

Reload replaces code, never durable state (docs/design/reload.md#registrations). The facet host swaps facets; around that
swap the worker makes the moment safe for the harness, in the least disruptive way::

    if harness.quiescent():               # no invocation exists: nothing to interrupt
        release = harness.hold()          # defer new dispatch and hook chains; commits go on
        await host.reload(candidates)     # old facets' env.own() disposals unregister,
        release()                         # new on_activate re-registers
    else:
        await harness.suspend(ctx)        # cancel invocations, close storage; records stay live
        await host.reload(candidates)
        await harness.reopen(ctx)         # recovery runs against the new registrations

:func:`session_around_reload` packages this as the ``around_reload`` hook of chord's
:class:`~chord.facet_packages.ReloadCoordinator` (the app's ``--dev`` mode)::

    coordinator = ReloadCoordinator(host, generations,
                                    around_reload=session_around_reload(harness))

and :func:`reload_session_facets` is the same thing called directly.

``harness`` is the ``pi.harness`` service (:class:`~pico3.facets.contract.HarnessServiceApi`), whose
``suspend`` closes the conversation instances before the storage closes and whose ``reopen``
returns once every conversation has its new instance. Because registrations are made through
``add_registration`` in ``on_activate`` and released by ``env.own``, and the host retires the old
facets before activating the new ones, the old unregister always runs before the new register
(docs/design/decisions.md#d4) on both paths: while held, the harness stays open and sees that order
directly; while suspended, the registrations are swapped in the handle and applied to the
reopened harness.

If the swap fails the host has already restored the old facets; the harness is released (or
reopened) anyway, so the session carries on with whichever code now serves, and the error goes
to the caller (the coordinator reports it and keeps the old generation).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from chord.context import BACKGROUND, Context
from chord.facet_packages import AroundReload, ReloadableHost
from chord.facets import Facet
from pico3.facets.contract import HarnessServiceApi
from pico3.registration_swap import reload

__all__ = ["ReloadPath", "reload_session_facets", "session_around_reload"]

ReloadPath = Literal["quiescent", "reopened", "closed"]
"""How a swap was guarded: held while quiescent, suspended and reopened, or (no harness open)
not guarded at all."""


async def _guarded(
    harness: HarnessServiceApi,
    perform: Callable[[], Awaitable[None]],
    ctx: Context,
    abort_removed: bool,
) -> ReloadPath:
    if not harness.is_open:
        await perform()  # nothing runs: registrations are applied at the next opening
        return "closed"
    return await reload(harness, perform, ctx, abort_removed=abort_removed)


async def reload_session_facets(
    harness: HarnessServiceApi,
    host: ReloadableHost,
    facets: Sequence[Facet],
    ctx: Context,
    *,
    abort_removed: bool = False,
) -> ReloadPath:
    """``host.reload(facets)`` guarded as in docs/design/reload.md#session-worker-reload; returns the path taken.

    ``abort_removed`` is the explicit host policy of docs/design/reload.md#registrations (live tasks whose kind the new code
    no longer registers end ``aborted``); it only matters on the suspend path.
    """

    async def perform() -> None:
        await host.reload(facets)

    return await _guarded(harness, perform, ctx, abort_removed)


def session_around_reload(
    harness: HarnessServiceApi,
    ctx: Context = BACKGROUND,
    *,
    abort_removed: bool = False,
    on_path: Callable[[ReloadPath], None] | None = None,
) -> AroundReload:
    """The ``around_reload`` hook for :class:`~chord.facet_packages.ReloadCoordinator`.

    ``ctx`` bounds the suspend and reopen (the worker's lifetime context); ``on_path`` learns
    which path each reload took (for the log or a toast).
    """

    async def around_reload(perform: Callable[[], Awaitable[None]]) -> None:
        path = await _guarded(harness, perform, ctx, abort_removed)
        if on_path is not None:
            on_path(path)

    return around_reload
