"""The model catalog the agent ships: limits, prices and capabilities of the models of every
provider it speaks to (``catalog.json`` beside this module).

The data is generated from models.dev (``apps/coding-agent/scripts/generate_model_catalog.py``
says how and from which snapshot; the file records its source and date) and read once, when a
provider is resolved. It only fills in what the registry would otherwise not know: each
provider's hand-kept bundled models (the defaults, first the default model) keep their own
numbers, the catalog adds the rest, and ``[[models]]`` entries in config.toml replace either.
A model in none of them is still usable, unpriced.
"""

from __future__ import annotations

import functools
from pathlib import Path

import msgspec

from pico3.models import ModelCost, ModelInfo

__all__ = ["CATALOG_FILE", "Catalog", "catalog", "catalog_models"]

CATALOG_FILE = Path(__file__).with_name("catalog.json")


class _Price(msgspec.Struct, frozen=True):
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


class _Model(msgspec.Struct, frozen=True):
    id: str
    context_window: int = 0
    max_output: int = 0
    supports_thinking: bool = False
    supports_images: bool = False
    cost: _Price | None = None


class Catalog(msgspec.Struct, frozen=True):
    """The catalog file: its ``source``, the ``date`` of its newest entry, and the models by
    the agent's provider name (the file's ``generated`` date is for its readers)."""

    source: str
    date: str
    providers: dict[str, list[_Model]]


_NO_WEB_SEARCH = ("claude-2", "claude-instant", "claude-3-haiku", "claude-3-opus",
                  "claude-3-sonnet", "claude-3-5-sonnet-20240620")  # fmt: skip


_OPENAI_WEB_SEARCH = ("gpt-4o", "gpt-4.1", "gpt-5", "o3", "o4-mini")


def _searches(provider: str, model_id: str) -> bool:
    """Whether the provider's own web search tool serves ``model_id`` (models.dev does not
    record it): on ``anthropic`` and ``vertex`` every model since Claude 3.5 Sonnet's second
    release; on ``openai-responses`` the GPT-4o, GPT-4.1, GPT-5, o3 and o4-mini families but
    the nano and audio models; on ``google`` (Google Search grounding, run as a separate
    request) the Gemini 2 and later text models."""
    if provider in ("anthropic", "vertex"):
        return model_id.startswith("claude") and not model_id.startswith(_NO_WEB_SEARCH)
    if provider == "google":  # Google Search grounding: Gemini 2 and later, text models
        return (
            model_id.startswith("gemini-")
            and not model_id.startswith("gemini-1")
            and not any(word in model_id for word in ("embedding", "image", "tts", "live", "audio"))
        )
    if provider == "openai-responses":
        return model_id.startswith(_OPENAI_WEB_SEARCH) and not any(
            word in model_id for word in ("nano", "audio", "realtime")
        )
    return False


@functools.cache
def catalog() -> Catalog:
    """The shipped catalog (read once)."""
    return msgspec.json.decode(CATALOG_FILE.read_bytes(), type=Catalog)


def catalog_models(provider: str, api: str) -> tuple[ModelInfo, ...]:
    """``provider``'s catalog models as :class:`ModelInfo` records of ``api`` (none for a
    provider the catalog does not cover)."""
    out: list[ModelInfo] = []
    for model in catalog().providers.get(provider, ()):
        cost = None if model.cost is None else ModelCost(**msgspec.structs.asdict(model.cost))
        out.append(
            ModelInfo(
                id=model.id,
                provider=provider,
                api=api,
                context_window=model.context_window or 128_000,
                max_output=model.max_output or 16_384,
                cost=cost,
                supports_thinking=model.supports_thinking,
                supports_images=model.supports_images,
                supports_web_search=_searches(provider, model.id),
            )
        )
    return tuple(out)
