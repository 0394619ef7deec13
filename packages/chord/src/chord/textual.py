"""The TUI plumbing contract and its Textual implementation (extra ``chord-runtime[textual]``).

Presentation facets never touch the Textual ``App`` directly. They ``use`` the local :data:`Tui`
service, whose contract is :class:`TuiService`:

* :meth:`~TuiService.acquire_modal` — wait for *the* modal slot (one dialog on screen at a time,
  first come, first served), then ask a yes/no question or offer choices on the :class:`Modal`
  (answered with deliberate keys only: see :class:`DialogScreen`);
* :meth:`~TuiService.notify` — a transient toast;
* :func:`register_commands` — a table of ``/slash`` commands (:class:`Command` values: name,
  help, arguments, a top-level handler; see :mod:`chord.textual_commands`), unregistered by the
  returned function (own it with ``env.own``); :meth:`~TuiService.register_command` is the
  low-level path underneath, for a handler that takes the raw argument text;
* :meth:`~TuiService.mount_panel` — a widget in the side panel area, removed by the returned
  function;
* :meth:`~TuiService.register_key` — a global key (``"shift+tab"``) that runs a handler,
  unregistered by the returned function.

:func:`show_dialogs` is the presentation half of a keyed dialog service (the asking half is
:func:`chord.provide_dialogs`): one dialog on screen per open instance, answered through the
instance's answer method.

What a dialog or a toast shows is made inert (:func:`chord.inert`; :func:`inert_text` for a Rich
``Text``, keeping its colours): its title, body, choices and hint, and a toast's message, which
is never read as Textual markup. Text from the model, a tool, a file or a server cannot hide
part of itself, retitle the window or reorder what it shows.

Keys need the app's cooperation, like ``/commands``: Textual hands a key to the focused widget
(the prompt editor) unless an *App-level* check claims it first, so the app routes every key it
receives through :meth:`TextualTui.handle_key` before Textual does::

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and self.tui.handle_key(event):
            return
        await super().on_event(event)

:class:`TextualTui` implements the contract over a running Textual app; :func:`tui_facet` wraps it
as the facet that provides :data:`Tui`; :func:`run_app_with_facets` runs a facet host *beside* the
app (not inside it: Textual cancels its workers at exit without awaiting them, and the host must
get to dispose cleanly) and returns when the app exits.

Why one module: it is the one seam between facets and a Textual app: the contract, the
:class:`TextualTui` that implements it and :func:`run_app_with_facets` that runs a host beside
the app share the adapter's readiness (panels, toasts and modals held until the app mounts; a
host started beside the app waits for its first frame), which must not leak out of this module.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import anyio
from rich.text import Text
from textual import events
from textual.app import App
from textual.screen import ModalScreen
from textual.widget import Widget

from chord.context import BACKGROUND, Context, ContextCancelled, cancel_scope
from chord.neutralize import inert, inert_text
from chord.remote import RemoteServiceSource
from chord.services import Service, define_service
from chord.textual_commands import (
    Arg,
    ArgumentError,
    Arguments,
    BoundCommand,
    Command,
    CommandError,
    CommandOutcome,
    Notice,
    command_row_fields,
    register_commands,
    report_command_error,
)
from chord.textual_dialogs import (
    ARMING_SECONDS,
    Choice,
    ChoiceScreen,
    ConfirmScreen,
    DialogScreen,
)

if TYPE_CHECKING:  # start-up time: the facet host (chord.facets) is imported where one starts,
    # which for a host beside the app is after its first frame (run_app_with_facets)
    from chord.facets import Facet, FacetEnvironment, FacetHost

__all__ = [
    "ARMING_SECONDS",
    "CLOSED_NOTICE",
    "Arg",
    "ArgumentError",
    "Arguments",
    "BoundCommand",
    "Choice",
    "ChoiceScreen",
    "Command",
    "CommandError",
    "CommandHandler",
    "CommandOutcome",
    "ConfirmScreen",
    "DialogScreen",
    "KeyBinding",
    "KeyHandler",
    "Modal",
    "Notice",
    "Severity",
    "SlashCommand",
    "TextualTui",
    "Tui",
    "TuiService",
    "app_turn",
    "inert_text",
    "register_commands",
    "report_command_error",
    "run_app_with_facets",
    "show_dialogs",
    "tui_facet",
]

Severity = Literal["information", "warning", "error"]
CommandHandler = Callable[[str, Context], Awaitable[bool | None] | bool | None]
"""A ``/command``'s low-level handler: ``handler(argument_text, ctx)``. It returns ``False``
when the command did not do its job and it said why itself (a :class:`BoundCommand` does so for
the error it reported); anything else (``None``) is success. An exception it raises is a
failure :meth:`TextualTui.run_command` reports."""
KeyHandler = Callable[[Context], Awaitable[None] | None]
ResultT = TypeVar("ResultT")

CLOSED_NOTICE = "Already answered in another window (or no longer needed): {title}"
"""The toast shown when a dialog the user had on screen is taken away unanswered: its holder's
context was cancelled (another window answered it, the call was aborted) or it closed the
slot. ``{title}`` is the dialog's title."""


class Modal(Protocol):
    """The modal slot, held until :meth:`close` (or the acquiring context is cancelled)."""

    async def confirm(
        self, title: str, body: str = "", *, yes: str = "Allow", no: str = "Deny"
    ) -> bool:
        """Ask a yes/no question (←→ or 1/2, then Enter); ``False`` also on Escape."""
        ...

    async def choose(
        self,
        title: str,
        choices: Sequence[Choice | str],
        *,
        body: str | Text = "",
        allow_text: bool = False,
        hint: str = "",
    ) -> str | None:
        """Offer ``choices`` (and a free-text field when ``allow_text``); ``None`` on Escape.

        The user moves with ↑↓ or an option's number and answers with Enter, never with a
        single letter; the dialog takes no answer for :data:`ARMING_SECONDS` after it appears
        (see :class:`DialogScreen`). ``body`` may be a Rich :class:`~rich.text.Text` (a
        coloured diff); a body taller than the dialog scrolls and says how much more there is.
        ``hint`` ends the dim key line under the options: say what Escape means here (the
        dialog names the other keys itself)."""
        ...

    def close(self) -> None:
        """Give the slot back (idempotent); a dialog still on screen is dismissed."""
        ...


@dataclass(frozen=True, slots=True)
class SlashCommand:
    """A row of the command registry (:attr:`TextualTui.commands`): what the palette
    (``description``: the arguments, then the help; or ``usage`` and ``help`` apart, to show
    the arguments after the name), ``/help`` (``usage`` and ``help``) and completion read, and
    the ``(text, ctx)`` handler :meth:`TextualTui.run_command` calls."""

    name: str
    description: str
    handler: CommandHandler
    usage: str = ""
    help: str = ""


@dataclass(frozen=True, slots=True)
class KeyBinding:
    """A registered global key: the Textual key name, what it does (for help), the handler."""

    key: str
    description: str
    handler: KeyHandler


class TuiService(Protocol):
    """What presentation facets may do to the terminal UI."""

    async def acquire_modal(self, ctx: Context) -> Modal: ...

    def notify(self, message: str, *, severity: Severity = "information") -> None: ...

    def register_command(
        self, name: str, description: str, handler: CommandHandler
    ) -> Callable[[], None]: ...

    def mount_panel(self, panel_id: str, factory: Callable[[], Widget]) -> Callable[[], None]: ...

    def register_key(
        self, key: str, description: str, handler: KeyHandler
    ) -> Callable[[], None]: ...


Tui = define_service("chord.tui", TuiService, local=True)
"""The local service presentation facets ``use`` to reach the terminal UI."""


def _inert_choice(choice: Choice) -> Choice:
    """``choice`` with what it shows made inert (its value is returned as is)."""
    label = inert(choice.label or choice.value)
    return replace(choice, label=label, description=inert(choice.description))


def _in_app(app: App[Any]) -> AbstractContextManager[None]:
    """Textual's context variables (the active app) for work started by facet tasks.

    Facets run in the facet host's tasks, beside the app, where Textual's ``active_app`` is not
    set; a screen pushed or a widget mounted from there would compose without an app.
    """
    return app._context()  # pyright: ignore[reportPrivateUsage]


class _ModalSlot:
    """The concrete :class:`Modal`: shows one dialog at a time for its holder.

    The dialog is answered once (:class:`DialogScreen`): the user's answer, or the holder
    giving it up (its context cancelled, e.g. because another window answered, or ``close()``),
    whichever comes first; the other finds it answered. A dialog taken away while the user had
    it on screen unanswered leaves a :data:`CLOSED_NOTICE` toast.
    """

    def __init__(self, tui: TextualTui, ctx: Context) -> None:
        self._tui = tui
        self._ctx = ctx
        self._closed = False
        self._screen: DialogScreen[Any] | None = None
        self._title = ""

    async def confirm(
        self, title: str, body: str = "", *, yes: str = "Allow", no: str = "Deny"
    ) -> bool:
        title, body, yes, no = inert(title), inert(body), inert(yes), inert(no)
        return bool(await self._show(ConfirmScreen(title, body, yes, no), title))

    async def choose(
        self,
        title: str,
        choices: Sequence[Choice | str],
        *,
        body: str | Text = "",
        allow_text: bool = False,
        hint: str = "",
    ) -> str | None:
        if not choices and not allow_text:
            raise ValueError("choose() needs choices, allow_text=True, or both")
        normalised = [_inert_choice(Choice(c) if isinstance(c, str) else c) for c in choices]
        title = inert(title)
        screen = ChoiceScreen(title, normalised, inert_text(body), allow_text, inert(hint))
        return await self._show(screen, title)

    async def _show(self, screen: DialogScreen[ResultT], title: str) -> ResultT | None:
        if self._closed:
            raise RuntimeError("this modal was closed; acquire a new one")
        if self._screen is not None:
            raise RuntimeError("this modal is already showing a dialog")
        done = anyio.Event()
        result: list[ResultT | None] = []

        def finished(value: ResultT | None) -> None:
            result.append(value)
            done.set()

        self._screen, self._title = screen, title
        try:
            with _in_app(self._tui.app):
                self._tui.app.push_screen(screen, finished)
            with cancel_scope(self._ctx):
                await done.wait()
            return result[0]
        finally:
            if not done.is_set():
                self._take_away(screen)
            self._screen = None

    def _take_away(self, screen: DialogScreen[Any]) -> None:
        """Close ``screen`` unanswered (idempotent; a no-op once the user answered it)."""
        with _in_app(self._tui.app):
            screen.close_from_outside(CLOSED_NOTICE.format(title=self._title))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        screen = self._screen
        if screen is not None:
            self._take_away(screen)
        self._tui._release_modal()


class TextualTui:
    """:class:`TuiService` over a Textual app.

    The app decides where panels go (:attr:`panel_container`, a selector) and routes submitted
    ``/commands`` through :meth:`run_command`. Modals are handed out in request order.
    """

    def __init__(
        self, app: App[Any], *, panel_container: str = "#panels", ready: bool = True
    ) -> None:
        self.app = app
        self.panel_container = panel_container
        self.commands: dict[str, SlashCommand] = {}
        self.keys: dict[str, KeyBinding] = {}
        self._modal_lock = anyio.Lock()
        self._panels: dict[str, Widget] = {}
        self._leaving: dict[str, Awaitable[None]] = {}  # panels being removed, by panel id
        self._ready = anyio.Event()
        self._early: list[Callable[[], None]] = []
        if ready:
            self._ready.set()

    @property
    def ready(self) -> bool:
        """True once the app is mounted and panels, toasts and modals go straight to it."""
        return self._ready.is_set()

    def mark_ready(self) -> None:
        """Call from the app's ``on_mount``: flushes panels and toasts requested earlier and
        lets waiting modals through. Idempotent."""
        if self._ready.is_set():
            return
        self._ready.set()
        early, self._early = self._early, []
        for action in early:
            action()

    async def acquire_modal(self, ctx: Context) -> Modal:
        """Wait (in FIFO order) for the modal slot; cancelled with ``ctx``."""
        with cancel_scope(ctx):
            await self._ready.wait()
            await self._modal_lock.acquire()
        return _ModalSlot(self, ctx)

    def _release_modal(self) -> None:
        self._modal_lock.release()

    def notify(self, message: str, *, severity: Severity = "information") -> None:
        """A toast of ``message`` made inert, shown as plain text (not markup)."""
        message = inert(message)
        if not self.ready:
            self._early.append(lambda: self.app.notify(message, severity=severity, markup=False))
            return
        self.app.notify(message, severity=severity, markup=False)

    def register_command(
        self, name: str, description: str, handler: CommandHandler
    ) -> Callable[[], None]:
        """Register ``/name`` (``:`` may group names: ``/skill:review``). A second live
        registration of one name is refused."""
        name = name.removeprefix("/")
        if not name or not name.replace("-", "").replace("_", "").replace(":", "").isalnum():
            raise ValueError(f"invalid command name {name!r}: use letters, digits, -, _ and :")
        if name in self.commands:
            raise ValueError(f"command /{name} is already registered")
        usage, help_line = command_row_fields(handler, name, description)
        command = SlashCommand(name, description, handler, usage, help_line)
        self.commands[name] = command

        def unregister() -> None:
            if self.commands.get(name) is command:
                del self.commands[name]

        return unregister

    async def run_command(self, line: str, ctx: Context) -> bool:
        """Run the ``/name args`` typed in ``line``; ``True`` when the command did its job.

        ``False`` when it did not, and the user should get ``line`` back to fix it rather than
        type it again: ``line`` is no ``/command``, ``name`` is not registered (a warning toast
        says so), the command was refused or failed (its error toast, from
        :func:`report_command_error`; a :class:`Command`'s handler reports its own the same
        way and returns ``False``), or ``ctx`` was cancelled. Nothing is raised."""
        if not line.startswith("/"):
            return False
        name, _, args = line[1:].partition(" ")
        command = self.commands.get(name)
        if command is None:
            self.notify(f"Unknown command /{name}", severity="warning")
            return False
        try:
            result = command.handler(args.strip(), ctx)
            if inspect.isawaitable(result):
                result = await result
        except ContextCancelled:
            return False
        except Exception as exc:
            report_command_error(self, name, exc)
            return False
        return result is not False

    def mount_panel(self, panel_id: str, factory: Callable[[], Widget]) -> Callable[[], None]:
        """Mount ``factory()`` in the panel container; the returned function removes it."""
        if panel_id in self._panels:
            raise ValueError(f"panel {panel_id!r} is already mounted")
        widget = factory()
        self._panels[panel_id] = widget

        def mount() -> None:
            leaving = self._leaving.pop(panel_id, None)
            if leaving is not None:
                # A reloaded facet mounts its panel while the old one's removal is still under
                # way; a widget id the two share would clash. Mount once the old one is gone.
                async def after_removal() -> None:
                    await leaving
                    mount()

                self.app.call_later(after_removal)
                return
            if self._panels.get(panel_id) is widget:
                with _in_app(self.app):
                    self.app.query_one(self.panel_container).mount(widget)

        if self.ready:
            mount()
        else:
            self._early.append(mount)

        def unmount() -> None:
            if self._panels.get(panel_id) is widget:
                del self._panels[panel_id]
                if widget.is_attached:
                    self._leaving[panel_id] = widget.remove()

        return unmount

    def register_key(self, key: str, description: str, handler: KeyHandler) -> Callable[[], None]:
        """Run ``handler(ctx)`` when ``key`` is pressed; the returned function unregisters.

        ``key`` is a Textual key name (``"shift+tab"``, ``"ctrl+g"``, ``"f2"``). A second live
        registration of one key is refused, so two facets never fight over it. The handler runs
        as an app worker (an async handler does not block the UI; a new press does not wait for
        the previous one); an exception it raises becomes an error toast. Keys are handled only
        while no modal dialog is on screen (a dialog keeps its own keys) and only if the app
        routes keys through :meth:`handle_key`.
        """
        if not isinstance(key, str) or not key or key != key.strip() or " " in key:
            raise ValueError(f"invalid key {key!r}: use a Textual key name such as 'shift+tab'")
        if not callable(handler):
            raise TypeError(f"the handler of key {key!r} must be callable")
        if key in self.keys:
            raise ValueError(f"key {key!r} is already registered")
        binding = KeyBinding(key, description, handler)
        self.keys[key] = binding

        def unregister() -> None:
            if self.keys.get(key) is binding:
                del self.keys[key]

        return unregister

    def handle_key(self, event: events.Key | str) -> bool:
        """The app's key check: run the binding of ``event``'s key, if one is registered.

        Returns ``True`` when the key was claimed (the app must then not pass it on), ``False``
        when it is not registered, a modal dialog is on screen, or ``event`` was forwarded (a
        key Textual already routed once). Call it from the app's ``on_event`` (see the module
        docstring); a plain key name works too (tests).
        """
        if isinstance(event, events.Key):
            if event.is_forwarded:
                return False
            key = event.key
        else:
            key = event
        binding = self.keys.get(key)
        if binding is None or isinstance(self.app.screen, ModalScreen):
            return False
        if isinstance(event, events.Key):
            event.stop()
            event.prevent_default()
        self.app.run_worker(self._run_key(binding), group="chord-keys", exit_on_error=False)
        return True

    async def _run_key(self, binding: KeyBinding) -> None:
        try:
            result = binding.handler(BACKGROUND)
            if inspect.isawaitable(result):
                await result
        except ContextCancelled:
            pass
        except Exception as exc:
            self.notify(f"{binding.key} failed: {exc}", severity="error")


def show_dialogs(
    env: FacetEnvironment,
    service: Service[Any],
    show: Callable[[Modal, Any], Awaitable[Any]],
    *,
    answer: str = "submit",
) -> None:
    """Show every open instance of the keyed dialog ``service`` and send the user's answer.

    Call it in a presentation facet's ``setup`` (it ``use``s :data:`Tui` and ``observe``s
    ``service``; the asking side is :func:`chord.provide_dialogs`, the key
    :func:`chord.dialog_key`). For each instance — one opened later, or one already open when
    this presentation connected (it arrives with its ``request``) — a task waits for the modal
    slot (one dialog on screen at a time, first come first served), awaits
    ``show(modal, request)``, which asks the user on the :class:`Modal` and returns the answer,
    calls the instance's ``answer`` method (``submit``, or the name the service chose, e.g.
    ``decide``) with it, and gives the slot back. The dialogs are chord's
    (:class:`ChoiceScreen`, :class:`ConfirmScreen`): numbered choices, answered with Enter, and
    no answer taken for :data:`ARMING_SECONDS` after one appears, so typing never answers one.

    ``show`` turns Escape (``None`` from ``modal.choose``) into whatever answer Escape means
    for this question — a denial, a cancellation — and may ask several things in turn (a form,
    one field at a time). When the instance closes first (another window answered, the call
    was aborted), the task's context is cancelled: the wait ends and the dialog still on screen
    is taken away with a :data:`CLOSED_NOTICE` toast. An instance whose request is already gone
    when its task starts is skipped. For example::

        @define_facet("@my/tui")
        def tui_facet(env: FacetEnvironment) -> None:
            async def show(modal: Modal, request: Any) -> bool:
                return await modal.confirm(request["question"], yes="Go on", no="Stop")

            show_dialogs(env, ConfirmDialogs, show)
    """
    tui = env.use(Tui)

    async def on_dialog(dialog: Any, ctx: Context) -> None:
        request = dialog.request.value
        if request is None:  # the provider went away before the task started
            return
        modal = await tui.acquire_modal(ctx)
        try:
            response = await show(modal, request)
            await getattr(dialog, answer)(response, ctx)
        finally:
            modal.close()

    env.observe(service, on_dialog)


def tui_facet(tui: TuiService, facet_id: str = "@chord/tui") -> Facet:
    """The facet that provides :data:`Tui` backed by ``tui``."""
    from chord.facets import define_facet  # lazy: see the TYPE_CHECKING import above

    def setup(env: FacetEnvironment) -> None:
        env.provide(Tui, tui)

    return define_facet(facet_id, setup)


async def run_app_with_facets(
    app: App[Any],
    tui: TextualTui,
    facets: Sequence[Facet] | Callable[[], Sequence[Facet] | Awaitable[Sequence[Facet]]],
    *,
    service_sources: Sequence[RemoteServiceSource] = (),
    on_error: Callable[[BaseException], None] | None = None,
    on_host: Callable[[FacetHost], Awaitable[None] | None] | None = None,
    host_beside: bool = False,
    **run_options: Any,
) -> None:
    """Run ``app`` with a facet host *beside* it, providing :data:`Tui` from ``tui``.

    The host starts first (presentation facets activate; panels and toasts they request are
    held until the app calls :meth:`TextualTui.mark_ready` from ``on_mount``), ``on_host`` gets
    the running host (to start a reload coordinator, say), the app runs, and when it exits the
    host is disposed — outside Textual's worker machinery, so disposal really completes.
    ``run_options`` go to ``App.run_async`` (``headless=True``, ``auto_pilot=...`` in tests).

    ``host_beside`` starts the app at once and the host beside it, once the app's first frame
    is painted: the app paints and takes input while the host waits for its
    ``service_sources`` (a remote provider that is still starting, say), and the facets
    activate whenever the host is up. The app must cope with facets that are not active yet.
    If the host or ``on_host`` fails, the app exits and the error is raised; if the app exits
    first, a host still starting is cancelled. ``facets`` may be a function returning them,
    called as the host starts (beside the app: after the first frame, so loading them costs
    the first frame nothing), or an async function: one that makes them step by step and lets
    the app run in between (:func:`app_turn`) keeps the app taking keys while they load.
    """
    if tui.app is not app:
        raise ValueError("tui must wrap the app being run")

    async def open_host() -> FacetHost:
        # lazy: the facet host (see the TYPE_CHECKING import above) loads as it starts
        from chord.facets import create_facet_host

        return create_facet_host(
            await all_facets(), service_sources=service_sources, on_error=on_error
        )

    async def all_facets() -> list[Facet]:
        made = facets() if callable(facets) else facets
        if inspect.isawaitable(made):
            made = await made
        return [tui_facet(tui), *made]

    if not host_beside:
        async with await open_host() as host:
            await _call_on_host(on_host, host)
            await app.run_async(**run_options)
        return

    failures: list[BaseException] = []
    app_done = anyio.Event()
    starting = anyio.CancelScope()  # cancelled if the app exits before the host is up
    entered = False

    async def run_host() -> None:
        nonlocal entered
        try:
            with starting:
                await _first_frame(app, tui)
                async with await open_host() as host:
                    entered = True  # from here on the host is disposed in full, never cut
                    await _call_on_host(on_host, host)
                    await app_done.wait()
        except Exception as error:
            failures.append(error)
            app.exit()

    async with anyio.create_task_group() as group:
        group.start_soon(run_host)
        try:
            await app.run_async(**run_options)
        finally:
            app_done.set()
            if not entered:
                starting.cancel()
    if failures:
        raise failures[0]


async def app_turn(app: App[Any]) -> None:
    """Let ``app`` handle what is waiting (keys typed, say) and repaint, then return: awaited
    between the steps of a long piece of work on the app's event loop (loading facets as the
    app starts), it keeps what the user types showing at once."""
    turned = anyio.Event()
    app.call_after_refresh(turned.set)
    await turned.wait()


async def _first_frame(app: App[Any], tui: TextualTui) -> None:
    """Wait until ``app`` is mounted (it marked ``tui`` ready) and has painted once."""
    await tui._ready.wait()  # pyright: ignore[reportPrivateUsage] - the same module's
    painted = anyio.Event()
    app.call_after_refresh(painted.set)
    await painted.wait()


async def _call_on_host(
    on_host: Callable[[FacetHost], Awaitable[None] | None] | None, host: FacetHost
) -> None:
    if on_host is not None:
        result = on_host(host)
        if inspect.isawaitable(result):
            await result
