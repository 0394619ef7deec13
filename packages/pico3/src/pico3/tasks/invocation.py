"""Invocation tokens: the unforgeable authority of one handler call (docs/design/harness.md#invocation-tokens).

Each handler call, transition commit, closure commit and abort call gets a fresh
:class:`Invocation` ``{task_id, mode, alive}``. The runtime handed to the handler binds it, and
the kernel checks it on the line before every commit it makes: alive, the task live and (in run
mode) not marked for abort. The scheduler revokes the token the moment the handler returns, so a
runtime captured by a handler (stored in a closure, passed to a background task) can never write
after its method returned, after the task ended, or after a durable abort mark.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["Invocation", "InvocationMode"]

InvocationMode = Literal["run", "abort"]


class Invocation:
    """One token. Only the scheduler creates and revokes them."""

    __slots__ = ("_alive", "_mode", "_task_id")

    def __init__(self, task_id: int, mode: InvocationMode) -> None:
        self._task_id = task_id
        self._mode: InvocationMode = mode
        self._alive = True

    @property
    def task_id(self) -> int:
        return self._task_id

    @property
    def mode(self) -> InvocationMode:
        return self._mode

    @property
    def alive(self) -> bool:
        return self._alive

    def revoke(self) -> None:
        """End this token for good (idempotent)."""
        self._alive = False

    def __repr__(self) -> str:
        state = "alive" if self._alive else "revoked"
        return f"<Invocation task={self._task_id} {self._mode} {state}>"
