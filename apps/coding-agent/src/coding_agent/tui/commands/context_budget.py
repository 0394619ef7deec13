"""``/context``'s budget: how the model's context window is spent, as Claude Code's shows it.

The window holds the system prompt, the tools' definitions (sent beside it), the conversation in
context (the view's entries: everything from the newest summary or reset on, each model message
of a prompt, an answer, a tool result, a notice) and what is left: the free space. Each part is
estimated at 4 characters a token (:func:`~coding_agent.context.system_prompt.estimate_tokens`,
as the system prompt's sections are); an image counts :data:`IMAGE_TOKENS`, about what a
provider charges for one scaled to fit 2000×2000.

Where the provider measured the last request (its usage, the footer's ``ctx %``), the total is
that measurement plus an estimate of what was added after it, and the conversation is the total
less the system prompt and the tools, so ``/context`` and the footer agree. A measurement
smaller than the system prompt and the tools it must have held (the offline faux model counts
only the messages) is not used: the estimates are, and ``/context`` says that the footer and
``/cost`` show that report (:attr:`Budget.reported`), not the estimate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from coding_agent.context.system_prompt import estimate_tokens
from coding_agent.tui.document import UsageTotals
from pico3 import view_from_json

__all__ = ["IMAGE_TOKENS", "Budget", "ConversationSize", "bar", "budget", "conversation_size"]

IMAGE_TOKENS = 1_600
"""An image's estimated size in tokens."""


@dataclass(frozen=True, slots=True)
class ConversationSize:
    """The conversation in context: estimated tokens, and how many of each kind of message."""

    tokens: int = 0
    prompts: int = 0
    answers: int = 0
    results: int = 0

    def describe(self) -> str:
        """``3 prompts, 3 answers, 7 tool results``."""
        parts = [(self.prompts, "prompt"), (self.answers, "answer"), (self.results, "tool result")]
        return ", ".join(f"{n} {word}{'' if n == 1 else 's'}" for n, word in parts)


def _message_tokens(message: Mapping[str, Any]) -> int:
    content = message.get("content")
    if isinstance(content, str):
        return estimate_tokens(content)
    tokens = 0
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "image":
            tokens += IMAGE_TOKENS
        elif kind == "text":
            tokens += estimate_tokens(str(block.get("text", "")))
        elif kind == "thinking":
            tokens += estimate_tokens(str(block.get("thinking", "")))
        elif kind == "toolCall":
            arguments = json.dumps(block.get("arguments"), ensure_ascii=False)
            tokens += estimate_tokens(f"{block.get('name', '')}{arguments}")
    return tokens


def conversation_size(entries: Iterable[Any], after: int = 0) -> ConversationSize:
    """The model messages of the view's ``entries`` (JSON) newer than entry id ``after``, the
    system entries left out (they are the system prompt)."""
    tokens = prompts = answers = results = 0
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kind") == "pi.system":
            continue
        if not isinstance(entry.get("id"), int) or entry["id"] <= after:
            continue
        model = entry.get("model")
        for message in model if isinstance(model, list) else []:
            if not isinstance(message, dict):
                continue
            tokens += _message_tokens(message)
            role = message.get("role")
            prompts += role == "user"
            answers += role == "assistant"
            results += role == "toolResult"
    return ConversationSize(tokens, prompts, answers, results)


@dataclass(frozen=True, slots=True)
class Budget:
    """The window's parts, in tokens; ``window`` is ``None`` when the model's is not known."""

    system: int
    tools: int
    conversation: ConversationSize
    messages: int
    """The conversation's share: measured less the rest when a request was measured, else
    its estimate."""
    used: int
    window: int | None
    measured: int
    """The last request's size as the provider reported it, when it is the total (0: none
    reported yet, or a report too small to be the total)."""
    reported: int = 0
    """The last request's size as the provider reported it, used or not: what the footer's
    ``ctx %`` and ``/cost`` show (:attr:`UsageTotals.context_tokens`)."""

    @property
    def free(self) -> int | None:
        return max(self.window - self.used, 0) if self.window else None

    @property
    def percent(self) -> float | None:
        return 100.0 * self.used / self.window if self.window else None


def budget(view: Any, system: int, tools: int, window: int | None) -> Budget:
    """The budget of the conversation ``view`` (the raw view JSON; ``None`` before it is there)
    with a system prompt of ``system`` and tool definitions of ``tools`` tokens (module
    docstring)."""
    entries = view.get("entries") if isinstance(view, dict) else None
    entries = entries if isinstance(entries, list) else []
    size = conversation_size(entries)
    totals = UsageTotals()
    measured_at = 0
    if isinstance(view, dict) and entries:
        for entry in view_from_json(view).entries:  # as the footer folds them
            before = totals.context_tokens
            totals.fold([entry])
            if entry.kind in ("pi.reset", "pi.handoff"):
                measured_at = 0
            elif totals.context_tokens != before or _measured(entry):
                measured_at = entry.id
    measured = reported = totals.context_tokens if measured_at else 0
    later = conversation_size(entries, after=measured_at).tokens if measured else 0
    if measured and measured + later > system + tools:
        used = measured + later
        messages = used - system - tools
    else:  # nothing measured, or a count that leaves out what was sent (the faux model's)
        measured = 0
        messages = size.tokens
        used = system + tools + messages
    return Budget(system, tools, size, messages, used, window, measured, reported)


def _measured(entry: Any) -> bool:
    """Whether ``entry`` reported a request's usage (an answer's, or a failed attempt's)."""
    message = getattr(entry, "message", None)
    usage = getattr(message, "usage", None) if entry.kind == "pi.assistant" else None
    if entry.kind == "pi.usage":
        usage = getattr(getattr(entry, "data", None), "usage", None)
    if usage is None:
        return False
    return bool(usage.input + usage.output + usage.cache_read + usage.cache_write)


def bar(used: int, window: int, width: int = 20) -> str:
    """``█████░░░░░…``: ``used`` of ``window`` in ``width`` cells (a used part shows at least
    one cell)."""
    filled = min(width, round(width * used / window)) if window > 0 else 0
    if used > 0 and filled == 0:
        filled = 1
    return "█" * filled + "░" * (width - filled)
