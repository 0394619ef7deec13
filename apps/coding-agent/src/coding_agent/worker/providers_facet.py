"""Model providers as a session facet: the harness's :class:`~pico3.turn.models.Models`.

The turn loop finds a conversation's model through ``HarnessOptions.services["models"]``, an
object the worker creates before the harness exists. :func:`resolve_providers` decides what goes
in it — the model chosen by ``--model`` / the environment / the config
(:func:`~coding_agent.worker.providers.resolve_model`), plus the offline ``faux`` provider, which
is always present so ``/model faux/faux-1`` works anywhere, plus every other provider whose
credentials are set (:func:`~coding_agent.worker.providers.registry.reachable_providers`), so
``/model`` lists what the configured keys can reach — and :func:`providers_facet` adds those
providers to the shared ``Models`` when the session's facets are set up.

The faux provider is the :mod:`~coding_agent.worker.demo` one: the built-in tour by default, or
a JSON script (``--faux-script``). It answers from the transcript, so it resumes after a crash.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from chord import Facet, FacetEnvironment, define_facet
from coding_agent.worker.demo import ScriptedProvider, demo_provider, load_script
from coding_agent.worker.providers import resolve_model
from coding_agent.worker.providers.registry import reachable_providers
from pico3 import Models
from pico3.models import ModelInfo, ModelProvider

__all__ = ["PROVIDERS_FACET_ID", "ProviderChoice", "providers_facet", "resolve_providers"]

PROVIDERS_FACET_ID = "coding-agent/providers"


class ProviderChoice(msgspec.Struct, frozen=True):
    """The providers of a session and the model new conversations use."""

    providers: tuple[ModelProvider, ...]
    model: ModelInfo

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
    selection = resolve_model(ref, env=env, config=config)
    faux: ScriptedProvider
    if faux_script is not None:
        faux = ScriptedProvider(load_script(faux_script))
    else:
        faux = demo_provider()
    providers: list[ModelProvider] = [faux]
    model = selection.model
    if model.provider == faux.name:
        model = faux.model(model.id)
    else:
        providers.append(selection.provider)
    skip = frozenset({faux.name, selection.provider.name})
    providers.extend(reachable_providers(env=env, config=config, skip=skip))
    return ProviderChoice(tuple(providers), model)


def providers_facet(models: Models, providers: Sequence[ModelProvider]) -> Facet:
    """A session facet adding ``providers`` to ``models`` (the harness's ``services["models"]``).

    Adding is idempotent by name, so a facet set up again (a reload) changes nothing."""
    chosen = list(providers)

    def setup(env: FacetEnvironment) -> None:
        for provider in chosen:
            if models.resolve({"provider": provider.name, "modelId": "?"}) is None:
                models.add(provider)

    return define_facet(PROVIDERS_FACET_ID, setup)
