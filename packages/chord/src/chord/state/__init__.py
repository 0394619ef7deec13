"""Replicated state: one writer, many read-only replicas of a JSON value (docs/design/chord.md#replicated-state).

* :func:`replicated_state` creates the authoritative :class:`MutableReplicatedState`
  (``change``/``replace``/``apply``/``subscribe``).
* :class:`ReplicaState` is the consumer-side replica the remote binding feeds.
* :func:`replicated_state_from_source` republishes an external exact-ops commit stream.
* Every subscriber receives ``(value, ctx, Delivery)``; deliveries are bounded per subscriber.
* :func:`is_replicated_state` recognises chord's states by identity, never by shape.
"""

from chord.state._attached import (
    AttachedReplicatedState,
    ReplicatedStateSource,
    ReplicatedStateSourceAttachment,
    SourceFrame,
    SourceSnapshot,
    replicated_state_from_source,
)
from chord.state._delivery import (
    MAX_PENDING_DELIVERIES,
    Delivery,
    ErrorReporter,
    Listener,
    ReplicatedState,
    SourceListener,
)
from chord.state._mutable import MutableReplicatedState, replicated_state
from chord.state._registry import is_replicated_state
from chord.state._replica import ReplicaError, ReplicaState

__all__ = [
    "MAX_PENDING_DELIVERIES",
    "AttachedReplicatedState",
    "Delivery",
    "ErrorReporter",
    "Listener",
    "MutableReplicatedState",
    "ReplicaError",
    "ReplicaState",
    "ReplicatedState",
    "ReplicatedStateSource",
    "ReplicatedStateSourceAttachment",
    "SourceFrame",
    "SourceListener",
    "SourceSnapshot",
    "is_replicated_state",
    "replicated_state",
    "replicated_state_from_source",
]
