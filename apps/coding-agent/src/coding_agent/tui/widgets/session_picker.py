"""The session picker: filter by typing, Enter resumes, Ctrl+D deletes (after a confirmation).

Used by ``/sessions`` and ``/resume`` in the TUI, and by ``coding-agent --resume`` without an id
(as a small app of its own); ``/import`` shows other rows in it (Claude Code's and pi's
sessions, as ``coding-agent import --list`` does: its ``row`` and ``verb``). Each row shows the id, the name, the last activity, the first
prompt, the model, the size and the number of branches
(:func:`coding_agent.session_files.index.describe`); in the TUI, a row for each branch of a session
with several (choosing one switches to that branch); typing filters the sessions (:func:`coding_agent.session_files.index.matches`: name, id prefix, prompt text).

A session with no prompt and no name (the agent was started and quit, or opened by an editor
or a web page that sent nothing) is left out of the unfiltered list, as Claude Code and pi
leave theirs: each start of the agent makes one, and a handful of them pushed the sessions
worth resuming off the first screen. The help line counts them; typing finds them (an id).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from chord import inert
from chord.textual import ConfirmScreen
from coding_agent.session_files.index import human_size, matches

__all__ = ["SessionPickerApp", "SessionPickerScreen", "picker_row"]

_PROMPT = 48


def _age(stamp: str, now: datetime) -> str:
    try:
        then = datetime.fromisoformat(stamp)
    except ValueError:
        return "?"
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 60:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return "?"  # pragma: no cover


def picker_row(info: dict[str, Any], *, current: str | None, now: datetime | None = None) -> str:
    """One row: id, name, last activity, first prompt, model, size, and a running mark."""
    moment = now or datetime.now(UTC)
    prompt = info.get("firstPrompt") or "(no prompt yet)"
    if len(prompt) > _PROMPT:
        prompt = prompt[: _PROMPT - 1] + "…"
    parts = [info["id"]]
    if info.get("name"):
        parts.append(f"“{info['name']}”")
    parts += [f"active {_age(info['lastActivity'], moment)}", prompt]
    parts.append(f"{info.get('model') or 'default model'} · {human_size(int(info['size']))}")
    branches = len(info.get("branches") or ())
    if branches > 1:
        parts.append(f"{branches} branches")
    row = "  ".join(parts)
    if info["id"] == current:
        row += "  (this session)"
    elif info.get("running"):
        row += "  (running)"
    return row


class SessionPickerScreen(ModalScreen[str | None]):
    """Pick a session; returns its id (``None`` on Escape).

    ``delete(id)`` removes a session and returns ``None``, or an error message to show. With
    ``branch_rows``, a session with more than one branch (``/fork``, ``/rewind``, ``/tree``) has
    a row under it for each branch; choosing one returns ``"ID#N"`` (branch ``N`` of ``ID``).
    ``row`` makes an item's row text instead of :func:`picker_row` (for items that are not
    sessions of ours), ``verb`` what Enter does, as the help line names it."""

    DEFAULT_CSS = """
    SessionPickerScreen { align: center middle; }
    SessionPickerScreen > Vertical {
        width: 90%; height: auto; max-height: 85%;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    SessionPickerScreen .title { text-style: bold; margin-bottom: 1; }
    SessionPickerScreen OptionList { height: auto; max-height: 40vh; }  /* the help line fits at 80x24 */
    SessionPickerScreen #picker-help { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("down", "move(1)", "Next", show=False),
        Binding("up", "move(-1)", "Previous", show=False),
        Binding("ctrl+d", "delete", "Delete", priority=True),  # before the Input's own
    ]

    def __init__(
        self,
        title: str,
        sessions: Sequence[dict[str, Any]],
        *,
        current: str | None = None,
        delete: Callable[[str], str | None] | None = None,
        branch_rows: bool = False,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        row: Callable[[dict[str, Any]], str] | None = None,
        verb: str = "resume",
    ) -> None:
        """``now`` is the clock the "active … ago" ages are measured with."""
        super().__init__()
        self._row = row
        self._verb = verb
        self._now = now
        self._title = title
        self._branch_rows = branch_rows
        self._ids: list[str] = []  # the option rows' ids, in order
        self.sessions = list(sessions)
        self.current = current
        self._delete = delete
        self.shown: list[dict[str, Any]] = list(self.sessions)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._title, classes="title")
            yield Input(placeholder="Type to filter: name, id, prompt text", id="filter")
            yield OptionList(id="sessions")
            help_text = f"enter: {self._verb} · esc: cancel"
            if self._delete is not None:
                help_text += " · ctrl+d: delete"
            empty = sum(1 for s in self.sessions if self._empty(s))
            if empty:
                help_text += f"\n{empty} session(s) with no prompt hidden (type an id to find one)"
            yield Static(help_text, id="picker-help", markup=False)

    def on_mount(self) -> None:
        self._refill("")
        self.query_one("#filter", Input).focus()

    def _empty(self, info: dict[str, Any]) -> bool:
        """No prompt, no name, and not the session the TUI is in: nothing to resume."""
        return not info.get("firstPrompt") and not info.get("name") and info["id"] != self.current

    def _refill(self, query: str) -> None:
        listing = self.query_one("#sessions", OptionList)
        listing.clear_options()
        self.shown = [
            s for s in self.sessions if matches(s, query) and (query or not self._empty(s))
        ]
        now = self._now()
        options: list[Option] = []
        for s in self.shown:
            text = self._row(s) if self._row else picker_row(s, current=self.current, now=now)
            row = Text(inert(text))  # never markup
            options.append(Option(row, id=s["id"]))
            branches = s.get("branches") or []
            if self._branch_rows and len(branches) > 1:
                for b in branches:
                    summary = f" — {b['summary'][:_PROMPT]}" if b.get("summary") else ""
                    options.append(
                        Option(
                            Text(inert(f"    ⎇ branch {b['id']}{summary}")),
                            id=f"{s['id']}#{b['id']}",
                        )
                    )
        self._ids = [str(o.id) for o in options]
        listing.add_options(options)
        if self.shown:
            listing.highlighted = 0

    @on(Input.Changed, "#filter")
    def _filtered(self, event: Input.Changed) -> None:
        self._refill(event.value)

    @on(Input.Submitted, "#filter")
    def _submitted(self, event: Input.Submitted) -> None:
        del event
        self._pick()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def _pick(self) -> None:
        listing = self.query_one("#sessions", OptionList)
        index = listing.highlighted
        if index is not None and 0 <= index < len(self._ids):
            self.dismiss(self._ids[index])

    def action_move(self, step: int) -> None:
        listing = self.query_one("#sessions", OptionList)
        if not self._ids:
            return
        index = listing.highlighted if listing.highlighted is not None else -step
        listing.highlighted = max(0, min(len(self._ids) - 1, index + step))

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_delete(self) -> None:
        listing = self.query_one("#sessions", OptionList)
        index = listing.highlighted
        if self._delete is None or index is None or not 0 <= index < len(self._ids):
            return
        wanted = self._ids[index].partition("#")[0]  # a branch row deletes its session
        target = next(s for s in self.shown if s["id"] == wanted)
        label = f"“{target['name']}” ({target['id']})" if target.get("name") else target["id"]
        label = inert(label)
        delete = self._delete

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            error = delete(target["id"])
            if error is not None:
                self.notify(error, severity="error")
                return
            self.sessions = [s for s in self.sessions if s["id"] != target["id"]]
            self._refill(self.query_one("#filter", Input).value)
            self.notify(f"Deleted session {target['id']}")

        self.app.push_screen(
            ConfirmScreen(
                f"Delete session {label}?",
                "Its conversation, files history and logs are removed for good.",
                "Delete",
                "Keep",
            ),
            answered,
        )


class SessionPickerApp(App[str | None]):
    """``coding-agent --resume`` without an id: the picker as an app of its own."""

    def __init__(
        self,
        sessions: Sequence[dict[str, Any]],
        *,
        delete: Callable[[str], str | None] | None = None,
    ) -> None:
        super().__init__()
        self._sessions = sessions
        self._delete = delete

    def on_mount(self) -> None:
        self.push_screen(
            SessionPickerScreen("Resume a session", self._sessions, delete=self._delete),
            self.exit,
        )
