"""The server's log: one timestamped, structured line per event (docs/server.md#the-log).

Every line is::

    <UTC time, ISO 8601 with milliseconds> <event> [key=value ...]: <message>

for example ``2026-12-05T13:22:45.123Z refused peer=tcp:127.0.0.1:41234 reason=unauthorized:
wrong or missing token …``. ``<event>`` is one word (:data:`EVENTS`); the ``key=value`` fields
never contain spaces (a value with spaces is quoted with ``json.dumps``), so a line splits with
a regular expression; the message after ``": "`` is for people.

A flood must not become a log flood: events of one ``(event, reason)`` beyond
:data:`BURST` a second are counted, not written, and the next line written for them says how
many were left out (``suppressed=N``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["BURST", "EVENTS", "ServerLog", "format_line"]

EVENTS = (
    "listening",  # a listener is up
    "limits",  # the open-file limit and the connection caps in force
    "accepted",  # a connection passed the preface (token name, session)
    "refused",  # a connection refused, with reason=
    "shed",  # a connection dropped to keep the server serving (caps, no file descriptors)
    "tls_failed",  # a failed TLS handshake, with a reason
    "session",  # a session's worker: started, exited, adopted, taken over
    "takeover",  # a session made by another server (or whose worker died) served here
    "migration",  # the schema migration of --migrate
    "reload",  # SIGHUP: certificate and tokens read again
    "stopped",  # SIGTERM or SIGINT: the server and its workers stopped (signal=)
    "error",  # something failed that ended one connection only
)

BURST = 20
"""Lines of one ``(event, reason)`` written per second before the rest are only counted."""


def _value(value: object) -> str:
    text = str(value)
    if not text or any(ch.isspace() or ch in '"=' for ch in text):
        return json.dumps(text)
    return text


def format_line(event: str, message: str = "", **fields: object) -> str:
    """One log line (see the module docstring); fields whose value is ``None`` are left out."""
    stamp = datetime.fromtimestamp(time.time(), UTC)
    parts = [stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z", event]
    parts += [f"{key}={_value(value)}" for key, value in fields.items() if value is not None]
    line = " ".join(parts)
    return f"{line}: {' '.join(message.split())}" if message else line


class ServerLog:
    """Writes event lines to ``sink`` (the server's stderr), a flood of one kind rate-limited."""

    def __init__(self, sink: Callable[[str], None] | None) -> None:
        self._sink = sink
        self._window: dict[tuple[str, str], tuple[int, int, int]] = {}
        """(event, reason) → (second, lines written in it, lines left out since the last)."""

    def __call__(self, event: str, message: str = "", **fields: object) -> None:
        if self._sink is None:
            return
        key = (event, str(fields.get("reason", "")))
        second = int(time.monotonic())
        start, written, left_out = self._window.get(key, (second, 0, 0))
        if start != second:
            written = 0
        if written >= BURST:
            self._window[key] = (second, written, left_out + 1)
            return
        if left_out:
            fields["suppressed"] = left_out
        self._window[key] = (second, written + 1, 0)
        if len(self._window) > 1024:  # reasons are few; a runaway set of them is forgotten
            self._window = {key: self._window[key]}
        self._sink(format_line(event, message, **fields))
