"""The permission rules' files: where ``allow``/``ask``/``deny`` lists are read and written.

The approval feature (facets-approval) owns the rule grammar and the decisions; this module only
finds the rule lists in the files a user keeps and edits those files. It is handed to the
feature as the harness service ``permission_rules`` (:class:`PermissionFiles`; the feature and
the app never import each other). The files, in the order they are listed:

=================================================  ==================  ======================
file                                               scope               read when
=================================================  ==================  ======================
``$XDG_CONFIG_HOME/coding-agent/config.toml``      ``user``            always
``<project>/.coding-agent/config.toml``            ``project``         the project is trusted
``~/.claude/settings.json``                        ``claude-user``     always
``<project>/.claude/settings.json``                ``claude-project``  the project is trusted
``<project>/.claude/settings.local.json``          ``claude-local``    the project is trusted
=================================================  ==================  ======================

In ``config.toml`` the lists are the ``[permissions]`` table (checked as the rest of the file
by :mod:`coding_agent.settings.config`)::

    [permissions]
    allow = ["Bash(npm run test:*)", "Bash(git diff:*)", "Edit(src/**)"]
    ask = ["Bash(git push:*)"]
    deny = ["Read(./.env)", "Bash(rm -rf:*)"]

In Claude Code's settings they are ``permissions.allow``/``ask``/``deny``; every other key of those
files that this agent does not honour is one problem line naming the file and the key and what to
do instead (:mod:`coding_agent.settings.claude_settings`, which also maps ``defaultMode``:
:meth:`PermissionFiles.claude_mode`). Claude Code's restrictive switches
(``disableBypassPermissionsMode``, ``denyInsteadOfPrompting``,
``blockWritesOutsideWorkingDirectories``) are handed over too, as ``load()``'s
``"restrictions"`` (:meth:`PermissionFiles.restrictions`), from every Claude Code file, an
untrusted project's included: they only take authority away. ``~/.claude`` is
``$CLAUDE_CONFIG_DIR`` when that is set. The project is the one
:func:`~coding_agent.settings.trust.project_root_for` finds; trust is read again whenever the
trust file changes, so ``/trust`` applies to the next call.

Files are read again only when one changed (size or modification time); a file that cannot be
read or has the wrong shape is a *problem* line naming it, never fatal (the rules it holds do
not apply and the user is told). :meth:`PermissionFiles.add` appends a rule to the ``user`` or
``project`` ``config.toml`` with ``tomlkit``, keeping the user's comments and layout, and
:meth:`PermissionFiles.remove` deletes one from any of the files (a Claude settings file is
rewritten as JSON with two-space indents, its other keys kept). :meth:`PermissionFiles.add_directory`
appends a folder to ``additional_directories`` of your own ``config.toml`` the same way
(``/add-dir --remember``; never a project's file).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from coding_agent.settings.claude_settings import (
    default_mode,
    flag_notes,
    restrictions,
    unread_keys,
)
from coding_agent.settings.config import project_config_path, user_config_path
from coding_agent.settings.run_options import CLI_RULE_SOURCE
from coding_agent.settings.told_notes import ToldNotes
from coding_agent.settings.trust import (
    TrustError,
    TrustStore,
    folder_problem,
    project_root_for,
    trust_path,
)
from coding_agent.settings.xdg import claude_home
from pico3 import write_atomic

__all__ = ["KINDS", "PermissionFiles", "WorkingSettings", "starting_mode"]

KINDS = ("allow", "ask", "deny")

_ADDED = {
    "user": "additional_directories",
    "claude-user": "additionalDirectories",
    "claude-flag": "additionalDirectories",
}
"""Where the added working directories are read: your own files only (a project's could add
``~``; :mod:`coding_agent.settings.config` and the Claude Code note refuse it there)."""

_BLOCK = {".toml": "block_reads_outside_working_directories"}
"""config.toml's key refusing reads outside the working directories, read from either file (it
only restricts; Claude Code's ``blockReadsOutsideWorkingDirectories`` is one of the restrictive
switches, :data:`~coding_agent.settings.claude_settings.RESTRICTIONS`)."""


@dataclass(frozen=True)
class WorkingSettings:
    """What the permission files say about the working directories: the folders they add
    (absolute, ``~`` expanded) and whether reads outside them are refused."""

    added: tuple[str, ...] = ()
    block_reads_outside: bool = False
    sources: tuple[str, ...] = ()
    """The file each of :attr:`added` comes from (same order): what ``/add-dir`` lists."""


def starting_mode(cwd: str | os.PathLike[str], chosen: str | None) -> str | None:
    """The permission mode a *new* session in ``cwd`` starts in: ``chosen`` (``--permission-mode``,
    else ``permission_mode`` of config.toml), unless Claude Code's ``permissions.defaultMode``
    changes it (your file when nothing is chosen; a trusted project's only to make it
    stricter: :meth:`PermissionFiles.claude_mode`). ``None``: nothing chosen, the approval
    feature's own default (``ask``). The TUI, ``-p`` and ``coding-agent acp`` all start a new
    session here; a resumed one keeps its own mode."""
    claude = PermissionFiles(Path(cwd)).claude_mode(chosen)
    return claude[0] if claude is not None else chosen


def _signature(path: Path) -> tuple[str, int, int] | tuple[str]:
    try:
        found = path.stat()
    except OSError:
        return (str(path),)
    return (str(path), found.st_mtime_ns, found.st_size)


class PermissionFiles:
    """The rule files of the session whose folder is ``cwd`` (``env``: where ``HOME`` and
    ``XDG_CONFIG_HOME`` point; default ``os.environ``). The rules of this run's
    ``--allowedTools`` / ``--disallowedTools`` join with :meth:`set_run_rules`. ``told``: the
    session worker's memory of notes told once (:mod:`coding_agent.settings.told_notes`);
    without it (``coding-agent config``, the command line's checks) every note is listed."""

    def __init__(
        self,
        cwd: str | os.PathLike[str],
        env: Mapping[str, str] | None = None,
        *,
        told: ToldNotes | None = None,
    ) -> None:
        self._env = dict(os.environ if env is None else env)
        self._told = told  # the session worker's: a note of TOLD_ONCE is told once per value
        self._run_rules: list[dict[str, str]] = []
        self._run_settings: tuple[str, dict[str, Any]] | None = None
        self.root = project_root_for(cwd)
        self.user_file = user_config_path(self._env)
        self.project_file = project_config_path(cwd)
        claude = claude_home(self._env)
        self._files: list[tuple[str, Path]] = [
            ("user", self.user_file),
            ("project", self.project_file),
            ("claude-user", claude / "settings.json"),
            ("claude-project", self.root / ".claude" / "settings.json"),
            ("claude-local", self.root / ".claude" / "settings.local.json"),
        ]
        self._seen: tuple[Any, ...] | None = None
        self._loaded: dict[str, Any] = {}
        self._modes: dict[str, tuple[Path, object]] = {}
        self._tables: dict[str, tuple[Path, dict[str, Any]]] = {}
        self._working = WorkingSettings()
        self._cwd = Path(cwd)
        self._claude: list[tuple[Path, dict[str, Any]]] = []

    @property
    def claude_files(self) -> list[Path]:
        """The Claude Code settings files the last :meth:`load` read, in order
        (``~/.claude/settings.json``, a trusted project's ``.claude/settings*.json``, this
        run's ``--settings`` file); ``coding-agent config`` names them among the files read."""
        return list(dict.fromkeys(path for path, _data in self._claude))

    def set_run_rules(self, rules: Sequence[Mapping[str, str]]) -> None:
        """This run's ``--allowedTools`` / ``--disallowedTools`` rules (source ``command line``,
        :meth:`~coding_agent.settings.run_options.RunOptions.rules`), once the approval feature
        found them valid: listed after the files' rules and decided as theirs are, whether the
        project is trusted or not; never written anywhere (:meth:`remove` refuses them)."""
        self._run_rules = [dict(rule) for rule in rules]
        self._seen = None

    def set_run_settings(self, source: str, data: Mapping[str, Any]) -> None:
        """This run's ``--settings`` (``source``: its file, or ``--settings (JSON)``), read as
        your own ``~/.claude/settings.json`` is, trusted project or not: its ``permissions``
        rules (listed with ``source``), its restrictive switches and
        ``additionalDirectories``; every other key is the note a file's is
        (:func:`~coding_agent.settings.claude_settings.flag_notes`). Never written anywhere."""
        self._run_settings = (source, dict(data))
        self._seen = None

    def trusted(self) -> tuple[bool, str | None]:
        """Whether the project is trusted (and why not, when it never can be)."""
        problem = folder_problem(self.root)
        if problem is not None:
            return False, f"{self.root} {problem}"
        try:
            decision = TrustStore(trust_path(self._env)).get(self.root)
        except TrustError as error:
            return False, str(error)
        return decision is not None and decision.trusted, None

    def load(self) -> dict[str, Any]:
        """``{"root", "scopes", "trusted", "rules", "problems"}`` (see facets-approval's
        ``PermissionSource``); read again only when a file or the trust file changed."""
        paths = [*(path for _scope, path in self._files), trust_path(self._env)]
        seen = tuple(_signature(path) for path in paths)
        if seen == self._seen:
            return self._loaded
        trusted, why = self.trusted()
        rules: list[dict[str, Any]] = []
        problems: list[str] = []
        self._modes = {}
        self._tables = {}
        self._claude = []
        for scope, path in self._files:
            if scope not in ("user", "claude-user") and not trusted:
                if path.is_file() and path != self.user_file:
                    reason = why or "the project is not trusted (/trust to trust it)"
                    problems.append(f"{path}: not read, {reason}{self._restricting(path)}")
                continue
            if scope == "project" and path == self.user_file:
                continue
            lists = self._lists(path, problems, scope)
            for kind in KINDS:
                for rule in lists.get(kind, ()):
                    rules.append({"rule": rule, "kind": kind, "source": str(path), "scope": scope})
        rules += self._flag_rules(problems)  # --settings, trusted project or not
        rules += self._run_rules  # --allowedTools / --disallowedTools, trusted project or not
        self._working = self._working_settings(problems)
        self._loaded = {
            "root": str(self.root),
            "scopes": ["project", "user"] if trusted else ["user"],
            "trusted": trusted,  # its repositories' git configuration runs without asking
            "rules": rules,
            "problems": problems,
            "restrictions": restrictions(self._claude),
        }
        self._seen = seen
        return self._loaded

    def _flag_rules(self, problems: list[str]) -> list[dict[str, Any]]:
        """The rules of ``--settings`` (:meth:`set_run_settings`), its notes into ``problems``."""
        if self._run_settings is None:
            return []
        source, data = self._run_settings
        self._claude.append((Path(source), data))
        problems.extend(flag_notes(source, data))
        table = data.get("permissions")
        if not isinstance(table, dict):
            return []
        self._tables["claude-flag"] = (Path(source), cast(dict[str, Any], table))
        return [
            {"rule": rule, "kind": kind, "source": source, "scope": "session"}
            for kind in KINDS
            for rule in cast(dict[str, Any], table).get(kind) or ()
        ]

    def restrictions(self) -> dict[str, str]:
        """Claude Code's restrictive switches in force, each with the file that turned it on
        (:func:`~coding_agent.settings.claude_settings.restrictions`)."""
        return dict(self.load()["restrictions"])

    def _restricting(self, path: Path) -> str:
        """An untrusted project's Claude Code file: its restrictive switches still apply (they
        only take authority away); the words saying so, or ``""`` when it has none on."""
        if path.suffix != ".json":
            return ""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return ""
        if not isinstance(data, dict):
            return ""
        self._claude.append((path, cast(dict[str, Any], data)))
        found = restrictions([(path, cast(dict[str, Any], data))])
        if not found:
            return ""
        keys = ", ".join(f"permissions.{key}" for key in found)
        return f"; its {keys} applies all the same (it only restricts)"

    def claude_mode(self, chosen: str | None) -> tuple[str, str] | None:
        """The mode a new session starts in from Claude Code's ``permissions.defaultMode``
        (and the file it comes from), given the mode ``chosen`` by config.toml; ``None`` when
        those files change nothing (:func:`~coding_agent.settings.claude_settings.default_mode`)."""
        self.load()
        projects = [self._modes[s] for s in ("claude-project", "claude-local") if s in self._modes]
        return default_mode(self._modes.get("claude-user"), projects, chosen)

    def working_directories(self) -> WorkingSettings:
        """The working directories the files add and whether reads outside them are refused
        (read again when a file changed; :mod:`coding_agent.worker.working_dirs`)."""
        self.load()
        return self._working

    def _working_settings(self, problems: list[str]) -> WorkingSettings:
        added: list[str] = []
        sources: list[str] = []
        block = False
        for scope, (path, table) in self._tables.items():
            key = _BLOCK.get(path.suffix)
            value = table.get(key) if key is not None else None
            if value is not None and not isinstance(value, bool):
                problems.append(f"{path}: `permissions.{key}` must be true or false, got {value!r}")
            block = block or value is True
            name = _ADDED.get(scope)
            folders = table.get(name) if name is not None else None
            if folders is None:
                continue
            if not isinstance(folders, list) or not all(isinstance(f, str) for f in folders):  # pyright: ignore[reportUnknownVariableType]
                problems.append(f"{path}: `permissions.{name}` must be a list of folders")
                continue
            for folder in cast(list[str], folders):
                real = self._cwd / self._expand(folder)
                if not real.is_dir():
                    problems.append(
                        f"{path}: `permissions.{name}`: {folder} is not a folder; its reads "
                        "still ask (create it, or remove it from the list)"
                    )
                elif str(real) not in added:
                    added.append(str(real))
                    sources.append(str(path))
        return WorkingSettings(tuple(added), block, tuple(sources))

    def _expand(self, folder: str) -> str:
        """``folder`` with a leading ``~`` made the home folder (``HOME`` of the environment)."""
        home = self._env.get("HOME") or os.path.expanduser("~")
        if folder == "~" or folder.startswith("~/"):
            return home + folder[1:]
        return folder

    def _lists(self, path: Path, problems: list[str], scope: str) -> dict[str, list[Any]]:
        """The ``allow``/``ask``/``deny`` lists of one file (empty when it has none); a Claude
        Code file's keys this agent does not honour are added to ``problems``."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as error:
            problems.append(f"{path}: cannot read it ({error})")
            return {}
        try:
            if path.suffix == ".toml":
                import tomllib

                table: Any = tomllib.loads(text).get("permissions", {})
            else:
                data = json.loads(text)
                table = data.get("permissions", {}) if isinstance(data, dict) else None
                if isinstance(data, dict):
                    found_data = cast(dict[str, Any], data)
                    self._claude.append((path, found_data))
                    project = scope != "claude-user"
                    told = self._told
                    quiet = told.quiet(path, found_data) if told is not None else frozenset()
                    problems.extend(unread_keys(path, found_data, project, quiet=quiet))
                    if isinstance(table, dict) and "defaultMode" in table:
                        self._modes[scope] = (path, cast(dict[str, Any], table)["defaultMode"])
        except (ValueError, TypeError) as error:
            problems.append(
                f"{path}: not valid {'TOML' if path.suffix == '.toml' else 'JSON'} ({error})"
            )
            return {}
        if not isinstance(table, dict):
            problems.append(
                f"{path}: `permissions` must be a table/object of allow, ask and deny lists"
            )
            return {}
        self._tables[scope] = (path, cast(dict[str, Any], table))
        found: dict[str, list[Any]] = {}
        for kind in KINDS:
            value = cast(dict[str, Any], table).get(kind)
            if value is None:
                continue
            if not isinstance(value, list):
                problems.append(
                    f"{path}: `permissions.{kind}` must be a list of rules, got {value!r}"
                )
                continue
            found[kind] = cast(list[Any], value)
        return found

    # -- writing ------------------------------------------------------------------------------
    def add(self, rule: str, kind: str, scope: str) -> str:
        """Append ``rule`` to the ``kind`` list of the ``scope`` (``user`` or ``project``)
        ``config.toml``, keeping its comments and layout; returns the file's path. Raises
        ``ValueError`` for another scope or an untrusted project."""
        if kind not in KINDS:
            raise ValueError(f"{kind!r} is not a rule list (allow, ask or deny)")
        if scope == "user":
            path = self.user_file
        elif scope == "project":
            if not self.trusted()[0]:
                raise ValueError(
                    f"the project {self.root} is not trusted (/trust), so its config.toml is not read"
                )
            path = self.project_file
        else:
            raise ValueError(f"rules are written to the user or project config.toml, not {scope!r}")
        _append_to_list(path, kind, rule)
        self._seen = None
        return str(path)

    def add_directory(self, folder: str) -> tuple[str, bool]:
        """Append ``folder`` (absolute) to ``additional_directories`` in your own
        ``config.toml`` (``/add-dir --remember``), keeping its comments and layout: a working
        directory of every session. Never a project's file (a cloned repository may not add
        folders). Returns the file's path and whether it was written: ``False`` when the list
        already names the folder (spelled ``~/...`` or absolute), and nothing is written.
        Raises ``ValueError`` naming the file when it is not valid TOML or its
        ``[permissions]`` is not a table."""
        path = self.user_file
        key = _ADDED["user"]
        present = self._listed(path, key)
        if any(os.path.realpath(self._cwd / self._expand(item)) == folder for item in present):
            return str(path), False
        _append_to_list(path, key, folder)
        self._seen = None
        return str(path), True

    def _listed(self, path: Path, key: str) -> list[str]:
        """The strings of ``[permissions]``'s ``key`` list in the TOML file ``path`` (empty
        when the file or the list is missing); ``ValueError`` naming a file that is broken."""
        import tomllib

        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"{path}: cannot read it ({error})") from None
        try:
            table: object = tomllib.loads(text).get("permissions", {})
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"{path}: not valid TOML ({error}); fix it first") from None
        if not isinstance(table, dict):
            raise ValueError(f"{path}: `permissions` must be a table; fix it first")
        found = cast(dict[str, Any], table).get(key, [])
        if not isinstance(found, list):
            raise ValueError(f"{path}: `permissions.{key}` must be a list; fix it first")
        return [item for item in cast(list[object], found) if isinstance(item, str)]

    def remove(self, rule: str, kind: str, source: str) -> None:
        """Delete ``rule`` from the ``kind`` list of the file ``source`` (one of this session's
        rule files). Raises ``ValueError`` naming what is not there, or for a rule of this
        run's command line (it lasts for the run)."""
        if self._run_settings is not None and source == self._run_settings[0]:
            raise ValueError(
                f"{rule} comes from this run's --settings: it lasts until the session's worker "
                "stops (start without it to drop it)"
            )
        if source == CLI_RULE_SOURCE:
            flag = "--allowedTools" if kind == "allow" else "--disallowedTools"
            raise ValueError(
                f"{rule} comes from this run's {flag}: it lasts until the session's worker "
                "stops (start without it to drop it)"
            )
        path = Path(source)
        if path not in [p for _scope, p in self._files]:
            raise ValueError(f"{source} is not one of this session's permission files")
        if kind not in KINDS:
            raise ValueError(f"{kind!r} is not a rule list (allow, ask or deny)")
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"{source} no longer exists") from None
        if path.suffix == ".toml":
            import tomlkit

            document = tomlkit.parse(text)
            rules: Any = document.get("permissions", {}).get(kind, [])
            values = [str(item) for item in rules]
            if rule not in values:
                raise ValueError(f"{source} has no {kind} rule {rule}")
            del rules[values.index(rule)]
            output = tomlkit.dumps(document)
        else:
            data = json.loads(text)
            rules = data.get("permissions", {}).get(kind, []) if isinstance(data, dict) else []
            if not isinstance(rules, list) or rule not in rules:
                raise ValueError(f"{source} has no {kind} rule {rule}")
            rules.remove(rule)
            output = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        write_atomic(path, output, mode=None)
        self._seen = None


def _append_to_list(path: Path, key: str, value: str) -> None:
    """Append ``value`` to the ``key`` list of the ``[permissions]`` table of the TOML file
    ``path`` (created, with the table and the list, when missing) unless it is there already,
    with ``tomlkit``: the user's comments and layout are kept byte for byte. Written with
    :func:`pico3.write_atomic`, so a crash leaves the old file or the new one."""
    import tomlkit

    text = path.read_text(encoding="utf-8") if path.exists() else ""
    document = tomlkit.parse(text)
    table = document.get("permissions")
    if table is None:
        table = tomlkit.table()
        document["permissions"] = table
    values = table.get(key)
    if values is None:
        values = tomlkit.array()
        table[key] = values
    if value not in [str(item) for item in values]:
        values.append(value)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, tomlkit.dumps(document), mode=None)
