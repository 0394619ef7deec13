"""Who commits: the :class:`Authority` levels and the task :class:`Invoker` token, plus the
kind sets busy and the view judge by.

A leaf module (it imports nothing of the kernel), so the task layer and the kernel both name
these without importing each other.
"""

from __future__ import annotations

import enum
from typing import Literal, Protocol

__all__ = ["TURN_KINDS", "VIEW_HIDDEN_KINDS", "Authority", "Invoker"]


class Authority(enum.Enum):
    """Who is committing. Core authority comes only from the kernel's own invoker objects."""

    HOST = "host"
    CORE = "core"
    TASK = "task"


class Invoker(Protocol):
    """The invocation token a task commit carries (see :mod:`pico3.tasks.invocation`).

    ``mode`` is ``"run"`` or ``"abort"``; ``alive`` turns false for good when the handler that
    holds the token returns. The kernel checks it on the line before every task commit.
    """

    @property
    def task_id(self) -> int: ...

    @property
    def mode(self) -> Literal["run", "abort"]: ...

    @property
    def alive(self) -> bool: ...


TURN_KINDS = frozenset({"pi.generation", "pi.tool", "pi.post_tools"})
"""Live non-background tasks of these kinds make their conversation busy (docs/design/turn.md#busy)."""

VIEW_HIDDEN_KINDS = TURN_KINDS | {"pi.collapse"}
"""Kinds rendered elsewhere in the view (``turn``, ``compaction``), never under ``tasks``."""
