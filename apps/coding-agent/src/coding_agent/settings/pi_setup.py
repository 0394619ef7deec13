"""What of a pi user's setup (``~/.pi/agent/``) this agent uses, and a note for the rest.

pi (``@mariozechner/pi-coding-agent``) keeps its settings in ``~/.pi/agent/`` (moved by
``$PI_CODING_AGENT_DIR``) and a project's ``.pi/``. Its skills, prompt templates, ``AGENTS.md``,
``SYSTEM.md`` and ``APPEND_SYSTEM.md`` are read where pi reads them (:mod:`coding_agent.context`);
this module reads the two files that configure models, as the **lowest layer** of the
configuration (:func:`coding_agent.settings.config.load_config`: every key of a
``config.toml`` wins over them):

``settings.json`` (and a trusted project's ``.pi/settings.json`` on top, as pi merges them)
    ``defaultProvider`` + ``defaultModel`` are the default ``model`` (``provider/id``);
    ``defaultThinkingLevel`` is ``thinking``; ``theme`` is the TUI's theme when it names one
    this agent has (``dark``, ``light`` or a Textual theme; pi's own theme files are not read);
    ``enabledModels`` is the ``--models`` scope of Ctrl+P when none is given; ``skills`` and
    ``prompts`` add folders (:func:`pi_resource_paths`).
``auth.json``
    the API keys pi's ``/login`` stored (a file that is yours and ``0600`` only), as the
    providers' ``api_key``; OAuth logins are pi's own.
``models.json``
    each provider is a ``[providers.NAME]`` table and each of its models a ``[[models]]``
    entry: ``baseUrl`` → ``base_url``; ``apiKey`` naming an environment variable →
    ``api_key_env`` (withheld from commands like every key variable), any other value →
    ``api_key``; the OpenAI ``compat`` flags with a meaning here (``supportsDeveloperRole``,
    ``supportsReasoningEffort``, ``supportsUsageInStreaming``, ``maxTokensField``); a model's
    ``contextWindow``, ``maxTokens``, ``reasoning``, ``input`` (``"image"``) and ``cost``. A
    provider whose name is not one of this agent's is a provider of the user's own: with
    ``api: "openai-completions"`` and a ``baseUrl`` it is an OpenAI-compatible server, as in pi
    (:func:`coding_agent.settings.model_config.custom_providers`).

Nothing here is guessed silently. What cannot be used is reported in two kinds:

* :attr:`PiSetup.warnings`, shown at every start (stderr in ``-p``/``--json``, a notice in the
  TUI: several are one, :func:`coding_agent.tui.status_toasts.pi_setup_toasts`) and by
  ``coding-agent config``: pi's extensions and packages (TypeScript run by pi's
  runtime: they are named, since their hooks, tools and commands do not exist here), a file
  that is not valid JSON, a provider that cannot be reached as written (another API, a key
  read by running a command), a default model whose provider is unknown here;
* :attr:`PiSetup.notes`, listed by ``coding-agent config`` only: the settings with no meaning
  here (``shellPath``, ``compaction``, ``quietStartup``…) and the model fields left out.

A project's ``.pi/settings.json`` is read only when the project is trusted (it could point the
agent at another server); its extensions are named whether trusted or not.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from coding_agent.settings.xdg import pi_home

__all__ = [
    "PiSetup",
    "default_model_problem",
    "pi_extensions",
    "pi_resource_paths",
    "read_pi_setup",
]

_USED_SETTINGS = frozenset(
    {
        "defaultProvider", "defaultModel", "defaultThinkingLevel", "theme", "skills", "prompts",
        "enabledModels",
    }
)  # fmt: skip
_CODE_SETTINGS = ("extensions", "packages")
"""settings.json keys that load pi code: named by the extensions warning, not as notes."""
_THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
_COMPAT = {
    "supportsDeveloperRole": "developer_role",
    "supportsReasoningEffort": "reasoning_effort",
    "supportsUsageInStreaming": "usage_in_streaming",
    "maxTokensField": "max_tokens_field",
}
"""pi's OpenAI ``compat`` flags, by the name of the same setting here."""
_MODEL_FIELDS = {
    "contextWindow": "context_window",
    "maxTokens": "max_output",
    "reasoning": "supports_thinking",
}
_QUIET_MODEL_FIELDS = frozenset({"id", "name", "input", "cost"})
"""Model fields read (``input``, ``cost``) or only pi's label (``name``): no note."""
_NATIVE_API = {
    "anthropic": "anthropic-messages",
    "openai": "openai-completions",
    "openai-responses": "openai-responses",
    "google": "google-generative-ai",
}
"""The API each of this agent's providers speaks, in pi's words (the OpenAI-compatible presets:
``openai-completions``)."""
_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]*")


@dataclass
class PiSetup:
    """What pi's files give the configuration, where each value came from, and what of them
    is not used (see the module docstring)."""

    model: str | None = None
    thinking: str | None = None
    theme: str | None = None
    """pi's ``theme``, unchecked (the caller keeps it when it names a theme here)."""
    model_scope: list[str] = field(default_factory=list)
    """``enabledModels``: the ``--models`` patterns Ctrl+P cycles through (pi's bare
    ``claude-*`` is ``*/claude-*`` here)."""
    providers: dict[str, dict[str, Any]] = field(default_factory=dict)
    models: list[dict[str, Any]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    """The pi files read, in order."""
    origin: dict[str, str] = field(default_factory=dict)
    """Config keys (``model``, ``providers.NAME``, ``models.NAME/ID``) → ``file:line``."""
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _strip_json(text: str) -> str:
    """``//`` comments and trailing commas out of JSON, strings untouched (as pi reads
    ``models.json``)."""
    text = re.sub(r'"(?:\\.|[^"\\])*"|//[^\n]*', lambda m: m[0] if m[0][0] == '"' else "", text)
    return re.sub(r'"(?:\\.|[^"\\])*"|,(\s*[}\]])', lambda m: m[1] or m[0], text)


def _read_json(path: Path, setup: PiSetup, what: str) -> dict[str, Any] | None:
    """The object in ``path`` (``None`` when there is no file); a file that cannot be used is
    a warning saying what is left out."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        setup.warnings.append(f"{path}: cannot read it ({error}); {what} are not used")
        return None
    try:
        data = json.loads(_strip_json(text))
    except ValueError as error:
        setup.warnings.append(f"{path}: not valid JSON ({error}); {what} are not used")
        return None
    if not isinstance(data, dict):
        setup.warnings.append(f"{path}: not a JSON object; {what} are not used")
        return None
    setup.files.append(path)
    return cast(dict[str, Any], data)


def _line(path: Path, key: str, after: str | None = None) -> str:
    """``path:line`` of the first ``"key":`` (after the line holding ``"after":``)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return str(path)
    start = 0
    if after is not None:
        start = next((i for i, line in enumerate(lines) if f'"{after}"' in line), 0)
    for number in range(start, len(lines)):
        if f'"{key}"' in lines[number]:
            return f"{path}:{number + 1}"
    return str(path)


def read_pi_setup(
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None = None,
    *,
    project: Path | None = None,
    trusted: bool = False,
) -> PiSetup:
    """pi's ``settings.json`` and ``models.json`` as configuration (the module docstring):
    ``project`` is the project folder ``cwd`` is in, whose ``.pi/settings.json`` counts when
    ``trusted``. Never raises: what cannot be used is a warning or a note."""
    environ = os.environ if env is None else env
    folder = pi_home(environ)
    setup = PiSetup()
    layers: list[tuple[Path, dict[str, Any]]] = []
    user = _read_json(folder / "settings.json", setup, "its settings")
    if user is not None:
        layers.append((folder / "settings.json", user))
    local = project / ".pi" / "settings.json" if project is not None else None
    if local is not None and trusted and local.is_file():
        found = _read_json(local, setup, "its settings")
        if found is not None:
            layers.append((local, found))
    models = _read_json(folder / "models.json", setup, "its providers and models")
    if models is not None:
        _read_models(folder / "models.json", models, setup, environ)
    _read_auth(folder / "auth.json", setup)
    for path, data in layers:
        _read_settings(path, data, setup)
    home = Path(environ.get("HOME") or Path.home())
    setup.warnings.extend(_extension_warning(folder, project, home, layers))
    return setup


def pi_resource_paths(
    key: str,
    env: Mapping[str, str] | None = None,
    *,
    project: Path | None = None,
    trusted: bool = False,
) -> list[Path]:
    """The files and folders settings.json's ``skills`` or ``prompts`` list (``key``) adds, as
    pi reads them: relative paths from pi's folder (a trusted ``project``'s ``.pi/`` for its
    ``.pi/settings.json``, whose paths must stay inside the project), ``~`` the home folder.
    pi's patterns (``*``, ``!x``, ``+x``, ``-x``)
    are left out (:func:`read_pi_setup` notes them). Never raises."""
    environ = os.environ if env is None else env
    folder = pi_home(environ)
    home = Path(environ.get("HOME") or Path.home())
    files = [(folder / "settings.json", folder)]
    if project is not None and trusted:
        files.append((project / ".pi" / "settings.json", project / ".pi"))
    found: list[Path] = []
    for path, base in files:
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        values: Any = data.get(key) if isinstance(data, dict) else None
        for value in cast(list[Any], values) if isinstance(values, list) else []:
            if isinstance(value, str) and value and not _pattern(value):
                place = home / value[2:] if value.startswith("~/") else base / value
                place = Path(os.path.normpath(place))
                if base != folder and project is not None and not place.is_relative_to(project):
                    continue  # a project's list stays inside the project
                if place not in found:
                    found.append(place)
    return found


def _pattern(value: str) -> bool:
    return value[0] in "!+-" or any(c in value for c in "*?[")


def _read_settings(path: Path, data: dict[str, Any], setup: PiSetup) -> None:
    provider, model = data.get("defaultProvider"), data.get("defaultModel")
    if isinstance(provider, str) and isinstance(model, str) and provider and model:
        setup.model = f"{provider}/{model}"
        setup.origin["model"] = _line(path, "defaultModel")
    elif provider is not None or model is not None:
        setup.notes.append(
            f"{path}: defaultProvider and defaultModel are used together only (as pi does)"
        )
    level = data.get("defaultThinkingLevel")
    if level in _THINKING_LEVELS:
        setup.thinking = cast(str, level)
        setup.origin["thinking"] = _line(path, "defaultThinkingLevel")
    elif level is not None:
        setup.notes.append(f"{path}: defaultThinkingLevel {level!r} is not a thinking level")
    enabled: Any = data.get("enabledModels")
    if isinstance(enabled, list):
        patterns = [p for p in cast(list[Any], enabled) if isinstance(p, str) and p.strip()]
        setup.model_scope = [p if "/" in p else f"*/{p}" for p in patterns]
        setup.origin["model_scope"] = _line(path, "enabledModels")
    theme = data.get("theme")
    if isinstance(theme, str) and theme:
        setup.theme = theme
        setup.origin["theme"] = _line(path, "theme")
    for key in ("skills", "prompts"):
        values: Any = data.get(key)
        listed = cast(list[Any], values) if isinstance(values, list) else []
        patterns = [v for v in listed if isinstance(v, str) and v and _pattern(v)]
        if patterns:
            setup.notes.append(f"{path}: {key}: patterns are not read here: {', '.join(patterns)}")
    unused = sorted(k for k in data if k not in _USED_SETTINGS and k not in _CODE_SETTINGS)
    if unused:
        setup.notes.append(f"{path}: not used here: {', '.join(unused)}")


def _read_models(path: Path, data: dict[str, Any], setup: PiSetup, env: Mapping[str, str]) -> None:
    # lazy: the provider table is needed only when a pi user has a models.json
    from coding_agent.settings.model_config import PRESETS, PROVIDERS

    providers = data.get("providers")
    if not isinstance(providers, dict):
        setup.warnings.append(f'{path}: no "providers" object; its models are not used')
        return
    for name, raw in cast(dict[str, Any], providers).items():
        if not isinstance(raw, dict):
            setup.warnings.append(f"{path}: provider {name!r} is not an object; not used")
            continue
        entry = cast(dict[str, Any], raw)
        where = _line(path, name)
        api = entry.get("api")
        speaks = _NATIVE_API.get(name, "openai-completions" if name in PRESETS else None)
        if name not in PROVIDERS and (api != "openai-completions" or not entry.get("baseUrl")):
            setup.warnings.append(
                f"{where}: provider {name!r} is not used: a provider of your own here is an "
                'OpenAI-compatible server ("api": "openai-completions" with a "baseUrl"), '
                f"not {api or 'an unnamed API'}"
                + ("" if entry.get("baseUrl") else " without a baseUrl")
            )
            continue
        if name in PROVIDERS and api is not None and speaks is not None and api != speaks:
            setup.warnings.append(
                f"{where}: provider {name!r} is not used: {name} speaks {speaks} here, not {api}"
            )
            continue
        settings: dict[str, Any] = {}
        keys: dict[str, str] = {}  # our key -> pi's, for the origin of each
        if isinstance(entry.get("baseUrl"), str):
            settings["base_url"], keys["base_url"] = entry["baseUrl"], "baseUrl"
        key = entry.get("apiKey")
        if isinstance(key, str) and key.startswith("!"):
            setup.warnings.append(
                f"{where}: provider {name!r} is not used: its apiKey runs a command ({key}), "
                "which this agent does not do; export the key and set apiKey to the "
                "variable's name"
            )
            continue
        if isinstance(key, str) and _VARIABLE.fullmatch(key):
            settings["api_key_env"], keys["api_key_env"] = key, "apiKey"
        elif isinstance(key, str) and key:
            settings["api_key"], keys["api_key"] = key, "apiKey"
        compat = entry.get("compat")
        if isinstance(compat, dict):
            flags = cast(dict[str, Any], compat)
            settings["compat"] = {_COMPAT[k]: v for k, v in flags.items() if k in _COMPAT}
            keys.update({f"compat.{_COMPAT[k]}": k for k in flags if k in _COMPAT})
            if not settings["compat"]:
                del settings["compat"]
            left = sorted(k for k in flags if k not in _COMPAT)
            if left:
                setup.notes.append(
                    f"{where}: provider {name!r}: compat not used: {', '.join(left)}"
                )
        left = sorted(
            k
            for k in entry
            if k not in ("baseUrl", "api", "apiKey", "compat", "models", "authHeader")
        )
        if left:
            setup.notes.append(f"{where}: provider {name!r}: not used here: {', '.join(left)}")
        if name not in PROVIDERS:
            settings["api"], keys["api"] = "openai-completions", "api"
        if settings:
            setup.providers[name] = settings
            setup.origin[f"providers.{name}"] = where
            for ours, theirs in keys.items():
                setup.origin[f"providers.{name}.{ours}"] = _line(path, theirs, after=name)
        for model in cast(list[Any], entry.get("models") or []):
            _read_model(path, name, model, setup)


def _read_auth(path: Path, setup: PiSetup) -> None:
    """The API keys pi's ``/login`` stored in ``auth.json`` (``{"anthropic": {"type":
    "api_key", "key": "sk-..."}}``), for this agent's providers and models.json's: each is the
    provider's ``api_key`` (a variable's name: ``api_key_env``), winning over the environment
    as in pi. Read only when the file is yours and no one else may read or write it (pi makes
    it ``0600``); OAuth logins (pi's subscriptions) are pi's own and are left out."""
    # lazy: the provider table is needed only when a pi user has an auth.json
    from coding_agent.settings.model_config import PROVIDERS

    try:
        info = path.stat()
    except OSError:
        return
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        setup.warnings.append(
            f"{path}: not read: pi's keys are read only from a file that is yours and "
            f"private (mode 0600), this one is mode {info.st_mode & 0o777:04o}"
            + ("" if info.st_uid == os.geteuid() else " and another user's")
        )
        return
    data = _read_json(path, setup, "its keys")
    if data is None:
        return
    for name, raw in data.items():
        if name not in PROVIDERS and name not in setup.providers:
            continue
        if not isinstance(raw, dict) or cast(dict[str, Any], raw).get("type") != "api_key":
            continue  # an OAuth login: pi's own
        key = cast(dict[str, Any], raw).get("key")
        if not isinstance(key, str) or not key or key.startswith("!"):
            continue
        settings = setup.providers.setdefault(name, {})
        settings.pop("api_key", None)
        settings.pop("api_key_env", None)
        field = "api_key_env" if _VARIABLE.fullmatch(key) else "api_key"
        settings[field] = key
        setup.origin[f"providers.{name}.{field}"] = _line(path, name)
        setup.origin.setdefault(f"providers.{name}", _line(path, name))


def _read_model(path: Path, provider: str, raw: Any, setup: PiSetup) -> None:
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        setup.notes.append(f'{path}: a model of {provider!r} has no "id"; not used')
        return
    entry = cast(dict[str, Any], raw)
    model: dict[str, Any] = {"provider": provider, "id": entry["id"]}
    for theirs, ours in _MODEL_FIELDS.items():
        if theirs in entry:
            model[ours] = entry[theirs]
    inputs = entry.get("input")
    if isinstance(inputs, list):
        model["supports_images"] = "image" in inputs
    cost = entry.get("cost")
    if isinstance(cost, dict):
        prices = cast(dict[str, Any], cost)
        names = {"input": "input", "output": "output", "cacheRead": "cache_read"}
        names["cacheWrite"] = "cache_write"
        model["cost"] = {names[k]: v for k, v in prices.items() if k in names}
    left = sorted(k for k in entry if k not in _MODEL_FIELDS and k not in _QUIET_MODEL_FIELDS)
    ref = f"{provider}/{entry['id']}"
    if left:
        setup.notes.append(f"{path}: model {ref}: not used here: {', '.join(left)}")
    setup.models = [m for m in setup.models if f"{m['provider']}/{m['id']}" != ref]
    setup.models.append(model)
    setup.origin[f"models.{ref}"] = _line(path, entry["id"])


def default_model_problem(
    model: str, registry: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> str | None:
    """Why pi's default ``model`` (``provider/id``) cannot answer here, given the merged
    configuration ``registry`` (the dict of :meth:`EffectiveConfig.registry`): its provider is
    not one of this agent's, or has no key set (pi's ``/login`` subscriptions are pi's own);
    ``None`` when it can. The caller then keeps the usual default and warns."""
    from coding_agent.settings.model_config import (
        PRESETS,
        PROVIDERS,
        RegistryError,
        custom_providers,
        key_env,
        parse_registry_config,
        provider_setting,
    )

    environ = os.environ if env is None else env
    provider = model.partition("/")[0]
    try:
        settings = parse_registry_config(registry)
    except RegistryError:
        return None  # the configuration's own error says what is wrong
    if provider in custom_providers(settings) or provider in ("bedrock", "vertex", "faux"):
        return None
    if provider not in PROVIDERS:
        return f"{provider!r} is not a provider here (known: {', '.join(PROVIDERS)})"
    preset = PRESETS.get(provider)
    if preset is not None and preset.key_variable is None:
        if provider in settings.providers:
            return None
        return f"{provider} is not set up here (add it to models.json with its baseUrl)"
    key = provider_setting(settings, environ, provider, "api_key")
    if key or provider_setting(settings, environ, provider, "base_url"):
        return None
    if provider == "google" and environ.get("GOOGLE_API_KEY"):
        return None
    return (
        f"{provider} has no API key here: set {key_env(settings, provider)} "
        "(pi's /login subscriptions are pi's own)"
    )


def pi_extensions(folder: Path, project: Path | None, home: Path) -> list[str]:
    """pi's extensions found on disk: each file or folder in ``folder/extensions/`` and in the
    project's ``.pi/extensions/`` (trusted or not), shown with ``~`` for the ``home`` folder."""
    found: list[str] = []
    places = [folder / "extensions"]
    if project is not None:
        places.append(project / ".pi" / "extensions")
    for place in places:
        try:
            entries = sorted(place.iterdir(), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            shown = str(entry)
            if project is not None and entry.is_relative_to(project):
                shown = str(entry.relative_to(project))
            elif entry.is_relative_to(home):
                shown = "~/" + str(entry.relative_to(home))
            found.append(shown)
    return found


def _extension_warning(
    folder: Path, project: Path | None, home: Path, layers: list[tuple[Path, dict[str, Any]]]
) -> list[str]:
    """One warning naming every pi extension and package (none: no warning)."""
    named = pi_extensions(folder, project, home)
    for path, data in layers:
        for key in _CODE_SETTINGS:
            values = data.get(key)
            for value in cast(list[Any], values) if isinstance(values, list) else []:
                source = value.get("source") if isinstance(value, dict) else value
                named.append(f"{source} ({path.name} {key})")
    if not named:
        return []
    return [
        f"pi extensions are not run here (pi's TypeScript; their tools, commands and hooks do "
        f"not exist in this agent): {', '.join(named)}. This agent's extensions are feature "
        "packages (coding-agent facets add PATH; docs/authoring-facets.md)"
    ]
