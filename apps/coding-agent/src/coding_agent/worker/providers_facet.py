"""Model providers as a session facet: the harness's :class:`~pico3.turn.models.Models`.

The turn loop finds a conversation's model through ``HarnessOptions.services["models"]``, an
object the worker creates before the harness exists. :func:`resolve_providers` decides what goes
in it — the model chosen by ``--model`` / the environment / the config
(:func:`~coding_agent.worker.providers.resolve_model`), plus the offline ``faux`` provider, which
is always present so ``/model faux/faux-1`` works anywhere, plus every other provider whose
credentials are set (:func:`~coding_agent.worker.providers.registry.reachable_providers`), so
``/model`` lists what the configured keys can reach — and :func:`providers_facet` adds those
providers to the shared ``Models`` when the session's facets are set up.

Every other provider is :attr:`ProviderChoice.unreachable`, with the reason it cannot be used
(:func:`~coding_agent.worker.providers.registry.unreachable_providers`: "anthropic needs an API
key: set ANTHROPIC_API_KEY ..."). The worker's status lists them (``/model`` says which key a
provider needs), and each is added as an :class:`UnconfiguredProvider`, whose every request
fails at once with that reason: a conversation switched to such a model is told which variable
to set, not "unknown model".

The faux provider is the :mod:`~coding_agent.worker.demo` one: the built-in tour by default, or
a JSON script (``--faux-script``). It answers from the transcript, so it resumes after a crash.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import msgspec

from chord import Facet, FacetEnvironment, define_facet
from coding_agent.worker.demo import ScriptedProvider, demo_provider, load_script
from coding_agent.worker.providers import resolve_model
from coding_agent.worker.providers.registry import (
    faux_models,
    reachable_providers,
    serves_any_model,
    unreachable_providers,
)
from pico3 import Models
from pico3.models import MessageBuilder, ModelInfo, ModelProvider, Request, StreamEvent

__all__ = [
    "PROVIDERS_FACET_ID",
    "ProviderChoice",
    "UnconfiguredProvider",
    "providers_facet",
    "resolve_providers",
]

PROVIDERS_FACET_ID = "coding-agent/providers"


class ProviderChoice(msgspec.Struct, frozen=True):
    """The providers of a session and the model new conversations use."""

    providers: tuple[ModelProvider, ...]
    model: ModelInfo
    unreachable: dict[str, str] = msgspec.field(default_factory=dict)
    """The providers without credentials, by name: why each cannot be used (names the key)."""
    any_model: tuple[str, ...] = ()
    """The providers that take ids their catalog does not list (an OpenAI-compatible server:
    :func:`~coding_agent.worker.providers.registry.serves_any_model`); every other provider
    serves only the models it lists."""

    @property
    def ref(self) -> str:
        """``provider/id`` of :attr:`model`."""
        return f"{self.model.provider}/{self.model.id}"

    @property
    def config(self) -> dict[str, str]:
        """The conversation ``model`` config value."""
        return {"provider": self.model.provider, "modelId": self.model.id}


def resolve_providers(
    ref: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    faux_script: str | os.PathLike[str] | None = None,
) -> ProviderChoice:
    """Pick the model (raises :class:`~coding_agent.worker.providers.RegistryError` or
    ``ValueError`` for a bad script, naming the problem) and gather the providers."""
    script = load_script(faux_script) if faux_script is not None else None
    extra = script.models if script is not None else ()
    selection = resolve_model(ref, env=env, config=config, faux_extra=extra)
    models = faux_models(config, extra)  # faux-1, the config's and the script's
    faux = ScriptedProvider(script, models=models) if script is not None else demo_provider(models)
    providers: list[ModelProvider] = [faux]
    model = selection.model
    if model.provider == faux.name:
        model = faux.model(model.id)
    else:
        providers.append(selection.provider)
    skip = frozenset({faux.name, selection.provider.name})
    reachable = reachable_providers(env=env, config=config, skip=skip)
    providers.extend(reachable)
    skip = skip | {provider.name for provider in reachable}
    unreachable = unreachable_providers(env=env, config=config, skip=skip)
    providers.extend(UnconfiguredProvider(name, why) for name, why in unreachable.items())
    any_model = tuple(
        provider.name
        for provider in providers
        if serves_any_model(provider.name, env=env, config=config)
    )
    return ProviderChoice(tuple(providers), model, unreachable, any_model)


class UnconfiguredProvider:
    """A provider the session has no credentials for: it lists no model, and every request
    fails at once (not retried) with ``reason``, which names the key to set."""

    def __init__(self, name: str, reason: str) -> None:
        self._name = name
        self.reason = reason

    @property
    def name(self) -> str:
        return self._name

    def models(self) -> Sequence[ModelInfo]:
        return ()

    def model(self, model_id: str) -> ModelInfo:
        return ModelInfo(id=model_id, provider=self._name)

    async def stream(self, request: Request, ctx: Any) -> AsyncIterator[StreamEvent]:
        del ctx
        builder = MessageBuilder(api=self._name, provider=self._name, model=request.model)
        yield builder.start()
        yield builder.fail(
            "error",
            f"{self.reason} (keys are read when the session's worker starts: set it, quit, "
            "and start the agent again)",
        )


def providers_facet(models: Models, providers: Sequence[ModelProvider]) -> Facet:
    """A session facet adding ``providers`` to ``models`` (the harness's ``services["models"]``).

    Adding is idempotent by name, so a facet set up again (a reload) changes nothing."""
    chosen = list(providers)

    def setup(env: FacetEnvironment) -> None:
        for provider in chosen:
            if models.resolve({"provider": provider.name, "modelId": "?"}) is None:
                models.add(provider)

    return define_facet(PROVIDERS_FACET_ID, setup)
