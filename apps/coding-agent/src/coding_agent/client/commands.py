"""The app's own presentation facet: slash commands carried out through the conversation client.

The TUI app registers only ``/help`` and ``/quit``; every other command is contributed by a facet
that can actually carry it out. This one owns the commands that are plain conversation methods:

* ``/compact [instructions]`` — start a manual compaction of the context (``collapse``);
* ``/new`` — start a fresh context in the same conversation (``reset``).

A command that fails (the worker is being restarted, say) says so in a toast.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from chord.context import Context
from chord.facets import Facet, FacetEnvironment, define_facet
from chord.textual import Tui
from coding_agent.client.conversation_client import RemoteConversationClient

__all__ = ["COMMANDS_FACET_ID", "commands_facet"]

COMMANDS_FACET_ID = "@coding-agent/commands"


def commands_facet(client: RemoteConversationClient) -> Facet:
    """The facet registering ``/compact`` and ``/new`` for ``client``'s conversation."""

    @define_facet(COMMANDS_FACET_ID)
    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)

        def guarded(
            action: Callable[[str, Context], Awaitable[str]],
        ) -> Callable[[str, Context], Awaitable[None]]:
            async def run(args: str, ctx: Context) -> None:
                try:
                    message = await action(args, ctx)
                except Exception as error:
                    tui.notify(f"Command failed: {error}", severity="error")
                    return
                tui.notify(message)

            return run

        async def compact(args: str, ctx: Context) -> str:
            await client.collapse(args.strip() or None, ctx)
            return "Compacting the context…"

        async def new(args: str, ctx: Context) -> str:
            del args
            await client.reset(ctx)
            return "Started a fresh context"

        def activate() -> None:
            env.own(
                tui.register_command(
                    "compact", "Summarise the context to free space", guarded(compact)
                )
            )
            env.own(tui.register_command("new", "Start a fresh context", guarded(new)))

        env.on_activate(activate)

    return setup
