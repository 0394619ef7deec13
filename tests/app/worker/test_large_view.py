"""A coding-agent session whose view is far over the 8 MiB frame limit is attached, also after a
restart (issue 24 deliver 4 and item 5: it used to be locked out for good). The frames over the
limit — the writes going in, the view's updates, the snapshot a new client attaches to — travel
as runs of ``part`` frames (docs/wire.md, "Large frames")."""

from __future__ import annotations

import pytest
from worker_support import Client, connected, worker_process

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session

pytestmark = pytest.mark.anyio

BLOB = 10 * 1024 * 1024


def _blob(n: int) -> str:
    line = f'note {n}: the quick brown fox jumps over the lazy dog "é😀"\n'
    return (line * (BLOB // len(line) + 1))[:BLOB]


async def test_a_worker_view_of_50_mb_is_attached_after_a_restart(
    session: Session, agent_env: dict[str, str]
) -> None:
    async with (
        worker_process(session, agent_env) as worker,
        connected(Client(), worker.socket) as client,
    ):
        for n in range(5):  # each write is a 10 MiB request, each view update a 10 MiB frame
            await client.root.write({"kind": "note", "data": {"text": _blob(n)}}, BACKGROUND)
        await client.wait_for(lambda: len(client.entries("note")) == 5)
    async with (  # a new worker on the same session, and a client that never saw it
        worker_process(session, agent_env) as worker,
        connected(Client(), worker.socket) as client,
    ):
        texts = [entry["data"]["text"] for entry in client.entries("note")]
        assert texts == [_blob(n) for n in range(5)]
        assert sum(len(text.encode()) for text in texts) > 50 * 1024 * 1024
