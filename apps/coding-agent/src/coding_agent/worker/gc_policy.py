"""Keeping a long session's data out of the cycle collector's way.

A session worker holds its whole session in memory (entries, documents, the view), and that
heap only grows. CPython's collector rescans long-lived objects on every full collection, so
late in a long session most of a turn's CPU went into collections that free nothing. After each
turn :func:`freeze_after_turns` moves everything alive into the permanent generation
(``gc.freeze()``), so collections look only at what later turns allocate. Cyclic garbage made
of objects frozen while still alive is reclaimed by a full collection (``gc.unfreeze()``,
``gc.collect()``, ``gc.freeze()``) at every ``collect_every``-th turn's end at which the frozen
heap has grown by a quarter since the last one, which bounds what freezing can hold on to to a share
of the heap and keeps the collections' cost per turn flat however long the session.

Opening a long session allocates its whole in-memory state at once (the storage replay, the
views, their snapshots), all of it long-lived. :func:`pause_while_opening` keeps the collector
off for the opening, which would otherwise rescan that growing heap (and the process's whole
heap, once the new objects pass a quarter of it) several times before the host serves, and then
freezes what the opening left, as the turn policy does after every turn.

A headless run (``coding-agent -p``) allocates nothing but long-lived objects between its start
and its first provider request: the modules it imports (the app, chord, pico3, the facets, the
provider SDK), the facet host and the opened session. :func:`pause_for_start_up` keeps the
collector off over that whole span (about 60 ms of CPU were collections that freed nothing:
~150 young and a dozen middle collections, and a full one of the growing heap), and
:func:`start_up_done` ends it: the provider's SDK client ends it once it is made, just before
the first request (:func:`~coding_agent.worker.providers._sdk_import.sdk_client`), and the
command line on every way out. It is one more opening in :func:`pause_while_opening`'s count,
so a host opening inside it leaves the collector off, and ending it during an opening leaves it
off until that opening is done.

A local TUI (``coding-agent``, ``attach``) is the same up to its first frame: Textual, chord,
pico3 and the app it imports and builds then live as long as the process (the pause took ~0.05 s
of CPU, a tenth, off its first frame). The command line ends the pause (without a freeze) once
the first frame is painted and the TUI's facets are loaded
(``coding_agent.tui.main.run_client``'s ``on_painted``).

The interpreter's own exit runs full collections of the whole heap (the modules, the session)
that free nothing the process's end would not: ~100 ms of CPU after a headless run printed its
answer, most of what a short ``-p`` run spends after its stream. :func:`freeze_at_exit` freezes
the heap when the interpreter exits (an ``atexit`` handler), so they walk nothing. Everything of
ours is closed by then (the session host, its storage, the output streams, which the
interpreter flushes itself); what freezing skips is cyclic garbage only the exit would reclaim.
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Callable
from typing import Any, Protocol

__all__ = [
    "freeze_after_turns",
    "freeze_after_turns_shared",
    "freeze_at_exit",
    "pause_for_start_up",
    "pause_while_opening",
    "start_up_done",
]


class _Kernel(Protocol):
    def add_commit_listener(self, listener: Callable[[Any], None]) -> Callable[[], None]: ...


def freeze_after_turns(
    kernel: _Kernel, *, collect_every: int = 200, growth: float = 0.25
) -> Callable[[], None]:
    """Freeze the heap after every commit that ends a turn; returns the remover (which also
    unfreezes). Every ``collect_every`` turns the policy looks at the frozen heap, and a full
    collection runs then if it has grown by ``growth`` of what the last one left (or of what
    the first look found: that look only takes the measure). Looking is itself a walk of the
    frozen heap (``gc.get_freeze_count()``: ~16 ms for two million objects), so it is not done
    at every turn's end, nor when the policy begins (a worker forked by the warm start's
    server begins with the server's whole preload frozen: ~6 ms of its start, walked before
    its first request). A full collection costs time in proportion to
    the whole heap, so at a fixed interval a long session's collections grew with it (0.1-0.2 s
    each by turn 2,000 of the long-session benchmark, ~1 ms per turn on average), while a heap that must grow by a share of
    itself between them keeps their cost per turn flat. It is CPython's own rule for its full
    collections (a quarter of the long-lived objects new since the last), applied to the
    frozen heap, so what freezing holds on to stays a bounded share of it."""
    turns = [0]
    frozen: list[int | None] = [None]  # the frozen heap after the last full collection

    def on_commit(batch: Any) -> None:
        events: dict[int, list[dict[str, Any]]] = batch.events
        if not any(e.get("type") == "turn.ended" for group in events.values() for e in group):
            return
        turns[0] += 1
        gc.freeze()
        if turns[0] < collect_every:
            return
        turns[0] = 0  # gc.get_freeze_count() walks the frozen heap: asked once per interval
        count = gc.get_freeze_count()
        if frozen[0] is None:
            frozen[0] = count  # the first look: the measure
        elif count > frozen[0] * (1 + growth):
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            frozen[0] = gc.get_freeze_count()

    remove = kernel.add_commit_listener(on_commit)

    def stop() -> None:
        remove()
        gc.unfreeze()

    return stop


_shared_turns: list[Any] = [0, None]  # turns since the last look; the frozen heap's size then


def freeze_after_turns_shared(
    kernel: _Kernel, *, collect_every: int = 200, growth: float = 0.25
) -> Callable[[], None]:
    """:func:`freeze_after_turns` for a process hosting many sessions
    (:mod:`coding_agent.worker.host`): one policy for all of them, counting every session's
    turns, and the frozen heap's size is first looked at at the first check (every session
    looking at its start walked the whole heap, which grows with the sessions: 60 ms a start
    at 30 sessions). The remover only removes the listener: the other sessions' objects stay
    frozen."""

    def on_commit(batch: Any) -> None:
        events: dict[int, list[dict[str, Any]]] = batch.events
        if not any(e.get("type") == "turn.ended" for group in events.values() for e in group):
            return
        _shared_turns[0] += 1
        gc.freeze()
        if _shared_turns[0] < collect_every:
            return
        _shared_turns[0] = 0
        count = gc.get_freeze_count()
        if _shared_turns[1] is None:
            _shared_turns[1] = count  # the first look: the baseline
        elif count > _shared_turns[1] * (1 + growth):
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            _shared_turns[1] = gc.get_freeze_count()

    return kernel.add_commit_listener(on_commit)


_openings = [0, False]  # openings in progress; whether the collector was on before the first


def pause_while_opening() -> Callable[[bool], None]:
    """Pause the cycle collector while a session host opens; returns ``done(opened)``, to be
    called once the host is open (``opened=True``: what is alive is frozen, the session state
    the collector need not rescan) and again on every way out (later calls do nothing). The
    collector is on again once every opening in progress is done, if it was on before the
    first began; an opening leaves only a few dozen objects of cyclic garbage, reclaimed at the
    turn policy's next full collection."""
    if _openings[0] == 0:
        _openings[1] = gc.isenabled()
        gc.disable()
    _openings[0] += 1
    pending = [True]

    def done(opened: bool) -> None:
        if not pending[0]:
            return
        pending[0] = False
        if opened:
            gc.freeze()
        _openings[0] -= 1
        if _openings[0] == 0 and _openings[1]:
            gc.enable()

    return done


_start_up: list[Callable[[bool], None]] = []  # the start-up pause's done(), while it lasts


def pause_for_start_up() -> None:
    """Pause the cycle collector until :func:`start_up_done` (a process's start-up: see the
    module doc). Does nothing while a start-up pause is on already."""
    if not _start_up:
        _start_up.append(pause_while_opening())


def start_up_done(*, freeze: bool = True) -> None:
    """End the start-up pause, if one is on: the collector is on again (unless an opening is in
    progress, or it was off before the pause), what is alive frozen first when ``freeze`` (the
    SDK client: the start-up's objects are the process's long-lived ones; a command line that is
    done, or one that runs something else, freezes nothing). Idempotent; a process that never
    paused is left alone."""
    while _start_up:
        _start_up.pop()(freeze)


_at_exit: list[bool] = []  # whether freeze_at_exit registered its handler


def freeze_at_exit() -> None:
    """Freeze the heap when the interpreter exits, so its exit's collections skip it (see the
    module doc). Registered once per process; a process that goes on (a test calling the
    command line in-process) is not touched before its own exit."""
    if not _at_exit:
        _at_exit.append(True)
        atexit.register(gc.freeze)
