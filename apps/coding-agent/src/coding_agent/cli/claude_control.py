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

Lines that are not JSON objects, or of another type, are reported on stderr (one
``coding-agent: warning:`` line each) and skipped.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TextIO, cast

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from chord import inert

__all__ = [
    "CONTROL_SUBTYPES",
    "ControlChannel",
    "Permission",
    "UnsupportedContent",
    "prompt_content",
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


class Permission:
    """The SDK's answer to a ``can_use_tool`` request: ``allowed``, and why not (``message``,
    the SDK callback's own words or ours) and whether the turn is to stop (``interrupt``)."""

    def __init__(self, allowed: bool, message: str = "", *, interrupt: bool = False) -> None:
        self.allowed = allowed
        self.message = message
        self.interrupt = interrupt


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

    def _warn(self, text: str) -> None:
        print(f"coding-agent: warning: {inert(text)}", file=self.err)
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
        self, tool_name: str, tool_input: Mapping[str, Any], tool_use_id: str, reason: str = ""
    ) -> Permission:
        """Ask the SDK whether the call may run (``--permission-prompt-tool stdio``) and wait
        for its answer. Anything but a plain ``allow`` refuses the call (fail closed)."""
        if self.closed.is_set():
            return Permission(False, "the Agent SDK's stdin closed before it was asked")
        request_id = f"ca_{next(self._ids)}"
        send, receive = anyio.create_memory_object_stream[Mapping[str, Any]](1)
        self._waiting[request_id] = send
        request: dict[str, Any] = {
            "subtype": "can_use_tool",
            "tool_name": tool_name,
            "input": dict(tool_input),
            "permission_suggestions": None,
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
        return _permission(response, tool_input)


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


def _permission(response: Mapping[str, Any] | None, asked: Mapping[str, Any]) -> Permission:
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
        return Permission(True)
    message = answer.get("message")
    said = message if isinstance(message, str) and message else "denied"
    return Permission(False, said, interrupt=behavior == "deny" and answer.get("interrupt") is True)
