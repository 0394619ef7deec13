"""Transactions: what a builder can do inside one commit, checked on every call.

A :class:`Transaction` is handed to a builder by :meth:`Kernel.commit`. It buffers writes
(synchronously), answers reads (asynchronously when they go to storage) and hands out tracked
proxies of documents. Its *authority* decides which methods work: one implementation, checked
at runtime on every method, so a caller that casts past the types still cannot reach core
operations (docs/design/harness.md#authority). Three authorities share it: ``HOST`` (handles), ``TASK``
(ordinary kinds' invocations: own conversation and owned subtree, own slot and checkpoint, no
config writes, nothing at all from an abort invocation) and ``CORE`` (the kernel and the
built-in kinds: raw documents, inputs, task records).

Task records (docs/design/harness.md#tasks): ``create_task`` (with ``after`` dependencies and ``background``), ``task``
(direct read, batch-aware), ``tasks`` (a scan), ``slot`` (working state that retires with the
terminal record), ``checkpoint`` (the kind's program counter), and the core-only ``set_task``,
``mark_task`` and ``finish_task``. A transaction run by a task carries its invocation token
(:class:`Invoker`), which the kernel checks on the line before the builder runs.

Read semantics (docs/design/harness.md#read-rules):

* direct reads (``entry``, ``conversation``, ``input``) see this batch's own writes;
* scan-shaped reads (``newest_entry``, ``scan_entries``, ``context``) after an entry append in
  the same conversation raise :class:`ReadAfterWrite` and *poison* the transaction: it cannot
  commit even if the builder catches the error;
* document reads are exempt: the proxy is the overlay.

After the builder returns the transaction is closed; any later call raises
:class:`TransactionClosed`, and every proxy it handed out is revoked.

The class is assembled from one module per concern, each small enough to read at once:
:mod:`~pico3.kernel.tx.base` (state, open/authority checks, task scope, document roots),
:mod:`~pico3.kernel.tx.tasks`, :mod:`~pico3.kernel.tx.entries` (entries and inputs),
:mod:`~pico3.kernel.tx.documents` (documents, namespaces, events, config),
:mod:`~pico3.kernel.tx.conversations`, :mod:`~pico3.kernel.tx.config` (:class:`ConfigFacade`);
:mod:`~pico3.kernel.tx.authority` and :mod:`~pico3.kernel.tx.batch` hold what the kernel and
the task layer share with it.
"""

from __future__ import annotations

from pico3.kernel.core import KindLookup
from pico3.kernel.tx.authority import (
    TURN_KINDS,
    VIEW_HIDDEN_KINDS,
    Authority,
    Invoker,
)
from pico3.kernel.tx.batch import Batch
from pico3.kernel.tx.config import ConfigFacade
from pico3.kernel.tx.conversations import ConversationOps

__all__ = [
    "TURN_KINDS",
    "VIEW_HIDDEN_KINDS",
    "Authority",
    "Batch",
    "ConfigFacade",
    "Invoker",
    "KindLookup",
    "Transaction",
]


class Transaction(ConversationOps):
    """What a builder gets: reads, buffered writes, tracked documents, events.

    Every concern's methods in one object (see the module docstring for where each lives).
    """
