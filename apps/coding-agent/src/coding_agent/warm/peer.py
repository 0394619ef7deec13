"""Whether a client of the fork server may be served by a child forked there: what a process
the client started would share with it, checked before the fork (docs/design/warm-start.md,
"The security rule" and "What it serves, and what not").

A forked child runs in the server's namespaces, with the server's group ids, in the server's
cgroup: :func:`other_namespace` and :func:`same_groups` turn away a client that does not share
them (a sandboxed command, a container, a shell after ``newgrp``); it then runs its command
itself, where it is. The child takes the client's resource limits, nice value and CPU affinity
(:meth:`coding_agent.warm.server.Request.run`); :func:`unfit_limits` says when it could not.
"""

from __future__ import annotations

import functools
import os
import resource
from collections.abc import Mapping
from typing import Any

__all__ = ["other_namespace", "same_groups", "unfit_limits"]

_NAMESPACES = ("mnt", "user", "pid", "net", "ipc", "uts", "cgroup", "time")
"""The namespaces a client must share with the server to be served (``/proc/PID/ns``)."""


def other_namespace(pid: int) -> str | None:
    """The first namespace in which the peer ``pid`` is not where this server is (``"any"``
    when its namespaces cannot be read), or ``None`` when it shares them all.

    A child forked here runs in the server's namespaces, whatever the client's: a client in a
    sandbox (bubblewrap's own user, mount, PID and network namespaces, a session's sandboxed
    command) would get a process outside it with the user's full rights, and a client in a
    container a process that sees other files under the folder it names. Such a client's
    connection is closed unanswered, and it runs its command itself, where it is."""
    if pid <= 0:
        return "any"  # not in this server's PID namespace (a peer in an ancestor's)
    for name in _NAMESPACES:
        own = _own_namespace(name)
        if own is None:
            continue  # a kernel without this namespace: nothing to compare
        try:
            theirs = os.readlink(f"/proc/{pid}/ns/{name}")
        except OSError:
            return "any"
        if theirs != own:
            return name
    return None


@functools.cache
def _own_namespace(name: str) -> str | None:
    """This process's namespace ``name`` (``None``: the kernel has none): read once, it never
    changes."""
    try:
        return os.readlink(f"/proc/self/ns/{name}")
    except OSError:
        return None


_MEMORY_LIMITS = frozenset({resource.RLIMIT_AS, resource.RLIMIT_DATA})
"""Limits a fork of the preloaded heap would not keep as a new process does (it starts at the
server's size): a client whose differ from the server's runs its command itself."""


def _above(limit: int, other: int) -> bool:
    if limit == resource.RLIM_INFINITY:
        return other != resource.RLIM_INFINITY
    return other != resource.RLIM_INFINITY and limit > other


def unfit_limits(body: Mapping[str, Any]) -> tuple[str, bool] | None:
    """Why a child forked here could not run under the client's resource limits, nice value
    and CPU affinity as a process the client started would (``None``: it can: it takes them),
    and whether the server should make way for one started under the client's (a nice value,
    a hard limit it cannot lower or raise back)."""
    nice = int(body["nice"])
    if nice < os.getpriority(os.PRIO_PROCESS, 0):
        return f"the client runs at nice {nice}, below the server's", True
    for number, soft, hard in body["limits"]:
        try:
            own_soft, own_hard = resource.getrlimit(number)
        except (ValueError, OSError):
            return f"resource limit {number} is unknown here", False
        if number in _MEMORY_LIMITS and (soft, hard) != (own_soft, own_hard):
            return "the client's memory limit (ulimit -v or -d) differs from the server's", False
        if _above(hard, own_hard):
            return f"the client's hard limit of resource {number} is above the server's", True
    return None


def _groups(pid: int | str) -> tuple[str, str] | None:
    """The ``Gid`` and ``Groups`` lines of ``/proc/PID/status`` (``None``: unreadable)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            lines = status.read().splitlines()
    except OSError:
        return None
    found = {k: v.split() for k, _, v in (line.partition(":") for line in lines)}
    return " ".join(found.get("Gid", [])), " ".join(sorted(found.get("Groups", []), key=int))


def same_groups(pid: int) -> bool:
    """Whether the peer ``pid`` has the server's group ids, primary and supplementary: a child
    forked here has the server's, and a client that dropped a group must not get it back."""
    theirs = _groups(pid)
    return theirs is not None and theirs == _own_groups()


@functools.cache
def _own_groups() -> tuple[str, str] | None:
    """This process's group ids: read once (the server never changes them)."""
    return _groups("self")
