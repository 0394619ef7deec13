"""The subagents TUI facet: ``/agents`` opens a subagent's transcript.

Running subagents already show in the app's tasks panel: their task's ``status`` is a
:class:`~.contract.SubagentStatus` (label, agent, current step). This facet follows every
``pi.conversation`` instance (subagents' conversations included, hydrated when the TUI joins),
remembers the subagents it has seen (running or finished), and ``/agents`` offers them; picking
one shows its transcript: the prompt, each assistant message, each tool call and its result.
"""

from __future__ import annotations

from typing import Any

from chord import Context, Delivery, FacetEnvironment, define_facet
from chord.textual import Choice, Tui
from pico3 import ConversationService

from .contract import SUBAGENT_KIND

__all__ = ["subagents_in", "transcript_text", "tui_facet"]


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


@define_facet("@pi/subagents")
def tui_facet(env: FacetEnvironment) -> None:
    """Follow conversations; ``/agents`` shows a subagent's transcript."""
    tui = env.use(Tui)
    views: dict[int, Any] = {}
    seen: dict[int, dict[str, Any]] = {}  # child conversation id -> last status

    async def follow(conversation: Any, ctx: Context) -> None:
        mine: list[int] = []

        def deliver(value: Any, _ctx: Context, _delivery: Delivery) -> None:
            cid = value["conversation"]["id"]
            if not mine:
                mine.append(cid)
            views[cid] = value
            for _task, status in subagents_in(value):
                child = status.get("conversation")
                if type(child) is int:
                    seen[child] = dict(status)

        stop = conversation.view.subscribe(deliver)
        try:
            await ctx.wait_cancelled()
        finally:
            stop()

    async def agents(args: str, ctx: Context) -> None:
        if not seen:
            tui.notify("No subagent has run in this session yet")
            return
        running = {
            status.get("conversation")
            for view in views.values()
            for _task, status in subagents_in(view)
        }
        choices = [
            Choice(
                str(cid),
                f"{'◐' if cid in running else '●'} {status.get('label')} ({status.get('agent')})",
                status.get("progress", "") if cid in running else "finished",
            )
            for cid, status in sorted(seen.items())
        ]
        modal = await tui.acquire_modal(ctx)
        try:
            picked = await modal.choose("Subagents", choices)
            if picked is None:
                return
            cid = int(picked)
            await modal.choose(
                f"Subagent: {seen[cid].get('label')}",
                [Choice("close", "Close")],
                body=transcript_text(views.get(cid)),
            )
        finally:
            modal.close()

    def activate() -> None:
        env.own(tui.register_command("agents", "Show a subagent's transcript", agents))

    env.observe(ConversationService, follow)
    env.on_activate(activate)
