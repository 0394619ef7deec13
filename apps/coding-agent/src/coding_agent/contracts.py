"""The app's own services: the contracts the session worker serves and the TUI uses.

Both processes import this module, and nothing else of each other: the worker provides these
services (``worker/``), the TUI reaches them over the chord wire by the same tokens (``tui/``).
Each is a remotable singleton of the worker; its shape is documented where it is served.

============================  ==========================  =============================================
token                         id                          served by
============================  ==========================  =============================================
:data:`WorkerStatusService`   ``coding-agent.worker``     ``worker/status.py``: session, pid, models,
                                                          reloads, sandbox, storage failure (``state``);
                                                          the tools' sizes (``tools(ctx)``)
:data:`SessionTreeService`    ``coding-agent.session-tree``  ``worker/tree_service.py``: ``/tree``,
                                                          ``/label``, ``/rewind``
:data:`ShellService`          ``coding-agent.shell``      ``worker/shell_service.py``: ``!cmd``
:data:`ReloadService`         ``coding-agent.reload``     ``settings/package_reload.py``: ``/reload``
:data:`TuiWatchService`       ``coding-agent.tui-watch``  ``worker/notifications.py``: which TUIs are
                                                          attached (keyed: one instance, ``worker``)
:data:`WorkingDirsService`    ``coding-agent.working-dirs``  ``worker/working_dirs.py``: ``/add-dir``
:data:`TurnLimitService`      ``coding-agent.turn-limit``  ``worker/max_turns.py``: ``-p --max-turns``
                                                          against a server's (or a parked) session
============================  ==========================  =============================================

Feature packages serve their own services (each feature's ``contract.py``); the app does not
import them. Where a client of the app must answer a feature's dialogs (``-p``, ``attach``, ACP,
the web page), it names the feature's service by id, once, here: :data:`APPROVAL_DIALOGS`,
:data:`QUESTION_DIALOGS`, :data:`APPROVAL_MODE`, :data:`APPROVAL_RULES`, :data:`MCP_SAMPLING`,
:data:`MCP_ELICITATIONS`, and where it runs a command with ``context: fork`` it asks the subagents
feature for the subagent: :data:`SUBAGENT_FORKS`. What such a client reads of an approval
request's standing choice, and how it answers "always allow in this session", is here too
(:func:`session_rules_offered`, :func:`session_choice`): the TUI, an editor and the Agent SDK
keep the same rules the same way.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypedDict

from chord import Context, define_service

__all__ = [
    "APPROVAL_DIALOGS",
    "APPROVAL_MODE",
    "APPROVAL_RULES",
    "MCP_ELICITATIONS",
    "MCP_SAMPLING",
    "QUESTION_DIALOGS",
    "SHELL_ENTRY_KIND",
    "SUBAGENT_FORKS",
    "TODO_NAMESPACE",
    "ReloadOutcome",
    "ReloadRequests",
    "ReloadService",
    "SessionTreeApi",
    "SessionTreeService",
    "ShellService",
    "TuiWatch",
    "TuiWatchService",
    "TurnLimitService",
    "TurnLimits",
    "WorkerStatusService",
    "WorkingDirs",
    "WorkingDirsService",
    "session_choice",
    "session_rules_offered",
]

WorkerStatusService = define_service("coding-agent.worker")
"""The worker's status (remotable singleton): ``{"state": ReplicatedState, "tools": async (ctx)
-> {tool name: tokens}}``
(the document: :mod:`coding_agent.worker.status`)."""


class SessionTreeApi(Protocol):
    """The remotable contract of :data:`SessionTreeService` (:mod:`coding_agent.worker.tree_service`)."""

    async def outline(self, ctx: Context) -> dict[str, Any]: ...

    async def branch(self, conversation: int, at: int, ctx: Context) -> int: ...

    async def label(self, conversation: int, at: int, name: str, ctx: Context) -> int: ...

    async def visit(self, conversation: int, ctx: Context) -> None:
        """The user switched to branch ``conversation``: recorded as the branch they are on."""
        ...

    async def rewind_plan(self, conversation: int, prompt: int, ctx: Context) -> list[Any]: ...

    async def rewind(
        self, conversation: int, prompt: int, mode: str, overwrite: list[str], ctx: Context
    ) -> dict[str, Any]: ...


SessionTreeService = define_service("coding-agent.session-tree", SessionTreeApi)
"""The worker's session tree service (remotable singleton)."""

ShellService = define_service("coding-agent.shell")
"""The worker's ``!cmd`` runner (remotable singleton): ``state``, ``run``, ``abort``
(:mod:`coding_agent.worker.shell_service`)."""

SHELL_ENTRY_KIND = "coding-agent.shell"
"""The entry kind of a ``!cmd``/``!!cmd`` the user ran (the transcript draws it)."""

TODO_NAMESPACE = "coding-agent.todo"
"""The namespace of each conversation's todo list (``worker/tools/todo.py``); the view holds it
as ``plugins["coding-agent.todo"] = {"todos": [{content, status, activeForm}, ...]}``, which the
TUI's tasks panel shows."""


class ReloadOutcome(TypedDict):
    """What became of one package in one ``/reload`` (JSON, crosses the wire)."""

    package: str
    outcome: Literal["reloaded", "added", "removed", "failed", "restart_required"]
    ok: bool
    message: str


class ReloadRequests(Protocol):
    """The remotable contract of :data:`ReloadService`."""

    async def reload(self, ctx: Context) -> list[ReloadOutcome]:
        """Re-scan and reload every facet package of the worker; one outcome per package."""
        ...


ReloadService = define_service("coding-agent.reload", ReloadRequests)
"""The worker's ``/reload`` (remotable singleton): ``reload(ctx) -> list[ReloadOutcome]``
(:mod:`coding_agent.settings.package_reload`)."""


class TuiWatch(Protocol):
    """The remotable contract of :data:`TuiWatchService`."""

    async def watching(self, ctx: Context) -> None:
        """Held open by a TUI for as long as it runs (it returns only when ``ctx`` is
        cancelled, which a disconnect does): the worker counts the TUIs attached now."""
        ...


TuiWatchService = define_service("coding-agent.tui-watch", TuiWatch)
"""The worker's count of attached TUIs (keyed, one instance ``"worker"``, which each TUI
observes and calls :meth:`TuiWatch.watching` on): a TUI writes notifications to its terminal,
so the worker's desktop notifications wait for no TUI to be attached
(:mod:`coding_agent.worker.notifications`). Other clients (``-p``, the browser, ACP) do not
count."""


class TurnLimits(Protocol):
    """The remotable contract of :data:`TurnLimitService`."""

    async def send(self, conversation: int, input: Any, turns: int, ctx: Context) -> int:
        """Send ``input`` (``SendInputJson``) to ``conversation`` with its turn limited to
        ``turns`` model calls, as ``-p --max-turns`` limits a run in its own process; returns
        the input id. The limit is that turn's alone (till the conversation is idle again)
        and is stored with it, so a worker that resumes the turn after a restart enforces
        what is left of it.
        Raises ``ValueError`` for a conversation that is not there, one another limited send
        holds, or ``turns`` below 1."""
        ...


TurnLimitService = define_service("coding-agent.turn-limit", TurnLimits)
"""The worker's ``--max-turns`` for a client in another process (remotable singleton:
:mod:`coding_agent.worker.max_turns`): ``-p --server`` and ``--wait-for-approval`` send the
prompt through it, so the worker that runs the turn enforces the limit."""


class WorkingDirs(Protocol):
    """The remotable contract of :data:`WorkingDirsService`. A folder is spelled as typed:
    ``~`` expanded, a relative one from the session's folder; each method raises
    ``RemoteServiceError`` (``service_invalid_value``) with one line naming what is wrong (no
    such folder, a file, the project or a folder inside it, a file that cannot be written),
    and then wrote nothing."""

    async def add(self, folder: str, ctx: Context) -> str:
        """Add ``folder`` as a working directory of the session, stored with its launch
        settings (every later worker of the session has it); returns the line to show (the
        real path; "already a working directory" when it is, and nothing is written)."""
        ...

    async def remember(self, folder: str, ctx: Context) -> str:
        """Append ``folder`` to ``additional_directories`` of your own ``config.toml`` (a
        working directory of every session); returns the line to show (already there: says
        so, and nothing is written)."""
        ...

    async def listing(self, ctx: Context) -> list[dict[str, str]]:
        """The working directories, the project first: ``{"folder", "from"}`` each, ``from``
        saying where it comes from (the project, this session, or the settings file)."""
        ...


WorkingDirsService = define_service("coding-agent.working-dirs", WorkingDirs)
"""The worker's working directories (remotable singleton): ``/add-dir DIR`` from a TUI
(:mod:`coding_agent.worker.working_dirs`)."""


# -- feature services the app's clients name by id ---------------------------------------------
APPROVAL_DIALOGS = define_service("pi.approval-dialog")
"""The approval feature's dialogs, keyed by id (``decide({"decision", "by"?})``)."""


def session_rules_offered(request: object) -> list[str]:
    """The narrow allow rules an :data:`APPROVAL_DIALOGS` request offers to keep for this
    session (``[]``: none): its ``rule``, or a compound command's ``rules`` (kept all together,
    never a part), when ``session`` is among its ``scopes``. The approval feature chose them
    (facets-approval's ``suggest_rules``: never all of a tool that can do anything); a client
    offers them as its "always allow in this session" choice and answers it with
    ``{"decision": "allow", "rule"|"rules": …, "scope": "session"}``, which the feature checks
    against the request again. Anything malformed offers nothing."""
    if not isinstance(request, dict):
        return []
    scopes: Any = request.get("scopes")  # pyright: ignore[reportUnknownMemberType]
    if not isinstance(scopes, list) or "session" not in scopes:
        return []
    rule: Any = request.get("rule")  # pyright: ignore[reportUnknownMemberType]
    if isinstance(rule, str) and rule:
        return [rule]
    rules: Any = request.get("rules")  # pyright: ignore[reportUnknownMemberType]
    if isinstance(rules, list) and rules and all(isinstance(r, str) and r for r in rules):  # pyright: ignore[reportUnknownVariableType]
        return [str(r) for r in rules]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return []


def session_choice(request: object, by: str) -> dict[str, Any]:
    """The decision that allows ``request``'s call and keeps the rules it offers
    (:func:`session_rules_offered`) for this session, decided by ``by``: the same answer the
    TUI's and an editor's "always allow in this session" give. Raises ``ValueError`` when the
    request offers no session rule."""
    offered = session_rules_offered(request)
    if not offered:
        raise ValueError("this approval request offers no rule to keep for this session")
    standing: dict[str, Any] = {"rule": offered[0]} if len(offered) == 1 else {"rules": offered}
    return {"decision": "allow", "by": by, **standing, "scope": "session"}


QUESTION_DIALOGS = define_service("pi.question-dialog")
"""The question feature's dialogs, keyed by id (``submit({"outcome", "answer"?, "by"?})``)."""

APPROVAL_MODE = define_service("approval.mode")
"""The approval feature's permission mode (``get``/``set``), a singleton of the session."""

APPROVAL_RULES = define_service("approval.rules")
"""The approval feature's permission rules; ``-p`` asks its ``check_command(command)`` what a
prompt command's ``!`` line would get (``{"verdict": "run"|"ask"|"block", "by": "rule"|"mode",
"why"}``) before it runs one."""

MCP_SAMPLING = define_service("mcp.sampling")
"""The MCP feature's sampling approvals, keyed by id (``decide({"decision"})``)."""

MCP_ELICITATIONS = define_service("mcp.elicitation")
"""The MCP feature's elicitations, keyed by id (``submit({"action", "content"?})``)."""

SUBAGENT_FORKS = define_service("subagents.fork")
"""The subagents feature's runs for a host: ``run({"conversation", "agent", "description",
"prompt", "model"?, "allow"?})`` runs one subagent and answers ``{"agent", "report",
"conversation", "task"}`` or ``{"agent", "error"}`` (:mod:`coding_agent.context.forks`)."""
