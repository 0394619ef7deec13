"""A session worker for the wire tests, run as a separate process.

Usage: ``python session_host.py SOCKET_PATH STORE_DIR``. It opens the harness on a JSONL store
in ``STORE_DIR`` through :func:`pico3.facets.harness_session_facet`, resumes it once the facet host
is active (as the session worker does, docs/design/chord.md#built-in-services), serves the host's remotable services
(``pi.conversation``) on a Unix socket, prints ``READY`` and exits when its stdin reaches end of
file, so it never outlives the test process that started it.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio

from chord.context import BACKGROUND
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.transport import serve_unix
from chord.wire import provider_handler
from pico3 import HarnessService, harness_session_facet
from pico3.storage.jsonl import JsonlStorage


async def main(socket_path: str, store: str) -> None:
    box: dict[str, Any] = {}

    def worker(env: FacetEnvironment) -> None:
        box["harness"] = env.use(HarnessService)

    async with anyio.create_task_group() as group:
        session = harness_session_facet(lambda: JsonlStorage(store, fsync=False), task_group=group)
        async with create_facet_host([session, define_facet("worker", worker)]) as host:
            await box["harness"].resume(BACKGROUND)
            await group.start(serve_unix, socket_path, provider_handler(host.services))
            print("READY", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.read)  # EOF: the parent is gone
        group.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
