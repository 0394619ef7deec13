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

from chord.context import Context
from pico3.hooks import HookRegistry, HookRunner
from pico3.tasks.kinds import TaskInfo
from pico3.tasks.runtime import Runtime
from pico3.turn.hook_copies import HookCopies, reshare
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
    rt: Runtime,
    task: TaskInfo,
    messages: list[dict[str, Any]],
    count: int,
    cutoff: int,
    ctx: Context,
) -> list[dict[str, Any]]:
    """Run ``before_request`` on ``{"messages": [...]}``; returns the final messages.

    ``messages`` may be shared (read-only): the hooks get a deep copy they may change (see
    :mod:`pico3.turn.hook_copies`, which keeps the copies of a long history between calls and
    notices the ones a hook changed). Every message
    of the result still equal to the shared one at its place *is* the shared one again, so the
    per-conversation memos downstream (:class:`pico3.turn.system.ToolsMemo`,
    :class:`pico3.models.MessageMemo`) recognise a long history by identity instead of walking
    it by value every turn; the result is read-only like ``messages`` (it is, without hooks).

    The request's messages are the first ``count`` of ``messages``: a list shared with the
    kernel's context builder, which a later read may extend meanwhile (never change)."""
    hooks = runner(rt, "pi.generation", task.id, task.conversation_id)
    if hooks is None or not await hooks.bindings("before_request", ctx):
        return messages
    if len(messages) != count:
        messages = messages[:count]
    memo = _copies(rt, task.conversation_id)
    copies = memo.copies(messages)  # the memo's list: a change the hooks make to it is noticed
    request = await hooks.before_request({"messages": copies}, cutoff or None, ctx)
    if isinstance(request, Mapping) and isinstance(request.get("messages"), list):
        copies = request["messages"]  # reshare copies it before changing anything
    return reshare(copies, messages, memo)


_COPIES: OrderedDict[tuple[int, int], HookCopies] = OrderedDict()
_COPIED_CONVERSATIONS = 64


def _copies(rt: Runtime, conversation_id: int) -> HookCopies:
    """The :class:`HookCopies` of a conversation of ``rt``'s harness (keyed as
    :func:`pico3.turn.model_call._memo` keys its memos: a stale one is harmless, a kept copy is
    only given for the very same shared message; the most recently used few are kept:
    :data:`_COPIED_CONVERSATIONS`)."""
    key = (rt.harness.key, conversation_id)
    memo = _COPIES.pop(key, None) or HookCopies()
    _COPIES[key] = memo
    if len(_COPIES) > _COPIED_CONVERSATIONS:
        _COPIES.popitem(last=False)
    return memo


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
