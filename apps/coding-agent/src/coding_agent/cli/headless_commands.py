"""Prompt templates and skills in ``-p``/``--json``: ``coding-agent -p "/greet Bob"`` sends the
expanded template, as Claude Code and pi do, not the literal text.

A prompt whose first word is ``/NAME`` naming a prompt template (:mod:`coding_agent.context.
prompt_templates`), or else a skill (as in Claude Code; not one saying ``user-invocable:
false``), or ``/skill:NAME`` naming a skill is expanded with the rest as its arguments. A ``/NAME`` or ``/skill:NAME`` that names none is an error naming the closest ones
(:class:`UnknownCommand`, exit 2), as the TUI's "Unknown command"; a first word holding another
``/`` or a ``.`` is a path (``/etc/hosts is odd``) and is sent as written, and ``//`` sends the
rest as text starting with ``/`` (the TUI's escape). A template's
``!`cmd``` commands run through the session's ``!cmd`` runner (the ``bash`` tool's executor, in
the sandbox when it is on) only when nobody needs asking, each decided as a ``bash`` call of it:
the approval feature's ``approval.rules`` service says what it gets (``check_command``: the
session's mode and every rule in force). It runs when that says ``run`` (``auto`` mode, an allow
rule), with ``--approve allow``, or when the template's ``allowed-tools`` allows it; a deny rule
or plan mode stops it in every case, and an ask rule gives way only to ``--approve allow``.
Without the approval feature only ``--approve allow`` and ``allowed-tools`` count (a missing
safety package refuses). Otherwise nothing is sent and the run ends with exit 3 and one line
naming the command and what would let it run, as a blocked tool call does.

A template's ``model:`` and ``allowed-tools:`` go with its prompt (:attr:`Expanded.options`,
:func:`~coding_agent.context.prompt_templates.send_options`): that turn runs on the command's
model and its calls that the ``allowed-tools`` rules cover run without asking, so in ``-p`` a
command with ``allowed-tools: Bash(git status:*)`` can run ``git status`` while any other
command is refused as usual. A skill run as ``/NAME`` or ``/skill:NAME`` brings its own
``model`` and ``allowed-tools`` the same way (as in Claude Code, where commands and skills are one
kind). One with ``context: fork`` (:attr:`Expanded.fork`) runs in a subagent instead, those
applying to it, and its result is the prompt (:mod:`coding_agent.context.forks`).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from coding_agent.context.prompt_templates import (
    PromptTemplate,
    TemplateError,
    bash_allowed,
    discover_templates,
    expand_template,
    send_options,
    shell_commands,
)
from coding_agent.context.resources import FrontmatterError, Places
from coding_agent.context.skills import Skill, discover_skills, invoke_skill
from coding_agent.context.unknown_commands import close_names, waiting_message
from coding_agent.context.waiting import waiting_command

__all__ = [
    "CheckCommand",
    "CommandBlocked",
    "Expanded",
    "RunShell",
    "UnknownCommand",
    "expand_prompt_command",
]

RunShell = Callable[[str], Awaitable[str]]
"""Runs one shell command in the session and returns its output."""

CheckCommand = Callable[[str], Awaitable[Any]]
"""What a ``bash`` call of one command would get in the session, asking nobody: the approval
feature's ``{"verdict": "run"|"ask"|"block", "by": "rule"|"mode"|"repository", "why"}``."""


class UnknownCommand(Exception):
    """``-p "/name …"`` names no prompt template or skill (exit 2); the message names the
    closest ones."""


def _unknown(head: str, names: list[str], cwd: Path) -> str:
    """The error for ``/head`` that names no template or skill: that it is the untrusted
    project's command (it loads with ``--trust``), else the closest names."""
    place = waiting_command(cwd, head)
    if place is not None:
        return waiting_message(head, place, "--trust (or /trust in the TUI)")
    close = close_names(head, names)
    hint = f"; did you mean {', '.join(f'/{n}' for n in close)}?" if close else ""
    return (
        f"unknown command /{head}{hint} (-p expands prompt templates and skills; "
        "start the prompt with // to send text beginning with /)"
    )


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
    fork: tuple[str, str] | None = None
    """``(command name, agent type)`` of a command or skill with ``context: fork``: ``text`` is
    its subagent's prompt, not the conversation's (:mod:`coding_agent.context.forks`)."""


async def expand_prompt_command(
    prompt: str,
    cwd: Path,
    approve: Literal["allow", "deny"],
    run_shell: RunShell,
    caller: Any = None,
    check: CheckCommand | None = None,
) -> Expanded:
    """``prompt`` with a leading ``/NAME args`` or ``/skill:NAME args`` expanded (module
    docstring); ``caller`` is the conversation's ``config.model`` (what a ``model:`` alias is
    mapped against); ``check`` asks the approval feature what a ``!`` line gets (module
    docstring; ``None`` without the feature). Raises :class:`CommandBlocked` or :class:`TemplateError` (bad input: the
    message names the template and what is wrong)."""
    if prompt.startswith("//"):  # as in the TUI: `//` sends text starting with `/`
        return Expanded(prompt[1:])
    if not prompt.startswith("/"):
        return Expanded(prompt)
    head, _, args = prompt[1:].partition(" ")
    if "\n" in head:
        head, _, rest = head.partition("\n")
        args = f"{rest} {args}" if args else rest
    places = Places.find(cwd)
    if head.startswith("skill:"):
        skills = discover_skills(cwd, places=places)
        skill = skills.get(head.removeprefix("skill:"))
        if skill is None:
            raise UnknownCommand(_unknown(head, [f"skill:{k.name}" for k in skills.skills], cwd))
        return _skill(skill, args, caller)
    templates = discover_templates(cwd, places=places)
    template = templates.get(head)
    if template is None:
        if not head or "/" in head or "." in head:  # a path (/etc/hosts …), not a command
            return Expanded(prompt)
        skills = discover_skills(cwd, places=places)
        skill = skills.command(head)
        if skill is not None:  # Claude Code's /NAME (a plugin's /PLUGIN:NAME) of a skill
            return _skill(skill, args, caller)
        names = [
            *(t.name for t in templates.templates),
            *(n for k in skills.skills for n in k.slash_names),
        ]
        raise UnknownCommand(_unknown(head, names, cwd))
    outputs: dict[str, str] = {}
    for command in shell_commands(template, args):
        await _check(template, command, approve, check)
        outputs[command] = await run_shell(command)
    text = expand_template(template, args, cwd=cwd, outputs=outputs)
    if not text:
        raise TemplateError(f"/{template.name} expands to nothing")
    options, note = send_options(template, caller, os.environ)
    fork = (template.name, template.fork) if template.fork else None
    return Expanded(text, options, note, fork)


def _skill(skill: Skill, args: str, caller: Any) -> Expanded:
    """``skill`` run with ``args``: its text, and its ``model`` and ``allowed-tools`` for the
    turn (:func:`~coding_agent.context.prompt_templates.send_options`)."""
    try:
        text = invoke_skill(skill, args)
    except (OSError, FrontmatterError) as error:
        raise TemplateError(f"{skill.path}: {error}") from None
    options, note = send_options(skill, caller, os.environ)
    return Expanded(text, options, note, (skill.name, skill.fork) if skill.fork else None)


async def _check(
    template: PromptTemplate,
    command: str,
    approve: Literal["allow", "deny"],
    check: CheckCommand | None,
) -> None:
    """Raise :class:`CommandBlocked` unless ``command`` (a ``!`` line of ``template``) may run
    asking nobody, as a ``bash`` call of it would (module docstring)."""
    first = command.split()[0] if command.split() else command
    head = f"/{template.name} runs `{command}` first ({template.path}), and"
    found: Any = await check(command) if check is not None else None
    verdict = found.get("verdict") if isinstance(found, dict) else None
    why = str(found.get("why") or "") if isinstance(found, dict) else ""
    if verdict == "block":  # a deny rule, plan mode: as a bash call, whatever --approve says
        raise CommandBlocked(f"{head} {why}, so it is not run")
    if approve == "allow" or verdict == "run":
        return
    if verdict == "ask" and found.get("by") == "rule":  # only a person (or --approve) overrides
        raise CommandBlocked(f"{head} -p/--json asks nobody ({why}); allow it with --approve allow")
    if verdict == "ask" and found.get("by") == "repository":  # its git runs a program
        raise CommandBlocked(
            f"{head} -p/--json asks nobody ({why}); trust the project (--trust, or /trust in "
            "the TUI) or allow it with --approve allow"
        )
    if bash_allowed(template, command):
        return
    ways = (
        f"--permission-mode auto, an allow rule Bash({first}:*) in your settings, "
        if check is not None
        else ""
    )
    raise CommandBlocked(
        f"{head} -p/--json asks nobody; allow it with --approve allow, {ways}or with "
        f"allowed-tools: Bash({first}:*) in the template"
    )
