"""Prompt templates: Markdown files that become ``/NAME`` commands expanding to a prompt, as
Claude Code's custom slash commands and pi's prompt templates are written.

A template is one ``NAME.md`` file; its name is the command. Found in, in this order (the first
of two templates with one name wins):

1. ``$XDG_CONFIG_HOME/coding-agent/prompts/`` (default ``~/.config/coding-agent/prompts/``),
   2. ``~/.claude/commands/`` (Claude Code's) and 3. ``~/.pi/agent/prompts/`` (pi's);
4. a trusted project's ``.coding-agent/prompts/``, 5. ``.claude/commands/`` and
   6. ``.pi/prompts/``; 7. the files and folders the ``prompts`` list of pi's
   ``settings.json`` names.

Each folder is searched recursively, and a file in a sub-folder is namespaced by it as Claude
Code does: ``.claude/commands/tools/api-scaffold.md`` is ``/tools:api-scaffold``.

Last come the commands of the Claude Code plugins enabled in your ``~/.claude/settings.json``
(and a trusted project's ``.claude`` settings: :mod:`coding_agent.settings.claude_plugins`):
the ``commit-commands`` plugin's ``commands/commit.md`` is ``/commit-commands:commit``, and also
``/commit`` when no other template or plugin has that name, as in Claude Code.

Optional YAML frontmatter gives the palette's ``description`` (default: the body's first line)
and an ``argument-hint`` shown beside it; ``model`` and ``allowed-tools`` apply to the turn the
command's prompt starts, as in Claude Code (:func:`send_options`)::

    ---
    description: Review the staged changes
    argument-hint: [focus] [depth]
    model: haiku
    allowed-tools: Bash(git diff:*), Read
    ---
    Review the output of !`git diff --cached`. Focus on $1. All arguments: $ARGUMENTS
    Follow @docs/review-guide.md

Frontmatter that is not valid YAML is read line by line (``key: value``), as Claude Code
tolerates ``argument-hint: [issue-number] [priority]``; a warning names the file and line.

``/review security "error paths"`` sends the body expanded (:func:`expand_template`):

* ``$ARGUMENTS`` is everything typed after the command, exactly as typed (quotes, spacing and
  newlines kept); ``$1`` … ``$9`` are the positional arguments (quotes group words, as in a
  shell; a missing one is empty) and ``$@`` all of them joined by spaces; pi's ``${@:N}`` the
  words from the N-th on and ``${@:N:L}`` L words from the N-th;
* ``!`cmd``` runs ``cmd`` (arguments substituted) and puts its output there. The caller runs the
  commands: :func:`shell_commands` lists them, the TUI asks before running them through the
  worker's ``!cmd`` runner (the ``bash`` tool's executor and sandbox) and ``-p`` runs them only
  with ``--approve allow``;
* ``@path`` (relative to the working folder) puts the file's text there, in a fence naming it.
  A project's template includes only files inside the project; your own, any file you own.

A body that names none of these gets the arguments after it, as ``ARGUMENTS: …`` (Claude Code's
way), so what was typed is never dropped. Substituted text is never expanded again. A file that cannot be read is a warning naming it,
never an error.

``model:`` (``sonnet``, ``opus``, ``haiku``, ``inherit``, ``provider/id`` or a bare id, mapped as
subagent definitions map them: :func:`pico3.models.resolve_model_spec`) answers the turn the
command's prompt starts, and only that turn: the prompt's input record carries it, so the calls
after tools and a turn resumed after a crash use it too, and the next prompt goes to the
conversation's model again. ``allowed-tools:`` are permission rules (the ``[permissions]``
grammar: ``Bash(git add:*)``, ``Read``, ``Edit(src/**)``) that the calls of that turn may use
without asking; they ride on the same input record and end with the turn. Every tool is still
offered: a call they do not cover asks as usual (in ``-p``, is refused), and deny and ask rules,
plan mode and the edit confinement still win over them, as over any allow rule.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from coding_agent.context.folders import markdown_files
from coding_agent.context.mentions import MAX_INCLUDED_CHARS, fenced
from coding_agent.context.resources import (
    FrontmatterError,
    Places,
    argument_hint,
    argument_names,
    fork_agent,
    not_honoured,
    read_frontmatter,
    read_text,
    tool_rules,
)
from coding_agent.settings.trust import project_root_for

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "MAX_INCLUDED_CHARS",
    "PromptTemplate",
    "TemplateError",
    "TemplateSet",
    "TurnSettings",
    "bash_allowed",
    "discover_templates",
    "expand_template",
    "send_options",
    "shell_commands",
    "split_arguments",
    "template_roots",
    "with_unused_arguments",
]

MAX_DESCRIPTION_CHARS = 80
"""A description taken from the body's first line is cut to this many characters."""


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|@|[1-9])|\$\{@:(\d+)(?::(\d+))?\}")
_SHELL = re.compile(r"!`([^`\n]+)`")
_INCLUDE = re.compile(r"(?:(?<=\s)|^)@((?:~/|/|\.{1,2}/)?[\w.~-][\w./~-]*)", re.M)


class TemplateError(ValueError):
    """A template could not be expanded; the message names the template and what is missing."""


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """One template: its command name, description, argument hint, body and file."""

    name: str
    description: str
    argument_hint: str
    body: str
    path: Path
    source: str
    model: str | None = None
    """``model:`` in the frontmatter (``provider/id`` or an alias): the model of the turn the
    command starts (:func:`send_options`)."""
    allowed_tools: tuple[str, ...] = field(default=())
    """``allowed-tools:`` in the frontmatter: permission rules the command's turn may use
    without asking (:func:`send_options`), and its ``!`cmd``` lines (:func:`bash_allowed`)."""
    fork: str | None = None
    """With ``context: fork``: the subagent type (its ``agent``, default ``general-purpose``)
    the command runs in (:mod:`coding_agent.context.forks`); ``None``: in the conversation."""
    arguments: tuple[str, ...] = ()
    """``arguments:`` in the frontmatter: ``$name`` in the body is the word typed at that
    position (``arguments: [issue, branch]``: ``$issue`` is ``$1``)."""
    in_project: bool = False
    """Whether the file is a project's (its ``@path`` includes stay inside the project)."""
    alias: bool = False
    """A plugin command's plain name (``/commit`` for ``/commit-commands:commit``): a command
    of the app's own with that name (``/help``) keeps it, without a warning."""


@dataclass(frozen=True, slots=True)
class TemplateSet:
    """What discovery found: the templates (discovery order) and the warnings."""

    templates: tuple[PromptTemplate, ...] = ()
    warnings: tuple[str, ...] = ()

    def get(self, name: str) -> PromptTemplate | None:
        return next((t for t in self.templates if t.name == name), None)


def template_roots(places: Places) -> list[Path]:
    """The folders searched for templates, in precedence order."""
    return [
        places.config / "prompts",
        places.claude_user / "commands",
        places.pi_user / "prompts",
        *places.project_dirs(".coding-agent/prompts", ".claude/commands", ".pi/prompts"),
        *places.pi_prompts,
    ]


def _first_line(body: str) -> str:
    for line in body.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            if len(line) > MAX_DESCRIPTION_CHARS:
                return line[: MAX_DESCRIPTION_CHARS - 1] + "…"
            return line
    return ""


def _load(
    path: Path, name: str, source: str, in_project: bool, warnings: list[str]
) -> PromptTemplate | None:
    if not all(_NAME.fullmatch(part) for part in name.split(":")):
        warnings.append(
            f"{path}: prompt template skipped: {name!r} is not a command name "
            "(use letters, digits, - and _)"
        )
        return None
    try:
        text = read_text(path)
    except OSError as error:
        warnings.append(f"{path}: cannot read the prompt template: {error.strerror or error}")
        return None
    try:
        meta, body, note = read_frontmatter(text)
    except FrontmatterError as error:
        warnings.append(f"{path}: prompt template skipped: {error}")
        return None
    if note:
        warnings.append(f"{path}: {note}")
    description: Any = meta.get("description")
    if description is not None and not isinstance(description, str):
        warnings.append(f"{path}: 'description' should be text; the first line is used")
        description = None
    model: Any = meta.get("model")
    ignored = not_honoured(meta, command=True)
    fork = fork_agent(meta, ignored)
    if ignored:
        warnings.append(f"{path}: command /{name}: not honoured here: " + "; ".join(ignored))
    described = " ".join(description.split()) if description else _first_line(body)
    return PromptTemplate(
        name,
        described,
        argument_hint(meta),
        body,
        path.resolve(),
        source,
        model=str(model) if model else None,
        allowed_tools=tool_rules(meta),
        arguments=argument_names(meta),
        in_project=in_project,
        fork=fork,
    )


def discover_templates(
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    *,
    places: Places | None = None,
) -> TemplateSet:
    """Every prompt template visible from working folder ``cwd`` (module docstring)."""
    places = places if places is not None else Places.find(cwd, env)
    warnings: list[str] = []
    found: dict[str, PromptTemplate] = {}
    for root in template_roots(places):
        if root.is_file() and root in places.pi_prompts and root.suffix == ".md":
            files = [(root, root.stem)]  # a file pi's settings.json lists
            root = root.parent
        elif root.is_dir():
            files = markdown_files(root)
        else:
            continue
        source = places.label(root)
        in_project = root == places.project or places.project in root.parents
        for path, name in files:
            template = _load(path, name, source, in_project, warnings)
            if template is not None:
                _add_first(found, template, warnings)
    _plugin_templates(places, found, warnings)
    return TemplateSet(tuple(found.values()), tuple(warnings))


def _add_first(
    found: dict[str, PromptTemplate], template: PromptTemplate, warnings: list[str]
) -> bool:
    """Add ``template`` to ``found`` unless its name is taken (then a warning names both
    files: the first one is used); whether it was added."""
    earlier = found.get(template.name)
    if earlier is not None:
        warnings.append(
            f"{template.path}: prompt template /{template.name} is also defined by "
            f"{earlier.path}; the first one is used"
        )
        return False
    found[template.name] = template
    return True


def _plugin_files(paths: list[Path]) -> list[tuple[Path, str]]:
    """``(file, name)`` of the ``.md`` files a plugin's command paths hold (a folder searched
    as any other, a file by itself)."""
    files: list[tuple[Path, str]] = []
    for path in paths:
        if path.is_dir():
            files += markdown_files(path)
        elif path.suffix == ".md":
            files.append((path, path.stem))
    return files


def _plugin_templates(
    places: Places, found: dict[str, PromptTemplate], warnings: list[str]
) -> None:
    """Add the enabled Claude Code plugins' commands to ``found``: ``/PLUGIN:NAME`` always, and
    ``/NAME`` too when nothing else has that name (as Claude Code does)."""
    plugins = places.plugins()
    warnings.extend(plugins.warnings)
    plain: dict[str, list[PromptTemplate]] = {}
    for plugin in plugins.plugins:
        for path, name in _plugin_files(plugin.paths("commands")):
            template = _load(path, f"{plugin.name}:{name}", plugin.label, False, warnings)
            if template is not None and _add_first(found, template, warnings):
                plain.setdefault(name, []).append(template)
    for name, templates in plain.items():
        if len(templates) == 1 and name not in found:
            found[name] = replace(templates[0], name=name, alias=True)


def split_arguments(args: str) -> list[str]:
    """Split ``args`` like a shell does (quotes group words); unbalanced quotes fall back to
    splitting on whitespace."""
    try:
        return shlex.split(args)
    except ValueError:
        return args.split()


def _substitute(text: str, args: str, names: tuple[str, ...] = ()) -> str:
    """``text`` with the placeholders (module docstring) of ``args`` substituted, and
    ``$name`` of each of ``names`` (the template's ``arguments``) as the word at its position
    (a missing one is empty, as a missing ``$N``), in one pass: substituted text is never
    expanded again."""
    words = split_arguments(args)
    joined = " ".join(words)
    typed = args.strip()

    def substitute(match: re.Match[str]) -> str:
        named = match.group("name") if names else None
        if named is not None:
            index = names.index(named)
            return words[index] if index < len(words) else ""
        token = match.group(1)
        if token is None:  # pi's ${@:N} / ${@:N:L}: the words from the N-th (L of them)
            start = max(int(match.group(2)) - 1, 0)
            length = match.group(3)
            end = start + int(length) if length is not None else len(words)
            return " ".join(words[start:end])
        if token == "ARGUMENTS":
            return typed
        if token == "@":
            return joined
        index = int(token) - 1
        return words[index] if index < len(words) else ""

    return _placeholders(names).sub(substitute, text)


def _placeholders(names: tuple[str, ...]) -> re.Pattern[str]:
    """:data:`_PLACEHOLDER`, and ``$name`` for each of ``names`` (the longest first, so
    ``$issue_id`` is not ``$issue`` followed by ``_id``), its groups numbered as before."""
    if not names:
        return _PLACEHOLDER
    named = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    return re.compile(rf"{_PLACEHOLDER.pattern}|\$(?P<name>{named})(?!\w)")


_COMPOUND = re.compile(r"[;&|`<>\n]|\$\(")


def bash_allowed(template: PromptTemplate, command: str) -> bool:
    """Whether the template's ``allowed-tools`` lets ``command`` run without asking, as Claude
    Code reads it: ``Bash`` (any command), ``Bash(git status)`` (exactly), ``Bash(git log:*)``
    (that command with any arguments). A command with ``;``, ``&``, ``|``, a redirection or a
    substitution is never allowed by a prefix (``git log; rm -rf ~`` is not ``git log``)."""
    for tool in template.allowed_tools:
        if tool == "Bash":
            return True
        match = re.fullmatch(r"Bash\((.+)\)", tool.strip())
        if match is None:
            continue
        pattern = match.group(1).strip()
        if pattern.endswith(":*"):
            prefix = pattern[:-2].strip()
            if _COMPOUND.search(command) is None and (
                command == prefix or command.startswith(prefix + " ")
            ):
                return True
        elif command.strip() == pattern:
            return True
    return False


class TurnSettings(Protocol):
    """What a command brings to the turn it starts: a :class:`PromptTemplate`, or a skill run
    as ``/NAME`` (:class:`~coding_agent.context.skills.Skill`, whose ``model`` and
    ``allowed-tools`` apply as a command's, as in Claude Code)."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> Path: ...
    @property
    def model(self) -> str | None: ...
    @property
    def allowed_tools(self) -> tuple[str, ...]: ...


def send_options(
    template: TurnSettings, caller: Any, env: Mapping[str, str]
) -> tuple[dict[str, Any], str | None]:
    """The extra members of the command's (or skill's) prompt's send (``{"model"?,
    "allow"?}``, see the module docstring) and a note when its ``model:`` alias has no model on the caller's
    provider (the conversation's model answers then). ``caller`` is the conversation's
    ``config.model`` (``{"provider", "modelId"}``); ``env`` holds Claude Code's
    ``ANTHROPIC_DEFAULT_*_MODEL`` variables."""
    from pico3.models import resolve_model_spec

    options: dict[str, Any] = {}
    note: str | None = None
    if template.model is not None:
        model, note = resolve_model_spec(
            template.model, caller, env, who=f"/{template.name} ({template.path})"
        )
        if isinstance(model, Mapping) and model is not caller:  # not inherited
            provider, model_id = model.get("provider"), model.get("modelId")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if isinstance(provider, str) and provider and isinstance(model_id, str) and model_id:
                options["model"] = {"provider": provider, "modelId": model_id}
    if template.allowed_tools:
        options["allow"] = list(template.allowed_tools)
    return options, note


def shell_commands(template: PromptTemplate | str, args: str = "") -> list[str]:
    """The commands of the template's ``!`cmd``` markers, arguments substituted, in order: what
    the caller runs (after asking) before :func:`expand_template`."""
    body = template.body if isinstance(template, PromptTemplate) else template
    names = template.arguments if isinstance(template, PromptTemplate) else ()
    return [_substitute(match.group(1), args, names) for match in _SHELL.finditer(body)]


def _include(name: str, cwd: Path, in_project: bool) -> str | None:
    """The text ``@name`` puts in place (a fenced block naming the file), or ``None`` to leave
    it as written (no such file, or outside what the template may read)."""
    target = Path(os.path.expanduser(name)) if name.startswith("~/") else cwd / name
    if not target.is_file():
        return None
    real = Path(os.path.realpath(target))
    root = project_root_for(cwd)
    if in_project and real != root and root not in real.parents:
        raise TemplateError(
            f"@{name} is outside the project; a project's command includes only files inside it"
        )
    if not in_project and real.stat().st_uid != os.geteuid():
        raise TemplateError(f"@{name} is not your file; your own commands include only yours")
    return fenced(name, read_text(real))  # as a prompt's @file is (context/mentions.py)


def expand_template(
    template: PromptTemplate | str,
    args: str = "",
    *,
    cwd: str | os.PathLike[str] | None = None,
    outputs: Mapping[str, str] | None = None,
) -> str:
    """The template's body expanded (module docstring): ``$ARGUMENTS``, ``$1``…``$9``, ``$@``
    and ``${@:N[:L]}`` substituted; each ``!`cmd``` replaced by ``outputs[cmd]`` (the caller ran
    :func:`shell_commands`); each ``@path`` by the file's text when ``cwd`` is given.

    Raises :class:`TemplateError` for a command with no output given or a file the template
    may not include."""
    body = template.body if isinstance(template, PromptTemplate) else template
    in_project = template.in_project if isinstance(template, PromptTemplate) else True
    name = f"/{template.name}" if isinstance(template, PromptTemplate) else "the template"
    names = template.arguments if isinstance(template, PromptTemplate) else ()
    folder = Path(cwd).expanduser().resolve() if cwd is not None else None
    given = outputs or {}
    pieces: list[str] = []
    last = 0
    for match in _SHELL.finditer(body):
        pieces.append(
            _expand_text(body[last : match.start()], args, folder, in_project, name, names)
        )
        command = _substitute(match.group(1), args, names)
        if command not in given:
            raise TemplateError(f"{name} runs `{command}` first, and it was not run")
        pieces.append(given[command].rstrip("\n"))
        last = match.end()
    pieces.append(_expand_text(body[last:], args, folder, in_project, name, names))
    text = "".join(pieces).strip()
    return with_unused_arguments(text, args, used=bool(_placeholders(names).search(body)))


def with_unused_arguments(text: str, args: str, *, used: bool) -> str:
    """``text`` (an expanded body) with ``args`` after it as ``ARGUMENTS: …`` when the body
    ``used`` none of them, as Claude Code does for a command's and a skill's arguments: what was
    typed is never dropped. Unchanged when the body used them or nothing was typed."""
    args = args.strip()
    if not args or used:
        return text
    return f"{text}\n\nARGUMENTS: {args}".strip()


def _expand_text(
    text: str, args: str, cwd: Path | None, in_project: bool, name: str, names: tuple[str, ...]
) -> str:
    if cwd is None:
        return _substitute(text, args, names)
    out: list[str] = []
    last = 0
    for match in _INCLUDE.finditer(text):
        try:
            included = _include(match.group(1), cwd, in_project)
        except TemplateError as error:
            raise TemplateError(f"{name}: {error}") from None
        if included is None:
            continue
        out.append(_substitute(text[last : match.start()], args, names))
        out.append(included)
        last = match.end()
    out.append(_substitute(text[last:], args, names))
    return "".join(out)
