"""The built-in service contracts of the session worker (docs/design/chord.md#built-in-services, docs/design/decisions.md#d6).

Two services connect every feature to the harness:

* :data:`HarnessService` (``pi.harness``, **local**): the in-process harness handle. Session facets
  ``use`` it to register tools, hooks, task kinds and namespaces (through
  :meth:`HarnessServiceApi.add_registration`, so the registration is re-applied on every opening of
  the session), and the session worker uses it to ``resume``, ``hold``, ``suspend`` and
  ``reopen``. It never leaves its process.
* :data:`ConversationService` (``pi.conversation``, **remotable**, keyed by the conversation id
  as a decimal string): one instance per conversation, with a replicated ``view`` (lazy across
  the wire: sent to a remote consumer only while it subscribes to it), its small fixed
  ``conversation`` identity and the conversation's methods. Presentations ``observe`` it, in the
  worker or across the wire.

The ``view`` member's value is a :class:`ConversationView`: the pico3 view document
(docs/design/view.md#shape) plus ``commit.events``, the events of the commit that produced the current
revision. Each harness commit that changes the conversation is exactly **one** revision of the
state (one Chord sequence, docs/design/decisions.md#d3), so a subscriber reads ``value["commit"]["events"]``
after every ``update`` delivery. A ``hydrate`` delivery is a rebaseline: its ``commit.events``
belong to an earlier commit (or are empty after a respawn) and must not be replayed, and
sequences are only comparable within one instance generation (docs/design/chord.md#sequences).

The JSON shapes below are documentation (``TypedDict``); every value on the wire is strict JSON.
This module imports only chord's service and state types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NotRequired, Protocol, TypedDict

from chord.context import Context
from chord.services import Service, define_service
from chord.state import ReplicatedState

if TYPE_CHECKING:
    from pico3.handle import HarnessHandle
    from pico3.harness import ConversationHandle, Harness

__all__ = [
    "CommitInfo",
    "ConversationInfo",
    "ConversationService",
    "ConversationServiceApi",
    "ConversationView",
    "EntryJson",
    "EntryScanJson",
    "ForkSpecJson",
    "HarnessService",
    "HarnessServiceApi",
    "InputAbortResult",
    "NewEntryJson",
    "ParentRef",
    "SendInputJson",
    "ViewEvent",
]


# -- the view -------------------------------------------------------------------------------------
class ParentRef(TypedDict):
    """Where a fork came from: the source conversation and the entry it forked at."""

    conversationId: int
    at: int


class ConversationInfo(TypedDict):
    """``view.conversation``: identity and lineage (never the section seed)."""

    id: int
    parent: NotRequired[ParentRef]
    owner: NotRequired[int]


ViewEvent = dict[str, Any]
"""One event ``{"type": ..., ...}`` (docs/design/view.md#view-events: ``entry.added``, ``turn.started``, ...)."""


class CommitInfo(TypedDict):
    """``view.commit``: what the commit behind the current revision emitted, in order."""

    events: list[ViewEvent]


class ConversationView(TypedDict):
    """The value of ``ConversationService.view`` (docs/design/view.md#shape plus ``commit``).

    ``entries`` is the active transcript (from the newest head on), ``config`` every declared
    key's resolved value, ``inbox`` the queued inputs in admission order, ``turn`` the live turn
    (absent when idle), ``compaction`` a live collapse, ``tasks`` live non-turn tasks with their
    ``describe()`` status, ``plugins`` the namespaces' ``view`` projections. No revision or
    storage sequence is in the value: the Chord delivery sequence plays that role.
    """

    conversation: ConversationInfo
    entries: list[dict[str, Any]]
    config: dict[str, Any]
    inbox: list[dict[str, Any]]
    turn: NotRequired[dict[str, Any]]
    compaction: NotRequired[dict[str, Any]]
    tasks: dict[str, dict[str, Any]]
    plugins: dict[str, Any]
    commit: CommitInfo


# -- method arguments and results ------------------------------------------------------------------
class SendInputJson(TypedDict):
    """``send`` argument: ``content`` is a string or a non-empty list of text/image blocks.

    ``requestId`` makes the send idempotent per conversation; ``whenBusy`` chooses what happens
    while a turn runs (default ``followUp``; ``reject`` fails with nothing written). ``model``
    (``{"provider", "modelId"}``) answers the turn this input starts instead of the config's
    model; ``allow`` lists permission rules that turn may use without asking (a command's
    ``model:`` and ``allowed-tools:``; both kept in the input record, for that turn only).
    """

    content: str | list[dict[str, Any]]
    requestId: NotRequired[str]
    whenBusy: NotRequired[Literal["followUp", "steer", "reject"]]
    model: NotRequired[dict[str, str]]
    allow: NotRequired[list[str]]


class NewEntryJson(TypedDict):
    """``write`` argument: a passive entry of a non-``pi.*`` kind (``pi.notice`` allowed)."""

    kind: str
    model: NotRequired[list[dict[str, Any]]]
    data: NotRequired[dict[str, Any]]


class ForkSpecJson(TypedDict):
    """``fork`` argument: ``rewindable`` overrides applied after inheriting the source's
    rewindable state as of ``at``; ``sticky`` seeds for the fresh sticky document (config keys);
    ``sections`` is the fork's private section seed (``[{key, value, rendered}]``: what its
    first generation's system prompt starts from until it writes its own, docs/design/harness.md#section-seeds);
    ``abort`` first aborts the source's foreground work."""

    rewindable: NotRequired[dict[str, Any]]
    sticky: NotRequired[dict[str, Any]]
    sections: NotRequired[list[dict[str, Any]]]
    abort: NotRequired[bool]


class EntryScanJson(TypedDict):
    """``entries`` argument: one newest-first page of fork-aware history."""

    limit: NotRequired[int]
    before: NotRequired[int]
    kind: NotRequired[str]


EntryJson = dict[str, Any]
"""An entry as the view shows it: ``{id, conversationId, kind, model?, data?, head?, ...}``."""

InputAbortResult = Literal["aborted", "already_placed", "not_found"]


# -- the services -----------------------------------------------------------------------------------
class ConversationServiceApi(Protocol):
    """One conversation, as a remotable keyed instance (key: ``str(conversation_id)``).

    Every method takes the :class:`~chord.context.Context` last and maps to one
    :class:`~pico3.harness.ConversationHandle` operation (one commit, or one read).
    """

    @property
    def view(self) -> ReplicatedState:
        """The :class:`ConversationView`; one revision per harness commit (docs/design/decisions.md#d3).

        **Lazy** across the wire (docs/wire.md#lazy-state): a remote consumer receives a
        conversation's view only while it subscribes to it (``value`` is ``None`` otherwise), so
        ten subagents' transcripts do not stream to a TUI that shows only the root. In the
        worker's own process every consumer sees every view. Read :attr:`conversation` to tell
        which conversation an instance is without following its view.
        """
        ...

    @property
    def conversation(self) -> ReplicatedState:
        """The :class:`ConversationInfo` (``{id, parent?, owner?}``, as in ``view.conversation``):
        fixed for the instance's life, small, and replicated eagerly. A root conversation has
        neither ``parent`` nor ``owner``; a subagent's has its ``owner``."""
        ...

    async def send(self, input: SendInputJson, ctx: Context) -> int:
        """Admit a user input; returns its input id (never waits for the generation)."""
        ...

    async def write(self, entry: NewEntryJson, ctx: Context) -> int:
        """Passive write of one entry; returns the input id."""
        ...

    async def input_abort(self, input_id: int, ctx: Context) -> InputAbortResult:
        """Withdraw a queued input."""
        ...

    async def config_set(self, patch: dict[str, Any], ctx: Context) -> None:
        """Set config keys in one commit (validated first)."""
        ...

    async def abort(self, ctx: Context) -> None:
        """Conversation abort; returns once the marked tasks ended."""
        ...

    async def reset(self, handoff: str | None, ctx: Context) -> None:
        """Start a fresh context (``pi.reset``, or ``pi.handoff`` carrying ``handoff``)."""
        ...

    async def collapse(self, instructions: str | None, ctx: Context) -> int:
        """Start a background manual collapse; returns its task id."""
        ...

    async def fork(self, at: int | Literal["start"], spec: ForkSpecJson, ctx: Context) -> int:
        """Create a conversation inheriting this one at ``at``; returns its id (a new instance
        of this service appears under that key)."""
        ...

    async def entries(self, scan: EntryScanJson, ctx: Context) -> list[EntryJson]:
        """One newest-first page of history (entries older than the active transcript too)."""
        ...


class HarnessServiceApi(Protocol):
    """The session's harness, in process: what ``env.use(HarnessService)`` returns.

    Not to be confused with :class:`~pico3.Harness`, the harness class: :attr:`harness` is the
    current opening, and ``install`` below receives each opening.

    Registrations go through :meth:`add_registration`: ``install(harness) -> unregister`` runs
    now (when open) and again on every reopen, before ``resume``; own the returned remover with
    ``env.own``.
    """

    @property
    def handle(self) -> HarnessHandle:
        """The underlying :class:`~pico3.handle.HarnessHandle` (docs/design/decisions.md#d8-g7)."""
        ...

    @property
    def harness(self) -> Harness:
        """The current opening (raises when suspended)."""
        ...

    @property
    def is_open(self) -> bool:
        """True while a harness is open (not suspended, not closed)."""
        ...

    def add_registration(
        self, install: Callable[[Harness], Callable[[], None]]
    ) -> Callable[[], None]:
        """Apply ``install`` to this and every later opening; returns an idempotent remover."""
        ...

    async def conversation(self, conversation_id: int, ctx: Context) -> ConversationHandle | None:
        """A handle on an existing conversation of the current opening, or ``None``."""
        ...

    async def resume(self, ctx: Context) -> list[int]:
        """Start dispatching (after every facet registered); returns orphaned task ids."""
        ...

    def quiescent(self) -> bool:
        """True when no invocation is held (docs/design/reload.md#registrations)."""
        ...

    def hold(self) -> Callable[[], None]:
        """Defer dispatch until the returned release is called (raises when not quiescent)."""
        ...

    async def suspend(self, ctx: Context, *, abort_removed: bool = False) -> None:
        """Close every conversation instance, cancel invocations, close the storage."""
        ...

    async def reopen(self, ctx: Context) -> None:
        """Open again with the current registrations; instances respawn with fresh views."""
        ...


HarnessService: Service[HarnessServiceApi] = define_service(
    "pi.harness", HarnessServiceApi, local=True
)
"""The service token ``pi.harness``: the local harness handle (singleton; never remote); its
API is :class:`HarnessServiceApi`."""

ConversationService: Service[ConversationServiceApi] = define_service(
    "pi.conversation", ConversationServiceApi, lazy=("view",)
)
"""``pi.conversation``: remotable, keyed by ``str(conversation_id)``; its ``view`` is lazy (a
remote consumer receives it only while it subscribes to it)."""
