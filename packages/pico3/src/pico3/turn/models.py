"""How the turn loop finds a model: providers by name, models by ``{provider, modelId}``.

The harness is given providers (``HarnessOptions(services={"models": Models([...])})``); the
conversation's ``model`` config names one of them. :meth:`Models.resolve` answers the provider
and the model's metadata (context window and output limit for the overflow check), or ``None``
when the provider is unknown: the model call then fails ``no_model``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from pico3.models.provider import ModelInfo, ModelProvider
from pico3.tasks.runtime import Runtime

__all__ = ["DEFAULT_RETRY", "Models", "ResolvedModel", "resolve_model", "retry_delay_ms"]


class ResolvedModel(msgspec.Struct, frozen=True):
    """A provider and the metadata of one of its models."""

    provider: ModelProvider
    info: ModelInfo

    @property
    def overflow_limit(self) -> int:
        """Context tokens a request may use: the window minus the output reservation."""
        return self.info.context_window - self.info.max_output


class Models:
    """Providers by name."""

    def __init__(self, providers: Iterable[ModelProvider] = ()) -> None:
        self._providers: dict[str, ModelProvider] = {}
        for provider in providers:
            self.add(provider)

    def add(self, provider: ModelProvider) -> None:
        """Add a provider (its ``name`` must be new)."""
        if provider.name in self._providers:
            raise ValueError(f"a provider named {provider.name!r} is already present")
        self._providers[provider.name] = provider

    def resolve(self, ref: Mapping[str, Any] | None) -> ResolvedModel | None:
        """The model named by a ``{"provider", "modelId"}`` config value, or ``None``."""
        if not ref:
            return None
        provider = self._providers.get(ref.get("provider", ""))
        model_id = ref.get("modelId")
        if provider is None or not isinstance(model_id, str):
            return None
        for info in provider.models():
            if info.id == model_id:
                return ResolvedModel(provider, info)
        return ResolvedModel(provider, ModelInfo(id=model_id, provider=provider.name))


DEFAULT_RETRY: dict[str, Any] = {
    "enabled": True,
    "maxRetries": 3,
    "baseDelayMs": 2000,
    "maxAgentDelayMs": 60000,
}
"""The ``retry`` config default (docs/design/harness.md#configuration)."""


def retry_delay_ms(retry: Mapping[str, Any], attempt: int) -> int | None:
    """Milliseconds to wait after failed attempt ``attempt``, or ``None``: do not retry
    (disabled, or ``attempt > maxRetries``). The delay is ``baseDelayMs * 2^(attempt-1)``,
    capped at ``maxAgentDelayMs``."""
    if not retry.get("enabled", True) or attempt > retry.get("maxRetries", 3):
        return None
    base = retry.get("baseDelayMs", 2000)
    cap = retry.get("maxAgentDelayMs", 60000)
    return int(min(base * 2 ** (attempt - 1), cap))


def resolve_model(rt: Runtime, ref: Any) -> ResolvedModel | None:
    """The provider and model named by ``ref`` through the task runtime's
    ``services["models"]`` (``None``: no such provider, or no models service)."""
    models = rt.services.get("models")
    return models.resolve(ref) if isinstance(models, Models) else None
