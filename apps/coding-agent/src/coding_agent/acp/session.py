"""One ACP session: a durable session's facets in this process, shown to the editor.

:class:`AcpSession` opens the session's host (:func:`~coding_agent.worker.main.open_session_host`,
as ``-p`` does) with a few presentation facets of its own:

* one follows the view of the branch the session is on (:mod:`coding_agent.following`) and
  turns every revision into ``session/update``
  notifications (:mod:`.translate`), and ends a prompt when the turn holding its input ends;
* one answers the approval and question dialogs through ``session/request_permission``: an
  approval offers *Allow*, *Always allow* (when the dialog offers a narrow rule: kept for the
  session) and *Reject*; a question offers its options, and *Skip* (a cancelled question);
  an editor that cancels the request denies the call;
* one follows the MCP servers: the session is ready (``session/new`` answers) once each server,
  configured or the editor's, is ready or failed, at most their ``startup_timeout``, as ``-p``;
* with an editor that offers ``terminal``, a ``bash`` call's output is shown live in an editor
  terminal embedded in the call (:mod:`.terminal`; the command still runs here);
* one holds the permission mode (the approval feature's ``approval.mode``, by id) and the
  worker's status (the models on offer), so ``session/set_mode`` and the model option work and
  a mode changed by the session itself is reported.

Everything the editor sees comes from committed state: after ``session/load`` of a session whose
process died mid-turn, the harness resumes the turn and the editor sees it finish.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from acp.interfaces import Client
from acp.schema import (
    AllowedOutcome,
    CurrentModeUpdate,
    PermissionOption,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    ToolCallProgress,
    ToolCallUpdate,
)
from anyio.streams.memory import MemoryObjectReceiveStream

from chord import (
    BACKGROUND,
    Context,
    Delivery,
    Facet,
    FacetEnvironment,
    RemoteServiceError,
    define_facet,
)
from coding_agent.acp.errors import failed, invalid
from coding_agent.acp.terminal import Terminals
from coding_agent.acp.translate import (
    MessageStream,
    Update,
    replay,
    tool_call_result,
    tool_call_running,
    tool_call_start,
    tool_kind,
)
from coding_agent.acp.turns import CALLS_KEPT, Recent, TurnWaits
from coding_agent.contracts import (
    APPROVAL_DIALOGS,
    APPROVAL_MODE,
    QUESTION_DIALOGS,
    WorkerStatusService,
    session_choice,
    session_rules_offered,
)
from coding_agent.settings.permission_modes import MODE_SUMMARIES, PERMISSION_MODES
from coding_agent.worker.main import WorkerConfig, load_features, open_session_host
from coding_agent.worker.mcp_watch import McpWatch
from coding_agent.worker.root_view import BranchView
from coding_agent.worker.status import model_choice
from pico3 import ConversationServiceApi

__all__ = ["AcpSession", "StopReason"]


StopReason = str
"""``end_turn``, ``cancelled``, ``max_tokens`` or ``refusal``."""

_Revision = tuple[Any, str]
"""A view value and ``"hydrate"`` or ``"update"``, or an update to send as it is (``"send"``)."""


class AcpSession:
    """One session served to an editor (module docstring). :meth:`run` keeps it open until
    :meth:`close`; :meth:`prompt` runs one turn."""

    def __init__(
        self,
        acp_id: str,
        config: WorkerConfig,
        client: Client,
        *,
        services: Mapping[str, Any] | None = None,
        terminal: bool = False,
    ) -> None:
        self.id = acp_id
        self._services = dict(services or {})
        self._terminal = terminal
        self._terminals: Terminals | None = None
        self.config = config
        self.cwd = Path(config.session.cwd)
        self._client = client
        self._ready = anyio.Event()
        self._closed = anyio.Event()
        self._failure: BaseException | None = None
        self._conversation: ConversationServiceApi | None = None
        self._mode: Any = None
        self._status: Any = None
        self._stream = MessageStream()
        self._calls: Recent[str, dict[str, Any]] = Recent(CALLS_KEPT)
        self._turns = TurnWaits()
        self._sending, self._revisions = anyio.create_memory_object_stream[_Revision](math.inf)

    # -- lifetime -------------------------------------------------------------------------------
    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Open the session's host, report ready (``task_status``), serve until closed."""
        generations = load_features(self.config)
        features = {generation.package.name for generation in generations}
        follow = self._follow()
        follow.select(self.config.session.current_branch())  # corrected once open (see -p)
        facets = [follow.facet(), self._dialogs(features), self._status_facet()]
        if "facets-approval" in features:  # its mode service is a singleton: use it only then
            facets.append(self._mode_facet())
        mcp = McpWatch() if "facets-mcp" in features else None
        if mcp is not None:
            facets.append(mcp.facet())
        try:
            async with (
                self._sending,
                open_session_host(
                    self.config,
                    extra_facets=facets,
                    generations=generations,
                    extra_services=self._services,
                ) as runtime,
                anyio.create_task_group() as group,
            ):
                follow.select(runtime.status.branch)  # the branch the session is on
                if self._terminal:
                    self._terminals = Terminals(self._client, self.id, self.cwd, group.start_soon)
                group.start_soon(self._pump)
                with anyio.fail_after(60):
                    await self._ready.wait()
                if mcp is not None:  # the first prompt offers the MCP servers' tools, as -p's
                    await mcp.settled(sys.stderr)
                task_status.started()
                await self._closed.wait()
                group.cancel_scope.cancel()
        except BaseException as error:
            self._failure = error
            raise
        finally:
            if self._terminals is not None:
                self._terminals.close()

    def close(self) -> None:
        """Stop serving (the host closes; the session stays on disk)."""
        self._closed.set()

    # -- what the editor asks -------------------------------------------------------------------
    async def replay_transcript(self) -> None:
        """Send the stored transcript as updates (``session/load``)."""
        conversation = self._need_conversation()
        entries = conversation.view.value.get("entries") or []
        for update in replay([e for e in entries if isinstance(e, dict)], self.cwd):
            await self._send(update)

    async def prompt(self, content: list[dict[str, Any]]) -> StopReason:
        """Send ``content`` as the user's message and wait for the turn holding it to end."""
        conversation = self._need_conversation()
        input_id = await conversation.send({"content": content}, BACKGROUND)
        outcome = await self._turns.wait(input_id)
        if outcome == "done":
            return "end_turn"
        _status, reason, detail = outcome.split(":", 2)
        if reason == "aborted":
            return "cancelled"
        raise failed(f"the turn ended without an answer: {detail or reason or 'unknown'}")

    async def cancel(self) -> None:
        """Abort the running turn (``session/cancel``)."""
        await self._need_conversation().abort(BACKGROUND)

    def modes(self) -> SessionModeState:
        """The permission modes as ACP session modes, and the current one (a mode the session
        disables, ``auto`` under Claude Code's ``disableBypassPermissionsMode``, is not
        offered)."""
        current = "ask"
        disabled: object = None
        if self._mode is not None:
            value = self._mode.state.value
            current = str(value.get("mode") or "ask") if isinstance(value, dict) else "ask"
            disabled = value.get("disabled") if isinstance(value, dict) else None
        return SessionModeState(
            current_mode_id=current,
            available_modes=[
                SessionMode(
                    id=mode, name=MODE_SUMMARIES[mode][0], description=MODE_SUMMARIES[mode][1]
                )
                for mode in PERMISSION_MODES
                if not (isinstance(disabled, dict) and mode in disabled)
            ],
        )

    async def set_mode(self, mode: str) -> None:
        """``session/set_mode``: the permission mode."""
        if mode not in PERMISSION_MODES:
            raise invalid(f"unknown mode {mode!r} (modes: {', '.join(PERMISSION_MODES)})")
        if self._mode is None:
            raise failed("no approval package serves this session: the mode cannot change")
        try:
            await self._mode.set_mode(mode, BACKGROUND)
        except RemoteServiceError as error:  # a disabled mode: the session says why
            raise invalid(error.message) from None

    def model_option(self) -> SessionConfigOptionSelect:
        """The model as a session config option: the current one and those on offer."""
        view = self._need_conversation().view.value
        config = view.get("config") if isinstance(view, dict) else None
        model = config.get("model") if isinstance(config, dict) else None
        current = (
            f"{model['provider']}/{model['modelId']}"
            if isinstance(model, dict) and model.get("provider")
            else ""
        )
        offered: list[str] = []
        status = self._status.state.value if self._status is not None else None
        for item in (status or {}).get("models") or ():
            if isinstance(item, dict) and item.get("provider") and item.get("id"):
                offered.append(f"{item['provider']}/{item['id']}")
        if current and current not in offered:
            offered.insert(0, current)
        return SessionConfigOptionSelect(
            type="select",
            id="model",
            name="Model",
            category="model",
            current_value=current,
            options=[SessionConfigSelectOption(value=ref, name=ref) for ref in offered],
        )

    async def set_model(self, ref: str) -> None:
        """Switch the conversation's model to ``provider/id``."""
        status = self._status.state.value if self._status is not None else None
        try:
            model = model_choice(ref, status)
        except ValueError as error:
            raise invalid(str(error)) from None
        await self._need_conversation().config_set({"model": model}, BACKGROUND)

    # -- the view, followed ---------------------------------------------------------------------
    def _need_conversation(self) -> ConversationServiceApi:
        if self._conversation is None:
            raise failed("the session is not open")
        return self._conversation

    def _follow(self) -> BranchView:
        def revision(instance: ConversationServiceApi, value: Any, kind: str, chosen: bool) -> None:
            if chosen:
                self._conversation = instance
                self._ready.set()
            try:
                self._sending.send_nowait((value, kind))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass

        return BranchView("coding-agent/acp-follow", revision)

    async def _pump(self) -> None:
        receive: MemoryObjectReceiveStream[_Revision] = self._revisions
        async with receive:
            async for value, kind in receive:
                if kind == "send":
                    await self._send(value)
                    continue
                if kind == "hydrate":
                    self._stream.reset()
                    self._check_turns(value)
                    continue
                for update in self._revision_updates(value):
                    if self._terminals is not None and isinstance(update, ToolCallProgress):
                        update = await self._terminals.dress(update)
                    await self._send(update)

    def _revision_updates(self, value: Any) -> list[Update]:
        updates: list[Update] = []
        stored_answer = False
        for event in value.get("commit", {}).get("events") or ():
            kind = event.get("type")
            if kind == "entry.added":
                entry = event["entry"]
                for message in entry.get("model") or ():
                    if not isinstance(message, dict):
                        continue
                    if entry.get("kind") == "pi.assistant" and message.get("role") == "assistant":
                        stored_answer = True
                        for block in message.get("content") or ():
                            if isinstance(block, dict) and block.get("type") == "toolCall":
                                self._calls[str(block.get("id"))] = block
                                if self._terminals is not None:
                                    self._terminals.called(block)
                        updates.extend(self._stream.stored(message, self.cwd))
                    elif (
                        entry.get("kind") == "pi.tool_result"
                        and message.get("role") == "toolResult"
                    ):
                        call = self._calls.pop(str(message.get("toolCallId")), None)
                        if self._terminals is not None:
                            self._terminals.ended(str(message.get("toolCallId")), message)
                        updates.append(tool_call_result(message, call, self.cwd))
            elif kind == "tool.started":
                updates.append(tool_call_running(str(event.get("callId"))))
            elif kind == "turn.ended":
                outcome = str(event.get("status"))
                if outcome != "done":  # unanswered: aborted, failed, stale; with the detail
                    why = event.get("reason") or ""
                    outcome = f"{outcome}:{why}:{event.get('detail') or why}"
                for input_id in event.get("inputs") or ():
                    self._turns.ended(int(input_id), outcome)
        turn = value.get("turn")
        if self._terminals is not None:
            self._terminals.live(turn)
        live = turn.get("message") if isinstance(turn, dict) else None
        if isinstance(live, dict):
            updates.extend(self._stream.live(live))
        elif not stored_answer:
            self._stream.reset()  # a dropped live message (a retry, an abort)
        return updates

    def _check_turns(self, value: Any) -> None:
        """After a hydrate (events may have been missed): a waited input no longer live or
        queued has ended."""
        turn = value.get("turn")
        live = set(turn.get("inputs") or ()) if isinstance(turn, dict) else set()
        queued = {item.get("id") for item in value.get("inbox") or () if isinstance(item, dict)}
        for input_id in self._turns.waiting():
            if input_id not in live and input_id not in queued:
                self._turns.ended(input_id, "done")

    async def _send(self, update: Any) -> None:
        await self._client.session_update(session_id=self.id, update=update)

    # -- dialogs --------------------------------------------------------------------------------
    def _dialogs(self, features: set[str]) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            async def approval(dialog: Any, ctx: Context) -> None:
                request = dialog.request.value
                if not isinstance(request, dict):
                    return
                options = [PermissionOption(option_id="allow", name="Allow", kind="allow_once")]
                # the standing choice: one rule, or a compound command's rules, kept together
                offered = session_rules_offered(request)
                if offered:
                    options.append(
                        PermissionOption(
                            option_id="always",
                            name=f"Always allow {' and '.join(map(str, offered))} in this session",
                            kind="allow_always",
                        )
                    )
                options.append(
                    PermissionOption(option_id="deny", name="Reject", kind="reject_once")
                )
                call = {
                    "id": request.get("callId"),
                    "name": request.get("name"),
                    "arguments": request.get("args"),
                }
                start = tool_call_start(call, self.cwd)
                title = start.title + (f" ({request['reason']})" if request.get("reason") else "")
                chosen = await self._ask(start, title, options)
                if chosen == "always":
                    answer = session_choice(request, "editor")
                elif chosen == "allow":
                    answer = {"decision": "allow", "by": "editor"}
                else:
                    answer = {"decision": "deny", "by": "editor"}
                await dialog.decide(answer, ctx)

            async def question(dialog: Any, ctx: Context) -> None:
                request = dialog.request.value
                if not isinstance(request, dict):
                    return
                offered = [str(o) for o in request.get("options") or ()]
                options = [
                    PermissionOption(option_id=f"option-{index}", name=label, kind="allow_once")
                    for index, label in enumerate(offered)
                ]
                options.append(
                    PermissionOption(option_id="skip", name="Skip the question", kind="reject_once")
                )
                call = {
                    "id": request.get("callId"),
                    "name": "question",
                    "arguments": {"question": request.get("question")},
                }
                start = tool_call_start(call, self.cwd)
                chosen = await self._ask(
                    start, str(request.get("question") or "A question"), options
                )
                if chosen is not None and chosen.startswith("option-"):
                    answer = offered[int(chosen.removeprefix("option-"))]
                    await dialog.submit(
                        {"outcome": "answered", "answer": answer, "by": "editor"}, ctx
                    )
                else:
                    await dialog.submit({"outcome": "cancelled", "by": "editor"}, ctx)

            if "facets-approval" in features:
                env.observe(APPROVAL_DIALOGS, approval)
            if "facets-question" in features:
                env.observe(QUESTION_DIALOGS, question)

        return define_facet("coding-agent/acp-dialogs", setup)

    async def _ask(self, start: Any, title: str, options: Sequence[PermissionOption]) -> str | None:
        """``session/request_permission``; the option chosen, or ``None`` when cancelled."""
        tool_call = ToolCallUpdate(
            tool_call_id=start.tool_call_id,
            title=title,
            kind=tool_kind(start.title.split(" ", 1)[0]),
            raw_input=start.raw_input,
            locations=start.locations,
        )
        response = await self._client.request_permission(
            session_id=self.id, tool_call=tool_call, options=list(options)
        )
        outcome = response.outcome
        return outcome.option_id if isinstance(outcome, AllowedOutcome) else None

    def _status_facet(self) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            status = env.use(WorkerStatusService)

            def activate() -> None:
                self._status = status

            env.on_activate(activate)

        return define_facet("coding-agent/acp-status", setup)

    def _mode_facet(self) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            mode = env.use(APPROVAL_MODE)
            reported: list[str] = []

            def changed(value: Any, _ctx: Context, delivery: Delivery) -> None:
                current = value.get("mode") if isinstance(value, dict) else None
                if not isinstance(current, str):
                    return
                if reported and reported[-1] != current:
                    update = CurrentModeUpdate(
                        session_update="current_mode_update", current_mode_id=current
                    )
                    try:
                        self._sending.send_nowait((update, "send"))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        pass  # the session is closing: nobody to tell
                reported.append(current)

            def activate() -> None:
                self._mode = mode
                env.own(mode.state.subscribe(changed))

            def deactivate() -> None:
                self._mode = None

            env.on_activate(activate)
            env.own(deactivate)

        return define_facet("coding-agent/acp-mode", setup)
