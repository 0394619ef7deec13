"""Checking a batch of decoded ops before any of it is applied, and the revisions a trusted
in-process replica can take over instead of applying the ops again."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from chord.delta.ops import validate_op
from chord.json import validate_json

__all__ = ["check_batch", "recall_revision", "remember_revision"]


def check_batch(ops: Iterable[Any]) -> tuple[tuple[Any, ...], ...]:
    """Validate every op's shape and JSON payload; return the batch as a tuple.

    Raises (``UnsafePathError``, ``JsonError``, ``TypeError``/``ValueError`` from the delta
    validator) naming the offending op or path, before anything is touched.
    """
    batch = tuple(ops)
    for index, op in enumerate(batch):
        validate_op(op, f"op {index}")
        verb = op[0]
        if verb == "r":
            validate_json(op[1])
        elif verb == "s":
            validate_json(op[2], tuple(op[1]))
        elif verb == "p":
            path, start = tuple(op[1]), op[2]
            for offset, item in enumerate(op[4]):
                validate_json(item, (*path, start + offset))
    return batch


_REVISIONS: deque[tuple[tuple[Any, ...], Any, Any]] = deque(maxlen=8)
"""The last few ``(ops, before, after)`` that writable states published (they are held, so the
identities compared below stay unique while an entry is here)."""

MISSING: Any = object()


def remember_revision(ops: tuple[Any, ...], before: Any, after: Any) -> None:
    """Note that applying the batch ``ops`` (the very tuple that is published) to the revision
    ``before`` gave ``after``.

    Over the loopback transport a consumer's replica is handed that same tuple by reference,
    while it holds that same ``before`` (its hydration shared the source's value, and each of
    its updates since took over the source's revision). Applying the ops again would only
    rebuild an equal value, copying each container on the touched paths, and a long list (a
    conversation's entries, appended to every turn) is copied in full. So the replica takes
    ``after`` over (:func:`recall_revision`): revisions are immutable and may be shared by
    anyone, and the result is the very value the source publishes. Ops that came over a wire
    are other objects and are always applied."""
    _REVISIONS.append((ops, before, after))


def recall_revision(ops: tuple[Any, ...], before: Any) -> Any:
    """The revision :func:`remember_revision` noted for exactly these objects, or
    :data:`MISSING`."""
    for noted, base, after in reversed(_REVISIONS):
        if noted is ops and base is before:
            return after
    return MISSING
