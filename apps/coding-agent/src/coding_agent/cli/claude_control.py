"""Claude Code's ``--input-format stream-json`` and its control protocol: what the Claude Agent
SDK speaks to the CLI it drives (``ClaudeAgentOptions(cli_path=...)`` pointing at
``coding-agent``).

The SDK starts the CLI with ``--output-format stream-json --input-format stream-json`` and keeps
its stdin open. Every line on stdin is one JSON object:

* ``{"type": "user", "message": {"role": "user", "content": ...}}``: a prompt (``content`` a
  string, or Anthropic content blocks: ``text``, and ``image`` with a base64 ``source``). The
  prompts are run one after another in the same session; each turn writes the stream-json lines
  of :mod:`coding_agent.cli.claude_output` (``system``/``init`` first, the ``result`` last).
  The session stays open until stdin closes.
* ``{"type": "control_request", "request_id", "request": {"subtype", ...}}``: answered at once,
  even while a turn runs, by a ``{"type": "control_response", "response": {"subtype":
  "success", "request_id", "response": {...}}}`` line (or ``"subtype": "error"`` with
  ``error`` text). The subtypes served (:meth:`ControlChannel.handle`): ``initialize`` (the
  SDK's handshake), ``interrupt`` (the running turn is aborted as Ctrl+C aborts a ``-p`` run:
  durably, its result an ``error_during_execution``), ``set_permission_mode`` (Claude Code's
  ``default``, ``acceptEdits`` and ``plan``, the modes that mean the same here), ``set_model``
  (this agent's ``provider/id``, one the session's providers serve; ``null``: the model the run
  started with) for the turns after it. Any other subtype, and hooks or agents registered
  through ``initialize`` (SDK callbacks this CLI does not call), get an error naming what is
  not served and what to do instead: never a hang.
* ``{"type": "control_response", ...}``: the SDK's answer to a request of ours. With
  ``--permission-prompt-tool stdio`` every approval the session would ask the user for is a
  ``can_use_tool`` request instead (:meth:`ControlChannel.can_use_tool`: Claude Code's tool name
  and input, the call's ``tool_use_id``), and the SDK's ``can_use_tool`` callback decides it:
  ``allow`` runs the call, ``deny`` refuses it (the model reads the SDK's ``message``; with
  ``interrupt`` the turn is aborted too). An answer that changes the input (``updatedInput``),
  an error answer, or stdin closing first refuses the call: nothing runs unapproved. A turn
  aborted while the SDK decides sends it a ``control_cancel_request`` for that request.

  **"Always allow".** The request's ``permission_suggestions`` are the approval dialog's own
  standing choice for this session (the narrow rules facets-approval offers: ``npm test:*``,
  one per command of a compound line, an edit's path; never all of bash), as Claude Code's
  ``PermissionUpdate``: one ``{"type": "addRules", "rules": [{"toolName", "ruleContent"}],
  "behavior": "allow", "destination": "session"}`` (:func:`permission_suggestions`). An allow
  whose ``updatedPermissions`` is that suggestion keeps its rules for this session, as the
  dialog's session choice does, so the matching calls after it run without a request. Any
  other update refuses the call, and a ``coding-agent: error:`` line on stderr and the
  refusal the model reads say why (:func:`kept_rules`): a ``destination`` that is a settings
  file (an SDK app does not write them here), another ``type`` (``setMode``,
  ``replaceRules``, ``removeRules``, ``addDirectories``…), a ``deny`` or ``ask`` behavior, a
  rule that was not suggested (an SDK app cannot widen an approval beyond the offered narrow
  rules), or a part of a compound line's rules.

Lines that are not JSON objects, or of another type, are reported on stderr (one
``coding-agent: warning:`` line each) and skipped.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TextIO, cast

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from chord import inert

__all__ = [
    "CONTROL_SUBTYPES",
    "ControlChannel",
    "Permission",
    "UnsupportedContent",
    "UnsupportedUpdate",
    "kept_rules",
    "permission_suggestions",
    "prompt_content",
    "rule_value",
]

CONTROL_SUBTYPES = ("initialize", "interrupt", "set_permission_mode", "set_model")
"""The ``control_request`` subtypes this CLI serves; any other gets an error response."""

_SDK_MODES = {"default": "ask", "acceptEdits": "accept-edits", "plan": "plan"}
"""Claude Code's permission modes ``set_permission_mode`` takes: those that mean the same here
(``bypassPermissions`` is ``--permission-mode auto``, given when the run starts, where the
settings that forbid it are checked)."""


_INSTEAD = {
    "mcp_message": "SDK MCP servers are not served; give the server as a command "
    "(ClaudeAgentOptions.mcp_servers with command/args, --mcp-config)",
}
"""What to do instead of a control request that is not served, where there is something."""


class UnsupportedContent(ValueError):
    """A user message holds a content block this CLI cannot send to the model."""


def prompt_content(message: Mapping[str, Any]) -> str | list[dict[str, Any]]:
    """The content of a stream-json ``user`` line as :meth:`send` takes it: a string as it is,
    Anthropic blocks as this agent's (``text``; ``image`` with a base64 ``source`` becomes
    ``{"type": "image", "data", "mimeType"}``). Raises :class:`UnsupportedContent` naming a block
    of another kind (``document``, ``tool_result``…) or a message without content."""
    inner = message.get("message")
    content: Any = inner.get("content") if isinstance(inner, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if isinstance(content, str):
        if not content.strip():
            raise UnsupportedContent("the user message's content is empty")
        return content
    if not isinstance(content, list) or not content:
        raise UnsupportedContent(
            'a user line needs {"message": {"role": "user", "content": TEXT or [blocks]}}'
        )
    blocks: list[dict[str, Any]] = []
    for block in cast(list[Any], content):
        kind = block.get("type") if isinstance(block, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if kind == "text" and isinstance(block.get("text"), str):  # pyright: ignore[reportUnknownMemberType]
            blocks.append({"type": "text", "text": block["text"]})
            continue
        source: Any = block.get("source") if kind == "image" else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(source, dict) and source.get("type") == "base64":  # pyright: ignore[reportUnknownMemberType]
            data, media = source.get("data"), source.get("media_type")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if isinstance(data, str) and isinstance(media, str):
                blocks.append({"type": "image", "data": data, "mimeType": media})
                continue
        raise UnsupportedContent(
            f"a {kind or 'malformed'} content block is not supported here: send text blocks "
            "and base64 image blocks"
        )
    return blocks


def rule_value(rule: str) -> dict[str, str]:
    """Claude Code's ``PermissionRuleValue`` of one of our permission rules (the same grammar:
    the tool's name, then what it matches in parentheses): ``Bash(npm test:*)`` →
    ``{"toolName": "Bash", "ruleContent": "npm test:*"}``, ``mcp__github__get_issue`` →
    ``{"toolName": "mcp__github__get_issue"}``."""
    name, bracket, content = rule.partition("(")
    if bracket and content.endswith(")"):
        return {"toolName": name.strip(), "ruleContent": content[:-1]}
    return {"toolName": rule.strip()}


def permission_suggestions(offered: Sequence[str]) -> list[dict[str, Any]] | None:
    """A ``can_use_tool`` request's ``permission_suggestions``: the rules the approval dialog
    offers to keep for this session (``offered``), as one Claude Code ``PermissionUpdate`` —
    ``[{"type": "addRules", "rules": [...], "behavior": "allow", "destination": "session"}]``
    — which the SDK hands its callback as ``context.suggestions``; ``None`` when it offers
    none. A compound line's rules are one suggestion: they are kept all together or not."""
    if not offered:
        return None
    rules = [rule_value(rule) for rule in offered]
    return [{"type": "addRules", "rules": rules, "behavior": "allow", "destination": "session"}]


class UnsupportedUpdate(ValueError):
    """An allow's ``updatedPermissions`` asks for what an SDK app may not do here."""


def kept_rules(updates: object, offered: Sequence[str]) -> tuple[str, ...]:
    """The rules an allow's ``updatedPermissions`` keeps for this session: ``()`` for none
    (absent or ``[]``), else exactly ``offered`` (the request's suggestion, however the SDK
    app split it into ``addRules`` entries). Raises :class:`UnsupportedUpdate` naming the
    first thing that is not that suggestion: an entry of another ``type``, a ``destination``
    other than ``session``, a ``behavior`` other than ``allow``, a rule not offered, or only
    a part of the offered rules. The caller refuses the call then: an SDK app's answer is
    taken whole or not at all."""
    if updates is None:
        return ()
    if not isinstance(updates, list):
        raise UnsupportedUpdate(f"updatedPermissions is not a list ({type(updates).__name__})")
    asked: list[dict[str, Any]] = []
    for entry in cast(list[Any], updates):
        if not isinstance(entry, dict):
            raise UnsupportedUpdate(f"an updatedPermissions entry is not an object ({entry!r})")
        update = cast(dict[str, Any], entry)
        kind, where = update.get("type"), update.get("destination")
        if kind != "addRules":
            raise UnsupportedUpdate(
                f"an updatedPermissions {kind!r} is not applied by coding-agent (an SDK app "
                "may only keep the suggested addRules for this session)"
            )
        if where != "session":
            raise UnsupportedUpdate(
                f"an updatedPermissions addRules for {where!r} is not applied by coding-agent "
                '(an SDK app does not write settings files here: use destination "session", '
                "or add the rule to the settings yourself)"
            )
        if update.get("behavior") != "allow":
            raise UnsupportedUpdate(
                f"an updatedPermissions addRules with behavior {update.get('behavior')!r} is "
                "not applied by coding-agent (only the suggested allow rules are; put deny "
                "and ask rules in the settings)"
            )
        rules: Any = update.get("rules")
        if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):  # pyright: ignore[reportUnknownVariableType]
            raise UnsupportedUpdate("an updatedPermissions addRules needs a list of rules")
        asked.extend(cast(list[dict[str, Any]], rules))
    if not asked:
        return ()
    suggested = [rule_value(rule) for rule in offered]
    for value in asked:
        if value not in suggested:
            shown = value.get("toolName")
            if value.get("ruleContent") is not None:
                shown = f"{shown}({value.get('ruleContent')})"
            offer = ", ".join(map(repr, offered)) if offered else "no rule for this call"
            raise UnsupportedUpdate(
                f"the rule {shown!r} was not suggested (suggested: {offer}); an SDK app "
                "cannot widen an approval beyond the suggested narrow rules"
            )
    missing = [rule for rule, value in zip(offered, suggested, strict=True) if value not in asked]
    if missing:
        raise UnsupportedUpdate(
            f"the suggested rules are kept all together, and {', '.join(missing)} "
            "was left out: keep the whole suggestion or none of it"
        )
    return tuple(offered)


class Permission:
    """The SDK's answer to a ``can_use_tool`` request: ``allowed``, and why not (``message``,
    the SDK callback's own words or ours) and whether the turn is to stop (``interrupt``);
    ``keep``: the offered rules an allow keeps for this session (:func:`kept_rules`);
    ``unsupported``: the refusal is ours, of an answer asking for what is not done here."""

    def __init__(
        self,
        allowed: bool,
        message: str = "",
        *,
        interrupt: bool = False,
        keep: tuple[str, ...] = (),
        unsupported: bool = False,
    ) -> None:
        self.allowed = allowed
        self.message = message
        self.interrupt = interrupt
        self.keep = keep
        self.unsupported = unsupported


class ControlChannel:
    """One SDK connection on ``stdin``/``out``: :meth:`serve` reads stdin until it closes,
    answering control requests and queueing the prompts :meth:`prompts` yields; our own
    requests (:meth:`can_use_tool`) go out on ``out`` and wait for their answer.

    ``on_interrupt`` is called for an ``interrupt`` request (it aborts the running turn and
    says whether one ran), ``set_mode`` for a ``set_permission_mode`` (one of this agent's
    modes). ``out`` is shared with the turns' stream-json lines: every line is written whole
    and flushed, from the one event loop, so lines never interleave."""

    def __init__(self, out: TextIO, err: TextIO, stdin: int = 0) -> None:
        self.out = out
        self.err = err
        self.stdin = stdin
        """The file descriptor the lines are read from (0: stdin)."""
        self.on_interrupt: Callable[[], bool] = lambda: False
        self.set_mode: Callable[[str], Awaitable[None]] | None = None
        self.set_model: Callable[[str | None], Awaitable[None]] | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[str, MemoryObjectSendStream[Mapping[str, Any]]] = {}
        self._send_prompt, self._prompts = anyio.create_memory_object_stream[dict[str, Any]](256)
        self.closed = anyio.Event()
        """Set once stdin closed (or :meth:`serve` ended): no answer comes any more."""
        self.ready = anyio.Event()
        """Set by the run once the session is open and :attr:`set_mode` and
        :attr:`on_interrupt` serve it; a ``set_permission_mode`` waits for it."""

    def line(self, value: Mapping[str, Any]) -> None:
        """Write one JSON line on ``out`` and flush it."""
        self.out.write(json.dumps(value, separators=(",", ":")) + "\n")
        self.out.flush()

    def _warn(self, text: str, level: str = "warning") -> None:
        print(f"coding-agent: {level}: {inert(text)}", file=self.err)
        self.err.flush()

    async def prompts(self) -> AsyncIterator[dict[str, Any]]:
        """The ``user`` lines, in order, until stdin closes."""
        async with self._prompts:
            async for message in self._prompts:
                yield message

    async def serve(self) -> None:
        """Read stdin line by line until it closes: prompts are queued, control requests
        answered (each in a task of its own: a slow one never holds the others), answers to our
        requests delivered. At the end every request still waiting is refused."""
        try:
            async with anyio.create_task_group() as group:
                async for raw in _lines(self.stdin):
                    text = raw.decode("utf-8", "replace").strip()
                    if not text:
                        continue
                    try:
                        value: Any = json.loads(text)
                    except json.JSONDecodeError as error:
                        self._warn(f"stdin: a line that is not JSON was skipped ({error})")
                        continue
                    if not isinstance(value, dict):
                        self._warn("stdin: a line that is not a JSON object was skipped")
                        continue
                    message = cast(dict[str, Any], value)
                    kind = message.get("type")
                    if kind == "user":
                        await self._send_prompt.send(message)
                    elif kind == "control_request":
                        group.start_soon(self._answer, message)
                    elif kind == "control_response":
                        self._deliver(message)
                    elif kind == "control_cancel_request":
                        pass  # we send no request the SDK could cancel mid-way
                    else:
                        self._warn(
                            f"stdin: a {kind!r} line was skipped (stream-json input takes user, "
                            "control_request and control_response lines)"
                        )
        finally:
            self.closed.set()
            self._send_prompt.close()
            for waiter in self._waiting.values():
                waiter.close()

    def _deliver(self, message: Mapping[str, Any]) -> None:
        response = message.get("response")
        request_id = response.get("request_id") if isinstance(response, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        waiter = self._waiting.pop(str(request_id), None)
        if waiter is None:
            self._warn(f"stdin: a control_response to no request of ours ({request_id!r})")
            return
        try:
            waiter.send_nowait(cast(Mapping[str, Any], response))
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        waiter.close()

    async def _answer(self, message: Mapping[str, Any]) -> None:
        request_id = message.get("request_id")
        request = message.get("request")
        subtype = request.get("subtype") if isinstance(request, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        try:
            response = await self.handle(str(subtype), cast(Mapping[str, Any], request or {}))
        except Exception as error:  # the request's own failure: its error response says it
            answer: dict[str, Any] = {
                "subtype": "error", "request_id": request_id, "error": str(error)
            }  # fmt: skip
        else:
            answer = {"subtype": "success", "request_id": request_id, "response": response}
        self.line({"type": "control_response", "response": answer})

    async def handle(self, subtype: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """Serve one control request; its ``response`` (raises with the error's text)."""
        if subtype == "initialize":
            for field, instead in (
                ("hooks", "configure hooks in settings.json (README 'Hooks')"),
                ("agents", "define agents in .claude/agents/ (README 'Subagents')"),
            ):
                if request.get(field):
                    raise ValueError(
                        f"{field} given to the Agent SDK are not served by coding-agent (it "
                        f"does not call the SDK's callbacks): {instead}"
                    )
            return {
                "commands": [],
                "output_style": "default",
                "available_output_styles": ["default"],
                "models": [],
                "account": {},
                "pid": os.getpid(),
            }
        if subtype == "interrupt":
            self.on_interrupt()
            return {}
        if subtype == "set_permission_mode":
            mode = request.get("mode")
            ours = _SDK_MODES.get(str(mode))
            if ours is None:
                raise ValueError(
                    f"set_permission_mode {mode!r} is not served here: default, acceptEdits "
                    "and plan are (bypassPermissions is --permission-mode auto, given when the "
                    "run starts)"
                )
            await self.ready.wait()  # (sent before the first prompt, as the session opens)
            if self.set_mode is None:
                raise ValueError(
                    "set_permission_mode needs the approval feature (facets-approval), which "
                    "this session does not load"
                )
            await self.set_mode(ours)
            return {}
        if subtype == "set_model":
            model = request.get("model")
            if model is not None and not isinstance(model, str):
                raise ValueError(f"set_model takes a provider/id or null, got {model!r}")
            await self.ready.wait()  # (sent before the first prompt, as the session opens)
            if self.set_model is None:
                raise ValueError("set_model: the session is not open")
            await self.set_model(model)
            return {}
        instead = _INSTEAD.get(subtype)
        raise ValueError(
            f"Unsupported control request subtype: {subtype}"
            + (f": {instead}" if instead else "")
            + f" (coding-agent serves "
            f"{', '.join(CONTROL_SUBTYPES)})"
        )

    async def can_use_tool(
        self,
        tool_name: str,
        tool_input: Mapping[str, Any],
        tool_use_id: str,
        reason: str = "",
        offered: Sequence[str] = (),
    ) -> Permission:
        """Ask the SDK whether the call may run (``--permission-prompt-tool stdio``) and wait
        for its answer. ``offered``: the rules the approval dialog offers to keep for this
        session, sent as the ``permission_suggestions``; an allow may keep exactly those
        (:attr:`Permission.keep`). Anything but an ``allow`` of the call as it is, with no
        updates or that suggestion, refuses the call (fail closed); a refused update is said
        on stderr too."""
        if self.closed.is_set():
            return Permission(False, "the Agent SDK's stdin closed before it was asked")
        request_id = f"ca_{next(self._ids)}"
        send, receive = anyio.create_memory_object_stream[Mapping[str, Any]](1)
        self._waiting[request_id] = send
        request: dict[str, Any] = {
            "subtype": "can_use_tool",
            "tool_name": tool_name,
            "input": dict(tool_input),
            "permission_suggestions": permission_suggestions(offered),
            "blocked_path": None,
            "tool_use_id": tool_use_id,
        }
        if reason:
            request["decision_reason"] = reason
        self.line({"type": "control_request", "request_id": request_id, "request": request})
        try:
            response = await _first(receive)
        except anyio.get_cancelled_exc_class():  # the turn was aborted meanwhile: the SDK's
            # callback is cancelled too (a control_cancel_request), its answer not awaited
            if self._waiting.pop(request_id, None) is not None and not self.closed.is_set():
                self.line({"type": "control_cancel_request", "request_id": request_id})
            raise
        permission = _permission(response, tool_input, offered)
        if permission.unsupported:
            self._warn(
                f"the Agent SDK's can_use_tool for {tool_name} {permission.message}", "error"
            )
        return permission


async def _lines(fd: int) -> AsyncIterator[bytes]:
    """The lines read from ``fd`` until its end. A pipe, socket or terminal is waited on in the
    event loop (no thread: a run cancelled while the SDK keeps stdin open exits at once); a
    file (or ``/dev/null``) is simply read."""
    mode = os.fstat(fd).st_mode
    waits = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)
    pending = bytearray()
    while True:
        if waits:
            await anyio.wait_readable(fd)
        chunk = os.read(fd, 1 << 16)  # readable: returns what is there, without blocking
        if not chunk:
            break
        pending += chunk
        while (end := pending.find(b"\n")) >= 0:
            yield bytes(pending[:end])
            del pending[: end + 1]
    if pending:
        yield bytes(pending)


async def _first(
    receive: MemoryObjectReceiveStream[Mapping[str, Any]],
) -> Mapping[str, Any] | None:
    async with receive:
        async for response in receive:
            return response
    return None


def _permission(
    response: Mapping[str, Any] | None, asked: Mapping[str, Any], offered: Sequence[str]
) -> Permission:
    if response is None:
        return Permission(False, "the Agent SDK's stdin closed before it answered")
    if response.get("subtype") != "success":
        error = response.get("error") or "an error without text"
        return Permission(False, f"the Agent SDK's can_use_tool failed: {error}")
    answer: Any = response.get("response")
    if not isinstance(answer, dict):
        return Permission(False, "the Agent SDK's can_use_tool answer holds no decision")
    answer = cast(dict[str, Any], answer)
    behavior = answer.get("behavior")
    if behavior == "allow":
        updated = answer.get("updatedInput")
        if updated is not None and updated != dict(asked):
            return Permission(
                False,
                "the Agent SDK's can_use_tool changed the tool's input (updatedInput), which "
                "coding-agent does not apply: allow the call as it is, or deny it",
            )
        try:
            keep = kept_rules(answer.get("updatedPermissions"), offered)
        except UnsupportedUpdate as error:
            # the call is not run on a part of the answer: the SDK app allowed it together
            # with what it asked, and may rely on that (Claude Code applies all of it)
            return Permission(
                False, f"allowed, but {error}: the call was refused", unsupported=True
            )
        return Permission(True, keep=keep)
    message = answer.get("message")
    said = message if isinstance(message, str) and message else "denied"
    return Permission(False, said, interrupt=behavior == "deny" and answer.get("interrupt") is True)
