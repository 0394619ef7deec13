"""The app's own presentation facet: slash commands carried out through the conversation client.

The TUI app registers only ``/help`` and ``/quit``; every other command is contributed by a facet
that can actually carry it out. This one owns the commands that are plain conversation methods:

* ``/compact [instructions]`` — start a manual compaction of the context (``collapse``);
* ``/new`` — start a fresh context in the same conversation (``reset``);
* ``/model [provider/id]`` — switch the conversation's model (``config_set``); without an
  argument, a picker lists the models the worker knows (its status service);
* ``/fork`` — fork the conversation at its latest entry and show the fork;
* ``/sessions`` — pick one of this folder's sessions and say how to resume it (switching
  sessions inside a running TUI is not offered: each TUI serves one session's worker).

A command that fails (the worker is being restarted, say) says so in a toast; a picker left
with Escape changes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from chord.context import Context
from chord.facets import Facet, FacetEnvironment, define_facet
from chord.textual import Choice, Tui
from coding_agent.client.conversation_client import RemoteConversationClient
from coding_agent.sessions import list_sessions
from coding_agent.tui.document import model_label

__all__ = ["COMMANDS_FACET_ID", "commands_facet"]

COMMANDS_FACET_ID = "@coding-agent/commands"


def _model_ref(model: Mapping[str, object]) -> str:
    return f"{model.get('provider')}/{model.get('id')}"


def commands_facet(
    client: RemoteConversationClient,
    *,
    cwd: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Facet:
    """The facet registering the conversation commands for ``client``'s conversation.

    ``cwd`` is the project folder whose sessions ``/sessions`` lists (``None``: no
    ``/sessions``); ``environ`` is where the sessions folder is looked up (default ``os.environ``).
    """

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

        async def pick(title: str, choices: list[Choice], ctx: Context) -> str | None:
            modal = await tui.acquire_modal(ctx)
            try:
                return await modal.choose(title, choices)
            finally:
                modal.close()

        async def model(args: str, ctx: Context) -> str:
            known = client.models
            ref = args.strip()
            if not ref:
                if not known:
                    return "The worker has not listed its models yet"
                current = model_label(client.view.value, client.session.model)
                choices = [
                    Choice(
                        _model_ref(m),
                        f"{_model_ref(m)}{'  (current)' if _model_ref(m) == current else ''}",
                    )
                    for m in known
                ]
                picked = await pick("Switch the model", choices, ctx)
                if picked is None:
                    return "Model unchanged"
                ref = picked
            provider, slash, model_id = ref.partition("/")
            if not slash or not provider or not model_id:
                raise ValueError(f"model {ref!r} is not provider/id")
            await client.config_set({"model": {"provider": provider, "modelId": model_id}}, ctx)
            return f"Model: {ref}"

        async def fork(args: str, ctx: Context) -> str:
            del args
            conversation_id = await client.fork(ctx)
            client.follow(conversation_id)
            return f"Forked: now in conversation {conversation_id}"

        async def sessions(args: str, ctx: Context) -> str:
            del args
            assert cwd is not None
            found = list_sessions(cwd, env=environ)
            if not found:
                return "No sessions in this folder yet"
            current = client.session.session_id
            choices = [
                Choice(
                    s.id,
                    f"{s.id}{'  (this session)' if s.id == current else ''}",
                )
                for s in found
            ]
            picked = await pick("Sessions of this folder", choices, ctx)
            if picked is None:
                return "No session chosen"
            if picked == current:
                return f"{picked} is this session"
            return f"To resume it: coding-agent --resume {picked}"

        def activate() -> None:
            env.own(
                tui.register_command(
                    "compact", "Summarise the context to free space", guarded(compact)
                )
            )
            env.own(tui.register_command("new", "Start a fresh context", guarded(new)))
            env.own(tui.register_command("model", "Switch the model", guarded(model)))
            env.own(
                tui.register_command(
                    "fork", "Fork the conversation here and continue in the fork", guarded(fork)
                )
            )
            if cwd is not None:
                env.own(
                    tui.register_command(
                        "sessions", "List this folder's sessions", guarded(sessions)
                    )
                )

        env.on_activate(activate)

    return setup
