"""The environment a child process of a session gets: the parent's, without its secrets.

A session's worker holds secrets in its environment (provider API keys, a server's token) that
the model's commands must never see: ``bash`` can ``cat /proc/self/environ``, a background job
or an MCP server can send what it finds anywhere. :class:`ChildEnvironment` is the one owner of
"what a child process gets": every place that starts a process (the ``bash`` tool, ``!``
commands, :class:`~pico3.process_host.LocalProcessHost`'s jobs, MCP servers, hooks that run a
command) asks it instead of passing ``os.environ`` on.

* :meth:`ChildEnvironment.environ` is the parent's environment (read when called, so ``PATH``
  changes apply) minus the *withheld* variables: the ``secrets`` names not named in
  ``passthrough``.
* :meth:`ChildEnvironment.scrub` filters an environment a caller built itself (a job's ``env``
  overlay, an MCP server's ``env`` block): a withheld name is dropped, and so is any entry whose
  value holds a withheld variable's value (``"TOKEN": "${ANTHROPIC_API_KEY}"`` expanded earlier).
* :meth:`ChildEnvironment.withhold_from_process` removes the withheld variables from this
  process's own ``os.environ``, for a process that has read what it needs (a session worker
  after resolving its providers): then no spawn, not even one by a library, inherits them.
  It also blanks them in the environment block the kernel gave the process at ``exec``, which
  ``/proc/<pid>/environ`` shows to every process of the user: a command reading its parent's
  (``/proc/$PPID/environ``) finds nothing. :meth:`ChildEnvironment.hide_from_proc` does that
  blanking alone, for a process that keeps the secrets (the TUI restarts its worker with them).
  Limits, plainly: a command runs as the user, so it can read whatever the user can (a
  ``~/.bashrc`` that exports a key, a config file holding one); this keeps keys out of the
  environment, it is not a sandbox. Linux only (elsewhere the blanking does nothing).

A session hands its instance to features as the harness service ``"child_environment"``
(``HarnessOptions(services={"child_environment": ...})``); :meth:`ChildEnvironment.of` reads it
from a services mapping and falls back to :meth:`ChildEnvironment.default`, which withholds
:data:`WELL_KNOWN_SECRETS`: a feature never passes the common provider keys on, whoever hosts it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "CHILD_ENVIRONMENT_SERVICE",
    "MIN_SECRET_LENGTH",
    "WELL_KNOWN_SECRETS",
    "ChildEnvironment",
]

CHILD_ENVIRONMENT_SERVICE = "child_environment"
"""The key of the session's :class:`ChildEnvironment` in ``HarnessOptions.services``."""

WELL_KNOWN_SECRETS: tuple[str, ...] = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
"""Withheld by :meth:`ChildEnvironment.default` (a host adds its own names to these)."""

MIN_SECRET_LENGTH = 8
"""A value shorter than this is never matched by value (``"1"`` would match everything)."""


class ChildEnvironment:
    """What a child process's environment leaves out (see the module docstring).

    ``secrets`` are variable names withheld from every child; ``passthrough`` names secrets the
    user lets through all the same. ``source`` is the environment the secrets' *values* are read
    from (default ``os.environ`` at construction): :meth:`scrub` drops an entry holding one of
    them, and :meth:`values` lists them for redaction. Immutable once built.
    """

    __slots__ = ("_values", "passthrough", "secrets", "withheld")

    def __init__(
        self,
        secrets: Iterable[str] = WELL_KNOWN_SECRETS,
        *,
        passthrough: Iterable[str] = (),
        source: Mapping[str, str] | None = None,
    ) -> None:
        self.secrets: frozenset[str] = frozenset(secrets)
        self.passthrough: frozenset[str] = frozenset(passthrough)
        self.withheld: frozenset[str] = self.secrets - self.passthrough
        """The names a child never gets."""
        environ = os.environ if source is None else source
        found = {environ.get(name, "") for name in self.withheld}
        self._values: tuple[str, ...] = tuple(
            sorted((v for v in found if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)
        )

    def __repr__(self) -> str:
        return (
            f"ChildEnvironment(withheld={sorted(self.withheld)!r}, "
            f"passthrough={sorted(self.passthrough)!r})"
        )

    @classmethod
    def default(cls) -> ChildEnvironment:
        """Withholds :data:`WELL_KNOWN_SECRETS`, with their values read from ``os.environ``."""
        return cls(WELL_KNOWN_SECRETS)

    @classmethod
    def of(cls, services: Mapping[str, Any]) -> ChildEnvironment:
        """The session's instance in ``services`` (key :data:`CHILD_ENVIRONMENT_SERVICE`), else
        :meth:`default`."""
        found = services.get(CHILD_ENVIRONMENT_SERVICE)
        return found if isinstance(found, ChildEnvironment) else cls.default()

    def values(self) -> tuple[str, ...]:
        """The withheld variables' values (at least :data:`MIN_SECRET_LENGTH` characters),
        longest first."""
        return self._values

    def holds_secret(self, value: str) -> bool:
        """Whether ``value`` contains a withheld variable's value."""
        return any(secret in value for secret in self._values)

    def scrub(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` without withheld names and without entries whose value holds a secret."""
        return {
            name: value
            for name, value in env.items()
            if name not in self.withheld and not self.holds_secret(value)
        }

    def environ(self, overlay: Mapping[str, str] | None = None) -> dict[str, str]:
        """This process's environment minus the withheld names, with ``overlay`` (scrubbed)
        laid over it: the whole environment to give a child process."""
        env = {name: value for name, value in os.environ.items() if name not in self.withheld}
        if overlay:
            env.update(self.scrub(overlay))
        return env

    def withhold_from_process(self) -> None:
        """Remove the withheld names from ``os.environ`` (this process's own children and every
        library's spawns inherit nothing of them) and blank them in ``/proc/self/environ``. Only
        for a process that has read its secrets already; the values stay known to
        :meth:`scrub` and :meth:`values`."""
        for name in self.withheld:
            os.environ.pop(name, None)
        self.hide_from_proc()  # the passed-through ones too (they stay in os.environ)

    def hide_from_proc(self) -> None:
        """Blank every secret (withheld or passed through) in ``/proc/self/environ`` and keep
        it in ``os.environ``: each is set again first, which moves the C library's copy out
        of the block the kernel shows."""
        for name in self.secrets:
            value = os.environ.get(name)
            if value is not None:
                os.environ[name] = value  # setenv: a fresh copy, no longer in the exec block
        _blank_initial_environment(self.secrets)


def _blank_initial_environment(names: frozenset[str]) -> None:
    """Overwrite each ``NAME=value`` of ``names`` with NUL bytes in the environment block the
    kernel set up at ``exec`` (``env_start``..``env_end`` of ``/proc/self/stat``), through
    ``/proc/self/mem``. ``unsetenv`` and ``setenv`` only move the C library's pointers away
    from that block; ``/proc/<pid>/environ`` reads the block itself. Best effort: where
    ``/proc`` is missing or refuses, nothing changes."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            stat = handle.read()
        fields = stat[stat.rindex(b")") + 2 :].split()
        start, end = int(fields[47]), int(fields[48])  # fields 50 and 51: env_start, env_end
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            block = mem.read(end - start)
            offset = 0
            for item in block.split(b"\0"):
                name = item.partition(b"=")[0].decode("utf-8", "replace")
                if item and name in names:
                    mem.seek(start + offset)
                    mem.write(b"\0" * len(item))
                offset += len(item) + 1
    except (OSError, ValueError, IndexError):
        return
