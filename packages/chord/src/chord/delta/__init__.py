"""chord.delta: ops over plain JSON documents, wire-compatible with Chord 0.87.

A document is a strict JSON value (``dict``/``list``/``str``/numbers/``bool``/``None``). A change
is a batch of *ops*, tuples such as ``("s", ("count",), 2)`` (:mod:`chord.delta.ops`). This
package is the one implementation of them:

* :func:`apply` (in place) and :func:`apply_immutable` / :func:`apply_immutable_batches`
  (copy-on-write, sharing untouched subtrees) run a batch, all or nothing
  (:mod:`chord.delta.apply`).
* :func:`diff` (alias :func:`diff_revisions`) computes a batch between two revisions
  (:mod:`chord.delta.diff`).
* :func:`encoder` / :func:`decoder` compress paths for the wire exactly like the TypeScript
  client (:mod:`chord.delta.codec`); :func:`decode_ops` checks untrusted decoded ops.
* :func:`track` and the drafts (:class:`DraftDict`, :class:`DraftList`) record ops *as a document
  is mutated*, so a change costs what it touches, never the document (:mod:`chord.delta.track`).
* String counts (``t``) are UTF-16 code units on the wire (:mod:`chord.delta.utf16`).

Revisions, batches and payloads are immutable by contract: nothing is frozen, so mutating a
published value silently corrupts every replica that shares it.
"""

from chord.delta.apply import apply, apply_immutable, apply_immutable_batches
from chord.delta.codec import Decoder, Encoder, WireOp, assert_valid_wire_op, decoder, encoder
from chord.delta.diff import diff, diff_revisions, overlap
from chord.delta.ops import (
    MAX_IDENTITY_CANDIDATES,
    MAX_OPS,
    MAX_SEMANTIC_CELLS,
    OVERLAP_SCAN,
    RESERVED_SEGMENTS,
    SNAPSHOT_COST,
    InvalidOpError,
    Op,
    Path,
    PathError,
    Seg,
    UnsafePathError,
    assert_safe_path,
    assert_valid_op,
    decode_ops,
    is_base,
)
from chord.delta.track import DraftDict, DraftList, Tracker, open_draft, track
from chord.delta.utf16 import utf16_len

__all__ = [
    "MAX_IDENTITY_CANDIDATES",
    "MAX_OPS",
    "MAX_SEMANTIC_CELLS",
    "OVERLAP_SCAN",
    "RESERVED_SEGMENTS",
    "SNAPSHOT_COST",
    "Decoder",
    "DraftDict",
    "DraftList",
    "Encoder",
    "InvalidOpError",
    "Op",
    "Path",
    "PathError",
    "Seg",
    "Tracker",
    "UnsafePathError",
    "WireOp",
    "apply",
    "apply_immutable",
    "apply_immutable_batches",
    "assert_safe_path",
    "assert_valid_op",
    "assert_valid_wire_op",
    "decode_ops",
    "decoder",
    "diff",
    "diff_revisions",
    "encoder",
    "is_base",
    "open_draft",
    "overlap",
    "track",
    "utf16_len",
]
