"""Agent definitions: Markdown files with YAML frontmatter, as Claude Code writes them.

::

    ---
    name: reviewer
    description: Reviews a diff for bugs. Use after a change.
    tools: Read, Grep, Glob        # optional: a list or a comma-separated string
    model: sonnet                  # optional: inherit (the default), sonnet, opus, haiku,
    ---                            #           provider/id, or a model id of the caller's provider
    You are a careful code reviewer. ...     (the body is the subagent's system prompt)

Folders, each searched recursively for ``*.md`` (a ``README.md`` is not an agent), later ones
replacing an agent of the same name: the ``agents/`` of the Claude Code plugins the app loads
(the ``claude_plugins`` harness service: ``[{"id", "agents": [path, ...]}, ...]``; the app
decides which, from the user's ``enabledPlugins``), ``~/.claude/agents/`` (Claude Code's),
``$XDG_CONFIG_HOME/coding-agent/agents/`` (ours; default ``~/.config``), and in a **trusted**
project ``.claude/agents/`` then ``.coding-agent/agents/``. In an untrusted project those two are
not read: :attr:`Definitions.waiting` counts their files (for a "what is waiting" line).

The frontmatter is read as Claude Code reads it (:mod:`.claude_code`): YAML it tolerates (an
unquoted ``: `` in a description), ``\\n`` escapes, Claude Code's tool names and model aliases. A
name is normalised into an id (:func:`agent_id`: lowercase, each run of other characters than
letters, digits, ``-`` and ``_`` one ``-``: ``api.designer`` → ``api-designer``), never refused.
A file is skipped, with a warning naming it and the line, only where Claude Code skips it too:
no frontmatter, no ``name``, no ``description``. Two files of one folder with the same name:
the later in name order is used, with a warning naming both. Of Claude Code's other fields,
``permissionMode`` (:data:`PERMISSION_MODES`: ``plan`` makes the subagent read-only; a looser
value is not honoured, with a warning), ``maxTurns``, ``skills`` (preloaded into the system
prompt when the subagent starts), ``effort`` (:data:`EFFORT_LEVELS`: its thinking level) and
``mcpServers`` (servers started for the subagent alone by the MCP feature) and ``hooks``
(:data:`AGENT_HOOK_EVENTS`, run by the hooks feature for the subagent alone) are honoured (the
last two not in a plugin's agent: :data:`PLUGIN_IGNORED`), and so is ``memory`` (a persistent
folder, :mod:`.memory`), ``color`` is cosmetic, and each of the rest (:data:`NOT_USED`) gets a warning saying
what happens instead (``isolation``, with no worktree here, makes the subagent ``ask``).
:data:`GENERAL_PURPOSE` is always there: the
parent's tools (except ``agent``) and model, and a short system prompt.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from pico3 import claude_agent_id

from . import fields as read
from .claude_code import (
    CLAUDE_TOOLS,
    Frontmatter,
    description_text,
    map_tools,
    parse_frontmatter,
)
from .fields import AGENT_HOOK_EVENTS, EFFORT_LEVELS, LOOSER_MODES, PERMISSION_MODES

__all__ = [
    "AGENT_HOOK_EVENTS",
    "EFFORT_LEVELS",
    "GENERAL_PURPOSE",
    "ISOLATION_ASKS",
    "LOOSER_MODES",
    "NOT_USED",
    "PERMISSION_MODES",
    "PLUGIN_IGNORED",
    "AgentDefinition",
    "Definitions",
    "Waiting",
    "agent_folders",
    "agent_id",
    "claude_agents_dir",
    "given_definitions",
    "load_definitions",
    "parse_definition",
    "plugin_agent_paths",
    "user_agents_dir",
    "waiting_definitions",
]

NOT_USED: Mapping[str, str] = {
    "isolation": "the subagent gets no worktree of its own and works in the session's project "
    "folder",
    "background": "the subagent does not run in the background; the caller waits for its "
    "report (several agent calls in one message run in parallel)",
    "initialPrompt": "it is sent only when the agent runs as the main session (Claude Code's "
    "--agent), which this agent has no mode for; as a subagent it starts from the caller's "
    "prompt, as in Claude Code",
}
"""Claude Code fields this agent reads but does not honour, and what happens instead: one
warning each, naming the file and line (``color`` is cosmetic: no warning)."""

PLUGIN_IGNORED = ("hooks", "mcpServers")
"""Fields a plugin's agent may not use (Claude Code ignores them there too, for the same reason:
a plugin would otherwise start programs of its choosing inside a subagent): warned about and
left out."""

ISOLATION_ASKS = (
    "; so that its changes do not land there unseen, it runs in ask mode: each call that needs "
    "approval asks (unless the session's mode is stricter)"
)
"""How the ``isolation`` warning ends when the subagent gets ``ask`` for it: an agent written
to change files in a worktree of its own changes the project itself here, so each change asks
(``permissionMode: plan`` stays read-only)."""

_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)(.*)\Z", re.S)
PROJECT_FOLDERS = (".claude/agents", ".coding-agent/agents")
"""A project's agent folders (relative to its root), read only when it is trusted."""


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    name: str
    description: str
    system_prompt: str
    tools: tuple[str, ...] | None = None
    """Our tool names; ``None``: the parent's tools (without ``agent``)."""
    model: str | None = None
    """``provider/id``, an alias (``sonnet``, ``opus``, ``haiku``) or a bare model id, resolved
    when the agent runs (:func:`.claude_code.resolve_model`); ``None``: the parent's model."""
    source: str = "built-in"
    tool_lines: tuple[tuple[str, int], ...] = ()
    """``(tool, line)``: where each tool was listed, for a warning when it is not there."""
    written_name: str = ""
    """The ``name`` as written, when :func:`agent_id` changed it."""
    disallowed: tuple[str, ...] = ()
    """``disallowedTools`` (our names): never offered, whatever the tools are."""
    permission_mode: str | None = None
    """``permissionMode`` as the session's approval reads it: ``plan`` (read-only) or ``ask``,
    each only ever stricter than the session's mode (:data:`PERMISSION_MODES`); ``None``: the
    session's mode."""
    max_turns: int | None = None
    """``maxTurns``: the subagent stops after that many model turns; ``None``: no limit."""
    name_line: int = 1
    """The line of ``name`` (for a warning about two files of one name)."""
    skills: tuple[str, ...] = ()
    """``skills``: the names of the skills whose instructions are preloaded into the subagent's
    system prompt when it starts (found through the ``skills`` harness service)."""
    skills_line: int = 1
    """The line of ``skills`` (for a warning about a skill not found)."""
    thinking: str | None = None
    """``effort`` as our thinking level (:data:`EFFORT_LEVELS`); ``None``: the caller's."""
    hooks: Mapping[str, Any] | None = None
    """``hooks``: ``{event: [{matcher, hooks: [...]}]}`` as settings files write them, only the
    :data:`AGENT_HOOK_EVENTS` (``Stop`` as ``SubagentStop``); the hooks feature runs them for
    this subagent's conversation alone (:data:`~.contract.HOOKS_KEY`)."""
    memory: str | None = None
    """``memory``: ``user``, ``project`` or ``local``, the scope of its persistent memory
    folder (:mod:`.memory`); ``None``: none."""
    mcp_servers: tuple[Any, ...] = ()
    """``mcpServers``: each the name of a server the session has configured, or ``{name:
    entry}`` with an entry as ``.mcp.json`` writes it, started for this subagent alone (the MCP
    feature reads them from the task's input, :data:`~.contract.MCP_SERVERS_KEY`)."""
    from_project: bool = False
    """Read from the project's own agent folders (:data:`PROJECT_FOLDERS`, the project
    trusted then): what it starts is the project's, and stops being allowed when the project
    is no longer trusted (:data:`~.contract.PROJECT_AGENT_KEY`)."""

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
class Waiting:
    """Agent files of an untrusted project, not read until it is trusted."""

    folder: str
    count: int


@dataclass(frozen=True, slots=True)
class Definitions:
    agents: Mapping[str, AgentDefinition]
    errors: tuple[str, ...]
    """Files skipped, each naming the file, the line and the fix."""
    warnings: tuple[str, ...] = ()
    """Loaded, with a note (a tool it does not get), each naming the file and line."""
    waiting: tuple[Waiting, ...] = field(default=())
    """The untrusted project's agent folders that hold ``*.md`` files, with their count."""
    shadowed: tuple[tuple[AgentDefinition, str], ...] = field(default=())
    """Each definition another of the same name replaced, with that one's ``source`` (a
    project's ``reviewer`` over your ``~/.claude/agents/reviewer.md``): never run, listed by
    ``coding-agent config``."""


def agent_id(name: str) -> str:
    """``name`` as an agent id (:func:`pico3.claude_agent_id`, the spelling a ``Task(name)``
    permission rule compares too): lowercase, each run of characters other than letters,
    digits, ``-`` and ``_`` one ``-`` (``api.designer`` → ``api-designer``); ``""`` when
    nothing is left."""
    return claude_agent_id(name)


def user_agents_dir(env: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    base = environ.get("XDG_CONFIG_HOME") or str(_home(environ) / ".config")
    return Path(base) / "coding-agent" / "agents"


def _home(environ: Mapping[str, str]) -> Path:
    home = environ.get("HOME")
    return Path(home) if home else Path.home()


def claude_agents_dir(env: Mapping[str, str] | None = None) -> Path:
    """Claude Code's user agents: ``~/.claude/agents`` (``HOME`` from ``env``)."""
    return _home(os.environ if env is None else env) / ".claude" / "agents"


def agent_folders(
    project: str | os.PathLike[str] | None, project_trusted: bool, env: Mapping[str, str] | None
) -> list[Path]:
    """The folders read, lowest precedence first."""
    folders = [claude_agents_dir(env), user_agents_dir(env)]
    if project is not None and project_trusted:
        folders += [Path(project) / folder for folder in PROJECT_FOLDERS]
    return _distinct(folders)


def _distinct(folders: list[Path]) -> list[Path]:
    """``folders`` without a repeat (a project at ``~`` has ``~/.claude/agents`` as its own)."""
    seen: set[Path] = set()
    kept: list[Path] = []
    for folder in folders:
        key = folder.resolve()
        if key not in seen:
            seen.add(key)
            kept.append(folder)
    return kept


def parse_definition(
    text: str, source: str, *, plugin: bool = False
) -> tuple[AgentDefinition, tuple[str, ...]]:
    """One definition and its warnings; raises ``ValueError`` naming the problem (prefixed
    with the line, ``"3: ..."``, when one line is at fault). ``plugin``: the file is a Claude
    Code plugin's, whose :data:`PLUGIN_IGNORED` fields are warned about and left out."""
    match = _FRONT.match(text.lstrip("\ufeff").replace("\r\n", "\n"))
    if match is None:
        raise ValueError(
            "1: no frontmatter: start the file with a --- line, name: and description: lines, "
            "and a closing --- line"
        )
    return _definition(parse_frontmatter(match.group(1)), match.group(2).strip(), source, plugin)


def _definition(
    front: Frontmatter, body: str, source: str, plugin: bool = False
) -> tuple[AgentDefinition, tuple[str, ...]]:
    """:func:`parse_definition`'s work once the frontmatter and the body are apart."""
    fields = front.fields
    written = fields.get("name")
    if written is None or (isinstance(written, str) and not written.strip()):
        raise ValueError('1: the frontmatter has no name: add "name: <agent-id>"')
    name = agent_id(str(written)) or agent_id(Path(source).stem)  # "日本語" → the file's name
    if not name:
        raise ValueError(
            f"{front.lines.get('name', 1)}: neither name {written!r} nor the file's name has a "
            "letter or digit to make an id of"
        )
    description = fields.get("description")
    if description is None or not str(description).strip():
        raise ValueError(
            '1: the frontmatter has no description: add "description: <when to use this agent>"'
        )
    warnings: tuple[str, ...] = ()
    tools: tuple[str, ...] | None = None
    tool_lines: tuple[tuple[str, int], ...] = ()
    if fields.get("tools") not in (None, "*", ["*"]):  # "*": every tool, as no line says
        line = front.lines.get("tools", 1)
        try:
            mapped = map_tools(fields["tools"], source, line, front.item_lines.get("tools", ()))
        except ValueError as exc:
            raise ValueError(f"{line}: {exc}") from None
        tools, tool_lines, warnings = mapped.tools, mapped.lines, mapped.warnings
    disallowed = fields.get("disallowedTools")
    if disallowed is not None and read.names(disallowed) is None:
        line = front.lines.get("disallowedTools", 1)
        raise ValueError(f"{line}: disallowedTools must be a list of tool names or a string")
    model = fields.get("model")
    if model is not None and not isinstance(model, str | int | float):
        line = front.lines.get("model", 1)
        raise ValueError(f'{line}: model must be a name ("sonnet", "provider/id"), got {model!r}')
    model = None if model is None or str(model).strip() in ("", "inherit") else str(model).strip()
    notes = list(warnings)
    permission_mode = read.permission_mode(fields, front.lines, source, notes)
    max_turns = read.max_turns(fields, front.lines, source, notes)
    skills = read.skills(fields, front.lines, source, notes)
    thinking = read.effort(fields, front.lines, source, notes)
    mcp_servers = read.mcp_servers(fields, front.lines, source, notes)
    if plugin and mcp_servers:
        notes.append(
            f"{source}:{front.lines.get('mcpServers', 1)}: mcpServers is not honoured in a "
            "plugin's agent (as in Claude Code): no server is started for this subagent; "
            "configure the server in .mcp.json or mcp.json instead"
        )
        mcp_servers = ()
    memory = read.memory(fields, front.lines, source, notes)
    hooks = read.hooks(fields, front.lines, source, notes)
    if plugin and hooks:
        notes.append(
            f"{source}:{front.lines.get('hooks', 1)}: hooks is not honoured in a plugin's agent "
            "(as in Claude Code): they are not run; put them in the plugin's hooks/hooks.json"
        )
        hooks = None
    given = [key for key in NOT_USED if fields.get(key) not in (None, False, [], {}, "", "none")]
    for key, instead in NOT_USED.items():
        if key in given:
            if key == "isolation" and permission_mode is None:
                instead += ISOLATION_ASKS
            elif key == "isolation":
                instead += f" (read-only there: permissionMode: {permission_mode})"
            notes.append(f"{source}:{front.lines.get(key, 1)}: {key} is not honoured: {instead}")
    if "isolation" in given and permission_mode is None:
        permission_mode = "ask"  # its author meant its changes to stay apart: each one asks
    warnings = tuple(notes)
    text_description = description_text(str(description))
    return (
        AgentDefinition(
            name=name,
            description=text_description,
            # an empty body: Claude Code runs the agent anyway, so it is told its role at least
            system_prompt=body or f"You are the {name} agent: {text_description}",
            tools=tools,
            model=model,
            source=source,
            tool_lines=tool_lines,
            written_name="" if name == written else str(written),
            disallowed=tuple(CLAUDE_TOOLS.get(t, t) for t in read.names(disallowed) or ()),
            permission_mode=permission_mode,
            max_turns=max_turns,
            name_line=front.lines.get("name", 1),
            skills=skills,
            skills_line=front.lines.get("skills", 1),
            thinking=thinking,
            mcp_servers=mcp_servers,
            hooks=hooks,
            memory=memory,
        ),
        warnings,
    )


def _agent_files(folder: Path) -> list[Path]:
    if folder.is_file() and folder.suffix == ".md":  # a plugin's manifest may list one file
        return [folder]
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*.md") if p.name.lower() != "readme.md")


def _folder(
    folder: Path,
    into: dict[str, AgentDefinition],
    errors: list[str],
    warnings: list[str],
    plugin: bool = False,
    project: bool = False,
    shadowed: list[tuple[AgentDefinition, str]] | None = None,
) -> None:
    seen: dict[str, AgentDefinition] = {}  # this folder's (another folder's may be replaced)
    for path in _agent_files(folder):
        try:
            definition, notes = parse_definition(
                path.read_text(encoding="utf-8"), str(path), plugin=plugin
            )
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(f"{path}: cannot read it ({exc}); the agent is skipped")
            continue
        except ValueError as exc:
            # "3: problem" names the line: "path:3: problem"
            errors.append(f"{path}:{exc}; the agent is skipped")
            continue
        warnings.extend(notes)
        earlier = seen.get(definition.name)
        if earlier is not None:
            warnings.append(
                f"{path}:{definition.name_line}: {earlier.source} has the name "
                f"{definition.name!r} too; this file is the one used (a folder's files are read "
                "in name order, and the later one wins)"
            )
        if project:
            definition = replace(definition, from_project=True)
        seen[definition.name] = definition
        replaced = into.get(definition.name)
        if shadowed is not None and replaced is not None:
            shadowed.append((replaced, definition.source))
        into[definition.name] = definition


def given_definitions(
    given: object, into: dict[str, AgentDefinition], errors: list[str], warnings: list[str]
) -> None:
    """The agents the user defined for this run (Claude Code's ``--agents``: the harness
    service ``claude_run_agents``, ``{"source", "agents": {name: {"description", "prompt",
    "tools", "model", ...}}}``), each read as an agent file whose frontmatter is its fields
    (``name`` its key) and whose body is its ``prompt``, with a file's errors and warnings."""
    if not isinstance(given, Mapping):
        return
    source = str(given.get("source") or "--agents")  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    agents: Any = given.get("agents")  # pyright: ignore[reportUnknownMemberType]
    for name, value in agents.items() if isinstance(agents, Mapping) else ():  # pyright: ignore[reportUnknownVariableType]
        where = f"{source} {name}"
        if not isinstance(value, Mapping):
            errors.append(f"{where}: must be an object of an agent file's fields; skipped")
            continue
        written: dict[str, Any] = {str(k): v for k, v in value.items() if k != "prompt"}  # pyright: ignore[reportUnknownVariableType]
        body = value.get("prompt")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        front = Frontmatter({**written, "name": name}, {}, {})
        try:
            definition, notes = _definition(front, str(body or "").strip(), where)  # pyright: ignore[reportUnknownArgumentType]
        except ValueError as exc:
            errors.append(f"{where}:{exc}; the agent is skipped")
            continue
        warnings.extend(notes)
        into[definition.name] = definition


def waiting_definitions(
    project: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> tuple[Waiting, ...]:
    """An untrusted project's agent folders with ``*.md`` files, and how many each holds (not
    a folder read anyway: ``~/.claude/agents`` when the project is ``~``)."""
    found: list[Waiting] = []
    read_anyway = {folder.resolve() for folder in agent_folders(None, False, env)}
    for folder in PROJECT_FOLDERS:
        if (Path(project) / folder).resolve() in read_anyway:
            continue
        count = len(_agent_files(Path(project) / folder))
        if count:
            found.append(Waiting(folder, count))
    return tuple(found)


def plugin_agent_paths(plugins: object) -> list[str]:
    """The agent paths of the ``claude_plugins`` harness service (``[{"agents": [path, ...]},
    ...]``, what the app hands every feature); anything else is none."""
    if not isinstance(plugins, list):
        return []
    paths: list[str] = []
    for plugin in cast(list[Any], plugins):
        agents = cast(dict[str, Any], plugin).get("agents") if isinstance(plugin, dict) else None
        if isinstance(agents, list):
            paths += [path for path in cast(list[Any], agents) if isinstance(path, str)]
    return paths


def load_definitions(
    *,
    project: str | os.PathLike[str] | None = None,
    project_trusted: bool = False,
    env: Mapping[str, str] | None = None,
    plugin_agents: Sequence[str | os.PathLike[str]] = (),
    given: object = None,
) -> Definitions:
    """Every definition of the folders (:func:`agent_folders`), with the problems met.
    ``plugin_agents`` are the agent folders and files of the Claude Code plugins the app
    loads (the ``claude_plugins`` harness service), read first: any folder's agent of the same
    name replaces a plugin's. ``given``: this run's ``--agents`` (:func:`given_definitions`),
    read last: they replace a folder's agent of the same name, as in Claude Code."""
    agents: dict[str, AgentDefinition] = {GENERAL_PURPOSE.name: GENERAL_PURPOSE}
    errors: list[str] = []
    warnings: list[str] = []
    shadowed: list[tuple[AgentDefinition, str]] = []
    for folder in map(Path, plugin_agents):
        _folder(folder, agents, errors, warnings, plugin=True, shadowed=shadowed)
    users = agent_folders(project, False, env)  # a project at ~ has ~/.claude/agents as both
    for folder in agent_folders(project, project_trusted, env):
        _folder(folder, agents, errors, warnings, project=folder not in users, shadowed=shadowed)
    given_definitions(given, agents, errors, warnings)
    waiting = () if project is None or project_trusted else waiting_definitions(project, env)
    return Definitions(agents, tuple(errors), tuple(warnings), waiting, tuple(shadowed))
