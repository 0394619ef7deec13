"""Reading the ``ConversationView`` document: small pure helpers the widgets share.

The view is plain JSON written by other processes, so every helper here is defensive: a missing
or oddly typed field yields an empty string or ``None``, never an exception. Rendering must not
crash on a document a newer worker produced.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "UsageTotals",
    "content_text",
    "entry_message",
    "inbox_text",
    "model_label",
    "short_json",
    "thinking_level",
]


def content_text(content: Any) -> str:
    """The text of a message ``content``: a string, or the ``text`` blocks of a block list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
        return "\n".join(parts)
    return ""


def entry_message(entry: Mapping[str, Any], role: str | None = None) -> dict[str, Any] | None:
    """The first model message of ``entry`` (optionally of ``role``), or the display message of a
    display-only assistant entry (``data.display``)."""
    model = entry.get("model")
    if isinstance(model, list):
        for message in model:
            if isinstance(message, dict) and (role is None or message.get("role") == role):
                return message
    data = entry.get("data")
    if isinstance(data, dict):
        display = data.get("display")
        if isinstance(display, dict) and (role is None or display.get("role") == role):
            return display
    return None


def inbox_text(item: Mapping[str, Any]) -> str:
    """The user-visible text of a queued inbox item (``{id, mode, input}`` or a queued write)."""
    queued = item.get("input")
    if isinstance(queued, dict):
        if "content" in queued:
            return content_text(queued["content"])
        if isinstance(queued.get("text"), str):
            return queued["text"]
    if isinstance(queued, str):
        return queued
    entry = item.get("entry")
    if isinstance(entry, dict):
        message = entry_message(entry)
        if message is not None:
            return content_text(message.get("content"))
        return f"[{entry.get('kind', 'entry')}]"
    return ""


def model_label(view: Mapping[str, Any] | None, fallback: str | None) -> str:
    """``provider/modelId`` from ``config.model``, else ``fallback``, else ``"no model"``."""
    if view is not None:
        config = view.get("config")
        model = config.get("model") if isinstance(config, dict) else None
        if isinstance(model, dict) and isinstance(model.get("modelId"), str):
            provider = model.get("provider")
            return f"{provider}/{model['modelId']}" if provider else model["modelId"]
    return fallback or "no model"


def thinking_level(view: Mapping[str, Any] | None) -> str:
    """``config.thinkingLevel`` of ``view`` (``"off"`` when missing or not a string)."""
    config = view.get("config") if view is not None else None
    level = config.get("thinkingLevel") if isinstance(config, dict) else None
    return level if isinstance(level, str) and level else "off"


def short_json(value: Any, limit: int = 80) -> str:
    """A one-line JSON rendering of ``value`` cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _int(value: Any) -> int:
    return value if type(value) is int else 0


def _float(value: Any) -> float:
    return float(value) if type(value) in (int, float) else 0.0


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

    def fold(self, entries: Iterable[Mapping[str, Any]]) -> None:
        """Add the usage of every entry newer than the last one folded."""
        for entry in entries:
            entry_id = entry.get("id")
            if type(entry_id) is not int or entry_id <= self.last_id:
                continue
            self.last_id = entry_id
            if entry.get("kind") in ("pi.reset", "pi.handoff"):
                self.input = self.output = self.cache_read = self.cache_write = 0
                self.context_tokens = 0
                continue
            usage = _entry_usage(entry)
            if usage is None:
                continue
            self.input += _int(usage.get("input"))
            self.output += _int(usage.get("output"))
            self.cache_read += _int(usage.get("cacheRead"))
            self.cache_write += _int(usage.get("cacheWrite"))
            cost = usage.get("cost")
            if isinstance(cost, dict):
                self.cost += _float(cost.get("total"))
            context = (
                _int(usage.get("input"))
                + _int(usage.get("output"))
                + _int(usage.get("cacheRead"))
                + _int(usage.get("cacheWrite"))
            )
            if context:
                self.context_tokens = context


def _entry_usage(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = entry.get("kind")
    if kind == "pi.assistant":
        message = entry_message(entry, "assistant")
        usage = message.get("usage") if message is not None else None
    elif kind == "pi.usage":
        data = entry.get("data")
        usage = data.get("usage") if isinstance(data, dict) else None
    else:
        return None
    return usage if isinstance(usage, dict) else None
