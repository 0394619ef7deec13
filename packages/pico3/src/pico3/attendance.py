"""Whether anyone is attached to the session: the harness service :data:`ATTENDANCE_SERVICE`.

A session worker outlives its clients on purpose (a closed terminal must not stop a turn) and
lingers for a while with none. A feature that holds something costly for the user's sake (the
MCP feature's server processes) may let it go while nobody is attached and take it up again
when someone comes back. The host that serves clients puts an :class:`Attendance` in
``HarnessOptions.services`` under :data:`ATTENDANCE_SERVICE`; a host without one (headless
runs, tests) never goes unattended.

Standard library only (a leaf of pico3's layers).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["ATTENDANCE_SERVICE", "Attendance"]

ATTENDANCE_SERVICE = "attendance"
"""The key of the session's :class:`Attendance` in ``HarnessOptions.services`` (absent: the
session is always attended)."""


@runtime_checkable
class Attendance(Protocol):
    """How many clients are attached now (``count``); :meth:`changed` returns at the next
    attach or detach. Read and awaited on the worker's event loop."""

    @property
    def count(self) -> int:
        """The clients attached now."""
        ...

    async def changed(self) -> None:
        """Wait for the next attach or detach."""
        ...
