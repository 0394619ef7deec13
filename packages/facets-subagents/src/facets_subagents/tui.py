"""The subagents TUI facet: ``/agents`` opens a subagent's transcript.

Running subagents already show in the app's tasks panel: their task's ``status`` is a
:class:`~.contract.SubagentStatus` (label, agent, current step). This facet observes every
``pi.conversation`` instance and follows the views of the conversations that no subagent owns
(the root and its forks: their ``tasks`` hold the subagents' statuses), remembers the subagents
it has seen (running or finished), and ``/agents`` offers them, each subagent's own subagents
indented under it (found in its view when ``/agents`` runs); picking one shows its
transcript: the prompt, each assistant message, each tool call and its result, read from the
subagent's view as it is then. Before any subagent has run, ``/agents`` shows the definitions (below)
with where to add one, as Claude Code's ``/agents`` lists the agents. A subagent's own view is subscribed to only for that moment: a
view is lazy across the wire (docs/wire.md#lazy-state), so ten running subagents do not stream
their transcripts to a TUI nobody opened them in.

``/agents definitions`` shows the agent definitions the session loaded (name and file), the
files it skipped and those it loaded without a tool (each ``path:line: why``), and an untrusted
project's agent folders that wait for ``/trust`` — read from the session's
:data:`~.contract.SubagentDefinitions`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from chord import Context, Delivery, FacetEnvironment, cancel_scope, define_facet
from chord.textual import Arg, Arguments, Choice, Command, Tui, register_commands
from pico3 import ConversationService

from .contract import AGENT_TOOL, SUBAGENT_KIND, DefinitionsSummary, SubagentDefinitions

__all__ = [
    "COMMANDS",
    "AgentsTarget",
    "agents",
    "definitions_text",
    "finished_subagents_in",
    "subagents_in",
    "transcript_text",
    "tui_facet",
]

NOTHING_RAN = "No subagent has run in this session yet (then /agents opens its transcript)."
"""The head of what ``/agents`` shows before any subagent ran: the definitions follow, so the
command answers what someone coming from Claude Code (where ``/agents`` lists the agents)
asks, rather than pointing at another command."""
WHERE = (
    "Add one: a Markdown file with YAML frontmatter in ~/.claude/agents/, "
    "~/.config/coding-agent/agents/, or a trusted project's .claude/agents/ or "
    ".coding-agent/agents/ (read when a session starts)"
)


def subagents_in(view: Any) -> list[tuple[int, dict[str, Any]]]:
    """``(task id, status)`` of the live subagent tasks in a conversation view."""
    tasks = view.get("tasks") if isinstance(view, dict) else None
    found: list[tuple[int, dict[str, Any]]] = []
    for key, task in (tasks or {}).items():
        if isinstance(task, dict) and task.get("kind") == SUBAGENT_KIND and str(key).isdigit():
            status = task.get("status")
            if isinstance(status, dict):
                found.append((int(key), status))
    return sorted(found)


def finished_subagents_in(view: Any) -> list[tuple[int, dict[str, Any]]]:
    """``(conversation id, status)`` of the subagents a conversation's ``agent`` calls ran to
    their end, read from its entries (a finished task leaves the view's ``tasks``): the call's
    ``description`` is the label, its result's details name the agent and the conversation."""
    labels: dict[str, str] = {}
    found: list[tuple[int, dict[str, Any]]] = []
    entries = view.get("entries") if isinstance(view, dict) else None
    for entry in entries or []:
        for message in entry.get("model") or []:
            if message.get("role") == "assistant" and isinstance(message.get("content"), list):
                for block in message["content"]:
                    if (
                        isinstance(block, dict)
                        and block.get("type") == "toolCall"
                        and block.get("name") == AGENT_TOOL
                    ):
                        arguments = block.get("arguments")
                        if isinstance(arguments, dict):
                            labels[str(block.get("id"))] = str(arguments.get("description", ""))
            elif message.get("role") == "toolResult" and message.get("toolName") == AGENT_TOOL:
                details = (entry.get("data") or {}).get("details") or {}
                child = details.get("conversation") if isinstance(details, dict) else None
                if type(child) is int:
                    label = labels.get(str(message.get("toolCallId")), "subagent")
                    found.append((child, {"label": label, "agent": details.get("agent", "")}))
    return found


def _blocks(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and block.get("text"):
            out.append(str(block["text"]))
        elif block.get("type") == "toolCall":
            out.append(f"→ {block.get('name')}({block.get('arguments')})")
    return out


def transcript_text(view: Any, limit: int = 4000) -> str:
    """A plain transcript of a conversation view's entries (newest kept when too long)."""
    lines: list[str] = []
    for entry in (view or {}).get("entries") or []:
        for message in entry.get("model") or []:
            role = message.get("role", "?")
            text = "\n".join(_blocks(message.get("content")))
            if not text:
                continue
            who = {"user": "prompt", "assistant": "agent", "toolResult": "result"}.get(role, role)
            lines.append(f"[{who}] {text}")
    text = "\n".join(lines) or "(nothing yet)"
    return text if len(text) <= limit else "…" + text[-limit:]


def definitions_text(summary: DefinitionsSummary) -> str:
    """``/agents definitions``'s body: first what needs the reader (folders waiting for trust,
    files skipped, files loaded without a tool: a section only when it has something), then the
    loaded agents' ids (a long list is clipped last)."""
    lines: list[str] = []
    if summary["waiting"]:
        folders = ", ".join(f"{w['folder']} ({w['count']})" for w in summary["waiting"])
        lines += [f"Waiting: {folders} — /trust, then restart, to load them", ""]
    if summary["skipped"]:
        lines += [f"Skipped ({len(summary['skipped'])}):"]
        lines += [f"  {problem}" for problem in summary["skipped"]] + [""]
    if summary["warnings"]:
        lines += [f"Loaded with a note ({len(summary['warnings'])}):"]
        lines += [f"  {note}" for note in summary["warnings"]] + [""]
    names = [
        f"{a['name']} ({a['writtenName']})" if "writtenName" in a else a["name"]
        for a in summary["agents"]
    ]
    lines.append(f"Loaded ({len(names)})" + (f": {', '.join(names)}" if names else ""))
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class AgentsTarget:
    """What ``/agents`` acts on: the facet's two views of the subagents it follows."""

    definitions: Callable[[Context], Awaitable[None]]
    """Show the agent definitions: loaded, skipped, waiting for /trust."""
    transcripts: Callable[[Context], Awaitable[None]]
    """Pick a subagent that ran and show its transcript."""


async def agents(target: AgentsTarget, args: Arguments, ctx: Context) -> None:
    """``/agents``: a subagent's transcript; ``/agents definitions`` (or ``defs``): the
    definitions."""
    if args["what"]:
        await target.definitions(ctx)
    else:
        await target.transcripts(ctx)


COMMANDS = (
    Command(
        "agents",
        "Show a subagent's transcript (definitions: the agents loaded, skipped, waiting)",
        agents,
        args=(Arg("what", optional=True, choices=("definitions", "defs"), hint="[definitions]"),),
    ),
)


@define_facet("@pi/subagents")
def tui_facet(env: FacetEnvironment) -> None:
    """Follow conversations; ``/agents`` shows a subagent's transcript."""
    tui = env.use(Tui)
    definitions = env.use(SubagentDefinitions)
    views: dict[int, Any] = {}  # the followed conversations' views
    instances: dict[int, Any] = {}  # every live conversation instance
    seen: dict[int, dict[str, Any]] = {}  # child conversation id -> last status
    parents: dict[int, int] = {}  # a subagent's own subagent -> the subagent that ran it

    async def follow(conversation: Any, ctx: Context) -> None:
        info = conversation.conversation.value
        cid = info["id"]
        instances[cid] = conversation

        def deliver(value: Any, _ctx: Context, _delivery: Delivery) -> None:
            views[cid] = value
            for _task, status in subagents_in(value):
                child = status.get("conversation")
                if type(child) is int:
                    seen[child] = dict(status)

        # a subagent's view is read when its transcript is shown, never streamed meanwhile
        stop = None if "owner" in info else conversation.view.subscribe(deliver)
        try:
            await ctx.wait_cancelled()
        finally:
            if stop is not None:
                stop()
            if instances.get(cid) is conversation:
                del instances[cid]

    async def current_view(cid: int, ctx: Context) -> Any:
        """Conversation ``cid``'s view as it is now (subscribed to just long enough)."""
        conversation = instances.get(cid)
        if conversation is None:
            return views.get(cid)
        first: list[Any] = []
        ready = anyio.Event()

        def deliver(value: Any, _ctx: Context, _delivery: Delivery) -> None:
            if value is not None and not first:
                first.append(value)
                ready.set()

        stop = conversation.view.subscribe(deliver)
        try:
            with cancel_scope(ctx), anyio.move_on_after(5):
                await ready.wait()
        finally:
            stop()
        return first[0] if first else views.get(cid)

    async def nested(ctx: Context) -> set[Any]:
        """Record the subagents' own subagents in ``seen`` and ``parents``; returns the ones
        that run now.

        They show in their parent subagent's view, which no one here follows, so views are read
        once each: those of the subagents known to have run some (which of them still run?),
        and, while a live conversation some task owns is unaccounted for, every other known
        subagent's (a session whose subagents start none reads nothing)."""
        running: set[Any] = set()
        looked: set[int] = set()
        while True:
            owned = {c for c, i in instances.items() if "owner" in i.conversation.value}
            hunting = bool(owned - seen.keys())
            known = set(parents.values())
            todo = [
                c for c in seen if c in instances and c not in looked and (hunting or c in known)
            ]
            if not todo:
                return running
            for parent in todo:
                looked.add(parent)
                view = await current_view(parent, ctx)
                live = {s.get("conversation"): dict(s) for _t, s in subagents_in(view)}
                done = dict(finished_subagents_in(view))
                for child, status in {**done, **live}.items():
                    if type(child) is int and child != parent:
                        seen[child] = status
                        parents[child] = parent
                running |= live.keys()

    def lineage(cid: int) -> list[int]:
        """``cid``'s chain of parent subagents, the first-level one first, ``cid`` last."""
        path = [cid]
        while path[0] in parents and len(path) < 9:
            path.insert(0, parents[path[0]])
        return path

    async def show_definitions(ctx: Context, head: str = "", tail: str = "") -> None:
        summary = await definitions.summary(ctx)
        body = "\n\n".join(part for part in (head, definitions_text(summary), tail) if part)
        modal = await tui.acquire_modal(ctx)
        try:
            await modal.choose("Agent definitions", [Choice("close", "Close")], body=body)
        finally:
            modal.close()

    async def show_transcripts(ctx: Context) -> None:
        if not seen:
            await show_definitions(ctx, NOTHING_RAN, WHERE)
            return
        running = {
            status.get("conversation")
            for view in views.values()
            for _task, status in subagents_in(view)
        }
        running |= await nested(ctx)
        choices: list[Choice] = []
        for cid, status in sorted(seen.items(), key=lambda item: lineage(item[0])):
            depth = len(lineage(cid)) - 1  # a subagent's own subagents follow it, indented
            mark = "◐" if cid in running else "●"
            choices.append(
                Choice(
                    str(cid),
                    f"{'  ' * depth}{'↳ ' if depth else ''}"
                    f"{mark} {status.get('label')} ({status.get('agent')})",
                    status.get("progress", "") if cid in running else "finished",
                )
            )
        modal = await tui.acquire_modal(ctx)
        try:
            picked = await modal.choose("Subagents", choices)
            if picked is None:
                return
            cid = int(picked)
            await modal.choose(
                f"Subagent: {seen[cid].get('label')}",
                [Choice("close", "Close")],
                body=transcript_text(await current_view(cid, ctx)),
            )
        finally:
            modal.close()

    def activate() -> None:
        target = AgentsTarget(definitions=show_definitions, transcripts=show_transcripts)
        env.own(register_commands(tui, COMMANDS, target))

    env.observe(ConversationService, follow)
    env.on_activate(activate)
