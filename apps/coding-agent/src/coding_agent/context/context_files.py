"""Memory: the standing instructions read from ``AGENTS.md`` / ``CLAUDE.md`` files, as Claude Code
and pi users write them.

Coding agents read a project's instructions from Markdown files next to the code, and a user's
own from their home folder. We read all the places Claude Code and pi read, in this order (outer
and more general first, so the most specific instructions come last and win when they disagree)::

    ~/.claude/CLAUDE.md                      # your Claude Code memory ($CLAUDE_CONFIG_DIR)
    ~/.pi/agent/AGENTS.md (or CLAUDE.md)     # your pi memory
    $XDG_CONFIG_HOME/coding-agent/AGENTS.md  # your memory for this agent
    /home/me/AGENTS.md                       # each folder from / down to the working folder:
    /home/me/work/repo/AGENTS.md             #   AGENTS.md, CLAUDE.md, .claude/CLAUDE.md,
    /home/me/work/repo/CLAUDE.local.md       #   CLAUDE.local.md (your own notes, not committed)
    /home/me/work/repo/pkg/CLAUDE.md         # a sub-folder's files, once the agent has read or
                                             #   edited a file under it (Claude Code does this)

**Auto memory.** The notes Claude Code keeps for a project by itself,
``~/.claude/projects/<project>/memory/MEMORY.md`` (the project is the git root), are read after
the working folder's files: the first :data:`AUTO_MEMORY_LINES` lines (at most
:data:`AUTO_MEMORY_CHARS` characters), as Claude Code loads them at every start. This agent
reads them and never writes them. ``autoMemoryEnabled: false`` (your settings or a trusted
project's) or ``CLAUDE_CODE_DISABLE_AUTO_MEMORY=1`` turns them off, and ``autoMemoryDirectory``
in your own settings moves the folder (:func:`auto_memory_file`).

**Rules.** Claude Code's ``.claude/rules/**/*.md`` are read too: ``~/.claude/rules/`` right after
``~/.claude/CLAUDE.md``, and each folder's ``.claude/rules/`` right after its
``.claude/CLAUDE.md``. A rule with ``paths:`` in its front matter is read only once the agent
worked on a matching file (:mod:`coding_agent.context.memory_rules`).

**Both names, once.** A folder's ``AGENTS.md`` and ``CLAUDE.md`` are both read when they differ.
When one is a link to the other, a copy of it, or only imports it (``@AGENTS.md``), it is read
once.

**Imports.** ``@path`` in a file (Claude Code's syntax: ``@docs/style.md``, ``@~/notes.md``,
``@/abs/file.md``; relative to the importing file; not inside code spans or fenced blocks) adds
that file right after the one importing it, and so on up to :data:`MAX_IMPORT_DEPTH` levels. An
import cycle, a missing file or one deeper than that is left as written and reported. The
``@path`` text stays in the file (the model sees where the imported text came from). A file
that is not text (``@docs/diagram.png``, ``@spec.pdf``: NUL bytes in it) is not read and is
reported.

A project's files import only files inside the project (a cloned repository's ``@~/.ssh/id_rsa``
must not put your key into the prompt); your own memory files may import any file you own. For
the same reason a project's context file that is a symlink leading outside the project
(``CLAUDE.md -> ../../.ssh/id_rsa``, which git clones as a link) is not read, and a file where
credentials are kept (``pico3.DEFAULT_DENY_READ``, this agent's ``config.toml``, Claude Code's
``settings.json``) is never read, whoever links or imports it.

**HTML comments are hidden.** ``<!-- notes for the people maintaining the file -->`` is taken
out of the text the model is sent, as Claude Code hides it when it injects a ``CLAUDE.md``
(:func:`hide_html_comments`; a comment inside a fenced block or a code span is code and stays,
and an ``@path`` inside a comment is not imported). The file itself is unchanged: the ``read``
tool shows the comments, as Claude Code's Read tool does. A file that is nothing but comments
adds nothing.

**Excluded files.** Claude Code's ``claudeMdExcludes`` (glob patterns of absolute paths, such
as ``**/packages/legacy/**``, in your ``~/.claude/settings.json`` or a trusted project's
``.claude/settings.json`` / ``settings.local.json``:
:func:`~coding_agent.settings.claude_settings.claude_md_excludes`) leaves out every context,
rule or imported file a pattern matches (the path as found or the file it links to), each listed
as skipped with the pattern and the settings file. A project's patterns leave out only the
project's own files.

**Whose files are read.** The folders from the project root down (:func:`~coding_agent.settings.
trust.project_root_for`: the git root, or the working folder) are the project's, and their files
are read. A file anywhere else (above the project root, in the home folder, imported from
outside the project) is read only when nobody but the user could have put it there
(:func:`context_file_problem`): the file and the folder holding it are owned by the user and
writable by nobody else, and every folder above that is owned by the user or by root and
writable by nobody else, unless it has the sticky bit (``/tmp``). Symlinks are resolved first.
:func:`scan_context_files` returns each skipped file with the reason; the worker logs it once,
and ``/context`` lists it with every file read and why it is there.

The files are a system section of the conversation, ``context-files``, whose value is
``{"files": [{"path", "content", "reason"}]}``. A ``system_instructions`` hook
(:mod:`coding_agent.worker.system_prompt_facet`) reads them afresh before every generation, so
editing ``AGENTS.md`` mid-session takes effect on the next turn (the harness stores a delta
entry only when the text changed). Each file is capped at :data:`MAX_FILE_CHARS` characters so a
runaway file cannot fill the context window.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from coding_agent.context.memory_rules import (
    RULES_FOLDER,
    glob_pattern,
    matching,
    rule_files,
    rule_scope,
)
from coding_agent.settings.claude_plugins import plugin_settings_files
from coding_agent.settings.claude_settings import (
    auto_memory_setting,
    claude_md_excludes,
    settings_json,
)
from coding_agent.settings.trust import (
    TrustError,
    TrustStore,
    folder_owner,
    folder_problem,
    is_trusted,
    project_root_for,
    trust_path,
)
from coding_agent.settings.xdg import claude_home, claude_project_folder, config_home, pi_home

if TYPE_CHECKING:  # start-up time: pico3.turn (the harness's turn machinery) loads where a
    # session's prompt is built, not in the TUI, whose commands read these modules too
    from pico3 import SystemSection

__all__ = [
    "AUTO_MEMORY_CHARS",
    "AUTO_MEMORY_LINES",
    "CONTEXT_FILE_NAMES",
    "MAX_FILE_CHARS",
    "MAX_IMPORT_DEPTH",
    "SECTION_KEY",
    "ContextFile",
    "ContextFiles",
    "SkippedFile",
    "auto_memory_file",
    "context_file_problem",
    "context_files_section",
    "find_context_files",
    "hide_html_comments",
    "render_context_files",
    "scan_context_files",
    "touched_folders",
    "touched_paths",
]

CONTEXT_FILE_NAMES = ("AGENTS.md", "CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md")
"""The files looked for in each folder, in the order they are read."""

SUBFOLDER_FILE_NAMES = ("AGENTS.md", "CLAUDE.md", "CLAUDE.local.md")
"""The files a sub-folder of the working folder adds once the agent works in it."""

MAX_FILE_CHARS = 100_000
"""Longest file content kept; the rest is replaced by a note."""

MAX_IMPORT_DEPTH = 5
"""How many levels of ``@path`` imports are followed (Claude Code's limit)."""

SECTION_KEY = "context-files"

AUTO_MEMORY_LINES = 200
"""How many lines of Claude Code's auto memory (``MEMORY.md``) are read (Claude Code's number)."""

AUTO_MEMORY_CHARS = 25_000
"""The most characters of it read (Claude Code's 25 KB), when its first lines are longer."""

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_HIDDEN = re.compile(r"(^(```|~~~).*?^\2[^\n]*$)|(`[^`\n]*`)|(<!--.*?-->[ \t]*\n?)", re.M | re.S)
"""A fenced block or a code span (kept as they are) or an HTML comment (hidden), leftmost
first, so a comment-like text in code is never taken for a comment and a fence inside a
comment is hidden with it."""
_IMPORT = re.compile(r"(?:(?<=\s)|^)@((?:~/|/|\.{1,2}/)?[\w.~-][\w./~-]*)", re.M)


class ContextFile(msgspec.Struct, frozen=True):
    """One instruction file: its absolute path, (possibly capped) text, and why it is read."""

    path: str
    content: str
    reason: str = ""

    def to_json(self) -> dict[str, str]:
        """The section value's shape."""
        return {"path": self.path, "content": self.content, "reason": self.reason}


class SkippedFile(msgspec.Struct, frozen=True):
    """A context file that was not read: its absolute path and why."""

    path: str
    reason: str


class ContextFiles(msgspec.Struct, frozen=True):
    """What :func:`scan_context_files` found: the files read, in order, and the ones skipped
    (another user could have written them, or an import could not be followed)."""

    files: list[ContextFile]
    skipped: list[SkippedFile]


def _read(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if len(text) > MAX_FILE_CHARS:
        text = text[:MAX_FILE_CHARS] + f"\n\n[{path.name} truncated at {MAX_FILE_CHARS} characters]"
    return text


def _others_may_write(info: os.stat_result) -> bool:
    return bool(info.st_mode & (stat.S_IWOTH | stat.S_IWGRP))


def context_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path``, a context file outside the project, may not be read (``None``: it may).

    The real file and the folder holding it must be the user's and writable by nobody else
    (:func:`coding_agent.settings.trust.folder_problem`, which allows group write for the user's
    own private group); each folder above must be owned by the user or root and writable by
    nobody else, unless it is sticky (``/tmp``)."""
    real = Path(os.path.realpath(path))
    shown = f" ({real})" if str(real) != os.path.abspath(path) else ""
    problem = folder_problem(real)
    if problem is not None:
        return f"the file{shown} {problem}"
    problem = folder_problem(real.parent)
    if problem is not None:
        return f"its folder {real.parent} {problem}"
    me = os.geteuid()
    for folder in real.parent.parents:
        try:
            info = os.stat(folder)
        except OSError as error:
            return f"{folder} cannot be examined ({error.strerror})"
        if info.st_mode & stat.S_ISVTX:
            continue  # others may add files here, but not rename or replace ours
        if info.st_uid not in (0, me):
            return f"{folder} is owned by {folder_owner(folder)}, not by you or root"
        if _others_may_write(info) and (info.st_uid != me or folder_problem(folder) is not None):
            return f"{folder} is writable by other users (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def _credentials(real: str, home: Path, env: Mapping[str, str]) -> str | None:
    """The credentials folder or file holding the real path ``real``, or ``None``: those of
    ``pico3.DEFAULT_DENY_READ`` (``~/.ssh``, ``~/.aws``...) and the settings files that may hold
    your keys (this agent's ``config.toml``, Claude Code's ``settings.json``). A link above the
    project (an unpacked archive's ``CLAUDE.md -> ../../.ssh/id_rsa``) resolves to a file of
    your own, which the ownership checks let through."""
    from pico3 import DEFAULT_DENY_READ  # lazy: see the TYPE_CHECKING import above

    claude = claude_home({**env, "HOME": str(home)})
    keys = (
        config_home(env) / "coding-agent" / "config.toml",
        claude / "settings.json",
        claude / "settings.local.json",
    )
    for spelled in (*DEFAULT_DENY_READ, *(str(path) for path in keys)):
        place = os.path.realpath(str(home) + spelled[1:] if spelled.startswith("~") else spelled)
        if real == place or real.startswith(place.rstrip(os.sep) + os.sep):
            return spelled
    return None


def hide_html_comments(text: str) -> str:
    """``text`` without its HTML comments (``<!-- ... -->``, one line or several), as Claude
    Code hides them from the model when it injects a ``CLAUDE.md`` or a rule: notes for the
    file's maintainers cost no context. A comment inside a fenced block (```` ``` ````/``~~~``)
    or a code span is part of the code and stays; an unclosed ``<!--`` stays as written."""
    if "<!--" not in text:
        return text
    return _HIDDEN.sub(lambda match: "" if match.group(4) else match.group(0), text)


def _imports(text: str) -> list[str]:
    """The ``@path`` imports of ``text``, outside fenced blocks and code spans, in order."""
    prose = _CODE_SPAN.sub("", _FENCE.sub("", text))
    return [match.group(1).rstrip(".,;:)") for match in _IMPORT.finditer(prose)]


def _only_imports(text: str) -> bool:
    """Whether ``text`` is nothing but ``@path`` imports (a CLAUDE.md that says ``@AGENTS.md``)."""
    return not _IMPORT.sub("", text).strip()


class _Scan:
    """One scan: the files in reading order, each read once, and what was skipped."""

    def __init__(
        self, root: Path, home: Path, env: Mapping[str, str], touched: Iterable[Path] = ()
    ) -> None:
        self.root = root
        self.home = home
        self.env = env
        self.touched = list(touched)
        """Files and folders the agent worked on (a path-scoped rule waits for a match)."""
        self.files: list[ContextFile] = []
        self.skipped: list[SkippedFile] = []
        self._seen: set[str] = set()
        self._texts: set[str] = set()
        self.settings = _claude_settings(root, home, env)
        """Your Claude Code settings and a trusted project's: ``(file, its JSON)``."""
        self.excludes = [
            (glob_pattern(written), written, source, project)
            for written, source, project in claude_md_excludes(self.settings, root)
        ]
        """``claudeMdExcludes``: ``(pattern, its text, settings file, project's only)``."""

    def excluded(self, candidate: Path, real: str) -> str | None:
        """Why ``candidate`` (whose real path is ``real``) is left out by a
        ``claudeMdExcludes`` pattern, or ``None``."""
        shown = (os.path.abspath(candidate).lstrip("/"), real.lstrip("/"))
        for pattern, written, source, project_only in self.excludes:
            if project_only and not self.inside(Path(os.path.abspath(candidate))):
                continue
            if any(pattern.fullmatch(path) for path in shown):
                return f"excluded by claudeMdExcludes {written!r} in {source}"
        return None

    def inside(self, path: Path) -> bool:
        return path == self.root or self.root in path.parents

    def add_rules(self, claude: Path, base: Path, reason: str) -> None:
        """The rule files of ``claude/rules`` (a ``.claude`` folder): those without ``paths``,
        and those whose ``paths`` (relative to ``base``) match a file the agent worked on."""
        for rule in rule_files(claude / RULES_FOLDER):
            self.add(rule, reason, rule_base=base)

    def add(
        self,
        candidate: Path,
        reason: str,
        *,
        depth: int = 0,
        chain: tuple[str, ...] = (),
        rule_base: Path | None = None,
        head: bool = False,
    ) -> None:
        """Read ``candidate`` (when it exists and may be read) and then its imports. With
        ``rule_base`` it is a rule file (:meth:`add_rules`): its front matter decides."""
        if not candidate.is_file():
            return
        real = os.path.realpath(candidate)
        if real in self._seen:
            return  # a link to a file already read, or an import of one
        if (why := self.excluded(candidate, real)) is not None:
            self.skipped.append(SkippedFile(str(candidate), why))
            return
        if (held := _credentials(real, self.home, self.env)) is not None:
            problem: str | None = (
                f"it leads to {real}, in {held}, where credentials are kept: a context file "
                "is sent to the model provider, so credentials are never one"
            )
        elif self.inside(candidate) and not self.inside(Path(real)):
            problem = (
                f"a project file linking outside the project (to {real}): a project's files "
                "bring in only files inside it (a cloned repository's CLAUDE.md linking to "
                "~/.ssh/id_rsa must not put your key into the prompt); copy the file in instead"
            )
        elif self.inside(Path(real)) and self.inside(candidate):
            problem = None
        else:
            problem = context_file_problem(candidate)
        if problem is not None:
            self.skipped.append(SkippedFile(str(candidate), problem))
            return
        text = _read(candidate)
        if text is not None and "\x00" in text:
            self.skipped.append(
                SkippedFile(
                    str(candidate),
                    "not a text file (it holds NUL bytes: an image, a PDF, an archive); it is "
                    "not put into the prompt, as Claude Code leaves such an import out",
                )
            )
            return
        if text is not None and rule_base is not None:
            try:
                globs, text = rule_scope(text)
            except ValueError as error:
                self.skipped.append(SkippedFile(str(candidate), f"a rule file, but {error}"))
                return
            match = matching(globs, rule_base, self.touched) if globs else None
            if globs and match is None:
                return  # read once the agent works on a file its paths match
            reason = f"{reason}, for {match}" if match else reason
        if text is not None and head:
            text = _head(text, candidate.name)
        if text is not None:
            text = hide_html_comments(text)
        if text is None or not text.strip():
            return
        self._seen.add(real)
        imports = _imports(text)
        if text.strip() not in self._texts and not (_only_imports(text) and imports):
            self._texts.add(text.strip())
            self.files.append(ContextFile(str(candidate), text, reason))
        self._follow(candidate, imports, depth, (*chain, real))

    def _follow(
        self, importer: Path, imports: list[str], depth: int, chain: tuple[str, ...]
    ) -> None:
        for name in imports:
            target = self.home / name[2:] if name.startswith("~/") else importer.parent / name
            if not target.is_file():
                continue  # an @mention, an email or a file that is not there: left as text
            real = os.path.realpath(target)
            if self.inside(importer.resolve()) and not self.inside(Path(real)):
                self.skipped.append(
                    SkippedFile(
                        str(target),
                        f"imported by {importer}, a project file, from outside the project: a "
                        "project's files import only files inside it (your own memory files may "
                        "import any file you own)",
                    )
                )
                continue
            if real in chain:
                self.skipped.append(
                    SkippedFile(str(target), f"imported by {importer} in a cycle: not read again")
                )
                continue
            if depth + 1 > MAX_IMPORT_DEPTH:
                self.skipped.append(
                    SkippedFile(
                        str(target),
                        f"imported by {importer} more than {MAX_IMPORT_DEPTH} imports deep",
                    )
                )
                continue
            self.add(target, f"imported by {importer}", depth=depth + 1, chain=chain)


def _claude_settings(
    root: Path, home: Path, env: Mapping[str, str]
) -> list[tuple[Path, dict[str, Any]]]:
    """Your Claude Code settings file and, when the project at ``root`` is trusted, its own
    (:func:`~coding_agent.settings.claude_plugins.plugin_settings_files`), each with its JSON
    (a file that is missing or broken is left out: the permission rules' loader reports it)."""
    claude = claude_home({**env, "HOME": str(home)})
    try:
        trusted = folder_problem(root) is None and is_trusted(root, TrustStore(trust_path(env)))
    except TrustError:  # a broken trust file trusts nothing (it is reported where it is read)
        trusted = False
    return [
        (path, data)
        for path in plugin_settings_files(claude, root, trusted)
        if (data := settings_json(path)) is not None
    ]


def auto_memory_file(
    root: Path, env: Mapping[str, str], settings: list[tuple[Path, dict[str, Any]]]
) -> Path | None:
    """The ``MEMORY.md`` of Claude Code's auto memory for the project at ``root`` (module
    docstring), or ``None`` when ``settings`` (:func:`_claude_settings`) or
    ``CLAUDE_CODE_DISABLE_AUTO_MEMORY`` turn it off."""
    if env.get("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "").strip().lower() in ("1", "true", "yes"):
        return None
    home = env.get("HOME", "")
    enabled, folder = auto_memory_setting(settings, root, Path(home) if home else None)
    if not enabled:
        return None
    return (folder or claude_project_folder(root, env) / "memory") / "MEMORY.md"


def _head(text: str, name: str) -> str:
    """The first :data:`AUTO_MEMORY_LINES` lines of ``text`` (at most :data:`AUTO_MEMORY_CHARS`
    characters), with a note when there was more."""
    lines = text.splitlines(keepends=True)
    kept = "".join(lines[:AUTO_MEMORY_LINES])[:AUTO_MEMORY_CHARS]
    if len(kept) == len(text):
        return text
    return (
        f"{kept.rstrip()}\n\n[{name}: only its first {AUTO_MEMORY_LINES} lines (at most "
        f"{AUTO_MEMORY_CHARS} characters) are read; the rest is in the file]"
    )


def _user_files(env: Mapping[str, str], home: Path) -> list[tuple[Path, str]]:
    pi = pi_home({**env, "HOME": str(home)})
    pi_file = pi / "AGENTS.md" if (pi / "AGENTS.md").is_file() else pi / "CLAUDE.md"
    return [
        (claude_home({**env, "HOME": str(home)}) / "CLAUDE.md", "your Claude Code memory"),
        (pi_file, "your pi memory"),
        (config_home(env) / "coding-agent" / "AGENTS.md", "your memory"),
    ]


def scan_context_files(
    cwd: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    touched: Iterable[str | os.PathLike[str]] = (),
) -> ContextFiles:
    """The instruction files for working folder ``cwd`` in reading order (module docstring),
    and the files skipped with the reason. ``touched`` are the files and folders under ``cwd``
    the agent has worked on (:func:`touched_paths`; a file stands for its folder): the files of
    those folders are added after the working folder's, and a path-scoped rule is read once one
    of them matches its ``paths``.
    ``env`` (default ``os.environ``) gives ``HOME`` and ``XDG_CONFIG_HOME``."""
    environ = os.environ if env is None else env
    start = Path(cwd).expanduser().resolve()
    home_value = environ.get("HOME", "")
    home = Path(home_value) if os.path.isabs(home_value) else Path(os.path.expanduser("~"))
    worked = [Path(path).resolve() for path in touched]
    scan = _Scan(project_root_for(start), home, environ, worked)
    for path, reason in _user_files(environ, home):
        scan.add(path, reason)
        if reason == "your Claude Code memory":
            scan.add_rules(path.parent, scan.root, "your Claude Code rules")
    for folder in reversed([start, *start.parents]):
        where = "the project" if scan.inside(folder) else "a folder above the project"
        for name in CONTEXT_FILE_NAMES:
            scan.add(folder / name, f"{where} ({folder})")
            if name == ".claude/CLAUDE.md":
                scan.add_rules(folder / ".claude", folder, f"{where}'s rules ({folder})")
    memory = auto_memory_file(scan.root, {**environ, "HOME": str(home)}, scan.settings)
    if memory is not None:
        scan.add(memory, "your Claude Code auto memory for this project", head=True)
    below: set[Path] = set()
    for path in worked:
        path = path if path.is_dir() else path.parent
        if start in path.parents:
            below.update(p for p in [path, *path.parents] if start in p.parents)
    for folder in sorted(below, key=lambda p: (len(p.parts), str(p))):
        for name in SUBFOLDER_FILE_NAMES:
            scan.add(folder / name, f"the agent worked in {folder.relative_to(start)}/")
    return ContextFiles(scan.files, scan.skipped)


def find_context_files(
    cwd: str | os.PathLike[str], *, env: Mapping[str, str] | None = None
) -> list[ContextFile]:
    """The instruction files for working folder ``cwd`` that may be read, in reading order."""
    return scan_context_files(cwd, env=env).files


_PATH_TOOLS = frozenset({"read", "edit", "write", "ls", "multi_edit"})
"""The tools whose ``path`` argument is a place the agent works in."""


def touched_folders(messages: Iterable[Any], cwd: str | os.PathLike[str]) -> set[str]:
    """The folders under ``cwd`` holding a file the model read or edited, or listed, in
    ``messages`` (model messages as JSON: the ``toolCall`` blocks of assistant messages)."""
    return _touched(messages, cwd, files=False)


def touched_paths(messages: Iterable[Any], cwd: str | os.PathLike[str]) -> set[str]:
    """The files under ``cwd`` the model read, edited or wrote, and the folders it listed, in
    ``messages`` (as :func:`touched_folders`): what a path-scoped rule's ``paths`` match."""
    return _touched(messages, cwd, files=True)


def _touched(messages: Iterable[Any], cwd: str | os.PathLike[str], *, files: bool) -> set[str]:
    start = Path(cwd).expanduser().resolve()
    found: set[str] = set()
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        for block in message.get("content") or ():
            if not isinstance(block, dict) or block.get("type") != "toolCall":
                continue
            if block.get("name") not in _PATH_TOOLS:
                continue
            arguments = block.get("arguments")
            path = arguments.get("path") if isinstance(arguments, dict) else None
            if not isinstance(path, str) or not path:
                continue
            target = (start / os.path.expanduser(path)).resolve()
            folder = target if block.get("name") == "ls" else target.parent
            if files and start in target.parents:
                found.add(str(target))
            elif start in folder.parents:
                found.add(str(folder))
    return found


def render_context_files(value: Any) -> str:
    """The section text: each file under a heading naming it."""
    files = value.get("files", []) if isinstance(value, dict) else []
    parts = [
        "Project instructions from context files (follow them; later files are more specific):"
    ]
    for item in files:
        if isinstance(item, dict):
            parts.append(f"### {item.get('path', '?')}\n\n{str(item.get('content', '')).strip()}")
    return "\n\n".join(parts)


def context_files_section() -> SystemSection:
    """The ``context-files`` section (key and renderer)."""
    from pico3 import define_section  # lazy: see the TYPE_CHECKING import above

    return define_section(SECTION_KEY, render_context_files)
