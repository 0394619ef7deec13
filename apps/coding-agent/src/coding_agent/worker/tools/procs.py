"""Finding and killing every process a command started, whatever group it moved to.

A ``bash`` command runs in a session of its own (``start_new_session``): its shell is the
session leader, so the session id is the shell's pid. Killing the process *group* misses
children that job control (``set -m``) or ``setpgid`` put in groups of their own; they stay in
the session, though, and are found here by reading ``/proc/<pid>/stat`` (session id and parent
pid of every process). A child that called ``setsid`` itself leaves the session; it is still
found as long as its parent chain reaches a process already found (the walk follows parent
pids too).

:func:`kill_command` freezes what it finds (``SIGSTOP``, so nothing can fork behind the walk),
walks again until no new process turns up, then sends ``SIGKILL`` to all of them.
:class:`ProcessRecord` is what ``bash`` stores durably before the command runs: the session id
and the shell's start time (``/proc/<pid>/stat`` field 22), so a restarted worker kills the
right processes and never a stranger that reused the pid.

Where ``/proc`` is missing (not Linux), the process group is all that can be killed.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import msgspec

__all__ = ["ProcessRecord", "command_processes", "kill_command", "start_time"]

_PROC = "/proc"
_MAX_ROUNDS = 50


def _stat(pid: int) -> tuple[int, int, int, int] | None:
    """``(ppid, pgrp, session, start time)`` of ``pid``, or ``None`` when it is gone."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as file:
            data = file.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):  # a zombie has nothing left to kill
        return None
    return int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or ``None`` when it is gone."""
    found = _stat(pid)
    return None if found is None else found[3]


def _table() -> dict[int, tuple[int, int, int, int]]:
    table: dict[int, tuple[int, int, int, int]] = {}
    try:
        names = os.listdir(_PROC)
    except OSError:
        return table
    for name in names:
        if name.isdigit():
            found = _stat(int(name))
            if found is not None:
                table[int(name)] = found
    return table


def command_processes(session: int, roots: set[int] | None = None) -> set[int]:
    """Every live process of ``session`` (a command's session id), and every descendant of
    them or of ``roots`` (by parent pid), whatever its group or session."""
    table = _table()
    found = {pid for pid, (_ppid, _pgrp, sid, _start) in table.items() if sid == session}
    found |= {pid for pid in roots or set() if pid in table}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _pgrp, _sid, _start) in table.items():
        children.setdefault(ppid, []).append(pid)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    found.discard(os.getpid())
    return found


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def kill_command(session: int) -> int:
    """``SIGKILL`` every process of the command whose session id is ``session`` (see the module
    docs); returns how many were signalled. Safe to call when they are all gone."""
    if not os.path.isdir(_PROC):  # pragma: no cover - Linux has /proc
        try:
            os.killpg(session, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return 0
        return 1
    stopped: set[int] = set()
    for _round in range(_MAX_ROUNDS):
        new = command_processes(session, stopped) - stopped
        if not new:
            break
        for pid in new:
            _signal(pid, signal.SIGSTOP)
        stopped |= new
    try:
        os.killpg(session, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in stopped:
        _signal(pid, signal.SIGKILL)
    return len(stopped)


class ProcessRecord(msgspec.Struct, frozen=True):
    """A running command as ``bash`` records it: its session id (the shell's pid) and the
    shell's start time."""

    session: int
    started: int | None

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "started": self.started}

    @classmethod
    def from_json(cls, value: Any) -> ProcessRecord | None:
        if not isinstance(value, dict):
            return None
        session, started = value.get("session"), value.get("started")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if type(session) is not int or session <= 1:
            return None
        return cls(session, started if type(started) is int else None)

    def alive(self) -> bool:
        """True while a process of the session lives: the shell itself (same start time, so not
        a stranger with a reused pid) or, after the shell ended, any member of its session (a
        pid that is some session's id is not handed out again while that session lives)."""
        if self.started is not None and start_time(self.session) == self.started:
            return True
        table = _table()
        shell = table.get(self.session)
        if shell is not None and shell[2] == self.session and self.started is not None:
            return False  # the pid now leads another session: a stranger's
        return any(sid == self.session for _p, _g, sid, _s in table.values())

    def kill(self) -> int:
        """Kill the command's processes if they are still the recorded ones; how many."""
        return kill_command(self.session) if self.alive() else 0
