"""``/add-dir``: the session's working directories, from the TUI.

The file tools read in a working directory without asking, and edits there follow the mode as
in the project (README "Working directories"). The worker
(:data:`~coding_agent.contracts.WorkingDirsService`) checks and stores the folder:

* ``/add-dir DIR`` — one more working directory for this session, stored with its launch
  settings beside ``--add-dir``'s folders: a restarted worker and ``--continue`` keep it;
* ``/add-dir --remember DIR`` — for every session: appended to ``additional_directories`` in
  your own ``config.toml`` (comments kept; never a project's file);
* ``/add-dir`` — lists the working directories and where each comes from.
"""

from __future__ import annotations

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

__all__ = ["ADD_DIR", "working_dirs_commands_facet"]

WORKING_DIRS_COMMANDS_FACET_ID = "coding-agent/working-dirs-commands"

REMEMBER = "--remember"


async def add_dir(service: Any, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/add-dir [--remember] [DIR]`` (module doc); the worker's one-line error is the
    command's."""
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
        return await service.add(given, ctx)
    except RemoteServiceError as error:
        raise CommandError(f"/add-dir: {error.message}") from None


ADD_DIR = Command(
    "add-dir",
    "Add a working directory, kept with this session (--remember: every session; alone: list them)",
    add_dir,
    args=(Arg("dir", optional=True, rest=True, hint="[--remember] [DIR]"),),
)


def working_dirs_commands_facet() -> Facet:
    """The TUI facet registering ``/add-dir``."""

    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)
        service = env.use(WorkingDirsService)
        env.on_activate(lambda: env.own(register_commands(tui, (ADD_DIR,), service)))

    return define_facet(WORKING_DIRS_COMMANDS_FACET_ID, setup)
