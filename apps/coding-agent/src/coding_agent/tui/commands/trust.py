"""The TUI side of project trust: the start-up warning and the ``/trust`` command.

A project's own facet packages (``.coding-agent/facets/``) load only once the user trusts its
folder (see :mod:`coding_agent.settings.trust`). The command line decides what the worker and the TUI
load at start; this facet tells the user about what was left out and lets them change it:

* at start, when the project has local packages and is not trusted, one warning toast says how
  many were not loaded and that ``/trust`` trusts the folder;
* ``/trust`` shows the project folder and its packages in a confirmation dialog and, when the
  user agrees, records the decision in the trust store. The packages load at the next start:
  ``/reload`` swaps new code into packages already loaded, it does not add packages to a
  running session (nor does anything else behind the user's back).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from chord import Context, Facet, FacetEnvironment, define_facet
from chord.textual import Tui, TuiService
from coding_agent.settings.trust import LOCAL_FACETS_DIR, TrustError, TrustStore, check_project

__all__ = ["TRUST_FACET_ID", "trust_facet"]

TRUST_FACET_ID = "@coding-agent/trust"


def trust_facet(cwd: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None) -> Facet:
    """The facet warning about untrusted local packages in ``cwd``'s project and adding
    ``/trust``. ``environ`` locates the trust store (default ``os.environ``, read when used)."""

    def store() -> TrustStore:
        return TrustStore.default(environ)

    @define_facet(TRUST_FACET_ID)
    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)

        async def trust(args: str, ctx: Context) -> None:
            if args:
                tui.notify("/trust takes no arguments", severity="warning")
                return
            try:
                project = check_project(cwd, store=store())
            except TrustError as error:
                tui.notify(str(error), severity="error")
                return
            if project.problem is not None:
                tui.notify(f"Cannot trust this project: {project.problem}", severity="error")
                return
            if project.trusted:
                tui.notify(f"{project.root} is already trusted")
                return
            if not await _confirm(tui, project.root, project.owner, project.facets_dirs, ctx):
                tui.notify("Trust unchanged")
                return
            try:
                store().set(project.root, True)
            except TrustError as error:
                tui.notify(str(error), severity="error")
                return
            count = len(project.facets_dirs)
            # /reload swaps new code into packages already loaded; adding packages to a running
            # session takes a restart (its scan reports them as restart_required).
            load = (
                f" Restart coding-agent (coding-agent --continue) to load its {count} local "
                f"facet package{'' if count == 1 else 's'}."
                if count
                else ""
            )
            tui.notify(f"Trusted {project.root}.{load}")

        def activate() -> None:
            env.own(
                tui.register_command(
                    "trust", "Trust this folder: load its own facet packages", trust
                )
            )
            try:
                notice = check_project(cwd, store=store()).warning("/trust")
            except TrustError as error:
                tui.notify(str(error), severity="error")
                return
            if notice is not None:
                tui.notify(notice, severity="warning")

        env.on_activate(activate)

    return setup


async def _confirm(
    tui: TuiService, root: Path, owner: str, folders: tuple[Path, ...], ctx: Context
) -> bool:
    names = ", ".join(folder.name for folder in folders) or "none yet"
    body = (
        f"{root}\n(owned by {owner})\n\n"
        f"Facet packages in {LOCAL_FACETS_DIR} ({names}) run as Python code with your "
        "permissions whenever coding-agent starts in this folder. Trust it only if you trust "
        "where it came from."
    )
    modal = await tui.acquire_modal(ctx)
    try:
        return await modal.confirm("Trust this folder?", body, yes="Trust", no="Cancel")
    finally:
        modal.close()
