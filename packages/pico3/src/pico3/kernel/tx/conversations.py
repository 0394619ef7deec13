"""Creating conversations inside a commit: roots, forks, owned conversations and their seeds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from msgspec import UNSET

from pico3.kernel.errors import Forbidden, ReadAfterWrite
from pico3.kernel.tx.authority import Authority
from pico3.kernel.tx.documents import DocumentOps
from pico3.kernel.tx.entries import EntryOps
from pico3.session_data.config import ConfigRejected, check_value
from pico3.session_data.section_seed import check_section_seed
from pico3.storage.records import (
    Conversation,
    ConversationWrite,
    DocRef,
    Parent,
    SectionSeed,
    Task,
    TaskPatch,
)

__all__ = ["ConversationOps"]


class ConversationOps(EntryOps, DocumentOps):
    """Conversation creation (roots, forks, owned children) and seed checks."""

    async def create_conversation(
        self,
        *,
        fork: tuple[int, int] | None = None,
        rewindable: dict[str, Any] | None = None,
        owner: int | None = None,
        sticky: dict[str, Any] | None = None,
        sections: Sequence[SectionSeed | Mapping[str, Any]] | None = None,
    ) -> int:
        """Create a conversation: a root, or a fork of ``(conversation_id, at)``.

        A fork inherits the parent's rewindable document as of the commit that appended ``at``
        (plugin slices included), then ``rewindable`` overrides apply; its sticky document
        starts empty apart from the ``sticky`` config seed. ``at`` must be fork-visible from the
        parent and already committed.

        ``owner`` makes it an owned conversation: the record carries ``owner`` and the owner
        task's ``owns`` gains the new id in this same commit. A task invocation may only own
        conversations itself (``owner`` = its own task); core may name any live task. An owned
        conversation never inherits core rewindable config keys (docs/design/decisions.md#d8-g5): only the seed sets
        them; plugin slices and kind keys are inherited.

        ``sections`` is the private section seed (docs/design/harness.md#section-seeds): ``{key, value, rendered}``
        items (:class:`~pico3.storage.records.SectionSeed` or plain mappings) that the
        conversation's canonical section fold starts from while it has no managed
        ``pi.system`` entry of its own (see :mod:`pico3.turn.system`). It is validated and
        deep-copied here (:class:`~pico3.session_data.section_seed.SectionSeedRejected` names the bad
        field; nothing is created) and never appears in a view. ``None`` means no seed.
        """
        self._check()
        owner_task = self._owner_task(owner, fork)
        parent: Parent | Any = UNSET
        base: dict[str, Any] = {}
        if fork is not None:
            parent, base = await self._fork_base(fork, owned=owner is not None)
        if rewindable is not None:
            base.update(self._check_rewindable_seed(rewindable))
        sticky_seed = {} if sticky is None else self._check_seed(sticky, "sticky")
        section_seed = UNSET if sections is None else check_section_seed(sections)
        cid = self._kernel.mint_id()
        record = Conversation(
            id=cid,
            parent=parent,
            owner=UNSET if owner is None else owner,
            sections=section_seed,
        )
        self._conversations[cid] = record
        self._batch.created.append(cid)
        self._batch.writes.append(ConversationWrite(conversation=record))
        if owner_task is not None:
            self._patch(TaskPatch(id=owner_task.id, owns=[*owner_task.owns, cid]))
        for ref in (DocRef.rewindable(cid), DocRef.sticky(cid)):
            self._kernel.documents.put_new(ref)
        self._seed(DocRef.rewindable(cid), base)
        self._seed(DocRef.sticky(cid), sticky_seed)
        return cid

    def _owner_task(self, owner: int | None, fork: tuple[int, int] | None) -> Task | None:
        """Check who may create (and own) the conversation; the live owner task, if any."""
        if self._authority is Authority.TASK:
            self._task_scope(self._bound(), "create_conversation")
            assert self._invoker is not None
            if owner != self._invoker.task_id:
                raise Forbidden(
                    "create_conversation: a task creates only conversations it owns "
                    f"(owner={self._invoker.task_id})"
                )
            # the parent must be in the task's subtree (docs/design/harness.md#authority)
            if fork is not None:
                self._task_scope(fork[0], "create_conversation(fork)")
        elif owner is not None and self._authority is not Authority.CORE:
            raise Forbidden("create_conversation: owner requires task or core authority")
        if owner is None:
            return None
        owner_task = self._task_record(owner)
        if owner_task is None or owner_task.status == "terminal":
            raise ValueError(f"create_conversation: owner task {owner} is not live")
        return owner_task

    async def _fork_base(
        self, fork: tuple[int, int], *, owned: bool
    ) -> tuple[Parent, dict[str, Any]]:
        """The fork's parent link and the rewindable document it inherits."""
        source, at = fork
        self._known(source)
        if at in self._entries:
            raise ReadAfterWrite("cannot fork at an entry appended in this same commit")
        if not await self._visible(source, at):
            raise ValueError(f"entry {at} is not fork-visible from conversation {source}")
        base = await self.rewindable_as_of(source, at)
        if owned:  # docs/design/decisions.md#d8-g5: owned children never inherit core config
            keys = self._kernel.config_keys
            base = {k: v for k, v in base.items() if not (k in keys and keys[k].core)}
        return Parent(conversation_id=source, at=at), base

    def _seed(self, ref: DocRef, values: dict[str, Any]) -> None:
        if values:
            root = self._doc_root(ref)
            for key, value in values.items():
                root[key] = value

    def _check_rewindable_seed(self, seed: dict[str, Any]) -> dict[str, Any]:
        return self._check_seed(seed, "rewindable")

    def _check_seed(
        self, seed: dict[str, Any], doc: Literal["rewindable", "sticky"]
    ) -> dict[str, Any]:
        if not isinstance(seed, dict):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigRejected(f"a {doc} seed must be a mapping of config key -> value")
        out: dict[str, Any] = {}
        for name, value in seed.items():
            key = self._kernel.config_keys.get(name)
            if key is None or key.doc != doc:
                raise ConfigRejected(f"config.{name}: not a {doc} config key")
            out[name] = check_value(key, value)
        return out
