"""The shared core of a transaction: its state, the open and authority checks, the task scope.

Every concern of :class:`~pico3.kernel.tx.Transaction` goes through these: ``_check`` (closed
transactions refuse everything), ``_require`` (core-only methods), ``_known``/``_bound``
(conversation lookups as of this batch), ``_task_scope`` (what a task invocation may reach)
and ``_doc_root`` (the tracked root of a loaded document).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import UNSET

from chord.context import Context
from pico3.kernel.errors import Forbidden, TransactionClosed, UnknownConversation
from pico3.kernel.proxy import Recorder, TrackedDict
from pico3.kernel.tx.authority import Authority, Invoker
from pico3.kernel.tx.batch import Batch
from pico3.session_data.entries import EntryKind, EntryRejected
from pico3.storage.records import Conversation, DocRef, Entry, Input, Task, clone

if TYPE_CHECKING:
    from pico3.kernel.core import KernelCore

__all__ = ["TxBase"]


class TxBase:
    """The state one transaction keeps and the checks every concern shares: open, authority,
    the bound conversation, the task scope, document roots and task records as of this batch.

    The concerns (:mod:`~pico3.kernel.tx.tasks`, :mod:`~pico3.kernel.tx.entries`,
    :mod:`~pico3.kernel.tx.documents`, :mod:`~pico3.kernel.tx.conversations`) build on it; the
    :class:`~pico3.kernel.tx.Transaction` a builder gets is all of them together.
    """

    def __init__(
        self,
        kernel: KernelCore,
        authority: Authority,
        conversation_id: int | None,
        batch: Batch,
        ctx: Context,
        invoker: Invoker | None = None,
    ) -> None:
        self._kernel = kernel
        self._authority = authority
        self._conversation_id = conversation_id
        self._batch = batch
        self._ctx = ctx
        self._invoker = invoker
        # the task whose closing commit this is (the scheduler sets it): it counts as gone for
        # prospective busy (docs/design/turn.md#busy)
        self._closing: int | None = None
        self._entries: dict[int, Entry] = {}
        self._conversations: dict[int, Conversation] = {}
        self._inputs: dict[int, Input] = {}
        self._appended: set[int] = set()
        self._roots: dict[DocRef, TrackedDict] = {}

    @property
    def conversation_id(self) -> int | None:
        """The conversation this transaction is bound to (a handle's), if any."""
        return self._conversation_id

    def _check(self) -> None:
        if not self._batch.open:
            raise TransactionClosed("the transaction is closed: its builder has returned")

    def _require(self, authority: Authority, what: str) -> None:
        self._check()
        if self._authority is not authority:
            raise Forbidden(f"{what} requires {authority.value} authority")

    @property
    def invoker(self) -> Invoker | None:
        """The invocation token this transaction runs under (task commits), if any."""
        return self._invoker

    # -- conversations ---------------------------------------------------------------------
    def conversation(self, conversation_id: int) -> Conversation | None:
        """A conversation record (this batch's creations included). A record with a section
        seed is a private copy: the seed's JSON values are mutable, the kernel's are not."""
        self._check()
        found = self._conversations.get(conversation_id)
        if found is None:
            found = self._kernel.conversations.get(conversation_id)
        if found is not None and found.sections is not UNSET:
            found = clone(found)
        return found

    def _known(self, conversation_id: int) -> Conversation:
        found = self.conversation(conversation_id)
        if found is None:
            raise UnknownConversation(f"conversation {conversation_id} does not exist")
        return found

    def _bound(self) -> int:
        if self._conversation_id is None:
            raise Forbidden("this transaction is not bound to a conversation")
        return self._conversation_id

    # -- documents -------------------------------------------------------------------------
    def _doc_root(self, ref: DocRef) -> TrackedDict:
        """The tracked root of a loaded document (kernel-internal)."""
        root = self._roots.get(ref)
        if root is None:
            raw = self._kernel.documents.get(ref)
            if raw is None:
                raise RuntimeError(
                    f"documents of conversation {ref.conversation_id} are not loaded in this "
                    "transaction; call `await tx.load(conversation_id)` first"
                )
            recorder = Recorder(self._batch.membrane)
            self._batch.recorders[ref] = recorder
            root = recorder.root(raw)
            self._roots[ref] = root
        return root

    # -- task scope ------------------------------------------------------------------------
    def _no_task_config(self) -> None:
        if self._authority is Authority.TASK:
            raise Forbidden("ordinary tasks read config but cannot write it")

    def _task_scope(self, conversation_id: int, what: str) -> None:
        """TASK authority reaches its own conversation and the conversations it owns
        (recursively); an abort invocation may not write at all."""
        if self._authority is not Authority.TASK:
            return
        invoker = self._invoker
        assert invoker is not None
        if invoker.mode == "abort":
            raise Forbidden(f"{what}: an abort invocation may not create or write")
        if not self.in_subtree(invoker.task_id, conversation_id):
            raise Forbidden(
                f"{what}: conversation {conversation_id} is outside task {invoker.task_id}'s "
                "conversation and owned subtree"
            )

    def in_subtree(self, task_id: int, conversation_id: int) -> bool:
        """True when ``conversation_id`` is task ``task_id``'s own conversation or one it owns
        (directly, or through tasks of owned conversations).

        The owner chain of the conversation must reach ``task_id`` itself: a conversation owned
        by a *sibling* task (another task in the same conversation) is outside the subtree.
        """
        own = self._task_record(task_id)
        if own is None:
            return False
        return conversation_id == own.conversation_id or self.owns(task_id, conversation_id)

    def owns(self, task_id: int, conversation_id: int) -> bool:
        """True when ``conversation_id``'s owner chain reaches task ``task_id``: owned by it, or
        by a task living in a conversation it owns, recursively (terminal owners count: the
        kernel keeps every owner task indexed). A task's own conversation is *not* owned by it,
        nor is a child of another task in that conversation."""
        seen: set[int] = set()
        current = self.conversation(conversation_id)
        while current is not None and current.id not in seen:
            seen.add(current.id)
            if current.owner is UNSET:
                return False
            if current.owner == task_id:
                return True
            owner = self._task_record(current.owner)
            if owner is None:
                return False
            current = self.conversation(owner.conversation_id)
        return False

    def _task_record(self, task_id: int) -> Task | None:
        found = self._batch.tasks.get(task_id)
        return found if found is not None else self._kernel.task_index.get(task_id)


def _kind_name(kind: EntryKind | str) -> str:
    if isinstance(kind, EntryKind):
        return kind.kind
    if isinstance(kind, str):
        return kind
    raise EntryRejected(f"entry kind must be a str or an EntryKind, got {type(kind).__name__}")
