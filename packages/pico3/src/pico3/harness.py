"""The public surface of the harness (so far): open a session, reach conversations, commit.

::

    h = await Harness.open(MemoryStorage(), HarnessOptions(), ctx)
    plan = h.namespace("plan", {"rewindable": {"enabled": False}}, view=lambda s: s)
    c = await h.root(ctx)
    await c.commit(lambda tx, ctx: tx.plugins(plan).__setitem__("enabled", True), ctx)
    watch = await c.watch(ctx)          # snapshot + subscription in one step
    watch.start(print)                  # envelopes {revision, ops, events}, in commit order

Nothing runs in the background: tasks, tools and the turn loop arrive with their own issue and
slot into :class:`~pico3.kernel.commit.Kernel` (commit listeners kick a scheduler; task
invokers commit with their own authority).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from chord.context import Context
from pico3.kernel.commit import Kernel, Reporter
from pico3.kernel.namespaces import Namespace
from pico3.kernel.tx import Transaction
from pico3.kernel.view import Watch
from pico3.model.context import DerivedContext
from pico3.model.entries import EntryKind
from pico3.storage.base import Storage

__all__ = ["ConversationHandle", "Harness", "HarnessOptions"]


@dataclass(frozen=True, slots=True)
class HarnessOptions:
    """Options of :meth:`Harness.open`. ``on_report`` receives errors that never reach a
    caller (listener and projection failures)."""

    on_report: Reporter | None = None


class Harness:
    """One open session over one storage object."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    @classmethod
    async def open(cls, storage: Storage, options: HarnessOptions | None, ctx: Context) -> Harness:
        """Open ``storage`` (creating the root conversation if it is empty). Nothing runs.

        A storage object already owned by an open session raises ``StorageInUse``.
        """
        options = options or HarnessOptions()
        return cls(await Kernel.open(storage, ctx, options.on_report))

    @property
    def kernel(self) -> Kernel:
        """The session kernel (for the task layer and tests)."""
        return self._kernel

    async def conversation(self, conversation_id: int, ctx: Context) -> ConversationHandle | None:
        """A handle on an existing conversation, or ``None``."""
        ctx.raise_if_cancelled()
        self._kernel.check_usable()
        if conversation_id not in self._kernel.conversations:
            return None
        return ConversationHandle(self._kernel, conversation_id)

    async def root(self, ctx: Context) -> ConversationHandle:
        """The root conversation (the session's first)."""
        ctx.raise_if_cancelled()
        self._kernel.check_usable()
        return ConversationHandle(self._kernel, min(self._kernel.conversations))

    def namespace(
        self,
        name: str,
        defaults: Mapping[str, Mapping[str, Any]] | None = None,
        view: Callable[[dict[str, Any]], Any] | None = None,
    ) -> Namespace:
        """Register a namespace; returns its token (see :mod:`pico3.kernel.namespaces`)."""
        self._kernel.check_usable()
        return self._kernel.namespaces.register(name, defaults, view)

    async def close(self, ctx: Context) -> None:
        """Close watches and release the storage (idempotent)."""
        await self._kernel.close(ctx)


class ConversationHandle:
    """Operations on one conversation. Every method takes ``ctx`` last."""

    __slots__ = ("_kernel", "id")

    def __init__(self, kernel: Kernel, conversation_id: int) -> None:
        self._kernel = kernel
        self.id = conversation_id

    async def commit(self, builder: Callable[[Transaction, Context], Any], ctx: Context) -> Any:
        """Run ``builder(tx, ctx)`` as one atomic commit bound to this conversation."""
        return await self._kernel.commit(builder, ctx, conversation_id=self.id)

    async def write(
        self,
        kind: EntryKind | str,
        ctx: Context,
        *,
        model: list[dict[str, Any]] | None = None,
        data: dict[str, Any] | None = None,
    ) -> int:
        """Passive write of one entry (see :meth:`Transaction.write`); returns the input id."""

        def build(tx: Transaction, _ctx: Context) -> int:
            return tx.write(self.id, kind, model=model, data=data)

        return await self.commit(build, ctx)

    async def fork(self, at: int | Literal["start"], ctx: Context) -> ConversationHandle:
        """A new conversation inheriting this one's transcript (and rewindable state) at ``at``."""

        async def build(tx: Transaction, _ctx: Context) -> int:
            if at == "start":
                return await tx.create_conversation()
            return await tx.create_conversation(fork=(self.id, at))

        return ConversationHandle(self._kernel, await self.commit(build, ctx))

    async def config(self, ctx: Context) -> dict[str, Any]:
        """Resolved configuration (every declared key; ``model`` absent when unset)."""
        return await self.commit(lambda tx, _ctx: tx.config(self.id).resolved(), ctx)

    async def set_config(self, patch: dict[str, Any], ctx: Context) -> None:
        """Set config keys in one commit (validated first; one ``config.changed``)."""
        await self.commit(lambda tx, _ctx: tx.config(self.id).set(patch), ctx)

    async def reset_config(self, keys: list[str], ctx: Context) -> None:
        """Delete stored overrides; reads resolve the declared defaults again."""
        await self.commit(lambda tx, _ctx: tx.config(self.id).reset(keys), ctx)

    async def rewindable(self, ctx: Context) -> dict[str, Any]:
        """A plain snapshot of the rewindable document."""
        return await self.commit(lambda tx, _ctx: tx.snapshot("rewindable"), ctx)

    async def sticky(self, ctx: Context) -> dict[str, Any]:
        """A plain snapshot of the sticky document."""
        return await self.commit(lambda tx, _ctx: tx.snapshot("sticky"), ctx)

    async def context(self, ctx: Context) -> DerivedContext:
        """The derived model context (for tooling and tests)."""
        return await self.commit(lambda tx, _ctx: tx.context(self.id), ctx)

    async def watch(self, ctx: Context) -> Watch:
        """Snapshot the view and subscribe in one line operation (see :class:`Watch`)."""
        return await self._kernel.views.watch(self.id, ctx)
