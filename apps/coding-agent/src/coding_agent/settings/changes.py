"""Model and thinking-level changes, recorded as transcript entries.

Which model answered and how hard it was asked to think are facts of the conversation's
history, not only of its present config: a reader of a transcript (or a late-joining TUI) should
see *where* the model was switched. The worker therefore records every change of the
conversation's ``model`` or ``thinkingLevel`` config as an entry of an app-defined kind
(:mod:`coding_agent.worker.settings_log` writes them)::

    {"kind": "coding-agent.model_change",    "data": {"from": "faux/faux-1", "to": "faux/faux-big"}}
    {"kind": "coding-agent.thinking_change", "data": {"from": "off", "to": "high"}}

Models are named ``provider/modelId``, the form ``/model`` takes. The entries carry ``data``
only, no ``model`` messages, so they never reach the model's context: pico3 derives context from
entries' ``model`` lists alone. The TUI renders them as one dim line (:func:`change_text`).

This module is shared by the worker (which writes) and the TUI (which renders and offers the
levels), so it depends on neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "MODEL_CHANGE",
    "THINKING_CHANGE",
    "THINKING_LEVELS",
    "change_text",
    "model_ref",
    "next_thinking_level",
]

MODEL_CHANGE = "coding-agent.model_change"
"""Entry kind: the conversation's model changed; ``data`` is ``{"from", "to"}`` refs."""

THINKING_CHANGE = "coding-agent.thinking_change"
"""Entry kind: the conversation's thinking level changed; ``data`` is ``{"from", "to"}``."""

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
"""The thinking levels the TUI offers, in cycling order (Ctrl+Y goes to the next one)."""


def model_ref(model: Any) -> str | None:
    """``provider/modelId`` of a ``config.model`` value, or ``None`` when it is not one."""
    if not isinstance(model, Mapping):
        return None
    provider = model.get("provider")
    model_id = model.get("modelId")
    if not isinstance(provider, str) or not isinstance(model_id, str):
        return None
    return f"{provider}/{model_id}"


def next_thinking_level(level: Any) -> str:
    """The level after ``level`` in :data:`THINKING_LEVELS` (wrapping to ``off``).

    A level outside the cycle (``max``, which the harness also accepts, or garbage) goes back
    to ``off``.
    """
    if level not in THINKING_LEVELS:
        return THINKING_LEVELS[0]
    index = THINKING_LEVELS.index(level)
    return THINKING_LEVELS[(index + 1) % len(THINKING_LEVELS)]


def change_text(entry: Mapping[str, Any]) -> str | None:
    """The one-line marker of a change entry (``"Model: a/b → c/d"``), ``None`` for other kinds.

    Defensive like every reader of the view: a malformed ``data`` still yields a line.
    """
    kind = entry.get("kind")
    if kind == MODEL_CHANGE:
        label = "Model"
    elif kind == THINKING_CHANGE:
        label = "Thinking"
    else:
        return None
    data = entry.get("data")
    data = data if isinstance(data, Mapping) else {}
    before = data.get("from")
    after = data.get("to")
    before = before if isinstance(before, str) else "?"
    after = after if isinstance(after, str) else "?"
    return f"{label}: {before} → {after}"
