"""Model and thinking-level switches become transcript entries (docs/design/agent.md#features).

The worker's settings-log facet watches each conversation's view and writes a
``coding-agent.model_change`` / ``coding-agent.thinking_change`` entry after a config switch,
whoever made it. These tests drive the session host in process through ``pi.harness``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.facets import Facet, FacetEnvironment, define_facet
from chord.state import Delivery
from coding_agent.session_files.folders import Session
from coding_agent.settings.changes import MODEL_CHANGE, THINKING_CHANGE
from coding_agent.worker.main import WorkerConfig, open_session_host
from coding_agent.worker.settings_log import change_entries
from pico3 import ConversationService

pytestmark = pytest.mark.anyio

_KINDS = (MODEL_CHANGE, THINKING_CHANGE)


class _Watcher:
    """A test facet following every conversation's view; :meth:`wait` waits on a predicate."""

    def __init__(self) -> None:
        self.views: dict[int, Any] = {}
        self._changed = anyio.Event()

    def facet(self) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            async def on_instance(instance: Any, ctx: Context) -> None:
                def deliver(value: Any, _ctx: Context, _delivery: Delivery) -> None:
                    if isinstance(value, dict) and "conversation" in value:
                        self.views[value["conversation"]["id"]] = value
                        self._changed.set()
                        self._changed = anyio.Event()

                stop = instance.view.subscribe(deliver)
                try:
                    await ctx.wait_cancelled()
                finally:
                    stop()

            env.observe(ConversationService, on_instance)

        return define_facet("test/settings-watcher", setup)

    def changes(self, conversation_id: int) -> list[dict[str, Any]]:
        view = self.views.get(conversation_id)
        entries = view["entries"] if view is not None else []
        return [{"kind": e["kind"], "data": e["data"]} for e in entries if e["kind"] in _KINDS]

    async def wait(self, predicate: Callable[[], bool], what: str) -> None:
        try:
            with anyio.fail_after(60):
                while not predicate():
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}") from None


def test_change_entries_name_each_switch_and_skip_a_first_model() -> None:
    assert change_entries(("faux/a", "off"), ("faux/b", "off")) == [
        {"kind": MODEL_CHANGE, "data": {"from": "faux/a", "to": "faux/b"}}
    ]
    assert change_entries(("faux/a", "off"), ("faux/b", "high")) == [
        {"kind": MODEL_CHANGE, "data": {"from": "faux/a", "to": "faux/b"}},
        {"kind": THINKING_CHANGE, "data": {"from": "off", "to": "high"}},
    ]
    assert change_entries((None, "off"), ("faux/a", "off")) == []  # a first model replaces none
    assert change_entries((None, "off"), ("faux/a", "low")) == []  # nor its first level
    assert change_entries(("faux/a", "low"), ("faux/a", "low")) == []


async def test_a_switch_is_recorded_once_kept_out_of_context_and_survives_a_restart(
    session: Session,
) -> None:
    watcher = _Watcher()
    config = WorkerConfig(session, installed_features=False)
    async with open_session_host(config, extra_facets=[watcher.facet()]) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)
        before = await root.context(BACKGROUND)
        assert watcher.changes(root.id) == []  # the new conversation's first model: no entry
        await root.set_config({"model": {"provider": "faux", "modelId": "faux-2"}}, BACKGROUND)
        await root.set_config({"thinkingLevel": "high"}, BACKGROUND)
        await root.set_config({"thinkingLevel": "high"}, BACKGROUND)  # no change: no entry
        await watcher.wait(lambda: len(watcher.changes(root.id)) == 2, "two change entries")
        after = await root.context(BACKGROUND)
        recorded = watcher.changes(root.id)

    assert recorded == [
        {"kind": MODEL_CHANGE, "data": {"from": "faux/faux-1", "to": "faux/faux-2"}},
        {"kind": THINKING_CHANGE, "data": {"from": "off", "to": "high"}},
    ]
    assert after.messages == before.messages  # data-only entries are never model context
    assert [e.kind for e in after.entries][-2:] == list(_KINDS)

    watcher = _Watcher()
    async with open_session_host(config, extra_facets=[watcher.facet()]) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)
        await watcher.wait(lambda: root.id in watcher.views, "the reopened view")
        assert watcher.changes(root.id) == recorded  # the hydrate writes nothing new
        stored = await root.entries(BACKGROUND, limit=10)
    assert [e.kind for e in stored if e.kind in _KINDS] == [THINKING_CHANGE, MODEL_CHANGE]
