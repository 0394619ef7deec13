"""Hooks: code that task kinds call at named points, registered per namespace and kind.

Registration (docs/design/harness.md#hooks)::

    undo = h.hooks(ns, tool_kind, {"before_tool": approve})                 # harness-wide
    undo = c.hooks(ns, tool_kind, {"after_tool": log}, subtree=True)        # one conversation
                                                                           # (+ owned descendants)

Both the namespace token and the kind token must be current (a stale one raises
:class:`~pico3.kernel.errors.StaleDefinition`). The namespace *string* is what hook memos are
keyed by; the token is only current authority, so a handler of a retired generation cannot keep
writing. Registrations are process state: never durable, never on the line. The returned
:class:`HookRegistration` removes exactly that registration and is idempotent; unregistering the
namespace removes its hooks too. A handler already running when it is removed runs to completion
(only abort or suspend cancel it).

Order (docs/design/decisions.md#d8-g9): harness-wide registrations in registration order, then conversation-scoped ones
from the outermost owning ancestor down to the conversation itself (an ancestor's registration
applies only with ``subtree=True``), each scope in registration order. So a child's handler runs
after, and can override, its parent's.

Execution (docs/design/harness.md#hooks). Handlers run outside the line, inside the hosting task's invocation, as
``handler(*payload, api, ctx)`` (sync or async). Cancellation always propagates and is never a
hook failure. Any other exception is reported (``on_report``) and the handler is skipped, except
at ``before_tool``, where it blocks the call. Hooks commit nothing themselves: they use handles or
their point's api. Hooks that run before a checkpoint (``before_tool``, ``system_instructions``,
``before_request``, ``before_collapse``) run again after a crash or a suspend/reopen, so a
decision that must not repeat goes in the hosting task's slot through ``api.memo``.

Points (docs/design/harness.md#hook-points) and how their values fold — :class:`HookRunner` implements each one:

================== ============== ========================================================
kind               point          fold
================== ============== ========================================================
``pi.generation``  system_        all run; ``{"tools": [...]}`` overrides the loadout (last
                   instructions   wins); a raising handler's draft edits are rolled back
``pi.generation``  before_request chain on the request (``{"messages": [...]}``)
``pi.generation``  after_response observers
``pi.generation``  on_yield       first non-``None`` (``{"continue": str}``) wins
``pi.tool``        before_tool    chain on the call; first ``{"block": reason}`` stops it;
                                  a raise blocks; changing id/name/namespace blocks
``pi.tool``        after_tool     chain on the :class:`~pico3.tools.ToolResult`
``pi.tool``        permission_    first non-``None`` answer wins; run only when the approval
                   request        authority is about to ask (``BeforeToolApi.permission_request``)
``pi.post_tools``  after_tools    observers
``pi.collapse``    before_collapse first non-``None`` wins
================== ============== ========================================================

Custom kinds declare their own points (an optional ``hook_points`` attribute on the kind) and
run them with :meth:`HookRunner.each`.

Why one module: registration, the per-point APIs handed to handlers and the runner that calls them
are one protocol: the runner's ordering, memo keys and stale-token checks are what the registry
records, and ``BeforeToolApi``'s outcomes are what the runner folds. Split, each half would have to
re-state the other's invariants.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, overload

import msgspec

from chord.context import Context
from chord.json import JsonError, copy_json
from pico3.kernel.errors import StaleDefinition
from pico3.kernel.namespaces import Namespace, NamespaceRegistry
from pico3.kernel.tx import Transaction
from pico3.tools import SlotCommit, ToolResult, memo_key, slot_memo, split_memo_args

if TYPE_CHECKING:
    from pico3.kernel.commit import Kernel

__all__ = [
    "CORE_POINTS",
    "BeforeToolApi",
    "BeforeToolOutcome",
    "Draft",
    "HookApi",
    "HookBinding",
    "HookRegistration",
    "HookRegistry",
    "HookRunner",
    "OwnerOf",
    "RequestHookApi",
    "ResponseHookApi",
    "ToolHookApi",
    "kernel_owner_of",
]


class Draft(Protocol):
    """What ``system_instructions`` needs of the draft its handlers edit: a snapshot before each
    handler, restored when the handler raises. The turn loop passes its
    :class:`~pico3.turn.sections.SectionDraft`; hooks sit below the turn and know it only by
    this shape."""

    def snapshot(self) -> object: ...

    def restore(self, saved: object) -> None: ...


CORE_POINTS: Mapping[str, frozenset[str]] = {
    "pi.generation": frozenset(
        {"system_instructions", "before_request", "after_response", "on_yield"}
    ),
    "pi.tool": frozenset({"before_tool", "after_tool", "permission_request"}),
    "pi.post_tools": frozenset({"after_tools"}),
    "pi.collapse": frozenset({"before_collapse"}),
}
"""The hook points of the core kinds, by kind name."""

PermissionAnswer = Callable[[dict[str, Any], Context], Awaitable[Any]]
"""``answer(call, ctx)``: the ``permission_request`` point of one tool call (what
:meth:`BeforeToolApi.permission_request` runs)."""

OwnerOf = Callable[[int, Context], Awaitable["int | None"]]
"""``owner_of(conversation_id, ctx)``: the conversation of the task that owns this one (a
subagent's parent), or ``None`` for a conversation nobody owns."""


def _points_of(kind: object) -> frozenset[str] | None:
    name = getattr(kind, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"expected a task kind token (with a str `name`), got {kind!r}")
    if name in CORE_POINTS:
        return CORE_POINTS[name]
    declared = getattr(kind, "hook_points", None)
    return None if declared is None else frozenset(declared)


# -- registration ------------------------------------------------------------------------------
class HookRegistration:
    """One registration; call it to remove exactly this registration (idempotent)."""

    __slots__ = (
        "_registry",
        "_removed",
        "conversation_id",
        "handlers",
        "kind",
        "namespace",
        "seq",
        "subtree",
    )

    def __init__(
        self,
        registry: HookRegistry,
        namespace: Namespace,
        kind: object,
        handlers: dict[str, Callable[..., Any]],
        conversation_id: int | None,
        subtree: bool,
        seq: int,
    ) -> None:
        self._registry = registry
        self._removed = False
        self.namespace = namespace
        self.kind = kind
        self.handlers = handlers
        self.conversation_id = conversation_id
        self.subtree = subtree
        self.seq = seq

    @property
    def alive(self) -> bool:
        """True until removed, and only while its namespace token is the registered one."""
        return not self._removed and self.namespace.alive

    def __call__(self) -> None:
        if self._removed:
            return
        self._removed = True
        self._registry._discard(self)  # pyright: ignore[reportPrivateUsage]

    def __repr__(self) -> str:
        scope = (
            "harness" if self.conversation_id is None else f"conversation {self.conversation_id}"
        )
        return f"<HookRegistration {self.namespace.name!r} on {_kind_name(self.kind)} ({scope})>"


class HookBinding(msgspec.Struct, frozen=True):
    """One registration's handler for one point, as resolved for one chain."""

    registration: HookRegistration
    handler: Callable[..., Any]

    @property
    def namespace(self) -> Namespace:
        return self.registration.namespace

    @property
    def live(self) -> bool:
        return self.registration.alive


def _kind_name(kind: object) -> str:
    return str(getattr(kind, "name", kind))


class HookRegistry:
    """Every hook registration of one harness.

    ``kind_current(kind)`` says whether a kind token is the registered one (the task layer
    provides it; core kinds are always current). ``owner_of`` walks subagent ownership for
    ``subtree`` scoping (see :func:`kernel_owner_of`).
    """

    def __init__(
        self,
        namespaces: NamespaceRegistry,
        *,
        kind_current: Callable[[object], bool] | None = None,
        owner_of: OwnerOf | None = None,
    ) -> None:
        self._namespaces = namespaces
        self._kind_current = kind_current
        self._owner_of = owner_of
        self._registrations: list[HookRegistration] = []
        self._seq = 0

    def register(
        self,
        namespace: Namespace,
        kind: object,
        handlers: Mapping[str, Callable[..., Any]],
        *,
        conversation_id: int | None = None,
        subtree: bool = False,
    ) -> HookRegistration:
        """Validate and add a registration; nothing is added when anything is wrong."""
        self._namespaces.require(namespace)
        points = _points_of(kind)
        name = _kind_name(kind)
        if self._kind_current is not None and not self._kind_current(kind):
            raise StaleDefinition(f"kind token {name!r} is stale (unregistered or replaced)")
        if not isinstance(handlers, Mapping) or not handlers:
            raise ValueError(f"hooks for {name!r}: handlers must be a non-empty mapping")
        checked: dict[str, Callable[..., Any]] = {}
        for point, handler in handlers.items():
            if not isinstance(point, str) or not point.isidentifier():
                raise ValueError(f"hooks for {name!r}: point {point!r} is not an identifier")
            if points is not None and point not in points:
                raise ValueError(
                    f"hooks for {name!r}: unknown point {point!r} (known: {sorted(points)})"
                )
            if not callable(handler):
                raise TypeError(f"hooks for {name!r}: handler for {point!r} is not callable")
            checked[point] = handler
        if subtree and conversation_id is None:
            raise ValueError("subtree=True needs a conversation (use c.hooks(...))")
        self._seq += 1
        registration = HookRegistration(
            self, namespace, kind, checked, conversation_id, bool(subtree), self._seq
        )
        self._registrations.append(registration)
        return registration

    def _discard(self, registration: HookRegistration) -> None:
        if registration in self._registrations:
            self._registrations.remove(registration)

    def _prune(self) -> None:
        self._registrations = [r for r in self._registrations if r.alive]

    async def ancestry(self, conversation_id: int, ctx: Context) -> list[int]:
        """Owning conversations from the outermost down to ``conversation_id`` itself."""
        chain = [conversation_id]
        if self._owner_of is None:
            return chain
        seen = {conversation_id}
        current: int | None = conversation_id
        while current is not None:
            current = await self._owner_of(current, ctx)
            if current is None or current in seen:
                break
            seen.add(current)
            chain.append(current)
        chain.reverse()
        return chain

    async def bindings(
        self, kind: object, point: str, conversation_id: int, ctx: Context
    ) -> list[HookBinding]:
        """The chain for ``point`` of ``kind`` in ``conversation_id``, in docs/design/decisions.md#d8-g9 order."""
        self._prune()
        name = _kind_name(kind)
        mine = [
            r for r in self._registrations if _kind_name(r.kind) == name and point in r.handlers
        ]
        out = [HookBinding(r, r.handlers[point]) for r in mine if r.conversation_id is None]
        scoped = [r for r in mine if r.conversation_id is not None]
        if scoped:
            for cid in await self.ancestry(conversation_id, ctx):
                for r in scoped:
                    if r.conversation_id == cid and (cid == conversation_id or r.subtree):
                        out.append(HookBinding(r, r.handlers[point]))
        return out

    def registrations(self) -> list[HookRegistration]:
        """Live registrations in registration order."""
        self._prune()
        return list(self._registrations)


def kernel_owner_of(kernel: Kernel) -> OwnerOf:
    """The ownership walk over a kernel: a conversation's ``owner`` task, then that task's
    conversation (from the kernel's task index, else read on the line; cached, since a task's
    conversation never changes)."""
    cache: dict[int, int | None] = {}

    async def owner_of(conversation_id: int, ctx: Context) -> int | None:
        if conversation_id in cache:
            return cache[conversation_id]
        record = kernel.conversations.get(conversation_id)
        owner = getattr(record, "owner", None)
        if not isinstance(owner, int):
            return None

        async def read() -> int | None:
            task = await kernel.storage.task(owner, ctx)
            return None if task is None else task.conversation_id

        indexed = kernel.task_index.get(owner)
        found = indexed.conversation_id if indexed is not None else await kernel.on_line(read, ctx)
        cache[conversation_id] = found
        return found

    return owner_of


# -- what handlers receive ---------------------------------------------------------------------
class HookApi(msgspec.Struct, frozen=True):
    """Identity only: which kind, task and conversation the hook runs in."""

    kind: str
    task_id: int
    conversation_id: int


class ToolHookApi(HookApi, frozen=True):
    """``after_tool``'s api: identity plus the call id."""

    call_id: str


class RequestHookApi(HookApi, frozen=True):
    """``before_request``'s api: identity plus the preparation cutoff."""

    cutoff: int | None


class ResponseHookApi(HookApi, frozen=True):
    """``after_response``'s api: identity plus the attempt number."""

    attempt: int


class BeforeToolApi:
    """``before_tool``'s api, bound to one handler's namespace (docs/design/harness.md#before-tool).

    * :meth:`waiting` commits ``turn.tools[i].waitingOn = <namespace>`` with the event
      ``tool.waiting`` (idempotent). ``pi.tool`` clears it atomically with ``started`` or the
      synthetic result; abort and suspend clear it in their own commit.
    * :meth:`memo` is ``memo_once`` on the tool task's slot under ``hook:<namespace>:<name>``, so
      two plugins never collide on a name and a decision survives crash and reload.
    * :meth:`emit` commits the event ``plugin.<namespace>.<name>``.
    * :meth:`permission_request` runs the ``permission_request`` point (the approval authority
      calls it right before it would ask a person: Claude Code's ``PermissionRequest`` hooks
      answer there).

    Every method rejects with ``StaleDefinition`` once the namespace token is stale.
    """

    __slots__ = (
        "_answer",
        "_call_id",
        "_conversation_id",
        "_kind",
        "_slot",
        "_task_id",
        "_token",
    )

    def __init__(
        self,
        *,
        kind: str,
        task_id: int,
        conversation_id: int,
        call_id: str,
        namespace: Namespace,
        slot: SlotCommit,
        answer: PermissionAnswer | None = None,
    ) -> None:
        self._answer = answer
        self._kind = kind
        self._task_id = task_id
        self._conversation_id = conversation_id
        self._call_id = call_id
        self._token = namespace
        self._slot = slot

    # Identity is read-only: ``waiting`` emits its event to ``conversation_id``, so a handler
    # that could reassign it would aim a core event at another conversation.
    @property
    def kind(self) -> str:
        """The hosting task's kind (``pi.tool``)."""
        return self._kind

    @property
    def task_id(self) -> int:
        """The tool task's id."""
        return self._task_id

    @property
    def conversation_id(self) -> int:
        """The conversation the tool call runs in."""
        return self._conversation_id

    @property
    def call_id(self) -> str:
        """The tool call's id."""
        return self._call_id

    @property
    def namespace(self) -> str:
        """The handler's namespace string."""
        return self._token.name

    async def waiting(self, ctx: Context) -> None:
        """Show that this handler waits (``waitingOn`` + ``tool.waiting``) in one commit."""
        token = self._token

        def build(tx: Transaction, slot: MutableMapping[str, Any]) -> None:
            tx.require_namespace(token)
            if slot.get("waitingOn") == token.name:
                return
            slot["waitingOn"] = token.name
            event = {
                "type": "tool.waiting",
                "taskId": self.task_id,
                "callId": self.call_id,
                "on": token.name,
            }
            tx.emit_event(self.conversation_id, event)

        await self._slot(build, ctx)

    @overload
    async def memo(self, name: str, ctx: Context, /) -> Any: ...
    @overload
    async def memo(self, name: str, candidate: Any, ctx: Context, /) -> Any: ...
    async def memo(self, name: str, *args: Any) -> Any:
        """``memo(name, ctx)`` reads (:data:`~pico3.tools.MISSING` when absent);
        ``memo(name, candidate, ctx)`` stores unless present and returns the durable winner."""
        candidate, ctx = split_memo_args(args)
        token = self._token
        key = memo_key("hook", token.name, name)

        def build(tx: Transaction, slot: MutableMapping[str, Any]) -> Any:
            tx.require_namespace(token)
            return slot_memo(slot, key, candidate)

        return await self._slot(build, ctx)

    async def emit(self, name: str, data: Any, ctx: Context) -> None:
        """Commit the event ``plugin.<namespace>.<name>`` with ``data``."""
        token = self._token
        await self._slot(lambda tx, _slot: tx.emit(token, name, data), ctx)

    async def permission_request(self, call: Mapping[str, Any], ctx: Context) -> Any:
        """Ask the ``permission_request`` handlers of ``pi.tool`` (every namespace's) whether
        they answer the dialog about to open for ``call``: each runs as ``handler(call, api,
        ctx)`` (``api``: a :class:`ToolHookApi`) and the first non-``None`` value wins (what it
        means is the caller's business: the approval feature reads ``{"behavior": "allow" |
        "deny", ...}``). A handler that raises is reported and skipped, so an answer is never
        made of an error; ``None`` when nobody answers (or nothing runs this point here)."""
        if self._answer is None:
            return None
        if not self._token.alive:
            raise StaleDefinition(f"namespace token {self._token.name!r} is stale")
        return await self._answer(copy_json(dict(call)), ctx)


class BeforeToolOutcome(msgspec.Struct, frozen=True):
    """The folded ``before_tool`` chain: the final call, or a block reason.

    ``ruled`` holds the registrations whose handler ran for the call and did not block it, in
    chain order: the approval gate (docs/design/harness.md#approval-gate) lets a call that needs
    approval run only when a live approval authority is among them."""

    call: dict[str, Any]
    block: str | None = None
    ruled: tuple[HookRegistration, ...] = ()

    @property
    def blocked(self) -> bool:
        return self.block is not None


_IDENTITY = ("id", "name", "namespace")


# -- running hooks -----------------------------------------------------------------------------
Reporter = Callable[[BaseException], None]


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class HookRunner:
    """Runs one kind's hook points for one hosting task (what ``rt.hooks`` is).

    Each point method resolves its chain at the start (docs/design/decisions.md#d8-g9 order) and skips a registration
    that was removed before its turn; a handler already running is never interrupted by an
    unregister.
    """

    def __init__(
        self,
        registry: HookRegistry,
        kind: object,
        *,
        task_id: int,
        conversation_id: int,
        report: Reporter,
    ) -> None:
        self._registry = registry
        self._kind = kind
        self._points = _points_of(kind)
        self.kind = _kind_name(kind)
        self.task_id = task_id
        self.conversation_id = conversation_id
        self._report = report

    def api(self) -> HookApi:
        """The identity api of this runner's task."""
        return HookApi(self.kind, self.task_id, self.conversation_id)

    def _check_point(self, point: str) -> None:
        if self._points is not None and point not in self._points:
            raise ValueError(f"{self.kind} has no hook point {point!r}")

    async def bindings(self, point: str, ctx: Context) -> list[HookBinding]:
        """The chain for ``point`` (docs/design/decisions.md#d8-g9 order)."""
        self._check_point(point)
        return await self._registry.bindings(self._kind, point, self.conversation_id, ctx)

    def _failed(self, error: Exception, ctx: Context) -> None:
        if ctx.cancelled:
            raise error
        self._report(error)

    # generic folds -------------------------------------------------------------------------
    async def each(
        self,
        point: str,
        invoke: Callable[[Callable[..., Any], HookBinding], Any],
        ctx: Context,
        on_value: Callable[[Any], bool | None] | None = None,
    ) -> None:
        """Call ``invoke(handler, binding)`` for each handler; a non-``None`` value goes to
        ``on_value``, which stops the chain by returning ``True``. Raises are reported and
        skipped; cancellation propagates."""
        for binding in await self.bindings(point, ctx):
            if not binding.live:
                continue
            try:
                value = await _maybe(invoke(binding.handler, binding))
            except Exception as exc:
                self._failed(exc, ctx)
                continue
            if value is not None and on_value is not None and on_value(value) is True:
                return

    async def observe(
        self, point: str, payload: Sequence[Any], ctx: Context, api: Any = None
    ) -> None:
        """Observers: every handler runs as ``handler(*payload, api, ctx)``; values ignored."""
        hook_api = self.api() if api is None else api
        await self.each(point, lambda h, _b: h(*payload, hook_api, ctx), ctx)

    async def chain(
        self, point: str, value: Any, extra: Sequence[Any], ctx: Context, api: Any = None
    ) -> Any:
        """Chain: ``handler(value, *extra, api, ctx)``; a non-``None`` return replaces ``value``."""
        hook_api = self.api() if api is None else api
        current = [value]

        def take(new: Any) -> None:
            current[0] = new

        await self.each(point, lambda h, _b: h(current[0], *extra, hook_api, ctx), ctx, take)
        return current[0]

    async def first(self, point: str, payload: Sequence[Any], ctx: Context, api: Any = None) -> Any:
        """First answer wins: the first non-``None`` return, or ``None``."""
        hook_api = self.api() if api is None else api
        found: list[Any] = [None]

        def take(value: Any) -> bool:
            found[0] = value
            return True

        await self.each(point, lambda h, _b: h(*payload, hook_api, ctx), ctx, take)
        return found[0]

    # core points ---------------------------------------------------------------------------
    async def system_instructions(
        self,
        draft: Draft,
        config: Mapping[str, Any],
        tools: Sequence[Any],
        ctx: Context,
    ) -> list[Any] | None:
        """All handlers run as ``handler({"sections": draft, "config": config, "tools":
        tools}, api, ctx)``. A ``{"tools": [...]}`` return overrides the loadout, and the
        handlers after it see that override as their ``tools`` (chained): a handler that adds
        tools (an MCP feature's subagent servers) starts from what an earlier one left out (a
        run's ``--tools``), so one handler can never offer again what another withheld. A
        handler that raises has its draft edits rolled back. Returns the override or
        ``None``."""
        override: list[Any] | None = None
        api = self.api()
        for binding in await self.bindings("system_instructions", ctx):
            if not binding.live:
                continue
            saved = draft.snapshot()
            current = list(tools) if override is None else list(override)
            payload = {"sections": draft, "config": config, "tools": current}
            try:
                value = await _maybe(binding.handler(payload, api, ctx))
                if value is not None:
                    if not isinstance(value, Mapping) or set(value) - {"tools"}:
                        raise TypeError(
                            f"system_instructions hook of {binding.namespace.name!r} must return "
                            "None or {'tools': [...]}"
                        )
                    if value.get("tools") is not None:
                        override = list(value["tools"])
            except Exception as exc:
                draft.restore(saved)
                self._failed(exc, ctx)
        return override

    async def before_request(self, request: Any, cutoff: int | None, ctx: Context) -> Any:
        """Chain on the request (``{"messages": [...]}``); returns the final request."""
        api = RequestHookApi(self.kind, self.task_id, self.conversation_id, cutoff)
        return await self.chain("before_request", request, (), ctx, api)

    async def after_response(self, message: Any, attempt: int, ctx: Context) -> None:
        """Observers of every terminal message."""
        api = ResponseHookApi(self.kind, self.task_id, self.conversation_id, attempt)
        await self.observe("after_response", (message,), ctx, api)

    async def on_yield(self, answer: Any, ctx: Context) -> Any:
        """First ``{"continue": str}`` wins."""
        return await self.first("on_yield", (answer,), ctx)

    async def after_tools(self, assistant: int, results: Sequence[int], ctx: Context) -> None:
        """Observers after every tool of a batch finished."""
        await self.observe("after_tools", (assistant, list(results)), ctx)

    async def before_collapse(
        self, reason: str, through: int, entries: Sequence[Any], ctx: Context
    ) -> Any:
        """First ``{"decline": True}`` / ``{"instructions"?, "summary"?}`` wins."""
        return await self.first("before_collapse", (reason, through, list(entries)), ctx)

    async def after_tool(
        self, call: Mapping[str, Any], result: ToolResult, ctx: Context
    ) -> ToolResult:
        """Chain on the result: ``handler(call, result, api, ctx)``; a returned
        :class:`ToolResult` replaces it (anything else is reported and ignored)."""
        api = ToolHookApi(self.kind, self.task_id, self.conversation_id, str(call.get("id", "")))
        current = [result]

        def take(value: Any) -> None:
            if isinstance(value, ToolResult):
                current[0] = value
            else:
                self._report(
                    TypeError(f"after_tool hook returned {type(value).__name__}, not a ToolResult")
                )

        await self.each(
            "after_tool", lambda h, _b: h(copy_json(dict(call)), current[0], api, ctx), ctx, take
        )
        return current[0]

    async def before_tool(
        self, call: Mapping[str, Any], slot: SlotCommit, ctx: Context
    ) -> BeforeToolOutcome:
        """Chain on the call. Each handler gets a copy of the current call, a
        :class:`BeforeToolApi` bound to its namespace, and ``ctx``; it returns ``None``,
        ``{"call": new_call}`` or ``{"block": reason}``. The first block stops the chain; a
        raise blocks (and is reported); a rewrite that changes ``id``, ``name`` or
        ``namespace`` blocks with "call identity changed". The outcome's ``ruled`` lists the
        registrations that ran and let the call through (the approval gate reads it)."""
        try:
            current: dict[str, Any] = copy_json(dict(call), ("call",))
        except JsonError as exc:
            raise ValueError(str(exc)) from None
        call_id = str(current.get("id", ""))
        ruled: list[HookRegistration] = []
        answer_api = ToolHookApi(self.kind, self.task_id, self.conversation_id, call_id)

        async def answer(asked: dict[str, Any], ctx: Context) -> Any:
            return await self.first("permission_request", (asked,), ctx, api=answer_api)

        for binding in await self.bindings("before_tool", ctx):
            if not binding.live:
                continue
            ns = binding.namespace.name
            api = BeforeToolApi(
                kind=self.kind,
                task_id=self.task_id,
                conversation_id=self.conversation_id,
                call_id=call_id,
                namespace=binding.namespace,
                slot=slot,
                answer=answer,
            )
            try:
                value = await _maybe(binding.handler(copy_json(current), api, ctx))
            except Exception as exc:
                self._failed(exc, ctx)
                return BeforeToolOutcome(current, f"{ns} hook raised {type(exc).__name__}: {exc}")
            if value is None:
                ruled.append(binding.registration)
                continue
            if not isinstance(value, Mapping) or not value or set(value) - {"call", "block"}:
                return BeforeToolOutcome(
                    current,
                    f"{ns} hook returned an invalid value (expected None, "
                    "{'call': ...} or {'block': reason})",
                )
            block = value.get("block")
            if block is not None:
                return BeforeToolOutcome(current, block if isinstance(block, str) else str(block))
            new = value.get("call")
            if new is None:
                ruled.append(binding.registration)
                continue
            if not isinstance(new, Mapping) or any(
                new.get(key) != current.get(key) for key in _IDENTITY
            ):
                return BeforeToolOutcome(current, "call identity changed")
            try:
                current = copy_json(dict(new), ("call",))
            except JsonError as exc:
                return BeforeToolOutcome(current, f"{ns} hook returned a non-JSON call: {exc}")
            ruled.append(binding.registration)
        return BeforeToolOutcome(current, None, tuple(ruled))
