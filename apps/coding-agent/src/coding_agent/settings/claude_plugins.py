"""Claude Code plugins the user installed and enabled: where they are and what they hold.

A Claude Code plugin is a folder (``/plugin install NAME@MARKETPLACE`` copies it to
``~/.claude/plugins/cache/MARKETPLACE/NAME/VERSION/``) with an optional manifest
``.claude-plugin/plugin.json`` and any of::

    commands/*.md          slash commands: /NAME:command, and /command when no other has it
    skills/*/SKILL.md      skills
    agents/*.md            subagent definitions
    hooks/hooks.json       hooks ({"hooks": {"Stop": [...]}}, ${CLAUDE_PLUGIN_ROOT} in commands)
    .mcp.json              MCP servers

The manifest's ``commands``, ``agents``, ``skills`` (a path or a list of paths, relative to the
plugin's folder), ``hooks`` and ``mcpServers`` (a path, or the object itself) replace those
default places, as in Claude Code; a path outside the plugin's folder is refused with a warning.

**Which plugins load** (:func:`enabled_plugins`). Claude Code records the installed plugins in
``~/.claude/plugins/installed_plugins.json`` (``{"version": 2, "plugins": {"NAME@MARKETPLACE":
[{"scope": "user", "installPath": ...}]}}``; version 1 held one object per plugin) and which
are on in a settings file's ``enabledPlugins`` (``{"NAME@MARKETPLACE": true}``). Read here:

* ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR`` moves it): the user's own choice; its
  plugins load;
* a project's ``.claude/settings.json`` then ``.claude/settings.local.json``, **only when the
  project is trusted** (``/trust``): they may turn a plugin on (still one the user installed
  into their own ``~/.claude/plugins``) or off, later files winning, as in Claude Code. In an
  untrusted project they are not read, so a cloned repository cannot switch on code.

A plugin that is not on (``false``, or absent) loads nothing. One that is on but cannot be read
(not installed, its folder gone, a manifest that is not JSON) is one warning naming the file and
the problem, and loads nothing; nothing here raises.

The app's own loaders read what a plugin holds: prompt templates
(:mod:`coding_agent.context.prompt_templates`), skills (:mod:`coding_agent.context.skills`),
and, through the worker's ``claude_plugins`` harness service (:meth:`ClaudePlugin.to_json`),
the features: facets-subagents (agent files), facets-hooks (``hooks.json``, run with
``CLAUDE_PLUGIN_ROOT`` set) and facets-mcp (``.mcp.json``, ``${CLAUDE_PLUGIN_ROOT}`` expanded).
``coding-agent config`` lists the plugins that load and the problems met.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

__all__ = [
    "MANIFEST",
    "ClaudePlugin",
    "PluginSet",
    "enabled_plugins",
    "plugin_settings_files",
]

MANIFEST = ".claude-plugin/plugin.json"
"""A plugin's manifest, relative to its folder."""

_DEFAULTS = {"commands": "commands", "agents": "agents", "skills": "skills"}


@dataclass(frozen=True, slots=True)
class ClaudePlugin:
    """One enabled, readable plugin."""

    id: str
    """``NAME@MARKETPLACE``, as ``enabledPlugins`` writes it."""
    name: str
    """The manifest's ``name`` (else the id's): the prefix of its commands (``/NAME:cmd``)."""
    root: Path
    """Its folder (``${CLAUDE_PLUGIN_ROOT}``)."""
    enabled_by: Path
    """The settings file whose ``enabledPlugins`` turned it on."""
    manifest: Mapping[str, Any] = field(default_factory=dict[str, Any])
    warnings: tuple[str, ...] = ()
    """Problems with its manifest's component paths (already in :attr:`PluginSet.warnings`)."""

    @property
    def label(self) -> str:
        """Where its parts come from, for display: ``plugin NAME@MARKETPLACE``."""
        return f"plugin {self.id}"

    def paths(self, kind: str) -> list[Path]:
        """The existing files and folders of component ``kind`` (``commands``, ``agents``,
        ``skills``): the manifest's paths when it names some, else the default folder."""
        return [path for path in _component(self, kind, []) if path.exists()]

    def hooks(self) -> list[str | dict[str, Any]]:
        """Its hook configuration: the manifest's ``hooks`` (a path or list of paths in the
        plugin, or the ``{"hooks": {...}}`` object itself), else ``hooks/hooks.json`` when it
        exists; a path as text, an inline object as it is written."""
        return _config(self, "hooks", "hooks/hooks.json")

    def to_json(self) -> dict[str, Any]:
        """What the worker hands the features (the ``claude_plugins`` harness service): its
        ``id``, ``name``, ``root`` (``${CLAUDE_PLUGIN_ROOT}``), ``agents`` (files and folders),
        ``hooks`` (:meth:`hooks`) and ``mcpServers`` (the manifest's, else ``.mcp.json``, in the
        same forms)."""
        return {
            "id": self.id,
            "name": self.name,
            "root": str(self.root),
            "agents": [str(path) for path in self.paths("agents")],
            "hooks": self.hooks(),
            "mcpServers": _config(self, "mcpServers", ".mcp.json"),
        }


@dataclass(frozen=True, slots=True)
class PluginSet:
    """The enabled plugins (in the order the settings name them) and the problems met."""

    plugins: tuple[ClaudePlugin, ...] = ()
    warnings: tuple[str, ...] = ()


def _component(plugin: ClaudePlugin, kind: str, warnings: list[str]) -> list[Path]:
    written: Any = plugin.manifest.get(kind)
    if written is None:
        return [plugin.root / _DEFAULTS[kind]] if kind in _DEFAULTS else []
    items: list[Any] = (
        [written] if isinstance(written, str) else cast(list[Any], written)
        if isinstance(written, list) else []
    )  # fmt: skip
    manifest = plugin.root / MANIFEST
    if not items or not all(isinstance(item, str) for item in items):
        warnings.append(f"{manifest}: `{kind}` must be a path or a list of paths; none is read")
        return []
    found: list[Path] = []
    root = plugin.root.resolve()
    for item in cast(list[str], items):
        path = (plugin.root / item).resolve()
        if path != root and root not in path.parents:
            warnings.append(f"{manifest}: `{kind}` path {item!r} is outside the plugin; not read")
            continue
        found.append(path)
    return found


def _config(plugin: ClaudePlugin, key: str, default: str) -> list[str | dict[str, Any]]:
    """A JSON configuration component (``hooks``, ``mcpServers``): inline objects as written,
    paths (refused outside the plugin by :func:`_component`) as existing files."""
    written: Any = plugin.manifest.get(key)
    if isinstance(written, dict):
        return [cast(dict[str, Any], written)]
    if written is None:
        path = plugin.root / default
        return [str(path)] if path.is_file() else []
    items = cast(list[Any], written) if isinstance(written, list) else [written]
    inline = [cast(dict[str, Any], item) for item in items if isinstance(item, dict)]
    paths = [item for item in items if not isinstance(item, dict)]
    meta = {key: paths} if paths else {}
    located = _component(ClaudePlugin(plugin.id, plugin.name, plugin.root, plugin.enabled_by,
                                      meta), key, []) if paths else []  # fmt: skip
    return [*inline, *(str(path) for path in located if path.is_file())]


def plugin_settings_files(claude_user: Path, project: Path | None, trusted: bool) -> list[Path]:
    """The settings files whose ``enabledPlugins`` count, lowest precedence first: the user's
    ``settings.json``, then (a trusted project only) its ``.claude/settings.json`` and
    ``.claude/settings.local.json``."""
    files = [claude_user / "settings.json"]
    if project is not None and trusted:
        for name in ("settings.json", "settings.local.json"):
            path = project / ".claude" / name
            if path.resolve() != files[0].resolve():
                files.append(path)
    return files


def _read_json(path: Path, warnings: list[str], what: str) -> Any:
    """``path``'s JSON, ``None`` when there is no such file or (with a warning naming it and
    ``what`` is lost) it cannot be read or parsed."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        warnings.append(f"{path}: cannot read it ({error}); {what}")
        return None
    try:
        return json.loads(text)
    except ValueError as error:
        warnings.append(f"{path}: not valid JSON ({error}); {what}")
        return None


def _enabled(files: list[Path], warnings: list[str]) -> dict[str, Path]:
    """``{id: settings file}`` of the plugins on after every file's ``enabledPlugins``."""
    on: dict[str, Path] = {}
    for path in files:
        data = _read_json(path, [], "")  # a broken settings file is reported by permissions
        if not isinstance(data, dict):
            continue
        value = cast(dict[str, Any], data).get("enabledPlugins")
        if value is None:
            continue
        if not isinstance(value, dict):
            warnings.append(
                f'{path}: `enabledPlugins` must be an object of {{"name@marketplace": true}}; '
                "no plugin is read from it"
            )
            continue
        for key, state in cast(dict[str, Any], value).items():
            if state is True:
                on[key] = path
            else:
                on.pop(key, None)
    return on


def _installed(claude_user: Path, warnings: list[str]) -> dict[str, list[dict[str, Any]]]:
    """``installed_plugins.json`` as ``{id: [install record, ...]}`` (versions 1 and 2)."""
    path = claude_user / "plugins" / "installed_plugins.json"
    data = _read_json(path, warnings, "installed plugins are looked for in plugins/cache")
    plugins = cast(dict[str, Any], data).get("plugins") if isinstance(data, dict) else None
    if not isinstance(plugins, dict):
        return {}
    found: dict[str, list[dict[str, Any]]] = {}
    for key, records in cast(dict[str, Any], plugins).items():
        listed: list[Any] = cast(list[Any], records) if isinstance(records, list) else [records]
        found[key] = [cast(dict[str, Any], r) for r in listed if isinstance(r, dict)]
    return found


def _install_path(
    plugin_id: str, records: list[dict[str, Any]], claude_user: Path, project: Path | None
) -> Path | None:
    """The folder of ``plugin_id``: its install record for this project, else the user's, else
    any; without a record, the newest version folder under ``plugins/cache``."""

    def rank(record: dict[str, Any]) -> int:
        where = record.get("projectPath")
        if project is not None and isinstance(where, str) and Path(where) == project:
            return 0
        return 1 if record.get("scope", "user") == "user" else 2

    for record in sorted(records, key=rank):
        path = record.get("installPath")
        if isinstance(path, str) and path:
            return Path(path).expanduser()
    name, _, market = plugin_id.partition("@")
    cache = claude_user / "plugins" / "cache" / market / name
    if not market or not cache.is_dir():
        return None
    if (cache / MANIFEST).is_file():
        return cache
    versions = [entry for entry in cache.iterdir() if entry.is_dir()]
    return max(versions, key=lambda entry: entry.stat().st_mtime) if versions else None


def enabled_plugins(claude_user: Path, project: Path | None, trusted: bool) -> PluginSet:
    """The plugins on in the settings (:func:`plugin_settings_files`) and installed under
    ``claude_user/plugins`` (module docstring)."""
    warnings: list[str] = []
    on = _enabled(plugin_settings_files(claude_user, project, trusted), warnings)
    if not on:
        return PluginSet((), tuple(warnings))
    installed = _installed(claude_user, warnings)
    plugins: list[ClaudePlugin] = []
    for plugin_id, settings in on.items():
        root = _install_path(plugin_id, installed.get(plugin_id, []), claude_user, project)
        if root is None:
            warnings.append(
                f"{settings}: plugin {plugin_id} is enabled but not installed (no record in "
                f"{claude_user / 'plugins' / 'installed_plugins.json'}); install it with Claude "
                "Code's /plugin install, or remove it from enabledPlugins"
            )
            continue
        if not root.is_dir():
            warnings.append(
                f"{root}: plugin {plugin_id}'s folder is missing; reinstall it with Claude "
                f"Code's /plugin install, or remove it from enabledPlugins in {settings}"
            )
            continue
        manifest = _read_json(root / MANIFEST, warnings, f"plugin {plugin_id} is not loaded")
        if manifest is None and (root / MANIFEST).exists():
            continue
        if manifest is not None and not isinstance(manifest, dict):
            warnings.append(f"{root / MANIFEST}: must be a JSON object; plugin {plugin_id} is "
                            "not loaded")  # fmt: skip
            continue
        meta = cast(dict[str, Any], manifest or {})
        written = meta.get("name")
        name = written if isinstance(written, str) and written else plugin_id.partition("@")[0]
        plugin = ClaudePlugin(plugin_id, name, root, settings, meta)
        problems: list[str] = []
        for kind in (*_DEFAULTS, "hooks", "mcpServers"):
            if not isinstance(meta.get(kind), dict):
                _component(plugin, kind, problems)
        warnings.extend(problems)
        plugins.append(ClaudePlugin(plugin_id, name, root, settings, meta, tuple(problems)))
    return PluginSet(tuple(plugins), tuple(warnings))
