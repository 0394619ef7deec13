"""The editor's terminal (ACP ``terminal/*``): a ``bash`` call's output, live, in a terminal the
editor embeds in the tool call.

The command runs here, as in the TUI: in the session's sandbox, with the agent's secrets scrubbed
from its environment, its start recorded so a crash never runs it twice, its whole process tree
killed on abort. It is never handed to the editor, which would leave all of that behind. What
the editor runs is a *follower*: when a foreground ``bash`` call starts, :class:`Terminals`
creates a file in a private folder and asks the editor (``terminal/create``) to run this
process's Python on :data:`FOLLOW`, which prints the file as it grows and, once a status file
appears, exits with the command's exit code. The tool call's ``in_progress`` update embeds the
terminal (``{"type": "terminal", "terminalId": …}``); the call's live output (the view's tool
slot) is appended to the file as it arrives; when the result is stored, the rest of the result's
text (all of it, for a command too quick to stream) and the status are written, the finished
call embeds the same terminal, and it is released (``terminal/release``) once it exited.

A call that never started (denied) or whose start was not seen here (the session was loaded
mid-command) is shown as text, as is every call to an editor that refused a terminal or does not
offer them.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
from acp import RequestError
from acp.interfaces import Client
from acp.schema import TerminalToolCallContent, ToolCallProgress

from coding_agent.acp.editor import EDITOR_TIMEOUT
from coding_agent.acp.turns import CALLS_KEPT, Recent

__all__ = ["FOLLOW", "Terminals", "bash_exit_code"]

_log = logging.getLogger("coding_agent.acp")

FOLLOW = """\
import os, sys, time
output, status, agent = sys.argv[1], sys.argv[2], int(sys.argv[3])
def alive():
    try:
        os.kill(agent, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return os.path.exists(output)
with open(output, "rb") as file:
    while True:
        chunk = file.read(65536)
        if chunk:
            os.write(1, chunk)
        elif os.path.exists(status):
            rest = file.read()
            while rest:
                os.write(1, rest)
                rest = file.read()
            with open(status) as done:
                sys.exit(int(done.read().strip() or 1))
        elif not alive():
            os.write(1, b"\\n[coding-agent stopped before the command ended]\\n")
            sys.exit(1)
        else:
            time.sleep(0.05)
"""
"""The follower the editor's terminal runs: ``python -c FOLLOW OUTPUT STATUS AGENT_PID``
(module docstring). Its polling only paces a display; nothing waits on it. It also ends when
this process is gone or the session closed (its file removed), so no follower is left behind."""

_EXITED = re.compile(r"Command exited with code (\d+)\s*$")


def bash_exit_code(text: str, failed: bool) -> int:
    """The exit code a ``bash`` result's ``text`` reports: ``N`` of its last line ``Command
    exited with code N``; else 1 for a failed call (timed out, aborted), 0 for one that
    succeeded."""
    found = _EXITED.search(text)
    if found is not None:
        return min(int(found.group(1)), 255)
    return 1 if failed else 0


def _foreground_bash(call: Mapping[str, Any] | None) -> bool:
    if call is None or call.get("name") != "bash":
        return False
    args = call.get("arguments")
    return not (isinstance(args, dict) and args.get("background") is True)  # pyright: ignore[reportUnknownMemberType]


class _Mirror:
    """One call's follower: its files, what of the live output was written, its terminal."""

    def __init__(self, folder: Path, call_id: str) -> None:
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", call_id)[:80]
        self.output = folder / f"{safe}.out"
        self.status = folder / f"{safe}.status"
        self.output.touch(mode=0o600)
        self.seen = ""
        self.written = 0
        self.terminal_id: str | None = None

    def append(self, text: str) -> None:
        if text:
            with self.output.open("a", encoding="utf-8", errors="replace") as file:
                file.write(text)
            self.written += len(text)

    def live(self, output: str) -> None:
        """The slot's output now: what it gained since the last call is appended."""
        if output.startswith(self.seen):
            delta = output[len(self.seen) :]
        else:  # the slot keeps a tail: it moved on; find where the new text goes on
            anchor = self.seen[-256:]
            at = output.rfind(anchor) if anchor else -1
            delta = output[at + len(anchor) :] if at >= 0 else "\n[…]\n" + output
        self.seen = output
        self.append(delta)

    def finish(self, text: str, code: int) -> None:
        """The result is stored: the rest of its text (all of it when nothing streamed; else
        its closing lines, the exit code or why it stopped), then the status."""
        if not self.written:
            self.append(text)
        else:
            closing = text.rsplit("\n\n", 1)[-1] if "\n\n" in text else ""
            if closing.startswith(("Command ", "[Showing")):
                self.append(("" if self.seen.endswith("\n") else "\n") + closing + "\n")
        tmp = self.status.with_suffix(".tmp")
        tmp.write_text(str(code))
        tmp.replace(self.status)  # whole, at once: the follower reads it when it appears


class Terminals:
    """The editor terminals of one session's ``bash`` calls (module docstring). Fed by the
    view follower: :meth:`started`, :meth:`live` and :meth:`ended` record what happened (no
    I/O with the editor); :meth:`dress` then puts the terminal in the updates sent."""

    def __init__(
        self,
        client: Client,
        session_id: str,
        cwd: Path,
        start_soon: Callable[..., Any],
    ) -> None:
        self._client = client
        self._session_id = session_id
        self._cwd = cwd
        self._start_soon = start_soon
        self._folder: Path | None = None
        self._calls: Recent[str, Mapping[str, Any]] = Recent(CALLS_KEPT)
        self._mirrors: Recent[str, _Mirror] = Recent(CALLS_KEPT)
        self._finished: Recent[str, tuple[str, int]] = Recent(CALLS_KEPT)

    # -- what happened (from the view) ----------------------------------------------------------
    def called(self, call: Mapping[str, Any]) -> None:
        """The model asked for ``call`` (a ``toolCall`` block)."""
        if _foreground_bash(call):
            self._calls[str(call.get("id"))] = call

    def live(self, turn: Any) -> None:
        """The live turn: each followed call's output so far goes to its file."""
        slots = turn.get("tools") if isinstance(turn, dict) else None
        for slot in slots if isinstance(slots, list) else ():  # pyright: ignore[reportUnknownVariableType]
            if not isinstance(slot, dict):
                continue
            mirror = self._mirrors.get(str(slot.get("callId")))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
            output = slot.get("output")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if mirror is not None and mirror.terminal_id is not None and isinstance(output, str):
                mirror.live(output)

    def ended(self, call_id: str, message: Mapping[str, Any]) -> None:
        """The call's result (a ``toolResult`` message) was stored."""
        if self._calls.pop(call_id, None) is None:
            return
        text = "\n".join(
            str(block.get("text") or "")
            for block in message.get("content") or ()
            if isinstance(block, dict) and block.get("type") == "text"
        )
        self._finished[call_id] = (text, bash_exit_code(text, bool(message.get("isError"))))

    # -- what the editor is told ----------------------------------------------------------------
    async def dress(self, update: ToolCallProgress) -> ToolCallProgress:
        """``update`` with the call's terminal as its content, when it has one."""
        call_id = update.tool_call_id
        if update.status == "in_progress" and call_id in self._calls:
            mirror = _Mirror(self._private(), call_id)
            self._mirrors[call_id] = mirror
            mirror.terminal_id = await self._create(mirror)
            if mirror.terminal_id is None:
                return update
            return self._embed(update, mirror.terminal_id)
        finished = self._finished.pop(call_id, None)
        if finished is None:
            return update
        text, code = finished
        mirror = self._mirrors.pop(call_id, None)
        if mirror is None or mirror.terminal_id is None:  # never ran (denied), or not seen here
            return update
        mirror.finish(text, code)
        self._start_soon(self._release, mirror)
        return self._embed(update, mirror.terminal_id)

    def close(self) -> None:
        """Remove the followers' files (the session closes)."""
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    # -- helpers --------------------------------------------------------------------------------
    def _private(self) -> Path:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="coding-agent-acp-"))  # 0700
        return self._folder

    @staticmethod
    def _embed(update: ToolCallProgress, terminal_id: str) -> ToolCallProgress:
        shown = TerminalToolCallContent(type="terminal", terminal_id=terminal_id)
        return update.model_copy(update={"content": [shown]})

    async def _create(self, mirror: _Mirror) -> str | None:
        """A terminal running the follower of ``mirror``'s files; its id, or ``None``."""
        argv = [sys.executable, "-c", FOLLOW, str(mirror.output), str(mirror.status)]
        argv.append(str(os.getpid()))
        try:
            with anyio.fail_after(EDITOR_TIMEOUT):
                created = await self._client.create_terminal(
                    session_id=self._session_id,
                    command=argv[0],
                    args=argv[1:],
                    cwd=str(self._cwd),
                )
        except (TimeoutError, RequestError) as error:
            _log.warning("the editor did not create a terminal (%s): output shown as text", error)
            return None
        return created.terminal_id

    async def _release(self, mirror: _Mirror) -> None:
        """Wait until the follower exited (it has its status), then release its terminal (the
        tool call keeps showing its output) and remove its files."""
        assert mirror.terminal_id is not None
        client, session, terminal = self._client, self._session_id, mirror.terminal_id
        try:
            with anyio.fail_after(EDITOR_TIMEOUT):
                await client.wait_for_terminal_exit(session_id=session, terminal_id=terminal)
        except (TimeoutError, RequestError) as error:
            _log.warning("terminal %s did not report its exit: %s", terminal, error)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(EDITOR_TIMEOUT):
                try:
                    await client.release_terminal(session_id=session, terminal_id=terminal)
                except RequestError as error:
                    _log.warning("terminal %s was not released: %s", terminal, error)
            for path in (mirror.output, mirror.status):
                path.unlink(missing_ok=True)
