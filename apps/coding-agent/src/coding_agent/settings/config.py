"""The configuration files: ``$XDG_CONFIG_HOME/coding-agent/config.toml``, and a trusted
project's ``.coding-agent/config.toml`` on top of it.

Both are TOML (read with the standard library's ``tomllib``) and have the same keys::

    model = "openai/qwen2.5-coder:7b"     # the default model (--model overrides it)
    thinking = "medium"                   # the default thinking level of new sessions
    theme = "light"                       # the TUI's theme: dark, light or a Textual theme
    permission_mode = "accept-edits"      # new sessions' permission mode (user file only)
    secrets = ["GITHUB_TOKEN"]            # more variables kept from bash, jobs, MCP servers...
    secrets_passthrough = ["GITHUB_TOKEN"]  # secrets they may see after all (user file only)
    warm_start = false                    # no preloaded server forking headless runs and
                                          # workers (on by default; user file only)

    [providers.openai]                    # anthropic or openai
    base_url = "http://127.0.0.1:11434/v1"
    api_key_env = "OLLAMA_API_KEY"        # the variable holding the key (or api_key = "...")

    [providers.openai.compat]             # what an OpenAI-compatible server supports
    max_tokens_field = "max_tokens"
    reasoning_effort = false

    [permissions]                         # permission rules (coding_agent.settings.permissions)
    allow = ["Bash(npm run test:*)"]
    deny = ["Read(./.env)"]
    additional_directories = ["~/notes"]  # more working directories (user file only)
    block_reads_outside_working_directories = true  # refuse reads outside them, in every mode

    [sandbox]                             # the OS sandbox of commands (pico3.Sandbox)
    enabled = true                        # every command sandboxed, in every permission mode
    deny_read = ["~/.kube"]               # more paths commands may not read
    allow_write = ["~/.cache/uv"]         # more paths commands may write (user file only)
    allow_domains = ["pypi.org", "*.pythonhosted.org"]  # HTTPS out (ports 80, 443; host:port for
                                          # another), via a proxy (user file only)

    [web_fetch]                           # the web_fetch tool (user file only)
    allow_private = ["localhost", "*.internal"]  # hosts it may reach on private addresses

    [web_search]                          # the web_search tool's backend (user file only)
    backend = "brave"                     # brave, tavily or searxng
    url = "https://searx.example.org"     # searxng: the instance (brave, tavily: their API's)
    api_key_env = "BRAVE_API_KEY"         # the variable holding the key (per backend default)

    [notifications]                       # when you are told a session needs you (user file only)
    desktop = ["attention"]               # the keys: coding_agent.settings.notifications

    [[models]]                            # custom and local models (pi's models.json)
    provider = "openai"
    id = "qwen2.5-coder:7b"
    context_window = 32768
    max_output = 8192
    supports_thinking = false
    tool_calling = "text"                 # native | text
    cost = { input = 0.0, output = 0.0 }  # dollars per million tokens

The project file applies only when the project is trusted (``--trust``, ``/trust``): like its
facet packages, it could point the agent at another server. On top of the user's file its
``model``, ``thinking`` and ``theme`` replace the user's, its providers are merged key by key, and its
``models`` replace the user's entries of the same ``provider``/``id``. A project's ``secrets``
are added to the user's; ``secrets_passthrough`` is read from the user's file only (a project
that passes a key to the commands it runs is the attack it guards against): in a project file
it is an error. What the two keys do: :mod:`coding_agent.settings.secret_env`. ``[permissions]`` lists are
not merged here: every file's rules apply side by side (deny beats ask beats allow, whatever the
file), see :mod:`coding_agent.settings.permissions`. ``[sandbox]``: ``enabled`` is on when either file
says so (a project can turn the sandbox on, not off), ``deny_read`` lists are joined, and
``allow_write`` and ``allow_domains`` are read from the user's file only (in a project file they
are an error: a project that widens its own sandbox is what the sandbox guards against).
``[web_fetch]`` and ``[web_search]`` are read from the user's file only too (a project could
open the agent's fetches to the machine's private network, or send a search key to its own
server).

A file that does not parse, a key that does not exist or a value of the wrong type is a
:class:`ConfigError` naming the file, the line and the key; nothing is guessed.
:func:`load_config` returns an :class:`EffectiveConfig`: the merged values, the registry dict
for :func:`~coding_agent.worker.providers.resolve_model` (whose messages name the files), and
where each value came from (``coding-agent config`` prints it).

Why one module: it is the one reader of config.toml, whose tables share the parse, the checks
of which file may set what, the merge of the two files (over pi's layer, which
:mod:`coding_agent.settings.pi_setup` reads) and the error messages naming a file's line; a table whose keys need more than a type check has its own module
(:mod:`coding_agent.settings.notifications`, the permission rules, the model registry).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import msgspec

from coding_agent.settings.model_config import RegistryError, parse_registry_config
from coding_agent.settings.notifications import NotificationSettings
from coding_agent.settings.permission_modes import PERMISSION_MODES
from coding_agent.settings.pi_setup import default_model_problem, read_pi_setup
from coding_agent.settings.trust import LOCAL_CONFIG_DIR, is_trusted, project_root_for
from coding_agent.settings.xdg import config_home

__all__ = [
    "CONFIG_NAME",
    "ConfigError",
    "EffectiveConfig",
    "load_config",
    "project_config_path",
    "user_config_path",
]

CONFIG_NAME = "config.toml"

_THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
_TOP_KEYS = (
    "model", "thinking", "theme", "permission_mode", "providers", "models", "secrets",
    "secrets_passthrough", "permissions", "sandbox", "web_fetch", "web_search", "notifications",
    "warm_start",
)  # fmt: skip
_SEARCH_BACKENDS = ("brave", "tavily", "searxng")  # coding_agent.worker.tools.web
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOMAIN_ENTRY = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[^\s:\[\]/]+)(?::([0-9]{1,5}))?")
"""A ``sandbox.allow_domains`` entry: a host (``*.`` for its subdomains; an IPv6 address in
brackets) and an optional ``:port`` (Claude Code's ``allowedDomains`` spelling)."""


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the file, line and key."""


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/coding-agent/config.toml`` (default ``~/.config``)."""
    return config_home(env) / "coding-agent" / CONFIG_NAME


def project_config_path(cwd: str | os.PathLike[str]) -> Path:
    """``<project>/.coding-agent/config.toml`` for the project ``cwd`` is in."""
    return project_root_for(cwd) / LOCAL_CONFIG_DIR / CONFIG_NAME


@dataclass
class EffectiveConfig:
    """The merged configuration and where each value came from."""

    model: str | None = None
    thinking: str | None = None
    theme: str | None = None
    permission_mode: str | None = None
    """The permission mode of a new session (``--permission-mode`` overrides it)."""
    providers: dict[str, dict[str, Any]] = field(default_factory=dict)
    models: list[dict[str, Any]] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    """``secrets``: more variable names withheld from child processes (user's and project's)."""
    secrets_passthrough: list[str] = field(default_factory=list)
    """``secrets_passthrough``: secret names child processes get all the same (user's file)."""
    sandbox_enabled: bool = False
    """``sandbox.enabled``: every command runs sandboxed, whatever the permission mode."""
    sandbox_deny_read: list[str] = field(default_factory=list)
    """``sandbox.deny_read``: paths hidden from commands besides the built-in ones."""
    sandbox_allow_write: list[str] = field(default_factory=list)
    """``sandbox.allow_write``: paths commands may write besides the project (user's file)."""
    sandbox_allow_domains: list[str] = field(default_factory=list)
    """``sandbox.allow_domains``: domains commands reach over HTTPS via the proxy (user's file)."""
    web_allow_private: list[str] = field(default_factory=list)
    """``web_fetch.allow_private``: hosts web_fetch may reach on private addresses (user's file)."""
    web_search_backend: str | None = None
    """``web_search.backend``: ``brave``, ``tavily`` or ``searxng`` (``None``: no web_search)."""
    web_search_url: str | None = None
    web_search_key_env: str | None = None
    notifications: NotificationSettings = field(default_factory=NotificationSettings)
    warm_start: bool = True
    """``warm_start``: fork headless runs and workers from a preloaded server (on unless the
    user's file says ``false``; ``$CODING_AGENT_WARM_START`` overrides it:
    :mod:`coding_agent.settings.warm_start`)."""
    files: list[Path] = field(default_factory=list)
    """The files that were read, in order (the user's first)."""
    user_file: Path | None = None
    skipped: Path | None = None
    """A project file left out because the project is not trusted."""
    origin: dict[str, str] = field(default_factory=dict)
    """``"model"``, ``"providers.openai.base_url"``, ``"models.openai/qwen"``… → ``file:line``."""
    pi_files: list[Path] = field(default_factory=list)
    """pi's files read under the user's (``~/.pi/agent/settings.json``, ``models.json``:
    :mod:`coding_agent.settings.pi_setup`)."""
    warnings: list[str] = field(default_factory=list)
    """What of pi's setup is not used and matters (its extensions, a default model that
    cannot answer here): shown at every start."""
    notes: list[str] = field(default_factory=list)
    """The rest of pi's settings not used here (``coding-agent config`` lists them)."""
    model_scope: list[str] = field(default_factory=list)
    """pi's ``enabledModels``: the ``--models`` patterns when the command line gives none."""

    @property
    def source(self) -> str:
        """How error messages name the configuration: the files read (or the user's path)."""
        files = self.files or ([self.user_file] if self.user_file is not None else [])
        return " / ".join(str(path) for path in files) or "the config file"

    def registry(self) -> dict[str, Any]:
        """The dict :func:`~coding_agent.worker.providers.resolve_model` takes."""
        raw: dict[str, Any] = {"source": self.source}
        if self.model is not None:
            raw["default_model"] = self.model
        if self.providers:
            raw["providers"] = self.providers
        if self.models:
            raw["models"] = self.models
        return raw


def load_config(
    cwd: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    trusted: bool | None = None,
) -> EffectiveConfig:
    """Read the user's file and (for a trusted project ``cwd`` is in) the project's on top.

    ``trusted`` overrides the trust store's answer (the caller decided already). Raises
    :class:`ConfigError` for a file that is unreadable or invalid."""
    config = EffectiveConfig(user_file=user_config_path(env))
    layers: list[Path] = [config.user_file] if config.user_file is not None else []
    if cwd is not None:
        project_file = project_config_path(cwd)
        if project_file.is_file() and project_file != config.user_file:
            if trusted is None:
                trusted = is_trusted(project_root_for(cwd))
            if trusted:
                layers.append(project_file)
            else:
                config.skipped = project_file
    _merge_pi(config, cwd, env)
    for path in layers:
        layer = _read(path)
        if layer is None:
            continue
        _check_secrets(layer, user=path == config.user_file)
        _check_directories(layer, user=path == config.user_file, env=env)
        config.files.append(path)
        _merge(config, layer, path)
    _check_pi_model(config, env)
    _check_registry(config)
    return config


def _merge_pi(
    config: EffectiveConfig, cwd: str | os.PathLike[str] | None, env: Mapping[str, str] | None
) -> None:
    """pi's ``settings.json`` and ``models.json`` as the lowest layer (every config.toml key
    wins over them): :mod:`coding_agent.settings.pi_setup`."""
    project = project_root_for(cwd) if cwd is not None else None
    local = project is not None and (project / ".pi" / "settings.json").is_file()
    trusted = local and project is not None and is_trusted(project)
    pi = read_pi_setup(cwd, env, project=project, trusted=trusted)
    config.pi_files, config.warnings, config.notes = pi.files, pi.warnings, pi.notes
    config.model, config.thinking = pi.model, pi.thinking
    if pi.theme is not None and pi.theme in _themes():
        config.theme = pi.theme
    elif pi.theme is not None:
        config.notes.append(
            f"{pi.origin['theme']}: theme {pi.theme!r} is pi's own theme file, not used (dark, "
            "light or a Textual theme: theme = in config.toml)"
        )
        del pi.origin["theme"]
    config.model_scope = pi.model_scope
    config.providers = pi.providers
    config.models = pi.models
    config.origin.update(pi.origin)


def _from_pi(config: EffectiveConfig, key: str) -> bool:
    """Whether the value of ``key`` came from one of pi's files."""
    origin = config.origin.get(key)
    return origin is not None and any(origin.startswith(str(p)) for p in config.pi_files)


def _check_pi_model(config: EffectiveConfig, env: Mapping[str, str] | None) -> None:
    """pi's default model, when no config.toml chose one, only if it can answer here (its
    provider known, its key set); otherwise the usual default and a warning saying why."""
    origin = config.origin.get("model", "")
    if config.model is None or not _from_pi(config, "model"):
        return
    problem = default_model_problem(config.model, config.registry(), env)
    if problem is not None:
        config.warnings.append(
            f"{origin}: pi's default model {config.model} is not used: {problem}; "
            "--model or model = in config.toml chooses another"
        )
        config.model = None
        del config.origin["model"]


# -- reading one file ---------------------------------------------------------------------------
class _ProviderFile(msgspec.Struct, forbid_unknown_fields=True):
    api: str | None = None  # "openai-completions": a provider of your own (model_config)
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    compat: dict[str, Any] | None = None
    region: str | None = None  # bedrock, vertex
    project: str | None = None  # vertex
    profile: str | None = None  # bedrock
    web_search: bool | None = None  # anthropic, vertex, openai-responses, google: own search


class _ModelFile(msgspec.Struct, forbid_unknown_fields=True):
    provider: str
    id: str
    context_window: int | None = None
    max_output: int | None = None
    cost: dict[str, Any] | None = None
    supports_thinking: bool | None = None
    supports_images: bool | None = None
    supports_web_search: bool | None = None
    tool_calling: str | None = None


class _PermissionsFile(msgspec.Struct, forbid_unknown_fields=True):
    """``[permissions]``: the rule lists (their grammar is facets-approval's; a rule that does
    not parse is reported by it, not here: see :mod:`coding_agent.settings.permissions`)."""

    allow: list[str] = msgspec.field(default_factory=list)
    ask: list[str] = msgspec.field(default_factory=list)
    deny: list[str] = msgspec.field(default_factory=list)
    additional_directories: list[str] = msgspec.field(default_factory=list)
    """More working directories (user file only): see :mod:`coding_agent.worker.working_dirs`."""
    block_reads_outside_working_directories: bool = False


class _SandboxFile(msgspec.Struct, forbid_unknown_fields=True):
    """``[sandbox]``: see :mod:`pico3.sandbox` for what a sandboxed command may do."""

    enabled: bool = False
    deny_read: list[str] = msgspec.field(default_factory=list)
    allow_write: list[str] = msgspec.field(default_factory=list)
    allow_domains: list[str] = msgspec.field(default_factory=list)


class _WebFetchFile(msgspec.Struct, forbid_unknown_fields=True):
    """``[web_fetch]``: see :mod:`coding_agent.worker.tools.web_fetch`."""

    allow_private: list[str] = msgspec.field(default_factory=list)


class _WebSearchFile(msgspec.Struct, forbid_unknown_fields=True):
    """``[web_search]``: see :mod:`coding_agent.worker.tools.web_search`."""

    backend: str
    url: str | None = None
    api_key_env: str | None = None


class _File(msgspec.Struct, forbid_unknown_fields=True):
    model: str | None = None
    thinking: str | None = None
    theme: str | None = None
    permission_mode: str | None = None
    providers: dict[str, _ProviderFile] = msgspec.field(default_factory=dict)
    models: list[_ModelFile] = msgspec.field(default_factory=list)
    secrets: list[str] = msgspec.field(default_factory=list)
    secrets_passthrough: list[str] = msgspec.field(default_factory=list)
    permissions: _PermissionsFile | None = None
    sandbox: _SandboxFile | None = None
    web_fetch: _WebFetchFile | None = None
    web_search: _WebSearchFile | None = None
    notifications: NotificationSettings | None = None
    warm_start: bool | None = None


@dataclass
class _Layer:
    path: Path
    text: str
    data: dict[str, Any]
    parsed: _File


def _toml_error_line(message: str, text: str) -> int | str:
    """The line a :mod:`tomllib` error names (``"(at line 3, column 5)"``); one found ``"(at
    end of document)"`` (an array, a string or a value left open at the end) is on the last
    line that holds anything; ``"?"`` when the message names no place."""
    found = re.search(r"\(at line (\d+), column \d+\)", message)
    if found:
        return int(found.group(1))
    if "(at end of document)" in message:
        return max(1, len(text.rstrip().splitlines()))
    return "?"


def _read(path: Path) -> _Layer | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a TOML file") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the configuration: {error.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text") from None
    import tomllib  # only when a configuration file exists

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        line = _toml_error_line(message, text)
        message = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", message)
        raise ConfigError(f"{path}:{line}: invalid TOML: {message}") from None
    providers = data.get("providers")
    if isinstance(providers, dict):  # one by one, so an error can name the provider
        for name, value in cast(dict[str, Any], providers).items():
            try:
                msgspec.convert(value, _ProviderFile)
            except msgspec.ValidationError as error:
                message = str(error).replace(" - at `$", f" - at `$.providers.{name}")
                if " - at `$" not in message:
                    message += f" - at `$.providers.{name}`"
                raise _validation_error(path, text, message) from None
    try:
        parsed = msgspec.convert(data, _File)
    except msgspec.ValidationError as error:
        raise _validation_error(path, text, str(error)) from None
    layer = _Layer(path, text, data, parsed)
    _check_values(layer)
    return layer


def _validation_error(path: Path, text: str, message: str) -> ConfigError:
    """Turn msgspec's ``... - at `$.a.b[0]``` into ``file:line: key `a.b`: ...``."""
    where = re.search(r" - at `\$(.*)`$", message)
    location = where.group(1) if where else ""
    message = (message[: where.start()] if where else message).replace(" | null", "")
    unknown = re.match(r"Object contains unknown field `([^`]+)`", message)
    keys = _keys(location)
    if unknown:
        keys.append(unknown.group(1))
        message = "unknown key"
        if len(keys) == 1:
            message += f" (known: {', '.join(_TOP_KEYS)})"
    return _error(path, text, keys, message)


def _keys(location: str) -> list[str]:
    """``.providers.openai.compat`` / ``.models[1].id`` → ``["providers", "openai", ...]``
    (an index stays attached as ``models[1]``)."""
    parts = [part for part in re.split(r"\.(?![^\[]*\])", location) if part]
    return [part.strip('"') for part in parts]


def _error(path: Path, text: str, keys: list[str], message: str) -> ConfigError:
    line = _line_of(text, keys)
    dotted = ".".join(keys)
    where = f"{path}:{line}" if line else str(path)
    return ConfigError(f"{where}: key `{dotted}`: {message}" if dotted else f"{where}: {message}")


_HEADER = re.compile(r"^\s*\[(\[)?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(
    r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_.\-]+?)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+))*)\s*="""
)


def _split_key(key: str) -> list[str]:
    parts = re.findall(r'"([^"]*)"|\'([^\']*)\'|([A-Za-z0-9_\-]+)', key)
    return [next(p for p in group if p) if any(group) else "" for group in parts]


def _line_of(text: str, keys: list[str]) -> int | None:
    """The line where the dotted key ``keys`` (``models[1]`` for the second ``[[models]]``)
    is assigned or its table starts; else the nearest line of its closest parent."""
    target: list[str] = []
    for key in keys:
        found = re.fullmatch(r"(.*)\[(\d+)\]", key)
        target += [found.group(1), f"#{found.group(2)}"] if found else [key]
    table: list[str] = []
    counts: dict[str, int] = {}
    best: tuple[int, int] | None = None  # (matched length, line)
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            name = _split_key(header.group(2))
            if header.group(1):  # [[array]]: the n-th occurrence is index n
                base = ".".join(name)
                index = counts.get(base, -1) + 1
                counts[base] = index
                name = [*name, f"#{index}"]
            table = name
            candidate = table
        else:
            assign = _ASSIGN.match(line)
            if not assign:
                continue
            candidate = [*table, *_split_key(assign.group(1))]
        matched = 0
        for mine, theirs in zip(candidate, target, strict=False):
            if mine != theirs:
                break
            matched += 1
        if matched == len(target) and matched == len(candidate):
            return number
        if matched == len(candidate) and (best is None or matched > best[0]):
            best = (matched, number)
    return best[1] if best else None


def _check_values(layer: _Layer) -> None:
    parsed = layer.parsed
    if parsed.model is not None and not re.fullmatch(r"[^/\s]+/\S+", parsed.model):
        raise _error(
            layer.path, layer.text, ["model"],
            f"{parsed.model!r} is not provider/model-id (e.g. openai/qwen2.5-coder:7b)",
        )  # fmt: skip
    if parsed.theme is not None and parsed.theme not in _themes():
        raise _error(
            layer.path, layer.text, ["theme"],
            f"{parsed.theme!r} is not a theme (dark, light, or one of Textual's: "
            f"{', '.join(sorted(_themes() - {'dark', 'light'}))})",
        )  # fmt: skip
    search = parsed.web_search
    if search is not None and search.backend not in _SEARCH_BACKENDS:
        raise _error(
            layer.path, layer.text, ["web_search", "backend"],
            f"{search.backend!r} is not a search backend ({', '.join(_SEARCH_BACKENDS)})",
        )  # fmt: skip
    if search is not None and search.backend == "searxng" and not search.url:
        raise _error(
            layer.path, layer.text, ["web_search"],
            'the searxng backend needs url = "https://your-searxng-instance"',
        )  # fmt: skip
    if search is not None and search.url and not re.match(r"https?://", search.url):
        raise _error(
            layer.path, layer.text, ["web_search", "url"],
            f"{search.url!r} is not an http:// or https:// URL",
        )  # fmt: skip
    if search is not None and search.api_key_env and not _VARIABLE.fullmatch(search.api_key_env):
        raise _error(
            layer.path, layer.text, ["web_search", "api_key_env"],
            f"{search.api_key_env!r} is not an environment variable name (letters, digits, _)",
        )  # fmt: skip
    if parsed.thinking is not None and parsed.thinking not in _THINKING_LEVELS:
        raise _error(
            layer.path, layer.text, ["thinking"],
            f"{parsed.thinking!r} is not a thinking level ({', '.join(_THINKING_LEVELS)})",
        )  # fmt: skip
    if parsed.permission_mode is not None and parsed.permission_mode not in PERMISSION_MODES:
        raise _error(
            layer.path, layer.text, ["permission_mode"],
            f"{parsed.permission_mode!r} is not a permission mode "
            f"({', '.join(PERMISSION_MODES)})",
        )  # fmt: skip


def _check_secrets(layer: _Layer, user: bool) -> None:
    parsed = layer.parsed
    for key in ("secrets", "secrets_passthrough"):
        for name in getattr(parsed, key):
            if not _VARIABLE.fullmatch(name):
                raise _error(
                    layer.path, layer.text, [key],
                    f"{name!r} is not an environment variable name (letters, digits, _)",
                )  # fmt: skip
    widened = parsed.sandbox is not None and not user
    for key in ("allow_write", "allow_domains"):
        if widened and getattr(parsed.sandbox, key):
            raise _error(
                layer.path, layer.text, ["sandbox", key],
                "only your own config.toml may widen the sandbox (a project could let its "
                f"commands write anywhere or reach any server); move sandbox.{key} there",
            )  # fmt: skip
    for entry in parsed.sandbox.allow_domains if parsed.sandbox is not None else ():
        match = _DOMAIN_ENTRY.fullmatch(entry.strip())
        if match is None or not 1 <= int(match.group(1) or 443) <= 65535:
            raise _error(
                layer.path, layer.text, ["sandbox", "allow_domains"],
                f"{entry!r} is not a domain with an optional port: write example.com (ports 80 "
                "and 443), *.example.com (its subdomains), example.com:8443 (that port only) "
                "or [::1]:8443 (an IPv6 address, in brackets)",
            )  # fmt: skip
    if parsed.warm_start is not None and not user:
        raise _error(
            layer.path, layer.text, ["warm_start"],
            "only your own config.toml may turn the warm start on or off (it decides which "
            "process runs your other projects' commands): move the key to your user config",
        )  # fmt: skip
    if parsed.permission_mode is not None and not user:
        raise _error(
            layer.path, layer.text, ["permission_mode"],
            "only your own config.toml may set the permission mode (a project could make its "
            "own sessions run every call unasked): move the key to your user config",
        )  # fmt: skip
    for key, why in (
        ("web_fetch", "open web_fetch to your private network"),
        ("web_search", "send your search key to its own server"),
        ("notifications", "post your sessions to its server or run its own command"),
    ):
        if getattr(parsed, key) is not None and not user:
            raise _error(
                layer.path, layer.text, [key],
                f"only your own config.toml may configure {key} (a project could {why}); "
                "move the table there",
            )  # fmt: skip
    if parsed.secrets_passthrough and not user:
        raise _error(
            layer.path, layer.text, ["secrets_passthrough"],
            "only your own config.toml may pass secrets to commands (a project could hand "
            "your keys to what it runs): move the key to your user config",
        )  # fmt: skip


def _check_directories(layer: _Layer, user: bool, env: Mapping[str, str] | None) -> None:
    """``permissions.additional_directories``: your own file only, each an existing folder."""
    permissions = layer.parsed.permissions
    keys = ["permissions", "additional_directories"]
    if permissions is None or not permissions.additional_directories:
        return
    if not user:
        raise _error(
            layer.path, layer.text, keys,
            "only your own config.toml may add working directories (a project could add ~ and "
            "have every file read unasked): move the key to your user config, or pass --add-dir",
        )  # fmt: skip
    home = (os.environ if env is None else env).get("HOME") or os.path.expanduser("~")
    for folder in permissions.additional_directories:
        spelled = home + folder[1:] if folder == "~" or folder.startswith("~/") else folder
        if not os.path.isabs(spelled):
            raise _error(
                layer.path, layer.text, keys,
                f"{folder!r} is not an absolute path (write /path or ~/path)",
            )  # fmt: skip
        if not os.path.isdir(spelled):
            raise _error(
                layer.path, layer.text, keys,
                f"{folder} is not a folder (create it, or remove it from the list)",
            )  # fmt: skip


def _themes() -> set[str]:
    """The ``theme`` values: ``dark``, ``light`` and Textual's built-in theme names."""
    from textual.theme import BUILTIN_THEMES

    return {"dark", "light", *BUILTIN_THEMES}


# -- merging ------------------------------------------------------------------------------------
def _merge(config: EffectiveConfig, layer: _Layer, path: Path) -> None:
    def origin(keys: list[str]) -> str:
        line = _line_of(layer.text, keys)
        return f"{path}:{line}" if line else str(path)

    data = layer.data
    for key in ("model", "thinking", "theme", "permission_mode", "warm_start"):
        if key in data:
            setattr(config, key, data[key])
            config.origin[key] = origin([key])
    for key in ("secrets", "secrets_passthrough"):
        listed: list[str] = getattr(config, key)
        for variable in cast(list[str], data.get(key) or []):
            if variable not in listed:
                listed.append(variable)
        if key in data:
            config.origin[key] = origin([key])
    sandbox = layer.parsed.sandbox
    if sandbox is not None:
        config.sandbox_enabled = config.sandbox_enabled or sandbox.enabled
        for name, paths in (
            ("deny_read", sandbox.deny_read),
            ("allow_write", sandbox.allow_write),
            ("allow_domains", sandbox.allow_domains),
        ):
            listed = cast(list[str], getattr(config, f"sandbox_{name}"))
            listed.extend(p for p in paths if p not in listed)
            if paths:
                config.origin[f"sandbox.{name}"] = origin(["sandbox", name])
        if sandbox.enabled:
            config.origin["sandbox.enabled"] = origin(["sandbox", "enabled"])
    fetch = layer.parsed.web_fetch
    if fetch is not None:
        config.web_allow_private = list(fetch.allow_private)
        config.origin["web_fetch.allow_private"] = origin(["web_fetch", "allow_private"])
    search = layer.parsed.web_search
    if search is not None:
        config.web_search_backend = search.backend
        config.web_search_url = search.url
        config.web_search_key_env = search.api_key_env
        config.origin["web_search.backend"] = origin(["web_search", "backend"])
    if layer.parsed.notifications is not None:  # the user's file only (_check_secrets)
        config.notifications = layer.parsed.notifications
        config.origin["notifications"] = origin(["notifications"])
    providers = cast(dict[str, dict[str, Any]], data.get("providers") or {})
    for name, values in providers.items():
        merged = config.providers.setdefault(name, {})
        if "api_key" in values or "api_key_env" in values:  # a key of pi's yields to this one
            for field in ("api_key", "api_key_env"):
                if _from_pi(config, f"providers.{name}.{field}"):
                    merged.pop(field, None)
                    del config.origin[f"providers.{name}.{field}"]
        config.origin[f"providers.{name}"] = origin(["providers", name])
        for key, value in values.items():
            if key == "compat" and isinstance(value, dict):
                compat = cast(dict[str, Any], merged.setdefault("compat", {}))
                for flag, setting in cast(dict[str, Any], value).items():
                    compat[flag] = setting
                    config.origin[f"providers.{name}.compat.{flag}"] = origin(
                        ["providers", name, "compat", flag]
                    )
                continue
            merged[key] = value
            config.origin[f"providers.{name}.{key}"] = origin(["providers", name, key])
    for index, model in enumerate(cast(list[dict[str, Any]], data.get("models") or [])):
        ref = f"{model['provider']}/{model['id']}"
        config.models = [m for m in config.models if f"{m['provider']}/{m['id']}" != ref]
        config.models.append(dict(model))
        config.origin[f"models.{ref}"] = origin([f"models[{index}]"])


def _check_registry(config: EffectiveConfig) -> None:
    """Validate the merged values as the registry will (provider names, compat flags, prices),
    naming the file and line of the key at fault."""

    try:
        parse_registry_config(config.registry())
    except RegistryError as error:
        message = str(error).removeprefix("invalid model config: ")
        where = re.search(r" - at `\$(.*?)`|at `\$(.*?)`", message)
        location = (where.group(1) or where.group(2)) if where else ""
        message = (message[: where.start()] + message[where.end() :]).strip() if where else message
        keys = _keys(location)
        unknown = re.match(r"unknown provider '([^']+)'", message)
        if unknown and keys == ["providers"]:
            keys.append(unknown.group(1))
        raise _config_error_at(config, keys, " ".join(message.split())) from None


def _config_error_at(config: EffectiveConfig, keys: list[str], message: str) -> ConfigError:
    """Name the file (and line) a merged key came from."""
    dotted = ".".join(keys)
    if keys and keys[0].startswith("models[") and config.models:
        found = re.fullmatch(r"models\[(\d+)\]", keys[0])
        if found and int(found.group(1)) < len(config.models):
            model = config.models[int(found.group(1))]
            place = config.origin.get(f"models.{model['provider']}/{model['id']}", config.source)
            rest = ".".join(keys[1:])
            return ConfigError(f"{place}: key `models{'.' + rest if rest else ''}`: {message}")
    for length in range(len(keys), 0, -1):
        place = config.origin.get(".".join(keys[:length]))
        if place is not None:
            return ConfigError(f"{place}: key `{dotted}`: {message}")
    for known, place in config.origin.items():
        if dotted and known.startswith(dotted):
            return ConfigError(f"{place.rsplit(':', 1)[0]}: key `{dotted}`: {message}")
    return ConfigError(f"{config.source}: key `{dotted}`: {message}" if dotted else message)
