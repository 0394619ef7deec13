"""The hook points of :mod:`pico3.hooks` as the core kinds call them from a task runtime.

Each core handler asks :func:`runner` for the :class:`~pico3.hooks.HookRunner` of its own task
(kind, task id, conversation) and calls the point it needs. When the harness has no hook
registry (a bare kernel in a unit test) every point is a no-op fold: chains return their input,
observers do nothing, first-wins points answer ``None``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from chord.context import Context
from chord.json import copy_json
from pico3.hooks import HookRegistry, HookRunner
from pico3.tasks.kinds import TaskInfo
from pico3.tasks.runtime import Runtime
from pico3.turn.sections import SectionDraft

__all__ = [
    "chain_before_request",
    "observe_after_response",
    "runner",
    "system_instructions",
]


def runner(rt: Runtime, kind: str, task_id: int, conversation_id: int) -> HookRunner | None:
    """The hook runner of one core task, or ``None`` without a hook registry."""
    hooks = getattr(rt, "hooks", None)
    if isinstance(hooks, HookRunner):
        return hooks
    harness = getattr(rt, "harness", None)
    registry = getattr(harness, "hook_registry", None)
    if not isinstance(registry, HookRegistry):
        return None
    kernel = getattr(harness, "kernel", None)
    report = getattr(kernel, "report", None) or (lambda error: None)
    return HookRunner(
        registry, _Kind(kind), task_id=task_id, conversation_id=conversation_id, report=report
    )


class _Kind:
    """A core kind token for the hook registry (core kinds are matched by name)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


async def chain_before_request(
    rt: Runtime, task: TaskInfo, messages: list[dict[str, Any]], cutoff: int, ctx: Context
) -> list[dict[str, Any]]:
    """Run ``before_request`` on ``{"messages": [...]}``; returns the final messages.

    ``messages`` may be shared (read-only): the hooks get a deep copy they may change (see
    :class:`HookCopies`, which keeps the copies of a long history between calls). Every message
    of the result still equal to the shared one at its place *is* the shared one again, so the
    per-conversation memos downstream (:class:`pico3.turn.system.ToolsMemo`,
    :class:`pico3.models.MessageMemo`) recognise a long history by identity instead of walking
    it by value every turn; the result is read-only like ``messages`` (it is, without hooks)."""
    hooks = runner(rt, "pi.generation", task.id, task.conversation_id)
    if hooks is None or not await hooks.bindings("before_request", ctx):
        return messages
    memo = _copies(rt, task.conversation_id)
    handed = memo.copies(messages)
    copies = list(handed)  # what the hooks get (and may reorder); ``handed`` is what was given
    request = await hooks.before_request({"messages": copies}, cutoff or None, ctx)
    if isinstance(request, Mapping) and isinstance(request.get("messages"), list):
        copies = list(request["messages"])
    memo.remember(messages, handed)
    return _reshare(copies, messages)


class HookCopies:
    """The deep copies of one conversation's shared messages that its last ``before_request``
    chain was given, kept to be given again.

    A long conversation's request re-sends every message, and a deep copy of the whole history
    for every request was the one cost of a late turn that grew with the session. A kept copy is
    given again only when its message is the very same shared object as last time (the
    transcript cache never changes one) and the copy still equals it (compared in C): a hook
    that changed its copy, then or since, gets a fresh one. So the hooks always get copies equal
    to the shared messages and sharing nothing with them, and only the new messages, and those
    a hook changed, are copied. It holds one copy of the history per conversation (the most
    recently used few are kept: :data:`_COPIED_CONVERSATIONS`)."""

    __slots__ = ("_pairs",)

    def __init__(self) -> None:
        self._pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def copies(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Deep copies of ``messages``, the kept ones where they still hold."""
        pairs = self._pairs
        out: list[dict[str, Any] | None] = []
        missing: list[int] = []
        for index, message in enumerate(messages):
            if index < len(pairs):
                original, copy = pairs[index]
                if original is message and copy == message:
                    out.append(copy)
                    continue
            out.append(None)
            missing.append(index)
        if missing:
            fresh = _deep_copy([messages[index] for index in missing])
            for index, copy in zip(missing, fresh, strict=True):
                out[index] = copy
        return out  # pyright: ignore[reportReturnType]  (every None was filled)

    def remember(self, messages: list[dict[str, Any]], handed: list[dict[str, Any]]) -> None:
        """Keep ``handed[i]``, the copy given for ``messages[i]``, for the next call."""
        self._pairs = list(zip(messages, handed, strict=True))


_COPIES: OrderedDict[tuple[int, int], HookCopies] = OrderedDict()
_COPIED_CONVERSATIONS = 64


def _copies(rt: Runtime, conversation_id: int) -> HookCopies:
    """The :class:`HookCopies` of a conversation of ``rt``'s harness (keyed as
    :func:`pico3.turn.model_call._memo` keys its memos: a stale one is harmless, every kept copy
    is checked against its message)."""
    key = (rt.harness.key, conversation_id)
    memo = _COPIES.pop(key, None) or HookCopies()
    _COPIES[key] = memo
    if len(_COPIES) > _COPIED_CONVERSATIONS:
        _COPIES.popitem(last=False)
    return memo


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder()


def _deep_copy(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A deep copy of transcript messages, made in C (a msgpack round trip: several times
    faster than walking them in Python, and the messages were checked as strict JSON when they
    were committed); anything msgpack does not take goes through
    :func:`chord.json.copy_json`, which names the problem."""
    try:
        return _DECODER.decode(_ENCODER.encode(messages))
    except (TypeError, ValueError, OverflowError, msgspec.MsgspecError):
        return copy_json(messages)


def _reshare(messages: list[dict[str, Any]], shared: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each message equal to the one at its place in ``shared`` replaced by
    that shared one (compared in C; see :func:`chain_before_request`)."""
    for index, (message, original) in enumerate(zip(messages, shared, strict=False)):
        if message is not original and message == original:
            messages[index] = original
    return messages


async def observe_after_response(
    rt: Runtime, task: TaskInfo, message: dict[str, Any], attempt: int, ctx: Context
) -> None:
    """Run ``after_response`` observers on a terminal message."""
    hooks = runner(rt, "pi.generation", task.id, task.conversation_id)
    if hooks is not None:
        await hooks.after_response(message, attempt, ctx)


async def system_instructions(
    rt: Runtime,
    draft: SectionDraft,
    settings: Mapping[str, Any],
    loadout: Sequence[str],
    ctx: Context,
) -> list[str] | None:
    """Run ``system_instructions`` on the draft; returns the loadout override or ``None``."""
    hooks = runner(rt, "pi.generation", rt.task_id, rt.conversation_id)
    if hooks is None:
        return None
    return await hooks.system_instructions(draft, dict(settings), list(loadout), ctx)
