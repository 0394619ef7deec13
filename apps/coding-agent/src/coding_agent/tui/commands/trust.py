"""The TUI side of project trust: the start-up warning and the ``/trust`` command.

A project's own facet packages (``.coding-agent/facets/``) load only once the user trusts its
folder (see :mod:`coding_agent.settings.trust`). The command line decides what the worker and the TUI
load at start; this facet tells the user about what was left out and lets them change it:

* at start, when the project is not trusted and holds setup of its own, one warning toast
  lists what waits (:func:`~coding_agent.context.waiting.waiting_for_trust`:
  ``.claude/commands (57), .mcp.json (2 servers) — /trust to load them``);
* in a trusted project whose ``.mcp.json`` gained or changed a server since the user approved
  its servers, one warning toast names the servers that are not started;
* ``/trust`` shows the project folder and what it holds (each MCP server with the program it
  runs) in a confirmation dialog and, when the user agrees, records the decision in the trust
  store, with the servers shown as approved; in a trusted project it shows the servers waiting
  for approval and approves them. Commands and skills are scanned again at
  once and the system prompt files apply from the next request; the notice names exactly what
  loads at the next start instead (subagents, hooks, MCP servers, permission rules, config and
  facet packages are set up when the session worker starts: ``/reload`` swaps new code into
  packages already loaded, it does not add packages to a running session).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chord import Context, Facet, FacetEnvironment, define_facet
from chord.textual import (
    Arguments,
    Command,
    CommandError,
    CommandOutcome,
    Tui,
    TuiService,
    register_commands,
)
from coding_agent.context.waiting import Waiting, describe_waiting, waiting_for_trust
from coding_agent.settings.trust import (
    LOCAL_FACETS_DIR,
    PROJECT_SERVERS_FILE,
    TrustError,
    TrustStore,
    check_project,
    check_project_servers,
    project_servers,
)

__all__ = ["TRUST_COMMANDS", "TRUST_FACET_ID", "TrustTarget", "trust", "trust_facet"]

TRUST_FACET_ID = "@coding-agent/trust"


@dataclass(frozen=True, slots=True)
class TrustTarget:
    """What ``/trust`` acts on: the TUI (its confirmation), the project folder, where the trust
    store is looked up (``environ``; default ``os.environ``, read when used) and what to call
    once the folder is trusted (``rescans``: the prompt commands scan again)."""

    tui: TuiService
    cwd: str | os.PathLike[str]
    environ: Mapping[str, str] | None = None
    rescans: Sequence[Callable[[], None]] = ()

    def store(self) -> TrustStore:
        return TrustStore.default(self.environ)


async def trust(target: TrustTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/trust``: after a confirmation listing what the project holds, trust its folder."""
    try:
        project = check_project(target.cwd, store=target.store())
    except TrustError as error:
        raise CommandError(str(error)) from error
    if project.problem is not None:
        raise CommandError(f"Cannot trust this project: {project.problem}")
    servers = project_servers(project.root)  # what the dialog shows is what gets approved
    if project.trusted:
        return await _approve_servers(target, project.root, servers, ctx)
    waiting = waiting_for_trust(project.root)
    packages = tuple(folder.name for folder in project.facets_dirs)
    body = _trust_body(project.root, project.owner, waiting, packages, servers)
    if not await _ask(target.tui, "Trust this folder?", body, "Trust", ctx):
        return "Trust unchanged"
    try:
        target.store().set(project.root, True)
        target.store().approve_servers(project.root, servers)
    except TrustError as error:
        raise CommandError(str(error)) from error
    for rescan in target.rescans:
        rescan()
    return f"Trusted {project.root}.{_loaded(waiting)}"


async def _approve_servers(
    target: TrustTarget, root: Path, servers: dict[str, dict[str, Any]], ctx: Context
) -> str:
    """``/trust`` in a trusted project: approve the ``.mcp.json`` servers that wait, if any."""
    try:
        shown = check_project_servers(root, target.store(), servers).waiting
    except TrustError as error:
        raise CommandError(str(error)) from error
    if not shown:
        return f"{root} is already trusted"
    body = (
        f"{root / PROJECT_SERVERS_FILE} has {len(shown)} server{'' if len(shown) == 1 else 's'} "
        f"added or changed since you approved its servers:\n\n{_server_lines(servers, shown)}\n\n"
        "An MCP server runs as a program with your permissions whenever coding-agent starts in "
        "this folder. Approve only what you expected to change."
    )
    if not await _ask(target.tui, "Start these MCP servers?", body, "Approve", ctx):
        return "Servers unchanged: not started"
    try:
        target.store().approve_servers(root, servers)
    except TrustError as error:
        raise CommandError(str(error)) from error
    return (
        f"Approved {', '.join(shown)}. Restart coding-agent (coding-agent --continue) to start "
        f"{'it' if len(shown) == 1 else 'them'}."
    )


def _server_lines(servers: Mapping[str, Mapping[str, Any]], names: Sequence[str]) -> str:
    """One line per server: its name and the program it runs (or the address it reaches)."""
    lines: list[str] = []
    for name in names:
        entry = servers[name]
        if "command" in entry:
            args = entry.get("args")
            words = [str(entry["command"]), *(map(str, args) if isinstance(args, list) else ())]
            runs = " ".join(words)
        else:
            runs = str(entry.get("url", "?"))
        lines.append(f"  {name}: {runs if len(runs) <= 120 else runs[:119] + '…'}")
    return "\n".join(lines)


TRUST_COMMANDS: tuple[Command[TrustTarget], ...] = (
    Command(
        "trust",
        "Trust this folder: load its own commands, skills, hooks, servers, packages",
        trust,
    ),
)


def trust_facet(
    cwd: str | os.PathLike[str],
    *,
    environ: Mapping[str, str] | None = None,
    rescans: Sequence[Callable[[], None]] = (),
) -> Facet:
    """The facet saying what of ``cwd``'s project waits for trust and adding ``/trust``.
    ``environ`` locates the trust store (default ``os.environ``, read when used); each of
    ``rescans`` is called once the folder is trusted (the prompt commands scan again)."""

    @define_facet(TRUST_FACET_ID)
    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)
        target = TrustTarget(tui, cwd, environ, rescans)

        def activate() -> None:
            env.own(register_commands(tui, TRUST_COMMANDS, target))
            try:
                project = check_project(cwd, store=target.store())
            except TrustError as error:
                tui.notify(str(error), severity="error")
                return
            if project.trusted:
                _notify_waiting_servers(tui, project.root, target.store())
                return
            if project.problem is not None:  # it can never be trusted: say why, once
                notice = project.warning("/trust")
                if notice is not None:
                    tui.notify(notice, severity="warning")
                return
            waiting = waiting_for_trust(project.root)
            if waiting:
                marked = " (marked untrusted)" if project.decision is not None else ""
                tui.notify(
                    f"This project's own setup waits for /trust{marked}: "
                    f"{describe_waiting(waiting)}",
                    severity="warning",
                )

        env.on_activate(activate)

    return setup


def _notify_waiting_servers(tui: TuiService, root: Path, store: TrustStore) -> None:
    """The start-up warning naming the trusted project's MCP servers that wait for approval."""
    try:
        waiting = check_project_servers(root, store).waiting
    except TrustError as error:
        tui.notify(f"{error}; this project's MCP servers are not started", severity="error")
        return
    if waiting:
        count = len(waiting)
        tui.notify(
            f"{PROJECT_SERVERS_FILE}: {count} server{'' if count == 1 else 's'} added or changed "
            f"since you approved this project's servers, not started: {', '.join(waiting)}. "
            "/trust to review",
            severity="warning",
        )


def _loaded(waiting: list[Waiting]) -> str:
    """What trusting loaded now and what waits for a restart, as the notice's sentences."""
    now = [item for item in waiting if item.live]
    later = [item for item in waiting if not item.live]
    text = f" Loaded now: {describe_waiting(now)}." if now else ""
    if later:
        text += (
            f" Restart coding-agent (coding-agent --continue) to load: {describe_waiting(later)}."
        )
    return text


def _trust_body(
    root: Path,
    owner: str,
    waiting: list[Waiting],
    packages: tuple[str, ...],
    servers: dict[str, dict[str, Any]],
) -> str:
    """The trust dialog's text: the folder, its owner, what will be read, what runs."""
    held = describe_waiting(waiting) or "nothing yet"
    named = f" Its facet packages: {', '.join(packages)}." if packages else ""
    if servers:
        named += f" Its MCP servers:\n{_server_lines(servers, list(servers))}"
    return (
        f"{root}\n(owned by {owner})\n\nIts own setup will be read: {held}.{named}\n\n"
        f"Facet packages ({LOCAL_FACETS_DIR}), hooks and MCP servers run as programs with your "
        "permissions whenever coding-agent starts in this folder; commands and skills tell the "
        "model what to do. Trust it only if you trust where it came from."
    )


async def _ask(tui: TuiService, title: str, body: str, yes: str, ctx: Context) -> bool:
    """The confirmation dialog of ``/trust``: ``yes`` or Cancel."""
    modal = await tui.acquire_modal(ctx)
    try:
        return await modal.confirm(title, body, yes=yes, no="Cancel")
    finally:
        modal.close()
