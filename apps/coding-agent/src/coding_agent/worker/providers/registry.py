"""Choosing a provider and model from ``--model``, the environment and a config dict.

Resolution, in order:

1. ``--model provider/id`` (the id may itself contain ``/``, as local model names often do)
   names the provider and the model. ``faux``, ``anthropic`` and ``openai`` are built in; a
   provider of the user's own (a ``[providers.NAME]`` with ``api = "openai-completions"`` and
   a ``base_url``, or one of pi's
   ``models.json``) is an OpenAI-compatible server made as a preset is.
2. Without ``--model``, the config's ``default_model`` is used if set.
3. Otherwise the first provider with credentials wins: ``ANTHROPIC_API_KEY``, then
   ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL``; with none, the offline ``faux`` provider.

A model its provider does not list is refused (:class:`UnknownModel`, naming it and listing the
provider's models): the catalog is the bundled models, the shipped catalog and the config's
``[[models]]`` entries (and, for ``faux``, a ``--faux-script``'s ``models``). Only an
OpenAI-compatible server (a preset such as ``ollama``, or any provider given a ``base_url``)
takes any id, since what it hosts cannot be listed ahead (:func:`serves_any_model`).

Credentials and endpoints come from the config first, then the environment:
``ANTHROPIC_API_KEY`` (and ``ANTHROPIC_BASE_URL``), ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``
(``openai`` and ``openai-responses`` share them); ``google``: ``GEMINI_API_KEY`` or
``GOOGLE_API_KEY`` (``GOOGLE_GEMINI_BASE_URL``); ``bedrock``: ``AWS_REGION`` (or
``AWS_DEFAULT_REGION``), ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``,
``AWS_PROFILE`` or a Bedrock API key ``AWS_BEARER_TOKEN_BEDROCK``; ``vertex``:
``ANTHROPIC_VERTEX_PROJECT_ID`` (or ``GOOGLE_CLOUD_PROJECT``), ``CLOUD_ML_REGION`` (default
``global``) and Google credentials (``GOOGLE_APPLICATION_CREDENTIALS`` or Application Default
Credentials; a static access token as ``api_key``). Cloud credentials are read when the
provider is made: the worker withholds them from its own environment afterwards.
An OpenAI-compatible local server needs no real key; ``"local"`` is sent when none is set.

Tool calling (OpenAI-compatible models only): ``native`` sends the API's ``tools`` parameter,
``text`` teaches the model a fenced-block convention instead
(:mod:`~coding_agent.worker.providers.text_tools`). ``CODING_AGENT_TOOL_CALLING`` (what the
``--tool-calling`` flag sets) applies to every model when set; otherwise a model's own
``tool_calling`` entry, then ``providers.openai.compat.tool_calling``, then ``native``. Either
way a model whose server refuses tools switches to ``text`` by itself.

The config dict (validated, unknown keys refused with their path)::

    {
      "default_model": "anthropic/claude-sonnet-4-6",
      "providers": {
        "openai": {"base_url": "http://localhost:11434/v1", "api_key": "ollama",
                    "compat": {"max_tokens_field": "max_tokens", "reasoning_effort": false}},
      },
      "models": [
        {"provider": "openai", "id": "qwen3:8b", "context_window": 40960, "max_output": 8192},
        {"provider": "openai", "id": "gemma3:4b", "tool_calling": "text"}
      ]
    }

``models`` entries add to or replace the bundled metadata (prices are per million tokens).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from coding_agent.settings.model_config import (
    AWS_SECRET_VARIABLES,
    LOCAL_COMPAT,
    OPENAI_COMPAT,
    PRESETS,
    PROVIDERS,
    TOOL_CALLING_ENV,
    TOOL_CALLING_MODES,
    Preset,
    RegistryConfig,
    RegistryError,
    ToolCalling,
    UnknownModel,
    custom_preset,
    custom_providers,
    key_env,
    parse_model_ref,
    parse_registry_config,
    provider_setting,
)
from coding_agent.worker.providers.anthropic import ANTHROPIC_MODELS, AnthropicProvider
from coding_agent.worker.providers.catalog import catalog_models
from coding_agent.worker.providers.openai import OPENAI_MODELS, OpenAIProvider
from pico3.models import (
    FAUX_MODEL,
    FauxProvider,
    ModelInfo,
    ModelProvider,
    RetryPolicy,
    Sleep,
)

__all__ = [
    "ModelSelection",
    "check_known_model",
    "faux_models",
    "reachable_providers",
    "resolve_model",
    "serves_any_model",
]


class ModelSelection(msgspec.Struct, frozen=True):
    """The resolved provider and the model's metadata; ``ref`` is ``provider/id``."""

    provider: ModelProvider
    model: ModelInfo

    @property
    def ref(self) -> str:
        """``provider/id``."""
        return f"{self.model.provider}/{self.model.id}"


def _forced_tool_calling(env: Mapping[str, str]) -> ToolCalling | None:
    value = env.get(TOOL_CALLING_ENV)
    if not value:
        return None
    if value not in TOOL_CALLING_MODES:
        raise RegistryError(
            f"{TOOL_CALLING_ENV} (or --tool-calling) must be one of "
            f"{', '.join(TOOL_CALLING_MODES)}, got {value!r}"
        )
    return value  # pyright: ignore[reportReturnType]


def faux_models(
    config: Mapping[str, Any] | None = None, extra: Sequence[ModelInfo] = ()
) -> tuple[ModelInfo, ...]:
    """The ``faux`` provider's models: ``faux-1``, the config's ``[[models]]`` entries with
    ``provider = "faux"``, then ``extra`` (a faux script's ``models``) not named yet."""
    known = _models(parse_registry_config(config), "faux", (FAUX_MODEL,))
    ids = {model.id for model in known}
    return (*known, *(model for model in extra if model.id not in ids))


def serves_any_model(
    provider: str, *, env: Mapping[str, str] | None = None, config: Mapping[str, Any] | None = None
) -> bool:
    """Whether ``provider`` takes model ids its catalog does not list: an OpenAI-compatible
    service known by name (``ollama``, ``groq``, …) or any provider given a ``base_url`` (a
    local or proxy server hosts what it hosts). Every other provider serves its catalog only."""
    if provider in PRESETS:
        return True
    if provider == "faux":
        return False
    environ = os.environ if env is None else env
    return bool(provider_setting(parse_registry_config(config), environ, provider, "base_url"))


def check_known_model(
    provider: str,
    model_id: str,
    models: Sequence[ModelInfo],
    *,
    env: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
) -> None:
    """Raise :class:`UnknownModel` when ``provider`` serves only its catalog (``models``) and
    ``model_id`` is not in it; the message lists what is available and how to add a model."""
    ids = [model.id for model in models if model.provider == provider] or [
        model.id for model in models
    ]
    if model_id in ids or serves_any_model(provider, env=env, config=config):
        return
    shown = ", ".join(f"{provider}/{i}" for i in ids[:12])
    more = f" and {len(ids) - 12} more" if len(ids) > 12 else ""
    source = parse_registry_config(config).source
    hint = f'add a [[models]] entry (provider = "{provider}", id = "{model_id}") to {source}'
    if provider == "faux":
        hint += ' or {"models": [{"id": "' + model_id + '"}], "steps": [...]} to the --faux-script'

    raise UnknownModel(
        f"unknown model {provider}/{model_id}; available from {provider}: {shown}{more}. "
        f"To use a model not listed, {hint}"
    )


def resolve_model(
    ref: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    retry: RetryPolicy | None = None,
    sleep: Sleep | None = None,
    faux_extra: Sequence[ModelInfo] = (),
) -> ModelSelection:
    """Pick the provider and model (see the module docstring for the rules). A model its
    provider does not serve is refused (:func:`check_known_model`); ``faux_extra`` are the
    faux models a script adds."""
    selection = _select(ref, env=env, config=config, retry=retry, sleep=sleep, faux=faux_extra)
    models = selection.provider.models()
    check_known_model(selection.model.provider, selection.model.id, models, env=env, config=config)
    return selection


def _select(
    ref: str | None,
    *,
    env: Mapping[str, str] | None,
    config: Mapping[str, Any] | None,
    retry: RetryPolicy | None,
    sleep: Sleep | None,
    faux: Sequence[ModelInfo],
) -> ModelSelection:
    environ = os.environ if env is None else env
    settings = parse_registry_config(config)
    forced = _forced_tool_calling(environ)
    if ref is None:
        ref = settings.default_model
    if ref is None:
        if provider_setting(settings, environ, "anthropic", "api_key"):
            ref = f"anthropic/{ANTHROPIC_MODELS[0].id}"
        elif provider_setting(settings, environ, "openai", "api_key") or provider_setting(
            settings, environ, "openai", "base_url"
        ):
            ref = f"openai/{OPENAI_MODELS[0].id}"
        else:
            ref = f"faux/{FAUX_MODEL.id}"
    name, model_id = parse_model_ref(ref)
    if name == "faux":
        provider = FauxProvider(models=faux_models(config, faux))
        return ModelSelection(provider, provider.model(model_id))
    if name == "anthropic":
        key = provider_setting(settings, environ, "anthropic", "api_key")
        if not key:
            raise RegistryError(
                f"anthropic needs an API key: set {key_env(settings, 'anthropic')} "
                f"or providers.anthropic.api_key in {settings.source}"
            )
        chosen = settings.providers.get("anthropic")
        anthropic_provider = AnthropicProvider(
            api_key=key,
            base_url=provider_setting(settings, environ, "anthropic", "base_url"),
            models=_models(settings, "anthropic", ANTHROPIC_MODELS),
            retry=retry,
            sleep=sleep,
            web_search=chosen is None or chosen.web_search,
        )
        return ModelSelection(anthropic_provider, anthropic_provider.model(model_id))
    if name == "openai":
        key = provider_setting(settings, environ, "openai", "api_key")
        base_url = provider_setting(settings, environ, "openai", "base_url")
        if not key and not base_url:
            raise RegistryError(
                f"openai needs an API key: set {key_env(settings, 'openai')} (or OPENAI_BASE_URL "
                "for a local OpenAI-compatible server) or providers.openai.base_url in "
                f"{settings.source}"
            )
        openai_settings = settings.providers.get("openai")
        compat = openai_settings.compat if openai_settings is not None else None
        per_model: dict[str, ToolCalling] = {
            m.id: m.tool_calling
            for m in settings.models
            if m.provider == "openai" and m.tool_calling is not None
        }
        if forced is not None:  # the flag or the environment: every model, no exceptions
            base = compat or (OPENAI_COMPAT if base_url is None else LOCAL_COMPAT)
            compat = msgspec.structs.replace(base, tool_calling=forced)
            per_model = {}
        openai_provider = OpenAIProvider(
            api_key=key or "local",
            base_url=base_url,
            compat=compat,
            models=_models(settings, "openai", OPENAI_MODELS),
            retry=retry,
            sleep=sleep,
            tool_calling=per_model,
        )
        return ModelSelection(openai_provider, openai_provider.model(model_id))
    preset = _preset_for(name, settings)
    if preset is not None:
        return _preset(preset, model_id, settings, environ, config, forced, retry, sleep)
    if name == "openai-responses":
        key = provider_setting(settings, environ, name, "api_key")
        base_url = provider_setting(settings, environ, name, "base_url")
        if not key and not base_url:
            raise RegistryError(
                f"openai-responses needs an API key: set {key_env(settings, name)} or "
                f"providers.openai-responses.api_key in {settings.source}"
            )
        # lazy: start-up time (an SDK loads only when its provider is used; a provider
        # without its settings, which every worker asks about, loads nothing)
        from coding_agent.worker.providers.openai_responses import (
            RESPONSES_MODELS,
            OpenAIResponsesProvider,
        )

        responses_provider = OpenAIResponsesProvider(
            api_key=key or "local",
            base_url=base_url,
            models=_models(settings, name, RESPONSES_MODELS),
            retry=retry,
            sleep=sleep,
            web_search=(chosen := settings.providers.get(name)) is None or chosen.web_search,
        )
        return ModelSelection(responses_provider, responses_provider.model(model_id))
    if name == "google":
        key = provider_setting(settings, environ, name, "api_key") or environ.get("GOOGLE_API_KEY")
        if not key:
            raise RegistryError(
                f"google needs an API key: set {key_env(settings, name)} (or GOOGLE_API_KEY) or "
                f"providers.google.api_key in {settings.source}"
            )
        # lazy: start-up time (an SDK loads only when its provider is used; a provider
        # without its settings, which every worker asks about, loads nothing)
        from coding_agent.worker.providers.google import GOOGLE_MODELS, GoogleProvider

        google_provider = GoogleProvider(
            api_key=key,
            base_url=provider_setting(settings, environ, name, "base_url"),
            models=_models(settings, name, GOOGLE_MODELS),
            retry=retry,
            sleep=sleep,
            web_search=(chosen := settings.providers.get(name)) is None or chosen.web_search,
        )
        return ModelSelection(google_provider, google_provider.model(model_id))
    if name == "vertex":
        project = provider_setting(settings, environ, name, "project") or environ.get(
            "GOOGLE_CLOUD_PROJECT"
        )
        if not project:
            raise RegistryError(
                "vertex needs a Google Cloud project: set ANTHROPIC_VERTEX_PROJECT_ID or "
                f"providers.vertex.project in {settings.source}"
            )
        # lazy: start-up time (an SDK loads only when its provider is used; a provider
        # without its settings, which every worker asks about, loads nothing)
        from coding_agent.worker.providers.cloud import VERTEX_MODELS, VertexProvider

        vertex_provider = VertexProvider(
            api_key=provider_setting(settings, environ, name, "api_key") or "",
            base_url=provider_setting(settings, environ, name, "base_url"),
            region=provider_setting(settings, environ, name, "region") or "global",
            project=project,
            credentials_file=environ.get("GOOGLE_APPLICATION_CREDENTIALS") or None,
            models=_models(settings, name, VERTEX_MODELS),
            retry=retry,
            sleep=sleep,
        )
        vertex_settings = settings.providers.get(name)
        vertex_provider.web_search = vertex_settings is None or vertex_settings.web_search
        return ModelSelection(vertex_provider, vertex_provider.model(model_id))
    if name == "bedrock":
        region = provider_setting(settings, environ, name, "region") or environ.get(
            "AWS_DEFAULT_REGION"
        )
        if not region:
            raise RegistryError(
                "bedrock needs an AWS region: set AWS_REGION or providers.bedrock.region in "
                f"{settings.source}"
            )
        # lazy: start-up time (an SDK loads only when its provider is used; a provider
        # without its settings, which every worker asks about, loads nothing)
        from coding_agent.worker.providers.cloud import BEDROCK_MODELS, BedrockProvider

        bedrock_provider = BedrockProvider(
            api_key=provider_setting(settings, environ, name, "api_key") or "",
            base_url=provider_setting(settings, environ, name, "base_url"),
            region=region,
            aws={k: environ[k] for k in AWS_SECRET_VARIABLES[:3] if environ.get(k)},
            profile=provider_setting(settings, environ, name, "profile"),
            models=_models(settings, name, BEDROCK_MODELS),
            retry=retry,
            sleep=sleep,
        )
        return ModelSelection(bedrock_provider, bedrock_provider.model(model_id))
    known = ", ".join((*PROVIDERS, *custom_providers(settings)))
    raise RegistryError(
        f"unknown provider {name!r} in {ref!r} (known: {known}; a provider of your own is "
        f'[providers.{name}] with api = "openai-completions" and a base_url in '
        f"{settings.source})"
    )


def reachable_providers(
    *,
    env: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    skip: frozenset[str] = frozenset(),
) -> list[ModelProvider]:
    """Every provider (but those named in ``skip`` and ``faux``) whose credentials are set in
    ``env`` or ``config``, made as :func:`resolve_model` makes it: what ``/model`` can switch to.
    A local preset counts once ``[providers.NAME]`` configures it; Bedrock once a region and a
    credential (keys, a profile, an API key, or a ``[providers.bedrock]`` table) are set."""
    environ = os.environ if env is None else env
    settings = parse_registry_config(config)
    found: list[ModelProvider] = []
    for name in (*PROVIDERS, *custom_providers(settings)):
        if name in skip or name == "faux" or not _has_credentials(name, settings, environ):
            continue
        try:
            selection = _select(
                f"{name}/-", env=environ, config=config, retry=None, sleep=None, faux=()
            )  # the provider, whatever model: ``-`` names none
            found.append(selection.provider)
        except RegistryError:
            continue  # half configured: the provider says what is missing when chosen
    return found


def unreachable_providers(
    *,
    env: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    skip: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """Why each provider :func:`reachable_providers` leaves out cannot be used, by name: the
    error :func:`resolve_model` gives for it, which names the environment variable or the
    ``config.toml`` key to set (``"anthropic needs an API key: set ANTHROPIC_API_KEY or ..."``),
    or, for a local server's preset nobody configured, that it needs a ``[providers.NAME]``
    table. ``/model`` shows these, and a request to such a model fails with them."""
    environ = os.environ if env is None else env
    settings = parse_registry_config(config)
    found: dict[str, str] = {}
    for name in (*PROVIDERS, *custom_providers(settings)):
        if name in skip or name == "faux":
            continue
        try:
            _select(f"{name}/-", env=environ, config=config, retry=None, sleep=None, faux=())
        except RegistryError as error:
            found[name] = str(error)
            continue
        if not _has_credentials(name, settings, environ):
            found[name] = (
                f"{name} is not set up: add a [providers.{name}] table (its base_url) to "
                f"{settings.source}"
            )
    return found


def _has_credentials(name: str, settings: RegistryConfig, env: Mapping[str, str]) -> bool:
    key = provider_setting(settings, env, name, "api_key")
    if name == "google":
        return bool(key or env.get("GOOGLE_API_KEY"))
    if name == "bedrock":
        region = provider_setting(settings, env, name, "region") or env.get("AWS_DEFAULT_REGION")
        signed = any(env.get(k) for k in AWS_SECRET_VARIABLES[:2])
        profile = provider_setting(settings, env, name, "profile")
        return bool(region and (key or signed or profile or name in settings.providers))
    if name == "vertex":
        return bool(
            provider_setting(settings, env, name, "project") or env.get("GOOGLE_CLOUD_PROJECT")
        )
    if name == "openai":
        return bool(key or provider_setting(settings, env, name, "base_url"))
    preset = _preset_for(name, settings)
    if preset is not None and preset.key_variable is None:
        return name in settings.providers
    return bool(key)


def _preset_for(name: str, settings: RegistryConfig) -> Preset | None:
    """The OpenAI-compatible preset ``name`` is: one known by name, or a provider of the
    user's own (:func:`~coding_agent.settings.model_config.custom_preset`); else ``None``."""
    return PRESETS.get(name) or custom_preset(settings, name)


def _preset(
    preset: Preset,
    model_id: str,
    settings: RegistryConfig,
    environ: Mapping[str, str],
    config: Mapping[str, Any] | None,
    forced: ToolCalling | None,
    retry: RetryPolicy | None,
    sleep: Sleep | None,
) -> ModelSelection:
    """An OpenAI-compatible preset: its table row (or a provider of the user's own), with the
    config's settings on top (the ``compat`` keys given replace the preset's, the others
    stay)."""
    name = preset.name
    key = provider_setting(settings, environ, name, "api_key")
    if not key and preset.key_variable is not None:
        raise RegistryError(
            f"{name} needs an API key: set {key_env(settings, name)} or "
            f"providers.{name}.api_key in {settings.source}"
        )
    raw = dict((config or {}).get("providers", {}).get(name, {}).get("compat") or {})
    compat = msgspec.structs.replace(preset.compat, **raw)
    per_model: dict[str, ToolCalling] = {
        m.id: m.tool_calling
        for m in settings.models
        if m.provider == name and m.tool_calling is not None
    }
    if forced is not None:
        compat = msgspec.structs.replace(compat, tool_calling=forced)
        per_model = {}
    models = _models(settings, name, (), OPENAI_MODELS[0].api)
    provider = OpenAIProvider(
        name=name,
        api_key=key or "local",
        base_url=provider_setting(settings, environ, name, "base_url") or preset.base_url,
        compat=compat,
        models=models,
        retry=retry,
        sleep=sleep,
        tool_calling=per_model,
    )
    return ModelSelection(provider, provider.model(model_id))


def _models(
    config: RegistryConfig, provider: str, bundled: Sequence[ModelInfo], api: str | None = None
) -> tuple[ModelInfo, ...]:
    """``provider``'s models: the bundled ones (first the default), then the shipped
    catalog's others (:mod:`.catalog`), each replaced by a ``[[models]]`` entry of the same id,
    then the entries for models neither knows."""
    api = api or bundled[0].api
    known = [*bundled]
    ids = {m.id for m in bundled}
    known.extend(m for m in catalog_models(provider, api) if m.id not in ids)
    overrides = {m.id: m.info(api) for m in config.models if m.provider == provider}
    merged = [overrides.pop(m.id, m) for m in known]
    return (*merged, *overrides.values())
