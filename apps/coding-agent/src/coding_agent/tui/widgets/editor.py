"""The prompt editor: a multi-line ``TextArea`` with submit keys, history and completion.

Keys (pi's defaults, docs/design/agent.md#keys):

* Enter submits; while a turn runs, Alt+Enter submits as a follow-up (it waits for the turn's
  end instead of steering it); with no turn running, Alt+Enter inserts a newline;
* Shift+Enter or Ctrl+J inserts a newline (Shift+Enter needs a terminal that reports it: not
  tmux, see :mod:`coding_agent.tui.terminal`);
* Up on the first line / Down on the last line walk the history of submitted texts;
* Tab completes a path being typed (a word containing ``/``);
* Ctrl+G (bound by the app) edits the text in ``$VISUAL``/``$EDITOR``, see
  :meth:`PromptEditor.edit_externally`;
* a paste of more than 10 lines or 1,000 characters shows as a marker, ``[Pasted text #1 +60
  lines]``, that Backspace deletes whole; the text behind it is what is sent (see
  :mod:`coding_agent.tui.widgets.pastes`).

Completion shows in a dropdown, the :class:`~coding_agent.tui.widgets.palette.CompletionPalette`
the app places just above the editor (:attr:`PromptEditor.palette`). It opens by itself for

* a ``/command`` being typed (the whole text is ``/`` and a name, no space yet): the registered
  commands, each with its arguments (a skill's or a template's ``argument-hint``) dimmed after
  its name and its description, fuzzy-ranked;
* an ``@mention`` being typed anywhere: the project's files (see
  :mod:`coding_agent.tui.complete.files`), fuzzy-ranked;

and Tab opens it for a path with several completions. While it is open, Up/Down move its
highlight instead of walking the history, Tab or Enter accept the highlighted row and Escape
closes it (until the text changes) without reaching the app's abort key. Enter still submits a
command typed out exactly, so ``/quit`` + Enter quits at once.

Once the text is a command's name and one space (``/review-pr `` and the cursor at its end),
the command's arguments show dimmed after the cursor, as Claude Code shows a command's
``argument-hint`` (:attr:`PromptEditor.argument_hint`; TextArea's ``suggestion``, but Right
never writes it: it tells what to type, it is not text to accept). The first key typed
replaces it.

The editor does not decide what a submission *means* (prompt, steer, follow-up, command): it posts
:class:`PromptEditor.Submitted` and the app decides.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from textual import events, on
from textual.message import Message
from textual.widgets import TextArea
from textual.widgets.text_area import Location

from chord import inert
from coding_agent.tui.complete import (
    FileIndex,
    common_prefix,
    complete_path,
    looks_like_path,
    rank_commands,
    rank_paths,
)
from coding_agent.tui.widgets.external_editor import ExternalEditorError, run_external_editor
from coding_agent.tui.widgets.palette import CompletionPalette, Suggestion
from coding_agent.tui.widgets.pastes import Pastes

__all__ = ["MENTION_LIMIT", "PromptEditor", "mention"]

MENTION_LIMIT = 10
"""How many files an ``@mention`` dropdown lists."""

_COMMAND = re.compile(r"/[^\s/]*")
_COMMAND_AND_SPACE = re.compile(r"/([^\s/]+) ")
_WORD_BEFORE = re.compile(r"\S*\Z")
_WORD_AFTER = re.compile(r"\S*")

DEFAULT_KEY_ACTIONS = {
    "enter": "submit",
    "alt+enter": "follow_up",
    "shift+enter": "newline",
    "ctrl+j": "newline",
}
"""The editor's own keys (``keybindings.toml`` rebinds them)."""

_CommandSource = Callable[[], Mapping[str, Any] | Iterable[str]]
"""Where command names (and descriptions) come from, asked afresh each time."""


@dataclass(frozen=True, slots=True)
class _Token:
    """The text a completion would replace: ``start``..``end`` on one line."""

    kind: Literal["command", "mention", "path"]
    query: str
    start: Location
    end: Location


def mention(path: str) -> str:
    """How an ``@`` mention of ``path`` is written: ``@path``, or ``@"path"`` when the path holds
    whitespace or a quote (so the model reads where it ends; ``"`` and ``\\`` are escaped)."""
    if not any(char.isspace() or char in '"\\' for char in path):
        return f"@{path}"
    escaped = path.replace("\\", "\\\\").replace('"', '\\"')
    return f'@"{escaped}"'


class PromptEditor(TextArea):
    """Where the user types."""

    class Submitted(Message):
        """The user submitted ``text`` (folded pastes expanded); ``follow_up`` when Alt+Enter
        was used."""

        def __init__(self, editor: PromptEditor, text: str, follow_up: bool) -> None:
            super().__init__()
            self.editor = editor
            self.text = text
            self.follow_up = follow_up

    def __init__(
        self,
        *,
        commands: _CommandSource = tuple,
        cwd: Callable[[], str | os.PathLike[str] | None] = lambda: None,
        id: str | None = None,
    ) -> None:
        """``commands`` returns the command names, or a mapping of names to descriptions
        (strings, or objects with a ``description`` such as chord's ``SlashCommand``).
        ``cwd`` returns the folder ``@mentions`` and relative paths start from (``None``: the
        process's working folder)."""
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus")
        self.sent_history: list[str] = []
        self._history_index: int | None = None
        self._draft = ""
        self._commands = commands
        self._cwd = cwd
        self.palette = CompletionPalette(on_pick=self._picked, id=f"{id}-palette" if id else None)
        """The dropdown of suggestions; the app mounts it (just above the editor)."""
        self._token: _Token | None = None
        self._dismissed: str | None = None  # the text Escape closed the palette on
        self._pinned: str | None = None  # the text a Tab-opened palette belongs to
        self._file_index: FileIndex | None = None
        self.key_actions: dict[str, str] = dict(DEFAULT_KEY_ACTIONS)
        """Key → ``submit``, ``follow_up`` or ``newline`` (keybindings.toml changes it)."""
        self.follow_up_newline = True
        """The follow-up key (Alt+Enter) inserts a newline: the app sets it while no turn
        runs (there is nothing to follow up, and tmux delivers no Shift+Enter)."""
        self.pastes = Pastes()
        """The large pastes shown as markers, and the text behind each."""

    # -- submission --------------------------------------------------------------------------
    def submit(self, *, follow_up: bool = False) -> None:
        text = self.text
        if not text.strip():
            return
        self._close_palette()
        self.remember(text)  # as shown: a recalled marker still stands for its paste
        self.clear()
        self.post_message(self.Submitted(self, self.pastes.expand(text), follow_up))

    @property
    def expanded_text(self) -> str:
        """The text as it would be sent: each paste marker replaced by what was pasted."""
        return self.pastes.expand(self.text)

    def remember(self, text: str) -> None:
        """Add ``text`` to the history (no consecutive duplicates) and end history browsing."""
        if not self.sent_history or self.sent_history[-1] != text:
            self.sent_history.append(text)
        self._history_index = None
        self._draft = ""

    def restore(self, text: str) -> None:
        """Put ``text`` back in front of whatever is being typed (a failed send, an abort)."""
        current = self.text
        text = self.pastes.fold(text)
        combined = text if not current.strip() else f"{text}\n\n{current}"
        self.load_text(combined)
        self.move_cursor(self.document.end)

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        action = self.key_actions.get(key)
        if key in ("tab", "escape") or action == "submit":
            self._refresh_palette()  # keys typed ahead arrive before the text's Changed message
        palette_open = self.palette.is_open
        if key == "escape" and palette_open:
            self._handled(event)
            self.dismiss_palette()
            return
        if action == "submit":
            self._handled(event)
            if palette_open and not self._enter_submits():
                self.accept_suggestion()
            else:
                self.submit()
            return
        if action == "follow_up" and not self.follow_up_newline:
            self._handled(event)
            self.submit(follow_up=True)
            return
        if action in ("newline", "follow_up"):
            self._handled(event)
            start, end = self.selection
            self.replace("\n", start, end, maintain_selection_offset=False)
            return
        if key == "tab" and (self.accept_suggestion() if palette_open else self._complete()):
            self._handled(event)
            return
        await super()._on_key(event)

    @staticmethod
    def _handled(event: events.Key | events.Paste) -> None:
        event.stop()
        event.prevent_default()

    # -- large pastes ------------------------------------------------------------------------
    async def _on_paste(self, event: events.Paste) -> None:
        """A large paste goes in as its marker (:class:`Pastes`); a small one as it is
        (``TextArea._on_paste``, which Textual calls after this one unless prevented)."""
        marker = None if self.read_only else self.pastes.marker_for(event.text)
        if marker is None:
            return
        self._handled(event)
        start, end = self.selection
        self.replace(marker, start, end, maintain_selection_offset=False)
        self.focus()

    def action_delete_left(self) -> None:
        """Backspace; in or just after a paste marker it deletes the marker whole."""
        if not self._delete_marker(before=True):
            super().action_delete_left()

    def action_delete_right(self) -> None:
        """Delete; in or just before a paste marker it deletes the marker whole."""
        if not self._delete_marker(before=False):
            super().action_delete_right()

    def _delete_marker(self, *, before: bool) -> bool:
        if self.read_only or not self.selection.is_empty or not len(self.pastes):
            return False
        row, column = self.cursor_location
        span = self.pastes.span_at(self.document[row], column, before=before)
        if span is None:
            return False
        self.replace("", (row, span[0]), (row, span[1]), maintain_selection_offset=False)
        return True

    # -- history -----------------------------------------------------------------------------
    def action_cursor_up(self, select: bool = False) -> None:
        if not select:
            self._refresh_palette()
        if not select and self.palette.is_open:
            self.palette.move(-1)
            return
        if not select and self.cursor_location[0] == 0 and self._history_back():
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if not select:
            self._refresh_palette()
        if not select and self.palette.is_open:
            self.palette.move(1)
            return
        last_row = self.document.line_count - 1
        if not select and self.cursor_location[0] == last_row and self._history_forward():
            return
        super().action_cursor_down(select)

    def _history_back(self) -> bool:
        if not self.sent_history:
            return False
        if self._history_index is None:
            self._draft = self.text
            index = len(self.sent_history) - 1
        elif self._history_index == 0:
            return True
        else:
            index = self._history_index - 1
        self._history_index = index
        self._recall(self.sent_history[index])
        self.move_cursor((0, len(self.document[0])))
        return True

    def _history_forward(self) -> bool:
        if self._history_index is None:
            return False
        index = self._history_index + 1
        if index >= len(self.sent_history):
            self._history_index = None
            self._recall(self._draft)
        else:
            self._history_index = index
            self._recall(self.sent_history[index])
        self.move_cursor(self.document.end)
        return True

    def _recall(self, text: str) -> None:
        """Show a history entry; a recalled ``/command`` opens no palette (Up keeps walking)."""
        self._close_palette()
        self._dismissed = text
        self.load_text(text)

    # -- a command's arguments, after ``/name `` ---------------------------------------------
    @property
    def argument_hint(self) -> str:
        """What the arguments of the command typed are (``[pr-number] [priority]``), while the
        text is ``/name `` and the cursor at its end; ``""`` otherwise or when it takes none.
        Shown after the cursor, dimmed, as plain text (never markup) made inert."""
        match = _COMMAND_AND_SPACE.fullmatch(self.text)
        if match is None or self.cursor_location != self.document.end:
            return ""
        return inert(_argument_hint(self._commands(), match.group(1)))

    def update_suggestion(self) -> None:
        """TextArea's hook after every edit: the ghost text is the command's arguments."""
        self.suggestion = self.argument_hint

    @on(TextArea.SelectionChanged)
    def _cursor_moved(self) -> None:
        self.update_suggestion()  # only with the cursor at the end: it shows where it is

    def action_cursor_right(self, select: bool = False) -> None:
        """Right moves the cursor; unlike TextArea's, it never writes the ghost text (here
        the arguments' hint, not a completion)."""
        self.suggestion = ""
        try:
            super().action_cursor_right(select)
        finally:
            self.update_suggestion()

    # -- the palette -------------------------------------------------------------------------
    def completions(self) -> list[str]:
        """Command names matching a ``/name`` being typed, best first (empty otherwise)."""
        text = self.text
        if not _COMMAND.fullmatch(text):
            return []
        return rank_commands(text[1:], self._commands())

    def accept_suggestion(self, index: int | None = None) -> bool:
        """Write the highlighted (or ``index``-th) suggestion in place of its token.

        Returns whether anything was accepted (``False`` while the palette is closed).
        """
        token = self._token
        items = self.palette.suggestions
        if token is None or not items:
            return False
        chosen = self.palette.selected if index is None else items[index]
        if chosen is None:
            return False
        self._close_palette()
        self._insert(chosen.value, token)
        return True

    def _insert(self, value: str, token: _Token) -> None:
        """Replace ``token`` with ``value``, not doubling a space that already follows it."""
        row, end = token.end
        line = self.document[row]
        if value.endswith(" ") and end < len(line) and line[end].isspace():
            value = value[:-1]
        self.replace(value, token.start, token.end, maintain_selection_offset=False)

    def dismiss_palette(self) -> None:
        """Close the palette; it stays closed until the text changes."""
        self._dismissed = self.text
        self._close_palette()

    def _close_palette(self) -> None:
        self._token = None
        self._pinned = None
        self.palette.hide()

    def _picked(self, index: int) -> None:
        self.accept_suggestion(index)
        self.focus()

    def _enter_submits(self) -> bool:
        """Enter on an exactly typed command runs it instead of accepting a suggestion."""
        token, chosen = self._token, self.palette.selected
        return (
            token is not None
            and token.kind == "command"
            and chosen is not None
            and chosen.label == "/" + token.query
        )

    @on(TextArea.Changed)
    @on(TextArea.SelectionChanged)
    def _refresh_palette(self) -> None:
        """Open, update or close the palette for the token at the cursor."""
        text = self.text
        if self._pinned is not None:
            if self._pinned == text:
                return
            self._pinned = None
        if self._dismissed is not None:
            if self._dismissed == text:
                return
            self._dismissed = None
        token = self._token_at_cursor()
        suggestions = self._suggest(token) if token is not None else []
        self._token = token if suggestions else None
        self.palette.show(suggestions)

    def _token_at_cursor(self) -> _Token | None:
        row, column = self.cursor_location
        if row == 0 and _COMMAND.fullmatch(self.text):
            return _Token("command", self.text[1:], (0, 0), self.document.end)
        line = self.document[row]
        before = _WORD_BEFORE.search(line, 0, column)
        word = before.group() if before else ""
        if word.startswith("@"):
            after = _WORD_AFTER.match(line, column)
            end = column + (len(after.group()) if after else 0)
            return _Token("mention", word[1:], (row, column - len(word)), (row, end))
        return None

    def _suggest(self, token: _Token) -> list[Suggestion]:
        if token.kind == "command":
            table = self._commands()
            rows: list[Suggestion] = []
            shown: set[tuple[str, str]] = set()
            for name in rank_commands(token.query, table):
                description = _describe(table, name)
                hint = _argument_hint(table, name)
                # one thing under several names (a skill's /NAME, /skill:NAME and
                # /PLUGIN:NAME: the same last part and description) shows once, under the
                # best-ranked name; the others still run when typed
                same = (f"{hint}  {description}", name.rsplit(":", 1)[-1])
                if description and same in shown:
                    continue
                shown.add(same)
                rows.append(Suggestion(f"/{name}", f"/{name} ", description, hint))
            return rows
        index = self._files()
        if index.stale and not index.scanning:
            self.run_worker(self._scan(index), group="file-index", exit_on_error=False)
        return [
            Suggestion(path, f"{mention(path)} ")
            for path in rank_paths(token.query, index.files, limit=MENTION_LIMIT)
        ]

    def _root(self) -> Path:
        cwd = self._cwd()
        return Path(cwd) if cwd is not None else Path.cwd()

    def _files(self) -> FileIndex:
        root = self._root()
        if self._file_index is None or self._file_index.root != root:
            self._file_index = FileIndex(root)
        return self._file_index

    async def _scan(self, index: FileIndex) -> None:
        await index.refresh()
        if index is self._file_index:
            self._refresh_palette()

    @property
    def file_index(self) -> FileIndex:
        """The project's file list behind ``@mentions`` (scanned on demand, cached)."""
        return self._files()

    # -- Tab completion ----------------------------------------------------------------------
    def _complete(self) -> bool:
        """Tab with the palette closed: reopen it for a token, else complete a path.

        A ``/name`` no command matches may still be an absolute path (``/et`` -> ``/etc/``).
        """
        self._dismissed = None
        token = self._token_at_cursor()
        if token is not None:
            suggestions = self._suggest(token)
            if len(suggestions) == 1:
                self._insert(suggestions[0].value, token)
                return True
            if suggestions:
                self._token = token
                self.palette.show(suggestions)
                return True
            if token.kind == "mention":
                return True
        row, column = self.cursor_location
        before = _WORD_BEFORE.search(self.document[row], 0, column)
        word = before.group() if before else ""
        if not looks_like_path(word):
            return False
        matches = complete_path(word, self._root())
        start = (row, column - len(word))
        if len(matches) == 1:
            self.replace(matches[0], start, (row, column), maintain_selection_offset=False)
            return True
        if not matches:
            self.app.bell()
            return True
        common = common_prefix(matches)
        if len(common) > len(word):
            self.replace(common, start, (row, column), maintain_selection_offset=False)
        self._token = _Token("path", common, start, (row, start[1] + len(common)))
        self._pinned = self.text
        self.palette.show([Suggestion(_last_part(match), match) for match in matches])
        return True

    # -- external editor ---------------------------------------------------------------------
    async def edit_externally(self) -> bool:
        """Edit the text in ``$VISUAL``/``$EDITOR`` (fallback ``vi``) and load the result.

        The editor shows the pastes' full text; those still whole when it closes are folded back
        behind their markers. On failure (the editor cannot start, or exits non-zero) the text
        stays as it was and a warning toast says why; returns whether the text was replaced.
        """
        try:
            edited = await run_external_editor(self.app, self.expanded_text)
        except ExternalEditorError as error:
            self.app.notify(str(error), title="External editor", severity="warning")
            return False
        self._history_index = None
        self.load_text(self.pastes.fold(edited))
        self.move_cursor(self.document.end)
        return True


def _describe(table: Mapping[str, Any] | Iterable[str], name: str) -> str:
    """The help of ``/name``: the table's text, or a registered command's ``help`` (its
    ``description`` when it has none; the arguments are :func:`_argument_hint`)."""
    if not isinstance(table, Mapping):
        return ""
    value = table.get(name)
    if isinstance(value, str):
        return value
    help_line = getattr(value, "help", "")
    if _argument_hint(table, name) and isinstance(help_line, str):
        return help_line  # a SlashCommand's description is "ARGS  help"
    description = getattr(value, "description", "")
    return description if isinstance(description, str) else ""


def _argument_hint(table: Mapping[str, Any] | Iterable[str], name: str) -> str:
    """The arguments of ``/name`` as its usage shows them (``[pr-number] [priority]``, a
    skill's or a template's ``argument-hint``; ``[MODEL]``): the registered command's
    ``usage`` after its name (:class:`chord.textual.SlashCommand`), ``""`` for none."""
    if not isinstance(table, Mapping):
        return ""
    usage = getattr(table.get(name), "usage", "")
    if not isinstance(usage, str) or not usage.startswith(f"/{name}"):
        return ""
    return usage[len(name) + 1 :].strip()


def _last_part(path: str) -> str:
    """``src/app/`` -> ``app/``, ``src/a.py`` -> ``a.py``: the part a path completion adds."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name + "/" if path.endswith("/") else name
