"""The three kinds of document and the kernel's cache of their current values.

Each session has one *session* document; each conversation has a *rewindable* and a *sticky*
one (docs/design/harness.md#documents). Documents are JSON objects changed only inside commits, through tracked
proxies (:mod:`pico3.kernel.proxy`); each commit that changes a document persists that commit's
ops as one ``doc`` write. Storage keeps the op logs (commit-granular, so the rewindable state "at
entry X" is the document after the whole commit that appended X); the kernel keeps the folded
present value here.

The cache is mutated *in place* by a transaction's proxies. If the transaction fails before its
batch is persisted, the kernel evicts every document the transaction touched, and the next use
reloads the committed value from storage: the failed mutations vanish without a copy per commit.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, cast

from chord.context import Context
from chord.delta.apply import apply_immutable_batches
from chord.json import copy_json
from pico3.storage.base import Storage
from pico3.storage.records import DocLog, DocRef

__all__ = ["DocumentCache", "fold_log", "memo_once"]

_SESSION = DocRef.session()


def fold_log(log: DocLog | None) -> dict[str, Any]:
    """Fold a document's op batches (from its last base) into a fresh, privately owned dict."""
    if not log:
        return {}
    value = apply_immutable_batches({}, cast("list[Any]", log))
    if type(value) is not dict:
        raise TypeError(f"a document must fold to a JSON object, got {type(value).__name__}")
    return copy_json(value)


class DocumentCache:
    """Present values of documents, loaded on demand from storage."""

    __slots__ = ("_docs", "_ready", "_storage")

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._docs: dict[DocRef, dict[str, Any]] = {}
        self._ready: set[int] = set()  # conversations whose two documents are both cached

    async def load(self, ref: DocRef, ctx: Context) -> dict[str, Any]:
        """The cached value of ``ref``, reading and folding the stored log on first use."""
        value = self._docs.get(ref)
        if value is None:
            value = fold_log(await self._storage.doc(ref, ctx))
            self._docs[ref] = value
        return value

    def ready(self, conversation_id: int | None) -> bool:
        """True when the session document (and ``conversation_id``'s two documents, if given)
        are cached, so a commit needs no load before its builder runs."""
        docs = self._docs
        if _SESSION not in docs:
            return False
        if conversation_id is None or conversation_id in self._ready:
            return True
        if DocRef.rewindable(conversation_id) in docs and DocRef.sticky(conversation_id) in docs:
            self._ready.add(conversation_id)  # until one of them is evicted
            return True
        return False

    def get(self, ref: DocRef) -> dict[str, Any] | None:
        """The cached value, or ``None`` when it has not been loaded."""
        return self._docs.get(ref)

    def put_new(self, ref: DocRef) -> dict[str, Any]:
        """Start the cache of a document that storage does not have yet (a new conversation)."""
        value: dict[str, Any] = {}
        self._docs[ref] = value
        return value

    def evict(self, ref: DocRef) -> None:
        """Forget ``ref``; the next :meth:`load` rereads the committed value."""
        self._docs.pop(ref, None)
        if isinstance(ref.conversation_id, int):
            self._ready.discard(ref.conversation_id)


def memo_once(slot: MutableMapping[str, Any], key: str, candidate: Any) -> Any:
    """First writer wins: return ``slot["memos"][key]`` if present, else store ``candidate``.

    Presence, not truthiness, decides (``None`` is a stored value, so a later candidate never
    replaces it). Run it inside one commit: check-and-record in a single transaction is what
    makes concurrent callers agree on the durable winner. Returns a plain copy of the winner.
    """
    if not isinstance(key, str) or not key:
        raise ValueError(f"memo key must be a non-empty str, got {key!r}")
    if "memos" not in slot:
        slot["memos"] = {}
    memos = slot["memos"]
    if not isinstance(memos, MutableMapping):
        raise TypeError("slot['memos'] must be an object")
    if key not in memos:
        memos[key] = candidate
    value = memos[key]
    return value.to_plain() if hasattr(value, "to_plain") else copy_json(value)
