"""The public surface of the harness (so far): open a session, reach conversations, commit.

::

    h = await Harness.open(MemoryStorage(), HarnessOptions(), ctx)
    plan = h.namespace("plan", {"rewindable": {"enabled": False}}, view=lambda s: s)
    c = await h.root(ctx)
    await c.commit(lambda tx, ctx: tx.plugins(plan).__setitem__("enabled", True), ctx)
    watch = await c.watch(ctx)          # snapshot + subscription in one step
    watch.start(print)                  # envelopes {revision, ops, events}, in commit order

Tasks run once the harness is entered and resumed::

    async with h:                       # owns the task group invocations run in
        h.register_task_kind(indexer)   # kinds whose tasks may exist in storage: before resume
        await h.resume(ctx)             # orphan unknown kinds, then dispatch (pico3.tasks)
        ...
        release = h.hold()              # quiescent reload; or `await h.suspend(ctx)`

:class:`~pico3.handle.HarnessHandle` keeps a session across suspend and reopen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from chord.context import BACKGROUND, Context
from pico3.approval import ApprovalAuthority, ApprovalGate, Unapproved
from pico3.hooks import HookRegistration, HookRegistry, HookRunner, kernel_owner_of
from pico3.kernel.commit import Kernel, Reporter
from pico3.kernel.errors import Closed
from pico3.kernel.namespaces import Namespace
from pico3.kernel.tx import Transaction
from pico3.kernel.tx.authority import Authority
from pico3.kernel.view import Watch
from pico3.registry import Registration
from pico3.session_data.context import DerivedContext
from pico3.session_data.entries import EntryKind, NewEntry
from pico3.session_data.section_seed import check_section_seed
from pico3.storage.base import Storage
from pico3.storage.records import Entry, Input, SectionSeed, Task
from pico3.tasks.clock import Clock, SystemClock
from pico3.tasks.kinds import KindRegistry, TaskKind
from pico3.tasks.scheduler import Scheduler
from pico3.tools import ToolDeclaration, ToolRegistry
from pico3.turn import conversation as _turn
from pico3.turn.conversation import InputHandle
from pico3.turn.sections import SectionRegistry, SystemSection

__all__ = ["ConversationHandle", "Harness", "HarnessOptions"]

_IMPORTED_KINDS = {"user": "pi.user", "assistant": "pi.assistant", "toolResult": "pi.tool_result"}
"""The entry kind of each role :meth:`ConversationHandle.import_history` takes."""


@dataclass(frozen=True, slots=True)
class HarnessOptions:
    """Options of :meth:`Harness.open`.

    ``on_report`` receives errors that never reach a caller (listener and projection failures,
    task faults). ``clock`` is the injectable time source of every durable timestamp and
    deadline (docs/design/decisions.md#d8-g22; default :class:`~pico3.SystemClock`). ``services`` is handed
    through to task runtimes as ``rt.services`` (models, process host, ...).

    The approval gate (docs/design/harness.md#approval-gate): a tool call not declared
    ``replay="safe"`` runs only when an approval authority
    (:meth:`Harness.register_approval_authority`) ruled on it. ``unapproved`` is the reason
    the model reads when none could (a string, or ``reason(call) -> str``; the application
    names the package that is missing and how to restore it). ``require_approval=False`` turns
    the gate off, for an embedding with nobody to ask (a unit test, a batch run of its own
    tools); it is on by default.
    """

    on_report: Reporter | None = None
    clock: Clock | None = None
    services: Mapping[str, Any] = field(default_factory=dict[str, Any])
    unapproved: Unapproved | str | None = None
    require_approval: bool = True


class Harness:
    """One open session over one storage object.

    Registered from the start: the core turn kinds (``pi.generation``, ``pi.tool``, ``pi.post_tools``, ``pi.collapse``) and the
    built-in ``pi.job`` (:data:`pico3.jobs.JOB_KIND`), which needs ``services["process_host"]``
    to run anything and otherwise fails its jobs with ``spawn`` / ``"no process host"``.
    """

    def __init__(self, kernel: Kernel, options: HarnessOptions | None = None) -> None:
        options = options or HarnessOptions()
        self._kernel = kernel
        self._options = options
        self.clock: Clock = options.clock or SystemClock()
        self._scheduler = Scheduler(kernel, self.clock, services=options.services, harness=self)
        self._exit: AsyncExitStack | None = None
        # The extension surface (pico3.tools, pico3.turn.sections, pico3.hooks): process state,
        # re-established by code at startup or reload; never durable.
        self.tools = ToolRegistry()
        self.sections = SectionRegistry()
        # The approval gate pi.tool applies (docs/design/harness.md#approval-gate): on unless
        # the options say otherwise; its authorities are registrations like the others.
        self.approval = ApprovalGate(required=options.require_approval, reason=options.unapproved)
        kinds = self._scheduler.kinds
        self.hook_registry = HookRegistry(
            kernel.namespaces,
            kind_current=lambda kind: kinds.get(getattr(kind, "name", "")) is kind,
            owner_of=kernel_owner_of(kernel),
        )
        self._scheduler.hooks_factory = lambda kind, task_id, conversation_id: HookRunner(
            self.hook_registry,
            kind,
            task_id=task_id,
            conversation_id=conversation_id,
            report=kernel.report,
        )
        from pico3.jobs import JOB_KIND
        from pico3.turn import install as _install_turn

        _install_turn(self)  # the core kinds (pi.generation, pi.tool, pi.post_tools, pi.collapse)
        # The built-in pi.job (docs/design/turn.md#jobs) is registered always, like the core kinds, so a stored
        # job is never orphaned because a host forgot it. Without services["process_host"] a
        # job fails "spawn" ("no process host") before any checkpoint, as the spec says.
        self._scheduler.register(JOB_KIND)

    @classmethod
    async def open(cls, storage: Storage, options: HarnessOptions | None, ctx: Context) -> Harness:
        """Open ``storage`` (creating the root conversation if it is empty). Nothing runs.

        A storage object already owned by an open session raises ``StorageInUse``. To run
        tasks, enter the harness (``async with h:`` owns the task group invocations run in),
        register kinds, then ``await h.resume(ctx)``.
        """
        options = options or HarnessOptions()
        return cls(await Kernel.open(storage, ctx, options.on_report), options)

    async def __aenter__(self) -> Harness:
        if self._exit is not None:
            raise RuntimeError("the harness is already entered")
        stack = AsyncExitStack()
        task_group = await stack.enter_async_context(anyio.create_task_group())
        self._exit = stack
        self._scheduler.attach(task_group)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._exit = self._exit, None
        try:
            with anyio.CancelScope(shield=True):
                await self.close(BACKGROUND)
        finally:
            if stack is not None:
                await stack.aclose()

    # -- tasks -----------------------------------------------------------------------------
    @property
    def scheduler(self) -> Scheduler:
        """The session's scheduler (kinds registry, waiters; for the runtime layers)."""
        return self._scheduler

    def register_task_kind(self, kind: TaskKind) -> Callable[[], None]:
        """Register a kind (from :func:`~pico3.tasks.define_task`); returns an idempotent
        unregister. Register kinds whose tasks may exist in storage before :meth:`resume`."""
        self._kernel.check_usable()
        return self._scheduler.register(kind)

    def register_tool(self, declaration: ToolDeclaration) -> Registration:
        """Register a tool (unique live name); returns an idempotent remover. Any time: the
        registry revision makes running preparations retry; invocations keep their capture."""
        self._kernel.check_usable()
        return self.tools.register(declaration)

    def register_section(self, section: SystemSection) -> Registration:
        """Register a system section (unique live key); returns an idempotent remover."""
        self._kernel.check_usable()
        return self.sections.register(section)

    def hooks(
        self, namespace: Namespace, kind: Any, handlers: Mapping[str, Callable[..., Any]]
    ) -> HookRegistration:
        """Register harness-wide hook handlers (``{point: handler}``) of ``kind``, bound to
        ``namespace``; both tokens must be current. Returns an idempotent remover. Register
        handlers that recovery re-runs (``before_tool``, ...) before :meth:`resume`."""
        self._kernel.check_usable()
        return self.hook_registry.register(namespace, kind, handlers)

    def register_approval_authority(self, hook: HookRegistration) -> ApprovalAuthority:
        """Make ``hook`` — a live ``before_tool`` registration on ``pi.tool``, what
        :meth:`hooks` returned — an approval authority (docs/design/harness.md#approval-gate):
        while it is live, a call that needs approval may run once its handler ran and did not
        block it. Returns the :class:`~pico3.ApprovalAuthority`, an idempotent remover;
        removing the hook (or retiring its namespace) ends it too. Register it together with
        the hook, in the same registration, so a reload swaps both at once."""
        self._kernel.check_usable()
        if isinstance(hook, HookRegistration) and hook not in self.hook_registry.registrations():
            raise ValueError(f"{hook!r} is not a live hook registration of this harness")
        return self.approval.register(hook)

    def approval_authorities(self) -> list[ApprovalAuthority]:
        """The live approval authorities, in registration order (none: every call that needs
        approval is blocked; docs/design/harness.md#approval-gate)."""
        return self.approval.live()

    async def resume(self, ctx: Context) -> list[int]:
        """Orphan live tasks of unregistered kinds, then start dispatching (once)."""
        return await self._scheduler.resume(ctx)

    async def get_task(self, task_id: int, ctx: Context) -> Task | None:
        """A task record (live or terminal)."""
        return await self._kernel.commit(lambda tx, _ctx: tx.task(task_id), ctx)

    async def owner_task(self, conversation_id: int, ctx: Context) -> Task | None:
        """The task that owns a conversation (a subagent's run owns the conversation it works
        in), or ``None``: no such conversation, or one no task owns (the user's, a fork). A
        feature reads there what the task was started with (its ``input``)."""
        ctx.raise_if_cancelled()
        self._kernel.check_usable()
        owner = getattr(self._kernel.conversations.get(conversation_id), "owner", None)
        return await self.get_task(owner, ctx) if type(owner) is int else None

    async def wait_for_task(self, task_id: int, ctx: Context) -> Task:
        """The task's terminal record, once it is terminal."""
        return await self._scheduler.waiters.wait_for_task(task_id, ctx)

    async def wait_for_input(self, input_id: int, ctx: Context) -> Input:
        """The input's record, once it is ``done`` or ``unanswered``."""
        return await self._scheduler.waiters.wait_for_input(input_id, ctx)

    async def wait_for_idle(self, ctx: Context, conversation_id: int | None = None) -> None:
        """Return once no live foreground task remains (in the conversation, or anywhere)."""
        await self._scheduler.waiters.wait_for_idle(conversation_id, ctx)

    async def abort_task(self, task_id: int, ctx: Context) -> str:
        """Durably mark a task for abort: ``"marked"``, or ``"terminal"`` if it already ended."""
        return await self._scheduler.abort_task(task_id, ctx)

    def quiescent(self) -> bool:
        """True when the scheduler holds no invocation (docs/design/decisions.md#d8-g8; records may be live)."""
        return self._scheduler.quiescent()

    def hold(self) -> Callable[[], None]:
        """Defer dispatch (and so new hook chains) until released; commits go on. Raises
        :class:`~pico3.tasks.NotQuiescent` when not quiescent."""
        return self._scheduler.hold()

    async def suspend(self, ctx: Context, *, abort_removed: bool = False) -> None:
        """Cancel every invocation, wait for them, clear ``waitingOn``, close the session.
        Task records stay live; reopen (a new :meth:`open` on the same storage) recovers."""
        await self._scheduler.suspend(ctx, abort_removed=abort_removed)
        await self._close_kernel(ctx)

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
        """Register a namespace; returns its token (see :class:`~pico3.Namespace`)."""
        self._kernel.check_usable()
        return self._kernel.namespaces.register(name, defaults, view)

    async def close(self, ctx: Context) -> None:
        """Suspend running work, close watches and release the storage (idempotent)."""
        if self._kernel.closed:
            return
        await self._scheduler.suspend(ctx)
        await self._close_kernel(ctx)

    async def _close_kernel(self, ctx: Context) -> None:
        self._scheduler.close(Closed("the session is closed"))
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

        cid = self.id

        def build(tx: Transaction, _ctx: Context) -> int:
            return tx.write(cid, kind, model=model, data=data)

        return await self._kernel.commit(build, ctx, conversation_id=cid)

    async def fork(
        self,
        at: int | Literal["start"],
        ctx: Context,
        *,
        rewindable: dict[str, Any] | None = None,
        sticky: dict[str, Any] | None = None,
        sections: Sequence[SectionSeed | Mapping[str, Any]] | None = None,
        abort: bool = False,
    ) -> ConversationHandle:
        """A new conversation inheriting this one's transcript at ``at`` and its rewindable
        state as of ``at`` (plugin slices included), then the ``rewindable`` overrides; a fresh
        sticky document (``sticky`` config seeds only), no tasks, no inbox. ``abort`` first
        aborts this conversation's foreground work (conversation abort).

        ``sections`` seeds the fork's system sections (``{key, value, rendered}`` items, see
        :class:`~pico3.SectionSeed`): its first model call folds from the seed instead of
        the inherited ``pi.system`` entries, until it writes a managed entry of its own.
        Without it the fork keeps the sections its inherited transcript says are in effect.
        A bad seed raises ``SectionSeedRejected`` before anything (the abort included) runs."""
        checked = None if sections is None else check_section_seed(sections)
        if abort:
            await self.abort(ctx)

        async def build(tx: Transaction, _ctx: Context) -> int:
            if at == "start":
                return await tx.create_conversation(
                    rewindable=rewindable, sticky=sticky, sections=checked
                )
            return await tx.create_conversation(
                fork=(self.id, at), rewindable=rewindable, sticky=sticky, sections=checked
            )

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

    async def abort(self, ctx: Context, *, by: str | None = None) -> None:
        """Conversation abort (docs/design/harness.md#abort): withdraw queued steer/followUp inputs, mark every live
        foreground task here and in owned conversations; returns once they all ended. ``by``
        names who stopped the turn when it was not the user (a feature on a hook's behalf): the
        turn's end says so (``turn.ended``'s ``detail`` ``stopped by <by>``, an interrupted
        answer's ``data.stoppedBy``) and clients show it instead of "interrupted by user"."""
        await self._kernel_scheduler().abort_conversation(self.id, ctx, by=by)

    async def wait_for_idle(self, ctx: Context) -> None:
        """Return once this conversation's foreground set is empty."""
        await self._kernel_scheduler().waiters.wait_for_idle(self.id, ctx)

    def hooks(
        self,
        namespace: Namespace,
        kind: Any,
        handlers: Mapping[str, Callable[..., Any]],
        *,
        subtree: bool = False,
    ) -> HookRegistration:
        """Register hook handlers for this conversation only (with ``subtree``, also for the
        conversations it owns, recursively); they run after harness-wide ones (docs/design/decisions.md#d8-g9)."""
        self._kernel.check_usable()
        registry: HookRegistry = self._kernel_scheduler().harness.hook_registry
        return registry.register(
            namespace, kind, handlers, conversation_id=self.id, subtree=subtree
        )

    def _kernel_scheduler(self) -> Scheduler:
        kinds = self._kernel.kinds
        assert isinstance(kinds, KindRegistry)
        return kinds.scheduler

    async def watch(self, ctx: Context) -> Watch:
        """Snapshot the view and subscribe in one line operation (see :class:`Watch`)."""
        return await self._kernel.views.watch(self.id, ctx)

    # -- the turn loop (pico3.turn.conversation) -------------------------------------------
    async def send(
        self,
        content: Any,
        ctx: Context,
        *,
        request_id: str | None = None,
        when_busy: Literal["followUp", "steer", "reject"] = "followUp",
        model: Mapping[str, Any] | None = None,
        allow: Sequence[str] | None = None,
    ) -> InputHandle:
        """Admit a user input: placed now with a new model call when idle, else queued as
        ``when_busy`` (``reject`` raises ``ConversationBusy``). A repeated ``request_id``
        returns the original input. Never waits for the model call.

        ``model`` (``{"provider", "modelId"}``) answers the turn this input starts instead of
        the ``model`` config, for that turn only; ``allow`` names permission rules the approval
        authority may let run without asking during that turn (a command's ``model:`` and
        ``allowed-tools:``). Both are kept in the input record, so a crash resumes with them."""
        return await _turn.send(
            self._kernel,
            self.id,
            content,
            ctx,
            request_id=request_id,
            when_busy=when_busy,
            model=model,
            allow=allow,
        )

    async def steer(
        self, content: Any, ctx: Context, *, request_id: str | None = None
    ) -> InputHandle:
        """:meth:`send` that joins the running turn at its next tools boundary when busy."""
        return await self.send(content, ctx, request_id=request_id, when_busy="steer")

    async def follow_up(
        self, content: Any, ctx: Context, *, request_id: str | None = None
    ) -> InputHandle:
        """:meth:`send` that waits for the running turn's final answer when busy."""
        return await self.send(content, ctx, request_id=request_id, when_busy="followUp")

    async def reset(self, ctx: Context, *, handoff: str | None = None) -> int:
        """Start a fresh context: ``pi.reset`` (or ``pi.handoff`` carrying ``handoff``) with a
        head at itself; now when idle, else at the next boundary. Returns the input id."""
        return await _turn.reset(self._kernel, self.id, handoff, ctx)

    async def collapse(self, ctx: Context, *, instructions: str | None = None) -> int:
        """Start a background manual collapse; returns its task id."""
        return await _turn.collapse(self._kernel, self.id, instructions, ctx)

    async def input_abort(self, input_id: int, ctx: Context) -> str:
        """``"aborted"`` | ``"already_placed"`` | ``"not_found"``."""
        return await _turn.abort_input(self._kernel, self.id, input_id, ctx)

    async def import_history(
        self,
        messages: Sequence[Mapping[str, Any]],
        ctx: Context,
        *,
        data: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> list[int]:
        """Append a conversation held elsewhere (another agent's session, imported) to this
        one, new and empty, as one durable commit: each model message becomes the entry a turn
        would have written for it (``user`` → ``pi.user``, ``assistant`` → ``pi.assistant``,
        ``toolResult`` → ``pi.tool_result``), ``data[i]`` (if given) its ``data``. Nothing
        runs: no turn, no tool. Returns the entry ids, in order.

        Raises :class:`ValueError` for a conversation that has entries already (an import
        continues nothing) or a message of another role, and
        :class:`~pico3.session_data.entries.EntryRejected` naming a malformed message; nothing
        is written then."""
        if await self.entries(ctx, limit=1):
            raise ValueError(f"conversation {self.id} has entries: import into a new one")
        extra = list(data) if data is not None else [None] * len(messages)
        if len(extra) != len(messages):
            raise ValueError("import_history: data must have one item per message")
        new: list[NewEntry] = []
        for index, (message, more) in enumerate(zip(messages, extra, strict=True)):
            kind = _IMPORTED_KINDS.get(str(message.get("role")))
            if kind is None:
                raise ValueError(
                    f"import_history: message {index} has role {message.get('role')!r} "
                    f"(one of {sorted(_IMPORTED_KINDS)} expected)"
                )
            new.append(NewEntry(kind=kind, model=[dict(message)], data=dict(more or {}) or None))  # pyright: ignore[reportArgumentType]
        cid = self.id

        def build(tx: Transaction, _ctx: Context) -> list[int]:
            return [tx.append_entry(cid, entry).id for entry in new]

        return await self._kernel.commit(build, ctx, conversation_id=cid, authority=Authority.CORE)

    async def entries(
        self,
        ctx: Context,
        *,
        limit: int = 100,
        before: int | None = None,
        kind: str | None = None,
    ) -> list[Entry]:
        """One newest-first page of fork-aware history (ids below ``before``)."""
        return await _turn.entries(
            self._kernel, self.id, ctx, limit=limit, before=before, kind=kind
        )
