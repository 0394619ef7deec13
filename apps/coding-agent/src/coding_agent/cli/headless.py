"""Headless modes: one prompt, no TUI — ``-p`` prints the answer, ``--json`` streams events.

Both run the session worker's facets **in this process** (:func:`~coding_agent.worker.main.
open_session_host`, no socket) plus a small presentation facet that does what a TUI would:

* it observes ``pi.conversation``, follows the ``view`` of the branch the session is on (the one
  the user last prompted in, made or switched to, so ``--continue`` after a ``/rewind`` goes on
  in the new branch; a new session's root) and passes every event of every revision
  (``view["commit"]["events"]``) on, in order;
* it answers the features' dialogs, since nobody is there to click: an approval gets the
  ``approve`` policy (``"deny"`` by default: a headless run never runs ``bash`` or edits files
  unless told to), a question is cancelled, an MCP server's elicitation is declined and its sampling request follows ``approve``. The dialog services are named by id only
  (``pi.approval-dialog``, ``pi.question-dialog``); the app imports no feature package.

* it waits, before the first request, for the configured MCP servers (the ``mcp.servers``
  service, by id) to be ready or failed, at most the configuration's ``startup_timeout`` (default
  30 s): the first request then offers their tools. A server that failed or is not ready in time
  gets one ``coding-agent: warning:`` line on ``err``; the run goes on without its tools.

The prompt is sent with ``send``, with the files and folders it mentions (``@src/app.py``,
``@docs/``) attached as the TUI attaches them (:func:`coding_agent.context.mentions.
mention_blocks`: the file's text in a fence, a folder's entries, or one line saying why not, and
the run goes on); the run ends with the ``turn.ended`` event whose ``inputs``
hold it. In ``print`` mode the text of the final answer is the only thing written to ``out``; in
``json`` mode the first line is ``{"type": "session", "session", "model", "cwd"}``, then each
event is one line of JSON, and the last is ``{"type": "result", "ok", "status", "text",
"error"?, "blocked"?}``; in the ``claude-json`` and ``claude-stream-json`` modes (``-p
--output-format json|stream-json``) ``out`` gets Claude Code's shapes (:mod:`coding_agent.cli.
claude_output`: its result object, and with ``stream-json`` its init and message lines before
it), and ``--max-turns`` stops the turn after that many model calls (:mod:`coding_agent.
worker.max_turns`: exit 1, ``error_max_turns``). Failures go to ``err`` as ``coding-agent: error:
...`` lines. The exit code is 0 when the turn ended ``done``, 1 when it did not (the provider
or model failed, ``--max-turns`` stopped it, or a hook stopped the turn: a ``PermissionRequest`` deny with ``interrupt``, whose line names the
hook, ``the turn was stopped by PermissionRequest hook `<command>```), 3 when
it ended but a tool call was blocked because nobody could approve it (``--approve deny``, or no
approval package serves the session: the line names the package and the command that restores
it), 130 when a signal aborted it (:mod:`coding_agent.cli.interrupt`: the result line's
``status`` is ``interrupted``, ``-p`` writes one error line), 5 when the session's storage failed (disk full, I/O error, read-only): one
``coding-agent: error:`` line says so.

**Escapes** (issue 36): ``-p`` writes the answer made inert (:func:`chord.inert`: an ESC shows as
``\\x1b``) when ``out`` is a terminal, and exactly as the model wrote it otherwise (a pipe or a
file gets the model's bytes). ``--json`` lines are ASCII JSON (``\\u001b``), safe on a terminal
and exact once parsed. The ``coding-agent: error:`` lines are always inert.

Why one module: it is the headless contract end to end, one prompt in and one outcome out:
which events are printed, which dialogs are answered and how, and which exit code and error line
a turn's outcome gets. Those rules refer to each other (a denied dialog is a blocked call is exit
3 is the blocked line), so they are read and changed together; the MCP wait, which is not part
of the contract, lives in :mod:`coding_agent.worker.mcp_watch`.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TextIO, cast

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from chord import (
    BACKGROUND,
    Context,
    Facet,
    FacetEnvironment,
    define_facet,
    inert,
)
from coding_agent.cli.claude_control import ControlChannel, UnsupportedContent, prompt_content
from coding_agent.cli.claude_flags import allow_rule
from coding_agent.cli.claude_output import ClaudeOutput, Subtype, failure_result
from coding_agent.cli.interrupt import ABORT_WAIT, EXIT_INTERRUPTED, Interrupt
from coding_agent.context.mentions import mention_blocks
from coding_agent.contracts import (
    APPROVAL_DIALOGS,
    APPROVAL_MODE,
    APPROVAL_RULES,
    MCP_ELICITATIONS,
    MCP_SAMPLING,
    QUESTION_DIALOGS,
    SUBAGENT_FORKS,
    ShellService,
    WorkerStatusService,
    session_choice,
    session_rules_offered,
)
from coding_agent.session_files.folders import Session
from coding_agent.worker.main import (
    WorkerConfig,
    load_features,
    open_session_host,
    session_worker_config,
)
from coding_agent.worker.max_turns import TurnLimit
from coding_agent.worker.mcp_watch import McpWatch
from coding_agent.worker.root_view import BranchView
from coding_agent.worker.status import model_choice
from pico3 import (
    AssistantEntry,
    ConversationServiceApi,
    SendInputJson,
    ToolResultEntry,
    View,
    ViewDecoder,
    ViewEntry,
    claude_tool,
    view_from_json,
)
from pico3.models import TextContent, ToolCall

__all__ = [
    "APPROVAL_DIALOGS",
    "EXIT_BLOCKED",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_STORAGE",
    "QUESTION_DIALOGS",
    "HeadlessMode",
    "answer_text",
    "headless_mode",
    "interrupted_reporter",
    "report_failure",
    "run_headless",
    "run_json",
    "run_print",
    "unapproved_calls",
]

HeadlessMode = Literal["print", "json", "claude-json", "claude-stream-json"]
"""``-p`` (and ``--output-format text``): the answer as text; ``--json``: this agent's events;
``claude-json``/``claude-stream-json``: ``--output-format json``/``stream-json``, Claude Code's
shapes (:mod:`coding_agent.cli.claude_output`)."""

CLAUDE_MODES: tuple[HeadlessMode, ...] = ("claude-json", "claude-stream-json")


def headless_mode(json_events: bool, output_format: str | None) -> HeadlessMode:
    """The mode of a headless command line: ``--json`` given (``json_events``), or
    ``--output-format``'s value (``None``: not given)."""
    if json_events:
        return "json"
    if output_format == "json":
        return "claude-json"
    if output_format == "stream-json":
        return "claude-stream-json"
    return "print"


def report_failure(mode: HeadlessMode, out: TextIO, message: str, session_id: str = "") -> None:
    """A run that failed before its turn could report (its ``coding-agent: error:`` line is
    on stderr): in the ``claude-*`` modes Claude Code's error result goes on ``out``
    (:func:`~coding_agent.cli.claude_output.failure_result`); the other modes write nothing."""
    if mode in CLAUDE_MODES:
        failure_result(out, message, stream=mode == "claude-stream-json", session_id=session_id)


EXIT_OK = 0
"""The turn ended ``done``."""
EXIT_FAILED = 1
"""The turn did not end ``done`` (the provider or the model failed)."""
EXIT_USAGE = 2
"""The prompt names a command (``/name``) that no prompt template or skill provides."""
EXIT_BLOCKED = 3
"""The turn ended, but a tool call was refused because nobody could approve it."""
EXIT_STORAGE = 5
"""The session's storage failed (disk full, I/O error, read-only file system); what was stored
before is kept, and ``--continue`` resumes from it once the cause is fixed."""


_FEATURE_SERVICES = {"facets-approval": APPROVAL_DIALOGS, "facets-question": QUESTION_DIALOGS}

Event = dict[str, Any]


def answer_text(entry: ViewEntry | None) -> str:
    """The text blocks of an assistant entry's messages, joined (empty for ``None``)."""
    if entry is None:
        return ""
    return "".join(
        block.text
        for message in entry.messages
        if not isinstance(message.content, str)
        for block in message.content
        if isinstance(block, TextContent)
    )


def _is_root(view: dict[str, Any]) -> bool:
    return "parent" not in view["conversation"]


REHYDRATED = "coding-agent.rehydrated"
"""The type of the event :func:`_presentation` adds (with ``rehydrate=True``) when the root's
view is hydrated again (a reconnect, a collapse): events may have been missed, ``view`` is the
current value. :func:`follow_turn` reads it; it is never written out."""


class _Root:
    """Called by :func:`_presentation` with each root conversation instance it follows: they
    are in ``found``, and ``chosen`` is set at the first."""

    def __init__(self) -> None:
        self.found: list[ConversationServiceApi] = []
        self.chosen = anyio.Event()

    def __call__(self, instance: ConversationServiceApi) -> None:
        self.found.append(instance)
        self.chosen.set()


PARTIAL = "coding-agent.partial"
"""The type of the event :func:`_presentation` adds (with ``partial=True``) when the streaming
answer (the view's ``turn.message``) grew: ``message`` is its JSON. :func:`follow_turn` hands
it to Claude Code's ``stream_event`` lines (``--include-partial-messages``); never written out
as it is."""


def _presentation(
    events: MemoryObjectSendStream[Event],
    root: Callable[[ConversationServiceApi], None],
    *,
    rehydrate: bool = False,
    partial: bool = False,
) -> BranchView:
    """Follow the conversation selected on the result (:meth:`BranchView.select`); every
    update's events go to ``events`` (and, with ``rehydrate``, a :data:`REHYDRATED` event for
    every hydrate after the first; with ``partial``, a :data:`PARTIAL` event for every update
    whose streaming answer changed)."""
    followed = [False]
    streaming: list[Any] = [None]  # the last streaming answer passed on

    def revision(instance: ConversationServiceApi, value: Any, kind: str, chosen: bool) -> None:
        if kind == "hydrate":
            again = followed[0]
            if chosen:
                followed[0] = True
                root(instance)
            if again and rehydrate:
                try:
                    events.send_nowait({"type": REHYDRATED, "view": value})
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    pass
            return
        turn = value.get("turn") if partial else None
        message = turn.get("message") if isinstance(turn, dict) else None
        grew = isinstance(message, dict) and message != streaming[0]
        streaming[0] = message
        added = [{"type": PARTIAL, "message": message}] if grew else []
        for event in [*value["commit"]["events"], *added]:
            try:
                events.send_nowait(event)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the run is over; later revisions are not reported

    return BranchView("coding-agent/headless", revision)


def _responder(service: Any, answer: Callable[[Any, Context], Any]) -> Facet:
    def setup(env: FacetEnvironment) -> None:
        async def on_dialog(dialog: Any, ctx: Context) -> None:
            await answer(dialog, ctx)

        env.observe(service, on_dialog)

    return define_facet(f"coding-agent/headless-{service.id}", setup)


def _describe(request: Any, what: str = "") -> str:
    """``bash (echo hi)``: the tool (``what`` after its name) and a short form of its
    arguments."""
    if not isinstance(request, dict):
        return "a tool call"
    request = cast(dict[str, Any], request)
    name = str(request.get("name") or "tool")
    args: Any = request.get("args")
    detail = ""
    if isinstance(args, dict):
        args = cast(dict[str, Any], args)
        for key in ("command", "path", "file_path", "pattern"):
            if isinstance(args.get(key), str):
                detail = str(args[key])
                break
    if len(detail) > 60:
        detail = detail[:57] + "..."
    return inert(f"{name}{what} ({detail})" if detail else f"{name}{what}")


def _is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (a closed or odd stream is not)."""
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False


_REPOSITORY_RUNS = "git configuration runs "
"""Words of the approval feature's reason when a ``git`` the command runs would run a program
its repository configured (``facets_approval.gitconfig``)."""


def _needs(request: dict[str, Any]) -> str:
    """Why the call needed approval: the request's reason (an edit that asks in every mode but
    ``auto``: a file that runs code, a target outside the project), or just that it does."""
    reason = request.get("reason")
    if isinstance(reason, str) and reason.startswith("This asks in every mode but auto: "):
        return "it needs approval in every mode but auto: " + reason.split(": ", 1)[1].rstrip(".")
    if isinstance(reason, str) and reason.startswith("This asks because "):  # an ask rule
        # (a repository's git configuration: the dialog's hint on /trust, said again below)
        reason = reason.split(". Trusting the project (/trust)", 1)[0]
        return "it needs approval: " + reason.removeprefix("This asks because ").rstrip(".")
    return "it needs approval"


def _remedy(name: str, request: dict[str, Any]) -> str:
    reason = request.get("reason")
    if isinstance(reason, str) and _REPOSITORY_RUNS in reason:  # facets_approval.gitconfig
        remedy = (
            "--approve allow, or trust the project (coding-agent --trust, or /trust in the TUI)"
        )
        if request.get("repositories"):  # the dialog would offer to remember it as it is
            remedy += (
                ", or allow it in the TUI always while its git configuration stays as is "
                "(then -p runs it too)"
            )
        return remedy
    if isinstance(reason, str) and "outside the working directories" in reason:
        return "--approve allow or --permission-mode auto (or --add-dir, as above)"
    if isinstance(reason, str) and reason.startswith("This asks because "):
        return "--approve allow (an ask rule asks in every mode)"
    if isinstance(reason, str):  # accept-edits would ask again
        return "--approve allow or --permission-mode auto"
    # the narrowest first: a Claude Code script's rule for this call (allow_rule)
    rule = allow_rule(name, request.get("args"))
    narrow = f"--allowedTools {shlex.quote(rule)}, " if rule else ""
    if name in ("write", "edit"):
        return f"{narrow}--approve allow or --permission-mode accept-edits (or auto)"
    return f"{narrow}--approve allow or --permission-mode auto"


def _responders(
    features: set[str],
    approve: Literal["allow", "deny"],
    blocked: list[dict[str, Any]],
    *,
    wait: float | None = None,
    waiting: Callable[[dict[str, Any]], None] | None = None,
    sdk: tuple[ControlChannel, str, list[dict[str, Any]]] | None = None,
) -> list[Facet]:
    """The headless answers to the features' dialogs. With ``wait`` (``--wait-for-approval``) an
    approval is parked: left open for whoever attaches (a TUI, an editor) for ``wait`` seconds
    (``math.inf``: until answered), then answered as ``approve`` says. An answer from elsewhere
    closes the dialog, which cancels the wait; a worker restart reopens it and the wait starts
    again. ``waiting`` hears each parked request. With ``sdk`` (``--permission-prompt-tool
    stdio``: the channel, the session's folder and a list of the calls it refused) the Agent
    SDK's ``can_use_tool`` callback answers each approval instead
    (:meth:`ControlChannel.can_use_tool`), as the TUI's dialog would: a call it does not allow
    is refused, and added to the list (the result's ``permission_denials``); an allow that
    keeps the suggested rules is the dialog's "always allow in this session" choice."""

    async def ask_sdk(dialog: Any, ctx: Context) -> None:
        assert sdk is not None
        channel, cwd, denied = sdk
        try:
            request = dialog.request.value
        except Exception:  # the dialog went away meanwhile
            return
        request = cast(dict[str, Any], request) if isinstance(request, dict) else {}
        name, args = str(request.get("name") or "tool"), request.get("args")
        tool_name, tool_input = claude_tool(name, args if isinstance(args, dict) else {}, cwd)
        reason = request.get("reason")
        permission = await channel.can_use_tool(
            tool_name, tool_input, str(request.get("callId") or ""),
            reason if isinstance(reason, str) else "",
            offered=session_rules_offered(request),
        )  # fmt: skip
        if permission.allowed and permission.keep:  # the suggestion: the dialog's session choice
            await dialog.decide(session_choice(request, "the Agent SDK"), ctx)
            return
        if permission.allowed:
            await dialog.decide({"decision": "allow", "by": "the Agent SDK"}, ctx)
            return
        by = f"the Agent SDK's can_use_tool ({permission.message})"
        denied.append({"name": name, "args": args})
        await dialog.decide({"decision": "deny", "by": by}, ctx)
        if permission.interrupt:
            channel.on_interrupt()

    async def decide(dialog: Any, ctx: Context) -> None:
        if wait is not None:
            try:
                request = dialog.request.value
            except Exception:  # the dialog went away meanwhile
                return
            if waiting is not None and isinstance(request, dict):
                waiting(cast(dict[str, Any], request))
            if math.isinf(wait):
                await ctx.wait_cancelled()  # answered elsewhere: the dialog closes, ctx ends
                return
            with anyio.move_on_after(wait):
                await ctx.wait_cancelled()
                return
        if approve == "deny":
            try:
                request = dialog.request.value
            except Exception:  # the dialog went away meanwhile
                request = None
            blocked.append(request if isinstance(request, dict) else {})
        await dialog.decide({"decision": approve, "by": "headless"}, ctx)

    async def cancel(dialog: Any, ctx: Context) -> None:
        await dialog.submit({"outcome": "cancelled", "by": "headless"}, ctx)

    facets: list[Facet] = []
    if "facets-approval" in features:
        facets.append(_responder(APPROVAL_DIALOGS, ask_sdk if sdk is not None else decide))
    if "facets-question" in features:
        facets.append(_responder(QUESTION_DIALOGS, cancel))
    if "facets-mcp" in features:  # a server asking the user: nobody to ask

        async def decline(dialog: Any, ctx: Context) -> None:
            await dialog.submit({"action": "decline"}, ctx)

        facets.append(_responder(MCP_ELICITATIONS, decline))

        async def sample(dialog: Any, ctx: Context) -> None:  # as --approve says
            await dialog.decide({"decision": approve}, ctx)

        facets.append(_responder(MCP_SAMPLING, sample))
    return facets


def _shell_user(box: list[Any]) -> Facet:
    """A facet handing the session's ``!cmd`` runner (:data:`~coding_agent.contracts.
    ShellService`) to ``box``: a template's ``!`cmd``` runs through it."""
    return _service_user(ShellService, box, "shell")


def _service_user(token: Any, box: list[Any], name: str) -> Facet:
    """A facet handing the session's service ``token`` to ``box`` once it is active."""

    def setup(env: FacetEnvironment) -> None:
        service = env.use(token)
        env.on_activate(lambda: box.append(service))

    return define_facet(f"coding-agent/headless-{name}", setup)


def _command_check(box: list[Any]) -> Callable[[str], Awaitable[Any]] | None:
    """What the approval feature's rules and mode give a template's ``!`` line
    (:data:`~coding_agent.contracts.APPROVAL_RULES`); ``None`` without the feature."""
    if not box:
        return None

    async def check(command: str) -> Any:
        return await box[-1].check_command(command, BACKGROUND)

    return check


def _shell_runner(
    box: list[Any], conversation: ConversationServiceApi
) -> Callable[[str], Awaitable[str]]:
    async def run(command: str) -> str:
        if not box:
            raise RuntimeError(f"cannot run `{command}`: the session has no !cmd runner")
        data = await box[-1].run(_conversation_id(conversation), command, False, BACKGROUND)
        return str(data.get("output", "")) if isinstance(data, dict) else ""

    return run


def _conversation_id(conversation: ConversationServiceApi) -> int:
    """The id of the conversation ``-p`` sends to."""
    return conversation.view.value["conversation"]["id"]


def _config_model(view: Any) -> Any:
    """The view's ``config.model`` (``{"provider", "modelId"}``), or ``None``."""
    config = view.get("config") if isinstance(view, dict) else None
    return config.get("model") if isinstance(config, dict) else None


def _model_ref(view: Any) -> str | None:
    model = _config_model(view)
    if isinstance(model, dict) and model.get("provider") and model.get("modelId"):
        return f"{model['provider']}/{model['modelId']}"
    return None


async def run_headless(
    prompt: str,
    config: WorkerConfig,
    *,
    mode: HeadlessMode = "print",
    out: TextIO,
    approve: Literal["allow", "deny"] = "deny",
    err: TextIO | None = None,
    verbose: bool = False,
    on_unanswered: Callable[[], None] | None = None,
    interrupt: Interrupt | None = None,
    max_turns: int | None = None,
    channel: ControlChannel | None = None,
    sdk_approvals: bool = False,
    partial: bool = False,
) -> int:
    """Send ``prompt`` to the branch the session is on and report as ``mode`` says.

    Returns the exit code: :data:`EXIT_OK` when the turn ended ``done``, :data:`EXIT_FAILED`
    when it did not (one ``coding-agent: error:`` line on ``err`` says why, naming the model),
    :data:`EXIT_BLOCKED` when it ended but a tool call was refused for lack of approval (one
    line per call on ``err``, naming the flags that allow it). ``verbose`` prints the session id
    on ``err``. ``on_unanswered`` hears a failed turn in which the model produced nothing (the
    command line drops a session it created for it: no ghost). ``interrupt``: the run's
    signals (:mod:`coding_agent.cli.interrupt`): the first aborts the turn, and the run returns
    :data:`EXIT_INTERRUPTED` after its last line (``"status": "interrupted"``). ``max_turns``
    (``--max-turns``): the turn stops after that many model calls (:mod:`coding_agent.
    worker.max_turns`); still calling tools then, the run exits :data:`EXIT_FAILED`. Raises
    :class:`~coding_agent.worker.providers.RegistryError` / ``ValueError`` for a bad model or
    faux script (nothing is opened then).

    With ``channel`` (``--input-format stream-json``, :mod:`coding_agent.cli.claude_control`)
    ``prompt`` is not sent: the prompts are the user lines the channel reads from stdin, each a
    turn of its own reported as ``mode`` says (its own ``result`` line), one after another in
    the session until stdin closes; the exit code is the last turn's (0 without one). The
    channel's ``interrupt`` aborts the running turn as a signal does, its
    ``set_permission_mode`` sets the session's mode, and with ``sdk_approvals``
    (``--permission-prompt-tool stdio``) the SDK's ``can_use_tool`` answers the approvals.
    ``partial`` (``--include-partial-messages``, with ``claude-stream-json``): the answers
    stream as Claude Code's ``stream_event`` lines too (:meth:`ClaudeOutput.partial`)."""
    if channel is None:
        return await _run_headless(
            prompt, config, mode=mode, out=out, approve=approve, err=err, verbose=verbose,
            on_unanswered=on_unanswered, interrupt=interrupt, max_turns=max_turns,
            partial=partial,
        )  # fmt: skip
    code = EXIT_OK
    async with anyio.create_task_group() as group:
        group.start_soon(channel.serve)  # initialize is answered while the session opens
        try:
            code = await _run_headless(
                prompt, config, mode=mode, out=out, approve=approve, err=err, verbose=verbose,
                on_unanswered=on_unanswered, max_turns=max_turns, channel=channel,
                sdk_approvals=sdk_approvals, partial=partial,
            )  # fmt: skip
        finally:
            group.cancel_scope.cancel()
    return code


async def _run_headless(
    prompt: str,
    config: WorkerConfig,
    *,
    mode: HeadlessMode,
    out: TextIO,
    approve: Literal["allow", "deny"],
    err: TextIO | None,
    verbose: bool,
    on_unanswered: Callable[[], None] | None,
    interrupt: Interrupt | None = None,
    max_turns: int | None,
    channel: ControlChannel | None = None,
    sdk_approvals: bool = False,
    partial: bool = False,
) -> int:
    if mode not in ("print", "json", *CLAUDE_MODES):
        raise ValueError(f"mode must be 'print', 'json' or a Claude Code one, got {mode!r}")
    if approve not in ("allow", "deny"):
        raise ValueError(f"approve must be 'allow' or 'deny', got {approve!r}")
    errors = err if err is not None else sys.stderr
    send_events, receive_events = anyio.create_memory_object_stream[Event](math.inf)
    root = _Root()
    generations = load_features(config)
    features = {generation.package.name for generation in generations}
    blocked: list[dict[str, Any]] = []
    shell: list[Any] = []
    shell_rules: list[Any] = []
    presentation = _presentation(
        send_events, root, partial=partial and mode == "claude-stream-json"
    )
    # The branch the session's record names, followed from the session's first commit (a
    # new session's configuration); the worker's word, once it is open, corrects a stale one.
    presentation.select(config.session.current_branch())
    denied: list[dict[str, Any]] = []  # the calls the SDK's can_use_tool refused
    sdk = (
        (channel, str(config.session.cwd), denied)
        if channel is not None and sdk_approvals
        else None
    )
    extra = [
        presentation.facet(),
        *_responders(features, approve, blocked, sdk=sdk),
        _shell_user(shell),
    ]
    modes: list[Any] = []
    statuses: list[Any] = []  # the worker's status (its models), for set_model
    if channel is not None:
        extra.append(_service_user(WorkerStatusService, statuses, "status"))
    forks: list[Any] = []  # the subagents feature's runs: a command with context: fork
    if "facets-subagents" in features:
        extra.append(_service_user(SUBAGENT_FORKS, forks, "forks"))
    if "facets-approval" in features:  # a template's `!` lines are checked by its rules
        extra.append(_service_user(APPROVAL_RULES, shell_rules, "rules"))
        extra.append(_service_user(APPROVAL_MODE, modes, "mode"))
    limit = TurnLimit(max_turns) if max_turns is not None else None
    if limit is not None:
        extra.append(limit.facet())
    mcp = McpWatch() if "facets-mcp" in features else None
    if mcp is not None:
        extra.append(mcp.facet())
    session = config.session
    async with (
        send_events,
        receive_events,
        open_session_host(config, extra_facets=extra, generations=generations) as runtime,
    ):
        presentation.select(runtime.status.branch)  # the branch the session is on
        await root.chosen.wait()
        if mcp is not None:  # the first request offers the servers' tools
            await mcp.settled(errors)

        async def prepare(
            prompt: str,
        ) -> tuple[str | list[dict[str, Any]], dict[str, Any]] | int:
            """The content and options a typed prompt sends (a command expanded, mentions
            attached), or the exit code of a command that cannot run (its line is written)."""
            send_options: dict[str, Any] = {}  # a command's model and allowed-tools
            typed = prompt
            if prompt.startswith(
                "/"
            ):  # `-p "/greet Bob"` sends the template, as Claude Code and pi do
                # lazy: start-up time (only a prompt that names a command loads the templates)
                from coding_agent.cli.headless_commands import (
                    CommandBlocked,
                    UnknownCommand,
                    expand_prompt_command,
                )
                from coding_agent.context.prompt_templates import TemplateError

                try:
                    expanded = await expand_prompt_command(
                        prompt,
                        session.cwd,
                        approve,
                        _shell_runner(shell, root.found[0]),
                        _config_model(root.found[0].view.value),
                        check=_command_check(shell_rules),
                    )
                except (CommandBlocked, TemplateError, RuntimeError, UnknownCommand) as error:
                    print(f"coding-agent: error: {inert(str(error))}", file=errors)
                    errors.flush()
                    report_failure(mode, out, str(error), session.id)
                    if isinstance(error, UnknownCommand):
                        return EXIT_USAGE
                    return EXIT_BLOCKED if isinstance(error, CommandBlocked) else EXIT_FAILED
                prompt, send_options = expanded.text, expanded.options
                if expanded.note is not None:
                    print(f"coding-agent: warning: {inert(expanded.note)}", file=errors)
                    errors.flush()
                if expanded.fork is not None:  # context: fork: its subagent's result is sent
                    from coding_agent.context.forks import ForkError, run_fork

                    name, agent = expanded.fork
                    try:
                        prompt = await run_fork(
                            forks[-1] if forks else None, name, agent, prompt,
                            _conversation_id(root.found[0]), send_options, BACKGROUND,
                        )  # fmt: skip
                    except ForkError as error:
                        print(f"coding-agent: error: {inert(str(error))}", file=errors)
                        errors.flush()
                        return EXIT_FAILED
                    send_options = {}
            # @file, @folder/ as typed (not in a command's expansion): attached, as in the TUI
            attached = await anyio.to_thread.run_sync(mention_blocks, typed, session.cwd)
            content = [{"type": "text", "text": prompt}, *attached] if attached else prompt
            return content, send_options

        watch = runtime.storage
        assert watch is not None
        watch.on_failure(send_events.close)  # the loop below ends: no more events will come
        if channel is not None:
            return await _stream_turns(
                channel, prepare, root.found[0], receive_events, session=session,
                default_model=runtime.choice.ref, mode=mode, out=out, err=errors,
                failed=lambda: watch.message is not None, limit=limit, denied=denied,
                statuses=statuses,
                left_out=config.run.left_out(), blocked=blocked, modes=modes,
                storage=lambda: watch.message, partial=partial,
            )  # fmt: skip
        prepared = await prepare(prompt)
        if isinstance(prepared, int):
            return prepared
        content, send_options = prepared
        line = {"session": session.id, "cwd": str(session.cwd), "mode": _mode_now(modes)}
        turn = await follow_turn(
            content,
            root.found[0],
            receive_events,
            session_line=line,
            default_model=runtime.choice.ref,
            mode=mode,
            out=out,
            err=errors,
            verbose=verbose,
            failed=lambda: watch.message is not None,
            options=send_options,
            interrupt=interrupt,
            limit=limit,
            left_out=config.run.left_out(),
            partial=partial,
            views=presentation.latest,
        )
    if watch.message is not None:  # one line, and the exit code says what happened
        if turn.claude is not None:
            turn.claude.result("error_during_execution", turn.text, error=watch.message)
        print(f"coding-agent: error: {watch.message}", file=errors)
        errors.flush()
        return EXIT_STORAGE
    return report_turn(turn, blocked, mode=mode, out=out, err=errors, on_unanswered=on_unanswered)


async def _stream_turns(
    channel: ControlChannel,
    prepare: Callable[[str], Awaitable[tuple[str | list[dict[str, Any]], dict[str, Any]] | int]],
    conversation: ConversationServiceApi,
    events: Any,
    *,
    session: Session,
    default_model: str | None,
    mode: HeadlessMode,
    out: TextIO,
    err: TextIO,
    failed: Callable[[], bool],
    limit: TurnLimit | None,
    left_out: frozenset[str],
    blocked: list[dict[str, Any]],
    denied: list[dict[str, Any]],
    modes: list[Any],
    statuses: list[Any],
    storage: Callable[[], str | None],
    partial: bool,
) -> int:
    """The turns of a stream-json input (:mod:`coding_agent.cli.claude_control`): each user
    line the channel reads is sent (a string as ``-p``'s prompt is: a command expanded, mentions
    attached; blocks as they are) and followed to its end, and its ``result`` line written,
    until stdin closes. A line that cannot be sent gets an error ``result`` of its own, so the
    SDK waiting for one always hears it. No session line goes to ``err`` (``--verbose``, which
    the SDK always passes): each turn's ``init`` line names the session. Returns the last turn's exit code (a call blocked
    for want of approval is 0 here: its result lists it in ``permission_denials``)."""
    code = EXIT_OK
    running: list[Interrupt] = []  # the turn the channel's interrupt aborts

    def interrupt_turn() -> bool:
        if not running:
            return False
        stop = running[-1]
        stop.signal = stop.signal or "an interrupt request"
        stop.requested.set()
        return True

    async def set_mode(value: str) -> None:
        await modes[-1].set_mode(value, BACKGROUND)

    async def set_model(value: str | None) -> None:  # for the turns after it
        status = statuses[-1].state.value if statuses else None
        model = model_choice(value or default_model or "", status)
        await conversation.config_set({"model": model}, BACKGROUND)

    channel.on_interrupt = interrupt_turn
    channel.set_mode = set_mode if modes else None  # (the approval feature's service)
    channel.set_model = set_model
    channel.ready.set()
    cwd = str(session.cwd)
    async for message in channel.prompts():
        try:
            content: str | list[dict[str, Any]] = prompt_content(message)
            options: dict[str, Any] = {}
            if isinstance(content, str) and message.get("client_composed") is not True:
                # (the SDK's verbatim_prompts marks a prompt to be sent as written)
                prepared = await prepare(content)
                if isinstance(prepared, int):  # (its error line is on err)
                    code = prepared
                    raise UnsupportedContent("the prompt's command could not run (see stderr)")
                content, options = prepared
        except UnsupportedContent as error:
            claude = ClaudeOutput(out, stream=mode == "claude-stream-json",
                                  session_id=session.id, cwd=cwd)  # fmt: skip
            claude.result("error_during_execution", "", error=str(error))
            print(f"coding-agent: error: {inert(str(error))}", file=err)
            err.flush()
            code = code if code != EXIT_OK else EXIT_FAILED
            continue
        stop = Interrupt()
        running.append(stop)
        if limit is not None:
            limit.reset()
        blocked.clear()
        denied.clear()
        line = {"session": session.id, "cwd": cwd, "mode": _mode_now(modes)}
        try:
            turn = await follow_turn(
                content, conversation, events, session_line=line, default_model=default_model,
                mode=mode, out=out, err=err, verbose=False, failed=failed, options=options,
                interrupt=stop, limit=limit, left_out=left_out, partial=partial,
            )  # fmt: skip
        finally:
            running.clear()
        problem = storage()
        if problem is not None:  # one line, and the exit code says what happened
            if turn.claude is not None:
                turn.claude.result("error_during_execution", turn.text, error=problem)
            print(f"coding-agent: error: {problem}", file=err)
            err.flush()
            return EXIT_STORAGE
        code = report_turn(turn, list(blocked), mode=mode, out=out, err=err, denied=denied)
        if code == EXIT_BLOCKED:  # the result says it (permission_denials): not a failure
            code = EXIT_OK  # for the SDK, which reads an exit code but 0 as the run's crash
    return code


def _mode_now(modes: list[Any]) -> str | None:
    """The session's permission mode (the approval feature's ``approval.mode`` state), or
    ``None`` without the feature."""
    try:
        value = modes[-1].state.value if modes else None
    except Exception:  # not hydrated, gone: unknown
        return None
    mode = value.get("mode") if isinstance(value, dict) else None
    return mode if isinstance(mode, str) else None


def interrupted_reporter(
    mode: HeadlessMode, out: TextIO, err: TextIO, *, session: str = "", cwd: str = ""
) -> Callable[[str], None]:
    """The last line of a run a signal cancelled (:attr:`Interrupt.report`): ``--json``'s
    result line (``"status": "interrupted"``), Claude Code's result (an
    ``error_during_execution`` of ``session``), or ``-p``'s error line."""
    claude = ClaudeOutput(out, stream=False, session_id=session, cwd=cwd)

    def report(detail: str) -> None:
        try:
            if mode == "json":
                _json_line(out, _interrupted_result("", detail))
            elif mode in CLAUDE_MODES:
                claude.result("error_during_execution", "", error=detail)
                print(f"coding-agent: error: {inert(detail)}", file=err)
                err.flush()
            else:
                print(f"coding-agent: error: {inert(detail)}", file=err)
                err.flush()
        except (OSError, ValueError):  # stdout's reader left, a closed stream: nothing to say
            pass

    return report


def _interrupted_result(text: str, detail: str) -> dict[str, Any]:
    return {"type": "result", "ok": False, "status": "interrupted", "text": text,
            "error": detail}  # fmt: skip


class TurnOutcome:
    """How a headless turn ended: ``status`` (``done``, ``failed``…), its ``detail``, the
    answer's ``text``, the entries it added (pico3 records, by id) and the model that ran it."""

    def __init__(self) -> None:
        self.status = "failed"
        self.detail = ""
        self.text = ""
        self.entries: dict[int, ViewEntry] = {}
        self.model: str | None = None
        self.session: Any = None
        self.interrupted: str | None = None
        """Why the turn was aborted (``interrupted (SIGINT): ...``), when a signal aborted it."""
        self.claude: ClaudeOutput | None = None
        """The Claude Code lines of a ``claude-*`` mode's run."""
        self.answer: ViewEntry | None = None
        """The entry the turn ended with (``turn.ended``'s ``answer``), when it has one."""
        self.limited: int | None = None
        """``--max-turns``' value when it stopped the turn (the model still calling tools)."""


async def follow_turn(
    prompt: str | list[dict[str, Any]],
    conversation: ConversationServiceApi,
    events: Any,
    *,
    session_line: dict[str, Any],
    default_model: str | None,
    mode: HeadlessMode,
    out: TextIO,
    err: TextIO,
    verbose: bool,
    failed: Callable[[], bool] = lambda: False,
    latest: Callable[[], ConversationServiceApi] | None = None,
    options: Mapping[str, Any] | None = None,
    interrupt: Interrupt | None = None,
    limit: TurnLimit | None = None,
    left_out: frozenset[str] = frozenset(),
    partial: bool = False,
    views: Callable[[int], Any] | None = None,
    sender: Callable[[SendInputJson], Awaitable[int]] | None = None,
    max_turns: int | None = None,
) -> TurnOutcome:
    """Send ``prompt`` to ``conversation`` and read ``events`` (its view events, in order)
    until the turn holding it ends; ``--json`` lines go to ``out`` as they come. The same for a
    session in this process and one on a server (:mod:`coding_agent.cli.attach`);
    ``latest()`` is the conversation's facade now (a reconnect makes a new one). ``options``:
    more members of the send (a command's ``model`` and ``allow``). While the turn is followed
    ``interrupt`` is armed: its first signal aborts the turn (:func:`_abort_on_signal`).
    ``limit`` (``--max-turns``) counts this conversation's model calls; a call past it aborts
    the turn. ``session_line``: ``session``, ``cwd`` and the permission ``mode`` (or ``None``).
    ``left_out``: the tools ``--tools`` leaves out, not in Claude Code's ``init`` line.
    ``partial``: ``--include-partial-messages`` (the ``claude-stream-json`` answers streamed
    as ``stream_event`` lines too).

    ``views``: the newest view of a conversation by id (:meth:`BranchView.latest`), from which
    ``stream-json`` reads a subagent's messages. ``sender`` sends the input instead of
    ``conversation.send`` (a limited send through a worker's ``TurnLimitService``), and
    ``max_turns`` is its limit: the turn is reported as stopped by it when it ended with an
    answer still calling tools, or the worker aborted it past the limit
    (:mod:`coding_agent.worker.max_turns`)."""
    turn = TurnOutcome()
    model = _model_ref(conversation.view.value) or default_model
    session = turn.session = session_line.get("session")
    if verbose:
        print(f"coding-agent: session {session} ({model}, {session_line.get('cwd')})", file=err)
        err.flush()
    if mode == "json":
        first = {"type": "session", "session": session, "model": model,
                 "cwd": session_line.get("cwd")}  # fmt: skip
        _json_line(out, first)
    elif mode in CLAUDE_MODES:
        cwd = str(session_line.get("cwd") or "")
        claude = turn.claude = ClaudeOutput(
            out, stream=mode == "claude-stream-json", session_id=str(session), cwd=cwd,
            partial=partial,
            conversation_view=views,
        )  # fmt: skip
        config = conversation.view.value.get("config")
        tools = config.get("selectedTools") if isinstance(config, dict) else None
        claude.init(
            model=model,
            tools=[str(t) for t in tools if t not in left_out] if isinstance(tools, list) else [],  # pyright: ignore[reportUnknownVariableType]
            permission_mode=session_line.get("mode"),
        )
    if limit is not None:  # this conversation's model calls are counted from here
        limit.conversation = conversation.view.value["conversation"]["id"]
    decoder = ViewDecoder()  # the view and the entries of events, decoded once
    start = decoder.decode(conversation.view.value)
    before = max((entry.id for entry in start.entries), default=-1) if start else -1
    sent = anyio.Event()
    current = latest if latest is not None else lambda: conversation
    ended = False
    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        if interrupt is not None:
            interrupt.armed = True
            group.start_soon(_abort_on_signal, interrupt, sent, current, turn, group.cancel_scope)
        if limit is not None:
            group.start_soon(_abort_past_limit, limit, sent, current)
        try:
            try:
                send = cast(SendInputJson, {**(options or {}), "content": prompt})
                if sender is not None:
                    input_id = await sender(send)
                else:
                    input_id = await conversation.send(send, BACKGROUND)
            except Exception:
                if not failed():
                    raise
                input_id = -1
            sent.set()
            ended = await _read_turn(events, decoder, input_id, before, turn, mode, out)
        except Exception as error:  # raised below as itself, not in a task group's group
            failure = error
        finally:
            if interrupt is not None:
                interrupt.armed = False
        group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    if limit is not None and limit.stopped and ended:
        turn.limited = limit.limit
    if max_turns is not None and ended and _stopped_by_limit(turn, max_turns):
        turn.limited = max_turns
    if interrupt is not None and interrupt.requested.is_set():
        said = interrupt.describe()
        if ended and turn.status == "done":
            turn.interrupted = None  # it ended before the abort could: reported as it ended
        elif ended:
            turn.interrupted = f"{said}: the turn was aborted"
        elif turn.interrupted is None:
            turn.interrupted = f"{said}: the abort was not confirmed within {ABORT_WAIT:g} s"
    # After a reconnect (another worker, another server) the conversation is a new facade.
    asked = (options or {}).get("model")  # a command's own model ran this turn
    turn.model = (
        _model_ref({"config": {"model": asked}}) or _model_ref(current().view.value) or model
    )
    return turn


def _stopped_by_limit(turn: TurnOutcome, max_turns: int) -> bool:
    """Whether a worker's ``--max-turns`` (:mod:`coding_agent.worker.max_turns`) ended the
    turn: done with an answer still calling tools (its tools ran, then the turn ended), or
    aborted by the limit at a call past it."""
    if turn.detail.startswith(f"stopped by --max-turns {max_turns}"):
        return True
    answer = turn.answer
    return (
        turn.status == "done"
        and isinstance(answer, AssistantEntry)
        and answer.message is not None
        and any(isinstance(block, ToolCall) for block in answer.message.content)
    )


async def _abort_past_limit(
    limit: TurnLimit, sent: anyio.Event, current: Callable[[], ConversationServiceApi]
) -> None:
    """Abort the turn at a model call past ``--max-turns`` (the limit's calls were all
    blocked, so none of its tools ended the turn; the late call's tools are blocked)."""
    await limit.over.wait()
    await sent.wait()
    try:
        await current().abort(BACKGROUND)
    except Exception:  # the connection dropped, the session closed: the turn ends anyway
        pass


async def _abort_on_signal(
    interrupt: Interrupt,
    sent: anyio.Event,
    current: Callable[[], ConversationServiceApi],
    turn: TurnOutcome,
    reading: anyio.CancelScope,
) -> None:
    """At ``interrupt``'s first signal, abort the conversation's turn (the TUI's Esc: a durable
    mark), then let the turn's events be read until it ends (the reader cancels this task),
    for at most :data:`ABORT_WAIT` seconds; past them stop ``reading``."""
    await interrupt.requested.wait()
    with anyio.move_on_after(ABORT_WAIT):
        await sent.wait()
        try:
            await current().abort(BACKGROUND)
        except Exception as error:  # the connection dropped, the session closed
            turn.interrupted = f"{interrupt.describe()}: the turn could not be aborted: {error}"
        await anyio.sleep_forever()  # the reader sees the turn end and cancels this task
    reading.cancel()


async def _read_turn(
    events: Any,
    decoder: ViewDecoder,
    input_id: int,
    before: int,
    turn: TurnOutcome,
    mode: HeadlessMode,
    out: TextIO,
) -> bool:
    """Read ``events`` until the turn of ``input_id`` ended (``--json`` lines to ``out``);
    whether it did (``False``: the events ended first)."""
    async for event in events:
        if event.get("type") == REHYDRATED:
            # Entries committed while the connection was down came with no event: report each
            # once, from the rehydrated view, so a --json reader misses none of the turn's.
            view = decoder.decode(event["view"])
            if view is None:
                continue
            # (view.entries are the records of the JSON entries, one for one)
            for raw, entry in zip(view.json.get("entries", ()), view.entries, strict=True):
                if entry.id > before and entry.id not in turn.entries:
                    turn.entries[entry.id] = entry
                    if turn.claude is not None:
                        turn.claude.entry(entry)
                    if mode == "json":
                        _json_line(out, {"type": "entry.added", "entry": raw})
            if input_id >= 0 and _ended_meanwhile(view, input_id, turn):
                return True
            continue
        if event.get("type") == PARTIAL:
            if turn.claude is not None:
                turn.claude.partial(event["message"])
            continue
        if event.get("type") == "entry.added" and event["entry"]["id"] in turn.entries:
            continue  # already reported from a rehydrated view
        if mode == "json":
            _json_line(out, event)
        if event.get("type") == "entry.added":
            entry = decoder.entry(event["entry"])
            turn.entries[entry.id] = entry
            if turn.claude is not None:
                turn.claude.entry(entry)
        if event.get("type") == "turn.ended" and input_id in event.get("inputs", []):
            turn.status = str(event.get("status"))
            turn.detail = str(event.get("detail") or event.get("reason") or "")
            turn.answer = turn.entries.get(event.get("answer", -1))
            turn.text = answer_text(turn.answer)
            return True
    return False


def _json_line(out: TextIO, value: Any) -> None:
    """Write one compact ``--json`` line and flush it (a reader acts on each as it comes)."""
    out.write(json.dumps(value, separators=(",", ":")) + "\n")
    out.flush()


def _ended_meanwhile(view: View | dict[str, Any], input_id: int, turn: TurnOutcome) -> bool:
    """Whether the turn of ``input_id`` ended while events were missed (``view`` no longer has
    it live or queued); then ``turn`` is filled from the view (its newest answer)."""
    if not isinstance(view, View):
        view = view_from_json(view)
    if view.turn is not None and input_id in view.turn.inputs:
        return False
    if any(item.id == input_id for item in view.inbox):
        return False
    for entry in view.entries:
        turn.entries.setdefault(entry.id, entry)
    answer = next((e for e in reversed(view.entries) if isinstance(e, AssistantEntry)), None)
    failed = answer is None or answer.data.reason == "error"
    turn.status = "failed" if failed else "done"
    turn.detail = "the turn ended while the connection was down" if failed else ""
    turn.answer = answer
    turn.text = answer_text(answer)
    return True


def report_turn(
    turn: TurnOutcome,
    blocked: list[dict[str, Any]],
    *,
    mode: HeadlessMode,
    out: TextIO,
    err: TextIO,
    on_unanswered: Callable[[], None] | None = None,
    denied: Sequence[Mapping[str, Any]] = (),
) -> int:
    """Write the outcome (the answer, the ``--json`` result line or Claude Code's result; the
    error lines) and return the exit code. ``denied``: the calls the Agent SDK's
    ``can_use_tool`` refused (``{"name", "args"}``), in Claude Code's ``permission_denials``
    with those refused for want of approval."""
    errors = err
    again = f" (continue the session: coding-agent --resume {turn.session})"
    if turn.interrupted is not None:  # aborted: no answer, and the session is kept
        if mode == "json":
            _json_line(out, _interrupted_result(turn.text, turn.interrupted))
        else:
            if turn.claude is not None:
                turn.claude.result("error_during_execution", turn.text, error=turn.interrupted)
            print(f"coding-agent: error: {inert(turn.interrupted)}{again}", file=errors)
        errors.flush()
        return EXIT_INTERRUPTED
    status, detail, text, entries, model = (
        turn.status, turn.detail, turn.text, turn.entries, turn.model
    )  # fmt: skip
    unapproved = unapproved_calls(entries)
    ok = status == "done" and turn.limited is None
    code = EXIT_OK if ok else EXIT_FAILED
    answered = any(
        isinstance(entry, ToolResultEntry)
        or (isinstance(entry, AssistantEntry) and entry.data.reason != "error")
        for entry in entries.values()
    )
    if not ok and not answered and on_unanswered is not None:
        on_unanswered()
    failure: str | None = None  # the error line's text (and Claude Code's result's)
    if turn.limited is not None:
        failure = (
            f"the run reached --max-turns {turn.limited} with the model still calling tools{again}"
        )
    elif not ok and status == "unanswered" and detail.startswith("stopped by "):
        # a hook stopped it (a PermissionRequest deny with interrupt): not the model's failure
        failure = f"the turn was {detail}{again}"
    elif not ok:
        failure = f"the turn ended {status} (model {model})" + (f": {detail}" if detail else "")
    if mode == "json":
        result: dict[str, Any] = {"type": "result", "ok": ok, "status": status, "text": text}
        if not ok:  # (--max-turns': the turn ended done, the run did not)
            result["error"] = failure if turn.limited is not None else detail
        if blocked or unapproved:
            result["blocked"] = [_describe(request) for request in [*blocked, *unapproved]]
        _json_line(out, result)
    elif turn.claude is not None:
        subtype: Subtype = "success" if ok else "error_during_execution"
        if turn.limited is not None:
            subtype = "error_max_turns"
        refused = [*blocked, *unapproved, *denied]
        turn.claude.result(subtype, text, error=failure, refused=refused)
    elif ok or text:
        text = inert(text) if _is_terminal(out) else text  # a pipe or a file gets exact bytes
        out.write(text if text.endswith("\n") else text + "\n")
    out.flush()
    for request in blocked:  # a dialog nobody here answers
        name = str(request.get("name") or "tool")
        line = (
            f"{_needs(request)}, and -p/--json asks nobody; allow it with {_remedy(name, request)}"
        )
        print(
            f"coding-agent: error: blocked the {_describe(request, ' call')}: {line}", file=errors
        )
    for request in unapproved:  # no approval package: the reason names it and the fix
        print(
            f"coding-agent: error: blocked the {_describe(request, ' call')}: {request['reason']}",
            file=errors,
        )
    if failure is not None:
        print(f"coding-agent: error: {inert(failure)}", file=errors)
    elif blocked or unapproved:
        code = EXIT_BLOCKED
    errors.flush()
    return code


def unapproved_calls(entries: dict[int, ViewEntry]) -> list[dict[str, Any]]:
    """The calls the harness blocked because no approval package serves the session
    (docs/design/harness.md#approval-gate: a tool result with the diagnostic code
    ``unapproved``), as ``{name, args, reason}``, in order. No flag allows them: the reason
    names the missing package and the command that restores it."""
    calls: dict[str, ToolCall] = {}
    found: list[dict[str, Any]] = []
    for entry in (entries[key] for key in sorted(entries)):
        for message in entry.messages:
            if not isinstance(message.content, str):
                for block in message.content:
                    if isinstance(block, ToolCall):
                        calls[block.id] = block
        if not isinstance(entry, ToolResultEntry) or entry.message is None:
            continue
        reason = entry.diagnostic("unapproved")
        if reason is None:
            continue
        message = entry.message
        call = calls.get(message.tool_call_id)
        found.append(
            {
                "name": message.tool_name or (call.name if call is not None else None),
                "args": call.arguments if call is not None else None,
                "reason": reason.removeprefix("Tool call blocked: "),
            }
        )
    return found


def _config(
    session: Session,
    model: str | None,
    faux_script: str | os.PathLike[str] | None,
    facets_dirs: Sequence[str | os.PathLike[str]],
    permission_mode: str | None = None,
) -> WorkerConfig:
    return session_worker_config(
        session,
        model=model,
        faux_script=faux_script,
        facets_dirs=list(facets_dirs) or None,
        permission_mode=permission_mode,
    )


async def run_print(
    prompt: str,
    session: Session,
    *,
    out: TextIO,
    model: str | None = None,
    approve: Literal["allow", "deny"] = "deny",
    faux_script: str | os.PathLike[str] | None = None,
    facets_dirs: Sequence[str | os.PathLike[str]] = (),
    permission_mode: str | None = None,
    err: TextIO | None = None,
) -> int:
    """``coding-agent -p PROMPT``: run one turn in ``session`` and print the final answer."""
    config = _config(session, model, faux_script, facets_dirs, permission_mode)
    return await run_headless(prompt, config, mode="print", out=out, approve=approve, err=err)


async def run_json(
    prompt: str,
    session: Session,
    *,
    out: TextIO,
    model: str | None = None,
    approve: Literal["allow", "deny"] = "deny",
    faux_script: str | os.PathLike[str] | None = None,
    facets_dirs: Sequence[str | os.PathLike[str]] = (),
    permission_mode: str | None = None,
    err: TextIO | None = None,
) -> int:
    """``coding-agent --json PROMPT``: run one turn and stream its view events as JSON lines."""
    config = _config(session, model, faux_script, facets_dirs, permission_mode)
    return await run_headless(prompt, config, mode="json", out=out, approve=approve, err=err)
