"""The sections ``coding-agent config`` prints after the settings: what a session started in
this folder picks up, each item with the file it comes from, read through the loaders the
session itself uses so ``config`` can never disagree with a session.

* ``context files`` — the ``CLAUDE.md`` / ``AGENTS.md`` files (and their ``@imports``, rules,
  auto memory) a session loads at start (:func:`~coding_agent.context.context_files.
  scan_context_files`), and the ones it skips with why;
* ``skills`` and ``commands`` — :func:`~coding_agent.context.skills.discover_skills` and
  :func:`~coding_agent.context.prompt_templates.discover_templates` (Claude Code's
  ``.claude/skills`` and ``.claude/commands``, pi's folders, this agent's own), an untrusted
  project's folders counted as ``waiting for /trust``
  (:func:`~coding_agent.context.waiting.waiting_for_trust`);
* ``hooks``, ``agents``, ``mcp`` — owned by the feature packages (facets-hooks,
  facets-subagents, facets-mcp), which the app never imports: each package's ``"config"``
  facet (its plugin's ``chord_facets("config")``) is hosted beside the local service
  ``config.sections`` (:data:`CONFIG_SECTIONS`), whose ``services()`` are the harness services
  a session's features read at start (:func:`~coding_agent.settings.project_services.
  project_services`) and whose ``add`` takes the feature's section.

A section is JSON: ``{"title", "items": [{"name", "source", "state"}], "problems": [str]}``;
``state`` is ``loaded``/``enabled``, ``waiting for /trust``, ``shadowed by FILE`` or why a file
is not read, and each problem names its file and the fix, as the session warns. Listing runs
nothing: no hook, no MCP server, no command's ``!`` line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from chord import define_service

__all__ = [
    "CONFIG_HOST",
    "CONFIG_SECTIONS",
    "ORDER",
    "app_sections",
    "config_sections",
    "print_sections",
    "shorten",
]

CONFIG_HOST = "config"
"""The host kind whose facets list what a session loads (``chord_facets("config")``)."""

CONFIG_SECTIONS = define_service("config.sections", local=True)
"""The local service the features' ``"config"`` facets use, by id (module docstring)."""

ORDER = ("context files", "hooks", "agents", "skills", "commands", "mcp")
"""The sections in the order they are printed (any other after them)."""

WAITING = "waiting for /trust"

Section = dict[str, Any]


def _section(title: str) -> Section:
    return {"title": title, "items": [], "problems": []}


def app_sections(cwd: Path, env: Mapping[str, str] | None = None) -> list[Section]:
    """The sections the app owns (context files, skills, commands), module docstring."""
    from coding_agent.context.context_files import scan_context_files
    from coding_agent.context.prompt_templates import discover_templates
    from coding_agent.context.resources import Places
    from coding_agent.context.skills import discover_skills
    from coding_agent.context.waiting import waiting_for_trust

    places = Places.find(cwd, env)
    context = _section("context files")
    scanned = scan_context_files(cwd, env=env)
    for found in scanned.files:
        context["items"].append({"name": found.path, "source": found.reason, "state": "loaded"})
    for skipped in scanned.skipped:
        context["items"].append(
            {"name": skipped.path, "source": "", "state": f"not read: {skipped.reason}"}
        )
    skills = _section("skills")
    found_skills = discover_skills(cwd, env, places=places)
    for skill in found_skills.skills:
        names = ", ".join(f"/{name}" for name in skill.slash_names) or f"/skill:{skill.name}"
        skills["items"].append(
            {"name": f"{skill.name} ({names})", "source": str(skill.path), "state": "loaded"}
        )
    skills["problems"] += found_skills.warnings
    commands = _section("commands")
    templates = discover_templates(cwd, env, places=places)
    for template in templates.templates:
        commands["items"].append(
            {"name": f"/{template.name}", "source": str(template.path), "state": "loaded"}
        )
    commands["problems"] += templates.warnings
    if not places.trusted:
        if places.problem is not None:
            commands["problems"].append(places.problem)
        for waiting in waiting_for_trust(places.project):
            into = {"command": commands, "skill": skills}.get(waiting.unit)
            if into is not None:
                into["items"].append(
                    {
                        "name": waiting.describe(),
                        "source": str(places.project / waiting.place),
                        "state": WAITING,
                    }
                )
    return [context, skills, commands]


def config_sections(cwd: Path, env: Mapping[str, str] | None = None) -> list[Section]:
    """The feature packages' sections (hooks, agents, mcp; module docstring), each installed
    facet package's ``"config"`` facets hosted for it; a package that fails to load is a
    problem of a section named after it."""
    import anyio

    from chord import FacetEnvironment, define_facet, installed_facet_packages, load_generation
    from coding_agent.settings.facets_site import activate
    from coding_agent.settings.project_services import project_services

    activate(env)  # the packages `coding-agent facets add` installed, as a session sees them
    services: dict[str, Any] = {"workspace": str(cwd), **project_services(cwd, env)}
    sections: list[Section] = []
    failed: list[str] = []
    facets: list[Any] = []
    generations: list[Any] = []  # purged once listed: no module of theirs stays imported
    for package in installed_facet_packages(on_error=lambda error: failed.append(str(error))):
        try:
            generation = load_generation(package, CONFIG_HOST)
        except Exception as error:  # a broken package: said, the others still listed
            failed.append(f"facet package {package.name!r} did not load: {error}")
            continue
        generations.append(generation)
        facets += generation.facets

    class Sections:
        """The ``config.sections`` service (module docstring)."""

        def services(self) -> Mapping[str, Any]:
            return services

        def add(self, section: dict[str, Any]) -> None:
            sections.append(section)

    def provide(environment: FacetEnvironment) -> None:
        environment.provide(CONFIG_SECTIONS, Sections())

    async def host() -> None:
        from chord import create_facet_host

        async with create_facet_host([define_facet("coding-agent/config", provide), *facets]):
            pass

    try:
        if facets:
            anyio.run(host)
    except Exception as error:
        failed.append(f"the feature packages' listings failed: {error}")
    finally:
        for generation in generations:
            generation.purge()
    if failed:
        sections.append({"title": "feature packages", "items": [], "problems": failed})
    return sections


def print_sections(sections: list[Section], out: TextIO, label: Any = str) -> None:
    """Each section as text: a ``# title`` line, one line per item (its name, then where it
    comes from and its state after ``#``), and each problem as ``! problem``; ``label``
    shortens a path for display."""
    for section in sections:
        items: list[dict[str, str]] = section.get("items", [])
        problems: list[str] = section.get("problems", [])
        print(f"\n# {section['title']}: {len(items) or 'none'}", file=out)
        rows = [(str(label(item["name"])), _where(item, label)) for item in items]
        width = min(max((len(name) for name, _ in rows), default=0), 56)
        for name, where in rows:
            print(f"{name:<{width}}  # {where}" if where else name, file=out)
        for problem in problems:
            print(f"! {problem}", file=out)


def _where(item: Mapping[str, str], label: Any) -> str:
    source = str(label(item["source"])) if item.get("source") else ""
    state = item.get("state", "")
    if state in ("loaded", "enabled", ""):
        return source if state != "enabled" else f"{source} (enabled)"
    return f"{source} ({state})" if source else state


def shorten(cwd: Path, env: Mapping[str, str] | None = None) -> Any:
    """A ``label`` for :func:`print_sections`: a path under the home folder as ``~/…``."""
    environ = os.environ if env is None else env
    home = environ.get("HOME", "")

    def label(text: str) -> str:
        if home and os.path.isabs(text) and (text == home or text.startswith(home + os.sep)):
            return "~" + text[len(home) :]
        return text

    return label
