"""The TUI commands of the user's prompt material: skills, prompt templates and ``/context``.

* ``/skill:NAME [args]`` for every discovered skill (:mod:`coding_agent.context.skills`), and
  ``/NAME`` when no command has that name: sends the skill's instructions and the arguments;
* ``/skills`` lists the skills with where each comes from (picking one runs it), after a fresh
  scan, so a skill added meanwhile gets its commands;
* ``/NAME [args]`` for every prompt template (:mod:`coding_agent.context.prompt_templates`): sends the
  template with the arguments substituted, its ``model:`` and ``allowed-tools:`` applying to
  the turn it starts; the palette shows its description and argument hint;
* ``/context`` shows how the context window is spent, as Claude Code's does: a bar, the system
  prompt by section (each memory file with its size and why it was read), the tools (sizes from
  ``tools(ctx)`` of :mod:`coding_agent.worker.status`), the conversation and the free space
  (:mod:`.context_budget`); picking a row shows its text.
  It shows the system prompt last sent (the newest ``pi.system`` entry; before the first
  request, a preview from the files as they are now), then one row per ``AGENTS.md`` /
  ``CLAUDE.md`` above the project *not* read, with why (:func:`~coding_agent.context.
  context_files.context_file_problem`).

Discovery problems (frontmatter that is not YAML, a skill without a description, a template's
name taken) are warning toasts naming the file; nothing raises. A prompt sent mid-turn queues.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
    TuiService,
    register_commands,
)
from coding_agent.context.context_files import SkippedFile, scan_context_files
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
from coding_agent.context.skills import Skill, SkillSet, discover_skills, invoke_skill
from coding_agent.context.system_prompt import (
    SECTION_ORDER,
    build_sections,
    estimate_tokens,
    prompt_sections,
)
from coding_agent.contracts import APPROVAL_RULES, ShellService, WorkerStatusService
from coding_agent.tui.commands.context_budget import bar, budget
from coding_agent.tui.conversation_client import RemoteConversationClient, WorkerUnavailable
from coding_agent.tui.document import model_label

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
    "refresh",
    "run_skill",
    "run_template",
    "sent_system",
    "skipped_rows",
]

PROMPT_COMMANDS_FACET_ID = "@coding-agent/prompt-commands"


def sent_system(view: Any) -> dict[str, Any] | None:
    """The ``data`` of the newest ``pi.system`` entry of ``view`` (its full system state:
    ``sections`` by key with ``rendered`` text, and ``tools``), or ``None``."""
    entries = view.get("entries") if isinstance(view, dict) else None
    for entry in reversed(entries if isinstance(entries, list) else []):
        if isinstance(entry, dict) and entry.get("kind") == "pi.system":
            data = entry.get("data")
            if isinstance(data, dict) and isinstance(data.get("sections"), dict):
                return data
    return None


def _source(key: str, value: Any) -> str:
    """Where section ``key`` with ``value`` came from, for display."""
    data = value if isinstance(value, dict) else {}
    if key in ("system", "append-system"):
        return str(data.get("path") or "built-in default")
    files = data.get("files")
    if isinstance(files, list):
        return ", ".join(str(f.get("path")) for f in files if isinstance(f, dict))
    skills = data.get("skills")
    if isinstance(skills, list):
        return f"{len(skills)} skill{'s' if len(skills) != 1 else ''}"
    servers = data.get("servers")  # facets-mcp's mcp-instructions
    if isinstance(servers, list):
        names = [str(s.get("name")) for s in servers if isinstance(s, dict)]
        return "MCP server" + ("s " if len(names) != 1 else " ") + ", ".join(names)
    return ""


def context_rows(
    sections: Mapping[str, Any], tools: list[str], indent: str = ""
) -> list[tuple[str, int, str, str]]:
    """``(key, tokens, source, text)`` of every section (its memory files below it, indented
    once more), then one row for the tools (when ``tools``); keys start with ``indent``."""
    rows: list[tuple[str, int, str, str]] = []
    for key, state in sections.items():
        state = state if isinstance(state, dict) else {}
        text = str(state.get("rendered", ""))
        rows.append(
            (
                f"{indent}{key}",
                estimate_tokens(f"## {key}\n{text}"),
                _source(key, state.get("value")),
                text,
            )
        )
        value = state.get("value")
        files = value.get("files") if key == "context-files" and isinstance(value, dict) else None
        for item in files if isinstance(files, list) else ():  # each memory file, and why
            if isinstance(item, dict):
                content = str(item.get("content", ""))
                why = str(item.get("reason") or "")
                rows.append(
                    (
                        f"{indent}  {item.get('path', '?')}",
                        estimate_tokens(content),
                        why,
                        f"{item.get('path', '?')}"
                        + (f" ({why})" if why else "")
                        + f"\n\n{content}",
                    )
                )
    if tools:
        rows.append(("tools", 0, f"{len(tools)}: {', '.join(tools)}", "\n".join(tools)))
    return rows


def skipped_rows(skipped: Sequence[SkippedFile]) -> list[tuple[str, int, str, str]]:
    """One ``/context`` row per context file that was not read: ``(key, 0, source, text)``."""
    return [
        (
            f"not read: {skip.path}",
            0,
            skip.reason,
            f"{skip.path} is not part of the system prompt: {skip.reason}.\n\nOutside the "
            "project, memory files (AGENTS.md, CLAUDE.md and their @imports) are read only from "
            "folders you own that no other user can write to, and a project's files import only "
            "files inside the project.",
        )
        for skip in skipped
    ]


def _preview(cwd: str | os.PathLike[str]) -> dict[str, Any]:
    built = build_sections(cwd)
    renderers = prompt_sections()
    sections: dict[str, Any] = {}
    for key in SECTION_ORDER:
        value = built.values.get(key)
        if value is not None:
            sections[key] = {"value": value, "rendered": renderers[key].render(value)}
    return {"sections": sections, "tools": []}


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


@dataclass(slots=True)
class PromptsTarget:
    """What the prompt commands act on: the conversation client (prompts are sent to it), the
    TUI, the project folder, and what the last scan found (:func:`refresh`)."""

    client: RemoteConversationClient
    tui: TuiService
    shell: Any  # the worker's ShellService (a remote service handle): a template's !`cmd`
    folder: Path
    status: Any = None  # the worker's WorkerStatusService: /context's tool sizes
    skills: SkillSet = field(default_factory=SkillSet)
    registered: list[Callable[[], None]] = field(default_factory=lambda: [])
    warned: set[str] = field(default_factory=lambda: set())
    rules: list[Any] = field(default_factory=lambda: [])
    """The approval feature's ``approval.rules`` service once it is active (filled by
    :func:`approval_rules_facet`); empty without the feature."""

    def unregister_all(self) -> None:
        """Drop every ``/skill:`` and template command registered so far."""
        for unregister in self.registered:
            unregister()
        self.registered.clear()


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
    await target.prompts.client.send(text, "prompt", ctx)
    return None


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
    view = prompts.client.view.value
    config = view.get("config") if isinstance(view, dict) else None
    caller = config.get("model") if isinstance(config, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    options, note = send_options(target.template, caller, os.environ)
    if note is not None:
        prompts.tui.notify(note, severity="warning")
    await prompts.client.send(text, "prompt", ctx, options)
    return None


def _skill_command(skill: Skill, name: str | None = None) -> Command[SkillTarget]:
    return Command(name or f"skill:{skill.name}", skill.description, run_skill, args=None)


def _add(target: PromptsTarget, command: Command[Any], bound: Any) -> ValueError | None:
    """Register ``command`` bound to ``bound``; the error when its name is taken."""
    try:
        target.registered.append(register_commands(target.tui, [command], bound))
    except ValueError as error:
        return error
    return None


def _template_command(template: PromptTemplate) -> Command[TemplateTarget]:
    hint = template.argument_hint
    args = (Arg("arguments", optional=True, rest=True, hint=hint),) if hint else None
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


async def _tool_sizes(target: PromptsTarget, ctx: Context) -> dict[str, int]:
    """Each registered tool's definition in tokens, from the worker (``{}`` when it cannot
    say: an older worker, or none)."""
    tools = getattr(target.status, "tools", None)
    if tools is None:
        return {}
    try:
        sizes = await tools(ctx)
    except Exception:  # the worker went away, or predates tools(): sizes unknown
        return {}
    return {str(k): int(v) for k, v in sizes.items()} if isinstance(sizes, dict) else {}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


def _unused_report(reported: int) -> str:
    """Why the provider's last report is not ``/context``'s total (``reported``: 0 for none)."""
    if not reported:
        return "nothing was measured yet"
    return (
        f"the provider's last report, {reported:,} tokens (the footer's ctx % and /cost), is "
        "smaller than the system prompt and tools it was sent with, so it cannot be the total"
    )


async def context(target: PromptsTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/context``: the context window's budget (system prompt with its sections and memory
    files, tools, conversation, free space; :mod:`.context_budget`), each row opening its
    text."""
    view = target.client.view.value
    data = sent_system(view)
    preview = data is None
    if data is None:
        data = _preview(target.folder)
    tools = [t for t in data.get("tools", []) if isinstance(t, str)]
    sections = context_rows(data["sections"], [], indent="  ")
    system = sum(tokens for key, tokens, _, _ in sections if not key.startswith("    "))
    sizes = await _tool_sizes(target, ctx)
    if preview and not tools:  # nothing sent yet: the worker's tools are what will be
        tools = list(sizes)
    tool_rows = [(f"  {name}", sizes.get(name, 0), "", name) for name in tools]
    tool_tokens = sum(tokens for _, tokens, _, _ in tool_rows)
    session = target.client.session
    window = session.context_window
    spent = budget(view, system, tool_tokens, window)
    size = spent.conversation
    files = sum(1 for key, _, _, _ in sections if key.startswith("    "))
    model = model_label(view, session.model)
    rows: list[tuple[str, int, str, str]] = [  # the budget first, then its parts in detail
        (
            "System prompt",
            system,
            f"{len(data['sections'])} sections"
            + (f", {files} memory file{'s' if files != 1 else ''} among them" if files else ""),
            "",
        ),
        ("Tools", tool_tokens, f"{len(tools)} tools, sent beside the system prompt", ""),
        ("Messages", spent.messages, size.describe(), ""),
    ]
    if spent.free is not None and window:
        rows.append(("Free space", spent.free, f"of {model}'s {window:,}-token window", ""))
    rows += [*sections, *tool_rows]
    try:
        rows += skipped_rows(scan_context_files(target.folder).skipped)
    except OSError:  # the folder is not on this machine (a remote session)
        pass
    texts = {key: text for key, _, _, text in rows}
    texts["System prompt"] = "\n\n".join(
        f"## {key.strip()}\n{text}" for key, _, _, text in sections if not key.startswith("    ")
    )
    texts["Tools"] = "\n".join(f"{name}  ~{sizes.get(name, 0):,} tokens" for name in tools)
    texts["Messages"] = (
        f"The conversation in context: {size.describe()}, ~{spent.messages:,} tokens."
        + (
            f" The last request measured {spent.measured:,} tokens in all (the footer's "
            "ctx %); the messages are that less the system prompt and the tools, plus what "
            "was added since."
            if spent.measured
            else f" Estimated at 4 characters a token: {_unused_report(spent.reported)}."
        )
    )
    if "Free space" in texts:
        texts["Free space"] = (
            f"{spent.free:,} of {window:,} tokens are free. When the context fills up, "
            "/compact summarises the older part (it also runs by itself near the limit)."
        )
    used = f"~{spent.used:,}" + ("" if spent.measured else " (estimated)")
    if window and spent.percent is not None:
        title = (
            f"Context: {used} of {window:,} tokens ({spent.percent:.0f}%)  "
            f"{bar(spent.used, window)}"
        )
    else:
        title = f"Context: {used} tokens ({model}'s context window is not known)"
    when = (
        "Preview: nothing has been sent yet; this is what the next request will hold."
        if preview
        else "The system prompt and tools the model was sent with its latest request."
    )
    choices = [
        Choice(
            key,
            "  ".join(
                part for part in (key, f"~{tokens:,} tokens" if tokens else "", source) if part
            ),
        )
        for key, tokens, source, _ in rows
    ]
    modal = await target.tui.acquire_modal(ctx)
    try:
        picked = await modal.choose(
            title,
            choices,
            body=f"{when} Sizes are estimates (4 characters a token) where the provider did "
            "not measure them"
            + (
                ""
                if spent.measured or not spent.reported
                else f" ({_unused_report(spent.reported)})"
            )
            + ". Enter shows a row.",
        )
        if picked is not None and picked in texts:
            await modal.confirm(picked.strip(), texts[picked], yes="Close", no="Back")
    finally:
        modal.close()
    return None


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

    @define_facet("@coding-agent/prompt-command-rules")
    def setup(env: FacetEnvironment) -> None:
        service = env.use(APPROVAL_RULES)
        env.on_activate(lambda: rules.append(service))
        env.own(lambda: rules.remove(service) if service in rules else None)

    return setup


def prompt_commands_facet(
    client: RemoteConversationClient,
    cwd: str | os.PathLike[str],
    rescans: list[Callable[[], None]] | None = None,
    rules: list[Any] | None = None,
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
