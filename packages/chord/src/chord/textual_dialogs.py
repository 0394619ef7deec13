"""The dialogs of :mod:`chord.textual`: answers need deliberate keys (re-exported from there).

A dialog pops up while the user may be typing, so its keys are chosen so that typed text never
answers it:

* **Arming.** For :data:`ARMING_SECONDS` after a dialog appears it answers nothing: the options
  are greyed and the key line reads "…". A key already on its way when the dialog opened lands in
  that window. Text keys (letters, digits, space, a paste) go on into the text field that had the
  focus under the dialog (the prompt editor keeps what the user was typing) and start the window
  again, so a user still typing never answers a dialog; other keys (Enter, Escape, arrows) do
  nothing.
* **Deliberate choices**, as Claude Code's: ↑↓ (or the option's number, 1–9) move the highlight,
  Enter answers with the highlighted option, Escape cancels (``None``; a yes/no dialog's "no").
  No letter answers anything, so no choice, the most dangerous included, is ever one key press.
  A dialog with a free-text field (``allow_text``) takes typed letters into that field once armed.
* **One answer.** A second Enter already queued, a click, or the dialog taken away (another
  window answered) find it answered and do nothing; only the dialog's own screen is ever popped.
  :meth:`DialogScreen.close_from_outside` takes a dialog away, with a notice when the user had
  it on screen unanswered (not when the user's own interrupt closed it).
* **Nothing cut silently.** A body taller than its box scrolls (PgUp/PgDn, the mouse wheel) and
  a line under it says how much more there is ("… 48 more lines ↓ · PgDn"). The title, the
  options and the key line always keep their rows: on a small screen the body gives up its rows
  first (down to one), then the option list scrolls (the highlighted option always in view); a
  dialog that would be cramped so drops its blank rows first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Button, Input, Label, OptionList, Static, TextArea
from textual.widgets.option_list import Option

__all__ = [
    "ARMING_SECONDS",
    "Choice",
    "ChoiceScreen",
    "ConfirmScreen",
    "DialogScreen",
]

ARMING_SECONDS = 0.4
"""How long (seconds) a dialog answers nothing after it appears, and after each text key typed
at it: keys already on their way when it opened never answer it."""

ARMING_LINE = "… (keys typed now stay in the editor)"
"""The key line while a dialog is arming."""
BODY_ROWS = 24
"""The most rows a dialog's body takes (fewer on a small screen); the rest scrolls."""
OPTION_ROWS = 15
"""The most rows a dialog's option list takes (fewer on a small screen); the rest scrolls."""
ROOMY_BODY_ROWS = 3
"""When the body would get fewer rows than this (or the options would scroll), the dialog goes
compact: no blank rows (padding, margins) and up to the whole screen's height, not 80% of it."""

ResultT = TypeVar("ResultT")


@dataclass(frozen=True, slots=True)
class Choice:
    """One option of :meth:`~chord.textual.Modal.choose`: the ``value`` returned, the ``label``
    shown (the value when empty) and an optional ``description``.

    The dialog numbers its options (``1.``, ``2.``, …): ↑↓ or the number move the highlight and
    Enter answers. There are no single-key shortcuts: a letter typed at a dialog never answers
    it. Put the safe option first (it is highlighted when the dialog opens) and the most far-
    reaching one last.
    """

    value: str
    label: str = ""
    description: str = ""


class _DialogBody(VerticalScroll, can_focus=False):
    """A dialog's body text: scrolls when taller than its box; tells its screen when the part
    out of view changes (the "more" line)."""

    DEFAULT_CSS = """
    _DialogBody { height: auto; max-height: 24; }
    _DialogBody > Static { height: auto; }
    """

    def __init__(self, content: str | Text) -> None:
        super().__init__(body_text(content), classes="body")

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._changed()

    def on_resize(self) -> None:
        self._changed()

    def _changed(self) -> None:
        parent = self.parent
        while parent is not None and not isinstance(parent, DialogScreen):
            parent = parent.parent
        if parent is not None:
            parent.update_more()


class _KeysLine(Static):
    """The dialog's dim key line ("…" while arming); when it wraps to another row, the body
    gets one row less."""

    def __init__(self) -> None:
        super().__init__(ARMING_LINE, classes="keys", markup=False)

    def on_resize(self) -> None:
        screen = self.screen
        if isinstance(screen, DialogScreen):
            screen.call_after_refresh(screen.fit_body)


def _set_max_height(widget: Widget, rows: int) -> None:
    """``max-height: rows`` (only when it changes: setting a style asks for a new layout)."""
    if widget.styles.max_height is None or widget.styles.max_height.value != rows:
        widget.styles.max_height = rows


def body_text(content: str | Text) -> Static:
    """The widget showing a dialog's body text (taken as it is: no markup)."""
    return Static(content, markup=False)


def more_text(above: int, below: int) -> str:
    """The "more" line of a scrolled body: how many lines are out of view, above and below."""
    parts: list[str] = []
    if above:
        parts.append(f"↑ {above} line{'s' if above != 1 else ''} above")
    if below:
        parts.append(f"… {below} more line{'s' if below != 1 else ''} ↓")
    if not parts:
        return ""
    return " · ".join(parts) + " · PgUp/PgDn scroll"


class DialogScreen(ModalScreen[ResultT], Generic[ResultT]):
    """The mechanics every chord dialog shares, so that typed text never answers one:

    * **arming**: for :data:`ARMING_SECONDS` after it appears the dialog answers nothing (its
      options greyed, its key line "…"); text keys (and a paste) go on into the text field
      focused under it (the prompt editor) and start that time again; Enter, Escape and arrows
      do nothing;
    * **deliberate keys**: no letter answers; ↑↓ or a number move, Enter answers, Escape
      cancels; a dialog with its own text field takes typed letters there once armed;
    * **one answer**: a second key, a click or :meth:`close_from_outside` after the answer do
      nothing, and only the dialog's own screen is ever popped;
    * **nothing cut**: a body taller than its box scrolls (PgUp/PgDn) under a line saying how
      many lines are out of view, and the options and key line always keep their rows.

    A subclass composes its widgets (the body through :meth:`body_widgets`, the key line
    through :meth:`keys_widget`), says which widget takes the focus once armed
    (:meth:`focus_target`) and what its key line says (:meth:`keys_line`), and answers through
    :meth:`answer`.
    """

    AUTO_FOCUS = None  # nothing has the focus while arming: every key reaches on_key
    BINDINGS: ClassVar[list[Any]] = [Binding("escape", "cancel", "Cancel", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self._armed = False
        self._answered = False
        self._arm_timer: Timer | None = None
        self._close_expected = False

    # -- state -----------------------------------------------------------------------------
    @property
    def armed(self) -> bool:
        """True while the dialog takes answers: :data:`ARMING_SECONDS` after it appeared or
        after the last text key typed at it, and until it has its answer (an answered dialog
        may still be on the screen stack for a moment; it takes nothing more). What a test
        waits for before it presses a dialog's keys."""
        return self._armed and not self._answered

    @property
    def answered(self) -> bool:
        """True once the dialog has its one answer (or was closed)."""
        return self._answered

    # -- what subclasses provide -----------------------------------------------------------
    def focus_target(self) -> Widget | None:
        """The widget focused once the dialog is armed."""
        return None

    def keys_line(self) -> str:
        """The key line once armed: what each key does."""
        return "enter answers · esc cancels"

    def takes_text(self) -> Input | None:
        """The dialog's own text field, when typed letters (once armed) belong there."""
        return None

    def number_key(self, number: int) -> bool:
        """Handle the number key ``number`` once armed; ``False``: not one of the options."""
        del number
        return False

    def extra_key(self, event: events.Key) -> bool:
        """Handle a key of the subclass's own once armed (``True``: handled)."""
        del event
        return False

    def body_widgets(self, body: str | Text) -> ComposeResult:
        """The body and its "more" line (nothing for an empty body)."""
        if body:
            yield _DialogBody(body)
            yield Static("", classes="more", markup=False)

    def keys_widget(self) -> Static:
        """The dim key line ("…" while arming, then :meth:`keys_line`)."""
        return _KeysLine()

    # -- arming ----------------------------------------------------------------------------
    def on_mount(self) -> None:
        self._disarm()
        self.call_after_refresh(self.fit_body)

    def on_resize(self) -> None:
        self.remove_class("-compact")  # roomy again if the new size allows it (fit_body)
        self.call_after_refresh(self.fit_body)

    def _disarm(self) -> None:
        self._armed = False
        self.add_class("-arming")
        self._set_keys_line(ARMING_LINE)
        if self._arm_timer is not None:
            self._arm_timer.stop()
        self._arm_timer = self.set_timer(ARMING_SECONDS, self._arm)

    def _arm(self) -> None:
        if self._answered:
            return
        self._armed = True
        self.remove_class("-arming")
        self._set_keys_line(self.keys_line())
        self.call_after_refresh(self.fit_body)  # the key line may now take another row
        target = self.focus_target()
        if target is not None and self.focused is None:
            self.set_focus(target)  # at once (Widget.focus() waits a message): armed = ready

    def _set_keys_line(self, text: str) -> None:
        for line in self.query(".keys").results(Static):
            line.update(text)

    # -- keys ------------------------------------------------------------------------------
    def on_key(self, event: events.Key) -> None:
        """Keys reach here after the focused widget (before any binding): arming and text."""
        if self._answered:
            self._swallow(event)
            return
        if isinstance(self.focused, Input):
            field = self.takes_text()
            if (
                field is not None
                and field is self.focused
                and event.is_printable
                and event.character
            ):
                # A letter read in the same burst as the one that moved the focus here (a fast
                # typist, a paste without bracketed paste, a loaded machine) was handed to the
                # widget focused then and bubbled up here; the field, which stops every letter
                # it takes, never saw it.
                self._swallow(event)
                field.insert_text_at_cursor(event.character)
            return  # otherwise the dialog's own text field takes its keys
        if event.key in ("pageup", "pagedown"):
            self._swallow(event)
            self.scroll_body(-1 if event.key == "pageup" else 1)
            return
        if self._armed and (
            (
                event.character
                and event.character.isdigit()
                and self.number_key(int(event.character))
            )
            or self.extra_key(event)
        ):
            self._swallow(event)
            return
        if event.is_printable and event.character:
            self._swallow(event)
            field = self.takes_text() if self._armed else None
            if field is not None:
                self.set_focus(field)
                field.insert_text_at_cursor(event.character)
            else:
                self._to_editor(event.character)
            return
        if not self._armed:
            self._swallow(event)  # Enter, Escape, arrows on their way: they answer nothing

    def on_paste(self, event: events.Paste) -> None:
        """A paste is text: into the dialog's field once armed, else into the editor."""
        if isinstance(self.focused, Input) or self._answered:
            return
        event.stop()
        field = self.takes_text() if self._armed else None
        if field is not None:
            self.set_focus(field)
            field.insert_text_at_cursor(event.text.splitlines()[0] if event.text else "")
        else:
            self._to_editor(event.text)

    def _to_editor(self, text: str) -> None:
        """Give ``text`` to the text field focused under the dialog and arm the dialog again."""
        self._disarm()
        stack = self.app.screen_stack
        if self not in stack or stack.index(self) == 0:
            return
        below = stack[stack.index(self) - 1].focused
        if isinstance(below, TextArea) and not below.read_only:
            below.replace(text, *below.selection, maintain_selection_offset=False)
        elif isinstance(below, Input):
            below.insert_text_at_cursor(text)

    @staticmethod
    def _swallow(event: events.Key) -> None:
        event.stop()
        event.prevent_default()

    # -- the body --------------------------------------------------------------------------
    def scroll_body(self, pages: int) -> None:
        """Scroll the body by ``pages`` pages (negative: up), from where the previous key is
        taking it (``scroll_target_y``) and at once: keys arriving in one burst (a held key, a
        loaded machine that reads several before it paints) each count. Textual's own
        ``scroll_page_down`` would start every one of them from the last painted position."""
        for body in self.query(_DialogBody):
            page = max(1, body.scrollable_content_region.height)
            y = max(0, min(body.scroll_target_y + pages * page, body.max_scroll_y))
            body.scroll_to(y=y, animate=False, immediate=True)

    def fit_body(self) -> None:
        """Share out the rows of the dialog's box (its ``max-height``) so the title, the
        options and the key line always show: the option list gets its rows (up to
        :data:`OPTION_ROWS`) as long as the body keeps one, the body what is left (up to
        :data:`BODY_ROWS`, the rest scrolls). When that leaves the body fewer than
        :data:`ROOMY_BODY_ROWS` or the option list too few for its options, the dialog goes
        compact (no blank rows, up to the whole screen's height) until the screen is resized;
        on a screen too small even then the option list scrolls too (it keeps the highlighted
        option in view)."""
        keys = next(iter(self.query(_KeysLine)), None)
        box = keys.parent if keys is not None else None
        if not isinstance(box, Widget):
            return
        bodies = [child for child in box.children if isinstance(child, _DialogBody)]
        lists = [child for child in box.children if isinstance(child, OptionList)]
        used = box.styles.gutter.height
        for child in box.children:
            if not child.display and not child.has_class("more"):
                continue
            used += child.styles.margin.top + child.styles.margin.bottom
            if child.has_class("more"):
                used += 1  # the "more" line's row, kept whether shown
            elif child not in bodies and child not in lists:
                used += child.outer_size.height
        height = box.styles.max_height
        free = (int(height.resolve(self.size, self.size)) if height else self.size.height) - used
        cramped = False
        body_least = 1 if bodies else 0
        for options in lists:
            gutter = options.styles.gutter.height
            width = max(1, options.size.width - options.styles.gutter.width)
            wanted = min(
                OPTION_ROWS, gutter + options.get_content_height(self.size, self.size, width)
            )
            fitted = max(gutter + 1, min(wanted, free - body_least))
            cramped = cramped or fitted < wanted
            _set_max_height(options, fitted)
            free -= fitted
        for body in bodies:
            rows = max(1, min(BODY_ROWS, free))
            cramped = cramped or rows < min(ROOMY_BODY_ROWS, body.virtual_size.height)
            _set_max_height(body, rows)
        if cramped and not self.has_class("-compact"):
            self.add_class("-compact")  # then share out the rows it gains
            self.call_after_refresh(self.fit_body)

    def update_more(self) -> None:
        """Refresh the "more" line from the body's scroll position."""
        for body in self.query(_DialogBody):
            hidden = max(0, body.virtual_size.height - body.scrollable_content_region.height)
            above = min(hidden, round(body.scroll_y))
            text = more_text(above, hidden - above)
            for line in self.query(".more").results(Static):
                line.update(text)
                line.display = bool(text)

    # -- answering -------------------------------------------------------------------------
    def answer(self, result: ResultT | None) -> bool:
        """Answer with ``result`` if the dialog is armed and not answered yet; ``True`` if this
        call answered it."""
        if not self._armed:
            return False
        return self._finish(result)

    def action_cancel(self) -> None:
        self.answer(None)

    def close_from_outside(self, notice: str = "") -> None:
        """Take the dialog away unanswered (result ``None``): its holder gave it up, e.g.
        another window answered. ``notice`` is a toast if it still waited for this user and
        the user did not cause the closing (:meth:`expect_close`). Idempotent."""
        if self._finish(None) and notice and not self._close_expected:
            self.app.notify(notice, severity="warning")

    def expect_close(self) -> None:
        """The user stopped what it asks about (Ctrl+C aborting its turn): no toast then."""
        self._close_expected = True

    def _finish(self, result: ResultT | None) -> bool:
        """Answer once: ``True`` if this call took the dialog off the screen."""
        if self._answered:
            return False
        self._answered = True
        if self._arm_timer is not None:
            self._arm_timer.stop()
        try:
            app = self.app
        except RuntimeError:  # no active app (Textual's NoActiveAppError): it is gone
            return False
        if self not in app.screen_stack:
            return False  # never shown, or already gone
        while app.screen is not self:  # a screen opened over the dialog goes with it
            app.screen.dismiss()
        self.dismiss(result)
        return True


class ConfirmScreen(DialogScreen[bool]):
    """A yes/no dialog: ←→ (or 1, 2) choose, Enter answers, Escape is "no"."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 80%; max-width: 100; height: auto; max-height: 80%;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    ConfirmScreen .title { text-style: bold; margin-bottom: 1; }
    ConfirmScreen .body { height: auto; overflow-y: auto; }
    ConfirmScreen .more { color: $text-muted; height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    ConfirmScreen Horizontal { height: auto; align-horizontal: right; margin-top: 1; }
    ConfirmScreen Button { margin-left: 2; }
    ConfirmScreen.-arming Button { opacity: 50%; }
    ConfirmScreen .keys { color: $text-muted; margin-top: 1; }
    ConfirmScreen.-compact > Vertical { max-height: 100%; padding: 0 2; }
    ConfirmScreen.-compact .title, ConfirmScreen.-compact Horizontal,
    ConfirmScreen.-compact .keys { margin: 0; }
    """

    def __init__(self, title: str, body: str, yes: str, no: str) -> None:
        super().__init__()
        self._title, self._body, self._yes, self._no = title, body, yes, no

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._title, classes="title", markup=False)
            yield from self.body_widgets(self._body)
            with Horizontal():
                yield Button(f"1 {self._yes}", id="yes", variant="success")
                yield Button(f"2 {self._no}", id="no", variant="error")
            yield self.keys_widget()

    def focus_target(self) -> Widget | None:
        return self.query_one("#yes", Button)

    def keys_line(self) -> str:
        return "←→ or 1-2 select · enter answers · esc cancels"

    def number_key(self, number: int) -> bool:
        if number not in (1, 2):
            return False
        self.set_focus(self.query_one("#yes" if number == 1 else "#no", Button))
        return True

    def extra_key(self, event: events.Key) -> bool:
        if event.key not in ("left", "right"):
            return False
        self.set_focus(self.query_one("#yes" if event.key == "left" else "#no", Button))
        return True

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.answer(event.button.id == "yes")

    def action_cancel(self) -> None:
        self.answer(False)


class ChoiceScreen(DialogScreen[str | None]):
    """Pick one option (↑↓ or its number, then Enter) or type an answer; Escape returns
    ``None``. ``hint`` ends the key line (say what Escape means here)."""

    DEFAULT_CSS = """
    ChoiceScreen { align: center middle; }
    ChoiceScreen > Vertical {
        width: 80%; max-width: 100; height: auto; max-height: 80%;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    ChoiceScreen .title { text-style: bold; margin-bottom: 1; }
    ChoiceScreen OptionList { height: auto; max-height: 15; margin-top: 1; }
    ChoiceScreen.-arming OptionList { opacity: 50%; }
    ChoiceScreen .body { height: auto; overflow-y: auto; }
    ChoiceScreen .more { color: $text-muted; height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    ChoiceScreen .keys { color: $text-muted; margin-top: 1; }
    ChoiceScreen.-compact > Vertical { max-height: 100%; padding: 0 2; }
    ChoiceScreen.-compact .title, ChoiceScreen.-compact OptionList,
    ChoiceScreen.-compact .keys { margin: 0; }
    """

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
            yield from self.body_widgets(self._body)
            if self._choices:
                yield OptionList(
                    *(
                        Option(_choice_label(n, c), id=str(n - 1))
                        for n, c in enumerate(self._choices, 1)
                    ),
                    id="choices",
                )
            if self._allow_text:
                yield Input(
                    placeholder="Type an answer and press Enter", id="answer", select_on_focus=False
                )
            yield self.keys_widget()

    def focus_target(self) -> Widget | None:
        if self._choices:
            return self.query_one("#choices", OptionList)
        if self._allow_text:
            return self.query_one("#answer", Input)
        return None

    def takes_text(self) -> Input | None:
        return self.query_one("#answer", Input) if self._allow_text else None

    def keys_line(self) -> str:
        parts: list[str] = []
        if self._choices:
            count = min(len(self._choices), 9)
            numbers = "1" if count == 1 else f"1-{count}"
            parts += [f"↑↓ or {numbers} select", "enter answers"]
        if self._allow_text:
            parts.append("type your own answer" if self._choices else "enter sends")
        parts.append(self._hint or "esc cancels")
        return " · ".join(parts)

    def number_key(self, number: int) -> bool:
        if not 1 <= number <= min(len(self._choices), 9):
            return False
        options = self.query_one("#choices", OptionList)
        self.set_focus(options)
        options.highlighted = number - 1
        return True

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.answer(self._choices[int(event.option.id or 0)].value)

    @on(Input.Submitted, "#answer")
    def _typed(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.answer(event.value)


def _choice_label(number: int, choice: Choice) -> Text:
    label = Text(choice.label or choice.value)
    prefix = f"{number}. " if number <= 9 else "   "
    return Text.assemble((prefix, "bold"), label)
