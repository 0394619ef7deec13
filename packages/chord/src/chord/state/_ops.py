"""Checking a batch of decoded ops before any of it is applied."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from chord.delta.ops import validate_op
from chord.json import validate_json

__all__ = ["check_batch"]


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
