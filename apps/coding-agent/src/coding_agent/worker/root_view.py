"""Following the root conversation's view from a facet beside the session's facets.

``-p``/``--json`` (:mod:`coding_agent.cli.headless`) and ``coding-agent acp``
(:mod:`coding_agent.acp.session`) run the worker's facets in their own process and follow the
session's root conversation the same way: observe every ``pi.conversation`` instance offered,
take the one whose first hydrate names no parent conversation, and hand each of its revisions on.
A reconnect (over the wire) offers a new instance, which is taken again the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from chord import Context, Delivery, Facet, FacetEnvironment, define_facet
from pico3 import ConversationService, ConversationServiceApi

__all__ = ["RootRevision", "follow_root_view"]

RootRevision = Callable[[ConversationServiceApi, Any, Literal["hydrate", "update"], bool], None]
"""``(instance, view value, "hydrate" or "update", chosen)``: ``chosen`` is true on the hydrate
that made ``instance`` the root followed. Called synchronously, in order, by the replica."""


def follow_root_view(facet_id: str, on_revision: RootRevision) -> Facet:
    """A facet calling ``on_revision`` with every revision of the root conversation's view."""

    def setup(env: FacetEnvironment) -> None:
        async def on_instance(instance: ConversationServiceApi, ctx: Context) -> None:
            chosen = False

            def deliver(value: Any, _ctx: Context, delivery: Delivery) -> None:
                nonlocal chosen
                now = False
                if (
                    delivery.kind == "hydrate"
                    and not chosen
                    and "parent" not in value["conversation"]
                ):
                    chosen = now = True
                if chosen:
                    on_revision(instance, value, delivery.kind, now)

            stop = instance.view.subscribe(deliver)
            try:
                await ctx.wait_cancelled()
            finally:
                stop()

        env.observe(ConversationService, on_instance)

    return define_facet(facet_id, setup)
