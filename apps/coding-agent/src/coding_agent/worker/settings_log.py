"""Record model and thinking-level switches as transcript entries (docs/design/agent.md#features).

The conversation's ``model`` and ``thinkingLevel`` live in its config, and a config change is a
commit with no entry: the transcript alone would not say that the answers after some point came
from another model. This facet watches every ``pi.conversation`` instance's view, one revision
per harness commit, and when a revision's config names another model or level than the one
before, it writes a :data:`~coding_agent.settings.changes.MODEL_CHANGE` or
:data:`~coding_agent.settings.changes.THINKING_CHANGE` entry right after (a passive write: during
a turn it waits in the inbox for the next boundary, so it never splits a tool exchange).

Whoever changes the config (``/model`` in a TUI, a headless run, another client), the entry is
written once, here, by the process that owns the harness. Because it is an entry it survives a
restart and is part of the view every late joiner hydrates from. It carries ``data`` only, so it
is never model context.

What is not recorded: the first model a new conversation gets (there is nothing it replaces),
and what the view already shows at first sight (a ``hydrate``: a fork inheriting its parent's
config, or the view rebuilt after a restart). A switch that lands while the worker is stopping
may lose its entry; the config change itself stands.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any, cast

import anyio

from chord import Context, Delivery, Facet, FacetEnvironment, cancel_scope, define_facet
from coding_agent.settings.changes import MODEL_CHANGE, THINKING_CHANGE, model_ref
from pico3 import ConversationService

__all__ = ["SETTINGS_LOG_FACET_ID", "change_entries", "settings_log_facet"]

SETTINGS_LOG_FACET_ID = "coding-agent/settings-log"

_log = logging.getLogger("coding_agent.worker")

_Settings = tuple[str | None, str]  # (model ref, thinking level)


def _settings(view: Any) -> _Settings | None:
    """The model ref and thinking level a conversation view names (``None``: not a view yet)."""
    if not isinstance(view, Mapping):
        return None
    config = cast(Mapping[str, Any], view).get("config")
    if not isinstance(config, Mapping):
        return None
    config = cast(Mapping[str, Any], config)
    level = config.get("thinkingLevel")
    return model_ref(config.get("model")), level if isinstance(level, str) else "off"


def _is_root(view: Any) -> bool:
    conversation = cast(Mapping[str, Any], view).get("conversation")
    return isinstance(conversation, Mapping) and "parent" not in conversation


def change_entries(before: _Settings, after: _Settings) -> list[dict[str, Any]]:
    """The entries (``{kind, data}``) recording the step from ``before`` to ``after``.

    A model set where none was (a new conversation's first model, and the thinking level it
    starts with) is not a switch.
    """
    (model_before, level_before), (model_after, level_after) = before, after
    if model_before is None:  # a new conversation's first settings (model and level at once)
        return []
    out: list[dict[str, Any]] = []
    if model_before is not None and model_after is not None and model_before != model_after:
        out.append({"kind": MODEL_CHANGE, "data": {"from": model_before, "to": model_after}})
    if level_before != level_after:
        out.append({"kind": THINKING_CHANGE, "data": {"from": level_before, "to": level_after}})
    return out


def settings_log_facet(on_root_change: Callable[[str | None, str], None] | None = None) -> Facet:
    """The worker facet writing a change entry after every model or thinking-level switch.

    ``on_root_change(model, level)`` also hears each switch of the root conversation (the
    worker records it in the session's launch settings)."""

    def setup(env: FacetEnvironment) -> None:
        async def on_instance(instance: Any, ctx: Context) -> None:
            send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
            last: _Settings | None = None

            def deliver(value: Any, _ctx: Context, delivery: Delivery) -> None:
                nonlocal last
                now = _settings(value)
                if now is None:
                    return
                before, last = last, now
                if delivery.kind == "hydrate" or before is None:
                    return
                changes = change_entries(before, now)
                if before != now and on_root_change is not None and _is_root(value):
                    on_root_change(*now)
                for entry in changes:
                    send.send_nowait(entry)

            stop = instance.view.subscribe(deliver)
            try:
                with cancel_scope(ctx), receive:
                    async for entry in receive:
                        try:
                            await instance.write(entry, ctx)
                        except Exception as error:  # the instance went away meanwhile
                            _log.warning("could not record %s: %s", entry["kind"], error)
            finally:
                stop()
                send.close()

        env.observe(ConversationService, on_instance)

    return define_facet(SETTINGS_LOG_FACET_ID, setup)
