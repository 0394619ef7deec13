"""The approval session facet: a ``before_tool`` hook that asks, a dialog per question, and the
session's permission mode.

Two layers, as in docs/design/harness.md#before-tool, docs/design/chord.md#feature-layout.

:func:`install_approval` is the harness extension, usable without chord (a test wires ``ask`` to
a future). It registers the namespace ``approval`` with a *sticky* ``autoAllow`` list (per
conversation, not rewound by forks: which tools this conversation never asks about again), a
*session* ``mode`` (one permission mode for the whole session, every conversation and subagent
included; see :mod:`.contract`) and a ``before_tool`` hook on ``pi.tool``. For each call the
hook asks :meth:`ApprovalRules.action` what the call's tool gets in the mode read *at decision
time* (a mode changed while a turn runs applies to its next call):

* a read-only tool runs at once, in every mode, without touching storage;
* ``"block"`` (plan mode, a tool that is not read-only) blocks the call without asking; the
  reason tells the model the session is in plan mode and it must only read and propose a plan;
* ``"ask"``: allowed at once when the tool is in ``autoAllow``; otherwise
  1. read the decision memo (``api.memo("decision")`` on the tool task's slot: decided before a
     crash or a reload?);
  2. otherwise commit ``waiting`` (the view shows ``turn.tools[i].waitingOn = "approval"``),
     ask, and store the answer with ``api.memo("decision", candidate)`` — first writer wins,
     and every racer gets the winner;
  3. add the tool to ``autoAllow`` when the winning decision says ``always``, and block the call
     (``"the user denied this call"`` when a person answered in a dialog, else ``"denied"`` /
     ``"denied by <who>"``) when it says ``deny``;
* ``"run"`` (``auto``, or an edit in ``accept-edits``): runs without asking — unless a decision
  was already recorded for this very call (before a crash), which stands.

Confinement (:func:`confinement`): in every mode but ``auto``, an edit tool's target ``path`` is
resolved the way the tools resolve it (``@`` dropped, ``~`` expanded, relative to the
workspace) with every symlink followed. A target outside the workspace (the harness service
``workspace``, the session's folder) asks even in ``accept-edits``; a target inside one of the
*protected* paths (the harness service ``protected_paths``: the agent's own configuration, its
trust file, a project's ``.coding-agent/`` folder with its facets, the session storage) asks in
``ask`` and ``accept-edits`` alike. Neither is covered by the ``autoAllow`` list: such a call
asks every time, and the dialog's request says why (``reason``).

The memo lives in the tool task's slot and is deleted with it; nothing needs cleaning up. The
hook runs again after a crash or a suspend/reopen (it runs before ``started``), finds the memo and
does not ask twice. Asking again after a crash between ``waiting`` and the memo is harmless.

:func:`session_facet` wires ``ask`` to chord: each question becomes a keyed instance of
:data:`~.contract.ApprovalDialogs` under ``"<conversationId>:<callId>"``, spawned *before*
waiting, closed by the single ``finally`` whatever happens (answer, abort, suspend), which
dismisses the dialog in every presentation. ``decide`` only validates and resolves the local wait;
the durable first-writer rule is the memo, where the durability is.

The facet also provides :data:`~.contract.ApprovalMode`. The durable value is the namespace's
session-document key (``plugins.approval.mode``, so it survives a worker restart); the service's
replicated ``state`` mirrors it for presentations: it is read from storage when the facet
activates, and ``set_mode`` validates, commits, then publishes. The hook never trusts the
mirror: it reads storage. A stored value that is not a mode (edited by hand) counts as ``ask``.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from chord import (
    BACKGROUND,
    Context,
    Facet,
    FacetEnvironment,
    MutableReplicatedState,
    ServiceSpawner,
    cancel_scope,
    define_facet,
)
from pico3 import (
    MISSING,
    TOOL_KIND,
    Harness,
    HarnessService,
    HarnessServiceApi,
    Namespace,
    Transaction,
)

from .contract import (
    DEFAULT_MODE,
    PERMISSION_MODES,
    ApprovalDecision,
    ApprovalDialogs,
    ApprovalMode,
    ApprovalRequest,
    PermissionMode,
    check_decision,
    check_mode,
    dialog_key,
)

__all__ = [
    "DEFAULT_RULES",
    "NAMESPACE",
    "Action",
    "ApprovalInstallation",
    "ApprovalRules",
    "Ask",
    "approval_session_facet",
    "confinement",
    "install_approval",
    "plan_mode_reason",
    "session_facet",
]

NAMESPACE = "approval"
"""The namespace string: memo keys, the ``autoAllow`` slice and the ``mode`` are stored under it."""

Ask = Callable[[ApprovalRequest, Context], Awaitable[ApprovalDecision]]
"""``ask(request, ctx) -> decision``: how a decision is obtained (a dialog, a test's future)."""

Action = Literal["run", "ask", "block"]
"""What :meth:`ApprovalRules.action` says a call gets."""


def _tool_names(names: Iterable[object], what: str) -> frozenset[str]:
    if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
        raise TypeError(f"ApprovalRules.{what} must be a set of non-empty tool names")
    return frozenset(names)  # pyright: ignore[reportReturnType]


@dataclass(frozen=True, slots=True)
class ApprovalRules:
    """Which tools need approval, and which of them are file edits.

    ``ask`` names the tools that need approval (``"*"`` means every tool, ``"prefix*"`` every
    tool whose name starts so); the default asks for the tools with effects outside the
    conversation (``bash``, ``write``, ``edit``, and every MCP tool, ``mcp__*``). ``edits``
    names the tools that change files (``write``, ``edit``): ``accept-edits`` mode lets them run
    without asking. A tool in neither set is *read-only* (``read``, ``grep``, ``ls``, ...): it
    runs in every mode, and in plan mode only when its declaration agrees (``replay="safe"``).
    """

    ask: frozenset[str] = field(
        default_factory=lambda: frozenset({"bash", "write", "edit", "mcp__*"})
    )
    edits: frozenset[str] = field(default_factory=lambda: frozenset({"write", "edit"}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "ask", _tool_names(self.ask, "ask"))
        object.__setattr__(self, "edits", _tool_names(self.edits, "edits"))

    def needs_approval(self, tool: str) -> bool:
        """True when a call of ``tool`` must be approved (in ``ask`` mode). A name ending in
        ``*`` is a prefix: ``mcp__*`` covers every MCP server's tools."""
        if "*" in self.ask or tool in self.ask:
            return True
        return any(n.endswith("*") and tool.startswith(n[:-1]) for n in self.ask)

    def is_edit(self, tool: str) -> bool:
        """True when ``tool`` changes files (``accept-edits`` runs it without asking)."""
        return tool in self.edits

    def is_read_only(self, tool: str) -> bool:
        """True when ``tool`` neither needs approval nor edits: it runs in every mode."""
        return not self.needs_approval(tool) and not self.is_edit(tool)

    def action(self, tool: str, mode: PermissionMode, *, replay_safe: bool = True) -> Action:
        """What a call of ``tool`` gets in ``mode`` (``"run"``, ``"ask"`` or ``"block"``)::

            mode           read-only   edit    other tools that need approval
            ask            run         ask     ask
            accept-edits   run         run     ask
            plan           run *       block   block
            auto           run         run     run

        (An edit the ``ask`` rules do not name runs in ``ask`` mode too.) ``*`` Plan mode trusts
        a tool the rules do not name only when its declaration says so too: ``replay_safe`` is
        the tool's ``replay == "safe"`` (no effect outside the conversation), and a tool that is
        not declared safe (``job_kill``, a plugin's deploy tool, an unknown name) is blocked.
        """
        if mode == "auto":
            return "run"
        if self.is_read_only(tool):
            return "run" if replay_safe or mode != "plan" else "block"
        if mode == "plan":
            return "block"
        if mode == "accept-edits" and self.is_edit(tool):
            return "run"
        return "ask" if self.needs_approval(tool) else "run"


DEFAULT_RULES = ApprovalRules()
"""``bash``, ``write``, ``edit`` and every ``mcp__*`` tool ask (``write`` and ``edit`` are the
edits); everything else is read-only."""


def _resolve(path: str, workspace: str) -> str:
    """A tool's ``path`` argument as the file tools resolve it, every symlink followed."""
    if path.startswith("@"):
        path = path[1:]
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded):
        expanded = os.path.join(os.path.expanduser(workspace), expanded)
    return os.path.realpath(expanded)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def confinement(
    arguments: object, workspace: str | None, protected: Sequence[str] = ()
) -> str | None:
    """Why an edit with ``arguments`` must ask whatever the mode (but ``auto``), or ``None``.

    The target is ``arguments["path"]`` resolved against ``workspace`` with symlinks followed
    (a symlinked file or folder pointing out of the workspace is outside). A target inside a
    ``protected`` path is the agent's own configuration; one not inside ``workspace`` is
    outside the project; an edit without a usable ``path``, or with no workspace known, cannot
    be confined and asks too."""
    path = arguments.get("path") if isinstance(arguments, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(path, str) or not path or workspace is None:
        return "its target path is not known, so it cannot be confined to the project"
    target = _resolve(path, workspace)
    for guarded in protected:
        if _within(target, os.path.realpath(os.path.expanduser(guarded))):
            return f"it changes the agent's own configuration or trust ({target})"
    if not _within(target, os.path.realpath(os.path.expanduser(workspace))):
        return f"its target is outside the project ({target})"
    return None


def _block_reason(decision: ApprovalDecision) -> str:
    by = decision.get("by")
    if by in ("tui", "user"):  # a person answered the dialog
        return "the user denied this call"
    return f"denied by {by}" if by else "denied"


def _existing_size(arguments: object, workspace: str | None) -> int | None:
    """The size of the file a ``write`` would replace (``None``: no such file yet)."""
    path = arguments.get("path") if isinstance(arguments, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(path, str) or not path or workspace is None:
        return None
    target = _resolve(path, workspace)
    try:
        return os.path.getsize(target) if os.path.isfile(target) else None
    except OSError:
        return None


def plan_mode_reason(tool: str) -> str:
    """The block reason the model reads for a call of ``tool`` in plan mode."""
    return (
        f"{tool} was not run: the session is in plan mode (read-only). Do not change files or "
        "run commands. Use only read-only tools to investigate, then propose a plan; the user "
        "leaves plan mode to carry it out."
    )


def _stored_mode(value: object) -> PermissionMode:
    """A stored mode, or :data:`~.contract.DEFAULT_MODE` for anything that is not a mode."""
    for mode in PERMISSION_MODES:
        if value == mode:
            return mode
    return DEFAULT_MODE


class ApprovalInstallation:
    """What :func:`install_approval` returns: call it to uninstall (idempotent); it also reads
    and writes the session's durable permission mode while installed."""

    def __init__(self, harness: Harness, namespace: Namespace, unhook: Callable[[], None]):
        self._harness = harness
        self._namespace = namespace
        self._unhook = unhook

    def __call__(self) -> None:
        """Remove the hook and retire the namespace token; stored state stays."""
        self._unhook()
        self._namespace.unregister()

    async def mode(self, ctx: Context) -> PermissionMode:
        """The session's stored permission mode."""
        ns = self._namespace
        root = await self._harness.root(ctx)
        return await root.commit(lambda tx, _ctx: _stored_mode(tx.plugins(ns)["mode"]), ctx)

    async def set_mode(self, mode: PermissionMode, ctx: Context) -> None:
        """Store ``mode`` (validated first: a bad value raises and nothing is written)."""
        checked = check_mode(mode)
        ns = self._namespace

        def write(tx: Transaction, _ctx: Context) -> None:
            tx.plugins(ns)["mode"] = checked

        await (await self._harness.root(ctx)).commit(write, ctx)


def install_approval(
    harness: Harness, ask: Ask, rules: ApprovalRules = DEFAULT_RULES
) -> ApprovalInstallation:
    """Register the ``approval`` namespace and its ``before_tool`` hook on ``harness``.

    Returns the :class:`ApprovalInstallation`, which is also the uninstaller (idempotent): it
    removes the hook and retires the namespace token; the stored ``autoAllow`` lists, mode and
    decision memos stay, so a re-installation finds them.
    """
    ns = harness.namespace(
        NAMESPACE, {"sticky": {"autoAllow": []}, "session": {"mode": DEFAULT_MODE}}
    )

    def current(tool: str) -> Callable[[Transaction, Context], tuple[PermissionMode, bool]]:
        def read(tx: Transaction, _ctx: Context) -> tuple[PermissionMode, bool]:
            state = tx.plugins(ns)
            return _stored_mode(state["mode"]), tool in list(state["autoAllow"])

        return read

    def remember(tool: str) -> Callable[[Transaction, Context], None]:
        def write(tx: Transaction, _ctx: Context) -> None:
            allowed = list(tx.plugins(ns)["autoAllow"])
            if tool not in allowed:
                tx.plugins(ns)["autoAllow"] = [*allowed, tool]

        return write

    def replay_safe(tool: str) -> bool:
        declaration = harness.tools.get(tool)
        return declaration is not None and declaration.replay == "safe"

    def where() -> tuple[str | None, list[str]]:
        services: Any = getattr(getattr(harness, "scheduler", None), "services", None) or {}
        workspace = services.get("workspace")
        protected = services.get("protected_paths") or ()
        return (
            workspace if isinstance(workspace, str) else None,
            [str(p) for p in protected if isinstance(p, str | os.PathLike)],  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        )

    async def before_tool(call: dict[str, Any], api: Any, ctx: Context) -> dict[str, str] | None:
        tool = call["name"]
        safe = replay_safe(tool)
        if rules.is_read_only(tool) and safe:  # runs in every mode: no need to read the mode
            return None
        conversation = await harness.conversation(api.conversation_id, ctx)
        if conversation is None:  # pragma: no cover - the hosting task's conversation exists
            raise RuntimeError(f"conversation {api.conversation_id} is not open")
        mode, auto_allowed = await conversation.commit(current(tool), ctx)
        action = rules.action(tool, mode, replay_safe=safe)
        if action == "block":
            return {"block": plan_mode_reason(tool)}
        reason: str | None = None
        if rules.is_edit(tool) and mode != "auto":
            workspace, protected = where()
            reason = confinement(call.get("arguments"), workspace, protected)
            if reason is not None:
                action = "ask"
        if action == "ask" and auto_allowed and reason is None:
            return None
        decision = await api.memo("decision", ctx)
        if decision is MISSING:
            if action == "run":
                return None
            await api.waiting(ctx)
            request: ApprovalRequest = {
                "conversationId": api.conversation_id,
                "callId": api.call_id,
                "taskId": api.task_id,
                "name": tool,
                "args": call.get("arguments", {}),
            }
            if reason is not None:
                request["reason"] = f"This asks in every mode but auto: {reason}."
            if tool == "write":
                existing = _existing_size(call.get("arguments"), where()[0])
                if existing is not None:
                    request["overwrites"] = existing
            candidate = check_decision(await ask(request, ctx))
            decision = await api.memo("decision", candidate, ctx)
        if decision["decision"] == "deny":
            return {"block": _block_reason(decision)}
        if decision.get("always"):
            await conversation.commit(remember(tool), ctx)
        return None

    try:
        hook = harness.hooks(ns, TOOL_KIND, {"before_tool": before_tool})
        # The core blocks every call that needs approval while no authority serves the session
        # (docs/design/harness.md#approval-gate): this hook is it, from here to the uninstall.
        authority = harness.register_approval_authority(hook)
    except BaseException:
        ns.unregister()
        raise

    def unhook() -> None:
        authority()
        hook()

    return ApprovalInstallation(harness, ns, unhook)


class _Dialog:
    """One open dialog: the replicated request and ``decide``, which resolves the wait."""

    def __init__(self, request: MutableReplicatedState) -> None:
        self.request = request
        self._decided = anyio.Event()
        self._decision: ApprovalDecision | None = None

    async def decide(self, decision: Any, ctx: Context) -> None:
        checked = check_decision(decision)  # raises before anything is resolved
        if self._decision is None:
            self._decision = checked
            self._decided.set()

    async def _wait(self, ctx: Context) -> ApprovalDecision:
        with cancel_scope(ctx):
            await self._decided.wait()
        assert self._decision is not None
        return self._decision


def _dialog_ask(env: FacetEnvironment, dialogs: ServiceSpawner[Any]) -> Ask:
    async def ask(request: ApprovalRequest, ctx: Context) -> ApprovalDecision:
        dialog = _Dialog(env.replicated_state(dict(request)))
        close = dialogs.spawn(dialog_key(request["conversationId"], request["callId"]), dialog)
        try:
            return await dialog._wait(ctx)
        finally:
            close()

    return ask


class _Modes:
    """The :data:`~.contract.ApprovalMode` provider: the replicated mirror and ``set_mode``
    (its only public members, so the only ones served)."""

    def __init__(self, harness: HarnessServiceApi, state: MutableReplicatedState) -> None:
        self._harness = harness
        self.state = state
        self._installation: ApprovalInstallation | None = None
        self._lock = anyio.Lock()

    def _registration(
        self, rules: ApprovalRules, ask: Ask
    ) -> Callable[[Harness], Callable[[], None]]:
        """The registration: install on every opening and remember the live installation."""

        def install(h: Harness) -> Callable[[], None]:
            installation = install_approval(h, ask, rules)
            self._installation = installation

            def uninstall() -> None:
                if self._installation is installation:
                    self._installation = None
                installation()

            return uninstall

        return install

    def _live(self) -> ApprovalInstallation:
        installation = self._installation
        if installation is None or not self._harness.is_open:
            raise RuntimeError("the session is not open (suspended or closing); try again")
        return installation

    async def _refresh(self, ctx: Context) -> None:
        """Publish the stored mode (at activation)."""
        async with self._lock:
            mode = await self._live().mode(ctx)
            self.state.replace(ctx, {"mode": mode})

    async def set_mode(self, mode: Any, ctx: Context) -> None:
        checked = check_mode(mode)  # raises before anything is written or published
        async with self._lock:
            await self._live().set_mode(checked, ctx)
            self.state.replace(ctx, {"mode": checked})


def approval_session_facet(rules: ApprovalRules = DEFAULT_RULES) -> Facet:
    """The session facet with ``rules`` (the entry point serves :data:`session_facet`).

    It provides :data:`~.contract.ApprovalDialogs` (one instance per open question) and
    :data:`~.contract.ApprovalMode` (the permission mode; its state is read from storage when
    the facet activates).
    """

    def setup(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        dialogs = env.provide_many(ApprovalDialogs)
        ask = _dialog_ask(env, dialogs)
        modes = _Modes(harness, env.replicated_state({"mode": DEFAULT_MODE}))
        env.provide(ApprovalMode, modes)

        async def activate() -> None:
            env.own(harness.add_registration(modes._registration(rules, ask)))
            await modes._refresh(BACKGROUND)

        env.on_activate(activate)

    return define_facet("@pi/approval", setup)


session_facet = approval_session_facet()
"""The approval session facet with :data:`DEFAULT_RULES`."""
