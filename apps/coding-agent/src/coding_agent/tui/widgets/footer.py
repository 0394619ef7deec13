"""The status line: model (and thinking level, unless off), cwd, session, tokens, cost, context.
While a turn runs on its own model (a command's ``model:``), the model part names that one,
"provider/id (this turn)".

Totals are folded from the transcript's assistant and ``pi.usage`` entries as they arrive
(:class:`~coding_agent.tui.document.UsageTotals`), so a long session is scanned once, at its
baseline. The context % is the last request's size over the model's context window; the
footer asks for the session facts on every paint when given a callable, so a window learned
later (or a model switched with ``/model``) shows up at the next repaint.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.widgets import Static

from coding_agent.tui.conversation import SessionInfo
from coding_agent.tui.document import UsageTotals, model_label, thinking_level, turn_model_label
from pico3 import View, ViewEntry

__all__ = ["StatusFooter", "format_tokens", "short_cwd"]


def format_tokens(count: int) -> str:
    """``950``, ``12.3k``, ``1.2M``."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"


def short_cwd(cwd: str) -> str:
    """``cwd`` with the home folder written ``~``."""
    home = os.path.expanduser("~")
    if home and home != "/" and (cwd == home or cwd.startswith(home + os.sep)):
        return "~" + cwd[len(home) :]
    return cwd


class StatusFooter(Static):
    """One calm line under the editor."""

    def __init__(
        self, session: SessionInfo | Callable[[], SessionInfo], *, id: str | None = None
    ) -> None:
        super().__init__(id=id, markup=False)
        self._session = session
        self.totals = UsageTotals()
        self._view: View | None = None
        self._entries: Any = None
        self._available = True
        self.starting = False
        """Unavailable because the session's worker has not served yet (not reconnecting)."""

    def rebase(self, view: View | None) -> None:
        """Start over from ``view`` (a hydrate): totals are recomputed from its entries."""
        self.totals = UsageTotals()
        self._entries = None
        self.show(view)

    def show(self, view: View | None) -> None:
        """Follow the next revision (``None``: the worker is unavailable)."""
        self._available = view is not None
        if view is not None:
            self._view = view
            entries = view.entries
            if entries is not self._entries:
                self._entries = entries
                tail: list[ViewEntry] = []
                for entry in reversed(entries):  # only the entries not folded yet
                    if entry.id <= self.totals.last_id:
                        break
                    tail.append(entry)
                self.totals.fold(reversed(tail))
        self.update(self.status_line())

    def repaint(self) -> None:
        """Paint again with the current session facts (a context window became known)."""
        self.update(self.status_line())

    def on_resize(self) -> None:
        self.update(self.status_line())

    def status_line(self, width: int | None = None) -> Text:
        """The line, fitted to ``width`` cells (default: the widget's): the least needed
        parts go first (cache counts, session id, then the folder is shortened and dropped,
        then the token counts), so the model, the cost and the context % always show."""
        session = self._session if isinstance(self._session, SessionInfo) else self._session()
        totals = self.totals
        dim = "dim"
        if width is None:
            width = self.content_region.width if self.is_mounted else 0
        level = thinking_level(self._view)
        cwd = short_cwd(session.cwd)
        window = session.context_window
        ctx: tuple[str, str] | None = None
        if window:
            percent = 100.0 * totals.context_tokens / window
            style = "red" if percent >= 90 else "yellow" if percent >= 70 else ""
            ctx = (f"ctx {percent:.0f}%", style)
        cache = (
            f"R{format_tokens(totals.cache_read)} W{format_tokens(totals.cache_write)}"
            if totals.cache_read or totals.cache_write
            else ""
        )
        parts: dict[str, tuple[str, str]] = {
            "model": ("", "")  # the worker names the default model once it serves
            if self.starting and self._view is None and not session.model
            else (
                f"{turned} (this turn)"
                if (turned := turn_model_label(self._view)) is not None
                else model_label(self._view, session.model),
                "bold",
            ),
            "thinking": (f"thinking {level}", "magenta") if level != "off" else ("", ""),
            "cwd": (cwd, dim),
            "session": (session.session_id, dim),  # what /resume and --resume take
            "tokens": (f"↑{format_tokens(totals.input)} ↓{format_tokens(totals.output)}", ""),
            "cache": (cache, dim),
            "cost": (f"${totals.cost:.3f}", ""),
            "ctx": ctx or ("", ""),
            "offline": ("", "")
            if self._available
            else ("starting…", "yellow")
            if self.starting
            else ("reconnecting…", "yellow"),
        }

        def build() -> Text:
            line = Text()
            for name, (text, style) in parts.items():
                if not text:
                    continue
                if line:
                    line.append(" · " if name == "thinking" else "  ")
                line.append(text, style=style)
            return line

        line = build()
        for drop in ("cache", "session", "cwd-short", "cwd", "tokens", "thinking"):
            if not width or line.cell_len <= width:
                break
            if drop == "cwd-short":
                name = os.path.basename(cwd.rstrip(os.sep)) or cwd
                parts["cwd"] = (name, dim)
            else:
                parts[drop] = ("", "")
            line = build()
        if width and line.cell_len > width:
            line.truncate(width, overflow="ellipsis")
        return line
