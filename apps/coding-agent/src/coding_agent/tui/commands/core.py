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
  commands run in it, and its policy (:func:`sandbox_text`, from the worker's status) on a
  scrollable screen (a toast would be cut at the bottom of the terminal);
* Ctrl+P — switch to the next model of the *scope*: the known models matching the
  ``--models`` patterns (shell-style, on ``provider/id``: ``anthropic/*,openai/gpt-5*``), in the
  order the patterns name them; without ``--models``, every model the worker knows.

Each switch of model or level lands in the transcript as an entry the worker writes
(:mod:`coding_agent.worker.settings_log`), so the commands only change config.

The commands are the table :data:`COMMANDS` of top-level handlers (``handler(target, args,
ctx)``, see :mod:`chord.textual_commands`). A command that fails (the worker is being
restarted, say, or a level that does not exist) says so in an error toast and changes nothing;
a picker left with Escape changes nothing either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, cast

from chord import Context, Facet, FacetEnvironment, define_facet
from chord.textual import (
    Arg,
    Arguments,
    Choice,
    Command,
    CommandError,
    CommandOutcome,
    Notice,
    Tui,
    TuiService,
    register_commands,
)
from coding_agent.contracts import SessionTreeService
from coding_agent.session_files.tree import branch_number
from coding_agent.settings.changes import THINKING_LEVELS, next_thinking_level
from coding_agent.settings.model_config import claude_code_model
from coding_agent.tui.conversation_client import RemoteConversationClient
from coding_agent.tui.document import UsageTotals, model_label, thinking_level
from pico3 import AssistantEntry, UsageEntry, View, view_from_json

__all__ = [
    "COMMANDS",
    "COMMANDS_FACET_ID",
    "ConversationTarget",
    "commands_facet",
    "compact",
    "fork",
    "model",
    "model_scope",
    "new",
    "next_in_scope",
    "sandbox",
    "sandbox_text",
    "thinking",
]

COMMANDS_FACET_ID = "@coding-agent/commands"


@dataclass(frozen=True, slots=True)
class ConversationTarget:
    """What the conversation commands act on: the client of the followed conversation, the
    TUI (for pickers) and the ``--models`` patterns scoping Ctrl+P."""

    client: RemoteConversationClient
    tui: TuiService
    patterns: tuple[str, ...] = ()
    tree: Any = None
    """The worker's session tree service (``/fork`` names the new branch by its number)."""
    show_text: Callable[[str, str], None] | None = None
    """Shows ``(title, text)`` on a scrollable screen (``/sandbox``); ``None``: as a toast."""


def _needs(why: str) -> str:
    """The short form of an unconfigured provider's reason for a picker row: what it needs
    (``"needs an API key: set ANTHROPIC_API_KEY or …"`` → ``"set ANTHROPIC_API_KEY"``)."""
    _, _, rest = why.partition(": ")
    short = rest.split(" or ", 1)[0].split(" in ", 1)[0] if rest else why
    return short.strip() or why


def _model_ref(model: Mapping[str, object]) -> str:
    return f"{model.get('provider')}/{model.get('id')}"


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


def sandbox_text(status: dict[str, Any] | None) -> Notice | str:
    """What ``/sandbox`` says: whether the sandbox can start, when commands run in it, and the
    policy (from the worker's status document; see :mod:`coding_agent.worker.status`)."""
    sandbox = status.get("sandbox") if status is not None else None
    if not isinstance(sandbox, dict):
        return Notice("The worker has not said anything about the sandbox yet", "warning")
    said = cast(dict[str, Any], sandbox)
    if said.get("available") is not True:
        return Notice(
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


def _current_model(target: ConversationTarget) -> str:
    return model_label(target.client.view.value, target.client.session.model)


async def _pick(
    target: ConversationTarget, title: str, choices: list[Choice], ctx: Context
) -> str | None:
    modal = await target.tui.acquire_modal(ctx)
    try:
        return await modal.choose(title, choices)
    finally:
        modal.close()


async def compact(target: ConversationTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/compact [instructions]``: start a manual compaction."""
    try:
        await target.client.compact(args["instructions"] or None, ctx)
    except Exception as error:  # the worker's own codes: nothing was written
        code = getattr(error, "code", None)
        if code == "nothing_to_compact":
            view = target.client.view.value
            config = view.get("config") if isinstance(view, dict) else None
            keep = config.get("keepRecent") if isinstance(config, dict) else None
            kept = f"{keep:,} tokens" if type(keep) is int else "tokens"
            return (
                f"Nothing to compact yet: compaction summarises what comes before the newest "
                f"{kept}, which it keeps word for word, and the whole conversation still fits "
                "in them"
            )
        if code == "compaction_running":
            return Notice("A compaction is already running", "warning")
        raise
    return "Compacting the context…"


async def new(target: ConversationTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/new``: a fresh context in the same conversation."""
    await target.client.reset(ctx)
    return "Started a fresh context"


async def model(target: ConversationTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/model [provider/id]``: switch the model; without one, pick from the known models."""
    ref = args["model"]
    if not ref:
        known = target.client.models
        if not known:
            return "The worker has not listed its models yet"
        current = _current_model(target)
        choices = [
            Choice(
                _model_ref(m),
                f"{_model_ref(m)}{'  (current)' if _model_ref(m) == current else ''}",
            )
            for m in known
        ]
        choices += [
            Choice(f"{name}/", f"{name}/…  (not available: {_needs(why)})")
            for name, why in target.client.unconfigured.items()
        ]
        picked = await _pick(target, "Switch the model", choices, ctx)
        if picked is None:
            return "Model unchanged"
        ref = picked
    provider, slash, model_id = ref.partition("/")
    missing = target.client.unconfigured.get(provider)
    if missing is not None:
        raise CommandError(
            f"Cannot switch to {ref}: {missing}. Keys are read when the session's worker "
            "starts: set it, quit, and start the agent again"
        )
    if not slash or not provider or not model_id:
        meant = claude_code_model(ref)
        hint = f"; for Claude Code's {ref!r}: /model {meant}" if meant else ""
        raise CommandError(f"model {ref!r} is not provider/id{hint}")
    _check_known(target, ref, provider)
    await target.client.config_set({"model": {"provider": provider, "modelId": model_id}}, ctx)
    return f"Model: {ref}"


def _check_known(target: ConversationTarget, ref: str, provider: str) -> None:
    """Refuse a model the worker does not list, unless its provider takes any id (an
    OpenAI-compatible server); the error lists what is available."""
    known = [_model_ref(m) for m in target.client.models]
    if not known or ref in known or provider in target.client.any_model:
        return
    same = [name for name in known if name.startswith(provider + "/")] or known
    listing = ", ".join(same[:12]) + (f" and {len(same) - 12} more" if len(same) > 12 else "")
    raise CommandError(
        f"Unknown model {ref}: available are {listing}. /model without a name picks from "
        "all of them; a model the catalog does not list yet needs a [[models]] entry in "
        "config.toml (a faux one can come from the --faux-script's models)"
    )


def _reasons(target: ConversationTarget, ref: str) -> bool | None:
    """Whether the worker says model ``ref`` can reason (``None``: it does not say)."""
    for known in target.client.models:
        flag: Any = known.get("reasoning")
        if _model_ref(known) == ref and type(flag) is bool:
            return flag
    return None


async def thinking(target: ConversationTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/thinking [level]``: set the thinking level; without one, pick it."""
    level = args["level"]
    if not level:
        current = thinking_level(target.client.view.value)
        choices = [
            Choice(name, f"{name}{'  (current)' if name == current else ''}")
            for name in THINKING_LEVELS
        ]
        picked = await _pick(target, "Thinking level", choices, ctx)
        if picked is None:
            return "Thinking level unchanged"
        level = picked
    await target.client.config_set({"thinkingLevel": level}, ctx)
    ref = _current_model(target)
    if level != "off" and _reasons(target, ref) is False:
        return Notice(
            f"Thinking: {level} — {ref} does not support reasoning; the level applies "
            "once you switch to a model that does",
            "warning",
        )
    return f"Thinking: {level}"


async def fork(target: ConversationTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/fork``: fork the conversation at its latest entry and follow the fork."""
    conversation_id = await target.client.fork(ctx)
    target.client.follow(conversation_id)  # Ctrl+B returns to the branch forked from
    shown = conversation_id
    if target.tree is not None:
        try:  # the number users see (1, 2, 3 in creation order), as /tree shows it
            outline = await target.tree.outline(ctx)
            shown = branch_number(outline, conversation_id) or conversation_id
        except Exception:
            pass
    return f"Forked: now on branch {shown} (Ctrl+B goes back)"


def cost_text(view: View | None) -> Notice | str:
    """What ``/cost`` says: this branch's tokens and cost so far, folded from the view's usage
    (every model call, retries included), as the footer counts them; the context is the last
    request's size as the provider reported it (the footer's ``ctx %``), not ``/context``'s
    estimate of the window."""
    if view is None:
        return Notice("The session is not available yet", "warning")
    totals = UsageTotals()
    totals.fold(view.entries)
    calls = sum(
        1
        for entry in view.entries
        if isinstance(entry, (AssistantEntry, UsageEntry)) and entry.id <= totals.last_id
    )
    if not calls:
        return "No model call yet: nothing has cost anything."
    return (
        f"This branch: ${totals.cost:.4f} over {calls} model call{'s' if calls != 1 else ''}\n"
        f"tokens: {totals.input:,} input, {totals.output:,} output, "
        f"{totals.cache_read:,} cache read, {totals.cache_write:,} cache write\n"
        f"context: {totals.context_tokens:,} tokens in the last request, as the provider "
        "reported them (the footer's ctx %; /context estimates the whole window)"
    )


def cost(target: ConversationTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/cost``: what :func:`cost_text` says of the followed conversation's view."""
    value = target.client.view.value
    return cost_text(view_from_json(value) if isinstance(value, dict) else None)


def sandbox(target: ConversationTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/sandbox``: what :func:`sandbox_text` says of the worker's status; the policy (some
    forty lines) on a scrollable screen, a short warning as a toast."""
    said = sandbox_text(target.client.status)
    if isinstance(said, str) and target.show_text is not None:
        target.show_text("OS sandbox", said)
        return None
    return said


SANDBOX = Command("sandbox", "Show the OS sandbox of commands: policy, availability", sandbox)
COST = Command("cost", "Show this branch's tokens and cost so far", cost)
COMPACT = Command(
    "compact",
    "Summarise the context to free space",
    compact,
    args=(Arg("instructions", "what the summary should keep", optional=True, rest=True),),
)
NEW = Command("new", "Start a fresh context", new)
MODEL = Command(
    "model", "Switch the model", model, args=(Arg("model", optional=True, hint="[PROVIDER/ID]"),)
)
THINKING = Command(
    "thinking",
    f"Set the thinking level ({', '.join(THINKING_LEVELS)})",
    thinking,
    args=(Arg("level", optional=True, choices=tuple(THINKING_LEVELS), hint="[LEVEL]"),),
)
FORK = Command("fork", "Fork the conversation here and continue in the fork", fork)

COMMANDS: tuple[Command[ConversationTarget], ...] = (
    SANDBOX, COST, COMPACT, NEW, MODEL, THINKING, FORK
)  # fmt: skip
"""The conversation commands (module docstring), registered by :func:`commands_facet`."""


def commands_facet(
    client: RemoteConversationClient,
    *,
    models: Sequence[str] = (),
    show_text: Callable[[str, str], None] | None = None,
) -> Facet:
    """The facet registering :data:`COMMANDS` for ``client``'s conversation, and their keys.

    ``models`` are the ``--models`` patterns scoping Ctrl+P (see :func:`model_scope`). The keys
    run the commands: Ctrl+L is ``/model``, Ctrl+Y ``/thinking NEXT``, Ctrl+P ``/model NEXT``.
    ``show_text`` shows a long text on a screen of its own (``/sandbox``).
    """

    @define_facet(COMMANDS_FACET_ID)
    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)
        tree = env.use(SessionTreeService)
        target = ConversationTarget(client, tui, tuple(models), tree, show_text)

        async def model_picker(ctx: Context) -> None:
            await MODEL.bind(target, tui)("", ctx)

        async def cycle_thinking(ctx: Context) -> None:
            level = next_thinking_level(thinking_level(client.view.value))
            await THINKING.bind(target, tui)(level, ctx)

        async def next_model(ctx: Context) -> None:
            scope = model_scope([_model_ref(m) for m in client.models], target.patterns)
            following = next_in_scope(scope, _current_model(target))
            if following is None:
                where = f" matching {', '.join(target.patterns)}" if target.patterns else ""
                tui.notify(f"No other model{where} to switch to", severity="warning")
                return
            await MODEL.bind(target, tui)(following, ctx)

        def activate() -> None:
            env.own(register_commands(tui, COMMANDS, target))
            env.own(tui.register_key("ctrl+l", "Switch the model", model_picker))
            env.own(tui.register_key("ctrl+y", "Next thinking level", cycle_thinking))
            env.own(tui.register_key("ctrl+p", "Next model (--models scope)", next_model))

        env.on_activate(activate)

    return setup
