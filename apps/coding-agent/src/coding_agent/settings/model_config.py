"""The models part of config.toml: providers, ``[[models]]``, presets, and where keys come from.

Read by both processes and by the command line: ``coding-agent config`` checks it, the secrets
list withholds every key variable named here from child processes
(:mod:`coding_agent.settings.secret_env`), and the worker's registry
(:mod:`coding_agent.worker.providers.registry`) resolves a model from it. Nothing here talks to a
model: the adapters live in ``worker/providers/``.

* :class:`RegistryConfig` and :func:`parse_registry_config` — the validated ``default_model``,
  ``[providers.NAME]`` and ``[[models]]`` (errors name the offending path);
* :class:`OpenAICompat` — what an OpenAI-compatible server supports, and :data:`PRESETS`, the
  services known by name;
* :func:`key_variables` / :func:`provider_variables` — the environment variables each provider
  reads.

OpenAI-compatible services and local servers by name: ``--model groq/llama-3.3-70b-versatile``.
A provider of the user's own (``[providers.my-llm]`` with ``api = "openai-completions"`` and a
``base_url``, or a provider of pi's
``models.json``) is one more such server, named as the user named it
(:func:`custom_providers`): ``--model my-llm/qwen3-coder``.

Each preset is the Chat Completions adapter (:class:`~coding_agent.worker.providers.openai.OpenAIProvider`) with the
service's base URL, the variable holding its key, and its quirks set in an
:class:`OpenAICompat` profile, so that nothing needs configuring but the key. All of
it is the one table below (:data:`PRESETS`); ``[providers.NAME]`` in config.toml overrides any
part (``base_url``, ``api_key``/``api_key_env``, ``[providers.NAME.compat]``), and
``[[models]]`` entries with ``provider = "NAME"`` give models their limits and prices (a preset
model not listed is unpriced).

The quirks, by column:

* ``max_tokens``: the output-limit field the service takes (``max_completion_tokens`` is
  OpenAI's newer name; most others still read ``max_tokens``);
* ``usage``: whether to send ``stream_options.include_usage`` (a service that rejects unknown
  fields refuses it; one that sends usage anyway needs no asking: the adapter reads usage from
  any chunk that carries it);
* ``effort``: whether ``reasoning_effort`` is sent for thinking levels (only where every model
  takes OpenAI's levels);
* ``thinking``: the delta field that carries the model's reasoning (``reasoning_content`` or
  ``reasoning``; the adapter reads both, the column documents which one to expect);
* ``tools``: ``native`` tool calls; local servers whose model may lack a tool-calling template
  refuse tools with an error, and the adapter then switches that model to ``text`` tool calls
  by itself (see :mod:`coding_agent.worker.providers.text_tools`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from pico3.models import ANTHROPIC_ALIASES, ModelCost, ModelInfo

__all__ = [
    "AWS_SECRET_VARIABLES",
    "CHAT_COMPLETIONS",
    "EXAMPLE_MODEL",
    "GOOGLE_SECRET_VARIABLES",
    "LOCAL_COMPAT",
    "OPENAI_COMPAT",
    "PRESETS",
    "PROVIDERS",
    "TOOL_CALLING_ENV",
    "TOOL_CALLING_MODES",
    "ModelEntry",
    "OpenAICompat",
    "Preset",
    "PriceEntry",
    "ProviderSettings",
    "RegistryConfig",
    "RegistryError",
    "ToolCalling",
    "UnknownModel",
    "claude_code_model",
    "custom_preset",
    "custom_providers",
    "key_env",
    "key_variables",
    "parse_model_ref",
    "parse_registry_config",
    "provider_setting",
    "provider_variables",
]

ToolCalling = Literal["native", "text"]
"""How a model calls tools: the API's ``tools`` parameter, or fenced blocks in its text."""

TOOL_CALLING_MODES: tuple[ToolCalling, ...] = ("native", "text")


class OpenAICompat(msgspec.Struct, frozen=True):
    """What a Chat Completions server supports (pi's compat flags, by their meaning)."""

    usage_in_streaming: bool = True
    """Send ``stream_options.include_usage`` and expect a usage chunk."""
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    """Which request field limits output tokens."""
    developer_role: bool = False
    """Send system sections with role ``developer`` (OpenAI reasoning models)."""
    reasoning_effort: bool = True
    """Send ``reasoning_effort`` for thinking-capable models."""
    tool_calling: ToolCalling = "native"
    """How models call tools unless configured per model: ``native`` or ``text``."""


OPENAI_COMPAT = OpenAICompat()
"""First-party OpenAI."""

LOCAL_COMPAT = OpenAICompat(max_tokens_field="max_tokens", reasoning_effort=False)
"""A conservative profile for local OpenAI-compatible servers (Ollama, llama.cpp, vLLM)."""


class Preset(msgspec.Struct, frozen=True):
    """An OpenAI-compatible service: where it is, which variable holds its key (``None``: a
    local server needing none), what it supports, and which delta field carries reasoning."""

    name: str
    base_url: str
    key_variable: str | None
    compat: OpenAICompat
    thinking_field: str


def _compat(*, max_tokens: str, usage: bool, effort: bool) -> OpenAICompat:
    return OpenAICompat(
        max_tokens_field=max_tokens,  # pyright: ignore[reportArgumentType]
        usage_in_streaming=usage,
        reasoning_effort=effort,
    )


# name          base URL                                   key variable          max_tokens field        usage  effort thinking field
_TABLE: tuple[tuple[str, str, str | None, str, bool, bool, str], ...] = (
    ("openrouter", "https://openrouter.ai/api/v1",            "OPENROUTER_API_KEY", "max_tokens",            True,  False, "reasoning"),
    ("groq",       "https://api.groq.com/openai/v1",          "GROQ_API_KEY",       "max_completion_tokens", True,  False, "reasoning"),
    ("deepseek",   "https://api.deepseek.com/v1",             "DEEPSEEK_API_KEY",   "max_tokens",            True,  False, "reasoning_content"),
    ("mistral",    "https://api.mistral.ai/v1",               "MISTRAL_API_KEY",    "max_tokens",            False, False, "reasoning_content"),
    ("ollama",     "http://127.0.0.1:11434/v1",               None,                 "max_tokens",            True,  False, "reasoning"),
    ("lmstudio",   "http://127.0.0.1:1234/v1",                None,                 "max_tokens",            True,  False, "reasoning_content"),
    ("vllm",       "http://127.0.0.1:8000/v1",                None,                 "max_tokens",            True,  False, "reasoning_content"),
    ("llamacpp",   "http://127.0.0.1:8080/v1",                None,                 "max_tokens",            True,  False, "reasoning_content"),
)  # fmt: skip

PRESETS: dict[str, Preset] = {
    name: Preset(
        name=name,
        base_url=url,
        key_variable=key,
        compat=_compat(max_tokens=field, usage=usage, effort=effort),
        thinking_field=thinking,
    )
    for name, url, key, field, usage, effort, thinking in _TABLE
}
"""The presets by name (the table above)."""


PROVIDERS = (
    "anthropic",
    "openai",
    "openai-responses",
    "google",
    "bedrock",
    "vertex",
    "faux",
    *PRESETS,
)
"""The built-in provider names (the OpenAI-compatible presets last: :mod:`.presets`)."""

CHAT_COMPLETIONS = frozenset({"openai", *PRESETS})
"""The providers speaking Chat Completions (``tool_calling`` applies to their models)."""

AWS_SECRET_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
)
"""The AWS credentials a Bedrock provider reads from the environment (withheld from children)."""

GOOGLE_SECRET_VARIABLES = ("GOOGLE_APPLICATION_CREDENTIALS",)
"""The Google credentials a Vertex provider reads from the environment (withheld too)."""

TOOL_CALLING_ENV = "CODING_AGENT_TOOL_CALLING"
"""The environment variable that forces ``native`` or ``text`` tool calling for every model."""


class RegistryError(ValueError):
    """The model could not be resolved; the message says what to set."""


class UnknownModel(RegistryError):
    """A model its provider does not serve (``--model faux/nope``, a typo in ``/model`` or
    ``model =``): the message names it and lists the provider's models. A usage error (exit 2),
    not a failure."""


class ProviderSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Per-provider settings from the config."""

    api: Literal["openai-completions"] | None = None
    """``openai-completions`` (pi's name for the Chat Completions API) makes a provider of the
    user's own (:func:`custom_providers`); a built-in provider needs none."""
    api_key: str | None = None
    api_key_env: str | None = None
    """The environment variable holding the key (instead of the provider's usual one)."""
    base_url: str | None = None
    compat: OpenAICompat | None = None
    region: str | None = None
    """``bedrock``: the AWS region; ``vertex``: the Vertex location (``global``, ``us-east5``…)."""
    project: str | None = None
    """``vertex``: the Google Cloud project id."""
    profile: str | None = None
    """``bedrock``: the ``~/.aws`` profile (instead of ``AWS_PROFILE``)."""
    web_search: bool = True
    """``anthropic``, ``vertex``, ``openai-responses``, ``google``: search the web with the
    provider's own search where the model has it (``false``: only the ``[web_search]`` backend's
    ``web_search`` tool)."""


class RegistryConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The registry's part of the app config (``source`` names its file in error messages)."""

    default_model: str | None = None
    source: str = "the config file ($XDG_CONFIG_HOME/coding-agent/config.toml)"
    providers: dict[str, ProviderSettings] = msgspec.field(default_factory=dict)
    models: list[ModelEntry] = msgspec.field(default_factory=list)


class PriceEntry(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


class ModelEntry(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A model's metadata in the config (snake_case keys; no ``cost`` means unpriced)."""

    provider: str
    id: str
    context_window: int = 128_000
    max_output: int = 16_384
    cost: PriceEntry | None = None
    supports_thinking: bool = False
    supports_images: bool = False
    supports_web_search: bool = False
    """The provider searches the web for this model itself (Anthropic's web search tool)."""
    tool_calling: ToolCalling | None = None
    """``native`` or ``text`` (openai models only); unset means the provider's default."""

    def info(self, api: str) -> ModelInfo:
        """The :class:`ModelInfo` this entry describes."""
        cost = None if self.cost is None else ModelCost(**msgspec.structs.asdict(self.cost))
        return ModelInfo(
            id=self.id,
            provider=self.provider,
            api=api,
            context_window=self.context_window,
            max_output=self.max_output,
            cost=cost,
            supports_thinking=self.supports_thinking,
            supports_images=self.supports_images,
            supports_web_search=self.supports_web_search,
        )


EXAMPLE_MODEL = f"anthropic/{ANTHROPIC_ALIASES['sonnet']}"
"""The ``provider/id`` every example names (``coding-agent --help``, the errors about a model
that is not ``provider/id``): Claude Code's ``sonnet`` on the ``anthropic`` provider, from the
one table of current model names (:data:`pico3.models.ANTHROPIC_ALIASES`), so an example never
names an older model than ``/model sonnet`` means."""


def claude_code_model(ref: str) -> str | None:
    """The ``anthropic/…`` ref Claude Code means by ``ref`` when it is one of its names
    (``sonnet``, ``opus``, a bare ``claude-…`` id), else ``None``: ``--model`` and the TUI's
    ``/model`` name it when refusing a ref that is not ``provider/id``."""
    meant = ANTHROPIC_ALIASES.get(ref) or (ref if ref.startswith("claude-") else None)
    return f"anthropic/{meant}" if meant else None


def parse_model_ref(ref: str) -> tuple[str, str]:
    """Split ``provider/id`` at the first ``/``; both parts must be non-empty (Claude Code's
    ``sonnet`` or a bare ``claude-…`` id is refused with the ``anthropic/…`` it means)."""
    provider, sep, model_id = ref.partition("/")
    if not sep or not provider or not model_id:
        meant = claude_code_model(ref)
        hint = f"; for Claude Code's {ref!r}: {meant}" if meant else ""
        raise RegistryError(
            f"--model must look like provider/model-id (e.g. {EXAMPLE_MODEL}), got {ref!r}{hint}"
        )
    return provider, model_id


def parse_registry_config(config: Mapping[str, Any] | None) -> RegistryConfig:
    """Validate a config dict; errors name the offending path."""
    if config is None:
        return RegistryConfig()
    raw = dict(config)
    providers = raw.get("providers")
    if isinstance(providers, Mapping):
        # Validate each provider on its own so the error can name it (msgspec says `[...]`).
        for name, value in providers.items():  # pyright: ignore[reportUnknownVariableType]
            try:
                msgspec.convert(value, ProviderSettings)
            except msgspec.ValidationError as exc:
                message = str(exc)
                where = f"$.providers.{name}"
                if " - at `$" in message:
                    message = message.replace(" - at `$", f" - at `{where}")
                else:
                    message = f"{message} - at `{where}`"
                raise RegistryError(f"invalid model config: {message}") from None
    try:
        parsed = msgspec.convert(raw, RegistryConfig)
    except msgspec.ValidationError as exc:
        raise RegistryError(f"invalid model config: {exc}") from None
    own = custom_providers(parsed)
    unknown = sorted(n for n in parsed.providers if n not in PROVIDERS and n not in own)
    if unknown:
        raise RegistryError(
            f"invalid model config: unknown provider {unknown[0]!r} at `$.providers` "
            f"(known: {', '.join(PROVIDERS)}; a provider of your own is an OpenAI-compatible "
            'server: give it api = "openai-completions" and a base_url)'
        )
    for index, model in enumerate(parsed.models):
        if model.provider not in PROVIDERS and model.provider not in own:
            raise RegistryError(
                f"invalid model config: unknown provider {model.provider!r} at "
                f"`$.models[{index}].provider`"
            )
        chat = model.provider in CHAT_COMPLETIONS or model.provider in own
        if model.tool_calling is not None and not chat:
            raise RegistryError(
                f"invalid model config: tool_calling applies to openai(-compatible) models only, not "
                f"{model.provider!r} - at `$.models[{index}].tool_calling`"
            )
    return parsed


def custom_providers(config: RegistryConfig) -> tuple[str, ...]:
    """The providers of the user's own: ``[providers.NAME]`` tables (or pi's ``models.json``
    providers) whose name is not built in, with ``api = "openai-completions"`` (so a typo in a
    built-in name stays an error). Each is an OpenAI-compatible server at its ``base_url``
    (required), as a preset is (:data:`PRESETS`) with no defaults: the local
    servers' compat profile (:data:`LOCAL_COMPAT`), its key from ``api_key``/``api_key_env``
    (none needed), any model id (its ``[[models]]`` entries give limits and prices)."""
    return tuple(
        name
        for name, settings in config.providers.items()
        if name not in PROVIDERS and settings.api == "openai-completions" and settings.base_url
    )


def custom_preset(config: RegistryConfig, name: str) -> Preset | None:
    """The :class:`Preset` a provider of the user's own (:func:`custom_providers`) is made
    from; ``None`` when ``name`` is not one."""
    settings = config.providers.get(name)
    if settings is None or settings.base_url is None or name not in custom_providers(config):
        return None
    return Preset(
        name=name,
        base_url=settings.base_url,
        key_variable=None,
        compat=LOCAL_COMPAT,
        thinking_field="reasoning_content",
    )


_ENV = {
    ("anthropic", "api_key"): "ANTHROPIC_API_KEY",
    ("anthropic", "base_url"): "ANTHROPIC_BASE_URL",
    ("openai", "api_key"): "OPENAI_API_KEY",
    ("openai", "base_url"): "OPENAI_BASE_URL",
    ("openai-responses", "api_key"): "OPENAI_API_KEY",
    ("openai-responses", "base_url"): "OPENAI_BASE_URL",
    ("google", "api_key"): "GEMINI_API_KEY",
    ("google", "base_url"): "GOOGLE_GEMINI_BASE_URL",
    **{(p.name, "api_key"): p.key_variable for p in PRESETS.values() if p.key_variable},
    ("bedrock", "api_key"): "AWS_BEARER_TOKEN_BEDROCK",
    ("bedrock", "base_url"): "ANTHROPIC_BEDROCK_BASE_URL",
    ("bedrock", "region"): "AWS_REGION",
    ("bedrock", "profile"): "AWS_PROFILE",
    ("vertex", "base_url"): "ANTHROPIC_VERTEX_BASE_URL",
    ("vertex", "region"): "CLOUD_ML_REGION",
    ("vertex", "project"): "ANTHROPIC_VERTEX_PROJECT_ID",
}


def key_variables(config: RegistryConfig | None = None) -> tuple[str, ...]:
    """Every environment variable a provider key is read from: ``ANTHROPIC_API_KEY``,
    ``OPENAI_API_KEY``, the AWS keys and ``GOOGLE_APPLICATION_CREDENTIALS`` (Bedrock, Vertex)
    and each provider's ``api_key_env`` in ``config`` (the secrets a session
    withholds from its child processes, :mod:`coding_agent.settings.secret_env`)."""
    names: list[str] = []
    for (_, field), name in _ENV.items():
        if field in _SECRET_FIELDS and name not in names:
            names.append(name)
    extra = ("GOOGLE_API_KEY", *AWS_SECRET_VARIABLES, *GOOGLE_SECRET_VARIABLES)
    names.extend(n for n in extra if n not in names)
    for settings in config.providers.values() if config is not None else ():
        if settings.api_key_env and settings.api_key_env not in names:
            names.append(settings.api_key_env)
    return tuple(names)


_SECRET_FIELDS = frozenset({"api_key"})
"""The :data:`_ENV` fields whose variables hold credentials."""


def provider_variables() -> dict[tuple[str, str], str]:
    """The environment variable each provider reads each setting from, by ``(provider,
    field)`` (``field`` is a ``[providers.NAME]`` key: ``api_key``, ``base_url``...)."""
    return dict(_ENV)


def key_env(config: RegistryConfig, provider: str) -> str | None:
    """The environment variable that holds ``provider``'s key (``api_key_env`` or the usual;
    ``None``: Vertex has no usual one)."""
    settings = config.providers.get(provider)
    if settings is not None and settings.api_key_env:
        return settings.api_key_env
    return _ENV.get((provider, "api_key"))


def provider_setting(
    config: RegistryConfig, env: Mapping[str, str], provider: str, field: str
) -> str | None:
    settings = config.providers.get(provider)
    value = getattr(settings, field) if settings is not None else None
    if value:
        return value
    variable = key_env(config, provider) if field == "api_key" else _ENV.get((provider, field))
    return (env.get(variable) or None) if variable is not None else None
