"""Claude Code's hook protocol: its tool names and inputs, and running one hook command.

**Names.** A matcher is written against Claude Code's tool names, so each of our tools is matched
(and shown in ``tool_name``) by its Claude Code name (``pico3.CLAUDE_CODE_TOOLS``): ``bash`` →
``Bash``, ``read`` → ``Read``, ``write`` → ``Write``, ``edit`` → ``Edit`` (``MultiEdit`` when it
carries several edits; a matcher naming either takes it), ``grep`` → ``Grep``, ``find`` →
``Glob``, ``ls`` → ``LS``, ``web_fetch`` → ``WebFetch``, ``web_search`` → ``WebSearch``,
``todo`` → ``TodoWrite``, ``agent`` → ``Task`` (or ``Agent``), ``job_output`` → ``BashOutput``,
``job_kill`` → ``KillShell``; ``mcp__server__tool`` and every other name as it is. ``tool_input`` uses Claude Code's field
names where ours differ (``file_path`` for ``path``, made absolute; ``old_string``/``new_string``
for ``oldText``/``newText``; ``-i`` for grep's ``ignoreCase``; ``run_in_background`` for bash's
``background``); fields Claude Code does not have are passed as they are.

**A command** (:func:`run_command`) runs through a POSIX shell (``$SHELL`` when it is bash, zsh,
sh, dash or ksh, else ``/bin/sh``) as ``<shell> -c <command>``, in the project folder, with the
session's child environment (secrets withheld) plus ``CLAUDE_PROJECT_DIR``; the event's JSON is
its stdin. When its timeout passes, or the call is cancelled, its whole process group is killed.
With a :class:`pico3.Sandbox` the shell runs inside it (:meth:`pico3.Sandbox.wrap`: the project
and the session's ``$TMPDIR`` writable, credentials and the agent's own files hidden, no
network); killing ``bwrap``'s group then ends every process the hook started.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import ByteReceiveStream

from pico3 import CLAUDE_CODE_TOOLS, Sandbox, claude_code_names, claude_tool

__all__ = [
    "CLAUDE_NAMES",
    "WAITING_MESSAGES",
    "HookRun",
    "add_text",
    "assistant_text",
    "claude_tool",
    "hook_argv",
    "prompt_key",
    "prompt_text",
    "run_command",
    "shell_for",
    "tool_names",
    "waiting_calls",
]

CLAUDE_NAMES: Mapping[str, str] = MappingProxyType(
    {tool: names[0] for tool in CLAUDE_CODE_TOOLS.values() if (names := claude_code_names(tool))}
)
"""Our tool name → the one Claude Code sends as ``tool_name`` (``pico3.claude_code_names``)."""

_OUTPUT_LIMIT = 1 << 20
"""Bytes of a hook's stdout and of its stderr that are kept (the rest is read and dropped)."""


def tool_names(tool: str, arguments: object) -> tuple[str, ...]:
    """Every name a matcher may take ``tool`` by: Claude Code's (first) and ours."""
    return (*claude_code_names(tool), tool)


@dataclass(frozen=True)
class HookRun:
    """What one hook command did: its exit code (``None`` when it timed out or could not
    start), its stdout and stderr (decoded, each at most 1 MiB kept), and whether it timed out.
    ``output`` is stdout parsed when it is a JSON object, else ``None``."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    failed: str = ""
    """Set when the hook failed and its ``"onFailure": "block"`` made this run an exit 2
    (:func:`.on_failure.apply_on_failure`): how it failed."""

    @property
    def output(self) -> dict[str, Any] | None:
        if self.exit_code != 0:
            return None
        text = self.stdout.strip()
        if not text.startswith("{"):
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None  # pyright: ignore[reportUnknownVariableType]


def shell_for(env: Mapping[str, str]) -> str:
    """The shell hook commands run with: ``$SHELL`` when it is a POSIX one, else ``/bin/sh``."""
    shell = env.get("SHELL") or ""
    if os.path.basename(shell) in ("bash", "zsh", "sh", "dash", "ksh") and os.path.isfile(shell):
        return shell
    return "/bin/sh"


def hook_argv(
    command: str, *, env: Mapping[str, str], cwd: str, sandbox: Sandbox | None = None
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that run ``command`` through the shell, inside ``sandbox``
    when one is given (then ``bwrap``'s argv, and ``TMPDIR`` set to the session's folder)."""
    argv = [shell_for(env), "-c", command]
    if sandbox is None:
        return argv, dict(env)
    return sandbox.wrap(argv, cwd=cwd or os.getcwd(), env=env)


async def _drain(stream: ByteReceiveStream | None, into: bytearray) -> None:
    if stream is None:
        return
    try:
        async for chunk in stream:
            if len(into) < _OUTPUT_LIMIT:
                into.extend(chunk[: _OUTPUT_LIMIT - len(into)])
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        return


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_command(
    command: str,
    payload: Mapping[str, Any],
    *,
    env: Mapping[str, str],
    cwd: str,
    seconds: float,
    sandbox: Sandbox | None = None,
) -> HookRun:
    """Run one hook ``command`` with ``payload`` as JSON on stdin (see the module docstring),
    inside ``sandbox`` when one is given.

    Never raises for the command's own failure: one that cannot start is a :class:`HookRun`
    with exit code ``None`` and the reason in ``stderr``. Cancellation kills the process group
    and propagates. ``seconds`` is the hook's timeout."""
    data = json.dumps(payload).encode()
    if sandbox is None:
        argv, environ = hook_argv(command, env=env, cwd=cwd)
    else:  # in a thread: a wrap may read the repository's submodules with git first
        argv, environ = await anyio.to_thread.run_sync(
            lambda: hook_argv(command, env=env, cwd=cwd, sandbox=sandbox)
        )
    try:
        process = await anyio.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environ,
            cwd=cwd or None,
            start_new_session=True,
        )
    except OSError as exc:
        return HookRun(None, "", f"the hook could not start: {exc}")
    out, err = bytearray(), bytearray()
    timed_out = False
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_drain, process.stdout, out)
            group.start_soon(_drain, process.stderr, err)
            # the timeout covers writing the input too: a hook that reads none of a large
            # payload would otherwise hold the write forever
            with anyio.move_on_after(seconds) as scope:
                stdin = process.stdin
                if stdin is not None:
                    try:
                        await stdin.send(data)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        pass  # the hook does not read its input: fine
                    finally:
                        with anyio.CancelScope(shield=True):
                            await stdin.aclose()
                await process.wait()
            if scope.cancelled_caught:
                timed_out = True
                _kill_group(process.pid)
                await process.wait()
            # a background child of the hook may hold its pipes open: read on for a moment only
            group.cancel_scope.deadline = anyio.current_time() + 2
    finally:
        if process.returncode is None:
            _kill_group(process.pid)
            with anyio.CancelScope(shield=True):
                await process.wait()
        with anyio.CancelScope(shield=True):
            await process.aclose()
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    if timed_out:
        return HookRun(None, stdout, stderr, timed_out=True)
    return HookRun(process.returncode, stdout, stderr)


WAITING_MESSAGES = {
    "approval": "Claude needs your permission to use {tool}",
    "question": "Claude is waiting for your input",
}
"""The ``Notification`` message for a tool call waiting on a feature (its ``waitingOn``)."""


def waiting_calls(view: object) -> list[tuple[str, str, str]]:
    """``(call id, waiting on, tool)`` of a conversation view's tool calls that wait for the
    user (on the approval dialog or a question)."""
    turn = view.get("turn") if isinstance(view, dict) else None
    tools = turn.get("tools") if isinstance(turn, dict) else None
    found: list[tuple[str, str, str]] = []
    for slot in tools if isinstance(tools, list) else []:  # pyright: ignore[reportUnknownVariableType]
        if isinstance(slot, dict) and slot.get("waitingOn") in WAITING_MESSAGES:  # pyright: ignore[reportUnknownMemberType]
            found.append((str(slot.get("callId")), str(slot["waitingOn"]), str(slot.get("name"))))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    return found


def assistant_text(answer: object) -> str:
    """The text of an assistant message as JSON (its ``text`` blocks, joined): a ``Stop``
    hook's ``last_assistant_message``."""
    blocks: Any = answer.get("content") if isinstance(answer, dict) else None  # pyright: ignore[reportUnknownMemberType]
    if isinstance(blocks, str):
        return blocks
    items: list[Any] = blocks if isinstance(blocks, list) else []  # pyright: ignore[reportUnknownVariableType]
    texts = [
        str(block.get("text", ""))
        for block in items
        if isinstance(block, dict) and block.get("type") == "text"  # pyright: ignore[reportUnknownMemberType]
    ]
    return "\n".join(texts)


def add_text(message: dict[str, Any], text: str, *, before: bool = False) -> None:
    """Add ``text`` to a request message (a string content, or a new text block), after its
    content or ``before`` it."""
    content = message.get("content")
    if isinstance(content, str):
        message["content"] = f"{text}\n\n{content}" if before else f"{content}\n\n{text}"
    elif isinstance(content, list):
        block = {"type": "text", "text": text}
        message["content"] = [block, *content] if before else [*content, block]  # pyright: ignore[reportUnknownVariableType]


def prompt_text(message: dict[str, Any]) -> str:
    """A user message's text (its string content, or its text blocks joined)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = [b.get("text", "") for b in content or [] if isinstance(b, dict)]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return "".join(str(p) for p in parts)  # pyright: ignore[reportUnknownVariableType]


def prompt_key(message: dict[str, Any]) -> str:
    """A stable key for one prompt (its content and timestamp): the verdicts' store key."""
    raw = json.dumps([message.get("content"), message.get("timestamp")], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]
