"""Prompt templates and skills in ``-p``/``--json``: ``coding-agent -p "/greet Bob"`` sends the
expanded template, as Claude Code and pi do, not the literal text.

A prompt whose first word is ``/NAME`` naming a prompt template (:mod:`coding_agent.context.
prompt_templates`) or ``/skill:NAME`` naming a skill is expanded with the rest as its
arguments; any other prompt, ``/etc/hosts is odd`` included, is sent as written. A template's
``!`cmd``` commands run through the session's ``!cmd`` runner (the ``bash`` tool's executor, in
the sandbox when it is on) only when nobody needs asking: ``--approve allow``, or the template's
``allowed-tools`` allows each command. Otherwise nothing is sent and the run ends with exit 3
and one line naming the command and the flag, as a blocked tool call does.

A template's ``model:`` and ``allowed-tools:`` go with its prompt (:attr:`Expanded.options`,
:func:`~coding_agent.context.prompt_templates.send_options`): that turn runs on the command's
model and its calls that the ``allowed-tools`` rules cover run without asking, so in ``-p`` a
command with ``allowed-tools: Bash(git status:*)`` can run ``git status`` while any other
command is refused as usual.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from coding_agent.context.prompt_templates import (
    TemplateError,
    bash_allowed,
    discover_templates,
    expand_template,
    send_options,
    shell_commands,
)
from coding_agent.context.resources import FrontmatterError, Places
from coding_agent.context.skills import discover_skills, invoke_skill

__all__ = ["CommandBlocked", "Expanded", "RunShell", "expand_prompt_command"]

RunShell = Callable[[str], Awaitable[str]]
"""Runs one shell command in the session and returns its output."""


class CommandBlocked(Exception):
    """A template's shell command needs approval and ``-p`` asks nobody; the message says which
    and how to allow it."""


@dataclass(frozen=True, slots=True)
class Expanded:
    """A prompt as sent: its ``text``, the send's extra members (``{"model"?, "allow"?}``: a
    template's ``model:`` and ``allowed-tools:``) and a ``note`` to print (an alias with no
    model on the conversation's provider)."""

    text: str
    options: dict[str, Any] = field(default_factory=lambda: {})
    note: str | None = None


async def expand_prompt_command(
    prompt: str,
    cwd: Path,
    approve: Literal["allow", "deny"],
    run_shell: RunShell,
    caller: Any = None,
) -> Expanded:
    """``prompt`` with a leading ``/NAME args`` or ``/skill:NAME args`` expanded (module
    docstring); ``caller`` is the conversation's ``config.model`` (what a ``model:`` alias is
    mapped against). Raises :class:`CommandBlocked` or :class:`TemplateError` (bad input: the
    message names the template and what is wrong)."""
    if not prompt.startswith("/"):
        return Expanded(prompt)
    head, _, args = prompt[1:].partition(" ")
    if "\n" in head:
        head, _, rest = head.partition("\n")
        args = f"{rest} {args}" if args else rest
    places = Places.find(cwd)
    if head.startswith("skill:"):
        skill = discover_skills(cwd, places=places).get(head.removeprefix("skill:"))
        if skill is None:
            return Expanded(prompt)
        try:
            return Expanded(invoke_skill(skill, args))
        except (OSError, FrontmatterError) as error:
            raise TemplateError(f"{skill.path}: {error}") from None
    template = discover_templates(cwd, places=places).get(head)
    if template is None:
        return Expanded(prompt)
    outputs: dict[str, str] = {}
    for command in shell_commands(template, args):
        if approve != "allow" and not bash_allowed(template, command):
            raise CommandBlocked(
                f"/{template.name} runs `{command}` first ({template.path}), and -p/--json asks "
                "nobody; allow it with --approve allow, or with allowed-tools: "
                f"Bash({command.split()[0] if command.split() else command}:*) in the template"
            )
        outputs[command] = await run_shell(command)
    text = expand_template(template, args, cwd=cwd, outputs=outputs)
    if not text:
        raise TemplateError(f"/{template.name} expands to nothing")
    options, note = send_options(template, caller, os.environ)
    return Expanded(text, options, note)
