"""Agent definitions: Markdown files with YAML frontmatter, as Claude Code writes them.

::

    ---
    name: reviewer
    description: Reviews a diff for bugs. Use after a change.
    tools: read, grep, find        # optional: a list or a comma-separated string
    model: anthropic/claude-sonnet-4-5   # optional: provider/id, or "inherit" (the default)
    ---
    You are a careful code reviewer. ...     (the body is the subagent's system prompt)

They are read from ``$XDG_CONFIG_HOME/coding-agent/agents/*.md`` (default ``~/.config``) and, in
a trusted project, ``.coding-agent/agents/*.md`` (a project agent replaces a user agent of the
same name). A file that does not parse, or lacks ``name`` or ``description``, is reported (naming
the file and the fix) and skipped. :data:`GENERAL_PURPOSE` is always there: the parent's tools
(except ``agent``) and model, and a short system prompt.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "GENERAL_PURPOSE",
    "AgentDefinition",
    "Definitions",
    "load_definitions",
    "parse_definition",
    "user_agents_dir",
]

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)(.*)\Z", re.S)


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    name: str
    description: str
    system_prompt: str
    tools: tuple[str, ...] | None = None
    """``None``: the parent's tools (without ``agent``)."""
    model: str | None = None
    """``provider/id``; ``None``: the parent's model."""
    source: str = "built-in"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "systemPrompt": self.system_prompt,
            "tools": None if self.tools is None else list(self.tools),
            "model": self.model,
            "source": self.source,
        }


GENERAL_PURPOSE = AgentDefinition(
    name="general-purpose",
    description="A general agent for multi-step research and tasks, with the parent's tools.",
    system_prompt=(
        "You are a subagent working on one task for another agent. Do the task with the tools "
        "you have, then answer with a concise final report: what you found or did, with file "
        "paths and key facts. The report is all the other agent will see."
    ),
)


@dataclass(frozen=True, slots=True)
class Definitions:
    agents: Mapping[str, AgentDefinition]
    errors: tuple[str, ...]


def user_agents_dir(env: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "coding-agent" / "agents"


def parse_definition(text: str, source: str) -> AgentDefinition:
    """One definition; raises ``ValueError`` naming the problem."""
    match = _FRONT.match(text.replace("\r\n", "\n"))
    if match is None:
        raise ValueError("no YAML frontmatter: start the file with --- name/description --- lines")
    import yaml  # ~20 ms: a session without agent definitions never pays for it

    try:
        front = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise ValueError(f"the frontmatter is not valid YAML ({exc})") from None
    if not isinstance(front, dict):
        raise ValueError("the frontmatter must be a mapping (name: ..., description: ...)")
    fields: dict[str, Any] = {str(k): v for k, v in front.items()}  # pyright: ignore[reportUnknownVariableType]
    name = fields.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            "name must be lowercase letters, digits, '-' or '_' (at most 64), got " + repr(name)
        )
    description = fields.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("description is required (when to use this agent)")
    tools_field = fields.get("tools")
    tools: tuple[str, ...] | None
    if tools_field is None:
        tools = None
    elif isinstance(tools_field, str):
        tools = tuple(t.strip() for t in tools_field.split(",") if t.strip())
    elif isinstance(tools_field, list) and all(isinstance(t, str) for t in tools_field):  # pyright: ignore[reportUnknownVariableType]
        tools = tuple(str(t) for t in tools_field)  # pyright: ignore[reportUnknownVariableType,reportUnknownArgumentType]
    else:
        raise ValueError("tools must be a list of tool names or a comma-separated string")
    model = fields.get("model")
    if model is not None and (
        not isinstance(model, str) or (model != "inherit" and "/" not in model)
    ):
        raise ValueError(f'model must be "provider/id" or "inherit", got {model!r}')
    body = match.group(2).strip()
    if not body:
        raise ValueError("the body (the agent's system prompt) is empty")
    return AgentDefinition(
        name=name,
        description=description.strip(),
        system_prompt=body,
        tools=tools,
        model=None if model in (None, "inherit") else model,
        source=source,
    )


def _folder(folder: Path, into: dict[str, AgentDefinition], errors: list[str]) -> None:
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.md")):
        try:
            definition = parse_definition(path.read_text(encoding="utf-8"), str(path))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            errors.append(f"{path}: {exc}; the agent is skipped")
            continue
        into[definition.name] = definition


def load_definitions(
    *,
    project: str | os.PathLike[str] | None = None,
    project_trusted: bool = False,
    env: Mapping[str, str] | None = None,
) -> Definitions:
    agents: dict[str, AgentDefinition] = {GENERAL_PURPOSE.name: GENERAL_PURPOSE}
    errors: list[str] = []
    _folder(user_agents_dir(env), agents, errors)
    if project is not None and project_trusted:
        _folder(Path(project) / ".coding-agent" / "agents", agents, errors)
    return Definitions(agents, tuple(errors))
