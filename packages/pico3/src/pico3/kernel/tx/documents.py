"""Documents, namespaces, events and config inside a commit.

``document`` (core: raw roots), ``plugins``/``emit`` (namespace slices and plugin events),
``emit_event`` (core kernel events), ``config`` (:class:`~pico3.kernel.tx.config.ConfigFacade`),
``load`` (another conversation's documents), ``snapshot`` and ``rewindable_as_of`` (reads).
"""

from __future__ import annotations

from typing import Any

from chord.json import JsonError, copy_json
from pico3.kernel.namespaces import Namespace, SliceDoc, SliceView, check_name
from pico3.kernel.proxy import TrackedDict
from pico3.kernel.tx.authority import Authority
from pico3.kernel.tx.base import TxBase
from pico3.kernel.tx.config import ConfigFacade
from pico3.session_data.config import ABSENT
from pico3.storage.records import (
    DocRef,
)

__all__ = ["DocumentOps"]


class DocumentOps(TxBase):
    """Documents, namespace slices, envelope events and config."""

    # -- documents, config, namespaces -----------------------------------------------------
    def document(self, doc: SliceDoc, conversation_id: int | None = None) -> TrackedDict:
        """Core: the tracked root of a raw document (``inbox``, ``turn``, ``tasks`` live here).

        ``conversation_id`` defaults to the bound conversation; the session document has none.
        """
        self._require(Authority.CORE, "raw document access")
        if doc == "session":
            return self._doc_root(DocRef.session())
        cid = self._bound() if conversation_id is None else conversation_id
        self._known(cid)
        return self._doc_root(DocRef.rewindable(cid) if doc == "rewindable" else DocRef.sticky(cid))

    def _slice_root(self, doc: SliceDoc) -> TrackedDict:
        """The root of the bound conversation's ``doc`` (or the session document); internal to
        namespace slices and snapshots."""
        self._check()
        if doc == "session":
            return self._doc_root(DocRef.session())
        cid = self._bound()
        ref = DocRef.rewindable(cid) if doc == "rewindable" else DocRef.sticky(cid)
        return self._doc_root(ref)

    def require_namespace(self, token: Namespace) -> Namespace:
        """Reject a stale namespace token."""
        self._check()
        return self._kernel.namespaces.require(token)

    def plugins(self, token: Namespace) -> SliceView:
        """The namespace's merged, tracked slice for this transaction's conversation."""
        self._check()
        return SliceView(self, self.require_namespace(token))

    def emit(self, token: Namespace, name: str, data: Any = None) -> None:
        """Attach ``{"type": "plugin.<ns>.<name>", "data": data}`` to this commit's envelope."""
        self._check()
        self.require_namespace(token)
        check_name(name, "event name")
        try:
            payload = copy_json(data, ("data",))
        except JsonError as exc:
            raise ValueError(f"event {token.name}.{name}: {exc}") from None
        cid = self._bound()
        event = {"type": f"plugin.{token.name}.{name}", "data": payload}
        self._batch.events.setdefault(cid, []).append(event)

    def emit_event(self, conversation_id: int, event: dict[str, Any]) -> None:
        """Core: attach a named kernel event (``{"type": "turn.started", ...}``) to the envelope
        of ``conversation_id`` for this commit."""
        self._require(Authority.CORE, "emit_event")
        self._known(conversation_id)
        kind = event.get("type") if isinstance(event, dict) else None
        if not isinstance(kind, str) or not kind or kind.startswith("plugin."):
            raise ValueError(f"a core event needs a non-plugin 'type', got {kind!r}")
        try:
            payload = copy_json(event, ("event",))
        except JsonError as exc:
            raise ValueError(str(exc)) from None
        self._batch.events.setdefault(conversation_id, []).append(payload)

    def config(self, conversation_id: int) -> ConfigFacade:
        """Get, set and reset configuration of a conversation (one event per commit)."""
        self._check()
        self._known(conversation_id)
        if self._kernel.documents.get(DocRef.rewindable(conversation_id)) is None:
            raise RuntimeError(
                f"documents of conversation {conversation_id} are not loaded in this "
                "transaction; call `await tx.load(conversation_id)` first"
            )
        return ConfigFacade(self, conversation_id)

    async def load(self, conversation_id: int) -> None:
        """Load another conversation's documents so ``config``/``write`` can reach them."""
        self._check()
        if conversation_id in self._conversations:
            return  # created in this batch: its documents start empty and are already cached
        self._known(conversation_id)
        await self._kernel.conversation_docs(conversation_id, self._ctx)

    def snapshot(self, doc: SliceDoc) -> dict[str, Any]:
        """A plain deep copy of the bound conversation's document (or the session's), with
        declared defaults filled in where nothing is stored: config keys that live in ``doc``
        and the keys of live namespaces. Nothing is seeded; this is a read."""
        value = self._slice_root(doc).to_plain()
        for name, key in self._kernel.config_keys.items():
            if key.doc == doc and name not in value and key.default is not ABSENT:
                value[name] = key.default_copy()
        for token in self._kernel.namespaces.live():
            declared = token.defaults.get(doc)
            if not declared:
                continue
            plugins = value.setdefault("plugins", {})
            stored = plugins.setdefault(token.name, {})
            for name, default in declared.items():
                if name not in stored:
                    stored[name] = copy_json(default)
        return value

    async def rewindable_as_of(self, conversation_id: int, at: int) -> dict[str, Any]:
        """The rewindable document as of the commit that appended entry ``at``."""
        self._check()
        self._known(conversation_id)
        return await self._kernel.rewindable_as_of(conversation_id, at, self._ctx)
