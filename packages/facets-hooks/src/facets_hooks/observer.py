"""What the hooks feature follows in each conversation's view: the calls that start waiting for
the user (``Notification``), and, in the root's, the moment the session gets its model.

The session facet observes every conversation (``pi.conversation`` instances) with
:func:`follow_conversation`, once the hooks are loaded:

* **Notification.** Each call of the conversation that starts waiting on the approval dialog or
  a question (``turn.tools[i].waitingOn``) runs the ``Notification`` hooks once
  (:meth:`~.session.Hooks.notify_once`), only while such hooks are loaded: the session's, or
  for a subagent's conversation its definition's own (:mod:`.agent_hooks`).
* **The hooks' models.** A prompt or agent hook's ``model`` alias names a model of the session's
  provider, so it is checked against the session's model (:func:`~.prompt_hooks.check_models`).
  A new session has none when the hooks load (the app gives it one right after the features
  load): the aliases are then checked as soon as the root's view shows a model, so their
  warning still comes before any hook runs.
"""

from __future__ import annotations

import math
from typing import Any

import anyio

from chord import Context, cancel_scope

from .prompt_hooks import check_models
from .protocol import WAITING_MESSAGES, tool_names, waiting_calls

__all__ = ["follow_conversation"]

_MODEL = ("model", "")  # what the stream carries when the root's view shows a model


async def follow_conversation(hooks: Any, loaded: anyio.Event, instance: Any, ctx: Context) -> None:
    """Follow one conversation ``instance`` for the hooks of ``hooks`` (a
    :class:`~.session.Hooks`) once ``loaded`` is set (see the module docstring)."""
    with cancel_scope(ctx):
        await loaded.wait()
    conversation = instance.conversation.value
    shown: Any = conversation if isinstance(conversation, dict) else {}
    unchecked = bool(hooks.unchecked_models) and not {"parent", "owner"} & set(shown)  # pyright: ignore[reportUnknownArgumentType]
    cid: Any = shown.get("id")
    cid = cid if isinstance(cid, int) else None
    notify = bool(hooks.loaded.for_event("Notification"))
    if not notify and cid is not None and "owner" in shown:  # a subagent's own (.agent_hooks)
        notify = bool((await hooks.agents.of(cid, ctx)).for_event("Notification"))
    if not (notify or unchecked):
        return
    send, receive = anyio.create_memory_object_stream[tuple[str, str]](math.inf)
    told: set[str] = set()

    def deliver(value: Any, _ctx: Context, _delivery: Any) -> None:
        nonlocal unchecked
        config = value.get("config") if isinstance(value, dict) else None
        if unchecked and isinstance(config, dict) and config.get("model") is not None:  # pyright: ignore[reportUnknownMemberType]
            unchecked = False
            send.send_nowait(_MODEL)
        for call, on, tool in waiting_calls(value) if notify else []:
            if call not in told:
                told.add(call)
                name = tool_names(tool, None)[0]
                send.send_nowait((f"{cid}:{call}", WAITING_MESSAGES[on].format(tool=name)))

    stop = instance.view.subscribe(deliver)
    try:
        with cancel_scope(ctx), receive:
            async for key, message in receive:
                if (key, message) == _MODEL:
                    await check_models(hooks.harness, hooks.unchecked_models, hooks.warn)
                    hooks.unchecked_models = []
                    if not notify:
                        break
                else:
                    await hooks.notify_once(key, message, cid, ctx)
    finally:
        stop()
        send.close()
