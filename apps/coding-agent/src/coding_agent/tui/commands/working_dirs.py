"""``/add-dir DIR``: one more working directory for this session, from the TUI.

The file tools read in a working directory without asking, and edits there follow the mode as
in the project (README "Working directories"). ``/add-dir`` asks the worker
(:data:`~coding_agent.contracts.WorkingDirsService`) to add the folder until it stops: it is not
stored (``--add-dir`` stores it with the session; ``additional_directories`` in your
``config.toml`` keeps it for every session).
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


async def add_dir(service: Any, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/add-dir DIR``: add the folder (the worker checks it exists)."""
    try:
        folder = await service.add(args["dir"], ctx)
    except RemoteServiceError as error:
        raise CommandError(f"/add-dir: {error.message}") from None
    return (
        f"Added {folder} as a working directory until the session's worker stops: files "
        "there are read without asking (--add-dir stores it with the session)"
    )


ADD_DIR = Command(
    "add-dir",
    "Add a working directory for this session (read without asking)",
    add_dir,
    args=(Arg("dir", rest=True, hint="DIR"),),
)


def working_dirs_commands_facet() -> Facet:
    """The TUI facet registering ``/add-dir``."""

    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)
        service = env.use(WorkingDirsService)
        env.on_activate(lambda: env.own(register_commands(tui, (ADD_DIR,), service)))

    return define_facet(WORKING_DIRS_COMMANDS_FACET_ID, setup)
