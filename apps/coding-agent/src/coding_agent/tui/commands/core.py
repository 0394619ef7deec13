"""The app's own presentation facet: slash commands carried out through the conversation client.

The TUI app registers only ``/help`` and ``/quit``; every other command is contributed by a facet
that can actually carry it out. This one owns the commands that are plain conversation methods:

* ``/compact [instructions]`` — start a manual compaction of the context (pico3's ``pi.collapse``);
  with nothing to compact yet (everything fits the recent turns kept) it says so in one line;
* ``/new`` — start a fresh context in the same conversation (``reset``);
* ``/model [provider/id]`` — switch the conversation's model (``config_set``); without an
  argument (or with Ctrl+L), a picker lists the models the worker knows (its status service);
* ``/thinking [level]`` — set the conversation's thinking level (``config_set`` of
  ``thinkingLevel``: off, minimal, low, medium, high, xhigh); without an argument, a picker
  marks the current level; Ctrl+Y steps to the next level, from ``xhigh`` back to ``off``
  (both keys through :meth:`~chord.textual.TuiService.register_key`).
  Switching a model that cannot reason to a level above ``off`` is allowed (the level is kept
  for the next model that can) and the toast says so;
* ``/fork`` — fork the conversation at its latest entry and show the fork;
* ``/sandbox`` — the OS sandbox of commands: whether it can start here (and why not), when
  commands run in it, and its policy (:func:`sandbox_text`, from the worker's status);
* Ctrl+P — switch to the next model of the *scope*: the known models matching the
  ``--models`` patterns (shell-style, on ``provider/id``: ``anthropic/*,openai/gpt-5*``), in the
  order the patterns name them; without ``--models``, every model the worker knows.

Each switch of model or level lands in the transcript as an entry the worker writes
(:mod:`coding_agent.worker.settings_log`), so the commands only change config.

A command that fails (the worker is being restarted, say, or a level that does not exist) says
so in an error toast and changes nothing; a picker left with Escape changes nothing either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any, TypeAlias, cast

from chord import Context, Facet, FacetEnvironment, define_facet
from chord.textual import Choice, Severity, Tui
from coding_agent.contracts import SessionTreeService
from coding_agent.session_files.tree import branch_number
from coding_agent.settings.changes import THINKING_LEVELS, next_thinking_level
from coding_agent.tui.conversation_client import RemoteConversationClient
from coding_agent.tui.document import model_label, thinking_level

__all__ = ["COMMANDS_FACET_ID", "CommandError", "commands_facet", "model_scope", "next_in_scope"]

COMMANDS_FACET_ID = "@coding-agent/commands"

_Outcome: TypeAlias = str | tuple[str, Severity]
"""What a command says when it is done: a message, or a message and a toast severity."""


class CommandError(ValueError):
    """A command's argument was refused before anything was sent to the worker."""


def _model_ref(model: Mapping[str, object]) -> str:
    return f"{model.get('provider')}/{model.get('id')}"


def _check_level(level: str) -> str:
    if level not in THINKING_LEVELS:
        raise CommandError(
            f"thinking level {level!r} does not exist; use one of {', '.join(THINKING_LEVELS)}"
        )
    return level


def model_scope(known: Sequence[str], patterns: Sequence[str]) -> list[str]:
    """The models Ctrl+P cycles through: ``known`` refs matching ``patterns``, pattern by pattern.

    Patterns are shell-style (``fnmatch``, case-sensitive) on ``provider/id``; a model matched by
    two patterns appears once, where the first one put it. No patterns: every known model.
    """
    if not patterns:
        return list(dict.fromkeys(known))
    scope: list[str] = []
    for pattern in patterns:
        scope += [ref for ref in known if fnmatchcase(ref, pattern) and ref not in scope]
    return scope


def next_in_scope(scope: Sequence[str], current: str) -> str | None:
    """The model after ``current`` in ``scope`` (wrapping; the first when ``current`` is not in
    it); ``None`` when the scope offers nothing to switch to."""
    if not scope or (len(scope) == 1 and scope[0] == current):
        return None
    if current not in scope:
        return scope[0]
    return scope[(scope.index(current) + 1) % len(scope)]


def sandbox_text(status: dict[str, Any] | None) -> _Outcome:
    """What ``/sandbox`` says: whether the sandbox can start, when commands run in it, and the
    policy (from the worker's status document; see :mod:`coding_agent.worker.status`)."""
    sandbox = status.get("sandbox") if status is not None else None
    if not isinstance(sandbox, dict):
        return ("The worker has not said anything about the sandbox yet", "warning")
    said = cast(dict[str, Any], sandbox)
    if said.get("available") is not True:
        return (
            f"The OS sandbox is unavailable: {said.get('reason')}. Commands run unsandboxed; "
            "the sandbox permission mode asks as ask mode does.",
            "warning",
        )
    when = (
        "every command runs in it (sandbox.enabled)"
        if said.get("enforced")
        else "the sandbox permission mode (Shift+Tab) runs commands in it without asking"
    )
    lines = [f"OS sandbox: {said.get('reason')}; {when}.", *map(str, said.get("policy") or [])]
    return "\n".join(lines)


def commands_facet(client: RemoteConversationClient, *, models: Sequence[str] = ()) -> Facet:
    """The facet registering the conversation commands for ``client``'s conversation.

    ``models`` are the ``--models`` patterns scoping Ctrl+P (see :func:`model_scope`).
    """
    patterns = tuple(models)

    @define_facet(COMMANDS_FACET_ID)
    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)
        tree_service = env.use(SessionTreeService)

        async def report(action: Awaitable[_Outcome]) -> None:
            try:
                outcome = await action
            except Exception as error:
                tui.notify(f"Command failed: {error}", severity="error")
                return
            message, severity = outcome if isinstance(outcome, tuple) else (outcome, None)
            tui.notify(message, severity=severity or "information")

        def guarded(
            action: Callable[[str, Context], Awaitable[_Outcome]],
        ) -> Callable[[str, Context], Awaitable[None]]:
            async def run(args: str, ctx: Context) -> None:
                await report(action(args, ctx))

            return run

        def current_model() -> str:
            return model_label(client.view.value, client.session.model)

        async def compact(args: str, ctx: Context) -> _Outcome:
            try:
                await client.compact(args.strip() or None, ctx)
            except Exception as error:  # the worker's own codes: nothing was written
                code = getattr(error, "code", None)
                if code == "nothing_to_compact":
                    view = client.view.value
                    config = view.get("config") if isinstance(view, dict) else None
                    keep = config.get("keepRecent") if isinstance(config, dict) else None
                    kept = f"{keep:,} tokens" if type(keep) is int else "tokens"
                    return (
                        f"Nothing to compact yet: compaction summarises what comes before the "
                        f"newest {kept}, which it keeps word for word, and the whole "
                        "conversation still fits in them"
                    )
                if code == "compaction_running":
                    return ("A compaction is already running", "warning")
                raise
            return "Compacting the context…"

        async def new(args: str, ctx: Context) -> _Outcome:
            del args
            await client.reset(ctx)
            return "Started a fresh context"

        async def pick(title: str, choices: list[Choice], ctx: Context) -> str | None:
            modal = await tui.acquire_modal(ctx)
            try:
                return await modal.choose(title, choices)
            finally:
                modal.close()

        async def model(args: str, ctx: Context) -> _Outcome:
            known = client.models
            ref = args.strip()
            if not ref:
                if not known:
                    return "The worker has not listed its models yet"
                current = current_model()
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
                raise CommandError(f"model {ref!r} is not provider/id")
            await client.config_set({"model": {"provider": provider, "modelId": model_id}}, ctx)
            return f"Model: {ref}"

        def reasons(ref: str) -> bool | None:
            """Whether the worker says model ``ref`` can reason (``None``: it does not say)."""
            for known in client.models:
                flag: Any = known.get("reasoning")
                if _model_ref(known) == ref and type(flag) is bool:
                    return flag
            return None

        async def set_level(level: str, ctx: Context) -> _Outcome:
            await client.config_set({"thinkingLevel": level}, ctx)
            ref = current_model()
            if level != "off" and reasons(ref) is False:
                return (
                    f"Thinking: {level} — {ref} does not support reasoning; the level applies "
                    "once you switch to a model that does",
                    "warning",
                )
            return f"Thinking: {level}"

        async def thinking(args: str, ctx: Context) -> _Outcome:
            level = args.strip()
            if not level:
                current = thinking_level(client.view.value)
                choices = [
                    Choice(name, f"{name}{'  (current)' if name == current else ''}")
                    for name in THINKING_LEVELS
                ]
                picked = await pick("Thinking level", choices, ctx)
                if picked is None:
                    return "Thinking level unchanged"
                level = picked
            return await set_level(_check_level(level), ctx)

        async def cycle_thinking(ctx: Context) -> None:
            await report(set_level(next_thinking_level(thinking_level(client.view.value)), ctx))

        async def model_picker(ctx: Context) -> None:
            await report(model("", ctx))

        async def cycle_model(ctx: Context) -> _Outcome:
            scope = model_scope([_model_ref(m) for m in client.models], patterns)
            following = next_in_scope(scope, current_model())
            if following is None:
                where = f" matching {', '.join(patterns)}" if patterns else ""
                return (f"No other model{where} to switch to", "warning")
            return await model(following, ctx)

        async def next_model(ctx: Context) -> None:
            await report(cycle_model(ctx))

        async def fork(args: str, ctx: Context) -> _Outcome:
            del args
            conversation_id = await client.fork(ctx)
            client.follow(conversation_id)  # Ctrl+B returns to the branch forked from
            shown = conversation_id
            try:  # the number users see (1, 2, 3 in creation order), as /tree shows it
                outline = await tree_service.outline(ctx)
                shown = branch_number(outline, conversation_id) or conversation_id
            except Exception:
                pass
            return f"Forked: now on branch {shown} (Ctrl+B goes back)"

        async def sandbox(args: str, ctx: Context) -> _Outcome:
            del args, ctx
            return sandbox_text(client.status)

        def activate() -> None:
            env.own(
                tui.register_command(
                    "sandbox", "Show the OS sandbox of commands: policy, availability",
                    guarded(sandbox),
                )
            )  # fmt: skip
            env.own(
                tui.register_command(
                    "compact", "Summarise the context to free space", guarded(compact)
                )
            )
            env.own(tui.register_command("new", "Start a fresh context", guarded(new)))
            env.own(tui.register_command("model", "Switch the model", guarded(model)))
            env.own(
                tui.register_command(
                    "thinking",
                    f"Set the thinking level ({', '.join(THINKING_LEVELS)})",
                    guarded(thinking),
                )
            )
            env.own(
                tui.register_command(
                    "fork", "Fork the conversation here and continue in the fork", guarded(fork)
                )
            )
            env.own(tui.register_key("ctrl+l", "Switch the model", model_picker))
            env.own(tui.register_key("ctrl+y", "Next thinking level", cycle_thinking))
            env.own(tui.register_key("ctrl+p", "Next model (--models scope)", next_model))

        env.on_activate(activate)

    return setup
