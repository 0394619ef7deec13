"""``/context``: how the context window is spent, as Claude Code's ``/context`` shows it.

A bar, the system prompt by section (each memory file with its size and why it was read), the
tools (sizes from ``tools(ctx)`` of :mod:`coding_agent.worker.status`), the conversation and
the free space (:mod:`.context_budget`); picking a row shows its text.

It shows the system prompt last sent (the newest ``pi.system`` entry, :func:`sent_system`;
before the first request, a preview from the files as they are now), then one row per
``AGENTS.md`` / ``CLAUDE.md`` above the project *not* read, with why
(:func:`~coding_agent.context.context_files.context_file_problem`, :func:`skipped_rows`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from chord import Context
from chord.textual import Arguments, Choice, CommandOutcome
from coding_agent.context.context_files import SkippedFile, scan_context_files
from coding_agent.context.system_prompt import (
    SECTION_ORDER,
    build_sections,
    estimate_tokens,
    prompt_sections,
)
from coding_agent.tui.commands.context_budget import bar, budget
from coding_agent.tui.commands.prompt_target import PromptsTarget
from coding_agent.tui.document import model_label

__all__ = ["context", "context_rows", "sent_system", "skipped_rows"]


def sent_system(view: Any) -> dict[str, Any] | None:
    """The ``data`` of the newest ``pi.system`` entry of ``view`` (its full system state:
    ``sections`` by key with ``rendered`` text, and ``tools``), or ``None``."""
    entries = view.get("entries") if isinstance(view, dict) else None
    for entry in reversed(entries if isinstance(entries, list) else []):
        if isinstance(entry, dict) and entry.get("kind") == "pi.system":
            data = entry.get("data")
            if isinstance(data, dict) and isinstance(data.get("sections"), dict):
                return data
    return None


def _source(key: str, value: Any) -> str:
    """Where section ``key`` with ``value`` came from, for display."""
    data = value if isinstance(value, dict) else {}
    if key in ("system", "append-system"):
        return str(data.get("path") or "built-in default")
    files = data.get("files")
    if isinstance(files, list):
        return ", ".join(str(f.get("path")) for f in files if isinstance(f, dict))
    skills = data.get("skills")
    if isinstance(skills, list):
        return f"{len(skills)} skill{'s' if len(skills) != 1 else ''}"
    servers = data.get("servers")  # facets-mcp's mcp-instructions
    if isinstance(servers, list):
        names = [str(s.get("name")) for s in servers if isinstance(s, dict)]
        return "MCP server" + ("s " if len(names) != 1 else " ") + ", ".join(names)
    return ""


def context_rows(
    sections: Mapping[str, Any], tools: list[str], indent: str = ""
) -> list[tuple[str, int, str, str]]:
    """``(key, tokens, source, text)`` of every section (its memory files below it, indented
    once more), then one row for the tools (when ``tools``); keys start with ``indent``."""
    rows: list[tuple[str, int, str, str]] = []
    for key, state in sections.items():
        state = state if isinstance(state, dict) else {}
        text = str(state.get("rendered", ""))
        rows.append(
            (
                f"{indent}{key}",
                estimate_tokens(f"## {key}\n{text}"),
                _source(key, state.get("value")),
                text,
            )
        )
        value = state.get("value")
        files = value.get("files") if key == "context-files" and isinstance(value, dict) else None
        for item in files if isinstance(files, list) else ():  # each memory file, and why
            if isinstance(item, dict):
                content = str(item.get("content", ""))
                why = str(item.get("reason") or "")
                rows.append(
                    (
                        f"{indent}  {item.get('path', '?')}",
                        estimate_tokens(content),
                        why,
                        f"{item.get('path', '?')}"
                        + (f" ({why})" if why else "")
                        + f"\n\n{content}",
                    )
                )
    if tools:
        rows.append(("tools", 0, f"{len(tools)}: {', '.join(tools)}", "\n".join(tools)))
    return rows


def skipped_rows(skipped: Sequence[SkippedFile]) -> list[tuple[str, int, str, str]]:
    """One ``/context`` row per context file that was not read: ``(key, 0, source, text)``."""
    return [
        (
            f"not read: {skip.path}",
            0,
            skip.reason,
            f"{skip.path} is not part of the system prompt: {skip.reason}.\n\nOutside the "
            "project, memory files (AGENTS.md, CLAUDE.md and their @imports) are read only from "
            "folders you own that no other user can write to, and a project's files import only "
            "files inside the project.",
        )
        for skip in skipped
    ]


def _preview(cwd: str | os.PathLike[str]) -> dict[str, Any]:
    built = build_sections(cwd)
    renderers = prompt_sections()
    sections: dict[str, Any] = {}
    for key in SECTION_ORDER:
        value = built.values.get(key)
        if value is not None:
            sections[key] = {"value": value, "rendered": renderers[key].render(value)}
    return {"sections": sections, "tools": []}


async def _tool_sizes(target: PromptsTarget, ctx: Context) -> dict[str, int]:
    """Each registered tool's definition in tokens, from the worker (``{}`` when it cannot
    say: an older worker, or none)."""
    tools = getattr(target.status, "tools", None)
    if tools is None:
        return {}
    try:
        sizes = await tools(ctx)
    except Exception:  # the worker went away, or predates tools(): sizes unknown
        return {}
    return {str(k): int(v) for k, v in sizes.items()} if isinstance(sizes, dict) else {}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


def _unused_report(reported: int) -> str:
    """Why the provider's last report is not ``/context``'s total (``reported``: 0 for none)."""
    if not reported:
        return "nothing was measured yet"
    return (
        f"the provider's last report, {reported:,} tokens (the footer's ctx % and /cost), is "
        "smaller than the system prompt and tools it was sent with, so it cannot be the total"
    )


async def context(target: PromptsTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/context``: the context window's budget (system prompt with its sections and memory
    files, tools, conversation, free space; :mod:`.context_budget`), each row opening its
    text."""
    view = target.client.view.value
    data = sent_system(view)
    preview = data is None
    if data is None:
        data = _preview(target.folder)
    tools = [t for t in data.get("tools", []) if isinstance(t, str)]
    sections = context_rows(data["sections"], [], indent="  ")
    system = sum(tokens for key, tokens, _, _ in sections if not key.startswith("    "))
    sizes = await _tool_sizes(target, ctx)
    if preview and not tools:  # nothing sent yet: the worker's tools are what will be
        tools = list(sizes)
    tool_rows = [(f"  {name}", sizes.get(name, 0), "", name) for name in tools]
    tool_tokens = sum(tokens for _, tokens, _, _ in tool_rows)
    session = target.client.session
    window = session.context_window
    spent = budget(view, system, tool_tokens, window)
    size = spent.conversation
    files = sum(1 for key, _, _, _ in sections if key.startswith("    "))
    model = model_label(view, session.model)
    rows: list[tuple[str, int, str, str]] = [  # the budget first, then its parts in detail
        (
            "System prompt",
            system,
            f"{len(data['sections'])} sections"
            + (f", {files} memory file{'s' if files != 1 else ''} among them" if files else ""),
            "",
        ),
        ("Tools", tool_tokens, f"{len(tools)} tools, sent beside the system prompt", ""),
        ("Messages", spent.messages, size.describe(), ""),
    ]
    if spent.free is not None and window:
        rows.append(("Free space", spent.free, f"of {model}'s {window:,}-token window", ""))
    rows += [*sections, *tool_rows]
    try:
        rows += skipped_rows(scan_context_files(target.folder).skipped)
    except OSError:  # the folder is not on this machine (a remote session)
        pass
    texts = {key: text for key, _, _, text in rows}
    texts["System prompt"] = "\n\n".join(
        f"## {key.strip()}\n{text}" for key, _, _, text in sections if not key.startswith("    ")
    )
    texts["Tools"] = "\n".join(f"{name}  ~{sizes.get(name, 0):,} tokens" for name in tools)
    texts["Messages"] = (
        f"The conversation in context: {size.describe()}, ~{spent.messages:,} tokens."
        + (
            f" The last request measured {spent.measured:,} tokens in all (the footer's "
            "ctx %); the messages are that less the system prompt and the tools, plus what "
            "was added since."
            if spent.measured
            else f" Estimated at 4 characters a token: {_unused_report(spent.reported)}."
        )
    )
    if "Free space" in texts:
        texts["Free space"] = (
            f"{spent.free:,} of {window:,} tokens are free. When the context fills up, "
            "/compact summarises the older part (it also runs by itself near the limit)."
        )
    used = f"~{spent.used:,}" + ("" if spent.measured else " (estimated)")
    if window and spent.percent is not None:
        title = (
            f"Context: {used} of {window:,} tokens ({spent.percent:.0f}%)  "
            f"{bar(spent.used, window)}"
        )
    else:
        title = f"Context: {used} tokens ({model}'s context window is not known)"
    when = (
        "Preview: nothing has been sent yet; this is what the next request will hold."
        if preview
        else "The system prompt and tools the model was sent with its latest request."
    )
    choices = [
        Choice(
            key,
            "  ".join(
                part for part in (key, f"~{tokens:,} tokens" if tokens else "", source) if part
            ),
        )
        for key, tokens, source, _ in rows
    ]
    modal = await target.tui.acquire_modal(ctx)
    try:
        picked = await modal.choose(
            title,
            choices,
            body=f"{when} Sizes are estimates (4 characters a token) where the provider did "
            "not measure them"
            + (
                ""
                if spent.measured or not spent.reported
                else f" ({_unused_report(spent.reported)})"
            )
            + ". Enter shows a row.",
        )
        if picked is not None and picked in texts:
            await modal.confirm(picked.strip(), texts[picked], yes="Close", no="Back")
    finally:
        modal.close()
    return None
