"""The TUI's session commands: ``/sessions``, ``/resume [ID]``, ``/import``, ``/name`` and
``/reload``.

A presentation facet, like :mod:`coding_agent.tui.commands.core`, whose commands act on the TUI
process itself rather than on one conversation. The work is done by a :class:`SessionControl`
(the running client, :func:`coding_agent.tui.run_client`); the handlers (top-level functions of
a :class:`SessionsTarget`, in the table :data:`SESSION_COMMANDS`) only ask, show pickers and
report in toasts:

* ``/sessions`` — a picker of this project folder's sessions, most recent activity first, each
  with its id, name, last activity, first prompt, model and size (read from its folder; nothing
  is opened or locked). Typing filters (name, id prefix, prompt text), Ctrl+D deletes a session
  after a confirmation, and choosing one switches the running TUI to it, as ``/resume`` does;
* ``/resume [ID]`` — switch to the session with that id (or unique id prefix); without an id,
  the same picker. The control makes sure a worker serves the new session (reusing a running
  one), moves the wire to it and lets the old session's worker go exactly as quitting would.
  ``/resume branch N`` (or ``/resume #N``) switches to branch ``N`` of this session instead,
  as ``/branch N`` does (the branch numbers ``/tree`` shows);
* ``/import [PATH]`` — a picker of this folder's Claude Code and pi sessions (the listing of
  ``coding-agent import --list``; or the session file ``PATH``): the chosen one is imported
  into a new session of this folder (:mod:`coding_agent.importing`) and the TUI switches to it,
  as ``/resume`` does; where it cannot switch (a session on a server) it says how to continue
  the import (``coding-agent --resume ID``);
* ``/name TEXT`` — name the session (``<session>/name``; shown in the pickers and
  ``coding-agent sessions``); ``/name`` alone removes the name;
* ``/reload`` — re-scan the feature packages and reload every one of them in both processes:
  the worker's ``"session"`` facets through its :data:`~coding_agent.contracts.ReloadService`,
  then this process's ``"tui"`` facets. One toast names what reloaded and every error.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, cast

import anyio

from chord import Context, Facet, FacetEnvironment, define_facet
from chord.textual import (
    Arg,
    Arguments,
    Command,
    CommandError,
    CommandOutcome,
    Notice,
    Tui,
    TuiService,
    register_commands,
)
from coding_agent.contracts import ReloadOutcome, ReloadService
from coding_agent.session_files.folders import Session, SessionError, list_sessions, open_session
from coding_agent.session_files.index import (
    delete_session,
    describe,
    first_prompt,
    set_session_name,
)
from coding_agent.tui.widgets.session_picker import SessionPickerScreen

__all__ = [
    "SESSION_COMMANDS",
    "SESSION_COMMANDS_FACET_ID",
    "SessionControl",
    "SessionsTarget",
    "import_",
    "name",
    "reload",
    "resume",
    "session_age",
    "session_commands_facet",
    "session_label",
    "sessions",
    "summarize_reload",
]

SESSION_COMMANDS_FACET_ID = "@coding-agent/session-commands"

Severity = Literal["information", "warning", "error"]

_BRANCH_REF = re.compile(r"(?:branch\s+#?|#)(\d+)", re.IGNORECASE)


class SessionControl(Protocol):
    """What the session commands need from the running client."""

    @property
    def session(self) -> Session:
        """The session the TUI shows now."""
        ...

    async def switch_to(self, session: Session) -> None:
        """Show ``session`` from now on (start or reuse its worker; raises when it cannot)."""
        ...

    async def show_screen(self, screen: Any) -> Any:
        """Show a Textual screen over the app; what it is dismissed with."""
        ...

    async def reload_tui(self) -> list[ReloadOutcome]:
        """Re-scan and reload this process's ``"tui"`` facet packages."""
        ...

    def hold_worker_reload_toasts(self) -> Callable[[Iterable[str]], None]:
        """Hold back the toasts of worker reload failures while ``/reload`` reports them itself;
        the returned function releases them, dropping those of the packages it names."""
        ...


def session_age(created: datetime, now: datetime | None = None) -> str:
    """How long ago ``created`` was, in the largest sensible unit ("3 min ago", "2 d ago")."""
    seconds = max(0, int(((now or datetime.now(UTC)) - created).total_seconds()))
    if seconds < 60:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    raise AssertionError("unreachable")  # pragma: no cover


def session_label(session: Session, *, current: str | None, now: datetime | None = None) -> str:
    """One picker line: id, age, first prompt, and whether it is this TUI's session."""
    prompt = first_prompt(session)
    parts = [session.id, session_age(session.created, now), prompt or "(no prompt yet)"]
    label = "  ".join(parts)
    if session.id == current:
        label += "  (this session)"
    elif session.worker_running():
        label += "  (running)"
    return label


def summarize_reload(
    worker: Sequence[ReloadOutcome] | None,
    tui: Sequence[ReloadOutcome],
    *,
    worker_error: str | None = None,
) -> tuple[str, Severity]:
    """The ``/reload`` toast: which packages reloaded where, then one line per problem.

    ``worker`` is ``None`` when the worker could not be asked (``worker_error`` says why).
    The severity is ``"error"`` when anything failed, ``"warning"`` when something needs a
    restart, ``"information"`` otherwise.
    """
    lines: list[str] = []
    problems: list[str] = []
    severity: Severity = "information"
    for where, outcomes in (("worker", worker), ("TUI", tui)):
        if outcomes is None:
            continue
        reloaded = [
            o["package"] + (f" ({o['outcome']})" if o["outcome"] in ("added", "removed") else "")
            for o in outcomes
            if o["ok"]
        ]
        lines.append(f"{where}: {', '.join(reloaded) if reloaded else 'nothing'}")
        for outcome in outcomes:
            if outcome["ok"]:
                continue
            problems.append(f"{outcome['package']} ({where}): {outcome['message']}")
            if outcome["outcome"] == "restart_required":
                if severity == "information":
                    severity = "warning"
            else:
                severity = "error"
    if worker_error is not None:
        problems.insert(0, f"worker: {worker_error}")
        severity = "error"
    text = "Reloaded — " + "; ".join(lines) if lines else "Nothing reloaded"
    return "\n".join([text, *problems]), severity


@dataclass(frozen=True, slots=True)
class SessionsTarget:
    """What the session commands act on (see :func:`session_commands_facet`)."""

    control: SessionControl
    tui: TuiService
    worker_reload: Any  # the worker's ReloadService (a remote service handle)
    cwd: str | Path
    environ: Mapping[str, str] | None = None
    branch: Callable[[str, Context], Awaitable[None]] | None = None


async def _pick(
    target: SessionsTarget, title: str, ctx: Context
) -> tuple[Session, str | None] | None:
    found = list_sessions(target.cwd, env=target.environ)
    if not found:
        target.tui.notify("No sessions in this folder yet")
        return None
    current = target.control.session.id
    by_id = {s.id: s for s in found}
    infos = sorted((describe(s) for s in found), key=lambda i: i["lastActivity"], reverse=True)

    def delete(session_id: str) -> str | None:
        if session_id == current:
            return "This is the session you are in; switch to another one first"
        try:
            delete_session(by_id[session_id])
        except (SessionError, OSError) as error:
            return f"Cannot delete {session_id}: {error}"
        return None

    modal = await target.tui.acquire_modal(ctx)  # one dialog at a time
    try:
        screen = SessionPickerScreen(
            title, infos, current=current, delete=delete, branch_rows=target.branch is not None
        )
        picked = await target.control.show_screen(screen)
    finally:
        modal.close()
    if not isinstance(picked, str):
        return None
    ident, _, on_branch = picked.partition("#")  # "ID#N": a branch row
    chosen = by_id.get(ident)
    return None if chosen is None else (chosen, on_branch or None)


async def _switch_picked(
    target: SessionsTarget, picked: tuple[Session, str | None] | None, ctx: Context
) -> CommandOutcome:
    if picked is None:
        return None
    chosen, on_branch = picked
    outcome: CommandOutcome = None
    if on_branch is None or chosen.id != target.control.session.id:
        outcome = await _switch(target, chosen)
    if on_branch is not None and target.branch is not None:
        await target.branch(on_branch, ctx)
    return outcome


async def _switch(target: SessionsTarget, chosen: Session) -> CommandOutcome:
    if chosen.id == target.control.session.id:
        return f"{chosen.id} is this session"
    target.tui.notify(f"Resuming session {chosen.id}…")
    await target.control.switch_to(chosen)
    return f"Resumed session {chosen.id}"


async def sessions(target: SessionsTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/sessions``: pick one of this folder's sessions and switch to it."""
    return await _switch_picked(target, await _pick(target, "Sessions of this folder", ctx), ctx)


async def resume(target: SessionsTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/resume [ID]`` (a picker without one); ``/resume branch N`` or ``#N``: that branch."""
    ref = args.text
    on_branch = _BRANCH_REF.fullmatch(ref)
    if on_branch is not None:  # "branch N" / "#N": never a session id
        if target.branch is None:
            raise CommandError("/resume: branches are unavailable here")
        await target.branch(on_branch.group(1), ctx)
        return None
    if not ref:
        return await _switch_picked(target, await _pick(target, "Resume a session", ctx), ctx)
    try:
        found = open_session(ref, env=target.environ)
    except SessionError as error:
        raise CommandError(f"/resume: {error}") from error
    return await _switch(target, found)


async def import_(target: SessionsTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/import [PATH]``: import a Claude Code or pi session (a picker of this folder's without
    a path) into a new session of this folder, and switch to it."""
    # lazy: start-up time (the importers load only for an import)
    from coding_agent.importing.common import ImportedSession, ImportProblem
    from coding_agent.importing.store import (
        import_report,
        import_session,
        importable_sessions,
        previous_imports,
        read_session_file,
    )

    cwd = Path(target.cwd)
    path = Path(args.text) if args.text else None
    if path is None:  # every file is read to list it: off the event loop
        found = await anyio.to_thread.run_sync(lambda: importable_sessions(cwd, env=target.environ))
        if not found:
            target.tui.notify(
                f"No Claude Code or pi sessions of {cwd} (/import PATH takes a session file "
                "from anywhere)"
            )
            return None
        rows = {str(item.path): item for item in found}
        infos = [
            {"id": key, "name": item.tool, "firstPrompt": item.first_prompt}
            for key, item in rows.items()
        ]
        modal = await target.tui.acquire_modal(ctx)  # one dialog at a time
        try:
            screen = SessionPickerScreen(
                "Import a Claude Code or pi session of this folder",
                infos,
                row=lambda info: rows[info["id"]].listing(),
                verb="import",
            )
            picked = await target.control.show_screen(screen)
        finally:
            modal.close()
        if not isinstance(picked, str) or picked not in rows:
            return None
        path = rows[picked].path
    given = path

    def read() -> tuple[ImportedSession, list[Session]]:  # files read: off the event loop
        source = given.expanduser()
        imported = read_session_file(source if source.is_absolute() else cwd / source)
        return imported, previous_imports(imported.source, env=target.environ)

    try:
        imported, earlier = await anyio.to_thread.run_sync(read)
        session = await import_session(imported, cwd=cwd, env=target.environ)
    except ImportProblem as problem:
        raise CommandError(f"/import: {problem}") from None
    report = import_report(imported, session, earlier)
    try:
        await target.control.switch_to(session)
    except RuntimeError as error:  # a TUI attached to a server switches to no other session
        report.append(f"Continue it with: coding-agent --resume {session.id} ({error})")
        return Notice("\n".join(report), "warning")
    return "\n".join(report)


async def reload(target: SessionsTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/reload``: reload the feature packages in the worker, then in this process."""
    target.tui.notify("Reloading facet packages…")
    worker: list[ReloadOutcome] | None = None
    worker_error: str | None = None
    release = target.control.hold_worker_reload_toasts()
    try:
        worker = cast(list[ReloadOutcome], await target.worker_reload.reload(ctx))
    except Exception as error:  # reported in the summary, beside the TUI's outcomes
        worker_error = f"{error}"
    finally:
        release(o["package"] for o in worker or ())
    try:
        tui_outcomes = await target.control.reload_tui()
    except Exception as error:  # reported in the summary, beside the worker's outcomes
        tui_outcomes = [
            ReloadOutcome(package="(TUI)", outcome="failed", ok=False, message=f"{error}")
        ]
    message, severity = summarize_reload(worker, tui_outcomes, worker_error=worker_error)
    return Notice(message, severity)


def name(target: SessionsTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/name TEXT``: name the session; ``/name`` alone removes the name."""
    try:
        stored = set_session_name(target.control.session, args["text"])
    except (SessionError, OSError) as error:
        raise CommandError(f"/name: {error}") from error
    return f"Session name: {stored}" if stored else "Session name removed"


SESSION_COMMANDS: tuple[Command[SessionsTarget], ...] = (
    Command("sessions", "Pick one of this folder's sessions and switch to it", sessions),
    Command(
        "resume",
        "Switch to a session or a branch: /resume [ID or prefix] · "
        "/resume branch N (or #N; see /tree)",
        resume,
        args=None,
    ),
    Command(
        "import",
        "Import a Claude Code or pi session of this folder and switch to it: /import [PATH]",
        import_,
        args=None,
    ),
    Command("reload", "Reload the feature packages in the worker and the TUI", reload),
    Command(
        "name",
        "Name this session (/name alone removes the name)",
        name,
        args=(Arg("text", optional=True, rest=True),),
    ),
)
"""The session commands (module docstring), registered by :func:`session_commands_facet`."""


def session_commands_facet(
    control: SessionControl,
    *,
    cwd: str | Path,
    environ: Mapping[str, str] | None = None,
    branch: Callable[[str, Context], Awaitable[None]] | None = None,
) -> Facet:
    """The facet registering :data:`SESSION_COMMANDS` for ``control``.

    ``cwd`` is the project folder whose sessions ``/sessions`` lists; ``environ`` is where the
    sessions folder is looked up (default ``os.environ``). ``branch`` switches to a branch of
    this session (``/branch``'s handler, given ``N``): ``/resume branch N`` and ``/resume #N``
    call it — a session id never has a space or a ``#``, so the two never mix up.
    """

    @define_facet(SESSION_COMMANDS_FACET_ID)
    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)
        target = SessionsTarget(control, tui, env.use(ReloadService), cwd, environ, branch)
        env.on_activate(lambda: env.own(register_commands(tui, SESSION_COMMANDS, target)))

    return setup
