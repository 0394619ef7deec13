"""The branch a session is on survives a takeover: it is in the session's storage, not only in
the folder of the machine that ran the worker (coding_agent.worker.activity, BRANCH_NAMESPACE).

Two openers of one session on PostgreSQL, each with its own state folder (two machines, as two
``coding-agent serve`` of a failover pair): on the first, two prompts and a ``/rewind`` to the
second (a new branch); the first worker is SIGKILLed, or closed. The second machine adopts the
session (a folder with no ``activity`` record, as the server makes it) and its worker opens on
that branch, not on the root. A session from before the branch was stored (no record in its
storage) still opens on the branch its folder's ``activity`` record names.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import Client, worker_process, write_script

from chord.context import BACKGROUND
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.services import define_service
from chord.transport import connect_unix
from chord.wire import connect_service_source
from coding_agent.session_files.folders import Session, adopt_session, record_activity
from coding_agent.worker.main import WorkerConfig, open_session_host
from pico3 import Harness, HarnessOptions, JsonlStorage

pytestmark = pytest.mark.anyio

TREE = define_service("coding-agent.session-tree")


@asynccontextmanager
async def attached(socket: Path) -> AsyncIterator[tuple[Client, Any]]:
    """A wire client of the worker on ``socket`` (its root, its status) and the session tree;
    the client is notified of every status change."""
    client = Client()
    tree: list[Any] = []

    def setup(env: FacetEnvironment) -> None:
        tree.append(env.use(TREE))

    async with anyio.create_task_group() as group:
        source = connect_service_source(
            lambda: connect_unix(socket), task_group=group, on_error=lambda _error: None
        )
        try:
            facets = [client.facet(), define_facet("test/tree", setup)]
            async with create_facet_host(facets, service_sources=[source]):
                await client.wait_for(lambda: client.root is not None and not client.root_closed)
                stop = client.status.state.subscribe(lambda *_: client.notify())
                try:
                    yield client, tree[0]
                finally:
                    stop()
        finally:
            await source.aclose()
        group.cancel_scope.cancel()


def status_branch(client: Client) -> Any:
    return client.status.state.value.get("branch")


@pytest.mark.parametrize("end", ["sigkill", "close"])
async def test_a_takeover_opens_the_branch_the_session_is_on(
    session: Session,
    agent_env: dict[str, str],
    tmp_path: Path,
    postgres_cluster: Any,
    end: str,
) -> None:
    url = f"postgresql://{postgres_cluster.user}@127.0.0.1:{postgres_cluster.port}/postgres"
    script = write_script(tmp_path / "script.json", [{"text": "One."}, {"text": "Two."}])
    args = ("--faux-script", str(script), "--no-fsync", "--storage", url, "--lease", "1")
    async with worker_process(session, agent_env, *args) as worker:
        async with attached(worker.socket) as (client, tree):
            await client.root.send({"content": "the first question"}, BACKGROUND)
            await client.wait_for(client.turn_ended)
            await client.root.send({"content": "the second question"}, BACKGROUND)
            await client.wait_for(lambda: client.turn_ended(2))
            root = client.view["conversation"]["id"]
            second = client.entries("pi.user")[1]["id"]
            result = await tree.rewind(root, second, "conversation", [], BACKGROUND)
            branch = result["conversation"]
            assert branch != root
            await client.wait_for(lambda: status_branch(client) == branch)  # stored, then told
        if end == "sigkill":
            await worker.kill()  # its lease stays until it expires; nothing is settled
    assert session.current_branch() == branch  # the first machine's folder knows it

    machine_b = {**agent_env, "XDG_STATE_HOME": str(tmp_path / "machine-b")}
    adopted = adopt_session(session.metadata, env=machine_b)  # what the other server does
    assert adopted.path != session.path and adopted.current_branch() is None
    async with (
        worker_process(adopted, machine_b, *args) as worker,  # waits out a dead holder's lease
        attached(worker.socket) as (client, _tree),
    ):
        await client.wait_for(lambda: "branch" in client.status.state.value)
        assert status_branch(client) == branch, "the takeover opens the branch, not the root"


async def test_a_session_with_no_stored_branch_opens_on_its_activity_record(
    session: Session, tmp_path: Path
) -> None:
    """A session from before the branch was stored: a fork made without the worker (so its
    storage names no branch) and an ``activity`` record naming it, as the worker wrote then."""
    storage = JsonlStorage(str(session.storage_dir), fsync=False, create=False)
    harness = await Harness.open(storage, HarnessOptions(require_approval=False), BACKGROUND)
    async with harness:
        await harness.resume(BACKGROUND)
        root = await harness.root(BACKGROUND)
        fork = (await root.fork("start", BACKGROUND)).id
    record_activity(session, datetime.now(UTC), branch=fork, fsync=False)
    script = write_script(tmp_path / "script.json", [{"text": "One."}])
    config = WorkerConfig(session, faux_script=script, fsync=False, installed_features=True)
    async with open_session_host(config) as runtime:
        assert runtime.status.branch == fork
        root_handle = await runtime.harness.harness.root(BACKGROUND)
        stored = await root_handle.commit(
            lambda tx, _ctx: tx.snapshot("session")["plugins"]["coding-agent.branch"]["branch"],
            BACKGROUND,
        )
        assert stored is None, "opening stores nothing: the branch is stored when it changes"
