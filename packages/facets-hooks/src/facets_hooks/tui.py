"""The hooks TUI facet: ``/hooks`` lists every hook the session loaded.

Each hook shows its event, matcher, command (``mcp_tool <server> <tool>`` and its ``input`` for
an MCP tool hook), timeout and the settings file it came from; below
them, the files and entries that were not loaded (each naming the file and the problem) and an
untrusted project's settings files whose hooks wait for ``/trust``. Read from the session's
:data:`~.contract.HooksListing`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from chord import Context, FacetEnvironment, define_facet
from chord.textual import Arguments, Choice, Command, Tui, TuiService, register_commands

from .contract import HooksListing, HooksSummary

__all__ = ["COMMANDS", "HooksTarget", "hooks_text", "show_hooks", "tui_facet"]


@dataclass(frozen=True, slots=True)
class HooksTarget:
    """What ``/hooks`` acts on: the TUI and the session's :data:`~.contract.HooksListing`."""

    tui: TuiService
    listing: Any  # HooksListing: a remote service handle


def hooks_text(summary: HooksSummary) -> str:
    """The ``/hooks`` text of a summary."""
    lines: list[str] = []
    hooks = summary["hooks"]
    if not hooks:
        lines.append(
            "No hooks. Claude Code's settings (~/.claude/settings.json, a trusted project's "
            ".claude/settings.json and .claude/settings.local.json) and "
            "~/.config/coding-agent/hooks.json hold them."
        )
    for hook in hooks:
        matcher = f" [{hook['matcher']}]" if hook["matcher"] else ""
        lines.append(f"{hook['event']}{matcher}: {hook['command']}")
        blocks = " · onFailure block" if hook.get("onFailure") == "block" else ""
        lines.append(f"    timeout {hook['timeout']:g} s{blocks} · {hook['source']}")
        if "input" in hook:  # an mcp_tool hook: the tool's arguments, ${path} filled per call
            lines.append(f"    input {json.dumps(hook['input'], ensure_ascii=False)}")
        if hook.get("note"):
            lines.append(f"    {hook.get('note')}")
    if summary["problems"]:
        lines.append("")
        lines.append("Not loaded:")
        lines.extend(f"  {problem}" for problem in summary["problems"])
    if summary["waiting"]:
        lines.append("")
        lines.append("Waiting for /trust (and a restart):")
        lines.extend(f"  {path}" for path in summary["waiting"])
    return "\n".join(lines)


async def show_hooks(target: HooksTarget, args: Arguments, ctx: Context) -> None:
    """``/hooks``: the hooks and the files they come from, in a dialog."""
    summary = await target.listing.summary(ctx)
    modal = await target.tui.acquire_modal(ctx)
    try:
        await modal.choose("Hooks", [Choice("close", "Close")], body=hooks_text(summary))
    finally:
        modal.close()


COMMANDS = (Command("hooks", "List the hooks and the files they come from", show_hooks),)


@define_facet("@pi/hooks")
def tui_facet(env: FacetEnvironment) -> None:
    """Register ``/hooks``."""
    tui = env.use(Tui)
    target = HooksTarget(tui, env.use(HooksListing))
    env.on_activate(lambda: env.own(register_commands(tui, COMMANDS, target)))
