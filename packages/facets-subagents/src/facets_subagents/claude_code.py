"""Agent files as Claude Code and the published collections write them.

Three things a Claude Code agent file says differently from us, and how each is read:

* **Frontmatter Claude Code tolerates but YAML does not.** :func:`parse_frontmatter` tries YAML
  first; when the block is not valid YAML it reads it field by field, as Claude Code does: a
  field starts at a line ``key: value`` in the first column, and its value runs to the next
  field. A field whose own text is valid YAML keeps its YAML value (a list, a quoted string, a
  ``>`` block); one that is not — ``description: Use this agent when: the user asks…``, the
  usual culprit — keeps its text as written. In a description, the two characters ``\\n`` are
  a line break (the ``/agents`` generator writes ``<example>`` blocks that way).
* **Tool names.** :data:`CLAUDE_TOOLS` maps Claude Code's to ours (``Read`` → ``read``,
  ``Glob`` → ``find``, ``Task`` → ``agent``, ``WebFetch`` → ``web_fetch``, ``KillShell`` →
  ``job_kill``, …: ``pico3.CLAUDE_CODE_TOOLS``); :data:`NOT_YET` are Claude Code tools this
  agent does not have; an ``mcp__server__tool`` name, and a name of ours, are kept as written.
* **Model aliases.** ``sonnet``, ``opus`` and ``haiku`` name a model of the calling
  conversation's provider (:func:`resolve_model`): Claude Code's own variables
  ``ANTHROPIC_DEFAULT_SONNET_MODEL`` / ``…_OPUS_…`` / ``…_HAIKU_…`` choose it (a
  ``provider/id`` there is used whatever the caller's provider; a bare id on the ``anthropic``
  provider only), else :data:`ANTHROPIC_ALIASES` on ``anthropic``; any other provider inherits
  the caller's model, since it has no model of that name. The mapping is pico3's
  (:func:`pico3.models.resolve_model_spec`), shared with commands' ``model:``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pico3 import CLAUDE_CODE_TOOLS
from pico3.models import ANTHROPIC_ALIASES, MODEL_ALIASES, resolve_model_spec

__all__ = [
    "ANTHROPIC_ALIASES",
    "CLAUDE_TOOLS",
    "MODEL_ALIASES",
    "NOT_YET",
    "Frontmatter",
    "ToolList",
    "description_text",
    "map_tools",
    "parse_frontmatter",
    "resolve_model",
]

CLAUDE_TOOLS: Mapping[str, str] = CLAUDE_CODE_TOOLS
"""Claude Code tool name → ours (``pico3.CLAUDE_CODE_TOOLS``, shared with the permission rules
and the hooks)."""

NOT_YET: frozenset[str] = frozenset({"NotebookRead", "NotebookEdit"})
"""Claude Code tools this agent does not have (yet): a definition naming them loads without
them, with one warning naming the file."""

# A field starts in the first column. A known field always does; another lowercase key does
# too, except the words the <example> blocks of published agents put at a line's start.
_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?=[ \t]|$)")
_FIELDS = frozenset(
    {"name", "description", "tools", "disallowedTools", "model", "color", "permissionMode",
     "skills", "hooks", "mcpServers", "memory", "maxTurns", "background", "isolation", "effort",
     "initialPrompt"}
)  # fmt: skip
_PROSE = frozenset({"user", "assistant", "context", "example", "examples", "commentary"})


@dataclass(frozen=True, slots=True)
class Frontmatter:
    """A frontmatter block read leniently."""

    fields: Mapping[str, Any]
    lines: Mapping[str, int]
    """Each field's line in the file (1-based; the opening ``---`` is line 1)."""
    item_lines: Mapping[str, tuple[int, ...]]
    """For a field written as a YAML block list (``- Read`` lines): each item's line."""


def _starts_field(line: str) -> tuple[str, int] | None:
    """``(key, where its value starts)`` when ``line`` starts a field."""
    match = _KEY.match(line)
    if match is None:
        return None
    key = match.group(1)
    if key in _FIELDS or (key == key.lower() and key not in _PROSE):
        return key, match.end()
    return None


def parse_frontmatter(block: str, first_line: int = 2) -> Frontmatter:
    """Read a frontmatter ``block`` (the text between the ``---`` lines, whose first line is
    line ``first_line`` of the file). Never raises: text with no field gives no fields (and the
    caller reports the missing ``name``)."""
    import yaml  # ~20 ms: a session without agent definitions never pays for it

    starts: list[tuple[str, int, int]] = []  # (key, its first line's index, its value's column)
    raw_lines = block.split("\n")
    for index, line in enumerate(raw_lines):
        found = _starts_field(line)
        if found is not None:
            starts.append((found[0], index, found[1]))
    lines = {key: first_line + index for key, index, _column in starts}
    item_lines: dict[str, tuple[int, ...]] = {}
    for n, (key, index, _column) in enumerate(starts):
        end = starts[n + 1][1] if n + 1 < len(starts) else len(raw_lines)
        items = tuple(
            first_line + i for i in range(index + 1, end) if raw_lines[i].lstrip().startswith("- ")
        )
        if items:
            item_lines[key] = items
    try:
        loaded = yaml.safe_load(block)
    except yaml.YAMLError:
        loaded = None
    if isinstance(loaded, dict):
        fields: dict[str, Any] = {str(k): v for k, v in loaded.items()}  # pyright: ignore[reportUnknownVariableType]
        return Frontmatter(fields, lines, item_lines)
    fields = {}
    for n, (key, index, column) in enumerate(starts):
        end = starts[n + 1][1] if n + 1 < len(starts) else len(raw_lines)
        text = "\n".join(raw_lines[index:end])
        try:
            one = yaml.safe_load(text)
        except yaml.YAMLError:
            one = None
        if isinstance(one, dict) and key in one:
            fields[key] = one[key]
            continue
        # as Claude Code reads it: the text after "key:", continuation lines joined
        first = raw_lines[index][column:]
        rest = [line.strip() for line in raw_lines[index + 1 : end]]
        fields[key] = "\n".join([first.strip(), *rest]).strip()
    return Frontmatter(fields, lines, item_lines)


def description_text(value: str) -> str:
    """A description as the model reads it: ``\\n`` escapes (as the ``/agents`` generator
    writes them, in plain YAML where they stay two characters) become line breaks."""
    return value.replace("\\n", "\n").strip()


@dataclass(frozen=True, slots=True)
class ToolList:
    """A definition's ``tools`` mapped to ours, and what could not be."""

    tools: tuple[str, ...]
    lines: tuple[tuple[str, int], ...]
    """``(our name, line)`` for each kept tool (for a warning about it later)."""
    warnings: tuple[str, ...]


def map_tools(value: Any, source: str, line: int, item_lines: tuple[int, ...] = ()) -> ToolList:
    """Map a ``tools`` field (a comma-separated string or a list) to our tool names.

    Raises ``ValueError`` for a value that is neither. Each warning names ``source`` and the
    line; the names we do not have yet (:data:`NOT_YET`) share one warning."""
    if isinstance(value, str):
        names = [(t.strip(), line) for t in value.split(",") if t.strip()]
    elif isinstance(value, list) and all(isinstance(t, str) for t in value):  # pyright: ignore[reportUnknownVariableType]
        found: list[str] = [str(t).strip() for t in value]  # pyright: ignore[reportUnknownArgumentType,reportUnknownVariableType]
        at = item_lines if len(item_lines) == len(found) else (line,) * len(found)
        names = [(name, at[i]) for i, name in enumerate(found) if name]
    else:
        raise ValueError("tools must be a list of tool names or a comma-separated string")
    tools: list[str] = []
    kept: list[tuple[str, int]] = []
    missing: list[str] = []
    warnings: list[str] = []
    for name, at in names:
        ours = CLAUDE_TOOLS.get(name)
        if ours is None and (name.startswith("mcp__") or name[:1].islower()):
            ours = name  # an MCP tool or one of ours (checked against the session's tools)
        if ours is not None:
            if ours not in tools:
                tools.append(ours)
                kept.append((ours, at))
        elif name in NOT_YET:
            missing.append(name)
        else:
            warnings.append(
                f"{source}:{at}: unknown tool {name!r} (not a Claude Code tool this agent "
                "maps, nor one of its own); the subagent runs without it"
            )
    if missing:
        warnings.insert(
            0,
            f"{source}:{line}: {', '.join(missing)}: Claude Code tool"
            f"{'s' if len(missing) > 1 else ''} this agent does not have yet; the subagent "
            "runs without "
            f"{'them' if len(missing) > 1 else 'it'}",
        )
    if not names:
        warnings.append(
            f"{source}:{line}: tools is empty, so the subagent has no tools (remove the line "
            "to give it the caller's tools)"
        )
    elif not tools:
        warnings.append(
            f"{source}:{line}: none of the listed tools is available, so the subagent has no tools"
        )
    return ToolList(tuple(tools), tuple(kept), tuple(warnings))


def resolve_model(spec: str | None, caller: Any, env: Mapping[str, str]) -> tuple[Any, str | None]:
    """The model config value for a definition's ``model`` and a note when an alias fell back:
    pico3's :func:`~pico3.models.resolve_model_spec`, the one mapping commands use too.

    ``spec``: ``None`` (inherit), an alias, ``provider/id``, or a bare model id (on the caller's
    provider, as Claude Code passes an unknown name to its API). ``caller``: the calling
    conversation's ``{"provider", "modelId"}``."""
    return resolve_model_spec(spec, caller, env, who="the subagent")
