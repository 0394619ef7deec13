"""What the terminal can deliver, and the two input fixes a real terminal needs.

**ESC Enter is Alt+Enter.** Terminals (and tmux, always) send Alt+Enter as ``ESC CR``. Textual's
parser reissues that pair as a bare ``enter`` (the Alt is lost), so Alt+Enter would send the
prompt. :class:`AgentParser` maps ``ESC CR`` (and ``ESC LF``) to ``alt+enter``.

**Typeahead.** Keys typed while the program starts, before the app puts the terminal in raw
mode, sit in the terminal's line buffer, where the line discipline has already turned each Enter
(CR) into LF — which Textual reads as Ctrl+J, a newline. :class:`AgentDriver` reads that
buffered input before raw mode starts, turns its LFs back into Enter and hands it to the app
first, so "hello⏎" typed before the first paint sends ``hello``.

**Which keys can arrive.** Shift+Enter (and other modified Enter keys) reach the app only from a
terminal speaking the kitty keyboard protocol; in tmux or a plain xterm Shift+Enter *is* Enter.
:class:`TerminalKeys` says whether a key can arrive: the driver asks the terminal (``CSI ? u``)
and a reply means the protocol is on; a modified Enter actually received proves it too. Key
hints (:func:`coding_agent.tui.app.CodingAgentApp.key_hints`) only name keys that can arrive.
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
import termios
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from textual import events
from textual._xterm_parser import XTermParser  # pyright: ignore[reportPrivateUsage]
from textual.drivers import linux_driver
from textual.drivers.linux_driver import LinuxDriver
from textual.keys import Keys

__all__ = [
    "AgentDriver",
    "AgentParser",
    "TerminalKeys",
    "driver_for",
    "fix_typeahead",
    "needs_protocol",
    "on_protocol_reported",
]

_KITTY_REPLY = re.compile(r"\x1b\[\?(\d+)u")

_MODIFIED_ENTER = re.compile(r"(?:(?:ctrl|shift|super|meta|hyper)\+)+enter")


def needs_protocol(key: str) -> bool:
    """Whether ``key`` reaches the app only through the kitty keyboard protocol
    (Shift+Enter, Ctrl+Enter…: without it they arrive as plain Enter). Alt+Enter does not: it
    is ``ESC CR`` everywhere."""
    return bool(_MODIFIED_ENTER.fullmatch(key))


class TerminalKeys:
    """Which keys this terminal can deliver (see the module docstring)."""

    def __init__(self, *, protocol: bool = False) -> None:
        self.protocol = protocol
        """True once the terminal answered the kitty keyboard query, or sent a key only the
        protocol can encode."""

    def can_deliver(self, key: str) -> bool:
        return self.protocol or not needs_protocol(key)

    def saw(self, key: str) -> bool:
        """Note a key that arrived; returns whether it proved the protocol (first time)."""
        if needs_protocol(key) and not self.protocol:
            self.protocol = True
            return True
        return False


class AgentParser(XTermParser):
    """Textual's parser, plus ``ESC CR``/``ESC LF`` as Alt+Enter and the kitty query's reply.

    :attr:`on_protocol` (set by :class:`AgentDriver`) is called with the flags when the terminal
    answers ``CSI ? u``; the reply itself is swallowed (never typed into the editor).
    """

    on_protocol: ClassVar[Callable[[int], None] | None] = None

    def _sequence_to_key_events(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, sequence: str, alt: bool = False
    ) -> Iterable[events.Key]:
        if sequence in ("\x1b\r", "\x1b\n") or (alt and sequence in ("\r", "\n")):
            yield events.Key("alt+enter", None)
            return
        reply = _KITTY_REPLY.fullmatch(sequence)
        if reply is not None:
            callback = AgentParser.on_protocol
            if callback is not None:
                callback(int(reply.group(1)))
            yield events.Key(Keys.Ignore.value, sequence)  # ends the sequence; Textual drops it
            return
        yield from super()._sequence_to_key_events(sequence, alt)


def fix_typeahead(text: str) -> str:
    """Typeahead read in cooked mode: each LF (an Enter the line discipline turned into LF) is
    Enter again."""
    return text.replace("\r\n", "\r").replace("\n", "\r")


def _pending(fd: int) -> bytes:
    """The input waiting on ``fd`` (complete lines, in canonical mode), read without blocking."""
    try:
        size = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return b""
    if size <= 0:
        return b""
    try:
        return os.read(fd, size)
    except OSError:
        return b""


class AgentDriver(LinuxDriver):
    """Textual's Linux driver with :class:`AgentParser`, the typeahead fix and the kitty query.

    The listener given to :func:`on_protocol_reported` is called (from the input thread) when
    the terminal says it speaks the kitty keyboard protocol.
    """

    def start_application_mode(self) -> None:
        setattr(linux_driver, "XTermParser", AgentParser)  # noqa: B010 - the input thread's parser
        AgentParser.on_protocol = self._protocol
        typeahead = b""
        try:
            typeahead = _pending(self.fileno) if os.isatty(self.fileno) else b""
        except (OSError, ValueError):
            typeahead = b""
        super().start_application_mode()
        self.write("\x1b[?u")  # kitty keyboard protocol: report the flags (if it speaks it)
        self.flush()
        if typeahead:
            parser = AgentParser()
            text = fix_typeahead(typeahead.decode("utf-8", "replace"))
            for event in [*parser.feed(text), *parser.feed("")]:
                if isinstance(event, events.Key) and event.key == Keys.Ignore.value:
                    continue
                self.process_message(event)

    def _protocol(self, flags: int) -> None:
        del flags
        for listener in list(_protocol_listeners):
            listener()


_protocol_listeners: list[Callable[[], object]] = []


def on_protocol_reported(listener: Callable[[], object]) -> Callable[[], None]:
    """Call ``listener`` (from the input thread) when the terminal reports the kitty keyboard
    protocol; returns the function that removes it."""
    _protocol_listeners.append(listener)

    def remove() -> None:
        if listener in _protocol_listeners:
            _protocol_listeners.remove(listener)

    return remove


def driver_for(default: type[Any]) -> type[Any]:
    """:class:`AgentDriver` where Textual would use its Linux driver, else ``default``."""
    return AgentDriver if issubclass(default, LinuxDriver) else default
