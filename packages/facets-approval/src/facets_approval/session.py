"""The approval session facet: a ``before_tool`` hook that asks, a dialog per question, and the
session's permission mode.

Two layers, as in docs/design/harness.md#before-tool, docs/design/chord.md#feature-layout.

:func:`install_approval` is the harness extension, usable without chord (a test wires ``ask`` to
a future). It registers the namespace ``approval`` with *rewindable* ``rules``, ``askRules`` and
``denyRules`` lists (the session-scope permission rules, kept in the user's conversation: see
:mod:`.permissions`), a
*sticky* ``autoAllow`` list (what "always allow <tool>" stored before permission rules; still
honoured, see :mod:`.permissions`), a *sticky* ``interrupt`` (a ``PermissionRequest`` hook's
interrupt waiting for the turn's next model call, stored so a restart keeps it: see
:mod:`.hook_answers`), a *session* ``mode`` (one permission mode for the whole
session, every conversation and subagent included; see :mod:`.contract`) and a ``before_tool``
hook on ``pi.tool``. For each call the hook first asks the permission rules (:mod:`.rules`: the
files' rules through the harness service ``permission_rules``, the session's, ``autoAllow``) for a
:class:`~.rules.Verdict`, then :meth:`ApprovalRules.action` what the call's tool gets in the mode
read *at decision time* (a mode changed while a turn runs applies to its next call):

* a **deny** rule blocks the call in every mode, ``auto`` included; the reason names the rule
  and its file (:func:`rule_block_reason`);
* Claude Code's restrictive switches (:mod:`.restrictions`, from the permission source) come
  next: ``blockWritesOutsideWorkingDirectories`` blocks an edit outside the project in every
  mode, ``disableBypassPermissionsMode`` decides a stored ``auto`` as ``ask``, and
  ``denyInsteadOfPrompting`` blocks, right before asking, every call that would ask (the turn
  goes on; :func:`~.restrictions.deny_instead_reason`);
* a read-only tool runs at once, in every mode, without touching storage — unless an ask rule
  names it (``ask: ["Read(./.env)"]``), which asks; the ``path`` of a ``read``, ``grep``,
  ``find`` or ``ls`` is resolved once (:func:`~.searched.read_target`), every check sees that
  real path, and it is left for the tool in the host's
  :data:`~.guarded.CHECKED_TARGETS_SERVICE` mapping (taken back when the call is denied): the
  tool reads exactly there or fails, so a symlink swapped in after the decision cannot make it
  read what nobody checked; a read of a path outside the working directories (:mod:`.workdirs`:
  the project, the added folders, the agent's own files) asks in every mode but ``auto``
  unless an allow rule covers it (the mode and the session's rules are read for it), and is
  blocked in every mode with ``blockReadsOutsideWorkingDirectories``;
* the mode is the session's, made stricter (never looser) by each task that owns the call's
  conversation up its owner chain (a subagent whose definition says ``permissionMode: plan``:
  :data:`~.contract.OWNER_MODE_KEY` in its task's input, :func:`~.contract.stricter`);
* ``"block"`` (plan mode, a tool that is not read-only) blocks the call without asking, whatever
  allow rules say (plan mode stays read-only); the reason tells the model the session is in plan
  mode and it must only read and propose a plan;
* an **ask** rule asks, in every mode (``auto`` and ``accept-edits`` too), saying which rule;
* an **allow** rule runs a call the mode would ask about — but never one :func:`confinement`
  guards (below). Besides the files', the session's and ``autoAllow``, the running turn's own
  rules count: the ``allow`` list of the input that started the turn (a command's
  ``allowed-tools:``, :func:`~.permissions.turn_rules`), read from storage at each decision, so
  they apply to that turn's calls only (not a later turn's, not a subagent's) and a crash keeps
  them; every tool stays offered, and a call they do not cover asks as usual;
* ``"ask"``:
  1. read the decision memo (``api.memo("decision")`` on the tool task's slot: decided before a
     crash or a reload?);
  2. otherwise (after ``denyInsteadOfPrompting``, which refuses here) run pico3's
     ``permission_request`` point (``api.permission_request``: the hooks feature runs Claude
     Code's ``PermissionRequest`` hooks there); its answer (:mod:`.hook_answers`: ``allow``
     runs the call and keeps the session rules it carries, ``deny`` refuses it with the hook's
     message, and with ``interrupt`` then ends the turn) is the decision, stored as a
     dialog's is; no answer, or one not in its shape, goes on to the dialog. Then commit
     ``waiting`` (the view shows ``turn.tools[i].waitingOn = "approval"``), ask — the request offers a narrow standing rule (:func:`~.suggest.suggest_rules`; a compound command's one per command not allowed yet) at the
     scopes that can keep it, unless an ask rule or confinement made it ask — and store the
     answer with ``api.memo("decision", candidate)`` — first writer wins, and every racer gets
     the winner;
  3. keep the standing rule when the winning decision carries one (session: the user's
     conversation's ``rules``; project/user: appended to that ``config.toml`` by the app's
     source), and block the call (``"the user denied this call"`` when a person answered in a
     dialog, else ``"denied"`` / ``"denied by <who>"``) when it says ``deny``;
* ``"run"`` (``auto``, an edit in ``accept-edits`` or ``sandbox``, a command in ``sandbox`` with
  a sandbox available: its call is rewritten to ``outside_sandbox: false``, so the tool runs it
  inside; see :mod:`.sandboxing`; a dialog's "Allow inside the sandbox" does the same): runs
  without asking — unless a decision
  was already recorded for this very call (before a crash), which stands.

Confinement (:func:`confinement`), a separate step after the mode and the ``autoAllow`` list
that can only turn "run" into "ask": in every mode but ``auto``, an edit tool's target ``path``
is resolved the way the tools resolve it (``@`` dropped, ``~`` expanded, relative to the
workspace). A target that makes the machine run code (:func:`guarded_reason` over the harness
service ``guarded_paths``, whose list and reasons the app owns: ``.git/``, ``.mcp.json``,
``.vscode/``, the agent's own configuration, trust file and state...; in any folder, checked as
written and with symlinks resolved, case-insensitively) asks in ``ask`` and ``accept-edits``
alike, and so does a target outside the workspace (the harness service ``workspace``, the
session's folder; symlinks followed). Neither is covered by the ``autoAllow`` list or an allow rule: such a call
asks every time, and the dialog's request says why (``reason``). The target is resolved once
(:func:`edit_target`), and that real path is left for the tool in the host's
:data:`~.guarded.CHECKED_TARGETS_SERVICE` mapping: the tool writes exactly there or fails, so a
symlink swapped in on the way after the decision cannot redirect the write.

Last, a ``bash`` call that would run without asking (an allow rule, the session's "always"
answers and ``updatedPermissions``, which are session rules, a turn's ``allowed-tools``,
``auto`` mode) and runs ``git`` asks when the repository it acts on configured a program git
would run (``core.fsmonitor = ./run.sh``, a filter, a hook...: :func:`~.gitconfig.git_check`,
not in a trusted project's repositories, nor in one whose configuration a person approved as
it is now: :mod:`.git_approvals`). Like confinement it only turns "run" into "ask", and no rule
or hook answers it: the reason names the setting, its file and the program, and the request
offers to remember the approval (``repositories``; a ``remember`` answer keeps them, as the
dialog showed them, through the harness service ``git_approvals``). A call
that runs inside the sandbox (``sandbox`` mode) is not checked: whatever git runs there is
confined like any command the model could write. ``command_verdict`` (a prompt command's ``!``
lines) applies the same check to what it or the template's ``allowed-tools`` would let run.

A subagent's memory folder (:mod:`.memory`, named by the task owning its conversation) is its
own: a read there is never outside the working directories, and an edit there that only the mode
would ask about runs (guarded names inside the folder still ask; plan mode stays read-only).

The memo lives in the tool task's slot and is deleted with it; nothing needs cleaning up. The
hook runs again after a crash or a suspend/reopen (it runs before ``started``), finds the memo and
does not ask twice. Asking again after a crash between ``waiting`` and the memo is harmless.

:func:`session_facet` wires ``ask`` to chord's keyed dialogs (:func:`chord.provide_dialogs`):
each question becomes a keyed instance of :data:`~.contract.ApprovalDialogs` under
``"<conversationId>:<callId>"`` (:func:`chord.dialog_key`), spawned *before* waiting, closed
whatever happens (answer, abort, suspend), which dismisses the dialog in every presentation.
``decide`` only validates (:func:`~.contract.check_decision`) and resolves the local wait; the
durable first-writer rule is the memo, where the durability is.

The facet also provides :data:`~.contract.ApprovalRulesService` (every rule with its source and
the problems found, refreshed on demand; ``remove`` deletes a rule where it lives) and
:data:`~.contract.ApprovalMode`. The durable value is the namespace's
session-document key (``plugins.approval.mode``, so it survives a worker restart); the service's
replicated ``state`` mirrors it for presentations: it is read from storage when the facet
activates, and ``set_mode`` validates, commits, then publishes. The hook never trusts the
mirror: it reads storage. A stored value that is not a mode (edited by hand) counts as ``ask``.

Why one module: the hook's decision (rules, mode, confinement, the sandbox, the durable memo) is
one sequence whose order is the safety argument (only later steps turn "run" into "ask"); the
facet that hosts it is its only caller. The words of the sandbox mode live in
:mod:`.sandboxing`, the rule grammar in :mod:`.rules`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.to_thread

from chord import (
    BACKGROUND,
    Context,
    Facet,
    FacetEnvironment,
    MutableReplicatedState,
    RemoteServiceError,
    define_facet,
    dialog_key,
    provide_dialogs,
)
from pico3 import (
    MISSING,
    MODEL_CALL_KIND,
    SANDBOX_MODE_SERVICE,
    SANDBOX_SERVICE,
    TOOL_KIND,
    Harness,
    HarnessService,
    HarnessServiceApi,
    Namespace,
    Sandbox,
    SandboxMode,
    Transaction,
)

from .contract import (
    DEFAULT_MODE,
    PERMISSION_MODES,
    ApprovalDecision,
    ApprovalDialogs,
    ApprovalMode,
    ApprovalRequest,
    ApprovalRulesService,
    CommandVerdict,
    ModeState,
    PermissionMode,
    RuleEntry,
    check_decision,
    check_mode,
    offer_rules,
    offered_rules,
    stricter,
)
from .git_approvals import GitApprovals, Lookup, git_approvals, remember
from .gitconfig import git_check, trusted_root
from .guarded import GUARDED_PATHS_SERVICE, guarded_reason, leave_checked, path_within
from .hook_answers import (
    INTERRUPT_KEY,
    Interrupts,
    Pending,
    hook_decision,
    keep_hook_rules,
    sibling_reason,
)
from .memory import MemoryFolders, unguarded
from .permissions import (
    SESSION_KEYS,
    RulesProvider,
    RuleStore,
    SessionRules,
    session_rule_reader,
    turn_rules,
)
from .restrictions import (
    Restrictions,
    deny_instead_reason,
    effective_mode,
    outside_write_reason,
)
from .rules import RuleSet, Verdict, tool_path
from .sandboxing import SANDBOX_UNAVAILABLE, outside_sandbox
from .searched import credentials_verdict, read_target, search_verdict, searches
from .suggest import suggest_rules
from .workdirs import WorkingDirectories, read_outside, working_directories

__all__ = [
    "DEFAULT_RULES",
    "NAMESPACE",
    "Action",
    "ApprovalInstallation",
    "ApprovalRules",
    "Ask",
    "approval_session_facet",
    "confinement",
    "edit_target",
    "install_approval",
    "plan_mode_reason",
    "rule_block_reason",
    "session_facet",
]

_log = logging.getLogger("facets_approval")

NAMESPACE = "approval"
"""The namespace string: memo keys, the ``rules`` and ``autoAllow`` slices and the ``mode`` are
stored under it."""

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
    conversation (``bash``, ``write``, ``edit``, the web tools ``web_fetch`` and ``web_search``,
    and every MCP tool, ``mcp__*``). ``edits``
    names the tools that change files (``write``, ``edit``): ``accept-edits`` mode lets them run
    without asking. A tool in neither set is *read-only* (``read``, ``grep``, ``ls``, ...): it
    runs in every mode, and in plan mode only when its declaration agrees (``replay="safe"``).
    """

    ask: frozenset[str] = field(
        default_factory=lambda: frozenset(
            {"bash", "write", "edit", "web_fetch", "web_search", "mcp__*"}
        )
    )
    edits: frozenset[str] = field(default_factory=lambda: frozenset({"write", "edit"}))
    sandboxed: frozenset[str] = field(default_factory=lambda: frozenset({"bash"}))
    """The tools whose calls run inside the OS sandbox in ``sandbox`` mode (they take
    ``outside_sandbox`` and ``reason`` arguments)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "ask", _tool_names(self.ask, "ask"))
        object.__setattr__(self, "edits", _tool_names(self.edits, "edits"))
        object.__setattr__(self, "sandboxed", _tool_names(self.sandboxed, "sandboxed"))

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

            mode           read-only   edit    sandboxed (bash)   other tools that need approval
            ask            run         ask     ask                ask
            accept-edits   run         run     ask                ask
            sandbox        run         run     run **             ask
            plan           run *       block   block              block
            auto           run         run     run                run

        (An edit the ``ask`` rules do not name runs in ``ask`` mode too.) ``*`` Plan mode trusts
        a tool the rules do not name only when its declaration says so too: ``replay_safe`` is
        the tool's ``replay == "safe"`` (no effect outside the conversation), and a tool that is
        not declared safe (``job_kill``, a plugin's deploy tool, an unknown name) is blocked.
        ``**`` Inside the sandbox: the hook asks instead when the call says ``outside_sandbox``
        or no sandbox can start here (the mode then behaves as ``ask``).
        """
        if mode == "auto":
            return "run"
        if self.is_read_only(tool):
            return "run" if replay_safe or mode != "plan" else "block"
        if mode == "plan":
            return "block"
        if mode in ("accept-edits", "sandbox") and self.is_edit(tool):
            return "run"
        if mode == "sandbox" and tool in self.sandboxed:
            return "run"
        return "ask" if self.needs_approval(tool) else "run"


DEFAULT_RULES = ApprovalRules()
"""``bash``, ``write``, ``edit``, ``web_fetch``, ``web_search`` and every ``mcp__*`` tool ask (``write`` and ``edit`` are the
edits); everything else is read-only."""


def edit_target(arguments: object, workspace: str | None) -> str | None:
    """The real path an edit with ``arguments`` targets (resolved once, symlinks followed), or
    ``None`` when it has no usable ``path`` or no workspace is known."""
    path = arguments.get("path") if isinstance(arguments, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(path, str) or not path or workspace is None:
        return None
    return os.path.realpath(tool_path(path, workspace))


def confinement(
    arguments: object,
    workspace: str | None,
    guarded: Sequence[object] = (),
    *,
    real: str | None = None,
    added: Sequence[str] = (),
) -> str | None:
    """Why an edit with ``arguments`` must ask whatever the mode (but ``auto``), the rules
    and the ``autoAllow`` list, or ``None``. A separate step, run after everything that could
    let the call run: its answer only ever turns "run" into "ask".

    The target is ``arguments["path"]`` resolved against ``workspace``. A target that makes the
    machine run code (:func:`guarded_reason`: ``.git/``, ``.mcp.json``, the agent's own
    configuration...) says so; one not inside ``workspace`` (symlinks followed) is outside the
    project; an edit without a usable ``path``, or with no workspace known, cannot be confined
    and asks too. ``real`` is :func:`edit_target`'s answer when the caller has it: the target
    is then resolved once, and that real path is the one both checks see. ``added`` are the
    added working directories (real paths, :mod:`.workdirs`): an edit there follows the mode as
    one in the project does."""
    path = arguments.get("path") if isinstance(arguments, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(path, str) or not path or workspace is None:
        return "its target path is not known, so it cannot be confined to the project"
    target = real if real is not None else os.path.realpath(tool_path(path, workspace))
    spelled = path[1:] if path.startswith("@") else path
    reason = guarded_reason(os.path.expanduser(spelled), workspace, guarded, real=target)
    if reason is not None:
        return reason
    folders = [os.path.realpath(os.path.expanduser(workspace)), *added]
    if not any(path_within(target, folder) for folder in folders):
        others = " and the added working directories" if added else ""
        return f"its target is outside the project{others} ({target})"
    return None


def _block_reason(decision: ApprovalDecision) -> str:
    by = decision.get("by")
    if by in ("tui", "user"):  # a person answered the dialog
        return "the user denied this call"
    said: Any = decision.get("message")  # a PermissionRequest hook's (hook_decision)
    reason = f"denied by {by}: {said}" if by and isinstance(said, str) and said else None
    reason = reason or (f"denied by {by}" if by else "denied")
    if decision.get("interrupt") is True:
        return f"{reason}. The hook also stopped the turn: wait for the user's next message."
    return reason


def _existing_size(arguments: object, workspace: str | None) -> int | None:
    """The size of the file a ``write`` would replace (``None``: no such file yet)."""
    path = arguments.get("path") if isinstance(arguments, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(path, str) or not path or workspace is None:
        return None
    target = os.path.realpath(tool_path(path, workspace))
    try:
        return os.path.getsize(target) if os.path.isfile(target) else None
    except OSError:
        return None


def plan_mode_reason(tool: str, *, subagent: bool = False) -> str:
    """The block reason the model reads for a call of ``tool`` in plan mode (``subagent``: the
    session is not, but the subagent's definition put it there)."""
    if subagent:
        return (
            f"{tool} was not run: this subagent runs in plan mode (read-only; its agent "
            "definition says permissionMode: plan). Do not change files or run commands. Use "
            "only read-only tools to investigate, then report what should be done."
        )
    return (
        f"{tool} was not run: the session is in plan mode (read-only). Do not change files or "
        "run commands. Use only read-only tools to investigate, then propose a plan; the user "
        "leaves plan mode to carry it out."
    )


def rule_block_reason(tool: str, why: str) -> str:
    """The block reason the model reads for a call a deny rule stops."""
    return f"{tool} was not run: {why}, so it is denied. Do not try to get around the rule."


def _stored_mode(value: object) -> PermissionMode:
    """A stored mode, or :data:`~.contract.DEFAULT_MODE` for anything that is not a mode."""
    for mode in PERMISSION_MODES:
        if value == mode:
            return mode
    return DEFAULT_MODE


class ApprovalInstallation:
    """What :func:`install_approval` returns: call it to uninstall (idempotent); it also reads
    and writes the session's durable permission mode while installed."""

    def __init__(
        self, harness: Harness, namespace: Namespace, unhook: Callable[[], None], store: RuleStore
    ):
        self._harness = harness
        self._namespace = namespace
        self._unhook = unhook
        self.store = store

    @property
    def git_approvals(self) -> GitApprovals | None:
        """The app's store of approved git configurations (:mod:`.git_approvals`), if any."""
        found: Any = getattr(getattr(self._harness, "scheduler", None), "services", None)
        return git_approvals(found if isinstance(found, Mapping) else {})  # pyright: ignore[reportUnknownArgumentType]

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

    async def command_verdict(self, command: str, ctx: Context) -> CommandVerdict:
        """What a ``bash`` call of ``command`` in the user's conversation would get, asking
        nobody (a prompt command's ``!`` lines, checked before they run): ``block`` for a deny
        rule or plan mode, ``ask`` for an ask rule or a mode that asks (``sandbox`` too: a ``!``
        line does not run in the sandbox), ``run`` for ``auto`` or an allow rule. Under
        ``denyInsteadOfPrompting`` (:mod:`.restrictions`) what would ask is ``block``."""
        ns = self._namespace

        def read(tx: Transaction, _ctx: Context) -> tuple[PermissionMode, SessionRules, list[str]]:
            state = tx.plugins(ns)
            auto = [a for a in state["autoAllow"] if isinstance(a, str)]
            return _stored_mode(state["mode"]), session_rule_reader(ns)(tx, _ctx), auto

        mode, session, auto_allow = await (await self.store.listed(ctx)).commit(read, ctx)
        restricted = self.store.restrictions()
        mode = effective_mode(mode, restricted)
        verdict = await self._command_verdict(command, mode, session, auto_allow)
        if verdict["verdict"] == "ask" and restricted.deny_asks is not None:  # nobody is asked
            why = (
                f"{verdict['why']}, and permissions.denyInsteadOfPrompting in "
                f"{restricted.deny_asks} refuses what would ask"
            )
            return {"verdict": "block", "by": verdict["by"], "why": why}
        return verdict

    async def _command_verdict(
        self, command: str, mode: PermissionMode, session: SessionRules, auto_allow: list[str]
    ) -> CommandVerdict:
        services: Any = getattr(getattr(self._harness, "scheduler", None), "services", None)
        workspace = (services or {}).get("workspace")
        ruleset = self.store.build(
            session, auto_allow, workspace if isinstance(workspace, str) else None
        )[0]
        verdict = ruleset.evaluate("bash", {"command": command})
        if verdict.kind == "deny":
            return {"verdict": "block", "by": "rule", "why": verdict.why}
        if verdict.kind == "ask":
            return {"verdict": "ask", "by": "rule", "why": verdict.why}
        if mode == "plan":
            return {"verdict": "block", "by": "mode", "why": "the session is in plan mode"}
        folder = workspace if isinstance(workspace, str) else None
        lookup = Lookup(git_approvals(services or {}))  # approved as it is: runs (.git_approvals)
        configured = await anyio.to_thread.run_sync(
            git_check, command, folder, trusted_root(self.store.source), lookup
        )
        if configured is not None:  # a person must allow it (a template's allowed-tools cannot)
            return {"verdict": "ask", "by": "repository", "why": configured.reason}
        if verdict.kind != "allow" and mode != "auto":
            return {
                "verdict": "ask",
                "by": "mode",
                "why": f"no allow rule covers it in {mode} mode",
            }
        if verdict.kind == "allow":
            return {"verdict": "run", "by": "rule", "why": verdict.why}
        return {"verdict": "run", "by": "mode", "why": "the session is in auto mode"}

    async def rules(self, ctx: Context) -> tuple[list[RuleEntry], list[str]]:
        """Every rule in force (the session rules and ``autoAllow`` of the conversation
        ``/permissions`` shows included) and the problems found reading them."""
        ns = self._namespace

        def read(tx: Transaction, _ctx: Context) -> tuple[SessionRules, list[str]]:
            auto = tx.plugins(ns)["autoAllow"]
            return session_rule_reader(ns)(tx, _ctx), [a for a in auto if isinstance(a, str)]

        session, auto_allow = await (await self.store.listed(ctx)).commit(read, ctx)
        _rules, entries = self.store.build(session, auto_allow, None)
        return entries, list(self.store.problems)


def install_approval(
    harness: Harness, ask: Ask, rules: ApprovalRules = DEFAULT_RULES
) -> ApprovalInstallation:
    """Register the ``approval`` namespace and its ``before_tool`` hook on ``harness``.

    Returns the :class:`ApprovalInstallation`, which is also the uninstaller (idempotent): it
    removes the hook and retires the namespace token; the stored rules, ``autoAllow`` lists, mode
    and decision memos stay, so a re-installation finds them.
    """
    ns = harness.namespace(
        NAMESPACE,
        {
            "rewindable": {key: [] for key in SESSION_KEYS.values()},
            "sticky": {"autoAllow": [], INTERRUPT_KEY: {}},
            "session": {"mode": DEFAULT_MODE},
        },
    )
    store = RuleStore(harness, ns)
    interrupts = Interrupts(harness, ns)  # a hook's deny that stops the turn (.hook_answers)
    memories = MemoryFolders(harness)  # a subagent's memory folder: its own files (.memory)

    def current(tx: Transaction, ctx: Context) -> tuple[PermissionMode, list[str], SessionRules]:
        state = tx.plugins(ns)
        auto = [a for a in state["autoAllow"] if isinstance(a, str)]
        return _stored_mode(state["mode"]), auto, session_rule_reader(ns)(tx, ctx)

    def replay_safe(tool: str) -> bool:
        declaration = harness.tools.get(tool)
        return declaration is not None and declaration.replay == "safe"

    def where() -> tuple[str | None, list[object]]:
        services: Any = getattr(getattr(harness, "scheduler", None), "services", None) or {}
        workspace = services.get("workspace")
        guarded = services.get(GUARDED_PATHS_SERVICE) or ()
        return (
            workspace if isinstance(workspace, str) else None,
            list(guarded) if isinstance(guarded, list | tuple) else [],  # pyright: ignore[reportUnknownArgumentType]
        )

    def services() -> Mapping[str, Any]:
        found: Any = getattr(getattr(harness, "scheduler", None), "services", None)
        return found if isinstance(found, Mapping) else {}  # pyright: ignore[reportUnknownVariableType]

    def where_read(workspace: str | None) -> WorkingDirectories | None:
        return working_directories(workspace, services())

    def checked(key: str, real: str | None) -> Callable[[], None]:
        services: Any = getattr(getattr(harness, "scheduler", None), "services", None) or {}
        return leave_checked(services, key, real)

    def reads(tool: str, arguments: object, ruleset: RuleSet) -> str | None:
        # the real path a read-only call reads, when the workspace the tools resolve against
        # is known (the rules fall back to this process's folder; the tool would not)
        if where()[0] is None:
            return None
        return read_target(tool, arguments, ruleset.workspace, ruleset.home)

    def sandbox_ready() -> bool:
        services: Any = getattr(getattr(harness, "scheduler", None), "services", None) or {}
        return isinstance(services.get(SANDBOX_SERVICE), Sandbox)

    async def standing(
        api: Any, workspace: str | None, restricted: Restrictions, ctx: Context
    ) -> tuple[PermissionMode, PermissionMode, RuleSet]:
        """The call's mode (a disabled ``auto`` as ``ask``, its owners' stricter ones applied),
        the session's own mode, and every rule in force for it (the files', the session's,
        ``autoAllow``, the turn's)."""
        conversation = await harness.conversation(api.conversation_id, ctx)
        if conversation is None:  # pragma: no cover - the hosting task's conversation exists
            raise RuntimeError(f"conversation {api.conversation_id} is not open")
        mode, auto_allow, session = await conversation.commit(current, ctx)
        mode = effective_mode(mode, restricted)  # a disabled auto decides as ask
        granted = await conversation.commit(lambda tx, _ctx: turn_rules(tx, conversation.id), ctx)
        top, owner_modes = await store.chain(conversation.id, ctx)
        store.current = top
        session_mode = mode
        for owner_mode in owner_modes:  # a subagent's owners may make it stricter, never looser
            mode = stricter(mode, owner_mode)
        if top != conversation.id:  # a subagent follows its user conversation's rules
            owner = await harness.conversation(top, ctx)
            if owner is not None:
                session = await owner.commit(session_rule_reader(ns), ctx)
        return mode, session_mode, store.build(session, auto_allow, workspace, granted)[0]

    async def strict(api: Any, ctx: Context) -> SessionRules:
        """The session's deny and ask rules for a call (its user conversation's)."""
        top = await harness.conversation(await store.top(api.conversation_id, ctx), ctx)
        if top is None:  # pragma: no cover - the hosting task's conversation exists
            raise RuntimeError(f"conversation {api.conversation_id} is not open")
        found = await top.commit(session_rule_reader(ns), ctx)
        return {"deny": found["deny"], "ask": found["ask"]}

    async def before_tool(call: dict[str, Any], api: Any, ctx: Context) -> dict[str, Any] | None:
        tool = call["name"]
        arguments = call.get("arguments", {})
        stopping = await interrupts.pending(api.conversation_id, ctx)  # stored: a restart
        if stopping is not None and stopping.call_id != api.call_id:  # a hook stopped the turn
            return {"block": sibling_reason(tool, stopping)}
        safe = replay_safe(tool)
        offer: tuple[str, ...] = ()  # the standing rules a dialog with a reason offers all the same
        workspace = where()[0]
        restricted = store.restrictions()  # Claude Code's switches (.restrictions)
        pinned: str | None = None  # an edit's target the switches checked (resolved once)
        key = f"{api.conversation_id}:{api.call_id}"
        read: str | None = None  # the real path a read-only call reads, resolved once
        if rules.is_read_only(tool) and safe:
            # Runs in every mode unless a deny or ask rule names it: the files' and the
            # session's (/permissions adds those); allow rules are read only when it would ask.
            ruleset = store.build(await strict(api, ctx), (), workspace)[0]
            read = reads(tool, arguments, ruleset)
            verdict = ruleset.evaluate(tool, arguments, real=read)
            if verdict.kind == "deny":
                return {"block": rule_block_reason(tool, verdict.why)}
            allowed = verdict.kind == "allow"
            if verdict.kind != "ask":  # what it reads beyond its path (credentials, a search)
                verdict = credentials_verdict(
                    tool, arguments, ruleset.workspace, ruleset.home, real=read
                )
            if verdict.kind != "ask" and searches(ruleset, tool):
                verdict = await anyio.to_thread.run_sync(
                    search_verdict, ruleset, tool, arguments, read
                )
            far = read_outside(tool, arguments, where_read(workspace), ruleset.home, real=read)
            if far is not None and read is not None:  # its memory folder is the agent's own
                own = await memories.folder(api.conversation_id, ctx)
                far = None if own is not None and path_within(read, own) else far
            if far is not None and (far.blocked or restricted.block_outside_reads):
                return {"block": far.refusal}  # every mode, whatever allows it
            if verdict.kind != "ask" and far is not None and not allowed:
                # auto, or a session's or turn's allow rule, lets it run
                mode, _own, ruleset = await standing(api, workspace, restricted, ctx)
                allows = ruleset.evaluate(tool, arguments, real=read).kind == "allow"
                if mode != "auto" and not allows:
                    verdict, offer = Verdict("ask", None, far.why), (far.rule,)
            if verdict.kind != "ask":
                checked(key, read)  # ...is what the tool reads (or it fails)
                return None
            mode: PermissionMode = DEFAULT_MODE
            action: Action = "ask"
            unsandboxed = False
        else:
            mode, session_mode, ruleset = await standing(api, workspace, restricted, ctx)
            unsandboxed = False
            read = reads(tool, arguments, ruleset)
            verdict = ruleset.evaluate(tool, arguments, real=read)
            if verdict.kind == "deny":
                return {"block": rule_block_reason(tool, verdict.why)}
            if restricted.block_outside_writes and rules.is_edit(tool):  # every mode, auto too
                pinned = edit_target(arguments, workspace)  # resolved once (as below)
                outside = outside_write_reason(
                    tool, pinned, workspace, restricted.block_outside_writes, services()
                )
                if outside is not None:
                    return {"block": outside}
            if mode == "sandbox" and not sandbox_ready():  # unavailable: safer, not weaker
                mode, unsandboxed = "ask", True
            action = rules.action(tool, mode, replay_safe=safe)
            if action == "block":  # plan mode stays read-only: no allow rule unlocks it
                return {"block": plan_mode_reason(tool, subagent=session_mode != "plan")}
        reason: str | None = None
        # takes back the checked target (a block); a read's: what the tool must read or fail
        forget: Callable[[], None] | None = checked(key, read) if read is not None else None
        if verdict.kind == "ask":
            action = "ask"
            reason = f"This asks because {verdict.why}."
        done: dict[str, Any] | None = None  # what letting the call through returns
        personal: str | None = None  # why only a person may allow it (no rule, no hook)
        if mode == "sandbox" and tool in rules.sandboxed and isinstance(arguments, dict):
            outside = outside_sandbox(arguments)  # pyright: ignore[reportUnknownArgumentType]
            if outside is not None:  # after the rules: no allow rule covers it
                action, reason = "ask", " ".join(filter(None, (reason, outside)))
                personal = outside
            else:  # the tool runs it inside: the call says so (pico3 validates it again)
                inside = {**arguments, "outside_sandbox": False}  # pyright: ignore[reportUnknownVariableType]
                done = {"call": {**call, "arguments": inside}}
        elif unsandboxed and action == "ask" and reason is None:
            reason = f"This asks because {SANDBOX_UNAVAILABLE}."
        if rules.is_edit(tool) and mode != "auto":  # after the rules: may only turn run into ask
            workspace, guarded = where()
            real = pinned or edit_target(arguments, workspace)  # resolved once: what is checked is
            dirs = where_read(workspace)
            added = dirs.folders[1:] if dirs is not None else ()
            own = await memories.folder(api.conversation_id, ctx) if real else None
            if own is not None and real is not None and path_within(real, own):
                # the subagent's memory folder: its own files (what is guarded inside still asks)
                guarded = unguarded(guarded, own, workspace) if workspace else guarded
                added = (*added, own)
                if action == "ask" and verdict.kind != "ask" and reason is None:
                    action = "run"
            confined = confinement(arguments, workspace, guarded, real=real, added=added)
            if confined is not None:
                action, reason = "ask", f"This asks in every mode but auto: {confined}."
                personal = confined
            # ...where the tool writes (or fails): a symlink swapped in later cannot redirect it
            forget = checked(key, real)
        elif pinned is not None:  # auto: the write lands where the switch checked it, or fails
            forget = checked(key, pinned)
        runs = action == "run" or (verdict.kind == "allow" and reason is None)
        remembering: list[dict[str, Any]] = []  # repositories a person may approve as they are
        if tool == "bash" and runs and done is None and isinstance(arguments, dict):
            # last: a git the call runs unasked must not run what its repository configured
            # (unless a person approved that configuration as it is now: .git_approvals)
            line: Any = arguments.get("command")  # pyright: ignore[reportUnknownMemberType]
            trusted = trusted_root(store.source)
            lookup = Lookup(git_approvals(services()))
            check = await anyio.to_thread.run_sync(git_check, line, workspace, trusted, lookup)
            if check is not None:
                action, reason = "ask", lookup.reason(check.reason)
                personal = check.reason
                remembering = lookup.offered(check.repositories)
        if action == "ask" and verdict.kind == "allow" and reason is None:
            return done
        decision = await api.memo("decision", ctx)
        hooked: Any = False  # the hook that just decided (a decision found in the memo: none)
        if decision is MISSING:
            if action == "run":
                return done
            if restricted.deny_asks is not None:  # refused instead of asking: the turn goes on
                if forget is not None:
                    forget()
                why = (reason or f"It would ask in {mode} mode.").replace(
                    "This asks", "It would ask", 1
                )
                return {"block": deny_instead_reason(tool, why, restricted.deny_asks)}
            # Claude Code's PermissionRequest hooks (any feature's permission_request handler)
            # may answer the dialog about to open; no answer (or a malformed one) asks
            candidate = hook_decision(await api.permission_request(call, ctx))
            if candidate is not None and candidate["decision"] == "allow" and personal:
                _log.warning(
                    "%s call: %s allowed it, but no rule or hook allows a call that asks in "
                    "every mode (%s): the dialog asks",
                    tool,
                    candidate.get("by"),
                    personal,
                )
                candidate = None
            hooked = candidate is not None and candidate.get("by")
            if candidate is None:
                await api.waiting(ctx)
                request: ApprovalRequest = {
                    "conversationId": api.conversation_id,
                    "callId": api.call_id,
                    "taskId": api.task_id,
                    "name": tool,
                    "args": arguments,
                }
                if reason is not None:
                    request["reason"] = reason
                else:  # a standing choice: a narrow rule that would allow this very call
                    offer = suggest_rules(
                        tool, arguments, root=store.root(), workspace=workspace, rules=ruleset
                    )
                # also a read outside's Read(//its/folder), with its reason; a compound
                # command's one rule per command not allowed yet, kept all together
                offer_rules(request, offer, store.scopes())
                if done is None and tool in rules.sandboxed and sandbox_ready():
                    request["sandbox"] = True  # "Allow inside the sandbox" (in ask mode, say)
                if remembering:  # "Allow always while its git configuration stays as it is"
                    request["repositories"] = remembering
                if tool == "write":
                    existing = _existing_size(arguments, workspace)
                    if existing is not None:
                        request["overwrites"] = existing
                answered = await interrupts.unless_interrupted(
                    api.conversation_id, lambda: ask(request, ctx)
                )
                stopping = interrupts.known(api.conversation_id)
                if answered is None and stopping is not None:  # the dialog closed unanswered
                    if forget is not None:
                        forget()
                    return {"block": sibling_reason(tool, stopping)}
                candidate = check_decision(answered, request)
                if candidate.get("remember") is True:  # what the dialog showed is what is kept
                    candidate["repositories"] = remembering
            decision = await api.memo("decision", candidate, ctx)
            if hooked and decision.get("by") == hooked:  # said on the worker's log
                verb = "allowed" if decision["decision"] == "allow" else "refused"
                _log.warning("%s call %s by %s", tool, verb, decision["by"])
        if decision["decision"] == "deny":
            if forget is not None:
                forget()
            if decision.get("interrupt") is True:  # the refusal, then the turn ends (.hook_answers)
                top = await store.top(api.conversation_id, ctx)
                who = decision.get("by") or "a PermissionRequest hook"
                await interrupts.start(api.conversation_id, Pending(api.call_id, top, who), ctx)
            return {"block": _block_reason(decision)}
        if decision.get("hookRules"):  # a PermissionRequest hook's updatedPermissions
            await keep_hook_rules(store, decision, api.conversation_id, ctx, say=bool(hooked))
        if decision.get("sandboxed") is True and isinstance(arguments, dict):
            inside = {**arguments, "outside_sandbox": False}  # pyright: ignore[reportUnknownVariableType]
            done = {"call": {**call, "arguments": inside}}
        if decision.get("remember") is True:  # the repositories' configuration, as it was shown
            approvals = git_approvals(services())
            kept = decision.get("repositories")
            for problem in await anyio.to_thread.run_sync(remember, approvals, kept):
                store.report(problem)
        scope = decision.get("scope")
        for kept in offered_rules(decision) if scope else ():  # checked: what was offered
            try:
                await store.keep(kept, scope, api.conversation_id, ctx)
            except (OSError, ValueError) as error:  # the call is allowed; the rule is not kept
                store.report(f"the rule {kept} was not kept: {error}")
        return done

    try:
        hook = harness.hooks(ns, TOOL_KIND, {"before_tool": before_tool})
        # The core blocks every call that needs approval while no authority serves the session
        # (docs/design/harness.md#approval-gate): this hook is it, from here to the uninstall.
        authority = harness.register_approval_authority(hook)
        stop = harness.hooks(ns, MODEL_CALL_KIND, {"before_request": interrupts.before_request})
    except BaseException:
        ns.unregister()
        raise

    def unhook() -> None:
        authority()
        hook()
        stop()

    return ApprovalInstallation(harness, ns, unhook, store)


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

    def _publish(self, mode: PermissionMode, ctx: Context, *, stored: bool = False) -> None:
        """Publish ``mode``, and tell the host's :class:`pico3.SandboxMode` (when it has one)
        whether the session's commands, user hooks included, now run in the sandbox. The
        ``stored`` mode read at activation only raises it: a host that starts the session in
        ``sandbox`` mode says so before it applies the mode (SessionStart hooks run between)."""
        found = self._harness.handle.services.get(SANDBOX_MODE_SERVICE)
        if isinstance(found, SandboxMode):
            found.active = (found.active and stored) or mode == "sandbox"
        state: ModeState = {"mode": mode}
        disabled = self._live().store.restrictions().disabled()
        if disabled:
            state["disabled"] = disabled
        self.state.replace(ctx, state)

    async def _refresh(self, ctx: Context) -> None:
        """Publish the stored mode (at activation); a stored ``auto`` that Claude Code's
        ``disableBypassPermissionsMode`` now disables is stored and published as ``ask``."""
        async with self._lock:
            installation = self._live()
            stored = await installation.mode(ctx)
            mode = effective_mode(stored, installation.store.restrictions())
            if mode != stored:
                await installation.set_mode(mode, ctx)
            self._publish(mode, ctx, stored=True)

    async def set_mode(self, mode: Any, ctx: Context) -> None:
        checked = check_mode(mode)  # raises before anything is written or published
        async with self._lock:
            installation = self._live()
            refused = installation.store.restrictions().disabled().get(checked)
            if refused is not None:  # Claude Code's disableBypassPermissionsMode
                raise RemoteServiceError(
                    "service_invalid_value", f"Cannot switch to {checked}: {refused}"
                )
            await installation.set_mode(checked, ctx)
            self._publish(checked, ctx)


def approval_session_facet(rules: ApprovalRules = DEFAULT_RULES) -> Facet:
    """The session facet with ``rules`` (the entry point serves :data:`session_facet`).

    It provides :data:`~.contract.ApprovalDialogs` (one instance per open question) and
    :data:`~.contract.ApprovalMode` (the permission mode; its state is read from storage when
    the facet activates).
    """

    def setup(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        dialogs = provide_dialogs(env, ApprovalDialogs, check_decision, answer="decide")

        async def ask(request: ApprovalRequest, ctx: Context) -> ApprovalDecision:
            key = dialog_key(request["conversationId"], request["callId"])
            return await dialogs.ask(key, request, ctx)

        modes = _Modes(harness, env.replicated_state({"mode": DEFAULT_MODE}))
        env.provide(ApprovalMode, modes)
        listing = RulesProvider(modes._live, env.replicated_state({"rules": [], "problems": []}))
        env.provide(ApprovalRulesService, listing)

        async def activate() -> None:
            env.own(harness.add_registration(modes._registration(rules, ask)))
            await modes._refresh(BACKGROUND)
            listing.publish_files(BACKGROUND)

        env.on_activate(activate)

    return define_facet("@pi/approval", setup)


session_facet = approval_session_facet()
"""The approval session facet with :data:`DEFAULT_RULES`."""
