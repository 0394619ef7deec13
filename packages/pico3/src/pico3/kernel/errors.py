"""The kernel's error types, in one place so callers can catch them precisely.

Two families, matching docs/design/harness.md#validation-and-faults:

* **Rejections** (the session continues, nothing was recorded): :class:`Forbidden`,
  :class:`StaleDefinition`, :class:`ReadAfterWrite`, :class:`NestedLineOperation`,
  :class:`TransactionClosed`, plus the model's ``EntryRejected`` and ``ConfigRejected``.
* **Terminal states**: :class:`Closed` (the session was closed) and :class:`Faulted` (a storage
  commit failed; every later operation rejects until the storage is reopened).
"""

from __future__ import annotations

__all__ = [
    "Closed",
    "Faulted",
    "Forbidden",
    "KernelError",
    "NestedLineOperation",
    "ReadAfterWrite",
    "StaleDefinition",
    "TransactionClosed",
    "UnknownConversation",
]


class KernelError(Exception):
    """Base class of every kernel error."""


class Closed(KernelError):
    """The session is closed."""


class Faulted(KernelError):
    """A storage commit failed; the session is fail-stopped. Reopen the storage to recover."""


class Forbidden(KernelError):
    """The caller's capability view does not allow this operation."""


class StaleDefinition(KernelError):
    """A token (namespace, kind) is no longer the registered one."""


class ReadAfterWrite(KernelError):
    """A scan-shaped read followed a buffered write to its domain; the transaction is poisoned."""


class NestedLineOperation(KernelError):
    """A session operation was started from inside a builder (it would deadlock the line)."""


class TransactionClosed(KernelError):
    """A transaction was used after its builder returned."""


class UnknownConversation(KernelError):
    """The conversation id does not name a conversation of this session."""
