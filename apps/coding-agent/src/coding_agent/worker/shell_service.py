"""``!cmd`` and ``!!cmd``: the user's own shell commands, run by the worker like the ``bash`` tool.

A line typed as ``!git status`` runs ``git status`` through the very executor the model's
``bash`` tool uses (:data:`~coding_agent.worker.tools.bash.BASH_TOOL`): ``bash -c`` in the
project folder, the same 120 s timeout, the same 2000-line / 50 KB tail with the full output
spilled to a file, the same process-group kill on abort. Its outcome becomes one durable entry
of kind :data:`SHELL_ENTRY_KIND` in the conversation (written at the next boundary when a turn
runs, so it never splits a tool exchange)::

    {"kind": "coding-agent.shell",
     "data": {"command": "git status", "output": "...", "exitCode": 0, "excluded": false,
              "cancelled": false, "timedOut": false, "fullOutputPath": null},
     "model": [{"role": "user", "content": "Ran `git status`\\n```\\n...\\n```"}]}

``!cmd`` adds the command and its output to the model's context as that user message;
``!!cmd`` writes the entry without ``model`` (shown in the transcript, never sent).

The worker serves this as the remotable singleton :data:`ShellService` (``coding-agent.shell``):
``run(conversation_id, command, include, ctx)`` runs one command at a time and returns the
entry's ``data``; ``abort(ctx)`` kills the running one (Esc in the TUI). ``state`` is a
replicated ``{"running": null | {"command", "include", "output"}}`` whose ``output`` is the live
tail, so every attached TUI shows the command streaming. The command runs on the worker's own
context: a TUI that goes away does not cut it short, and its entry is still written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio

from chord import (
    BACKGROUND,
    Context,
    Facet,
    FacetEnvironment,
    define_facet,
    with_cancel,
)
from coding_agent.contracts import SHELL_ENTRY_KIND, ShellService
from coding_agent.worker.tools.bash import BASH_TOOL
from coding_agent.worker.tools.spec import ToolContext, ToolError, ToolResult
from pico3 import SANDBOX_SERVICE, ChildEnvironment, HarnessService, Sandbox

__all__ = [
    "LIVE_TAIL_CHARS",
    "SHELL_FACET_ID",
    "ShellBusy",
    "model_text",
    "shell_service_facet",
]

SHELL_FACET_ID = "coding-agent/shell"
LIVE_TAIL_CHARS = 4_000
"""How much of a running command's output the live state carries."""


class ShellBusy(RuntimeError):
    """Another ``!`` command is still running."""


def _sandbox(services: Any) -> Sandbox | None:
    """The session's sandbox when it is enforced (``sandbox.enabled``): ``!`` commands (the
    user's own) run in it then; the ``sandbox`` permission mode governs the model's calls."""
    found = services.get(SANDBOX_SERVICE) if services is not None else None
    return found if isinstance(found, Sandbox) and found.enforced else None


def model_text(command: str, output: str) -> str:
    """What the model reads of a ``!command``: the command and its output (pi's shape)."""
    return f"Ran `{command}`\n```\n{output}\n```"


def shell_service_facet(
    cwd: str | os.PathLike[str],
    *,
    spill_dir: Path | None = None,
    environment: ChildEnvironment | None = None,
) -> Facet:
    """The facet serving :data:`ShellService` for a session in ``cwd`` (module docstring);
    commands run in ``environment`` (default: the harness service ``child_environment``)."""
    folder = str(cwd)

    def setup(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        state = env.replicated_state({"running": None})
        current: dict[str, Any] = {}
        lock = anyio.Lock()

        def show(running: dict[str, Any] | None) -> None:
            def mutate(draft: Any) -> None:
                draft["running"] = running

            state.change(BACKGROUND, mutate)

        async def execute(command: str, include: bool, ctx: Context) -> dict[str, Any]:
            live: dict[str, Any] = {"command": command, "include": include, "output": ""}
            show(dict(live))

            def on_update(partial: ToolResult) -> None:
                live["output"] = partial.plain_text[-LIVE_TAIL_CHARS:]
                show(dict(live))

            if spill_dir is not None:
                await anyio.Path(spill_dir).mkdir(parents=True, exist_ok=True)
            tools = ToolContext(
                folder,
                ctx=ctx,
                temp_dir=str(spill_dir) if spill_dir is not None else None,
                environment=environment or ChildEnvironment.of(harness.handle.services),
                sandbox=_sandbox(harness.handle.services),
            )
            try:
                result = await BASH_TOOL.handler({"command": command}, tools, on_update)
                output, details = result.plain_text, result.details
            except ToolError as error:
                output, details = error.message, error.details
            return {
                "command": command,
                "output": output,
                "exitCode": details.get("exit_code"),
                "excluded": not include,
                "cancelled": bool(details.get("aborted")),
                "timedOut": bool(details.get("timed_out")),
                "fullOutputPath": details.get("full_output_path"),
            }

        async def run(conversation_id: int, command: str, include: bool, ctx: Context) -> Any:
            del ctx  # the command and its entry outlive the caller (see the module docstring)
            command = command.strip()
            if not command:
                raise ValueError("no command given: type !command (or !!command)")
            if lock.locked():
                raise ShellBusy("a ! command is still running (Esc stops it)")
            data: dict[str, Any] = {}
            async with lock:
                own, cancel = with_cancel(BACKGROUND)
                current["cancel"] = cancel
                try:
                    with anyio.CancelScope(shield=True):
                        data = await execute(command, include, own)
                        handle = await harness.conversation(conversation_id, BACKGROUND)
                        if handle is None:
                            raise ValueError(f"conversation {conversation_id} does not exist")
                        model = (
                            [{"role": "user", "content": model_text(command, data["output"])}]
                            if include
                            else None
                        )
                        await handle.write(SHELL_ENTRY_KIND, BACKGROUND, model=model, data=data)
                finally:
                    current.clear()
                    show(None)
            return data

        async def abort(ctx: Context) -> bool:
            """Stop the running command; ``False`` when none runs."""
            del ctx
            cancel = current.get("cancel")
            if cancel is None:
                return False
            cancel()
            return True

        env.provide(ShellService, {"state": state, "run": run, "abort": abort})

    return define_facet(SHELL_FACET_ID, setup)
