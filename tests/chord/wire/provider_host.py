"""A provider host for the wire tests, run as a separate process.

Usage: ``python provider_host.py SOCKET_PATH LABEL`` (or ``--stdio LABEL`` to serve one peer over
stdin/stdout instead of a socket). It hosts one facet providing

* ``test.wire.proc.counter`` (singleton): state ``{"count", "events", "label"}`` and methods
  ``bump(amount)``, ``wait(tag)`` (blocks until its context is cancelled, recording
  ``started <tag>`` and ``cancelled <tag>`` in ``events``), ``open_session(key)``,
  ``close_session(key)``;
* ``test.wire.proc.sessions`` (keyed): per key a state ``{"key", "lines"}`` and ``say(text)``.

It serves them on a Unix socket, prints ``READY`` once listening, and exits when its stdin
reaches end of file, so it never outlives the test process that started it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import anyio

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.services import define_service
from chord.state import replicated_state
from chord.transport import serve_unix, stdio_connection
from chord.wire import provider_handler, serve_provider

Counter = define_service("test.wire.proc.counter")
Sessions = define_service("test.wire.proc.sessions")


def _append(key: str, item: Any) -> Callable[[Any], None]:
    def mutate(draft: Any) -> None:
        draft[key].append(item)

    return mutate


def provider(env: FacetEnvironment, label: str) -> None:
    state: Any = replicated_state({"count": 0, "events": [], "label": label})
    sessions = env.provide_many(Sessions)
    closers: dict[str, Callable[[], None]] = {}

    def bump(amount: int, ctx: Context) -> int:
        state.change(ctx, lambda draft: draft.__setitem__("count", draft["count"] + amount))
        return state.value["count"]

    async def wait(tag: str, ctx: Context) -> str:
        state.change(BACKGROUND, _append("events", f"started {tag}"))
        try:
            await anyio.sleep_forever()
        finally:
            if ctx.cancelled:
                state.change(BACKGROUND, _append("events", f"cancelled {tag}"))
        return tag  # pragma: no cover - only cancellation ends the wait

    def open_session(key: str, ctx: Context) -> None:
        session: Any = replicated_state({"key": key, "lines": []})

        def say(text: str, ctx: Context) -> int:
            session.change(ctx, _append("lines", text))
            return len(session.value["lines"])

        closers[key] = sessions.spawn(key, {"state": session, "say": say})

    def close_session(key: str, ctx: Context) -> None:
        closers.pop(key)()

    env.provide(
        Counter,
        {
            "state": state,
            "bump": bump,
            "wait": wait,
            "open_session": open_session,
            "close_session": close_session,
        },
    )


async def main(path: str, label: str) -> None:
    facet = define_facet("provider", lambda env: provider(env, label))
    async with create_facet_host([facet]) as host, anyio.create_task_group() as group:
        await group.start(serve_unix, path, provider_handler(host.services))
        print("READY", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)  # EOF: the parent is gone
        group.cancel_scope.cancel()


async def main_stdio(label: str) -> None:
    facet = define_facet("provider", lambda env: provider(env, label))
    async with create_facet_host([facet]) as host:
        await serve_provider(stdio_connection(), host.services)  # returns at end of stdin


if __name__ == "__main__":
    if sys.argv[1] == "--stdio":
        anyio.run(main_stdio, sys.argv[2])
    else:
        anyio.run(main, sys.argv[1], sys.argv[2])
