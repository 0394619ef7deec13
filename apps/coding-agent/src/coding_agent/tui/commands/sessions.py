"""The TUI's session commands: ``/sessions``, ``/resume [ID]`` and ``/reload``.

A presentation facet, like :mod:`coding_agent.tui.commands.core`, whose commands act on the TUI
process itself rather than on one conversation. The work is done by a :class:`SessionControl`
(the running client, :func:`coding_agent.tui.run_client`); the facet only asks, shows pickers
and reports in toasts:

* ``/sessions`` — a picker of this project folder's sessions, most recent activity first, each
  with its id, name, last activity, first prompt, model and size (read from its folder; nothing
  is opened or locked). Typing filters (name, id prefix, prompt text), Ctrl+D deletes a session
  after a confirmation, and choosing one switches the running TUI to it, as ``/resume`` does;
* ``/resume [ID]`` — switch to the session with that id (or unique id prefix); without an id,
  the same picker. The control makes sure a worker serves the new session (reusing a running
  one), moves the wire to it and lets the old session's worker go exactly as quitting would.
  ``/resume branch N`` (or ``/resume #N``) switches to branch ``N`` of this session instead,
  as ``/branch N`` does (the branch numbers ``/tree`` shows);
* ``/name TEXT`` — name the session (``<session>/name``; shown in the pickers and
  ``coding-agent sessions``); ``/name`` alone removes the name;
* ``/reload`` — re-scan the feature packages and reload every one of them in both processes:
  the worker's ``"session"`` facets through its :data:`~coding_agent.contracts.ReloadService`,
  then this process's ``"tui"`` facets. One toast names what reloaded and every error.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, cast

from chord import Context, Facet, FacetEnvironment, define_facet
from chord.textual import Tui
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
    "SESSION_COMMANDS_FACET_ID",
    "SessionControl",
    "session_age",
    "session_commands_facet",
    "session_label",
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


def session_commands_facet(
    control: SessionControl,
    *,
    cwd: str | Path,
    environ: Mapping[str, str] | None = None,
    branch: Callable[[str, Context], Awaitable[None]] | None = None,
) -> Facet:
    """The facet registering ``/sessions``, ``/resume`` and ``/reload`` for ``control``.

    ``cwd`` is the project folder whose sessions ``/sessions`` lists; ``environ`` is where the
    sessions folder is looked up (default ``os.environ``). ``branch`` switches to a branch of
    this session (``/branch``'s handler, given ``N``): ``/resume branch N`` and ``/resume #N``
    call it — a session id never has a space or a ``#``, so the two never mix up.
    """

    @define_facet(SESSION_COMMANDS_FACET_ID)
    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)
        worker_reload = env.use(ReloadService)

        async def pick(title: str, ctx: Context) -> tuple[Session, str | None] | None:
            found = list_sessions(cwd, env=environ)
            if not found:
                tui.notify("No sessions in this folder yet")
                return None
            current = control.session.id
            by_id = {s.id: s for s in found}
            infos = sorted(
                (describe(s) for s in found), key=lambda i: i["lastActivity"], reverse=True
            )

            def delete(session_id: str) -> str | None:
                if session_id == current:
                    return "This is the session you are in; switch to another one first"
                try:
                    delete_session(by_id[session_id])
                except (SessionError, OSError) as error:
                    return f"Cannot delete {session_id}: {error}"
                return None

            modal = await tui.acquire_modal(ctx)  # one dialog at a time
            try:
                screen = SessionPickerScreen(
                    title, infos, current=current, delete=delete, branch_rows=branch is not None
                )
                picked = await control.show_screen(screen)
            finally:
                modal.close()
            if not isinstance(picked, str):
                return None
            ident, _, on_branch = picked.partition("#")  # "ID#N": a branch row
            target = by_id.get(ident)
            return None if target is None else (target, on_branch or None)

        async def switch_picked(picked: tuple[Session, str | None] | None, ctx: Context) -> None:
            if picked is None:
                return
            target, on_branch = picked
            if on_branch is None or target.id != control.session.id:
                await switch(target)
            if on_branch is not None and branch is not None:
                await branch(on_branch, ctx)

        async def switch(target: Session) -> None:
            if target.id == control.session.id:
                tui.notify(f"{target.id} is this session")
                return
            tui.notify(f"Resuming session {target.id}…")
            await control.switch_to(target)
            tui.notify(f"Resumed session {target.id}")

        async def sessions(args: str, ctx: Context) -> None:
            del args
            try:
                await switch_picked(await pick("Sessions of this folder", ctx), ctx)
            except Exception as error:
                tui.notify(f"Could not switch sessions: {error}", severity="error")

        async def resume(args: str, ctx: Context) -> None:
            ref = args.strip()
            on_branch = _BRANCH_REF.fullmatch(ref)
            if on_branch is not None:  # "branch N" / "#N": never a session id
                if branch is None:
                    tui.notify("/resume: branches are unavailable here", severity="error")
                else:
                    await branch(on_branch.group(1), ctx)
                return
            try:
                if ref:
                    await switch(open_session(ref, env=environ))
                else:
                    await switch_picked(await pick("Resume a session", ctx), ctx)
            except SessionError as error:
                tui.notify(f"/resume: {error}", severity="error")
            except Exception as error:
                tui.notify(f"Could not switch sessions: {error}", severity="error")

        async def reload(args: str, ctx: Context) -> None:
            del args
            tui.notify("Reloading facet packages…")
            worker: list[ReloadOutcome] | None = None
            worker_error: str | None = None
            release = control.hold_worker_reload_toasts()
            try:
                worker = cast(list[ReloadOutcome], await worker_reload.reload(ctx))
            except Exception as error:
                worker_error = f"{error}"
            finally:
                release(o["package"] for o in worker or ())
            try:
                tui_outcomes = await control.reload_tui()
            except Exception as error:
                tui_outcomes = [
                    ReloadOutcome(package="(TUI)", outcome="failed", ok=False, message=f"{error}")
                ]
            message, severity = summarize_reload(worker, tui_outcomes, worker_error=worker_error)
            tui.notify(message, severity=severity)

        async def name(args: str, ctx: Context) -> None:
            del ctx
            try:
                stored = set_session_name(control.session, args)
            except (SessionError, OSError) as error:
                tui.notify(f"/name: {error}", severity="error")
                return
            tui.notify(f"Session name: {stored}" if stored else "Session name removed")

        def activate() -> None:
            env.own(
                tui.register_command(
                    "sessions", "Pick one of this folder's sessions and switch to it", sessions
                )
            )
            env.own(
                tui.register_command(
                    "resume",
                    "Switch to a session or a branch: /resume [ID or prefix] · "
                    "/resume branch N (or #N; see /tree)",
                    resume,
                )
            )
            env.own(
                tui.register_command(
                    "reload", "Reload the feature packages in the worker and the TUI", reload
                )
            )
            env.own(tui.register_command("name", "Name this session: /name TEXT", name))

        env.on_activate(activate)

    return setup
