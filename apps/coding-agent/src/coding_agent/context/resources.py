"""Where the user's own prompt material lives, and the Markdown-with-frontmatter files in it.

Skills, prompt templates and the system files (``SYSTEM.md``, ``APPEND_SYSTEM.md``) come from
two kinds of folder:

* the user's: ``$XDG_CONFIG_HOME/coding-agent/`` (default ``~/.config/coding-agent/``), and for
  skills also ``~/.claude/skills/`` and ``~/.pi/agent/skills/`` when they exist, so a folder of
  skills kept for Claude Code or pi works here unchanged;
* the Claude Code plugins enabled in ``~/.claude/settings.json`` (:meth:`Places.plugins`);
* the project's: ``.coding-agent/`` and ``.claude/`` in the project folder
  (:func:`coding_agent.settings.trust.project_root_for`), read **only when the project is trusted**
  (``/trust`` or ``--trust``): a cloned repository must not be able to rewrite the system
  prompt or plant instructions in it.

:class:`Places` resolves those folders once for a working folder and an environment.
:func:`split_frontmatter` reads the YAML frontmatter of a Markdown file with a real YAML parser
(PyYAML's safe loader); a file whose frontmatter does not parse raises :class:`FrontmatterError`,
which the callers turn into a warning naming the file.
Claude Code tolerates frontmatter YAML refuses (``argument-hint: [pr-number] [priority]`` is
two flow lists on one line): :func:`read_frontmatter` reads such a block line by line as
``key: value`` text, as Claude Code does, and says so in a note the caller shows.
:func:`argument_hint` reads a command's or a skill's ``argument-hint`` as the text to show,
:func:`argument_names` its ``arguments`` (the names of ``$name``), :func:`tool_rules` its
``allowed-tools``, and :func:`not_honoured` names the fields of Claude Code's that this agent
reads in neither (:data:`NOT_HONOURED`), for the one warning per file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from coding_agent.settings.claude_plugins import PluginSet, enabled_plugins
from coding_agent.settings.pi_setup import pi_resource_paths
from coding_agent.settings.trust import (
    LOCAL_CONFIG_DIR,
    TrustError,
    TrustStore,
    folder_problem,
    project_root_for,
)
from coding_agent.settings.xdg import claude_home, config_home, pi_home

__all__ = [
    "FORK_DEFAULT_AGENT",
    "MAX_RESOURCE_CHARS",
    "NOT_HONOURED",
    "FrontmatterError",
    "Places",
    "argument_hint",
    "argument_names",
    "fork_agent",
    "not_honoured",
    "read_frontmatter",
    "read_text",
    "split_frontmatter",
    "tool_rules",
]

MAX_RESOURCE_CHARS = 200_000
"""Longest file read (a skill, a template, a system file); longer files are cut with a note."""


class FrontmatterError(ValueError):
    """A Markdown file's frontmatter is not a YAML mapping."""


def read_text(path: Path) -> str:
    """The file's text (UTF-8, undecodable bytes replaced), capped at
    :data:`MAX_RESOURCE_CHARS`. Raises ``OSError`` when it cannot be read."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if len(text) > MAX_RESOURCE_CHARS:
        text = (
            text[:MAX_RESOURCE_CHARS] + f"\n\n[{path.name} cut at {MAX_RESOURCE_CHARS} characters]"
        )
    return text


def split_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """``(frontmatter, body)`` of a Markdown text.

    Frontmatter is a first line ``---``, YAML, and a closing line ``---``; without one the
    frontmatter is empty and the body is the whole text. Raises :class:`FrontmatterError` when
    the block is not closed, is not valid YAML, or is not a mapping.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            block = "".join(lines[1:index])
            body = "".join(lines[index + 1 :])
            break
    else:
        raise FrontmatterError("the frontmatter opened with --- is never closed by a --- line")
    import yaml  # ~20 ms: only a file with a frontmatter block pays for it

    try:
        data = yaml.safe_load(block) if block.strip() else {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise FrontmatterError(f"the frontmatter is not valid YAML{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontmatterError(
            f"the frontmatter must be a mapping of keys to values, not {type(data).__name__}"
        )
    return {str(key): value for key, value in data.items()}, body


_KEY_LINE = re.compile(r"^([A-Za-z][\w-]*)\s*:\s?(.*)$")


def _lenient_frontmatter(text: str) -> tuple[dict[str, Any], str] | None:
    """``(meta, body)`` read line by line (``key: value``, values as text) from a frontmatter
    block YAML refused, or ``None`` when there is no closed block or a line is not of that
    form."""
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None
    meta: dict[str, Any] = {}
    for index in range(1, len(lines)):
        line = lines[index].strip()
        if line == "---":
            return meta, "".join(lines[index + 1 :])
        if not line or line.startswith("#"):
            continue
        match = _KEY_LINE.match(line)
        if match is None:
            return None
        value = match.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        meta[match.group(1)] = value
    return None


def read_frontmatter(text: str) -> tuple[dict[str, Any], str, str]:
    """``(frontmatter, body, note)`` of a Markdown text, as Claude Code reads its commands and
    skills: :func:`split_frontmatter`, or, when YAML refuses the block but every line of it is
    ``key: value``, those lines as text (``note`` then says so, for a warning naming the file;
    otherwise it is ``""``). Raises :class:`FrontmatterError` when neither reads it."""
    try:
        meta, body = split_frontmatter(text)
    except FrontmatterError as error:
        lenient = _lenient_frontmatter(text)
        if lenient is None:
            raise
        return *lenient, f"{error}; read line by line as text (as Claude Code does)"
    return meta, body, ""


def argument_hint(meta: Mapping[str, Any]) -> str:
    """The ``argument-hint`` of a command's or a skill's frontmatter as the text to show
    (``""``: none). ``argument-hint: [focus]`` is a YAML list of one and shows as
    ``[focus]``; a number shows as written; anything else is no hint."""
    hint: Any = meta.get("argument-hint", "")
    if isinstance(hint, list):
        hint = " ".join(f"[{item}]" for item in hint)  # pyright: ignore[reportUnknownVariableType]
    elif isinstance(hint, (int, float)) and not isinstance(hint, bool):
        hint = str(hint)
    return " ".join(hint.split()) if isinstance(hint, str) else ""


_ARGUMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RULE_SEPARATOR = re.compile(r"[,\s]+(?![^()]*\))")
"""A comma or blank between two rules, not inside a rule's parentheses (``Bash(git log:*)``)."""


def argument_names(meta: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``arguments`` of a command's or a skill's frontmatter: the names ``$name`` stands for
    in its body, in the order of the words typed after the command (``arguments: [issue,
    branch]`` or ``arguments: issue branch``: ``$issue`` is the first word). A name that is not
    one (``ARGUMENTS``, a number, ``my-arg``) is left out."""
    value: Any = meta.get("arguments")
    items: list[Any] = (
        value.replace(",", " ").split() if isinstance(value, str) else value  # pyright: ignore[reportUnknownMemberType]
        if isinstance(value, list) else []
    )  # fmt: skip
    names = [str(item).strip() for item in items if isinstance(item, str)]
    return tuple(
        dict.fromkeys(n for n in names if _ARGUMENT_NAME.fullmatch(n) and n != "ARGUMENTS")
    )


def tool_rules(meta: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``allowed-tools`` of a command's or a skill's frontmatter as permission rules: a YAML
    list, or a string of rules separated by commas or blanks (``Read, Grep``, ``Read Grep`` and
    ``Bash(git add:*) Bash(git commit:*)`` as Claude Code and the Agent Skills format write
    them; a blank inside parentheses is part of the rule)."""
    value: Any = meta.get("allowed-tools", ())
    if isinstance(value, str):
        return tuple(part for part in _RULE_SEPARATOR.split(value.strip()) if part)
    if isinstance(value, list):
        return tuple(str(item).strip() for item in value if str(item).strip())  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return ()


NOT_HONOURED: dict[str, str] = {
    "hooks": "its hooks do NOT run; put them in the hooks of ~/.claude/settings.json",
    "disallowed-tools": "the tools it removes stay offered while it runs (deny rules in "
    "settings.json or config.toml take a tool away)",
    "shell": "a skill's !`command` lines are not run; the model reads them as written",
    "paths": "it is offered in every conversation, not only once the agent works on a file "
    "its paths match",
}
"""Claude Code's command and skill front-matter fields this agent does not honour and whose
absence changes what runs or what the model is offered, each with what happens instead; a file
setting any is one warning naming them (it still loads): :func:`not_honoured`. Commands run
their ``!`command``` lines (so ``shell`` is not named for them) and are never offered to the
model (nor ``paths``). ``context: fork`` and ``agent`` are honoured when a user runs it
(:func:`fork_agent`); ``model``, ``allowed-tools``, ``argument-hint``, ``arguments``,
``disable-model-invocation``, ``user-invocable`` and ``when_to_use`` are honoured; ``effort``
and ``version``, ``license`` and ``metadata`` (the Agent Skills format's) are accepted without
a warning: ignoring them keeps the conversation's thinking level or changes nothing."""

_COMMAND_HONOURS = ("shell", "paths")


def not_honoured(meta: Mapping[str, Any], *, command: bool = False) -> list[str]:
    """``"field (what happens instead)"`` for each field of :data:`NOT_HONOURED` that ``meta``
    (a skill's frontmatter, or a command's when ``command``) sets."""
    skip = _COMMAND_HONOURS if command else ()
    return [
        f"{key} ({why})"
        for key, why in NOT_HONOURED.items()
        if key not in skip and meta.get(key) not in (None, "", [], {}, False)
    ]


FORK_DEFAULT_AGENT = "general-purpose"
"""The subagent type a ``context: fork`` command or skill runs in when it names no ``agent``
(Claude Code's default too)."""


def fork_agent(meta: Mapping[str, Any], ignored: list[str]) -> str | None:
    """The subagent type a command or skill with ``context: fork`` runs in when the user runs it
    (its ``agent``, else :data:`FORK_DEFAULT_AGENT`); ``None`` when it runs in the conversation.
    A ``context`` other than ``fork``, or an ``agent`` without ``context: fork``, changes
    nothing (as in Claude Code) and is added to ``ignored``, for the file's one warning."""
    context: Any = meta.get("context")
    agent: Any = meta.get("agent")
    named = str(agent).strip() if agent not in (None, "", False) else ""
    if context == "fork":
        return named or FORK_DEFAULT_AGENT
    if context not in (None, ""):
        ignored.append(f"context ({context!r} is not 'fork': it runs in the conversation)")
    elif named:
        ignored.append("agent (only used with 'context: fork': it runs in the conversation)")
    return None


class Places(msgspec.Struct, frozen=True):
    """The folders prompt material is read from, for one working folder.

    ``config`` is ``$XDG_CONFIG_HOME/coding-agent``; ``home`` the user's home folder;
    ``project`` the project folder and ``trusted`` whether the user trusts it (project folders
    are offered only when it is). ``problem`` says why trust could not be decided (a corrupt
    trust file: the project then counts as untrusted).
    """

    config: Path
    home: Path
    project: Path
    trusted: bool
    problem: str | None = None
    claude: Path | None = None
    """Claude Code's user folder (:func:`~coding_agent.settings.xdg.claude_home`:
    ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``)."""
    pi: Path | None = None
    """pi's folder (:func:`~coding_agent.settings.xdg.pi_home`: ``$PI_CODING_AGENT_DIR``,
    else ``~/.pi/agent``)."""
    pi_skills: tuple[Path, ...] = ()
    """The skill files and folders pi's ``settings.json`` lists (``"skills": [...]``)."""
    pi_prompts: tuple[Path, ...] = ()
    """The prompt template files and folders it lists (``"prompts": [...]``)."""

    @classmethod
    def find(cls, cwd: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Places:
        """The places for working folder ``cwd`` (``env`` defaults to ``os.environ``)."""
        environ = os.environ if env is None else env
        home_value = environ.get("HOME", "")
        home = Path(home_value) if os.path.isabs(home_value) else Path(os.path.expanduser("~"))
        project = project_root_for(cwd)
        problem: str | None = None
        try:
            decision = TrustStore.default(environ).get(project)
        except TrustError as error:
            decision, problem = None, str(error)
        trusted = decision is not None and decision.trusted
        if trusted and (unsafe := folder_problem(project)) is not None:
            trusted, problem = False, f"{project} {unsafe}: its prompt files are not read"
        xdg = environ.get("XDG_CONFIG_HOME", "")
        config = config_home(environ) if os.path.isabs(xdg) else home / ".config"
        pi_env = {**environ, "HOME": str(home)}

        def listed(key: str) -> tuple[Path, ...]:
            paths = pi_resource_paths(key, pi_env, project=project, trusted=trusted)
            return tuple(paths)

        return cls(
            config / "coding-agent",
            home,
            project,
            trusted,
            problem,
            claude_home(environ),
            pi_home(pi_env),
            listed("skills"),
            listed("prompts"),
        )

    @property
    def claude_user(self) -> Path:
        """Claude Code's user folder (``~/.claude`` unless ``$CLAUDE_CONFIG_DIR`` moves it)."""
        return self.claude if self.claude is not None else self.home / ".claude"

    def plugins(self) -> PluginSet:
        """The Claude Code plugins enabled here (your ``~/.claude/settings.json``, and a trusted
        project's ``.claude`` settings: :func:`~coding_agent.settings.claude_plugins.enabled_plugins`)."""
        return enabled_plugins(self.claude_user, self.project, self.trusted)

    @property
    def pi_user(self) -> Path:
        """pi's folder (``~/.pi/agent`` unless ``$PI_CODING_AGENT_DIR`` moves it)."""
        return self.pi if self.pi is not None else self.home / ".pi" / "agent"

    @property
    def local(self) -> Path:
        """The project's ``.coding-agent/`` folder (whether or not it exists)."""
        return self.project / LOCAL_CONFIG_DIR

    def project_dirs(self, *relative: str) -> list[Path]:
        """``relative`` paths inside the project, in order, when the project is trusted; a
        path under a top folder (``.coding-agent``, ``.claude``) that is not the user's own
        (:func:`~coding_agent.settings.trust.folder_problem`) is left out."""
        if not self.trusted:
            return []
        kept: list[Path] = []
        for item in relative:
            top = self.project / Path(item).parts[0]
            if top.exists() and folder_problem(top) is not None:
                continue
            kept.append(self.project / item)
        return kept

    def label(self, path: Path) -> str:
        """``path`` shortened for display: ``~/…`` under the home folder, relative to the
        project inside it."""
        for base, prefix in ((self.project, ""), (self.home, "~/")):
            try:
                return prefix + str(path.relative_to(base))
            except ValueError:
                continue
        return str(path)
