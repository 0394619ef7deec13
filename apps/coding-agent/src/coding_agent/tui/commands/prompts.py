"""The TUI commands of the user's prompt material: skills, prompt templates and ``/context``.

* ``/skill:NAME [args]`` for every discovered skill (:mod:`coding_agent.context.skills`), and
  ``/NAME`` when no command has that name: sends the skill's instructions and the arguments;
* ``/skills`` lists the skills with where each comes from (picking one runs it), after a fresh
  scan, so a skill added meanwhile gets its commands;
* ``/NAME [args]`` for every prompt template (:mod:`coding_agent.context.prompt_templates`): sends the
  template with the arguments substituted (its ``!`cmd``` lines run first:
  :mod:`.template_shell`), its ``model:`` and ``allowed-tools:`` applying to the turn it starts;
* ``/context`` shows how the context window is spent (:mod:`.context_window`).

A skill's or a template's ``argument-hint`` is its command's argument (:class:`chord.textual.Arg`
``hint``): the palette shows it after the name, dimmed, and the editor after ``/NAME `` while
nothing is typed yet, as Claude Code does (:mod:`coding_agent.tui.widgets.palette`).

This module registers them all (:func:`prompt_commands_facet`) and holds the skill and template
commands; what they act on is :class:`~.prompt_target.PromptsTarget`. Discovery problems
(frontmatter that is not YAML, a skill without a description, a template's name taken) are
warning toasts naming the file; nothing raises. A prompt sent mid-turn queues. A skill or template
with ``context: fork`` runs in a subagent of its ``agent`` type and its result is what is sent
(:mod:`coding_agent.context.forks`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chord import Context, Facet, FacetEnvironment, define_facet
from chord.textual import (
    Arg,
    Arguments,
    Choice,
    Command,
    CommandError,
    CommandOutcome,
    Notice,
    Tui,
    register_commands,
)
from coding_agent.context.forks import ForkError, run_fork
from coding_agent.context.prompt_templates import (
    PromptTemplate,
    TemplateError,
    discover_templates,
    send_options,
)
from coding_agent.context.resources import FrontmatterError, Places
from coding_agent.context.skills import Skill, discover_skills, invoke_skill
from coding_agent.contracts import (
    APPROVAL_RULES,
    SUBAGENT_FORKS,
    ShellService,
    WorkerStatusService,
)
from coding_agent.tui.commands.context_window import (
    context,
    context_rows,
    sent_system,
    skipped_rows,
)
from coding_agent.tui.commands.prompt_target import PromptsTarget
from coding_agent.tui.commands.template_shell import expand_in_tui
from coding_agent.tui.conversation_client import RemoteConversationClient

__all__ = [
    "PROMPT_COMMANDS",
    "PROMPT_COMMANDS_FACET_ID",
    "PromptsTarget",
    "SkillTarget",
    "TemplateTarget",
    "approval_rules_facet",
    "context",
    "context_rows",
    "expand_in_tui",
    "list_skills",
    "prompt_commands_facet",
    "prompt_facets",
    "refresh",
    "run_skill",
    "run_template",
    "sent_system",
    "skipped_rows",
    "subagent_forks_facet",
]

PROMPT_COMMANDS_FACET_ID = "@coding-agent/prompt-commands"


@dataclass(frozen=True, slots=True)
class SkillTarget:
    """The target of one ``/skill:NAME`` command."""

    prompts: PromptsTarget
    skill: Skill


@dataclass(frozen=True, slots=True)
class TemplateTarget:
    """The target of one prompt template's command."""

    prompts: PromptsTarget
    template: PromptTemplate


async def run_skill(target: SkillTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/skill:NAME [args]``: send the skill's instructions and the arguments as a prompt."""
    try:
        text = invoke_skill(target.skill, args.text)
    except (OSError, FrontmatterError) as error:
        raise CommandError(f"{target.skill.path}: {error}") from error
    prompts = target.prompts
    options, note = send_options(target.skill, _caller(prompts), os.environ)
    if note is not None:
        prompts.tui.notify(note, severity="warning")
    await _send(prompts, target.skill.name, target.skill.fork, text, options, ctx)
    return None


async def _send(
    prompts: PromptsTarget, name: str, fork: str | None, text: str, options: dict[str, Any],
    ctx: Context,
) -> None:  # fmt: skip
    """Send command ``/name``'s ``text`` with its ``options`` to the conversation; with
    ``context: fork`` (``fork``: the agent type), run it in a subagent first and send its result
    instead (:mod:`coding_agent.context.forks`)."""
    if fork is not None:
        conversation_id = prompts.client.conversation_id
        if conversation_id is None:
            raise CommandError(f"/{name}: no conversation is open yet; try again in a moment")
        prompts.tui.notify(f"/{name} runs in a subagent ({fork}); its result follows")
        try:
            text = await run_fork(
                prompts.forks[-1] if prompts.forks else None, name, fork, text,
                conversation_id, options, ctx,
            )  # fmt: skip
        except ForkError as error:
            raise CommandError(str(error)) from error
        options = {}  # they applied to the subagent
    await prompts.client.send(text, "prompt", ctx, options)


def _caller(prompts: PromptsTarget) -> Any:
    """The conversation's ``config.model`` (``{"provider", "modelId"}``): what a command's or a
    skill's ``model:`` alias is mapped against."""
    view = prompts.client.view.value
    config = view.get("config") if isinstance(view, dict) else None
    return config.get("model") if isinstance(config, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


async def run_template(target: TemplateTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/NAME [args]``: send the template with the arguments substituted (its ``!`cmd```
    commands run first: :func:`expand_in_tui`), with its ``model:`` and ``allowed-tools:`` for
    the turn it starts (:func:`~coding_agent.context.prompt_templates.send_options`)."""
    prompts = target.prompts
    try:
        text = await expand_in_tui(
            target.template, args.text, prompts.tui, prompts.shell, prompts.client,
            prompts.folder, ctx, prompts.rules[-1] if prompts.rules else None,
        )  # fmt: skip
    except TemplateError as error:
        raise CommandError(str(error)) from error
    if text is None:  # the user said no to its commands
        return None
    if not text:
        return Notice(f"/{target.template.name} expands to nothing", "warning")
    options, note = send_options(target.template, _caller(prompts), os.environ)
    if note is not None:
        prompts.tui.notify(note, severity="warning")
    await _send(prompts, target.template.name, target.template.fork, text, options, ctx)
    return None


def _hinted(hint: str) -> tuple[Arg, ...] | None:
    """The arguments of a skill's or a template's command: the rest of the line, free text
    (``None`` declares nothing), shown as its ``argument-hint`` when it has one (the palette
    shows it after the name: :attr:`chord.textual.SlashCommand.usage`)."""
    return (Arg("arguments", optional=True, rest=True, hint=hint),) if hint else None


def _skill_command(skill: Skill, name: str | None = None) -> Command[SkillTarget]:
    name = name or f"skill:{skill.name}"
    return Command(name, skill.description, run_skill, args=_hinted(skill.argument_hint))


def _add(target: PromptsTarget, command: Command[Any], bound: Any) -> ValueError | None:
    """Register ``command`` bound to ``bound``; the error when its name is taken."""
    try:
        target.registered.append(register_commands(target.tui, [command], bound))
    except ValueError as error:
        return error
    return None


def _template_command(template: PromptTemplate) -> Command[TemplateTarget]:
    args = _hinted(template.argument_hint)
    return Command(template.name, template.description, run_template, args=args)


def refresh(target: PromptsTarget) -> None:
    """Scan again and (re-)register every skill and template command; each new problem found
    (frontmatter that is not YAML, a name taken) is a warning toast, once."""
    target.unregister_all()
    places = Places.find(target.folder)
    skills = discover_skills(target.folder, places=places)
    templates = discover_templates(target.folder, places=places)
    target.skills = skills
    problems = [*([places.problem] if places.problem else []), *skills.warnings]
    problems += templates.warnings
    for skill in skills.skills:
        if (error := _add(target, _skill_command(skill), SkillTarget(target, skill))) is not None:
            problems.append(f"{skill.path}: no /skill: command: {error}")
    for template in templates.templates:
        error = _add(target, _template_command(template), TemplateTarget(target, template))
        if error is not None and not template.alias:  # a plugin's plain name: /PLUGIN:NAME stays
            problems.append(f"{template.path}: prompt template not added: {error}")
    for one, name in ((k, n) for k in skills.skills for n in k.slash_names):
        # Claude Code's /NAME; a command or template of that name keeps it (/skill:NAME runs it)
        _add(target, _skill_command(one, name), SkillTarget(target, one))
    for problem in problems:
        if problem not in target.warned:
            target.warned.add(problem)
            target.tui.notify(problem, severity="warning")


NO_SKILLS = """No skills found. Put one in
  ~/.config/coding-agent/skills/NAME/SKILL.md
Also read: ~/.claude/skills, ~/.pi/agent/skills,
  ~/.agents/skills, and a trusted project's
  .coding-agent/skills, .claude/skills, .pi/skills
  and .agents/skills"""
"""What ``/skills`` shows when there is none: where a skill goes, one folder group a line."""


async def list_skills(target: PromptsTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/skills``: scan afresh, list the skills with where each comes from; picking one runs
    it."""
    refresh(target)
    skills = target.skills.skills
    if not skills:
        # a dialog, as /hooks and /mcp show theirs: a toast is narrow and broke the paths
        modal = await target.tui.acquire_modal(ctx)
        try:
            await modal.choose("Skills (0)", [Choice("close", "Close")], body=NO_SKILLS)
        finally:
            modal.close()
        return None
    choices = [
        Choice(
            s.name,
            f"{s.name} — {s.description}  ({s.source}"
            f"{', not in the system prompt' if not s.model_invocable else ''})",
        )
        for s in skills
    ]
    modal = await target.tui.acquire_modal(ctx)
    try:
        picked = await modal.choose(
            f"Skills ({len(skills)})",
            choices,
            body="Enter runs the skill now (/skill:NAME); Escape closes.",
        )
    finally:
        modal.close()
    skill = target.skills.get(picked) if picked is not None else None
    if skill is None:
        return None
    return await run_skill(SkillTarget(target, skill), Arguments(), ctx)


PROMPT_COMMANDS: tuple[Command[PromptsTarget], ...] = (
    Command("skills", "List the skills (and where each comes from)", list_skills),
    Command(
        "context",
        "Show how the context window is spent: system prompt, tools, messages, free space",
        context,
    ),
)
"""``/skills`` and ``/context``; the ``/skill:`` and template commands are registered per
file found (:func:`refresh`)."""


def approval_rules_facet(rules: list[Any]) -> Facet:
    """A facet handing the approval feature's ``approval.rules`` service to ``rules`` (the list
    :func:`prompt_commands_facet` gets) once active; apart, so those never wait for it."""
    return _handing("@coding-agent/prompt-command-rules", APPROVAL_RULES, rules)


def subagent_forks_facet(forks: list[Any]) -> Facet:
    """A facet handing the subagents feature's ``subagents.fork`` service to ``forks`` (the list
    :func:`prompt_commands_facet` gets) once active: a command with ``context: fork`` runs
    through it; apart, so the commands never wait for the feature."""
    return _handing("@coding-agent/prompt-command-forks", SUBAGENT_FORKS, forks)


def _handing(facet_id: str, token: Any, into: list[Any]) -> Facet:
    """The facet ``facet_id`` that puts the service ``token`` in ``into`` while it is active."""

    @define_facet(facet_id)
    def setup(env: FacetEnvironment) -> None:
        service = env.use(token)
        env.on_activate(lambda: into.append(service))
        env.own(lambda: into.remove(service) if service in into else None)

    return setup


def prompt_facets(
    client: RemoteConversationClient,
    cwd: str | os.PathLike[str],
    rescans: list[Callable[[], None]],
    packages: set[str],
) -> list[Facet]:
    """:func:`prompt_commands_facet` with what the session's features (``packages``, their
    package names) give it: the approval feature's rules (a template's ``!`cmd``` is decided as
    a ``bash`` call of it: :func:`approval_rules_facet`) and the subagents feature's runs (a
    command with ``context: fork``: :func:`subagent_forks_facet`)."""
    rules: list[Any] = []
    forks: list[Any] = []
    facets: list[Facet] = []
    if "facets-approval" in packages:
        facets.append(approval_rules_facet(rules))
    if "facets-subagents" in packages:
        facets.append(subagent_forks_facet(forks))
    return [*facets, prompt_commands_facet(client, cwd, rescans, rules, forks)]


def prompt_commands_facet(
    client: RemoteConversationClient,
    cwd: str | os.PathLike[str],
    rescans: list[Callable[[], None]] | None = None,
    rules: list[Any] | None = None,
    forks: list[Any] | None = None,
) -> Facet:
    """The facet registering ``/skills``, ``/skill:NAME``, the prompt templates and
    ``/context`` for the project in ``cwd`` (module docstring). It adds its scan to
    ``rescans`` while active (``/trust`` calls it: a trusted project's commands appear at
    once)."""
    folder = Path(cwd)

    @define_facet(PROMPT_COMMANDS_FACET_ID)
    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)
        target = PromptsTarget(
            client, tui, env.use(ShellService), folder, status=env.use(WorkerStatusService)
        )
        if rules is not None:
            target.rules = rules
        if forks is not None:
            target.forks = forks

        def rescan() -> None:
            refresh(target)

        def activate() -> None:
            env.own(register_commands(tui, PROMPT_COMMANDS, target))
            refresh(target)
            if rescans is not None:
                scans = rescans
                scans.append(rescan)
                env.own(lambda: scans.remove(rescan))
            env.own(target.unregister_all)

        env.on_activate(activate)

    return setup
