"""Skills: folders of instructions (the Agent Skills format) the model loads when it needs them.

A skill is a folder holding ``SKILL.md``, whose YAML frontmatter names and describes it, plus
whatever extra files its instructions refer to (scripts, references, templates)::

    ~/.config/coding-agent/skills/pdf-tools/
        SKILL.md        ---
                        name: pdf-tools
                        description: Extract text and tables from PDF files. Use when ...
                        ---
                        # PDF tools
                        Run scripts/extract.py FILE ...
        scripts/extract.py

Skills are discovered (:func:`discover_skills`) from, in this order:

1. ``$XDG_CONFIG_HOME/coding-agent/skills/`` (default ``~/.config/coding-agent/skills/``);
2. ``~/.claude/skills/``, 3. ``~/.pi/agent/skills/`` and 4. ``~/.agents/skills/`` (the
   cross-agent folder), when they exist;
5. a trusted project's ``.coding-agent/skills/``, 6. ``.claude/skills/``, 7. ``.pi/skills/``
   and 8. ``.agents/skills/``;
9. the ``skills/`` folder of each Claude Code plugin enabled in your ``~/.claude/settings.json``
   (or a trusted project's ``.claude`` settings: :mod:`coding_agent.settings.claude_plugins`),
   its source shown as ``plugin NAME@MARKETPLACE``;
10. the files and folders the ``skills`` list of pi's ``settings.json`` names
   (:func:`~coding_agent.settings.pi_setup.pi_resource_paths`).

Each root is searched recursively for ``SKILL.md`` (a folder holding one is a skill; its own
sub-folders are not searched further; hidden folders and ``node_modules`` are skipped). pi's
two folders (``~/.pi/agent/skills/`` and ``.pi/skills/``) also take a skill as one Markdown
file directly inside them (``quick-notes.md``, named by its frontmatter or else the file's
name), as pi reads them.

**Progressive disclosure.** Only the names, descriptions and ``SKILL.md`` paths go into the
system prompt (:func:`render_skills_section`); the model reads a skill's body with the ``read``
tool when a task matches its description. ``/skill:NAME [args]`` in the TUI loads one
explicitly (:func:`invoke_skill` builds the message), and so does ``/NAME [args]`` as in Claude
Code, where skills are slash commands, unless a command or prompt template has that name or the
skill says ``user-invocable: false``. A skill with
``disable-model-invocation: true`` is left out of the system prompt and only runs that way.
The listing shows a skill's ``when_to_use`` after its description, as Claude Code's does.
``/NAME`` and ``/skill:NAME`` take the skill's ``model`` and ``allowed-tools`` for the turn they
start, as a command's (:func:`~coding_agent.context.prompt_templates.send_options`; the model
loading a skill by itself reads its file: no grant), and its ``arguments`` name the words typed
after it (``$issue``: :func:`invoke_skill`). With ``context: fork``, ``/NAME`` runs it in a
subagent of its ``agent`` type (:attr:`Skill.fork`, :mod:`coding_agent.context.forks`).
Claude Code's ``hooks``, ``disallowed-tools`` and ``paths`` (:data:`NOT_HONOURED`) and ``!`command``` lines
are one warning per skill, naming each with what happens instead.

**Validation** follows the Agent Skills rules, as pi does: ``name`` is 1–64 characters of
lowercase letters, digits and hyphens (no leading, trailing or doubled hyphen) and should match
the folder's name; ``description`` is required (at most 1024 characters). A name that breaks
the rules or differs from the folder is a warning, and the skill still loads; a missing
description, a missing or non-text name, or frontmatter that is not valid YAML skips the skill
with a warning naming the file, unless every line of it is ``key: value`` (Claude Code's
``argument-hint: [pr-number] [priority]``): then it is read as text, as for a prompt template,
with a warning saying so. Of two skills with one name, the first found wins (a warning
names both files). Nothing here ever raises for a bad skill.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from coding_agent.context.folders import SKILL_FILE, skill_files
from coding_agent.context.prompt_templates import split_arguments, with_unused_arguments
from coding_agent.context.resources import (
    NOT_HONOURED,
    FrontmatterError,
    Places,
    argument_hint,
    argument_names,
    fork_agent,
    not_honoured,
    read_frontmatter,
    read_text,
    tool_rules,
)

__all__ = [
    "MAX_DESCRIPTION",
    "MAX_NAME",
    "NOT_HONOURED",
    "PI_PROJECT_SKILLS",
    "SKILLS_SECTION_KEY",
    "SKILL_FILE",
    "Skill",
    "SkillSet",
    "SubagentSkills",
    "discover_skills",
    "invoke_skill",
    "render_skills_section",
    "skill_roots",
    "skills_section_value",
    "takes_skill_files",
]


def _escape(text: str) -> str:
    """``&``, ``<`` and ``>`` as XML entities (what ``xml.sax.saxutils.escape`` does, without
    importing ``xml.sax`` and, through it, ``urllib.request``: ~10 ms at every start)."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


SKILLS_SECTION_KEY = "skills"
MAX_NAME = 64
MAX_DESCRIPTION = 1024

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

_ARGUMENT = re.compile(r"\$ARGUMENTS\[(?P<at>\d+)\]|\$ARGUMENTS\b|\$(?P<word>\d+)(?!\d)")
"""Claude Code's skill placeholders: ``$ARGUMENTS`` (as typed), ``$ARGUMENTS[N]`` and ``$N``
(the N-th word, counted from 0, quotes grouping words)."""

_INJECTION = re.compile(r"(?:^|\s)!`[^`\n]+`")
"""Claude Code's dynamic context in a skill: ``!`git status``` runs before the model reads it."""


class Skill(msgspec.Struct, frozen=True):
    """One discovered skill."""

    name: str
    description: str
    path: Path
    """Its ``SKILL.md`` (absolute)."""
    source: str
    """The root it was found in, for display (``~/.claude/skills``, ``.coding-agent/skills``)."""
    model_invocable: bool = True
    """False when the frontmatter says ``disable-model-invocation: true``."""
    user_invocable: bool = True
    """False when the frontmatter says ``user-invocable: false``: no ``/NAME`` command (as in
    Claude Code's ``/`` menu); ``/skill:NAME`` still loads it."""
    argument_hint: str = ""
    """``argument-hint`` in the frontmatter (``[pr-number] [priority]``): what its commands'
    arguments are, shown after the name in the palette as Claude Code shows it."""
    when_to_use: str = ""
    """``when_to_use`` in the frontmatter (trigger phrases, example requests): the model's
    listing shows it after the description, as Claude Code's does (the palette shows only the
    description)."""
    arguments: tuple[str, ...] = ()
    """``arguments`` in the frontmatter: ``$name`` in the body is the word typed at that
    position (:func:`invoke_skill`)."""
    model: str | None = None
    """``model`` in the frontmatter: the model of the turn ``/NAME`` starts, as a command's
    (:func:`~coding_agent.context.prompt_templates.send_options`)."""
    allowed_tools: tuple[str, ...] = ()
    """``allowed-tools`` in the frontmatter: permission rules the calls of the turn ``/NAME``
    starts may use without asking, as a command's."""
    fork: str | None = None
    """With ``context: fork``: the subagent type (its ``agent``, default ``general-purpose``)
    that ``/NAME`` runs it in (:mod:`coding_agent.context.forks`); ``None``: it runs in the
    conversation."""

    @property
    def folder(self) -> Path:
        """The skill's folder: relative paths in its instructions start here."""
        return self.path.parent

    @property
    def slash_names(self) -> tuple[str, ...]:
        """The commands that run it as in Claude Code besides ``/skill:NAME``: ``NAME``, and a
        plugin's skill ``PLUGIN:NAME`` too; none for ``user-invocable: false``."""
        if not self.user_invocable:
            return ()
        plugin = self.source.removeprefix("plugin ").partition("@")[0]
        return (
            (self.name, f"{plugin}:{self.name}")
            if self.source.startswith("plugin ")
            else (self.name,)
        )


@dataclass(frozen=True, slots=True)
class SkillSet:
    """What discovery found: the skills (by name, in discovery order) and the warnings."""

    skills: tuple[Skill, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def get(self, name: str) -> Skill | None:
        """The skill called ``name``, or ``None``."""
        return next((skill for skill in self.skills if skill.name == name), None)

    def command(self, name: str) -> Skill | None:
        """The skill the command ``/name`` runs (:attr:`Skill.slash_names`), or ``None``."""
        return next((skill for skill in self.skills if name in skill.slash_names), None)


def skill_roots(places: Places) -> list[Path]:
    """The folders searched for skills, in precedence order (see the module docstring)."""
    roots = [
        places.config / "skills",
        places.claude_user / "skills",
        places.pi_user / "skills",
        places.home / ".agents" / "skills",
        *places.project_dirs(
            ".coding-agent/skills", ".claude/skills", PI_PROJECT_SKILLS, ".agents/skills"
        ),
        *places.pi_skills,
    ]
    seen: set[Path] = set()
    unique: list[Path] = []
    for root in roots:
        key = root.resolve() if root.exists() else root
        if key not in seen:
            seen.add(key)
            unique.append(root)
    return unique


PI_PROJECT_SKILLS = ".pi/skills"
"""A project's pi skills folder (inside it, a ``NAME.md`` file is a skill too)."""


def takes_skill_files(places: Places, root: Path) -> bool:
    """Whether ``root`` is one of pi's skill folders, where a ``.md`` file directly inside is
    a skill of its own (:func:`~coding_agent.context.folders.skill_files`)."""
    return root in (
        places.pi_user / "skills",
        places.project / PI_PROJECT_SKILLS,
        *places.pi_skills,
    )


def _name_problem(name: str) -> str | None:
    if len(name) > MAX_NAME:
        return f"is longer than {MAX_NAME} characters"
    if not _NAME.fullmatch(name):
        return "should use only lowercase letters, digits and single hyphens (a-z, 0-9, -)"
    return None


def _load(path: Path, root: Path, source: str, warnings: list[str]) -> Skill | None:
    try:
        text = read_text(path)
    except OSError as error:
        warnings.append(f"{path}: cannot read the skill: {error.strerror or error}")
        return None
    try:
        meta, body, note = read_frontmatter(text)
    except FrontmatterError as error:
        warnings.append(f"{path}: skill skipped: {error}")
        return None
    if note:
        warnings.append(f"{path}: {note}")
    single_file = path.name != SKILL_FILE  # pi's NAME.md directly in its skills folder
    folder_name = path.stem if single_file else path.parent.name
    raw_name: Any = meta.get("name", folder_name)
    if not isinstance(raw_name, str) or not raw_name.strip():
        warnings.append(f"{path}: skill skipped: 'name' must be a non-empty string")
        return None
    name = raw_name.strip()
    description: Any = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        warnings.append(f"{path}: skill skipped: the frontmatter needs a 'description'")
        return None
    description = " ".join(description.split())
    if (problem := _name_problem(name)) is not None:
        warnings.append(f"{path}: skill name {name!r} {problem}")
    if name != folder_name and path.parent != root and not single_file:
        warnings.append(f"{path}: skill name {name!r} does not match its folder {folder_name!r}")
    if len(description) > MAX_DESCRIPTION:
        warnings.append(
            f"{path}: the description is longer than {MAX_DESCRIPTION} characters (the Agent "
            "Skills limit); the skill loads with all of it"
        )
    when: Any = meta.get("when_to_use")
    ignored = not_honoured(meta)
    fork = fork_agent(meta, ignored)
    if _INJECTION.search(body):
        ignored.append("!`command` lines (they are not run; the model reads them as written)")
    if ignored:
        warnings.append(f"{path}: skill {name!r}: not honoured here: " + "; ".join(ignored))
    disabled = meta.get("disable-model-invocation") is True
    hidden = meta.get("user-invocable") is False
    model: Any = meta.get("model")
    return Skill(
        name, description, path.resolve(), source, model_invocable=not disabled,
        user_invocable=not hidden, argument_hint=argument_hint(meta),
        arguments=argument_names(meta), allowed_tools=tool_rules(meta),
        model=str(model).strip() if model and str(model).strip() != "inherit" else None,
        when_to_use=" ".join(when.split()) if isinstance(when, str) else "", fork=fork,
    )  # fmt: skip


def discover_skills(
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    *,
    places: Places | None = None,
) -> SkillSet:
    """Every skill visible from working folder ``cwd`` (see the module docstring)."""
    places = places if places is not None else Places.find(cwd, env)
    warnings: list[str] = []
    found: dict[str, Skill] = {}
    plugins = places.plugins()
    warnings.extend(plugins.warnings)
    roots = [(root, places.label(root)) for root in skill_roots(places)]
    roots += [(root, p.label) for p in plugins.plugins for root in p.paths("skills")]
    for root, source in roots:
        if root.is_file() and root in places.pi_skills:  # a file pi's settings.json lists
            paths: Iterable[Path] = [root]
            root = root.parent
            source = places.label(root)
        elif root.is_dir():
            paths = skill_files(root, root_files=takes_skill_files(places, root))
        else:
            continue
        for path in paths:
            skill = _load(path, root, source, warnings)
            if skill is None:
                continue
            earlier = found.get(skill.name)
            if earlier is not None:
                warnings.append(
                    f"{skill.path}: skill {skill.name!r} is also defined by {earlier.path}; "
                    "the first one is used"
                )
                continue
            found[skill.name] = skill
    return SkillSet(tuple(found.values()), tuple(warnings))


# -- the system prompt ------------------------------------------------------------------------
def skills_section_value(skills: SkillSet) -> dict[str, Any] | None:
    """The ``skills`` section's value: the skills the model may load (``None``: none)."""
    listed = [
        {
            "name": s.name,
            "description": f"{s.description} {s.when_to_use}".strip(),
            "location": str(s.path),
        }
        for s in skills.skills
        if s.model_invocable
    ]
    return {"skills": listed} if listed else None


def render_skills_section(value: Any) -> str:
    """The section text: how to use skills, then each one's name, description and file."""
    items = value.get("skills", []) if isinstance(value, dict) else []
    lines = [
        "The following skills provide specialized instructions for specific tasks.",
        "When a task matches a skill's description, use the read tool to load its file first "
        "and follow it.",
        "A skill's relative paths, and ${CLAUDE_SKILL_DIR} in it, are relative to (stand for) "
        "the folder of its SKILL.md; use absolute paths in tool calls.",
        "",
        "<available_skills>",
    ]
    for item in items:
        if not isinstance(item, dict):
            continue
        lines += [
            "  <skill>",
            f"    <name>{_escape(str(item.get('name', '')))}</name>",
            f"    <description>{_escape(str(item.get('description', '')))}</description>",
            f"    <location>{_escape(str(item.get('location', '')))}</location>",
            "  </skill>",
        ]
    lines.append("</available_skills>")
    return "\n".join(lines)


# -- /skill:NAME --------------------------------------------------------------------------------
def invoke_skill(skill: Skill, args: str = "") -> str:
    """The user message ``/skill:NAME args`` sends: the skill's body in a ``<skill>`` block,
    with Claude Code's substitutions: ``${CLAUDE_SKILL_DIR}`` is the skill's folder,
    ``$ARGUMENTS`` the arguments as typed, ``$ARGUMENTS[N]`` and ``$N`` the N-th word (from 0),
    and ``$name`` of a name in the frontmatter's ``arguments`` the word at its position (a
    missing word is left as written, as Claude Code does). A body naming no argument gets
    them at its end, inside the block, as ``ARGUMENTS: …``: Claude Code appends them to the
    skill's content so, as it does a command's
    (:func:`~coding_agent.context.prompt_templates.with_unused_arguments`). Raises ``OSError``
    when the file cannot be read any more and
    :class:`~coding_agent.context.resources.FrontmatterError` when it no longer parses."""
    _meta, body, _note = read_frontmatter(read_text(skill.path))
    body = body.strip().replace("${CLAUDE_SKILL_DIR}", str(skill.folder))
    args = args.strip()
    words = split_arguments(args)
    pattern = _argument_pattern(skill.arguments)

    def argument(match: re.Match[str]) -> str:
        named = match.group("name") if skill.arguments else None
        if named is not None:
            index = skill.arguments.index(named)
            return words[index] if index < len(words) else match.group(0)
        index = match.group("at") or match.group("word")
        if index is None:
            return args
        return words[int(index)] if int(index) < len(words) else match.group(0)

    used = bool(pattern.search(body))
    body = with_unused_arguments(pattern.sub(argument, body), args, used=used)
    return (
        f'<skill name="{_escape(skill.name)}" location="{_escape(str(skill.path))}">\n'
        f"References are relative to {skill.folder}.\n\n{body}\n</skill>"
    )


def _argument_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """:data:`_ARGUMENT`, and ``$name`` for each of ``names`` (a skill's ``arguments``; the
    longest first, so ``$issue_id`` is not ``$issue`` followed by ``_id``)."""
    if not names:
        return _ARGUMENT
    named = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    return re.compile(rf"\$(?P<name>{named})(?!\w)|{_ARGUMENT.pattern}")


# -- the ``skills`` harness service ---------------------------------------------------------------
class SubagentSkills:
    """The harness service ``skills`` (facets-subagents' ``SkillSource``, duck-typed): a
    subagent definition's ``skills:`` are preloaded from here. Each call discovers afresh
    (:func:`discover_skills` for the session's folder ``cwd``, trust and plugins included), so
    a skill added or edited meanwhile is the one a new subagent gets."""

    def __init__(self, cwd: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> None:
        self._cwd = cwd
        self._env = None if env is None else dict(env)

    def _find(self, name: str) -> Skill | None:
        found = discover_skills(self._cwd, self._env)
        skill = found.get(name)
        if skill is not None or ":" not in name:
            return skill
        # Claude Code names a plugin's skill "plugin:skill": that plugin's, else any of the name
        plugin, _, bare = name.partition(":")
        ours = [s for s in found.skills if s.name == bare]
        mine = [s for s in ours if s.source.startswith(f"plugin {plugin}@")]
        return (mine or ours or [None])[0]

    def skill(self, name: str) -> dict[str, str] | None:
        """``{"name", "location", "text"}`` of the skill called ``name`` (``text``: the body in
        a ``<skill>`` block, as ``/skill:NAME`` sends it), ``None`` when there is none. Raises
        ``OSError`` or ``ValueError`` (its frontmatter no longer parses) for one that cannot be
        read."""
        skill = self._find(name)
        if skill is None:
            return None
        return {"name": skill.name, "location": str(skill.path), "text": invoke_skill(skill)}

    def names(self) -> list[str]:
        """Every skill's name (for a warning about one not found)."""
        return [skill.name for skill in discover_skills(self._cwd, self._env).skills]
