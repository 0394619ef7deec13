"""``/add-dir``: the session's working directories, from the TUI.

The file tools read in a working directory without asking, and edits there follow the mode as
in the project (README "Working directories"). The worker
(:data:`~coding_agent.contracts.WorkingDirsService`) checks and stores the folder:

* ``/add-dir DIR`` — one more working directory for this session, stored with its launch
  settings beside ``--add-dir``'s folders: a restarted worker and ``--continue`` keep it;
* ``/add-dir --remember DIR`` — for every session: appended to ``additional_directories`` in
  your own ``config.toml`` (comments kept; never a project's file);
* ``/add-dir`` — lists the working directories and where each comes from.

After ``/add-dir DIR`` the TUI shows the session's folders as stored now (the welcome line names
them: :meth:`coding_agent.tui.app.CodingAgentApp.show_add_dirs`), as a new start would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chord import Context, Facet, FacetEnvironment, RemoteServiceError, define_facet
from chord.textual import (
    Arg,
    Arguments,
    Command,
    CommandError,
    CommandOutcome,
    Tui,
    register_commands,
)
from coding_agent.contracts import WorkingDirsService
from coding_agent.session_files.folders import Session, SessionError, load_session

__all__ = ["ADD_DIR", "WorkingDirsTarget", "working_dirs_commands_facet"]

WORKING_DIRS_COMMANDS_FACET_ID = "coding-agent/working-dirs-commands"

REMEMBER = "--remember"


@dataclass(frozen=True, slots=True)
class WorkingDirsTarget:
    """What ``/add-dir`` acts on: the worker's :data:`WorkingDirsService`, the session shown
    now and what shows its folders (both ``None`` where nothing shows them)."""

    service: Any
    session: Callable[[], Session | None] | None = None
    show: Callable[[tuple[str, ...]], None] | None = None

    def added(self) -> None:
        """A folder was added to the session: show its folders as its ``session.json`` (which
        the worker wrote) has them now."""
        session = self.session() if self.session is not None else None
        if session is None or self.show is None:
            return
        try:
            stored = load_session(session.path)
        except SessionError:  # a session on a server: its folder is not here
            return
        self.show(stored.settings.present_add_dirs())


async def add_dir(target: WorkingDirsTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/add-dir [--remember] [DIR]`` (module doc); the worker's one-line error is the
    command's."""
    service = target.service
    given = args["dir"].strip()
    remember = given == REMEMBER or given.startswith(REMEMBER + " ")
    if remember:
        given = given.removeprefix(REMEMBER).strip()
    try:
        if not given and not remember:
            rows = await service.listing(ctx)
            width = max(len(row["folder"]) for row in rows)
            lines = [f"  {row['folder']:<{width}}  from {row['from']}" for row in rows]
            return "Working directories (files there are read without asking):\n" + "\n".join(lines)
        if remember:
            return await service.remember(given, ctx)
        said = await service.add(given, ctx)
    except RemoteServiceError as error:
        raise CommandError(f"/add-dir: {error.message}") from None
    target.added()
    return said


ADD_DIR = Command(
    "add-dir",
    "Add a working directory, kept with this session (--remember: every session; alone: list them)",
    add_dir,
    args=(Arg("dir", optional=True, rest=True, hint="[--remember] [DIR]"),),
)


def working_dirs_commands_facet(
    session: Callable[[], Session | None] | None = None,
    show: Callable[[tuple[str, ...]], None] | None = None,
) -> Facet:
    """The TUI facet registering ``/add-dir``; after a folder was added to ``session()`` (the
    session shown now), ``show`` is given the session's folders."""

    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)
        target = WorkingDirsTarget(env.use(WorkingDirsService), session, show)
        env.on_activate(lambda: env.own(register_commands(tui, (ADD_DIR,), target)))

    return define_facet(WORKING_DIRS_COMMANDS_FACET_ID, setup)
