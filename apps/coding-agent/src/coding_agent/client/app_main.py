"""The TUI process: the Textual app beside a facet host whose services come from the worker.

::

    worker process                          TUI process (this module)
    ──────────────                          ─────────────────────────
    harness + session facets  ◀── wire ──▶  facet host: Tui (the app), the conversation client,
    served on <session>/worker.sock         the app's commands, every package's "tui" facets

:func:`run_client` wires it together for one session:

1. the supervisor (if given) makes sure a worker serves the session (reusing a running one);
2. a reconnecting wire source connects to the worker's socket;
3. the facet host starts with the ``Tui`` facet, :class:`RemoteConversationClient`'s facet, the
   app's own commands and the ``"tui"`` facets of every installed feature package (entry points
   group ``chord.facets``; an approval modal, a question modal, the indexer's progress…);
4. :class:`~coding_agent.tui.CodingAgentApp` runs until the user quits, while the supervisor
   restarts a worker that dies. The app shows "unavailable" in between, and every facade
   rehydrates from the new worker.

A late joiner (``coding-agent attach``) runs exactly the same code: the transcript arrives in
the view's snapshot, open dialogs arrive as live keyed instances, running tasks in ``view.tasks``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from chord.facets import Facet, FacetHost
from chord.packages import (
    FacetDiscoveryError,
    FacetGeneration,
    discover_facet_packages,
    load_generation,
)
from chord.textual import run_app_with_facets
from chord.transport import connect_unix
from chord.wire import connect_service_source
from coding_agent.client.commands import commands_facet
from coding_agent.client.conversation_client import RemoteConversationClient
from coding_agent.client.supervisor import WorkerSupervisor
from coding_agent.sessions import Session
from coding_agent.tui import CodingAgentApp, SessionInfo

__all__ = ["TUI_HOST", "ClientRun", "load_tui_facets", "run_client"]

TUI_HOST = "tui"
"""The host kind feature packages are asked for (``chord_facets(host="tui")``)."""

_logger = logging.getLogger("coding_agent.client")


def load_tui_facets(
    facets_dirs: Sequence[str | Path] = (),
) -> tuple[list[FacetGeneration], list[str]]:
    """Load one generation of every facet package for the TUI host.

    Returns the loaded generations and one message per package that could not be found or
    loaded: a broken feature package costs its own facets, never the app.
    """
    problems: list[str] = []

    def skip(error: FacetDiscoveryError) -> None:
        problems.append(str(error))

    generations: list[FacetGeneration] = []
    for package in discover_facet_packages(facets_dirs, on_error=skip):
        try:
            generations.append(load_generation(package, TUI_HOST))
        except Exception as error:
            problems.append(f"facet package {package.name!r} did not load: {error}")
    return generations, problems


class ClientRun:
    """What a running client exposes to its caller (tests drive the app through it)."""

    def __init__(self, app: CodingAgentApp, client: RemoteConversationClient) -> None:
        self.app = app
        self.client = client
        self.host: FacetHost | None = None


async def run_client(
    session: Session,
    *,
    supervisor: WorkerSupervisor | None,
    facets_dirs: Sequence[str | Path] = (),
    model: str | None = None,
    on_start: Callable[[ClientRun], Awaitable[None] | None] | None = None,
    **run_options: Any,
) -> ClientRun:
    """Run the TUI of ``session`` until the app exits (see the module docstring).

    ``supervisor`` starts or reuses the worker and restarts it when it dies (``None``: just
    connect and wait). ``on_start`` gets the :class:`ClientRun` once the facet host runs.
    ``run_options`` go to ``App.run_async`` (``headless=True``, ``auto_pilot=...`` in tests).
    Stops a worker the supervisor started when the app exits.
    """
    if supervisor is not None:
        await supervisor.ensure_started()
    info = SessionInfo(session.id, str(session.cwd), model=model or session.model)
    client = RemoteConversationClient(info)
    app = CodingAgentApp(client)
    run = ClientRun(app, client)
    generations, problems = load_tui_facets(facets_dirs)
    facets: list[Facet] = [client.facet(), commands_facet(client, cwd=str(session.cwd))]
    for generation in generations:
        facets.extend(generation.facets)

    def report(error: BaseException) -> None:
        _logger.error("TUI facet host error: %r", error, exc_info=error)
        app.tui.notify(f"{error}", severity="error")

    async def started(host: FacetHost) -> None:
        run.host = host
        client.on_status(_status_shown(app))
        for problem in problems:
            app.tui.notify(problem, severity="warning")
        if on_start is not None:
            result = on_start(run)
            if result is not None:
                await result

    socket = session.socket_path
    watching = anyio.CancelScope()
    try:
        async with anyio.create_task_group() as group:
            source = connect_service_source(
                lambda: connect_unix(socket), task_group=group, on_error=_log_wire_error
            )
            if supervisor is not None:
                group.start_soon(_watch, supervisor, source, app, watching)
            try:
                await run_app_with_facets(
                    app,
                    app.tui,
                    facets,
                    service_sources=[source],
                    on_error=report,
                    on_host=started,
                    **run_options,
                )
            finally:
                watching.cancel()  # quitting is not a crash: no restart from here on
                with anyio.CancelScope(shield=True):
                    if supervisor is not None:
                        await supervisor.stop()
                    await source.aclose()
                group.cancel_scope.cancel()
    finally:
        for generation in generations:
            generation.purge()
    return run


async def _watch(
    supervisor: WorkerSupervisor, source: Any, app: CodingAgentApp, scope: anyio.CancelScope
) -> None:
    try:
        with scope:
            await supervisor.watch(source)
    except Exception as error:
        app.tui.notify(f"The session worker cannot be restarted: {error}", severity="error")


def _status_shown(app: CodingAgentApp) -> Callable[[dict[str, Any]], None]:
    """A status listener: repaint the footer (a context window may have become known) and
    toast every failed ``--dev`` reload the worker reports (each once, by its ``number``)."""
    shown: list[Any] = [0, -1]  # [highest report number toasted, pid of the worker it belongs to]

    def listener(status: dict[str, Any]) -> None:
        app.footer.repaint()
        pid = status.get("pid")
        if pid != shown[1]:  # a new worker counts its reports from 1 again
            shown[:] = [0, pid]
        reloads = status.get("reloads")
        for report in reloads if isinstance(reloads, list) else []:
            number = report.get("number") if isinstance(report, dict) else None
            if type(number) is not int or number <= shown[0]:
                continue
            shown[0] = number
            if report.get("ok") is False:
                app.tui.notify(
                    f"Reload of {report.get('package')} failed: {report.get('message')}",
                    severity="error",
                )

    return listener


def _log_wire_error(error: BaseException) -> None:
    # A dropped connection is the normal sign of a restarting worker; log, never crash.
    _logger.info("session worker connection: %r", error)
