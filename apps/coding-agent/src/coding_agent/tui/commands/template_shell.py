"""A prompt template's ``!`cmd``` commands, run from the TUI before the template is sent.

Claude Code's custom commands may hold ``!`git status``` lines whose output goes into the
prompt. Here each is decided as a ``bash`` call of that command would be (the approval
feature's rules), asked about in a dialog when it must be, and run through the worker's
``!cmd`` runner (:func:`expand_in_tui`); the template is then expanded with their outputs
(:func:`~coding_agent.context.prompt_templates.expand_template`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chord import Context
from coding_agent.context.prompt_templates import (
    PromptTemplate,
    bash_allowed,
    expand_template,
    shell_commands,
)
from coding_agent.tui.conversation_client import RemoteConversationClient, WorkerUnavailable

__all__ = ["expand_in_tui"]


async def expand_in_tui(
    template: PromptTemplate,
    args: str,
    tui: Any,
    shell: Any,
    client: RemoteConversationClient,
    cwd: Path,
    ctx: Context,
    rules: Any = None,
) -> str | None:
    """``/NAME args`` expanded for sending: its ``!`cmd``` commands run first, through the
    worker's ``!cmd`` runner (the ``bash`` tool's executor, in the sandbox when it is on; each
    shown in the transcript and not sent on its own), each decided as a ``bash`` call of it by
    the approval feature's ``rules`` (:data:`~coding_agent.contracts.APPROVAL_RULES`, its
    ``check_command``), as ``-p`` does: a deny rule or plan mode refuses the template, what
    they run runs, an ask rule asks in a dialog whatever the template says, and otherwise the
    template's ``allowed-tools`` (``Bash(git status:*)``) spares the dialog. Without the
    feature only ``allowed-tools`` spares it. ``None``: not sent (refused, or the user said
    no)."""
    commands = shell_commands(template, args)
    asked: list[str] = []
    for command in commands:
        found: Any = await rules.check_command(command, ctx) if rules is not None else None
        verdict = found.get("verdict") if isinstance(found, dict) else None
        if verdict == "block":  # a deny rule, plan mode: as a bash call of it would be
            why = str(found.get("why") or "the permission rules refuse it")
            tui.notify(
                f"/{template.name} was not sent: it runs `{command}` first, and {why}",
                severity="error",
            )
            return None
        if verdict == "run":
            continue
        # an ask rule, a repository's git configuration: only a person overrides it
        by_rule = verdict == "ask" and found.get("by") in ("rule", "repository")
        if by_rule or not bash_allowed(template, command):
            asked.append(command)
    if asked:
        modal = await tui.acquire_modal(ctx)
        try:
            run = await modal.confirm(
                f"/{template.name} runs {'a command' if len(asked) == 1 else 'commands'} first",
                "\n".join(f"$ {command}" for command in asked)
                + f"\n\nFrom {template.path}. They run as !cmd does: in the project folder, in "
                "the sandbox when it is on; their output goes into the prompt.",
                yes="Run and send",
                no="Cancel",
            )
        finally:
            modal.close()
        if not run:
            tui.notify(f"/{template.name} was not sent: its commands were not run")
            return None
    outputs: dict[str, str] = {}
    for command in commands:
        conversation = client.conversation_id
        if conversation is None:
            raise WorkerUnavailable()
        data = await shell.run(conversation, command, False, ctx)
        outputs[command] = str(data.get("output", "")) if isinstance(data, dict) else ""
    return expand_template(template, args, cwd=cwd, outputs=outputs)
