"""The session host in process: the root conversation's model and tool selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session, create_session
from coding_agent.worker.main import WorkerConfig, _sole, open_session_host  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.anyio


FAUX_MODELS = {
    "models": [{"provider": "faux", "id": "faux-large"}, {"provider": "faux", "id": "faux-mini"}]
}
"""Faux models beside faux-1, registered as a user's config.toml would (an unknown one is refused)."""


async def root_config(config: WorkerConfig) -> dict[str, object]:
    async with open_session_host(config) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)
        return await root.config(BACKGROUND)


async def test_the_model_is_set_once_and_changed_only_when_chosen(session: Session) -> None:
    first = await root_config(WorkerConfig(session, model_config=FAUX_MODELS))
    assert first["model"] == {"provider": "faux", "modelId": "faux-1"}
    tools = first["selectedTools"]
    assert isinstance(tools, list)
    assert tools[:7] == ["read", "bash", "edit", "write", "grep", "find", "ls"]
    chosen = await root_config(
        WorkerConfig(session, model="faux/faux-large", model_config=FAUX_MODELS)
    )
    assert chosen["model"] == {"provider": "faux", "modelId": "faux-large"}
    again = await root_config(WorkerConfig(session, model_config=FAUX_MODELS))  # keeps it
    assert again["model"] == {"provider": "faux", "modelId": "faux-large"}
    assert again["selectedTools"] == tools


async def test_a_session_created_with_a_model_starts_with_it(
    project: Path, agent_env: dict[str, str]
) -> None:
    session = create_session(project, model="faux/faux-mini", env=agent_env)
    config = await root_config(WorkerConfig(session, model_config=FAUX_MODELS))
    assert config["model"] == {"provider": "faux", "modelId": "faux-mini"}


async def test_an_unknown_model_is_refused_naming_it_and_listing_the_known_ones(
    project: Path, agent_env: dict[str, str]
) -> None:
    from coding_agent.settings.model_config import UnknownModel

    session = create_session(project, model="faux/nope", env=agent_env)
    with pytest.raises(UnknownModel, match=r"unknown model faux/nope; available from faux: "
                       r"faux/faux-1, faux/faux-large, faux/faux-mini\."):  # fmt: skip
        await root_config(WorkerConfig(session, model_config=FAUX_MODELS))
    assert not session.worker_running()


async def test_the_session_lock_is_released_after_a_failed_start(session: Session) -> None:
    with pytest.raises(ValueError, match="cannot read the faux script"):
        async with open_session_host(WorkerConfig(session, faux_script=Path("/nonexistent"))):
            pass  # pragma: no cover - never entered
    assert not session.worker_running()
    assert (await root_config(WorkerConfig(session)))["model"] is not None


def test_a_usage_error_inside_task_groups_is_reported_as_itself() -> None:
    # the worker's main() unwraps single-member exception groups so a usage error raised inside
    # the serve task group (e.g. --permission-mode without the approval feature) exits 2 with
    # its message, not a traceback
    inner = ValueError("--permission-mode needs the approval feature")
    nested = BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [inner])])
    assert _sole(nested) is inner
    several = BaseExceptionGroup("two", [ValueError("a"), KeyError("b")])
    assert _sole(several) is several
