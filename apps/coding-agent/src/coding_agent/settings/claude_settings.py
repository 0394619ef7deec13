"""What of Claude Code's ``settings.json`` this agent honours, and a note for every other key.

A Claude Code user's settings files (``~/.claude/settings.json``, a trusted project's
``.claude/settings.json`` and ``.claude/settings.local.json``) are read by this agent for:

* ``permissions.allow``/``ask``/``deny`` — the permission rules
  (:mod:`coding_agent.settings.permissions`, the approval feature's grammar);
* ``hooks`` — read by the hooks feature (facets-hooks) from the same files;
* ``permissions.defaultMode`` — a new session's permission mode (:func:`default_mode`; the
  TUI, ``-p`` and ``coding-agent acp`` start there through
  :func:`~coding_agent.settings.permissions.starting_mode`), when neither
  ``--permission-mode`` nor ``permission_mode`` in your ``config.toml`` chooses one.
  Claude Code's ``default`` (or ``manual``), ``acceptEdits`` and ``plan`` are this agent's
  ``ask``, ``accept-edits`` and ``plan`` (``dontAsk`` is the ``denyInsteadOfPrompting`` switch
  below; Claude Code's classifier ``auto`` is a note, never this agent's ``auto``); they count from your own file. A project's file may only make
  the mode *stricter*: its ``default`` or ``plan`` applies when stricter than the mode chosen
  otherwise (it does not override ``--permission-mode``); a looser one is a note.
  ``bypassPermissions`` is never taken from a settings file (a note says to pass
  ``--permission-mode auto`` or set ``permission_mode = "auto"``), nor is any other value.
* ``permissions.additionalDirectories`` — more working directories (folders the file tools
  read without asking: :mod:`coding_agent.worker.working_dirs`), from your own file only: in a
  project's file it is a note saying it is not taken from a project (a cloned repository could
  add ``~``) and where to put it instead;
* ``permissions.disableBypassPermissionsMode`` (``"disable"``),
  ``permissions.denyInsteadOfPrompting``, ``permissions.blockWritesOutsideWorkingDirectories``
  and ``permissions.blockReadsOutsideWorkingDirectories`` (``true``) — Claude Code's switches
  that only restrict (:data:`RESTRICTIONS`): the ``auto`` mode cannot be entered; a call that
  would ask is refused instead; ``write``/``edit``, or ``read``/``grep``/``find``/``ls``, outside
  the working directories are refused in every mode. Each is read from *every* Claude Code settings file,
  an untrusted project's too (it can only take authority away), and none turns one off: the
  first file that turns one on is the one named (:func:`restrictions`). The approval feature
  applies them (``facets_approval.restrictions``); ``--permission-mode auto`` and
  ``permission_mode = "auto"`` are refused at start (:func:`auto_disabled`), and so is the
  headless ``--approve allow``, which runs every call that would ask
  (:func:`approve_allow_disabled`). A value of another
  type is a note naming the key, and it turns nothing on.
* ``enabledPlugins`` — which of the Claude Code plugins installed in ``~/.claude/plugins`` load
  (:mod:`coding_agent.settings.claude_plugins`: their commands, skills, agents, hooks and MCP
  servers; a project's file counts only in a trusted project);
* ``claudeMdExcludes`` — glob patterns (matched against a file's absolute path, ``**/`` for
  anywhere) of ``CLAUDE.md``, ``CLAUDE.local.md``, rule and imported files not to read
  (:func:`claude_md_excludes`, which :mod:`coding_agent.context.context_files` applies; the
  patterns of every file add up). Yours exclude any file; a trusted project's only the
  project's own files (a cloned repository does not switch off your ``~/.claude/CLAUDE.md``).
  A value that is not a list of texts is a note, and excludes nothing;
* ``autoMemoryEnabled`` (``false`` turns off reading Claude Code's auto memory, from your file
  or a trusted project's) and ``autoMemoryDirectory`` (the folder of it, from your own file
  only: a project's is a note): :func:`auto_memory_setting`, which
  :mod:`coding_agent.context.context_files` applies; a value of another type is a note;
* ``$schema`` — an editor's hint, nothing to do.

Every other key is **one note** (:func:`unread_keys`) naming the file, the key and what to do
instead (``outputStyle``: ``APPEND_SYSTEM.md``; ``statusLine``: the footer; ...), unless its value
asks for what this agent does anyway (``includeCoAuthoredBy: false``, an empty
``attribution``, ``respectGitignore: true``), reported where an invalid permission rule is: the worker's log (stderr in ``-p``), a
notice in the TUI (the notes that arrive together folded into one, but for ``sandbox`` and
``permissions.*``: ``facets_approval.permissions_tui.problem_notices``), ``/permissions`` and
``coding-agent config``. The note about ``model`` is told once per distinct value, not at every
start (:mod:`coding_agent.settings.told_notes`; ``coding-agent config`` always lists it). ``env`` is *not* honoured: in
Claude Code those variables are set for Claude itself as well as its commands (its
``ANTHROPIC_*`` provider settings among them), and a project file that sets variables for every
command (``BASH_ENV``, ``LD_PRELOAD``, ``PATH``, ``GIT_SSH_COMMAND``) is a way to run code in
commands the user approved as harmless; the note says to export them before starting the agent.
``sandbox`` is not honoured either, and its note says loudly that bash is *not* sandboxed.

Claude Code's ``--settings FILE_OR_JSON`` (:mod:`coding_agent.settings.run_options`) is read as
your own file for one run, with the same notes (:func:`flag_notes`), but for
``enabledPlugins`` and ``claudeMdExcludes``, which it does not set (a note each), and
``permissions.defaultMode``, which is the run's permission mode when ``--permission-mode`` is not
given (:func:`flag_mode`: the command line applies it as that flag's value, behind the same gates).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

__all__ = [
    "CLAUDE_MODES",
    "HONOURED",
    "RESTRICTIONS",
    "approve_allow_disabled",
    "auto_disabled",
    "auto_memory_setting",
    "claude_md_excludes",
    "default_mode",
    "flag_mode",
    "flag_notes",
    "mode_note",
    "restrictions",
    "settings_json",
    "unread_keys",
]

CLAUDE_MODES = {"default": "ask", "manual": "ask", "acceptEdits": "accept-edits", "plan": "plan"}
"""Claude Code's ``permissions.defaultMode`` values this agent takes, as its own mode names
(``manual`` is Claude Code's newer alias of ``default``). ``dontAsk`` is taken as the
``denyInsteadOfPrompting`` restriction (:func:`restrictions`), not as a mode."""

DONT_ASK = "dontAsk"
"""Claude Code's mode that refuses whatever would ask: this agent's ``denyInsteadOfPrompting``
switch, turned on from any settings file that names it (it only restricts)."""

PROJECT_MODES = ("default", "manual", "plan")
"""The values a project's file may set (they only make the mode stricter)."""

STRICTEST_FIRST = ("plan", "ask", "accept-edits", "sandbox", "auto")
"""The modes from the strictest (the approval contract's ``STRICTEST_FIRST``; the app may not
import the feature, and tests/app/settings/test_claude_settings.py pins the two together)."""

HONOURED = (
    "$schema",
    "autoMemoryDirectory",
    "autoMemoryEnabled",
    "claudeMdExcludes",
    "enabledPlugins",
    "hooks",
    "permissions",
)
"""The top-level keys read (``permissions`` key by key: :func:`unread_keys`)."""

RESTRICTIONS: dict[str, object] = {
    "disableBypassPermissionsMode": "disable",
    "denyInsteadOfPrompting": True,
    "blockWritesOutsideWorkingDirectories": True,
    "blockReadsOutsideWorkingDirectories": True,
}
"""Claude Code's ``permissions.*`` switches that only restrict, each with the value that turns
it on (the approval feature's ``facets_approval.restrictions`` applies them)."""

_READ_PERMISSIONS = ("allow", "ask", "deny", "defaultMode", *RESTRICTIONS)

_PROJECT_DIRECTORIES = (
    "not taken from a project's settings (a cloned repository could add ~ and have every "
    "file read unasked); put it in ~/.claude/settings.json, in additional_directories of the "
    "[permissions] table of your own config.toml, or pass --add-dir DIR"
)

_ADVICE = {
    "env": "the variables are NOT set for this agent's commands; export them in your shell "
    "before starting coding-agent (a project file never sets them: PATH, BASH_ENV or "
    "LD_PRELOAD there would run code in every command)",
    "model": 'this agent does not read Claude Code\'s model; use model = "provider/id" in '
    "config.toml or --model",
    "apiKeyHelper": "this agent does not run it; set the provider's key variable (such as "
    "ANTHROPIC_API_KEY) or providers.<name>.api_key in config.toml",
    "disableAllHooks": "this agent does not read it: the hooks in these files still run; "
    "remove them from the file to stop them (/hooks lists them)",
    "enableAllProjectMcpServers": "this agent does not read it; it asks you to approve each "
    "server of a trusted project's .mcp.json itself",
    "enabledMcpjsonServers": "this agent does not read it; it asks you to approve each server "
    "of a trusted project's .mcp.json itself",
    "disabledMcpjsonServers": "this agent does not read it: those servers are NOT disabled by "
    "it; remove them from .mcp.json or decline them when asked",
    "extraKnownMarketplaces": "this agent does not install plugins; a plugin Claude Code "
    "installed from a marketplace loads here when enabledPlugins turns it on",
    "statusLine": "this agent does not run a status line command; its footer shows the model, "
    "the context used and the cost",
    "outputStyle": "this agent does not read output styles; put the style's instructions in "
    "APPEND_SYSTEM.md (in ~/.config/coding-agent/ or a trusted project's .coding-agent/) to add "
    "them to the system prompt",
    "language": "this agent does not read it; write the language to answer in in your AGENTS.md "
    "(or ~/.claude/CLAUDE.md), which the model reads",
    "includeCoAuthoredBy": "this agent adds no Co-Authored-By line to commits (the setting "
    "asks for one): write it in your AGENTS.md if you want the model to add it",
    "attribution": "this agent adds no attribution to commits or pull requests (the setting "
    "asks for some): write it in your AGENTS.md if you want the model to add it",
    "respectGitignore": "not honoured: grep, find, ls and @ mentions here always skip "
    ".gitignored files (read such a file by its path)",
    "cleanupPeriodDays": "this agent never deletes old sessions by itself; they stay under "
    "$XDG_STATE_HOME/coding-agent/ until you remove them",
    "alwaysThinkingEnabled": "this agent does not read it; choose the thinking level with "
    "thinking in config.toml or /thinking",
}

_ALREADY_SO: dict[str, object] = {
    "includeCoAuthoredBy": False,
    "respectGitignore": True,
}
"""Keys whose value here is what this agent always does anyway: no note (no attribution is
added, .gitignored files are skipped). ``attribution`` is so when every text in it is empty."""

_SANDBOX = (
    "this agent does not read Claude Code's sandbox settings; bash is NOT sandboxed by it — use "
    "[sandbox] enabled = true in config.toml or --permission-mode sandbox"
)


EXCLUDES = "claudeMdExcludes"

_EXCLUDES_SHAPE = (
    'must be a list of glob patterns (["**/packages/legacy/**", "/abs/path/CLAUDE.md"]); it '
    "excludes nothing, so every CLAUDE.md and rule file is read"
)


def _patterns(value: object) -> list[str] | None:
    """``claudeMdExcludes``' patterns, ``None`` when ``value`` is not a list of texts."""
    if not isinstance(value, list):
        return None
    items = cast(list[object], value)
    if not all(isinstance(item, str) for item in items):
        return None
    return [cast(str, item).strip() for item in items if cast(str, item).strip()]


MEMORY_ON = "autoMemoryEnabled"
MEMORY_FOLDER = "autoMemoryDirectory"

_MEMORY_FOLDER_NOTE = (
    "not taken from a project's settings (a cloned repository could point it at any file of "
    "yours to have it read into the prompt); put it in ~/.claude/settings.json"
)


def auto_memory_setting(
    files: list[tuple[Path, dict[str, Any]]], project: Path | None = None, home: Path | None = None
) -> tuple[bool, Path | None]:
    """``(on, folder)`` of Claude Code's auto memory after ``files`` (each a settings file and
    its JSON): off when any says ``autoMemoryEnabled: false``; ``folder`` is the
    ``autoMemoryDirectory`` of the last of your own files that sets one (``~`` is ``home``,
    default the process's), never a file under ``project``'s ``.claude`` folder (``None``: the
    default folder)."""
    on, folder = True, None
    for path, data in files:
        if data.get(MEMORY_ON) is False:
            on = False
        mine = project is None or (project / ".claude") not in path.parents
        value = data.get(MEMORY_FOLDER)
        if mine and isinstance(value, str) and value.strip():
            written = value.strip()
            if home is not None and (written == "~" or written.startswith("~/")):
                folder = home / written[2:]
            else:
                folder = Path(written).expanduser()
    return on, folder


def settings_json(path: Path) -> dict[str, Any] | None:
    """The JSON object of the Claude Code settings file ``path``; ``None`` when there is none or
    it cannot be read or is not an object (the permission rules' loader reports such a file:
    :mod:`coding_agent.settings.permissions`)."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return cast(dict[str, Any], data) if isinstance(data, dict) else None


def claude_md_excludes(
    files: list[tuple[Path, dict[str, Any]]], project: Path | None = None
) -> list[tuple[str, Path, bool]]:
    """``(pattern, settings file, project's)`` for each ``claudeMdExcludes`` pattern of
    ``files`` (each a Claude Code settings file and its JSON, in the order read): a file under
    ``project``'s ``.claude`` folder gives patterns that exclude only the project's files
    (module docstring). A value of another shape gives none (:func:`unread_keys` notes it)."""
    found: list[tuple[str, Path, bool]] = []
    for path, data in files:
        mine = project is None or (project / ".claude") not in path.parents
        found += [(p, path, not mine) for p in _patterns(data.get(EXCLUDES)) or ()]
    return found


def _note(path: Path, key: str, advice: str | None = None) -> str:
    return f"{path}: `{key}`: " + (
        advice or "a Claude Code setting this agent does not read; it has no effect here"
    )


def mode_note(path: Path, value: object, project: bool) -> str | None:
    """The note for ``permissions.defaultMode`` = ``value`` in ``path`` (a project's file when
    ``project``); ``None`` when it is honoured."""
    if value in (PROJECT_MODES if project else CLAUDE_MODES) or value == DONT_ASK:
        return None
    key = "permissions.defaultMode"
    if value == "auto":
        return _note(
            path, key, "Claude Code's auto mode (a classifier reviews calls) has no counterpart "
            "here; this agent's own auto mode runs every call unasked, so it is not taken and "
            "calls ask — for fewer questions with confinement use --permission-mode sandbox or "
            "accept-edits",
        )  # fmt: skip
    if project and value in CLAUDE_MODES:
        return _note(
            path, key, f"{value!r} is not taken from a project's settings (a project may only "
            "make the mode stricter: default or plan); set it in ~/.claude/settings.json or "
            "permission_mode in your config.toml",
        )  # fmt: skip
    if value == "bypassPermissions":
        return _note(
            path, key, "'bypassPermissions' is not taken from a settings file; calls still "
            'ask — pass --permission-mode auto, or set permission_mode = "auto" in your own '
            "config.toml",
        )  # fmt: skip
    return _note(
        path, key, f"{value!r} is not a mode this agent takes (default or manual, acceptEdits, "
        "plan, dontAsk); use --permission-mode or permission_mode in config.toml",
    )  # fmt: skip


def unread_keys(
    path: Path, data: dict[str, Any], project: bool, *, quiet: frozenset[str] = frozenset()
) -> list[str]:
    """One note per key of the Claude Code settings ``data`` (read from ``path``, a project's
    file when ``project``) that this agent does not honour (module docstring), but for the
    top-level keys in ``quiet`` (notes already told: :mod:`coding_agent.settings.told_notes`)."""
    notes: list[str] = []
    for key, value in data.items():
        if key in quiet:
            continue
        if key == "sandbox":
            on = isinstance(value, dict) and cast(dict[str, Any], value).get("enabled") is True
            notes.append(_note(path, "sandbox.enabled" if on else "sandbox", _SANDBOX))
        elif key == "permissions" and isinstance(value, dict):
            for sub, found in cast(dict[str, Any], value).items():
                name = f"permissions.{sub}"
                if sub == "defaultMode":
                    note = mode_note(path, found, project)
                    if note is not None:
                        notes.append(note)
                elif sub == "additionalDirectories":
                    if project:
                        notes.append(_note(path, name, _PROJECT_DIRECTORIES))
                elif sub in RESTRICTIONS and _switch(sub, found) is None:
                    notes.append(_restriction_note(path, sub, found))
                elif sub not in _READ_PERMISSIONS:
                    notes.append(_note(path, name, _ADVICE.get(name)))
        elif key == EXCLUDES and _patterns(value) is None:
            notes.append(_note(path, key, _EXCLUDES_SHAPE))
        elif key == MEMORY_ON and not isinstance(value, bool):
            notes.append(_note(path, key, "must be true or false; Claude Code's auto memory is "
                               "read as if it were true"))  # fmt: skip
        elif key == MEMORY_FOLDER and (project or not isinstance(value, str) or not value):
            notes.append(_note(path, key, _MEMORY_FOLDER_NOTE if project else "must be a "
                               "folder's path; the default folder is read"))  # fmt: skip
        elif key not in HONOURED and not _already_so(key, value):
            notes.append(_note(path, key, _ADVICE.get(key)))
    return notes


_FLAG_ADVICE = {
    "permissions.defaultMode": "not a mode --settings sets (default or manual, acceptEdits, "
    "plan, bypassPermissions, dontAsk); choose this run's mode with --permission-mode (ask, "
    "accept-edits, plan, sandbox, auto)",
    "enabledPlugins": "not taken from --settings; plugins load when ~/.claude/settings.json "
    "enables them",
    EXCLUDES: "not taken from --settings; every CLAUDE.md and rule file is read — put the "
    "patterns in ~/.claude/settings.json or the project's .claude/settings.local.json",
}


FLAG_MODES = {**CLAUDE_MODES, "bypassPermissions": "auto"}
"""``--settings``' ``permissions.defaultMode`` values, as this agent's modes: the run's mode when
``--permission-mode`` is not given (:func:`flag_mode`). ``bypassPermissions`` is ``auto``, behind
the gates ``--permission-mode auto`` has (``disableBypassPermissionsMode`` in any settings file
refuses it, and so does the approval feature's own ``set_mode``). A settings *file* never sets
``auto`` (:func:`mode_note`): ``--settings`` is a flag the user typed for this run."""


def flag_mode(data: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(our mode, Claude Code's value)`` of ``--settings``' ``permissions.defaultMode`` when it
    is one this agent takes (:data:`FLAG_MODES`), else ``None`` (a note says why:
    :func:`flag_notes`; ``dontAsk`` is a restriction, not a mode)."""
    table = data.get("permissions")
    value = cast(dict[str, Any], table).get("defaultMode") if isinstance(table, dict) else None
    if not isinstance(value, str) or value not in FLAG_MODES:
        return None
    return FLAG_MODES[value], value


def flag_notes(source: str, data: dict[str, Any]) -> list[str]:
    """The notes of ``--settings``' ``data`` (``source``: its file, or ``--settings (JSON)``):
    read as your own settings file (:func:`unread_keys`), but for the mode, the plugins and
    ``claudeMdExcludes``, which it does not set (:data:`_FLAG_ADVICE`)."""
    path = Path(source)
    rest = {key: value for key, value in data.items() if key not in ("enabledPlugins", EXCLUDES)}
    table = data.get("permissions")
    if isinstance(table, dict):
        rest["permissions"] = {
            key: value for key, value in cast(dict[str, Any], table).items() if key != "defaultMode"
        }
    notes = unread_keys(path, rest, project=False)
    if isinstance(table, dict) and "defaultMode" in table:
        mode = "permissions.defaultMode"
        value = cast(dict[str, Any], table)["defaultMode"]
        if value != DONT_ASK and value not in FLAG_MODES:  # dontAsk: a restriction
            notes.append(_note(path, mode, _FLAG_ADVICE[mode]))
    for key in ("enabledPlugins", EXCLUDES):
        if key in data:
            notes.append(_note(path, key, _FLAG_ADVICE[key]))
    return notes


def _already_so(key: str, value: object) -> bool:
    """Whether ``key`` = ``value`` asks for what this agent does anyway (:data:`_ALREADY_SO`)."""
    if key == "attribution" and isinstance(value, dict):
        return all(text == "" for text in cast(dict[str, Any], value).values())
    return key in _ALREADY_SO and value is _ALREADY_SO[key]


def default_mode(
    user: tuple[Path, object] | None,
    projects: list[tuple[Path, object]],
    chosen: str | None,
) -> tuple[str, str] | None:
    """The mode a new session starts in from Claude Code's ``defaultMode`` values, and the file
    it comes from: ``user`` (your file and its value) counts when nothing else ``chosen`` a mode
    (``permission_mode`` of config.toml), then each of ``projects`` (the trusted project's
    files) when stricter. ``None`` when none of them changes ``chosen``."""
    mode, source = chosen, None
    if mode is None and user is not None and isinstance(user[1], str):
        found = CLAUDE_MODES.get(user[1])
        if found is not None:
            mode, source = found, str(user[0])
    for path, value in projects:
        if value not in PROJECT_MODES:
            continue
        found = CLAUDE_MODES[cast(str, value)]
        current = mode or "ask"
        if STRICTEST_FIRST.index(found) < STRICTEST_FIRST.index(current) or mode is None:
            mode, source = found, str(path)
    return (mode, source) if mode is not None and source is not None else None


def _switch(key: str, value: object) -> bool | None:
    """Whether ``value`` turns the switch ``key`` on; ``None`` for a value of the wrong kind."""
    on = RESTRICTIONS[key]
    if on is True:
        return value if isinstance(value, bool) else None
    return True if value == on else None


def _restriction_note(path: Path, key: str, value: object) -> str:
    on = RESTRICTIONS[key]
    expected = "true or false" if on is True else json.dumps(on)
    return _note(
        path, f"permissions.{key}", f"must be {expected}, got {json.dumps(value)}; it is "
        "ignored, so it restricts nothing (Claude Code skips such a file too)",
    )  # fmt: skip


def restrictions(files: list[tuple[Path, dict[str, Any]]]) -> dict[str, str]:
    """The switches of :data:`RESTRICTIONS` that any of ``files`` (each a settings file and its
    JSON) turns on, each with the first file that does: what the permission source hands the
    approval feature as ``"restrictions"``."""
    found: dict[str, str] = {}
    for path, data in files:
        table = data.get("permissions")
        if not isinstance(table, dict):
            continue
        for key in RESTRICTIONS:
            if key not in found and _switch(key, cast(dict[str, Any], table).get(key)):
                found[key] = str(path)
        deny = "denyInsteadOfPrompting"
        if deny not in found and cast(dict[str, Any], table).get("defaultMode") == DONT_ASK:
            found[deny] = f"{path} (permissions.defaultMode: dontAsk)"
    return found


def approve_allow_disabled(found: dict[str, str]) -> str | None:
    """The one line refusing ``--approve allow`` (headless: every call that would ask runs, as
    in ``auto``, credentials and guarded files included) when ``found`` (:func:`restrictions`)
    disables the ``auto`` mode, as Claude Code's switch disables
    ``--dangerously-skip-permissions``; ``None`` when it does not."""
    source = found.get("disableBypassPermissionsMode")
    if source is None:
        return None
    return (
        "--approve allow: it runs every call that would ask, as the auto permission mode does, "
        f"and permissions.disableBypassPermissionsMode in {source} disables that; allow what "
        "the run needs with permission rules (permissions.allow) or answer each call from "
        "another client (--wait-for-approval)"
    )


def auto_disabled(found: dict[str, str], asked: str) -> str | None:
    """The one line refusing the ``auto`` mode that ``asked`` names (``--permission-mode auto``,
    or ``permission_mode = "auto"`` and where it is) when ``found`` (:func:`restrictions`)
    disables it; ``None`` when it does not."""
    source = found.get("disableBypassPermissionsMode")
    if source is None:
        return None
    return (
        f"{asked}: the auto permission mode is disabled by "
        f"permissions.disableBypassPermissionsMode in {source}; use ask, accept-edits, sandbox "
        "or plan"
    )
