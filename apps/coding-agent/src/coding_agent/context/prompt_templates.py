"""Prompt templates: Markdown files that become ``/NAME`` commands expanding to a prompt.

A template is one ``NAME.md`` file; its name is the command. Found (non-recursively) in, in
this order (the first of two templates with one name wins):

1. ``$XDG_CONFIG_HOME/coding-agent/prompts/`` (default ``~/.config/coding-agent/prompts/``);
2. a trusted project's ``.coding-agent/prompts/`` and 3. ``.claude/commands/`` (Claude Code's
   custom slash commands work unchanged).

Optional YAML frontmatter gives the palette's ``description`` (default: the body's first line)
and an ``argument-hint`` shown beside it::

    ---
    description: Review the staged changes
    argument-hint: "[focus]"
    ---
    Review the output of `git diff --cached`. Focus on $1. All arguments: $ARGUMENTS

``/review security "error paths"`` sends the body with the arguments substituted
(:func:`expand_template`): ``$1`` … ``$9`` are the positional arguments (quotes group words, as
in a shell; a missing one is empty), ``$@`` and ``$ARGUMENTS`` all of them joined by spaces.
Substituted text is never expanded again. A file that cannot be read or whose frontmatter is
not valid YAML is a warning naming it, never an error.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coding_agent.context.resources import FrontmatterError, Places, read_text, split_frontmatter

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "PromptTemplate",
    "TemplateSet",
    "discover_templates",
    "expand_template",
    "split_arguments",
    "template_roots",
]

MAX_DESCRIPTION_CHARS = 80
"""A description taken from the body's first line is cut to this many characters."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|@|[1-9])")


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """One template: its command name, description, argument hint, body and file."""

    name: str
    description: str
    argument_hint: str
    body: str
    path: Path
    source: str


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
        *places.project_dirs(".coding-agent/prompts", ".claude/commands"),
    ]


def _first_line(body: str) -> str:
    for line in body.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            if len(line) > MAX_DESCRIPTION_CHARS:
                return line[: MAX_DESCRIPTION_CHARS - 1] + "…"
            return line
    return ""


def _load(path: Path, source: str, warnings: list[str]) -> PromptTemplate | None:
    name = path.stem
    if not _NAME.fullmatch(name):
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
        meta, body = split_frontmatter(text)
    except FrontmatterError as error:
        warnings.append(f"{path}: prompt template skipped: {error}")
        return None
    description: Any = meta.get("description")
    hint: Any = meta.get("argument-hint", "")
    if description is not None and not isinstance(description, str):
        warnings.append(f"{path}: 'description' should be text; the first line is used")
        description = None
    if not isinstance(hint, str):
        hint = str(hint) if isinstance(hint, (int, float, list)) else ""
    described = " ".join(description.split()) if description else _first_line(body)
    return PromptTemplate(name, described, hint.strip(), body, path.resolve(), source)


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
        try:
            files = sorted(p for p in root.iterdir() if p.suffix == ".md" and p.is_file())
        except OSError:
            continue
        source = places.label(root)
        for path in files:
            template = _load(path, source, warnings)
            if template is None:
                continue
            earlier = found.get(template.name)
            if earlier is not None:
                warnings.append(
                    f"{template.path}: prompt template /{template.name} is also defined by "
                    f"{earlier.path}; the first one is used"
                )
                continue
            found[template.name] = template
    return TemplateSet(tuple(found.values()), tuple(warnings))


def split_arguments(args: str) -> list[str]:
    """Split ``args`` like a shell does (quotes group words); unbalanced quotes fall back to
    splitting on whitespace."""
    try:
        return shlex.split(args)
    except ValueError:
        return args.split()


def expand_template(template: PromptTemplate | str, args: str = "") -> str:
    """The template's body with ``$1``…``$9``, ``$@`` and ``$ARGUMENTS`` substituted."""
    body = template.body if isinstance(template, PromptTemplate) else template
    words = split_arguments(args)
    joined = " ".join(words)

    def substitute(match: re.Match[str]) -> str:
        token = match.group(1)
        if token in ("ARGUMENTS", "@"):
            return joined
        index = int(token) - 1
        return words[index] if index < len(words) else ""

    return _PLACEHOLDER.sub(substitute, body).strip()
