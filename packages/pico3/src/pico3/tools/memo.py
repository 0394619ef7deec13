"""Memos on a tool's slot: the :data:`MISSING` sentinel, keys, reads and first-writer-wins writes,
and the :class:`SlotCommit` a :class:`~pico3.tools.ToolApi` reaches its slot through."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol, final

from chord.context import Context
from chord.json import JsonError, copy_json
from pico3.kernel.documents import memo_once
from pico3.kernel.tx import Transaction

__all__ = [
    "MISSING",
    "Missing",
    "SlotCommit",
    "SlotRejected",
    "memo_key",
    "slot_memo",
    "split_memo_args",
]


# -- the memo sentinel ---------------------------------------------------------------------
@final
class Missing:
    """The type of :data:`MISSING`: "no memo stored under this key" (``None`` is a value)."""

    _instance: Missing | None = None

    def __new__(cls) -> Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "MISSING"


MISSING = Missing()
"""Returned by a memo read when nothing is stored under the key."""


# -- slots and memos -----------------------------------------------------------------------
class SlotCommit(Protocol):
    """Run ``fn(tx, slot)`` on a tool task's slot inside one commit, with that task's authority,
    and return its result. ``pi.tool`` provides it (over the task runtime's ``commit``)."""

    def __call__(
        self, fn: Callable[[Transaction, MutableMapping[str, Any]], Any], ctx: Context, /
    ) -> Awaitable[Any]: ...


def memo_key(*parts: str) -> str:
    """``tool:<name>`` / ``hook:<namespace>:<name>``; each part a non-empty str."""
    for part in parts:
        if not isinstance(part, str) or not part:
            raise ValueError(f"memo name parts must be non-empty str, got {part!r}")
    return ":".join(parts)


def slot_memo(slot: MutableMapping[str, Any], key: str, candidate: Any = MISSING) -> Any:
    """Inside a commit: read ``slot.memos[key]`` (:data:`MISSING` when absent), or with a
    ``candidate`` apply ``memo_once`` (first writer wins) and return the durable winner."""
    if candidate is not MISSING:
        try:
            candidate = copy_json(candidate, ("memos", key))
        except JsonError as exc:
            raise ValueError(f"memo {key!r}: {exc}") from None
        return memo_once(slot, key, candidate)
    memos = slot.get("memos")
    if memos is None or key not in memos:
        return MISSING
    value = memos[key]
    return value.to_plain() if hasattr(value, "to_plain") else copy_json(value)


def split_memo_args(args: tuple[Any, ...]) -> tuple[Any, Context]:
    """``(ctx,)`` -> a read (:data:`MISSING`, ctx); ``(candidate, ctx)`` -> a write. This is how
    the ``memo(name, ctx)`` / ``memo(name, candidate, ctx)`` overloads tell themselves apart
    (counting arguments, because ``None`` is a valid candidate)."""
    if len(args) == 1:
        return MISSING, args[0]
    if len(args) == 2:
        return args[0], args[1]
    raise TypeError("memo takes (name, ctx) to read or (name, candidate, ctx) to write")


class SlotRejected(ValueError):
    """A tool tried to change a protected slot field, or gave a free field a bad value."""
