"""Who commits: the :class:`Authority` levels, the task :class:`Invoker` token and the
:class:`KindLookup` the task layer installs, plus the kind sets busy and the view judge by.

A leaf module (it imports nothing of the kernel), so the task layer and the kernel both name
these protocols without importing each other.
"""

from __future__ import annotations

import enum
from typing import Any, Literal, Protocol

__all__ = ["TURN_KINDS", "VIEW_HIDDEN_KINDS", "Authority", "Invoker", "KindLookup"]


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


class KindLookup(Protocol):
    """What the kernel asks the task layer about kinds (installed by the scheduler)."""

    def resolve(self, kind: object, *, core: bool) -> str:
        """The kind name of ``kind``: the registered kind object (any authority) or, for core
        callers, a registered name. Raises ``StaleDefinition`` for a stale object."""
        ...

    def initial_slot(self, name: str, input: Any) -> dict[str, Any] | None:
        """The kind's initial slot for ``input`` (``None`` when it declares none)."""
        ...

    def starts_at_once(self, name: str) -> bool:
        """Whether a new task of ``name`` with nothing to wait for is dispatched as soon as its
        creating commit is durable (the kind registered, dispatch enabled and not held): then it
        is created ``running``, claimed in that commit rather than in one of its own."""
        ...


TURN_KINDS = frozenset({"pi.generation", "pi.tool", "pi.post_tools"})
"""Live non-background tasks of these kinds make their conversation busy (docs/design/turn.md#busy)."""

VIEW_HIDDEN_KINDS = TURN_KINDS | {"pi.collapse"}
"""Kinds rendered elsewhere in the view (``turn``, ``compaction``), never under ``tasks``."""
