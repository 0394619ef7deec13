"""The shipped model catalog: generated from its source snapshot, used by the registry for the
models it does not bundle (their limits, capabilities and the prices a turn's cost uses), and
overridden by ``[[models]]``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from stub_server import Reply, StubServer, sse

from chord.context import BACKGROUND
from coding_agent.worker.providers.catalog import CATALOG_FILE, catalog
from coding_agent.worker.providers.registry import resolve_model
from pico3.models import DoneEvent, Request, UserMessage

SCRIPT = Path(__file__).parents[3] / "apps/coding-agent/scripts/generate_model_catalog.py"


def test_the_shipped_catalog_is_its_source_snapshot_regenerated(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("generate_model_catalog", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    fresh = tmp_path / "catalog.json"
    script.main(fresh)
    regenerated, shipped = json.loads(fresh.read_text()), json.loads(CATALOG_FILE.read_text())
    for key in ("source", "date", "providers"):
        assert regenerated[key] == shipped[key], (
            f"catalog.json is stale in {key!r}: rerun {SCRIPT.name}"
        )
    loaded = catalog()
    assert loaded.source.startswith("https://models.dev") and loaded.date
    for provider in ("anthropic", "openai", "openai-responses", "google", "bedrock", "vertex",
                     "openrouter", "groq", "deepseek", "mistral"):  # fmt: skip
        assert loaded.providers[provider], provider
    assert all("anthropic." in m.id for m in loaded.providers["bedrock"])


def test_a_catalog_model_has_its_limits_prices_and_capabilities() -> None:
    selection = resolve_model("anthropic/claude-3-5-haiku-20241022", env={"ANTHROPIC_API_KEY": "k"})
    model = selection.model
    assert (model.context_window, model.max_output) == (200_000, 8192)
    assert model.cost is not None and (model.cost.input, model.cost.output) == (0.8, 4.0)
    assert model.supports_images and not model.supports_thinking
    gpt5 = resolve_model("openai-responses/gpt-5-mini", env={"OPENAI_API_KEY": "k"}).model
    assert gpt5.supports_thinking and gpt5.provider == "openai-responses"
    # the bundled defaults keep their own entry and their place first
    assert selection.provider.models()[0].id == "claude-sonnet-4-6"


def test_models_entries_override_the_catalog() -> None:
    config = {"models": [{"provider": "deepseek", "id": "deepseek-chat", "context_window": 1000,
                          "cost": {"input": 9.0, "output": 9.0}}]}  # fmt: skip
    model = resolve_model(
        "deepseek/deepseek-chat", env={"DEEPSEEK_API_KEY": "k"}, config=config
    ).model
    assert model.context_window == 1000 and model.cost is not None and model.cost.input == 9.0


@pytest.mark.anyio
async def test_a_turns_cost_uses_the_catalogs_prices() -> None:
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000, "total_tokens": 2_000_000,
             "prompt_tokens_details": {"cached_tokens": 500_000}}  # fmt: skip

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        return sse({"id": "c", "object": "chat.completion.chunk", "created": 1,
                    "model": "deepseek-chat", "choices": choices, **extra})  # fmt: skip

    events = [chunk({"content": "ok"}), chunk({}, "stop"), chunk(None, usage=usage), sse("[DONE]")]
    with StubServer([Reply(events=events)]) as server:
        selection = resolve_model(
            "deepseek/deepseek-chat",
            env={"DEEPSEEK_API_KEY": "k"},
            config={"providers": {"deepseek": {"base_url": f"{server.url}/v1"}}},
        )
        provider: Any = selection.provider
        try:
            request = Request(model="deepseek-chat", messages=[UserMessage(content="hi")])
            out = [e async for e in provider.stream(request, BACKGROUND)]
        finally:
            await provider.aclose()
    done = out[-1]
    assert isinstance(done, DoneEvent) and done.message.usage is not None
    # catalog: input 0.14, output 0.28, cache_read 0.028 dollars per million tokens
    assert done.message.usage.cost.total == pytest.approx(0.5 * 0.14 + 1 * 0.28 + 0.5 * 0.028)
