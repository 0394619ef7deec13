"""The terminal's notifications: OSC 9 or OSC 777 and a bell, written by the TUI.

The session worker decides that a notification is due, from committed state, records it and
sends it on its own channels (:mod:`coding_agent.worker.notifications`); each one it has sent
appears in its status document (``notifications``: the newest twenty, each with a ``key``).
The TUI owns the terminal, so it is the one that writes to it: every key it has not seen yet,
whose ``event`` is among ``[notifications] terminal`` (``attention`` by default), becomes

* ``ESC ] 9 ; message BEL`` (iTerm2, WezTerm, Windows Terminal, kitty, ghostty) or
  ``ESC ] 777 ; notify ; title ; message BEL`` (rxvt-unicode, foot, ghostty), chosen from
  ``TERM_PROGRAM``/``LC_TERMINAL``/``TERM`` (``terminal_style = "auto"``) or set with
  ``terminal_style = "osc9" | "osc777" | "bell"``;
* followed by a bell (``BEL``);
* inside tmux (``$TMUX``) the OSC is wrapped in tmux's passthrough
  (``ESC P tmux; …ESC doubled… ESC \\``) so it reaches the terminal tmux runs in (tmux 3.3+
  wants ``set -g allow-passthrough on``); the bell goes to tmux itself, which flags the window.

Only while the user is not looking, where that can be known: Textual asks the terminal for focus
reports, and once one arrived the TUI writes only while it is unfocused (``when_focused = true``
writes always). A terminal that never reports focus gets every notification.

The notifications present when a TUI first hears from a worker are taken as seen (a TUI that
attaches while a dialog waits shows the dialog); after a worker restart the TUI keeps the keys it
saw, so a notification the new worker sends again is not written twice (``/resume`` of another
session starts afresh). While it runs, the TUI holds a call open on the worker's
:data:`~coding_agent.contracts.TuiWatchService` (:meth:`TerminalNotifier.facet`), so the worker's
desktop notifications (``desktop_when = "detached"``) wait until no TUI is attached.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from textual.app import App

from chord import Context
from coding_agent.contracts import TuiWatchService
from coding_agent.settings.config import ConfigError, load_config
from coding_agent.settings.notifications import NotificationSettings

if TYPE_CHECKING:  # start-up time: chord.facets loads as the facet host starts
    from chord import Facet, FacetEnvironment

__all__ = ["TerminalNotifier", "osc_style", "terminal_notification"]

_log = logging.getLogger("coding_agent.tui")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

Style = Literal["osc9", "osc777", "bell"]


def osc_style(env: Mapping[str, str]) -> Style:
    """The notification escape the terminal understands, from what it says it is."""
    names = " ".join(env.get(key, "") for key in ("TERM_PROGRAM", "LC_TERMINAL", "TERM")).lower()
    if any(name in names for name in ("rxvt", "foot", "ghostty")):
        return "osc777"
    return "osc9"  # iTerm2, WezTerm, Windows Terminal, kitty, and the usual fallback


def _clean(text: str) -> str:
    return _CONTROL.sub(" ", text).strip()


def terminal_notification(title: str, message: str, style: Style, *, tmux: bool) -> str:
    """The bytes that notify on the terminal (see the module docstring)."""
    osc = ""
    if style == "osc9":
        osc = f"\x1b]9;{_clean(title)}: {_clean(message)}\x07"
    elif style == "osc777":
        osc = f"\x1b]777;notify;{_clean(title).replace(';', ',')};{_clean(message)}\x07"
    if osc and tmux:
        osc = "\x1bPtmux;" + osc.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return osc + "\x07"


class TerminalNotifier:
    """Writes the worker's notifications to ``app``'s terminal; :meth:`listener` goes to
    ``RemoteConversationClient.on_status``."""

    def __init__(
        self,
        app: App[Any],
        settings: NotificationSettings,
        env: Mapping[str, str] | None = None,
    ) -> None:
        environ = os.environ if env is None else env
        self._app = app
        self._settings = settings
        self._style: Style = (
            osc_style(environ) if settings.terminal_style == "auto" else settings.terminal_style
        )
        self._tmux = bool(environ.get("TMUX"))
        self._seen: set[str] | None = None
        self._session: object = None
        self._focus_reported = False
        app.watch(app, "app_focus", self._focus_changed, init=False)

    @classmethod
    def for_project(cls, app: App[Any], cwd: Any) -> TerminalNotifier:
        """With the ``[notifications]`` of the user's config.toml (its defaults when the file
        is bad: the TUI has said why already)."""
        try:
            settings = load_config(cwd).notifications
        except ConfigError:
            settings = NotificationSettings()
        return cls(app, settings)

    def facet(self) -> Facet:
        """The facet that tells the worker this TUI is attached (its desktop notifications
        wait for no TUI: :data:`~coding_agent.contracts.TuiWatchService`)."""
        from chord import define_facet  # lazy: see the TYPE_CHECKING import above

        def setup(env: FacetEnvironment) -> None:
            async def watch(instance: Any, ctx: Context) -> None:
                try:
                    await instance.watching(ctx)
                except Exception as error:  # the worker went: observed again when it is back
                    _log.debug("the worker's TUI watch ended: %s", error)

            env.observe(TuiWatchService, watch)

        return define_facet("coding-agent/tui-watch-client", setup)

    def _focus_changed(self, _focused: bool) -> None:
        self._focus_reported = True  # the terminal reports focus: it can be trusted from now on

    @property
    def looking(self) -> bool:
        """Whether the user is looking at this TUI (only known once the terminal reported)."""
        return self._focus_reported and self._app.app_focus

    def listener(self, status: Mapping[str, Any]) -> None:
        """Write each notification of ``status`` not seen yet (see the module docstring)."""
        notices = status.get("notifications")
        if not isinstance(notices, list):
            return
        keyed = [n for n in notices if isinstance(n, dict) and isinstance(n.get("key"), str)]
        session = status.get("sessionId")
        if self._seen is None or session != self._session:  # the first word of this session
            self._seen, self._session = {n["key"] for n in keyed}, session
            return
        for notice in keyed:
            if notice["key"] in self._seen:
                continue
            self._seen.add(notice["key"])
            if notice.get("event") not in self._settings.terminal:
                continue
            if self.looking and not self._settings.when_focused:
                continue
            self.write(str(notice.get("title", "coding-agent")), str(notice.get("message", "")))

    def write(self, title: str, message: str) -> None:
        """Put one notification on the terminal (nothing in a headless app)."""
        driver = getattr(self._app, "_driver", None)
        if driver is None or self._app.is_headless:
            return
        driver.write(terminal_notification(title, message, self._style, tmux=self._tmux))
        driver.flush()
