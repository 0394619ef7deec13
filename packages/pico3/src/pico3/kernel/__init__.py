"""The pico3 kernel: the line, commits, capability views, the membrane, documents, namespaces
and the view.

Read in this order: :mod:`~pico3.kernel.line` (the FIFO mutex), :mod:`~pico3.kernel.commit`
(the lifecycle), :mod:`~pico3.kernel.tx` (what a builder may do), :mod:`~pico3.kernel.proxy`
(tracked proxies and the membrane), :mod:`~pico3.kernel.documents`,
:mod:`~pico3.kernel.namespaces`, :mod:`~pico3.kernel.view` (envelopes and watches).
"""

from pico3.kernel.commit import Kernel
from pico3.kernel.documents import memo_once
from pico3.kernel.errors import (
    Closed,
    Faulted,
    Forbidden,
    KernelError,
    NestedLineOperation,
    ReadAfterWrite,
    StaleDefinition,
    TransactionClosed,
    UnknownConversation,
)
from pico3.kernel.namespaces import Namespace, SliceView
from pico3.kernel.proxy import DetachedValue, RevokedProxy, TrackedDict, TrackedList
from pico3.kernel.tx import TURN_KINDS, Authority, ConfigFacade, Invoker, KindLookup, Transaction
from pico3.kernel.view import Envelope, Watch

__all__ = [
    "TURN_KINDS",
    "Authority",
    "Closed",
    "ConfigFacade",
    "DetachedValue",
    "Envelope",
    "Faulted",
    "Forbidden",
    "Invoker",
    "Kernel",
    "KernelError",
    "KindLookup",
    "Namespace",
    "NestedLineOperation",
    "ReadAfterWrite",
    "RevokedProxy",
    "SliceView",
    "StaleDefinition",
    "TrackedDict",
    "TrackedList",
    "Transaction",
    "TransactionClosed",
    "UnknownConversation",
    "Watch",
    "memo_once",
]
