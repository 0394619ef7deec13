"""Owned conversations (subagents): conversations a task creates and answers for
(docs/design/harness.md#owned-conversations, docs/design/decisions.md#d8-g5).

A subagent is not a task kind. It is an ordinary conversation whose record names an *owner*
task; the owner's ``owns`` lists it. Ownership is what everything else keys on:

* **reach**: a task may only touch its own conversation and the subtree it owns: the
  conversations whose owner chain reaches the task itself (:func:`owns`; terminal owners
  count). A child of *another* task in the same conversation is not in reach;
* **abort**: a conversation abort marks the live foreground tasks of the conversation and,
  through every live *foreground* owner, of the conversations it owns, recursively (docs/design/harness.md#abort);
  background owners (jobs, manual work) keep their children running;
* **config isolation** (docs/design/decisions.md#d8-g5): an owned child never inherits the core rewindable config keys of
  its source (``model``, ``thinkingLevel``, ...). The creation commit writes the seeded values
  and nothing else, so an absent core key reads its default and an absent ``model`` makes the
  child's first model call fail ``no_model`` rather than silently run on the parent's model.
  Plugin slices (and task-kind keys) *are* inherited from the fork point with ``inherit``.
  Sticky config starts at its defaults unless seeded.

Creating a child is one commit: :func:`create_owned` inside a transition builder (atomically
with the owner's next checkpoint, which is where a resumable kind keeps the child's id), or
:func:`create_owned_conversation` from a handler or a tool (``api.conversation(spec)``). A
task that needs its child again after a reopen re-attaches with :meth:`OwnedConversation.attach`.
Sends go through the ordinary admission of the child (placed now when idle, queued when busy)
after an ownership check; a ``request_id`` makes a re-sent input after recovery the same input.

Behaviour must come from durable data or pre-registered code: hooks are code, so register
subtree hooks (``c.hooks(ns, kind, handlers, subtree=True)``) that dispatch on the child's
seeded ``profile`` config before the child exists, or create the child, register its hooks,
then send. A child whose difference is only its system prompt needs no code at all: seed its
sections (``sections`` in the spec), which its first model call folds from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from chord.context import Context
from pico3.kernel.errors import Forbidden
from pico3.kernel.tx import Transaction
from pico3.session_data.section_seed import check_section_seed
from pico3.storage.records import Input, SectionSeed, Task

if TYPE_CHECKING:
    from pico3.tasks.runtime import Runtime

__all__ = [
    "OwnedConversation",
    "OwnedInput",
    "OwnedSpec",
    "create_owned",
    "create_owned_conversation",
]


@dataclass(frozen=True, slots=True)
class OwnedSpec:
    """How to create an owned conversation.

    ``inherit``: fork the owner's conversation at its newest entry (the child sees that
    transcript and the plugin slices as they were there); otherwise the child starts empty.
    ``rewindable`` / ``sticky``: config values to seed in each document (``{"model": ...,
    "profile": ...}`` / ``{"followUpMode": ...}``), validated by the kernel; the only core
    values the child gets (see the module docstring).
    ``sections``: the child's private section seed (``{key, value, rendered}`` items, see
    :class:`~pico3.SectionSeed`), checked and deep-copied here; the child's first
    model call folds its system sections from it (not from any inherited ``pi.system``
    entry) until it writes one of its own. ``None``: no seed.
    """

    inherit: bool = False
    rewindable: Mapping[str, Any] = field(default_factory=dict[str, Any])
    sticky: Mapping[str, Any] = field(default_factory=dict[str, Any])
    sections: tuple[SectionSeed, ...] | None = None

    def __post_init__(self) -> None:
        if self.sections is not None:  # a direct construction is checked (and copied) too
            object.__setattr__(self, "sections", tuple(check_section_seed(self.sections)))

    @classmethod
    def of(cls, spec: OwnedSpec | Mapping[str, Any] | None) -> OwnedSpec:
        """Accept an :class:`OwnedSpec`, a plain mapping with the same keys, or ``None``."""
        if spec is None:
            return cls()
        if isinstance(spec, OwnedSpec):
            return spec
        if not isinstance(spec, Mapping):
            raise TypeError(f"an owned conversation spec must be a mapping, got {spec!r}")
        unknown = set(spec) - {"inherit", "rewindable", "sticky", "sections"}
        if unknown:
            raise ValueError(f"owned conversation spec: unknown keys {sorted(unknown)}")
        inherit = spec.get("inherit", False)
        if not isinstance(inherit, bool):
            raise ValueError("owned conversation spec.inherit: must be a boolean")
        seeds: dict[str, dict[str, Any]] = {}
        for doc in ("rewindable", "sticky"):
            value = spec.get(doc) or {}
            if not isinstance(value, Mapping):
                raise ValueError(f"owned conversation spec.{doc}: must be a mapping")
            seeds[doc] = dict(value)
        sections = spec.get("sections")
        return cls(
            inherit=inherit,
            rewindable=seeds["rewindable"],
            sticky=seeds["sticky"],
            sections=None if sections is None else tuple(check_section_seed(sections)),
        )


async def create_owned(
    tx: Transaction, owner: Task, spec: OwnedSpec | Mapping[str, Any] | None = None
) -> int:
    """Inside a commit of ``owner`` (its ``rt.commit`` or a transition builder): create an
    owned conversation and return its id. A rejected seed fails the whole commit."""
    checked = OwnedSpec.of(spec)
    fork: tuple[int, int] | None = None
    if checked.inherit:
        newest = await tx.newest_entry(owner.conversation_id)
        if newest is not None:
            fork = (owner.conversation_id, newest.id)
    return await tx.create_conversation(
        fork=fork,
        rewindable=dict(checked.rewindable) or None,
        sticky=dict(checked.sticky) or None,
        owner=owner.id,
        sections=checked.sections,
    )


async def create_owned_conversation(
    rt: Runtime, spec: OwnedSpec | Mapping[str, Any] | None, ctx: Context
) -> OwnedConversation:
    """Create an owned conversation of ``rt``'s task in one commit and return its handle.

    This is the factory behind ``api.conversation(spec)`` for tools and
    ``rt.create_owned_conversation`` for kinds. A resumable kind should rather call
    :func:`create_owned` in a transition builder, atomically with the checkpoint that records
    the child's id (else a crash in between creates a second child on recovery)."""

    async def build(tx: Transaction, current: Task, _ctx: Context) -> int:
        return await create_owned(tx, current, spec)

    return OwnedConversation(rt, await rt.commit(build, ctx))


class OwnedInput(msgspec.Struct, frozen=True):
    """An input sent to an owned conversation."""

    id: int
    conversation_id: int
    _handle: Any

    async def result(self, ctx: Context) -> Input | None:
        """A point read of the input record."""
        return await self._handle.result(ctx)

    async def wait(self, ctx: Context) -> Input:
        """The input's terminal record (``done`` with ``answer``, or ``unanswered``)."""
        return await self._handle.wait(ctx)


def _host(rt: Runtime) -> Any:
    """The harness behind ``rt``: core plumbing only (a task's own ``rt.harness`` is the narrow
    :class:`~pico3.tasks.runtime.TaskHarness`). Every use here first checks ownership."""
    return rt._scheduler.harness  # pyright: ignore[reportPrivateUsage]


class OwnedConversation:
    """A task's handle on a conversation it owns. Every call re-checks that the task's runtime
    is still live and that the conversation is in its subtree (``Forbidden`` otherwise)."""

    __slots__ = ("_rt", "id")

    def __init__(self, rt: Runtime, conversation_id: int) -> None:
        self._rt = rt
        self.id = conversation_id

    def __repr__(self) -> str:
        return f"<OwnedConversation {self.id} of task {self._rt.task_id}>"

    @classmethod
    async def attach(cls, rt: Runtime, conversation_id: int, ctx: Context) -> OwnedConversation:
        """Re-obtain a handle (after a reopen: the id lives in the owner's checkpoint)."""
        owned = cls(rt, conversation_id)
        await owned._check(ctx)
        return owned

    async def _check(self, ctx: Context) -> None:
        cid = self.id

        async def build(tx: Transaction, current: Task, _ctx: Context) -> bool:
            return tx.owns(current.id, cid)

        if not await self._rt.commit(build, ctx):
            raise Forbidden(f"conversation {cid} is not owned by task {self._rt.task_id}")

    async def send(
        self,
        content: Any,
        ctx: Context,
        *,
        request_id: str | None = None,
        when_busy: Literal["followUp", "steer", "reject"] = "followUp",
        allow: Sequence[str] | None = None,
    ) -> OwnedInput:
        """Admit a user input into the child (core admission; see ``ConversationHandle.send``).
        With ``request_id``, sending again (say, on recovery) returns the original input;
        ``allow`` names permission rules its turn may use without asking (as a command's
        ``allowed-tools`` on the user's turn)."""
        await self._check(ctx)
        handle = await _host(self._rt).conversation(self.id, ctx)
        if handle is None:  # pragma: no cover - checked above
            raise Forbidden(f"conversation {self.id} does not exist")
        sent = await handle.send(
            content, ctx, request_id=request_id, when_busy=when_busy, allow=allow
        )
        return OwnedInput(sent.id, self.id, sent)

    async def abort(self, ctx: Context) -> None:
        """Conversation abort of the child (and, through foreground owners, its subtree);
        returns once every marked task is terminal."""
        await self._check(ctx)
        await _host(self._rt).scheduler.abort_conversation(self.id, ctx)

    async def wait_for_idle(self, ctx: Context) -> None:
        """Wait until the child has no live foreground task."""
        await self._check(ctx)
        await _host(self._rt).wait_for_idle(ctx, conversation_id=self.id)
