"""The worker supervisor: start, reuse, stop, and a start that fails says why."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from coding_agent.session_files.folders import Session
from coding_agent.supervisor import WorkerStartError, WorkerSupervisor

pytestmark = pytest.mark.anyio


async def test_a_running_worker_is_reused_and_only_its_starter_stops_it(
    kit: Any, session: Session, agent_env: dict[str, str]
) -> None:
    first = kit.supervisor(session, agent_env)
    second = kit.supervisor(session, agent_env)
    try:
        assert await first.ensure_started() is True
        assert session.worker_running() and first.pid is not None
        assert await second.ensure_started() is False, "the running worker is reused"
        assert second.pid is None and second.starts == 0
        await second.stop()  # not its worker: nothing happens
        assert session.worker_running()
    finally:
        await first.stop()
    assert not session.worker_running() and first.pid is None


async def test_two_supervisors_starting_at_once_share_one_worker(
    kit: Any, session: Session, agent_env: dict[str, str]
) -> None:
    keepers = [kit.supervisor(session, agent_env) for _ in range(2)]
    results: list[bool] = []

    async def start(keeper: WorkerSupervisor) -> None:
        results.append(await keeper.ensure_started())

    try:
        async with anyio.create_task_group() as group:
            for keeper in keepers:
                group.start_soon(start, keeper)
        assert sorted(results) == [False, True]
        assert sum(keeper.pid is not None for keeper in keepers) == 1
        assert session.worker_running()
    finally:
        for keeper in keepers:
            await keeper.stop()
    assert not session.worker_running()


async def test_a_worker_that_cannot_start_raises_with_its_message(
    session: Session, agent_env: dict[str, str]
) -> None:
    keeper = WorkerSupervisor(
        session, model="no-such-provider/model", exit_with_parent=True, env=agent_env
    )
    with pytest.raises(WorkerStartError) as failed:
        await keeper.ensure_started()
    assert "exit status 4" in str(failed.value)  # the worker's EXIT_MODEL
    assert failed.value.status == 4
    assert failed.value.reason().startswith(
        "unknown provider 'no-such-provider' in 'no-such-provider/model' "
        "(known: anthropic, openai, openai-responses, google, bedrock, vertex, faux, openrouter, groq, deepseek, mistral, ollama, lmstudio, vllm, llamacpp; "
        "a provider of your own is [providers.no-such-provider] with api = "
        '"openai-completions" and a base_url in '
    )
    assert keeper.pid is None and not session.worker_running()
