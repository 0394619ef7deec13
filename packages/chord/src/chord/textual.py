"""The TUI plumbing contract and its Textual implementation (extra ``chord-runtime[textual]``).

Presentation facets never touch the Textual ``App`` directly. They ``use`` the local :data:`Tui`
service, whose contract is :class:`TuiService`:

* :meth:`~TuiService.acquire_modal` — wait for *the* modal slot (one dialog on screen at a time,
  first come, first served), then ask a yes/no question or offer choices on the :class:`Modal`;
* :meth:`~TuiService.notify` — a transient toast;
* :meth:`~TuiService.register_command` — a ``/slash`` command, unregistered by the returned
  function (own it with ``env.own``);
* :meth:`~TuiService.mount_panel` — a widget in the side panel area, removed by the returned
  function;
* :meth:`~TuiService.register_key` — a global key (``"shift+tab"``) that runs a handler,
  unregistered by the returned function.

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
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, TypeVar

import anyio
from rich.text import Text
from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from chord.context import BACKGROUND, Context, ContextCancelled, cancel_scope
from chord.facets import Facet, FacetEnvironment, FacetHost, create_facet_host, define_facet
from chord.neutralize import inert, inert_text
from chord.remote import RemoteServiceSource
from chord.services import define_service

__all__ = [
    "Choice",
    "ChoiceScreen",
    "CommandHandler",
    "ConfirmScreen",
    "KeyBinding",
    "KeyHandler",
    "Modal",
    "Severity",
    "SlashCommand",
    "TextualTui",
    "Tui",
    "TuiService",
    "inert_text",
    "run_app_with_facets",
    "tui_facet",
]

Severity = Literal["information", "warning", "error"]
CommandHandler = Callable[[str, Context], Awaitable[None] | None]
KeyHandler = Callable[[Context], Awaitable[None] | None]
ResultT = TypeVar("ResultT")


class Modal(Protocol):
    """The modal slot, held until :meth:`close` (or the acquiring context is cancelled)."""

    async def confirm(
        self, title: str, body: str = "", *, yes: str = "Allow", no: str = "Deny"
    ) -> bool:
        """Ask a yes/no question; ``False`` also when the user presses Escape."""
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

        ``body`` may be a Rich :class:`~rich.text.Text` (a coloured diff); ``hint`` is a dim
        line under the options (say what the keys do, Escape included)."""
        ...

    def close(self) -> None:
        """Give the slot back (idempotent); a dialog still on screen is dismissed."""
        ...


@dataclass(frozen=True, slots=True)
class Choice:
    """One option of :meth:`Modal.choose`: the ``value`` returned and the ``label`` shown."""

    value: str
    label: str = ""
    description: str = ""
    key: str = ""
    """A shortcut key (``"y"``) that picks this choice at once; shown before the label."""


@dataclass(frozen=True, slots=True)
class SlashCommand:
    """A registered ``/name`` command."""

    name: str
    description: str
    handler: CommandHandler


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


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no dialog: ``y`` / Enter on the focused button, ``n`` or Escape to refuse."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 80%; max-width: 100; height: auto; max-height: 80%;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    ConfirmScreen .title { text-style: bold; margin-bottom: 1; }
    ConfirmScreen .body { max-height: 20; overflow-y: auto; margin-bottom: 1; }
    ConfirmScreen Horizontal { height: auto; align-horizontal: right; }
    ConfirmScreen Button { margin-left: 2; }
    """
    BINDINGS = [  # noqa: RUF012 - Textual's declared class attribute
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, title: str, body: str, yes: str, no: str) -> None:
        super().__init__()
        self._title, self._body, self._yes, self._no = title, body, yes, no

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._title, classes="title", markup=False)
            if self._body:
                yield Static(self._body, classes="body", markup=False)
            with Horizontal():
                yield Button(self._yes, id="yes", variant="success")
                yield Button(self._no, id="no", variant="error")

    def on_mount(self) -> None:
        self.query_one("#yes", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class ChoiceScreen(ModalScreen[str | None]):
    """Pick one option (arrows + Enter) or type an answer; Escape returns ``None``."""

    DEFAULT_CSS = """
    ChoiceScreen { align: center middle; }
    ChoiceScreen > Vertical {
        width: 80%; max-width: 100; height: auto; max-height: 80%;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    ChoiceScreen .title { text-style: bold; margin-bottom: 1; }
    ChoiceScreen OptionList { height: auto; max-height: 15; }
    ChoiceScreen .body { height: auto; max-height: 24; overflow-y: auto; margin-bottom: 1; }
    ChoiceScreen .hint { color: $text-muted; margin-top: 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]  # noqa: RUF012

    def __init__(
        self,
        title: str,
        choices: Sequence[Choice],
        body: str | Text,
        allow_text: bool,
        hint: str = "",
    ) -> None:
        super().__init__()
        self._title, self._choices, self._body, self._allow_text = (
            title,
            list(choices),
            body,
            allow_text,
        )
        self._hint = hint

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._title, classes="title", markup=False)
            if self._body:
                yield Static(self._body, classes="body", markup=False)
            if self._choices:
                yield OptionList(
                    *(Option(_choice_label(c), id=str(i)) for i, c in enumerate(self._choices)),
                    id="choices",
                )
            if self._allow_text:
                yield Input(placeholder="Type an answer and press Enter", id="answer")
            if self._hint:
                yield Static(self._hint, classes="hint", markup=False)

    def on_key(self, event: events.Key) -> None:
        """A choice's shortcut key picks it (not while typing an answer)."""
        if isinstance(self.focused, Input):
            return
        for choice in self._choices:
            if choice.key and event.key == choice.key:
                event.stop()
                event.prevent_default()
                self.dismiss(choice.value)
                return

    def on_mount(self) -> None:
        if self._choices:
            self.query_one("#choices", OptionList).focus()
        elif self._allow_text:
            self.query_one("#answer", Input).focus()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        index = int(event.option.id or 0)
        self.dismiss(self._choices[index].value)

    @on(Input.Submitted, "#answer")
    def _typed(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


def _choice_label(choice: Choice) -> Text:
    label = Text(choice.label or choice.value)
    if choice.key:
        label = Text.assemble((f"{choice.key} ", "bold"), label)
    return label


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
    """The concrete :class:`Modal`: shows one screen at a time for its holder."""

    def __init__(self, tui: TextualTui, ctx: Context) -> None:
        self._tui = tui
        self._ctx = ctx
        self._closed = False
        self._screen: ModalScreen[Any] | None = None

    async def confirm(
        self, title: str, body: str = "", *, yes: str = "Allow", no: str = "Deny"
    ) -> bool:
        title, body, yes, no = inert(title), inert(body), inert(yes), inert(no)
        return bool(await self._show(ConfirmScreen(title, body, yes, no)))

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
        screen = ChoiceScreen(inert(title), normalised, inert_text(body), allow_text, inert(hint))
        return await self._show(screen)

    async def _show(self, screen: ModalScreen[ResultT]) -> ResultT:
        if self._closed:
            raise RuntimeError("this modal was closed; acquire a new one")
        if self._screen is not None:
            raise RuntimeError("this modal is already showing a dialog")
        done = anyio.Event()
        result: list[ResultT] = []

        def finished(value: ResultT | None) -> None:
            result.append(value)  # type: ignore[arg-type]
            done.set()

        self._screen = screen
        try:
            with _in_app(self._tui.app):
                self._tui.app.push_screen(screen, finished)
            with cancel_scope(self._ctx):
                await done.wait()
            return result[0]
        finally:
            if not done.is_set() and screen.is_attached:
                screen.dismiss(None)
            self._screen = None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        screen = self._screen
        if screen is not None and screen.is_attached:
            screen.dismiss(None)
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
        command = SlashCommand(name, description, handler)
        self.commands[name] = command

        def unregister() -> None:
            if self.commands.get(name) is command:
                del self.commands[name]

        return unregister

    async def run_command(self, line: str, ctx: Context) -> bool:
        """Run ``/name args`` if ``name`` is registered; ``False`` when it is not a command."""
        if not line.startswith("/"):
            return False
        name, _, args = line[1:].partition(" ")
        command = self.commands.get(name)
        if command is None:
            self.notify(f"Unknown command /{name}", severity="warning")
            return True
        try:
            result = command.handler(args.strip(), ctx)
            if inspect.isawaitable(result):
                await result
        except ContextCancelled:
            pass
        except Exception as exc:
            self.notify(f"/{name} failed: {exc}", severity="error")
        return True

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


def tui_facet(tui: TuiService, facet_id: str = "@chord/tui") -> Facet:
    """The facet that provides :data:`Tui` backed by ``tui``."""

    def setup(env: FacetEnvironment) -> None:
        env.provide(Tui, tui)

    return define_facet(facet_id, setup)


async def run_app_with_facets(
    app: App[Any],
    tui: TextualTui,
    facets: Sequence[Facet],
    *,
    service_sources: Sequence[RemoteServiceSource] = (),
    on_error: Callable[[BaseException], None] | None = None,
    on_host: Callable[[FacetHost], Awaitable[None] | None] | None = None,
    **run_options: Any,
) -> None:
    """Run ``app`` with a facet host *beside* it, providing :data:`Tui` from ``tui``.

    The host starts first (presentation facets activate; panels and toasts they request are
    held until the app calls :meth:`TextualTui.mark_ready` from ``on_mount``), ``on_host`` gets
    the running host (to start a reload coordinator, say), the app runs, and when it exits the
    host is disposed — outside Textual's worker machinery, so disposal really completes.
    ``run_options`` go to ``App.run_async`` (``headless=True``, ``auto_pilot=...`` in tests).
    """
    if tui.app is not app:
        raise ValueError("tui must wrap the app being run")
    all_facets = [tui_facet(tui), *facets]
    async with create_facet_host(
        all_facets, service_sources=service_sources, on_error=on_error
    ) as host:
        if on_host is not None:
            result = on_host(host)
            if inspect.isawaitable(result):
                await result
        await app.run_async(**run_options)
