"""The coding agent's Textual app: renders one ``ConversationView`` and sends user intent back.

The app is a *presentation* of a conversation owned elsewhere (the session worker). It follows
``client.view`` and renders every revision; it never keeps its own copy of the transcript.

Rendering is decoupled from delivery. The view listener only records the newest value and wakes
a render loop; the loop renders whatever is newest, at most once per frame. A 2,000 tokens/s
stream therefore costs one Markdown append per frame, not one per token, and a burst of
revisions never builds a backlog. A ``hydrate`` delivery (first sight, reconnect, respawned
worker) is a *rebaseline*: the transcript is rebuilt from the new document. ``None`` means the
worker is unavailable: a banner says so until the next hydrate.

Facets reach the UI through :attr:`CodingAgentApp.tui` (a :class:`chord.textual.TextualTui`):
panels mount in ``#panels``, ``/commands`` typed in the editor run through
:meth:`~chord.textual.TextualTui.run_command`. The app itself registers only ``/help``,
``/quit`` and ``/stop`` (:mod:`coding_agent.tui.commands.builtin`); everything else (``/model``, ``/compact``, ``/sessions``…) is contributed by whoever
can actually carry it out. Run it beside a facet host with :func:`run_tui`.

Why one module: it is one Textual ``App`` class; its key bindings, actions, render loop,
send/hold/abort queue and status line all share the app's private state (the newest view, the held
inputs, the busy flag) and Textual dispatches to them by method name (``action_*``, ``watch_*``,
message handlers), so they must stay methods of the one class.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
from rich.text import Text
from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.widgets import Static

from chord import BACKGROUND, Context, Delivery, inert, with_cancel
from chord.textual import DialogScreen, TextualTui, register_commands, run_app_with_facets
from coding_agent.context.unknown_commands import unknown_command_message
from coding_agent.contracts import TODO_NAMESPACE
from coding_agent.tui.commands.builtin import BUILTIN_COMMANDS
from coding_agent.tui.conversation import ConversationClient, SendMode
from coding_agent.tui.document import inbox_text, model_label
from coding_agent.tui.keybindings import ACTIONS, Keybindings
from coding_agent.tui.shell import ShellRunner, parse_bang
from coding_agent.tui.terminal import TerminalKeys, driver_for, on_protocol_reported
from coding_agent.tui.widgets.editor import PromptEditor
from coding_agent.tui.widgets.footer import StatusFooter, short_cwd
from coding_agent.tui.widgets.help import HelpScreen, TextScreen
from coding_agent.tui.widgets.messages import ThinkingBlock
from coding_agent.tui.widgets.queue import QueuePanel
from coding_agent.tui.widgets.tasks import TasksPanel
from coding_agent.tui.widgets.transcript import Transcript
from coding_agent.tui.widgets.user_message import fold_message
from pico3 import CompactionStatus, View, ViewDecoder, view_from_json

if TYPE_CHECKING:  # start-up time: chord.facets loads as the facet host starts
    from chord import Facet

__all__ = [
    "FRAME_INTERVAL",
    "THEME_ALIASES",
    "CodingAgentApp",
    "key_name",
    "run_tui",
    "turn_status",
]

THEME_ALIASES = {"dark": "textual-dark", "light": "textual-light"}
"""Short names of the ``theme`` setting (any Textual theme name works too)."""

FRAME_INTERVAL = 1 / 30
"""Minimum seconds between two render passes: the UI's frame budget for streamed text."""

DOUBLE_ESCAPE = 0.6
"""Seconds within which a second Esc (idle, empty editor) counts as Esc Esc (``/rewind``)."""
DOUBLE_CTRL_C = 1.0
"""Seconds within which a second Ctrl+C on an empty editor leaves the app (pi's and Claude
Code's gesture): after a first press that said how to leave, or one that interrupted a turn."""
ABORT_BEFORE_EXIT = 10.0
"""Seconds leaving waits for an interrupt still on its way to the worker (Ctrl+C, Ctrl+C)."""
QUIT_HINT = "Press Ctrl+C again to quit (the session keeps running; /stop ends it)"
INTERRUPTED_HINT = "Interrupted. Press Ctrl+C again to quit (the session keeps running)"

UNAVAILABLE = "Worker unavailable — reconnecting…"
STARTING = "Starting the session… type away: what you send is sent as soon as it is ready"
"""The banner until the session worker first serves the app (it starts beside the TUI)."""
PENDING_NOTE = "pending · sent as soon as the session is ready"
_BUILTIN_NAMES = frozenset(command.name for command in BUILTIN_COMMANDS)
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def key_name(key: str) -> str:
    """How a hint writes a Textual key name (``escape`` → ``esc``)."""
    return "+".join("esc" if part == "escape" else part for part in key.split("+"))


def turn_status(view: View | Mapping[str, Any]) -> str:
    """One line saying what the running turn is doing (empty when idle).

    ``view`` is the decoded view, or a raw value (decoded here)."""
    turn = (view if isinstance(view, View) else view_from_json(view)).turn
    if turn is None:
        return ""
    generation = turn.generation
    if generation is not None:
        stage = generation.stage
        attempt = generation.attempt
        if stage == "retrying":
            error = generation.last_error
            detail = f": {error}" if error else ""
            return f"Retrying (attempt {attempt}){detail}"
        if stage == "waiting":
            return "Waiting for compaction"
        if stage == "deferred":
            return "Waiting for a deferred response"
        if stage == "streaming":
            return "Responding"
        if stage == "requesting":
            return "Thinking"
        return "Preparing"
    tools = turn.tools
    if tools:
        waiting = [slot.waiting_on for slot in tools if slot.waiting_on]
        if waiting:
            return f"Waiting on {waiting[0]}"
        running = sum(1 for slot in tools if slot.status == "running")
        return f"Running {running} tool{'s' if running != 1 else ''}" if running else "Working"
    return "Working"


def _compaction_text(compaction: CompactionStatus | None) -> str:
    if compaction is None:
        return ""
    reason = compaction.reason
    if compaction.stage == "retrying":
        return f"Compacting context — retrying (attempt {compaction.attempt})"
    return f"Compacting context ({reason})…" if reason else "Compacting context…"


class _ProtocolReported(Message):
    """The terminal said it speaks the kitty keyboard protocol (Shift+Enter can arrive)."""


class CodingAgentApp(App[None]):
    """The terminal UI of one conversation."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "coding-agent"
    AUTO_FOCUS = "#editor"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "abort", "Abort", show=False, id="abort"),
        Binding("alt+up", "dequeue", "Dequeue", show=False, id="dequeue"),
        Binding("ctrl+o", "toggle_tools", "Tool output", show=False, id="toggle_tools"),
        Binding("ctrl+t", "toggle_thinking", "Thinking", show=False, id="toggle_thinking"),
        Binding("ctrl+g", "external_editor", "External editor", show=False, id="external_editor"),
        Binding("ctrl+c", "interrupt", "Clear / quit", show=False, priority=True, id="interrupt"),
        # Scrolling the transcript from the keyboard (the editor keeps the focus). Home/End
        # scroll only while the editor is empty (else they move the cursor): check_action.
        Binding("pageup", "scroll('page_up')", show=False, priority=True, id="page_up"),
        Binding("pagedown", "scroll('page_down')", show=False, priority=True, id="page_down"),
        Binding("home", "scroll('top')", show=False, priority=True, id="scroll_top"),
        Binding("end", "scroll('bottom')", show=False, priority=True, id="scroll_bottom"),
        Binding("ctrl+up", "scroll('previous')", show=False, priority=True, id="previous_message"),
        Binding("ctrl+down", "scroll('next')", show=False, priority=True, id="next_message"),
        Binding("f1", "help", show=False, id="help"),
    ]

    busy: reactive[bool] = reactive(False)
    """True while the conversation has a live turn (submissions steer or follow up)."""

    def __init__(
        self,
        client: ConversationClient,
        *,
        frame_interval: float = FRAME_INTERVAL,
        keybindings: Keybindings | None = None,
        theme: str | None = None,
    ):
        """``keybindings`` rebinds actions (``keybindings.toml``; its problems are shown as
        warnings at start); ``theme`` is a Textual theme name (``dark``/``light`` allowed)."""
        super().__init__()
        self.keybindings = keybindings or Keybindings()
        self._theme_name = theme
        self.client = client
        self.frame_interval = frame_interval
        self.tui = TextualTui(self, panel_container="#panels", ready=False)
        self.transcript = Transcript(id="transcript")
        self.editor = PromptEditor(
            commands=lambda: self.tui.commands, cwd=lambda: client.session.cwd, id="editor"
        )
        self.footer = StatusFooter(lambda: client.session, id="footer")
        self.tasks_panel = TasksPanel(id="tasks")
        self.queue = QueuePanel(id="queue")
        self._unavailable = Static(UNAVAILABLE, id="unavailable", markup=False)
        self._compaction = Static(id="compaction", markup=False)
        self._status = Static(id="turn-status", markup=False)
        self._scroll_hint = Static(id="scroll-hint", markup=False)
        self._welcome = Static(id="welcome", markup=False)
        self._ctx, self._cancel_ctx = with_cancel(BACKGROUND)
        self._latest: Any = None
        self._decoder = ViewDecoder()  # the view, decoded once per revision (pico3.View)
        self._rebaseline = True
        self._requested = 0
        self._applied = 0
        self._wake = anyio.Event()
        self._progress = anyio.Event()
        self._render_stopped = False
        self._unsubscribe: Any = None
        self._status_text = ""
        self._spin = 0
        self._tools_collapsed = True
        self._thinking_collapsed = True
        self._last_escape = 0.0
        self._last_ctrl_c = 0.0
        self._stopping: Any = None  # the Textual worker of the newest Esc/Ctrl+C interrupt
        # Submitted while the worker was unavailable, in order: ("prompt" | "command" |
        # "shell", text, follow_up). Sent one after the other once the view is back.
        self._held: list[tuple[str, str, bool]] = []
        self._flushing = False
        self._pending = Static(id="pending", classes="user", markup=False)
        self._view_seen = False
        self._facets_pending = False
        self._unhook_protocol: Any = lambda: None
        self.spinner_moves = True
        """Spin the status line's spinner (snapshot tests turn it off to be deterministic)."""
        self.terminal_keys = TerminalKeys()
        """Which keys this terminal can deliver (hints name no other key)."""
        self.stop_requested = False
        """``/stop``: the user asked to stop the session's worker as the app exits."""
        self.on_server = False
        """The session runs on a ``coding-agent serve`` (``attach tcp://…``, ``--server``):
        its worker is the server's, which this TUI cannot stop (``/stop`` says so)."""
        self.faux_script: str | None = None
        """The ``--faux-script`` the session's faux model plays (the welcome then promises
        that script, not the built-in tour)."""
        self.add_dirs: tuple[str, ...] = ()
        """The session's ``--add-dir`` and ``/add-dir`` folders: the welcome names them beside
        the project folder, so the folders the file tools read unasked are on the first screen
        (:meth:`show_add_dirs` changes them)."""
        self.render_passes = 0
        """Render passes run so far (a pass renders the newest value; tests bound it)."""
        self.render_errors: list[Exception] = []
        """Exceptions rendering raised (each is also shown as a toast)."""
        self._facet_keys: dict[str, str] = {}
        self._freed_keys: set[str] = set()
        self.shell: ShellRunner | None = None
        """Runs ``!cmd`` / ``!!cmd`` lines in the worker (set by the client; ``None``: the
        lines are refused with a toast)."""

    def get_driver_class(self) -> type[Any]:
        """Textual's driver, with ESC Enter as Alt+Enter and the typeahead fix on Linux
        (:mod:`coding_agent.tui.terminal`)."""
        return driver_for(super().get_driver_class())

    @property
    def starting(self) -> bool:
        """The session is starting: no view has arrived yet, or the facets that bring the
        worker's commands are not active yet (:meth:`wait_for_facets`). Prompts, ``!`` lines
        and every command but ``/help``, ``/quit`` and ``/stop`` submitted meanwhile are held
        and run in order once it has started (shown as pending)."""
        return not self._view_seen or self._facets_pending

    def wait_for_facets(self) -> None:
        """Count the session as starting until :meth:`facets_active` (call before the app
        runs, when its facet host starts beside it): the commands the worker's facets bring
        are not known before, so commands typed meanwhile wait for them."""
        self._facets_pending = True

    def facets_active(self) -> None:
        """The facet host is up (its facets active): what was held may go once a view is."""
        self._facets_pending = False
        self._maybe_flush()
        self.watch_busy(self.busy)  # "enter sends" once started

    @property
    def ctx(self) -> Context:
        """The app's context: cancelled when the app unmounts."""
        return self._ctx

    @property
    def view(self) -> Any:
        """The newest view value delivered (may be ahead of what is on screen)."""
        return self._latest

    @property
    def decoded_view(self) -> View | None:
        """:attr:`view` as pico3's typed records (``None`` while the worker is unavailable);
        decoded once per revision, whoever asks."""
        return self._decoder.decode(self._latest)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast, made inert (:func:`chord.inert`) and plain text unless ``markup`` is asked
        for: a toast often quotes a command, a tool's output or a server's error."""
        super().notify(
            inert(message), title=inert(title), severity=severity, timeout=timeout, markup=markup
        )

    # -- layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield self._unavailable
        yield self._compaction
        yield self._welcome
        yield self.transcript
        yield self._pending
        with Vertical(id="panels"):
            yield self.tasks_panel
        yield self.queue
        yield self._scroll_hint
        yield self._status
        yield self.editor.palette
        yield self.editor
        yield self.footer

    def on_mount(self) -> None:
        self._unavailable.display = False
        self._compaction.display = False
        self._status.display = False
        self._scroll_hint.display = False
        self._welcome.display = False
        self._pending.display = False
        self.editor.border_title = "›"
        self._apply_settings()
        self.footer.show(self._decoder.decode(self.client.view.value))
        register_commands(self.tui, BUILTIN_COMMANDS, self)
        self.tui.mark_ready()
        self.run_worker(self._render_loop(), name="render", group="render", exclusive=True)
        self._unsubscribe = self.client.view.subscribe(self._on_view)
        if self._requested == 0 and self.client.view.value is None:
            self.apply_view(None, rebaseline=True)
        self.set_interval(0.1, self._tick)
        self._unhook_protocol = on_protocol_reported(lambda: self.post_message(_ProtocolReported()))
        self.watch_busy(self.busy)

    @on(_ProtocolReported)
    def _protocol_reported(self) -> None:
        if not self.terminal_keys.protocol:
            self.terminal_keys.protocol = True
            self.watch_busy(self.busy)

    def _apply_settings(self) -> None:
        """The theme and the rebound keys (see :mod:`coding_agent.tui.keybindings`)."""
        if self._theme_name is not None:
            name = THEME_ALIASES.get(self._theme_name, self._theme_name)
            if name in self.available_themes:
                self.theme = name
            else:
                self.notify(
                    f"Unknown theme {self._theme_name!r}; use dark, light or one of "
                    f"{', '.join(sorted(self.available_themes))}",
                    severity="warning",
                )
        keymap = self.keybindings.app_keymap()
        if keymap:
            self.set_keymap(keymap)
        self.editor.key_actions = self.keybindings.editor_keys()
        self.transcript.fold_pastes = self.editor.pastes.fold  # a sent paste stays folded
        self.transcript.expand_key = self._hint_key("toggle_tools")
        self._facet_keys = self.keybindings.facet_keys()
        self._freed_keys = self.keybindings.freed_keys()
        for problem in self.keybindings.problems:  # shown long enough to be read and fixed
            self.notify(problem, title="keybindings", severity="warning", timeout=30)

    def on_unmount(self) -> None:
        self._unhook_protocol()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._cancel_ctx()

    # -- the view ----------------------------------------------------------------------------
    def _on_view(self, value: Any, ctx: Context, delivery: Delivery) -> None:
        del ctx
        self.apply_view(value, rebaseline=delivery.kind == "hydrate")

    def apply_view(self, value: Mapping[str, Any] | None, *, rebaseline: bool = False) -> None:
        """Render ``value`` soon (the newest value wins; ``None`` = worker unavailable).

        ``rebaseline`` re-renders from scratch (a hydrate delivery). Coming back from ``None``
        always rebaselines. Returns at once; :meth:`wait_rendered` waits for the screen.
        """
        if value is None or self._latest is None:
            rebaseline = True
        self._latest = value
        self._rebaseline = self._rebaseline or rebaseline
        self._requested += 1
        self._wake.set()

    async def wait_rendered(self) -> None:
        """Wait until every value applied so far has been rendered.

        Raises :class:`RuntimeError` (chained to the cause) if rendering ever failed.
        """
        target = self._requested
        while self._applied < target:
            if self._render_stopped:
                raise RuntimeError("the app is no longer rendering (it exited or crashed)")
            await self._progress.wait()
        if self.render_errors:
            raise RuntimeError("rendering the view failed") from self.render_errors[-1]

    async def _render_loop(self) -> None:
        try:
            await self._render_forever()
        finally:
            self._render_stopped = True
            self._progress.set()

    async def _render_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            target = self._requested
            value, rebaseline = self._latest, self._rebaseline
            self._rebaseline = False
            try:
                await self._render(value, rebaseline)
            except Exception as error:  # a rendering bug must not freeze the UI
                self.render_errors.append(error)
                self.log.error("rendering the view failed", error)
                self.notify(f"Display error: {error!r}", severity="error")
                self._rebaseline = True  # start from a clean slate next time
            self.render_passes += 1
            self._applied = target
            progress, self._progress = self._progress, anyio.Event()
            progress.set()
            await anyio.sleep(self.frame_interval)

    async def _render(self, value: Mapping[str, Any] | None, rebaseline: bool) -> None:
        view = self._decoder.decode(value)
        if view is None:
            self._unavailable.update(STARTING if self.starting else UNAVAILABLE)
            self._unavailable.display = True
            self.footer.starting = self.starting
            if self.starting:  # the first screen says what this is before the worker serves
                self._welcome.display = True
                self._paint_welcome()
            self.footer.show(None)
            self.busy = False
            self._set_status("")
            return
        self._unavailable.display = False
        if not self._view_seen:
            self._view_seen, self.footer.starting = True, False
            self.watch_busy(self.busy)  # "enter sends" once started
        self._maybe_flush()
        if rebaseline or not await self.transcript.update(view):
            await self.transcript.rebuild(view)
            self.footer.rebase(view)
        else:
            self.footer.show(view)
        self._welcome.display = not view.entries
        if not view.entries:
            self._paint_welcome()
        todo = view.plugins.get(TODO_NAMESPACE)
        self.tasks_panel.show(view.tasks, todo.get("todos") if isinstance(todo, dict) else None)
        await self.queue.show(view.inbox)
        compaction = inert(_compaction_text(view.compaction))
        self._compaction.update(compaction)
        self._compaction.display = bool(compaction)
        self.busy = view.turn is not None
        self._set_status(turn_status(view))

    # -- status line -------------------------------------------------------------------------
    def _set_status(self, text: str) -> None:
        self._status_text = text
        self._status.display = bool(text)
        self._paint_status()

    def welcome_text(self) -> Text:
        """The first screen's line: which model, permission mode and folder this is, and how
        to get help; on the faux model, that it is an offline demo whose tour starts with
        whatever is typed."""
        session = self.client.session
        model = model_label(self.decoded_view, session.model)
        mode = next(
            (
                getattr(w, "permission_mode", None)
                for w in self.query("#approval-mode")
                if getattr(w, "permission_mode", None)
            ),
            None,
        )
        line = Text()
        line.append("coding-agent", style="bold")
        if self.decoded_view is not None or session.model:  # not known while starting
            line.append(f" · {model}")
        if mode:
            line.append(f" · mode {mode}")
        line.append(f" · {short_cwd(session.cwd)}", style="")
        if self.add_dirs:
            line.append(f" + {', '.join(short_cwd(folder) for folder in self.add_dirs)}")
        line.append("\n")
        help_key = self._hint_key("help")
        line.append(
            "Type a request and press enter. /help lists commands and keys"
            + (f" ({help_key})" if help_key else "")
            + "; / opens commands, @ mentions files, ! runs a shell command.",
            style="dim",
        )
        if model.startswith("faux/"):
            plays = (
                f"It answers from the script {Path(self.faux_script).name} (--faux-script)."
                if self.faux_script
                else "Type anything to start a short tour."
            )
            line.append(
                "\nfaux is the offline demo model: no API key, nothing leaves this machine. "
                f"{plays} For a real model set ANTHROPIC_API_KEY or OPENAI_API_KEY (or pass "
                "--model provider/id).",
                style="",
            )
        return line

    def show_add_dirs(self, folders: tuple[str, ...]) -> None:
        """The session's working folders are ``folders`` from now on (``/add-dir`` added one,
        ``/resume`` moved to another session): the welcome line names them at once."""
        self.add_dirs = folders
        if self._welcome.display:
            self._paint_welcome()

    def _paint_welcome(self) -> None:
        text = self.welcome_text()
        if text.plain != getattr(self, "_welcome_plain", None):
            self._welcome_plain = text.plain
            self._welcome.update(text)

    def _tick(self) -> None:
        if not self.screen_stack:  # closing: the screens are gone, this timer not yet
            return
        if self._welcome.display:
            self._paint_welcome()  # the permission mode arrives from a facet
        self._paint_scroll_hint()  # the mouse wheel leaves/returns to follow mode too
        if self._status_text and self.spinner_moves:
            self._spin = (self._spin + 1) % len(_SPINNER)
        self._paint_status()  # also: a dialog opened or closed, and the Esc hint follows

    def _paint_status(self) -> None:
        if not self._status_text:
            return
        line = Text()
        line.append(f"{_SPINNER[self._spin]} ", style="bold")
        line.append(inert(self._status_text))  # a tool's name or progress, say
        abort = self._hint_key("abort")
        dialog = self.screen is not self.screen_stack[0] or self._status_text.startswith(
            "Waiting on"
        )
        if abort and not dialog:  # a dialog has the keys (its own line says what Esc does)
            line.append(f"   {abort} to interrupt", style="dim")
        self._status.update(line)

    def watch_busy(self, busy: bool) -> None:
        self.editor.follow_up_newline = not busy
        self.editor.border_subtitle = " · ".join(self.key_hints(busy))

    def key_hint(self, action: str) -> str | None:
        """The key a hint names for ``action`` (a :data:`~coding_agent.tui.keybindings.ACTIONS`
        name): its first binding that can arrive here, ``None`` when none can (a widget's hint,
        such as a folded tool output's ``ctrl+o expands``, then names no key)."""
        return self._hint_key(action)

    def _hint_key(self, *actions: str) -> str | None:
        """The first key of ``actions`` (in order) that is bound and can arrive here."""
        for action in actions:
            for key in self.keybindings.keys_of(action):
                if self.terminal_keys.can_deliver(key):
                    return key_name(key)
        return None

    def key_hints(self, busy: bool) -> list[str]:
        """The editor's key hints, from the active bindings and what this terminal delivers:
        idle, how to send and how to break a line; while a turn runs, how to steer and how to
        follow up. A key that cannot arrive (Shift+Enter in tmux) is never named. While the
        session starts, Enter queues (what it submits goes out once the session has started)."""
        hints: list[str] = []
        submit = self._hint_key("submit")
        if busy:
            if submit:
                hints.append(f"{submit} steers")
            follow = self._hint_key("follow_up")
            if follow:
                hints.append(f"{follow} follows up")
            return hints
        if submit:
            hints.append(f"{submit} {'queues' if self.starting else 'sends'}")
        newline = self._hint_key("newline") if self._shift_enter_first() else None
        newline = newline or self._hint_key("follow_up", "newline")
        if newline:
            hints.append(f"{newline} newline")
        return hints

    def _shift_enter_first(self) -> bool:
        keys = self.keybindings.keys_of("newline")
        return bool(keys) and self.terminal_keys.can_deliver(keys[0])

    # -- input -------------------------------------------------------------------------------
    @on(PromptEditor.Submitted)
    def _submitted(self, event: PromptEditor.Submitted) -> None:
        text = event.text
        if text.startswith("/") and not text.startswith("//"):
            name = text[1:].split(maxsplit=1)[0] if text[1:].strip() else ""
            if name not in _BUILTIN_NAMES and (self.starting or self._flushing):
                # The worker's commands are not known yet (their facets activate once it
                # serves): run it, or say it is unknown, when it does, in typing order.
                self._hold("command", text, False)
                return
            self._run_command(text)
            return
        if text.startswith("//"):
            text = text[1:]
        if parse_bang(text) is not None and (self.starting or self._flushing):
            self._hold("shell", text, False)
            return
        self._submit_text(text, event.follow_up)

    def _submit_text(self, text: str, follow_up: bool) -> None:
        """A prompt or a ``!`` line (a ``//`` prefix already stripped)."""
        bang = parse_bang(text)
        if bang is not None:
            self._run_shell(text, *bang)
            return
        self.send(text, follow_up=follow_up)

    def _run_command(self, text: str) -> Any:
        """Run the slash command ``text`` in the background (its Textual worker), or, when no
        command of that name is registered, say so and put the text back in the editor.

        A command that is refused or fails (``/model sonet``: its error toast says why) also
        puts ``text`` back, as Claude Code and pi keep a refused command's text: the user fixes
        the typo instead of typing the line again. Only a command that did its job leaves the
        editor as it is."""
        name = text[1:].split(maxsplit=1)[0] if text[1:].strip() else ""
        if name not in self.tui.commands:
            # lazy: start-up time (only an unknown command looks for the project's own)
            from coding_agent.context.waiting import waiting_command

            waiting = waiting_command(self.client.session.cwd, name) if name else None
            message = unknown_command_message(name, self.tui.commands, waiting)
            self.notify(message, severity="warning")
            self.editor.restore(text)
            return None

        async def run() -> None:
            done = await self.tui.run_command(text, self._ctx)
            if not done and not self._ctx.cancelled:  # (cancelled: the app is closing)
                self.editor.restore(text)

        return self.run_worker(run(), group="commands")

    def _run_shell(self, text: str, command: str, include: bool) -> None:
        """``!cmd`` (output to the model) / ``!!cmd`` (not): run it in the worker."""
        if not command:
            self.notify("Type a command after ! (or !!)", severity="warning")
            self.editor.restore(text)
            return
        shell = self.shell
        if shell is None:
            self.notify("! commands need a session worker", severity="warning")
            self.editor.restore(text)
            return

        async def run() -> None:
            try:
                await shell.run(command, include, self._ctx)
            except Exception as error:
                self.notify(f"Could not run {command!r}: {error}", severity="error")
                self.editor.restore(text)

        self.run_worker(run(), group="shell")

    def send_mode(self, follow_up: bool) -> SendMode:
        """How a submission goes out now: a prompt when idle, else steer or follow-up."""
        if not self._is_busy():
            return "prompt"
        return "followUp" if follow_up else "steer"

    def send(self, text: str, *, follow_up: bool = False) -> None:
        """Send ``text`` (in the background); on failure it returns to the editor.

        While the worker is unavailable (not connected yet, restarting) the text is held and
        sent as soon as the view is back: typeahead is never lost nor left in the editor."""
        if self._latest is None or self._flushing:
            self._hold("prompt", text, follow_up)
            return
        mode = self.send_mode(follow_up)
        self.run_worker(self._send(text, mode, follow_up), group="send")

    @property
    def held(self) -> list[str]:
        """Texts submitted while the worker was unavailable, waiting to be sent."""
        return [text for _, text, _ in self._held]

    def _hold(self, kind: str, text: str, follow_up: bool, *, first: bool = False) -> None:
        """Keep ``text`` until the worker serves (``first``: before the others, it was
        being sent when the worker went away); shown as pending under the transcript."""
        if first:
            self._held.insert(0, (kind, text, follow_up))
        else:
            self._held.append((kind, text, follow_up))
        self._paint_pending()
        if not self.starting and not self._flushing:  # a restart: the banner alone is terse
            count = len(self._held)
            self.notify(
                f"Not connected yet: {'it' if count == 1 else f'{count} messages'} will be "
                "sent as soon as the session worker is back",
                timeout=4,
            )

    def _paint_pending(self) -> None:
        """The held submissions, as the user's messages, each marked pending (a big paste
        folded, as in the transcript)."""
        shown = Text()
        for _, text, _ in self._held:
            if shown:
                shown.append("\n")
            shown.append(inert(fold_message(text, self.editor.pastes.fold) or text))
            shown.append(f"\n{PENDING_NOTE}", style="dim italic")
        self._pending.update(shown)
        self._pending.display = bool(self._held)

    def _maybe_flush(self) -> None:
        """Start sending what was held, if anything is and the session has started."""
        if self._held and not self._flushing and not self.starting and self._latest is not None:
            self._flushing = True
            self.run_worker(self._flush_held(), group="held")

    async def _flush_held(self) -> None:
        """Send what was held, one after the other in the order it was typed: a prompt is
        admitted, a command has run (or was found unknown), before the next goes. What is
        submitted meanwhile queues behind; if the worker goes away again the rest waits."""
        try:
            while self._held and self._latest is not None:
                kind, text, follow_up = self._held.pop(0)
                self._paint_pending()
                if kind == "command":
                    worker = self._run_command(text)
                    if worker is not None:
                        try:
                            await worker.wait()
                        except Exception:  # the command's own error handling spoke already
                            pass
                elif kind == "shell":
                    self._submit_text(text, follow_up)
                else:
                    await self._send(text, self.send_mode(follow_up), follow_up)
        finally:
            self._flushing = False
        self._maybe_flush()  # held while the last one was going out

    async def _send(self, text: str, mode: SendMode, follow_up: bool = False) -> None:
        try:
            content = await self._attach_images(text)
            if content is None:
                self.editor.restore(text)
                return
            await self.client.send(content, mode, self._ctx)
        except Exception as error:
            if self._latest is None:  # the worker went away meanwhile: send it when back
                self._hold("prompt", text, follow_up, first=self._flushing)
                return
            self.notify(f"Could not send: {error}", severity="error")
            self.editor.restore(text)

    async def _attach_images(self, text: str) -> str | list[dict[str, Any]] | None:
        """``text`` with the files, folders and images it names attached
        (:mod:`coding_agent.tui.attachments`);
        ``None`` (after a toast) when one cannot be attached or the model takes no images."""
        # lazy: start-up time (what a prompt attaches is read as it is sent, not before the
        # first frame)
        from coding_agent.context.images import ImageError, prepare_image_file
        from coding_agent.context.mentions import image_mark, mention_blocks
        from coding_agent.tui.attachments import image_paths

        cwd = self.client.session.cwd
        files = await anyio.to_thread.run_sync(mention_blocks, text, cwd)  # @file, @folder/
        paths = image_paths(text, cwd)
        if not paths:
            return [{"type": "text", "text": text}, *files] if files else text
        model = model_label(self.client.view.value, self.client.session.model)
        for known in getattr(self.client, "models", None) or []:
            if (
                f"{known.get('provider')}/{known.get('id')}" == model
                and known.get("images") is False
            ):
                self.notify(
                    f"{model} does not accept images; switch models (/model) to attach "
                    f"{', '.join(p.name for p in paths)}",
                    severity="error",
                )
                return None
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}, *files]
        for path in paths:
            try:
                image = await anyio.to_thread.run_sync(prepare_image_file, path)
            except ImageError as error:
                self.notify(f"Not sent: {error}", severity="error")
                return None
            blocks += [image_mark(path.name, image.note()), image.block()]
        return blocks

    def _is_busy(self) -> bool:
        view = self.decoded_view
        return view is not None and view.turn is not None

    def _queued(self) -> list[tuple[int, str]]:
        view = self.decoded_view
        return [
            (item.id, inbox_text(item))
            for item in (view.inbox if view is not None else ())
            if item.mode in ("steer", "followUp")
        ]

    def action_abort(self) -> None:
        """Esc: stop a running ``!`` command, else abort the running turn; queued
        steer/follow-up text returns to the editor. Idle, Esc twice on an empty editor runs
        ``/rewind`` (when a facet registered it)."""
        if self._stop_running():
            return
        now = time.monotonic()
        if self.editor.text.strip() or now - self._last_escape > DOUBLE_ESCAPE:
            self._last_escape = now
            return
        self._last_escape = 0.0
        if "rewind" in self.tui.commands:
            self.run_worker(self.tui.run_command("/rewind", self._ctx), group="commands")

    def _stop_running(self) -> bool:
        """Stop what runs, as Esc and Ctrl+C both do: a running ``!`` command, else the
        running turn (aborted in the worker, so it is marked interrupted in every attached
        terminal and after a restart; queued steer/follow-up text returns to the editor).
        ``False`` when nothing runs."""
        shell = self.shell
        if shell is not None and shell.running is not None:
            self._stopping = self.run_worker(
                shell.abort(self._ctx), group="shell-abort", exclusive=True
            )
            return True
        if not self._is_busy():
            return False
        self._stopping = self.run_worker(self._abort(self._queued()), group="abort", exclusive=True)
        return True

    async def _abort(self, queued: Sequence[tuple[int, str]]) -> None:
        try:
            await self.client.abort(self._ctx)
        except Exception as error:
            self.notify(f"Could not abort: {error}", severity="error")
            return
        texts = [text for _, text in queued if text]
        if texts:
            self.editor.restore("\n\n".join(texts))

    def action_dequeue(self) -> None:
        """Alt+Up: cancel the newest queued input and put its text back in the editor."""
        queued = self._queued()
        if queued:
            input_id, text = queued[-1]
            self.run_worker(self._cancel_input(input_id, text), group="queue")

    @on(QueuePanel.CancelRequested)
    def _cancel_requested(self, event: QueuePanel.CancelRequested) -> None:
        self.run_worker(self._cancel_input(event.input_id, None), group="queue")

    async def _cancel_input(self, input_id: int, restore: str | None) -> None:
        try:
            result = await self.client.input_abort(input_id, self._ctx)
        except Exception as error:
            self.notify(f"Could not cancel: {error}", severity="error")
            return
        if result == "aborted":
            if restore:
                self.editor.restore(restore)
        elif result == "already_placed":
            self.notify("Too late: that message was already delivered", severity="warning")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Scroll keys belong to the transcript only on the main screen (a dialog or picker
        keeps its own PageUp/Home); Home/End move the editor's cursor while it holds text
        (:meth:`action_scroll` decides that behind the keys typed before them)."""
        if action == "scroll":
            return self.screen is self.screen_stack[0]
        return True

    def action_scroll(self, where: str) -> None:
        """PageUp/PageDown, Home/End, Ctrl+Up/Ctrl+Down (message by message) in the transcript;
        anything but the bottom leaves follow mode, the bottom returns to it.

        Home/End go to the editor's line start/end while the focused editor holds text. The
        binding is the app's own (priority) while typed keys go on to the editor's queue, so
        in one burst (a fast typist, a loaded machine) the keys before Home may not have
        reached the editor yet: the decision is queued behind them, as Ctrl+C's is."""
        if where in ("top", "bottom") and self.editor.has_focus:
            self.editor.call_later(self._home_or_end, where)
            return
        self._scroll(where)

    def _home_or_end(self, where: str) -> None:
        editor = self.editor
        if editor.text:
            if where == "top":
                editor.action_cursor_line_start()
            else:
                editor.action_cursor_line_end()
            return
        self._scroll(where)

    def _scroll(self, where: str) -> None:
        transcript = self.transcript
        if where == "page_up":
            transcript.page(-1)
        elif where == "page_down":
            transcript.page(1)
        elif where == "top":
            transcript.home()
        elif where == "bottom":
            transcript.follow()
        elif where == "previous":
            transcript.step(-1)
        elif where == "next":
            transcript.step(1)
        self.call_after_refresh(self._paint_scroll_hint)

    def _paint_scroll_hint(self) -> None:
        following = self.transcript.following or self.transcript.max_scroll_y == 0
        if following == (not self._scroll_hint.display):
            return
        self._scroll_hint.display = not following
        if not following:
            end = self._hint_key("scroll_bottom") or "end"
            self._scroll_hint.update(f"↑ scrolled up · {end} returns to the bottom")

    def action_toggle_tools(self) -> None:
        self._tools_collapsed = not self._tools_collapsed
        self.transcript.set_tools_collapsed(self._tools_collapsed)

    def action_toggle_thinking(self) -> None:
        self._thinking_collapsed = not self._thinking_collapsed
        for block in self.query(ThinkingBlock):
            block.collapsed = self._thinking_collapsed

    def action_external_editor(self) -> None:
        """Ctrl+G: edit the prompt in ``$VISUAL``/``$EDITOR`` (the app suspends meanwhile)."""
        self.run_worker(self.editor.edit_externally(), group="external-editor", exclusive=True)

    async def on_event(self, event: events.Event) -> None:
        """Keys registered by facets (``tui.register_key``, e.g. Shift+Tab for the permission
        mode) are claimed here, before the focused editor sees them."""
        if isinstance(event, events.Key) and not event.is_forwarded:
            if self.terminal_keys.saw(event.key):  # a Shift+Enter arrived: hints may name it
                self.watch_busy(self.busy)
            target = self._facet_keys.get(event.key)
            if target is not None:  # a key rebound in keybindings.toml
                if self.tui.handle_key(target):
                    event.stop()
                    event.prevent_default()
                    return
            elif event.key not in self._freed_keys and self.tui.handle_key(event):
                return
        await super().on_event(event)

    # -- built-in commands -------------------------------------------------------------------
    def help_text(self) -> str:
        """What ``/help`` shows: the commands, then the keys as they are bound now (keys this
        terminal cannot deliver are left out)."""
        rows: dict[tuple[str, str], list[str]] = {}  # (help, last part) -> [usage, other names]
        for c in sorted(self.tui.commands.values(), key=lambda c: c.name):
            text = c.help or c.description
            # one thing under several names (a skill's /NAME and /skill:NAME: the same last
            # part and help) is one line, naming the others, as the palette shows it once
            key = (text, c.name.rsplit(":", 1)[-1]) if text else ("", c.name)
            if key in rows:
                rows[key].append(f"/{c.name}")
            else:
                rows[key] = [c.usage or "/" + c.name]
        lines: list[str] = []
        for (text, _last), (usage, *others) in rows.items():
            also = f" (also {', '.join(others)})" if others else ""
            lines.append(f"{usage}{also} — {text}")
        bound = self.keybindings
        shown: list[str] = []
        for name, action in ACTIONS.items():
            if action.kind == "facet":
                continue
            keys = [key_name(k) for k in bound.keys_of(name) if self.terminal_keys.can_deliver(k)]
            if name == "follow_up":
                keys_text = "/".join(keys)
                shown.append(f"{keys_text} newline (idle) / {action.description} (busy)")
            elif keys:
                shown.append(f"{'/'.join(keys)} {action.description}")
        shown += [
            "ctrl+c clear the editor, else interrupt the turn, else twice: quit",
            "! / !! shell",
            "/ commands",
            "@ files",
            "tab completes paths",
        ]
        moved = {default: key for key, default in bound.facet_keys().items()}
        shown += [
            f"{moved.get(k.key, k.key)} {k.description.lower()}" for k in self.tui.keys.values()
        ]
        return "\n".join(["Commands", *lines, "", "Keys", *shown])

    def action_help(self) -> None:
        """``/help`` or F1: the help screen (Esc closes it)."""
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.help_text()))

    def show_text(self, title: str, text: str) -> None:
        """Show a command's long text (``/sandbox``) on a scrollable screen Esc closes."""
        self.push_screen(TextScreen(text, title))

    def live_work(self) -> str | None:
        """What would be cut short if the worker stopped now (``None``: nothing)."""
        if self._is_busy():
            return "A turn is running"
        view = self.decoded_view
        tasks = view.tasks if view is not None else None
        if tasks:
            return f"{len(tasks)} task{'s' if len(tasks) != 1 else ''} (a job, say) still running"
        return None

    def action_interrupt(self) -> None:
        """Ctrl+C, as in pi and Claude Code: clear the editor when it holds text; else, while a
        turn (or a ``!`` command) runs, interrupt it exactly as Esc does; else (idle, empty
        editor) say how to leave. A second press on the empty editor within
        :data:`DOUBLE_CTRL_C` seconds of one that interrupted or said how to leave leaves (as
        ``/quit``: the session keeps running), once the interrupt has reached the worker.

        The binding is the app's own (priority), while typed keys go on to the editor's message
        queue: keys read in one burst (a fast typist, a loaded machine) may not have reached the
        editor yet. The decision is queued behind them, so Ctrl+C acts on what was typed before
        it."""
        self.editor.call_later(self._interrupt, time.monotonic())

    def _interrupt(self, now: float) -> None:
        if self.editor.text:
            self.editor.clear()
            self._last_ctrl_c = 0.0
            return
        if self._last_ctrl_c and now - self._last_ctrl_c <= DOUBLE_CTRL_C:
            self._last_ctrl_c = 0.0
            self.run_worker(self._exit_after_stopping(), group="exit", exclusive=True)
            return
        self._last_ctrl_c = now
        interrupted = self._stop_running()
        if interrupted:  # a dialog of the stopped turn's goes with it, by the user's own key
            for screen in self.screen_stack:
                if isinstance(screen, DialogScreen):
                    screen.expect_close()
        self.notify(INTERRUPTED_HINT if interrupted else QUIT_HINT, timeout=max(DOUBLE_CTRL_C, 2.0))

    async def _exit_after_stopping(self) -> None:
        """Leave, once an interrupt on its way to the worker has arrived (a quick Ctrl+C,
        Ctrl+C must not leave the turn running); at most :data:`ABORT_BEFORE_EXIT` seconds."""
        stopping = self._stopping
        if stopping is not None and stopping.is_running:
            with anyio.move_on_after(ABORT_BEFORE_EXIT):
                try:
                    await stopping.wait()
                except Exception:  # its own error handling spoke already
                    pass
        self.exit()


async def run_tui(
    client: ConversationClient, facets: Sequence[Facet] = (), **run_options: Any
) -> None:
    """Run the app with a facet host beside it (presentation facets get :data:`chord.textual.Tui`).

    ``run_options`` go to :func:`chord.textual.run_app_with_facets` (and on to ``run_async``).
    """
    app = CodingAgentApp(client)
    await run_app_with_facets(app, app.tui, facets, **run_options)
