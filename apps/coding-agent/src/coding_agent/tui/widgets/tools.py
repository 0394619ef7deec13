"""A tool call as one card: what was asked, how it is going, and what came back.

A :class:`ToolCard` is created for every ``toolCall`` block of an assistant message (streamed or
stored). Three sources feed it, in order of arrival:

* the call's ``arguments`` (while the model streams them, then final);
* the live slot in ``turn.tools`` (status, ``waitingOn``, streamed ``output``, ``progress``);
* the ``pi.tool_result`` entry (the result text, ``isError`` and ``details``; an edit's
  ``details.diff`` is shown as a coloured diff).

Output is collapsible (Ctrl+O toggles every card); errors and diffs start expanded. Every text
a card shows (header, arguments, live tail, result, diff) is made inert (:func:`chord.inert`):
an ESC in a command or in a tool's output shows as ``\\x1b``, never acts on the terminal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.widget import Widget
from textual.widgets import Static

from chord import inert
from coding_agent.tui.document import content_text, short_json
from coding_agent.tui.widgets.collapsible import QuietCollapsible
from pico3 import ToolResultEntry, ToolSlot

__all__ = ["ToolCard", "diff_counts", "diff_text", "edit_counts", "edit_preview", "tool_title"]

_OUTPUT_PREVIEW_LINES = 12
_LIVE_TAIL_LINES = 20
_STATUS_ICONS = {
    "pending": ("○", "dim"),
    "running": ("◐", "cyan"),
    "done": ("✓", "green"),
    "error": ("✗", "red"),
    "aborted": ("■", "yellow"),
}
_SUMMARY_KEYS = ("command", "path", "pattern", "query", "url", "question")
_TITLED = ("bash", "read", "write", "grep", "find", "ls", "todo")
"""Tools whose header (:func:`tool_title`) says everything their arguments hold."""


def diff_text(diff: str) -> Text:
    """Colour a diff: ``+`` lines green, ``-`` lines red, headers and context dim (inert)."""
    out = Text()
    for index, line in enumerate(inert(diff).splitlines()):
        if index:
            out.append("\n")
        if line.startswith(("+++", "---", "@@")):
            out.append(line, style="bold dim")
        elif line.startswith("+"):
            out.append(line, style="green")
        elif line.startswith("-"):
            out.append(line, style="red")
        else:
            out.append(line, style="dim")
    return out


def edit_preview(arguments: Mapping[str, Any]) -> str | None:
    """A ``-``/``+`` preview of an ``edit`` call's replacements, before it runs."""
    edits = arguments.get("edits")
    if not isinstance(edits, list):
        if "oldText" in arguments and "newText" in arguments:
            edits = [{"oldText": arguments["oldText"], "newText": arguments["newText"]}]
        else:
            return None
    lines: list[str] = []
    for edit in edits:
        if not isinstance(edit, dict):
            continue
        old, new = edit.get("oldText"), edit.get("newText")
        if not isinstance(old, str) or not isinstance(new, str):
            continue
        if lines:
            lines.append("@@")
        lines.extend(f"-{line}" for line in old.splitlines())
        lines.extend(f"+{line}" for line in new.splitlines())
    return "\n".join(lines) if lines else None


def _clip(text: str, limit: int = 100) -> str:
    first = text.splitlines()[0] if text.splitlines() else text
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _count_lines(text: Any) -> int:
    return len(text.splitlines()) if isinstance(text, str) else 0


def edit_counts(arguments: Any) -> tuple[int, int] | None:
    """Lines an ``edit`` call adds and removes, or ``None``: each replacement's line diff
    (``oldText`` → ``newText``), so the count before the call runs is the count of the diff it
    applies (a replacement that keeps two lines and adds four is +4 −0, not +6 −2)."""
    if not isinstance(arguments, dict):
        return None
    edits = arguments.get("edits")
    if not isinstance(edits, list):
        if "oldText" in arguments or "newText" in arguments:
            edits = [arguments]
        else:
            return None
    import difflib

    added = removed = 0
    for edit in edits:
        if not isinstance(edit, dict):
            continue
        old, new = edit.get("oldText"), edit.get("newText")
        old_lines = old.splitlines() if isinstance(old, str) else []
        new_lines = new.splitlines() if isinstance(new, str) else []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
            None, old_lines, new_lines, autojunk=False
        ).get_opcodes():
            if tag != "equal":
                removed += i2 - i1
                added += j2 - j1
    return added, removed


def diff_counts(diff: str) -> tuple[int, int]:
    """``(+added, −removed)`` lines of a unified diff."""
    added = sum(
        1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")
    )
    removed = sum(
        1 for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")
    )
    return added, removed


def tool_title(name: str, arguments: Any, counts: tuple[int, int] | None = None) -> str:
    """The card's header in the tool's own terms: ``read src/x.py:10-80``, ``bash: pytest -q``,
    ``edit src/x.py (+3 −1)``, ``write notes.md (12 lines)``, ``grep "TODO" in src``; another
    tool shows its name and its first string argument (never raw JSON)."""
    args: dict[str, Any] = arguments if isinstance(arguments, dict) else {}
    path = args.get("path")
    path = path if isinstance(path, str) and path else None
    if name == "bash" and isinstance(args.get("command"), str):
        extras = (
            [f"timeout {args['timeout']}s"] if type(args.get("timeout")) in (int, float) else []
        )
        extras += ["background"] if args.get("background") is True else []
        more = f"  ({', '.join(extras)})" if extras else ""
        return f"bash: {_clip(args['command'])}{more}"
    if name == "read" and path:
        offset, limit = args.get("offset"), args.get("limit")
        start = offset if type(offset) is int and offset > 0 else 1
        if type(limit) is int and limit > 0:
            return f"read {path}:{start}-{start + limit - 1}"
        return f"read {path}:{start}-" if start > 1 else f"read {path}"
    if name == "edit" and path:
        counts = counts or edit_counts(args)
        return f"edit {path} (+{counts[0]} −{counts[1]})" if counts else f"edit {path}"
    if name == "write" and path:
        lines = _count_lines(args.get("content"))
        return f"write {path} ({lines} line{'s' if lines != 1 else ''})"
    if name in ("grep", "find") and isinstance(args.get("pattern"), str):
        where = f" in {path}" if path else ""
        return f'{name} "{_clip(args["pattern"], 60)}"{where}'
    if name == "ls":
        return f"ls {path or '.'}"
    if name == "todo" and isinstance(args.get("todos"), list):
        items = [t for t in args["todos"] if isinstance(t, dict)]  # pyright: ignore[reportUnknownVariableType]
        done = sum(t.get("status") == "completed" for t in items)  # pyright: ignore[reportUnknownMemberType]
        return f"todo ({done}/{len(items)} done)"
    for key in _SUMMARY_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return f"{name}: {_clip(value)}"
    if args:
        return f"{name} {short_json(args, 100)}"
    return name


class ToolCard(Vertical):
    """One tool call with its arguments, live status and result."""

    def __init__(self, call_id: str, name: str, arguments: Any) -> None:
        super().__init__(classes="tool-card")
        self.call_id = call_id
        self.tool_name = name
        self._arguments: Any = arguments
        self._status = "pending"
        self._extra = ""
        self._counts: tuple[int, int] | None = None  # an edit's +/− from its result's diff
        self._result_seen = False
        self._header = Static(classes="tool-header", markup=False)
        self._args = Static(classes="tool-args", markup=False)
        self._live = Static(classes="tool-live", markup=False)
        self._body = Static(classes="tool-output", markup=False)
        self._output = QuietCollapsible(self._body, title="Output", collapsed=True)
        self._output.add_class("tool-output-box")
        self._output.display = False
        self._live.display = False
        self._shown = {"result": "", "header": "", "args": "", "live": ""}
        self._output_title = ""  # "Output · N line(s)" once a result came (not for a diff)
        self._args.display = bool(self._args_content())

    @property
    def status(self) -> str:
        return self._status

    @property
    def result_text(self) -> str:
        """The plain text of the shown result (the diff for a successful edit)."""
        return self._shown["result"]

    @property
    def header_text(self) -> str:
        """The plain text of the header line (status, name, summary, waiting/progress)."""
        return self._shown["header"]

    @property
    def args_text(self) -> str:
        """The plain text of the arguments block (an edit preview or JSON); empty if hidden."""
        return self._shown["args"]

    @property
    def live_text(self) -> str:
        """The tail of the streamed output while the tool runs."""
        return self._shown["live"]

    def compose(self) -> ComposeResult:
        # Parts without content are mounted on demand: history cards stay cheap to lay out.
        yield self._header
        for part in (self._args, self._live, self._output):
            if part.display:
                yield part

    def _place(self, part: Widget) -> None:
        """Mount ``part`` (in its fixed position) once it has something to show."""
        if not part.display or part.is_attached or not self.is_mounted:
            return
        order = [self._header, self._args, self._live, self._output]
        before = next((w for w in order[order.index(part) + 1 :] if w.is_attached), None)
        if before is not None:
            self.mount(part, before=before)
        else:
            self.mount(part)

    def on_mount(self) -> None:
        self._render_header()
        self._render_args()
        for part in (self._args, self._live, self._output):
            self._place(part)

    def set_arguments(self, arguments: Any) -> None:
        """New (streamed or final) arguments."""
        if arguments is self._arguments:
            return
        self._arguments = arguments
        if self.is_mounted:
            self._render_header()
            self._render_args()

    def set_slot(self, slot: ToolSlot) -> None:
        """Follow the live ``turn.tools`` slot of this call."""
        if self._result_seen:
            return
        self._status = slot.status
        extra: list[str] = []
        if slot.waiting_on:
            extra.append(f"waiting on {slot.waiting_on}")
        if slot.progress:
            extra.append(slot.progress)
        self._extra = " · ".join(extra)
        output = slot.output
        if output:
            tail = inert("\n".join(output.splitlines()[-_LIVE_TAIL_LINES:]))
            self._shown["live"] = tail
            self._live.update(tail)
            self._live.display = True
            self._place(self._live)
        if self.is_mounted:
            self._render_header()

    def set_result(self, entry: ToolResultEntry) -> None:
        """Show the ``pi.tool_result`` entry of this call."""
        self._result_seen = True
        message = entry.message
        is_error = message is not None and message.is_error
        self._status = "error" if is_error else "done"
        self._extra = ""
        self._live.display = False
        text = inert(content_text(message.content if message is not None else None))
        live = self._shown["live"].strip()
        if is_error and live and live.splitlines()[-1] not in text:
            # Cut short (an abort) before its output reached the result: keep what was shown.
            text = f"{text}\nOutput before it stopped:\n{live}"
        diff = entry.diff
        lines = text.count("\n") + 1 if text else 0
        if diff and not is_error:
            self._counts = diff_counts(diff)
            self._shown["result"] = inert(diff)
            self._body.update(diff_text(diff))
            first = escape(text.splitlines()[0]) if text else "applied"  # a title is markup
            self._output.title = f"Diff · {first}"
            self._output_title = ""
            self._output.collapsed = False
            self.add_class("has-diff")
        else:
            self._shown["result"] = text
            self._body.update(Text(text, style="red") if is_error else text)
            self._output_title = f"{'Error' if is_error else 'Output'} · {lines} line(s)"
            self._output.collapsed = not is_error and lines > _OUTPUT_PREVIEW_LINES
            self._retitle_output()
        self._output.display = bool(text) or diff is not None
        self._place(self._output)
        self.set_class(is_error, "is-error")
        if self.is_mounted:
            self._render_header()
            self._render_args()

    def set_collapsed(self, collapsed: bool) -> None:
        if self._output.display:
            self._output.collapsed = collapsed

    def on_collapsible_collapsed(self) -> None:
        self._retitle_output()

    def on_collapsible_expanded(self) -> None:
        self._retitle_output()

    def _retitle_output(self) -> None:
        """The output's title, naming the key that opens it while it is folded
        (``Output · 500 line(s) · ctrl+o expands``): folded output shows no line of itself, and
        a Claude Code user looks for that hint there. A diff's title has no line count."""
        if not self._output_title:
            return
        key = self._expand_key() if self._output.collapsed else None
        self._output.title = f"{self._output_title} · {key} expands" if key else self._output_title

    def _expand_key(self) -> str | None:
        """The key bound to expanding tool output, as the app names it in its hints."""
        try:
            hint = getattr(self.app, "key_hint", None)
        except RuntimeError:  # Textual's NoActiveAppError: no app is running (yet)
            return None
        named = hint("toggle_tools") if callable(hint) else None
        return named if isinstance(named, str) else None

    def _render_header(self) -> None:
        icon, style = _STATUS_ICONS.get(self._status, ("•", "dim"))
        header = Text()
        header.append(f"{icon} ", style=style)
        title = inert(tool_title(self.tool_name, self._arguments, self._counts))
        tool = inert(self.tool_name)
        name, _, rest = title.partition(tool)
        header.append(name + tool, style="bold")
        header.append(rest)
        if self._extra:
            header.append(inert(f"  · {self._extra}"), style="dim")
        self._shown["header"] = header.plain
        self._header.update(header)
        for name in _STATUS_ICONS:
            self.set_class(name == self._status, f"status-{name}")

    def _args_content(self) -> str | Text:
        arguments = self._arguments
        if not isinstance(arguments, dict) or not arguments or self.has_class("has-diff"):
            return ""
        preview = edit_preview(arguments)
        if preview is not None:
            return diff_text(preview)
        if self.tool_name in _TITLED or _summarised(arguments):
            return ""  # the header says it all (a write's content shows in its result)
        if self.tool_name == "question":
            return inert(_question_arguments(arguments))
        return inert(_other_arguments(arguments))

    def _render_args(self) -> None:
        shown = self._args_content()
        self._shown["args"] = shown.plain if isinstance(shown, Text) else shown
        self._args.update(shown)
        self._args.display = bool(self._shown["args"])
        self._place(self._args)


def _other_arguments(arguments: Mapping[str, Any]) -> str:
    """The arguments the header did not show, one ``key: value`` line each (lists of strings
    joined), never a JSON dump."""
    titled = next(
        (k for k in _SUMMARY_KEYS if isinstance(arguments.get(k), str) and arguments.get(k)),
        None,
    )
    if titled is None:
        return json.dumps(arguments, indent=2, ensure_ascii=False)[:4000]
    lines: list[str] = []
    for key, value in arguments.items():
        if key == titled:
            continue
        if isinstance(value, list) and all(isinstance(v, str) for v in value):  # pyright: ignore[reportUnknownVariableType]
            shown = " · ".join(value)  # pyright: ignore[reportUnknownArgumentType]
        elif isinstance(value, str):
            shown = value
        else:
            shown = short_json(value, 200)
        lines.append(f"{key}: {_clip(shown, 200)}")
    return "\n".join(lines)


def _question_arguments(arguments: Mapping[str, Any]) -> str:
    """A ``question`` call's answers as the user was offered them: the options, then whether an
    answer of one's own was accepted (the tool's ``allowText``, true unless the model said
    false, and always with no option) in words rather than as the flag."""
    options = arguments.get("options")
    choices = (
        [o for o in options if isinstance(o, str)]  # pyright: ignore[reportUnknownVariableType]
        if isinstance(options, list)
        else []
    )
    rest = {k: v for k, v in arguments.items() if k not in ("options", "allowText")}
    extra = rest and (len(rest) > 1 or "question" not in rest)
    lines = [_other_arguments(rest)] if extra else []
    if choices:
        typed = arguments.get("allowText") is not False
        lines.append(
            f"options: {_clip(' · '.join(choices), 200)}"
            + (" · or an answer of your own" if typed else " (only these)")
        )
    return "\n".join(line for line in lines if line)


def _summarised(arguments: Mapping[str, Any]) -> bool:
    """True when the header's summary already says everything the arguments hold."""
    if len(arguments) != 1:
        return False
    ((key, value),) = arguments.items()
    return key in _SUMMARY_KEYS and isinstance(value, str) and "\n" not in value
