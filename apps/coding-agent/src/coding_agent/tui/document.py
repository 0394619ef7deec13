"""Reading the conversation view: small pure helpers the widgets share.

The app decodes each revision of the ``ConversationView`` once, at its edge, into pico3's typed
records (:class:`pico3.View`, :class:`pico3.ViewDecoder`); the widgets read their fields. An
entry that does not match its kind's shape arrives as a :class:`pico3.CustomEntry`, so rendering
never crashes on a document a newer worker produced. ``config`` stays JSON (its keys are declared
by whoever registered them), so the two helpers that read it stay defensive.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coding_agent.marks import attachment_mark
from pico3 import AssistantEntry, QueuedInput, UsageEntry, View, ViewEntry
from pico3.models import TextContent, Usage

__all__ = [
    "UsageTotals",
    "attachment_marks",
    "content_text",
    "entry_text",
    "inbox_text",
    "model_label",
    "short_json",
    "thinking_level",
    "turn_model_label",
]


def content_text(content: str | Sequence[object] | None) -> str:
    """The text of a message ``content``: a string, or the ``text`` blocks of a block list
    (attachments left out: :func:`attachment_marks` names them)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    return "\n".join(
        block.text
        for block in content
        if isinstance(block, TextContent) and attachment_mark(block.text) is None
    )


def attachment_marks(content: str | Sequence[object] | None) -> list[str]:
    """The marks of the files, folders and images attached to a message ``content``
    (``📎 src/app.py (120 lines)``, ``🖼 shot.png``: :mod:`coding_agent.context.mentions`)."""
    if isinstance(content, str) or content is None:
        return []
    marks = (attachment_mark(b.text) for b in content if isinstance(b, TextContent))
    return [mark for mark in marks if mark is not None]


def entry_text(entry: ViewEntry) -> str:
    """The text of an entry's first user message (a user, notice, summary, handoff or custom
    entry), or ``""``."""
    message = entry.user_message
    return content_text(message.content) if message is not None else ""


def inbox_text(item: QueuedInput) -> str:
    """The user-visible text of a queued inbox item (a queued send or a queued write)."""
    if item.content is not None:
        return content_text(item.content)
    entry = item.entry
    if entry is None:
        return ""
    message = entry.messages[0] if entry.messages else None
    if message is None and isinstance(entry, AssistantEntry):
        message = entry.data.display
    if message is not None:
        return content_text(message.content)
    return f"[{entry.kind or 'entry'}]"


def _config(view: View | Mapping[str, Any] | None) -> Mapping[str, Any]:
    if isinstance(view, View):
        return view.config
    config = view.get("config") if view is not None else None
    return config if isinstance(config, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def model_label(view: View | Mapping[str, Any] | None, fallback: str | None) -> str:
    """``provider/modelId`` from ``config.model``, else ``fallback``, else ``"no model"``.

    ``view`` is the decoded view, or the raw value (a command reading the replica)."""
    model = _config(view).get("model")
    if isinstance(model, dict) and isinstance(model.get("modelId"), str):  # pyright: ignore[reportUnknownMemberType]
        provider = model.get("provider")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        return f"{provider}/{model['modelId']}" if provider else model["modelId"]
    return fallback or "no model"


def turn_model_label(view: View | Mapping[str, Any] | None) -> str | None:
    """``provider/modelId`` of the running turn's own model (a command's ``model:``, the
    view's ``turn.model``), or ``None`` when no turn runs or it uses the config's."""
    if isinstance(view, View):
        model: Any = view.turn.model if view.turn is not None else None
    else:
        turn = view.get("turn") if view is not None else None
        model = turn.get("model") if isinstance(turn, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if isinstance(model, dict) and model.get("provider") and model.get("modelId"):  # pyright: ignore[reportUnknownMemberType]
        return f"{model['provider']}/{model['modelId']}"
    return None


def thinking_level(view: View | Mapping[str, Any] | None) -> str:
    """``config.thinkingLevel`` of ``view`` (``"off"`` when missing or not a string)."""
    level = _config(view).get("thinkingLevel")
    return level if isinstance(level, str) and level else "off"


def short_json(value: Any, limit: int = 80) -> str:
    """A one-line JSON rendering of ``value`` cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(slots=True)
class UsageTotals:
    """Token and cost totals over a transcript, folded entry by entry (never re-scanned).

    ``context_tokens`` is the size of the last request that reported usage (input, cache reads
    and writes plus output): what the next request will carry, the basis of the context %.

    A fresh context (``/new``: a ``pi.reset`` or ``pi.handoff`` entry) starts the token counts
    and the context size over; the cost stays, as money spent in the session.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0
    context_tokens: int = 0
    last_id: int = 0

    def fold(self, entries: Iterable[ViewEntry]) -> None:
        """Add the usage of every entry newer than the last one folded."""
        for entry in entries:
            if entry.id <= self.last_id:
                continue
            self.last_id = entry.id
            if entry.kind in ("pi.reset", "pi.handoff"):
                self.input = self.output = self.cache_read = self.cache_write = 0
                self.context_tokens = 0
                continue
            usage = _entry_usage(entry)
            if usage is None:
                continue
            self.input += usage.input
            self.output += usage.output
            self.cache_read += usage.cache_read
            self.cache_write += usage.cache_write
            self.cost += usage.cost.total
            context = usage.input + usage.output + usage.cache_read + usage.cache_write
            if context:
                self.context_tokens = context


def _entry_usage(entry: ViewEntry) -> Usage | None:
    if isinstance(entry, AssistantEntry):
        message = entry.message
        return message.usage if message is not None else None
    if isinstance(entry, UsageEntry):
        return entry.data.usage
    return None
