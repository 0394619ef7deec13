"""The worker's status document (coding_agent.worker.status) and what the TUI makes of it."""

from __future__ import annotations

from typing import Any

import pytest

from chord.facets import create_facet_host, define_facet
from coding_agent.contracts import WorkerStatusService
from coding_agent.worker.status import WorkerStatus

pytestmark = pytest.mark.anyio


async def test_a_text_tool_calling_switch_is_published_once_per_model() -> None:
    status = WorkerStatus(session_id="s", cwd="/p", dev=False)
    seen: list[Any] = []

    def client(env: Any) -> None:
        handle = env.use(WorkerStatusService)
        env.on_activate(lambda: seen.append(handle))

    async with create_facet_host([status.facet(), define_facet("test/client", client)]):
        state = seen[0].state
        assert state.value["textToolCalling"] == []
        status.add_text_tool_calling("openai/llama3.2")
        status.add_text_tool_calling("openai/llama3.2")  # said once
        status.add_text_tool_calling("openai/qwen2.5")
        assert state.value["textToolCalling"] == ["openai/llama3.2", "openai/qwen2.5"]
    assert status.document["textToolCalling"] == ["openai/llama3.2", "openai/qwen2.5"]
