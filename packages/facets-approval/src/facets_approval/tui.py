"""The approval TUI facets: one modal per open dialog, and the permission mode on screen.

:data:`tui_facet` (``@pi/approval``) shows the dialogs. It holds no authority and no state. It
shows :data:`~.contract.ApprovalDialogs` (possibly provided by another process) with chord's
keyed dialogs (:func:`chord.textual.show_dialogs`): one task per live instance, including
instances that were already open when this presentation connected (they arrive hydrated, so
``request.value`` is there). The task waits for chord's modal slot
(:meth:`~chord.textual.TuiService.acquire_modal`, one dialog on screen at a time), offers
*Allow once*, the request's narrow standing rule at each offered scope (:func:`approval_choices`)
and *Deny* (:func:`ask_approval`), and calls ``decide``.

Closing the instance — the session recorded a decision, maybe from another presentation, or the
call was aborted — cancels the observer's ``ctx``; that unwinds the wait for the slot or for the
user, and ``modal.close()`` dismisses a dialog still on screen (with a notice that it was
answered in another window). The user picks with ↑↓ or an option's number and answers with
Enter (chord's dialogs take no single-letter answers and ignore keys for a moment after they
appear, so typing never answers one); Escape counts as *Deny*, as a confirm dialog's Escape does
(the dialog's key line says so: the turn goes on, the model reads that the user denied the
call). A ``write`` over an existing file says so (the request's ``overwrites``); diffs are
coloured.
Everything the dialog shows of the call is inert (:func:`chord.inert`): an ESC in a command
shows as ``\\x1b`` (a conceal code cannot hide ``; curl … | sh``), a bidi override as
``\\u202e``, and the lines are split only where the call has a newline.

:data:`mode_tui_facet` (``@pi/approval-mode``) presents :data:`~.contract.ApprovalMode`: a
one-line panel (:class:`ModeLabel`, ``#approval-mode``) always shows the session's mode and
follows the service's replicated ``state`` (a late joiner hydrates with the current mode);
**Shift+Tab** cycles ask → accept-edits → sandbox → plan → auto → ask; ``/mode NAME`` sets a mode and
``/mode`` alone offers a picker. A mode the state lists as ``disabled`` (``auto`` under Claude
Code's ``disableBypassPermissionsMode``) is skipped by Shift+Tab with a notice naming the file,
left out of the picker, and ``/mode auto`` shows the session's refusal. The facet only asks:
``set_mode`` in the session worker validates, stores and publishes, and every presentation's
label follows the publication.
It is a separate facet so that a presentation whose session has no mode service still shows
dialogs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import anyio
from rich.text import Text
from textual.message import Message
from textual.widgets import Static

from chord import Context, Delivery, FacetEnvironment, ReplicatedState, define_facet, inert
from chord.textual import (
    Arg,
    Arguments,
    Choice,
    Command,
    CommandOutcome,
    Modal,
    Tui,
    TuiService,
    register_commands,
    show_dialogs,
)

from .contract import (
    MODE_DESCRIPTIONS,
    PERMISSION_MODES,
    ApprovalDecision,
    ApprovalDialogs,
    ApprovalMode,
    PermissionMode,
    next_mode,
    offered_rules,
    standing_choice,
)

__all__ = [
    "ALLOW",
    "CYCLE_KEY",
    "DENY",
    "MODE_COMMANDS",
    "MODE_PANEL_ID",
    "SANDBOXED",
    "SCOPE_LABELS",
    "STANDING",
    "ModeLabel",
    "ModeTarget",
    "approval_choices",
    "ask_approval",
    "decision_for",
    "describe_call",
    "dialog_body",
    "disabled_modes",
    "mode_choices",
    "mode_of",
    "mode_tui_facet",
    "set_mode",
    "tui_facet",
]

ALLOW = "allow"
SANDBOXED = "sandboxed"
"""The value of "Allow inside the sandbox" (offered when the request says ``sandbox``)."""
REMEMBER = "remember"
"""The value of "Allow always while this repository's git configuration stays as it is"
(offered when the request names ``repositories``: :mod:`.git_approvals`)."""
DENY = "deny"
STANDING = "rule:"
"""The value prefix of a standing choice: ``"rule:session"``, ``"rule:project"`` or
``"rule:user"``."""

SCOPE_LABELS: dict[str, str] = {
    "session": "in this session",
    "project": "in this project (.coding-agent/config.toml)",
    "user": "everywhere (your config.toml)",
}
"""How a dialog names each scope of a standing choice."""


def approval_choices(request: Any) -> list[Choice]:
    """The options the modal offers for ``request``, in order (the first is highlighted when the
    dialog opens; the dialog numbers them 1, 2, 3…): *Allow once*, *Allow inside the sandbox*
    (when the request offers ``sandbox``), *Allow always while this repository's git
    configuration stays as is* (when it names ``repositories``), one standing choice per scope the request offers (its
    narrow ``rule``, e.g. "Allow Bash(npm run test:*) in this session", or a compound command's
    ``rules``, "Allow Bash(cd:*) and Bash(npm test:*) in this session"; never a whole tool like
    bash), and *Deny*."""
    choices = [Choice(ALLOW, "Allow once")]
    if isinstance(request, dict) and request.get("sandbox") is True:
        choices.append(
            Choice(SANDBOXED, "Allow inside the sandbox (no network, writes only in the project)")
        )
    if isinstance(request, dict) and request.get("repositories"):
        choices.append(
            Choice(REMEMBER, "Allow always while this repository's git configuration stays as is")
        )
    offered = offered_rules(request)
    scopes = request.get("scopes") if isinstance(request, dict) else None
    if offered and isinstance(scopes, list):
        named = " and ".join(filter(None, (", ".join(offered[:-1]), offered[-1])))
        for scope in scopes:
            if scope in SCOPE_LABELS:
                choices.append(Choice(STANDING + scope, f"Allow {named} {SCOPE_LABELS[scope]}"))
    choices.append(Choice(DENY, "Deny"))
    return choices


DIALOG_HINT = "esc denies (the turn goes on without it)"
"""The end of the dialog's key line (chord's dialog names the keys that choose and answer)."""


def decision_for(choice: str | None, request: Any = None) -> ApprovalDecision:
    """The decision a modal answer stands for (``None``, i.e. Escape, denies); a standing
    choice carries the request's offered ``rule`` (or ``rules``) and its scope."""
    if choice == ALLOW:
        return {"decision": "allow", "by": "tui"}
    if choice == SANDBOXED:
        return {"decision": "allow", "by": "tui", "sandboxed": True}
    if choice == REMEMBER:
        return {"decision": "allow", "by": "tui", "remember": True}
    if choice is not None and choice.startswith(STANDING) and offered_rules(request):
        scope = choice.removeprefix(STANDING)
        if scope in ("session", "project", "user"):
            return standing_choice(request, scope, "tui")  # type: ignore[arg-type]
    return {"decision": "deny", "by": "tui"}


def _pretty(args: Any) -> str:
    return inert(json.dumps(args, indent=2, ensure_ascii=False, sort_keys=True))


PREVIEW_LINES = 30
"""Lines of a written file or an edit the dialog shows before it says how many it left out."""


def _clip(lines: list[str], limit: int = PREVIEW_LINES) -> list[str]:
    if len(lines) <= limit:
        return lines
    return [*lines[:limit], f"… {len(lines) - limit} more line(s)"]


def describe_call(name: str, args: Any) -> str:
    """The dialog body for a call: what the user is agreeing to, in the tool's own terms.

    The coding tools get a reading made for them (``bash``: the command line; ``write``: the
    path and the start of the content; ``edit``: the path and each replacement as ``-``/``+``
    lines). Any other tool, or arguments of an unexpected shape, show as indented JSON, so
    nothing the model sent is ever hidden. The text is inert (:func:`chord.inert`), made so
    before it is split into lines (a form feed or U+2028 is shown, not taken for a newline).
    """
    if not isinstance(args, dict):
        return _pretty(args)
    fields: dict[str, Any] = args
    path = fields.get("path")
    if name == "bash" and isinstance(fields.get("command"), str):
        extras = [f"{key}: {fields[key]}" for key in ("timeout", "background") if key in fields]
        return inert("\n".join([f"$ {fields['command']}", *extras]))
    if name == "write" and isinstance(path, str) and isinstance(fields.get("content"), str):
        content: str = fields["content"]
        lines = inert(content).splitlines()  # inert first: only a newline is left to split on
        size = len(content.encode("utf-8", "surrogatepass"))
        head = inert(f"{path}  ({len(lines)} line(s), {size:,} bytes)")
        return "\n".join([head, "", *_clip(lines)])
    edits = fields.get("edits")
    if name == "edit" and isinstance(path, str) and isinstance(edits, list) and edits:
        out = [inert(path)]
        for number, edit in enumerate(edits, 1):  # type: ignore[arg-type]
            if not isinstance(edit, dict):
                return _pretty(args)
            old, new = edit.get("oldText"), edit.get("newText")  # type: ignore[union-attr]
            if not isinstance(old, str) or not isinstance(new, str):
                return _pretty(args)
            out += ["", f"@@ replacement {number} of {len(edits)} @@"]
            diff = [f"-{line}" for line in inert(old).splitlines()]
            diff += [f"+{line}" for line in inert(new).splitlines()]
            out += _clip(diff)
        return "\n".join(out)
    return _pretty(args)


def dialog_body(request: Any) -> Text:
    """The dialog's body: why it asks (when the request says), that a ``write`` replaces an
    existing file (``overwrites``), then the call, a diff's ``-``/``+`` lines in colour."""
    out = Text()
    reason = request.get("reason")
    if isinstance(reason, str) and reason:
        out.append(inert(reason) + "\n\n", style="yellow")
    overwrites = request.get("overwrites")
    if request.get("name") == "write" and type(overwrites) is int:
        out.append(
            f"Overwrites the existing file ({overwrites:,} bytes now).\n\n", style="bold red"
        )
    for index, line in enumerate(describe_call(request["name"], request["args"]).splitlines()):
        if index:
            out.append("\n")
        if line.startswith("@@") and line.endswith("@@"):
            out.append(line, style="bold cyan")
        elif line.startswith("+"):
            out.append(line, style="green")
        elif line.startswith("-"):
            out.append(line, style="red")
        elif line.startswith("$ "):
            out.append(line, style="bold")
        else:
            out.append(line)
    return out


async def ask_approval(modal: Modal, request: Any) -> ApprovalDecision:
    """Ask the user about one approval request on ``modal``; the decision their answer stands
    for (:func:`decision_for`: Escape denies)."""
    choice = await modal.choose(
        f"Allow {request['name']}?",
        approval_choices(request),
        body=dialog_body(request),
        hint=DIALOG_HINT,
    )
    return decision_for(choice, request)


@define_facet("@pi/approval")
def tui_facet(env: FacetEnvironment) -> None:
    """Show a modal for every open approval dialog and send the user's decision."""
    show_dialogs(env, ApprovalDialogs, ask_approval, answer="decide")


# -- the permission mode ------------------------------------------------------------------------
CYCLE_KEY = "shift+tab"
"""The key that cycles the permission mode."""

MODE_PANEL_ID = "approval-mode"
"""The panel id (and widget id) of the mode label."""

_CATCH_UP = 2.0
"""Seconds a cycle waits at most for its own publication before the next press reads the
state (a second Shift+Tab must step from the mode the first one set, not the stale one)."""


def mode_of(state: Any) -> PermissionMode | None:
    """The mode in a :class:`~.contract.ModeState` value (``None``: unknown or unavailable)."""
    value = state.get("mode") if isinstance(state, dict) else None
    for mode in PERMISSION_MODES:
        if value == mode:
            return mode
    return None


def disabled_modes(state: Any) -> dict[str, str]:
    """The modes a :class:`~.contract.ModeState` value says cannot be entered, with why."""
    found = state.get("disabled") if isinstance(state, dict) else None
    if not isinstance(found, dict):
        return {}
    return {str(k): str(v) for k, v in found.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


def mode_choices(
    current: PermissionMode | None, disabled: Mapping[str, str] | None = None
) -> list[Choice]:
    """The ``/mode`` picker's options, in cycling order; the current one is marked, and a
    mode that cannot be entered (``disabled``) is left out."""
    return [
        Choice(mode, f"{'●' if mode == current else ' '} {mode} — {MODE_DESCRIPTIONS[mode]}")
        for mode in PERMISSION_MODES
        if mode not in (disabled or {})
    ]


class ModeLabel(Static):
    """One line showing the session's permission mode; follows a mode ``state``.

    The state's listener may run outside the app (a wire task), so it only posts a message;
    the label changes in the app's own message loop. ``permission_mode`` is ``None`` while the mode is
    unknown (the worker is unavailable). The CSS class ``-<mode>`` colours risky modes.
    """

    DEFAULT_CSS = """
    ModeLabel { height: 1; width: 100%; padding: 0 1; color: $text-muted; }
    ModeLabel.-accept-edits { color: $success; }
    ModeLabel.-sandbox { color: $success; }
    ModeLabel.-plan { color: $warning; }
    ModeLabel.-auto { color: $error; }
    """

    class Changed(Message):
        """The followed state published a mode (or became unavailable: ``None``)."""

        def __init__(self, mode: PermissionMode | None) -> None:
            super().__init__()
            self.permission_mode: PermissionMode | None = mode

    _CLASSES: ClassVar[tuple[str, ...]] = tuple(f"-{mode}" for mode in PERMISSION_MODES)

    def __init__(self, state: ReplicatedState) -> None:
        super().__init__(_label_text(None), id=MODE_PANEL_ID, markup=False)
        self.permission_mode: PermissionMode | None = None
        self._state = state
        self._unsubscribe: Any = None

    def on_mount(self) -> None:
        self._unsubscribe = self._state.subscribe(self._on_state)

    def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _on_state(self, value: Any, ctx: Context, delivery: Delivery) -> None:
        del ctx, delivery
        self.post_message(ModeLabel.Changed(mode_of(value)))

    def on_mode_label_changed(self, message: ModeLabel.Changed) -> None:
        message.stop()
        self.permission_mode = message.permission_mode
        self.remove_class(*self._CLASSES)
        if message.permission_mode is not None:
            self.add_class(f"-{message.permission_mode}")
        self.update(_label_text(message.permission_mode))


def _label_text(mode: PermissionMode | None) -> str:
    return f"mode: {mode or '?'}  ({CYCLE_KEY} to cycle)"


@dataclass(frozen=True, slots=True)
class ModeTarget:
    """What ``/mode`` (and Shift+Tab) act on: the TUI, the session's
    :data:`~.contract.ApprovalMode` service, and the lock that makes presses and commands
    queue up (each steps from the mode the previous one set)."""

    tui: TuiService
    modes: Any  # ApprovalMode: a remote service handle
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def set_and_follow(self, mode: PermissionMode, ctx: Context) -> None:
        """``set_mode``, then wait (briefly) until the state shows ``mode``."""
        changed = anyio.Event()

        def listener(value: Any, _ctx: Context, _delivery: Delivery) -> None:
            changed.set()

        unsubscribe = self.modes.state.subscribe(listener)
        try:
            await self.modes.set_mode(mode, ctx)
            with anyio.move_on_after(_CATCH_UP):
                while mode_of(self.modes.state.value) != mode:
                    await changed.wait()
                    changed = anyio.Event()
        finally:
            unsubscribe()


async def set_mode(target: ModeTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/mode MODE`` sets the permission mode; ``/mode`` alone offers them in a picker."""
    chosen = cast(PermissionMode, args["mode"])
    if chosen:
        async with target.lock:
            await target.set_and_follow(chosen, ctx)
        return f"Permission mode: {chosen}"
    current = mode_of(target.modes.state.value)
    disabled = disabled_modes(target.modes.state.value)
    modal = await target.tui.acquire_modal(ctx)
    try:
        choice = await modal.choose(
            f"Permission mode (now: {current or '?'})", mode_choices(current, disabled)
        )
    finally:
        modal.close()
    if choice is not None:
        async with target.lock:
            await target.set_and_follow(cast(PermissionMode, choice), ctx)
    return None


MODE_COMMANDS = (
    Command(
        "mode",
        "Show or set the permission mode",
        set_mode,
        # Not limited to ``choices``: the session validates the mode (and says which exist).
        args=(Arg("mode", optional=True, hint=f"[{'|'.join(PERMISSION_MODES)}]"),),
    ),
)


@define_facet("@pi/approval-mode")
def mode_tui_facet(env: FacetEnvironment) -> None:
    """Show the permission mode, cycle it with Shift+Tab, set it with ``/mode``."""
    tui = env.use(Tui)
    modes = env.use(ApprovalMode)
    target = ModeTarget(tui, modes)

    async def cycle(ctx: Context) -> None:
        async with target.lock:  # presses queue up: each steps from the mode the previous set
            current = mode_of(modes.state.value)
            if current is None:
                tui.notify("The permission mode is not known yet", severity="warning")
                return
            disabled = disabled_modes(modes.state.value)
            following = next_mode(current)
            if following in disabled:  # Claude Code's disableBypassPermissionsMode: auto
                tui.notify(f"Skipped {following}: {disabled[following]}", severity="warning")
            await target.set_and_follow(next_mode(current, disabled), ctx)

    def activate() -> None:
        env.own(tui.mount_panel(MODE_PANEL_ID, lambda: ModeLabel(modes.state)))
        env.own(tui.register_key(CYCLE_KEY, "Cycle the permission mode", cycle))
        env.own(register_commands(tui, MODE_COMMANDS, target))

    env.on_activate(activate)
