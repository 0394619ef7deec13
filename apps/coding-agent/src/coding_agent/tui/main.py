"""The TUI process: the Textual app beside a facet host whose services come from the worker.

::

    worker process                          TUI process (this module)
    ──────────────                          ─────────────────────────
    harness + session facets  ◀── wire ──▶  facet host: Tui (the app), the conversation client,
    served on <session>/worker.sock         the app's commands, every package's "tui" facets

:func:`run_client` wires it together for one session:

1. the supervisor (if given) makes sure a worker serves the session (reusing a running one),
   *beside* the app: the editor is painted and takes typing at once, while the worker starts
   (the command line :meth:`~coding_agent.supervisor.WorkerSupervisor.launch` starts it before it
   even imports the TUI). What is submitted meanwhile is held and sent, in order, once the
   worker serves (:attr:`~coding_agent.tui.CodingAgentApp.starting`); a worker that cannot
   start ends the app and :func:`run_client` raises its
   :class:`~coding_agent.supervisor.WorkerStartError`;
2. a reconnecting wire source connects to the worker's socket;
3. the facet host starts (beside the app: it needs the worker's catalogue) with the ``Tui``
   facet, :class:`RemoteConversationClient`'s, the app's commands and each feature's ``"tui"``
   facets (entry points ``chord.facets``: an approval modal, the indexer's progress…);
4. :class:`~coding_agent.tui.CodingAgentApp` runs until the user quits, while the supervisor
   restarts a worker that dies. The app shows "unavailable" in between, and every facade
   rehydrates from the new worker.

A late joiner (``coding-agent attach``) runs the same code: all arrives in the snapshot.

Switching sessions in place (``/resume``, ``/sessions``; :mod:`.session_commands`) reuses that
same path rather than restarting the app: the wire source's connect function dials the socket
of the session shown *now*, so switching makes sure a worker serves the new session, points the
source at it and closes the old connection. Every facade unbinds and rehydrates from the new
worker as after a restart, and the transcript rebuilds from the new view. The session left behind
is treated as ``/quit`` treats it: its worker keeps running (a turn carries on) and stops by
itself once it has lingered with no client; ``/stop`` is what ends a worker.

The TUI's own facet packages are owned by a :class:`~chord.facet_packages.ReloadCoordinator` over the
facet host: ``/reload`` reloads every one of them (after the worker's), and with ``dev`` it
watches their sources like the worker's ``--dev``, a failed reload showing as an error toast
while the previous generation keeps serving.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from textual.screen import ModalScreen

from chord import (
    Context,
    FrameConnection,
    WireServiceSource,
    connect_service_source,
    connect_unix,
)
from chord.textual import app_turn, run_app_with_facets
from coding_agent.contracts import ReloadOutcome
from coding_agent.session_files.folders import Session
from coding_agent.settings.config import ConfigError, load_config
from coding_agent.settings.package_reload import PackageReloader, scan_packages
from coding_agent.supervisor import READY_TIMEOUT, WorkerStartError, WorkerSupervisor
from coding_agent.tui.app import CodingAgentApp
from coding_agent.tui.conversation import SessionInfo
from coding_agent.tui.conversation_client import RemoteConversationClient
from coding_agent.tui.keybindings import load_keybindings
from coding_agent.tui.notify import TerminalNotifier
from coding_agent.tui.status_toasts import WorkerStatusToasts, pi_setup_toasts, tui_reload_toast

if TYPE_CHECKING:
    # start-up time: chord.facets and chord.facet_packages (the host, discovery, generations,
    # the reload coordinator) load with the facets, after the first frame
    from chord import Facet, FacetDiscoveryError, FacetGeneration, FacetHost, ReloadCoordinator
    from coding_agent.tui.commands.tree import TreeHost

__all__ = ["TUI_HOST", "ClientRun", "ConnectRefused", "load_tui_facets", "run_client"]

TUI_HOST = "tui"
"""The host kind feature packages are asked for (``chord_facets(host="tui")``)."""

_logger = logging.getLogger("coding_agent.tui")


class ConnectRefused(Exception):
    """Raised by the ``connect`` function given to :func:`run_client` when dialling again can
    never succeed (a server refused the token: it was revoked or changed). The app ends rather
    than showing "reconnecting" for ever, and :func:`run_client` raises it; the message is the
    one line the command line says."""


def load_tui_facets(
    facets_dirs: Sequence[str | Path] = (),
) -> tuple[list[FacetGeneration], list[str]]:
    """Load one generation of every facet package for the TUI host.

    Returns the loaded generations and one message per package that could not be found or
    loaded: a broken feature package costs its own facets, never the app.
    """
    generations: list[FacetGeneration] = []
    problems: list[str] = []
    for generation in _tui_generations(facets_dirs, problems):
        if generation is not None:
            generations.append(generation)
    return generations, problems


async def _load_tui_facets_stepwise(
    facets_dirs: Sequence[str | Path],
    between: Callable[[], Awaitable[None]],
    generations: list[FacetGeneration],
    problems: list[str],
) -> None:
    """:func:`load_tui_facets` into ``generations`` and ``problems`` (the caller's, so a load
    cancelled half-way leaves its generations where the caller purges them), awaiting
    ``between()`` after each package: the app handles the keys typed meanwhile."""
    for generation in _tui_generations(facets_dirs, problems):
        if generation is not None:
            generations.append(generation)
        await between()


def _tui_generations(
    facets_dirs: Sequence[str | Path], problems: list[str]
) -> Iterator[FacetGeneration | None]:
    """One loaded generation per facet package found (``None`` for one that failed; each
    problem is appended to ``problems``)."""
    # lazy: start-up time (called as the facet host starts, after the first frame)
    from chord import discover_facet_packages, load_generation

    def skip(error: FacetDiscoveryError) -> None:
        problems.append(str(error))

    for package in discover_facet_packages(facets_dirs, on_error=skip):
        try:
            yield load_generation(package, TUI_HOST)
        except Exception as error:
            problems.append(f"facet package {package.name!r} did not load: {error}")
            yield None


class ClientRun:
    """What a running client exposes to its caller (tests drive the app through it).

    ``session`` is the session shown *now*: ``/resume`` switches it (``switches`` counts how
    often). ``reloader`` reloads the TUI process's facet packages (``/reload``, ``--dev``).
    """

    def __init__(
        self,
        app: CodingAgentApp,
        client: RemoteConversationClient,
        session: Session | None = None,
    ) -> None:
        self.app = app
        self.client = client
        self.host: FacetHost | None = None
        self.session = session
        self.switches = 0
        self.reloader: PackageReloader | None = None
        self.stopped = False
        """``/stop``: the user asked to stop the session's worker, not only to leave."""
        self.stopped_elsewhere = False
        """The worker stopped on a signal this TUI did not send (``/stop`` in another TUI):
        the app left instead of starting a new worker."""


async def run_client(
    session: Session,
    *,
    supervisor: WorkerSupervisor | None,
    facets_dirs: Sequence[str | Path] = (),
    model: str | None = None,
    models: Sequence[str] = (),
    dev: bool = False,
    on_start: Callable[[ClientRun], Awaitable[None] | None] | None = None,
    connect: Callable[[], Awaitable[FrameConnection]] | None = None,
    on_painted: Callable[[], None] | None = None,
    **run_options: Any,
) -> ClientRun:
    """Run the TUI of ``session`` until the app exits (see the module docstring).

    ``supervisor`` starts or reuses the worker and restarts it when it dies (``None``: just
    connect and wait). ``models`` are the ``--models`` patterns Ctrl+P cycles through. ``dev`` watches the TUI facet packages' sources and reloads them on
    change (the worker's ``--dev`` is the supervisor's option). ``on_start`` gets the
    :class:`ClientRun` once the facet host runs. ``run_options`` go to ``App.run_async``
    (``headless=True``, ``auto_pilot=...`` in tests). Stops a worker the supervisor started when
    the app exits; ``/resume`` treats the session it leaves the same way. ``connect`` replaces
    dialling the session's socket (``attach tcp://…``: the session on a ``coding-agent serve``;
    ``supervisor`` is ``None`` then, and ``/resume`` of another session is refused); when it
    raises :class:`ConnectRefused` the app ends and this raises it.
    ``on_painted`` is called once the first frame is painted and the TUI's facets are loaded
    (the command line ends the cycle collector's start-up pause there: see
    :mod:`coding_agent.worker.gc_policy`).
    """
    failed: list[WorkerStartError | ConnectRefused] = []
    info = SessionInfo(session.id, str(session.cwd), model=model or session.model)
    client = RemoteConversationClient(info)
    settings_problems: list[str] = []
    try:
        files = load_config(session.cwd)
        theme, settings_problems = files.theme, pi_setup_toasts(files.warnings)  # pi's setup
    except ConfigError as error:  # the command line reported it already; keep going
        theme, settings_problems = None, [str(error)]
    app = CodingAgentApp(client, keybindings=load_keybindings(), theme=theme)
    app.wait_for_facets()  # the facet host starts beside the app (run_app_with_facets)
    app.faux_script = session.settings.faux_script
    app.add_dirs = session.settings.present_add_dirs()
    app.on_server = connect is not None  # a server's session: /stop cannot stop it
    settings_problems += [] if app.on_server else session.settings.gone_add_dirs()  # notices
    run = ClientRun(app, client, session)
    generations: list[FacetGeneration] = []  # loaded after the first frame (build_facets)
    problems: list[str] = []
    reloader = PackageReloader(lambda: scan_packages(facets_dirs), "tui")
    run.reloader = reloader
    toasts = WorkerStatusToasts(app)
    coordinator: ReloadCoordinator | None = None
    starting = anyio.CancelScope()
    try:
        async with anyio.create_task_group() as group:
            control = _SessionControl(run, supervisor, group, toasts, connect, failed)

            async def start_worker(keeper: WorkerSupervisor) -> None:
                with starting:
                    try:
                        await keeper.ensure_started()
                    except WorkerStartError as error:
                        failed.append(error)
                        app.exit()
                        return
                    if control.supervisor is keeper:  # not switched away meanwhile (/resume)
                        control.source.retry_now()  # it serves: dial now, not after a backoff
                        control.start()  # from now on a worker that dies is restarted

            tree_hosts: list[TreeHost] = []  # made with the facets (build_facets)

            async def switch_branch(ref: str, ctx: Context) -> None:  # /resume branch N
                tree_host = tree_hosts[0] if tree_hosts else None
                if tree_host is None or tree_host.switch_branch is None:
                    app.notify("/resume: the tree commands are not active", severity="error")
                    return
                await tree_host.switch_branch(ref, ctx)

            notifier = TerminalNotifier.for_project(app, session.cwd)  # OSC 9/777, bell

            async def build_facets() -> list[Facet]:  # as the host starts, after the first frame
                try:
                    return await make_facets()
                finally:
                    if on_painted is not None:
                        on_painted()

            async def turn() -> None:
                await app_turn(app)

            async def make_facets() -> list[Facet]:
                # lazy: start-up time. The commands' modules (with the context/ and
                # session_files/ modules and the Textual widgets they use) load here, after the
                # first frame, not before it; step by step, the app taking keys in between
                # (app_turn: what is typed as the editor appears shows at once).
                await turn()
                from coding_agent.tui.commands.core import commands_facet
                from coding_agent.tui.commands.prompts import prompt_facets

                await turn()
                from coding_agent.tui.commands.sessions import session_commands_facet
                from coding_agent.tui.commands.shell import RemoteShellRunner
                from coding_agent.tui.commands.tree import tree_commands_facet
                from coding_agent.tui.commands.trust import trust_facet
                from coding_agent.tui.commands.working_dirs import working_dirs_commands_facet

                await turn()
                await _load_tui_facets_stepwise(facets_dirs, turn, generations, problems)
                tree_host = _tree_host(app, client, control)
                tree_hosts.append(tree_host)
                facets: list[Facet] = [
                    client.facet(),
                    notifier.facet(),
                    commands_facet(client, models=models, show_text=app.show_text),
                    session_commands_facet(control, cwd=session.cwd, branch=switch_branch),
                    tree_commands_facet(tree_host, cwd=session.cwd),
                    working_dirs_commands_facet(lambda: run.session, app.show_add_dirs),
                ]
                rescans: list[Callable[[], None]] = []  # what /trust scans again
                facets.append(trust_facet(session.cwd, rescans=rescans))  # /trust, what waits
                for generation in generations:
                    facets.extend(generation.facets)
                # Last: a prompt template never takes the name of another command.
                packages = {g.package.name for g in generations}  # (in the worker too)
                facets += prompt_facets(client, session.cwd, rescans, packages)
                shell = RemoteShellRunner(client)  # !cmd and !!cmd
                app.shell = shell
                facets.append(shell.facet())
                return facets

            def report(error: BaseException) -> None:
                _logger.error("TUI facet host error: %r", error, exc_info=error)
                app.tui.notify(f"{error}", severity="error")

            async def started(host: FacetHost) -> None:
                nonlocal coordinator
                # lazy: start-up time (the host starts after the first frame)
                from chord import ReloadCoordinator

                run.host = host
                # From here on the coordinator owns the generations (and disposes them).
                coordinator = ReloadCoordinator(
                    host, generations, on_report=tui_reload_toast(app, reloader)
                )
                generations.clear()
                reloader.coordinator = coordinator
                if dev:
                    await group.start(coordinator.run)
                app.call_later(app.facets_active)  # the worker's commands are known now
                client.on_status(toasts.listener)
                client.on_status(notifier.listener)
                if connect is None:  # a local worker: /stop in another TUI ends this one too
                    client.on_status(lambda status: _stopped_elsewhere(run, control, status))
                if client.status is not None:  # arrived before the listener: say it too
                    app.call_later(toasts.listener, client.status)
                    notifier.listener(client.status)
                for problem in [*problems, *settings_problems]:
                    app.tui.notify(problem, severity="warning")
                if on_start is not None:
                    result = on_start(run)
                    if result is not None:
                        await result

            if supervisor is None:
                control.start()
            else:
                group.start_soon(start_worker, supervisor)
            try:
                await run_app_with_facets(
                    app,
                    app.tui,
                    build_facets,
                    service_sources=[control.source],
                    on_error=report,
                    on_host=started,
                    host_beside=True,  # paint and take typing before the worker serves
                    **run_options,
                )
            finally:
                if coordinator is not None:
                    coordinator.stop()
                run.stopped = app.stop_requested
                starting.cancel()
                with anyio.CancelScope(shield=True):
                    # Quitting is not a crash: no restart from here on. /quit leaves the worker
                    # running (a turn carries on, it lingers); /stop ends it.
                    await control.aclose(stop=run.stopped)
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if coordinator is not None:
                await coordinator.dispose()
        for generation in generations:
            generation.purge()
    if failed:
        raise failed[0]
    return run


class _SessionControl:
    """The running client's :class:`~coding_agent.tui.commands.sessions.SessionControl`.

    It owns the wire source, whose connect function dials the socket of the session shown
    now, and the supervisor of that session. :meth:`switch_to` makes sure a worker serves the
    new session, points the source at its socket and closes the old connection: every remote
    facade unbinds and rehydrates from the new worker, exactly as after a worker restart.
    The session left behind is treated as ``/quit`` treats it: its worker keeps running.
    """

    def __init__(
        self,
        run: ClientRun,
        supervisor: WorkerSupervisor | None,
        group: anyio.abc.TaskGroup,
        toasts: WorkerStatusToasts,
        connect: Callable[[], Awaitable[FrameConnection]] | None = None,
        failed: list[WorkerStartError | ConnectRefused] | None = None,
    ) -> None:
        assert run.session is not None
        self._remote_connect = connect
        self._failed = failed if failed is not None else []
        self._run = run
        self._session: Session = run.session
        self._supervisor = supervisor
        self._group = group
        self._toasts = toasts
        self._watching = anyio.CancelScope()
        self._lock = anyio.Lock()
        self._arrived = anyio.Event()
        self._stopping: list[WorkerSupervisor] = []
        self._closed = False
        self.source: WireServiceSource = connect_service_source(
            self._connect, task_group=group, on_error=_log_wire_error
        )

    @property
    def session(self) -> Session:
        return self._session

    @property
    def supervisor(self) -> WorkerSupervisor | None:
        """The supervisor of the session shown now (``None``: attached, nobody keeps it)."""
        return self._supervisor

    async def show_screen(self, screen: ModalScreen[Any]) -> Any:
        """Show ``screen`` over the app and return what it is dismissed with."""
        return await _show_screen(self._run.app, screen)

    def stop_watching(self) -> None:
        """Restart the worker no more when it dies (it was stopped on purpose)."""
        self._watching.cancel()

    def start(self) -> None:
        """Start watching the worker (restart it when it dies)."""
        if self._supervisor is not None:
            self._group.start_soon(
                _watch, self._supervisor, self.source, self._run.app, self._watching
            )

    async def _connect(self) -> FrameConnection:
        if self._remote_connect is not None:
            try:
                connection = await self._remote_connect()
            except ConnectRefused as refused:  # final: end the app, dial no more
                self._failed.append(refused)
                self._run.app.exit()
                await anyio.sleep_forever()  # until the exit closes the source
                raise
            self._arrived.set()
            return connection
        path = self._session.socket_path
        connection = await connect_unix(path)
        if path != self._session.socket_path:  # switched while dialling: dial again
            await connection.aclose()
            raise ConnectionAbortedError(f"{path} is not the session shown any more")
        self._arrived.set()
        return connection

    async def switch_to(self, session: Session) -> None:
        async with self._lock:
            if self._closed:
                raise RuntimeError("the TUI is closing")
            if session.id == self._session.id:
                return
            if self._remote_connect is not None:
                raise RuntimeError(
                    "this TUI is attached to a session on a server: attach to another one with "
                    "coding-agent attach tcp://HOST:PORT/SESSION"
                )
            keeper: WorkerSupervisor | None = None
            if self._supervisor is not None:
                keeper = self._supervisor.for_session(session)
                self._stopping.append(keeper)  # stopped at exit even if we fail half-way
                await keeper.ensure_started()
                self._stopping.remove(keeper)
            elif not session.worker_running():
                raise RuntimeError(
                    f"session {session.id} has no running worker, and this TUI starts none"
                )
            old = self._supervisor
            self._watching.cancel()
            self._arrived = anyio.Event()  # set by the first connection to the new socket
            self._session, self._supervisor = session, keeper
            self._run.session = session
            self._run.switches += 1
            info = SessionInfo(session.id, str(session.cwd), session.model)
            self._run.client.switch_session(info)
            self._run.app.show_add_dirs(session.settings.present_add_dirs())
            self._run.app.footer.repaint()
            self._watching = anyio.CancelScope()
            self.start()  # from now on a new worker that dies is restarted
            if old is not None:
                self._group.start_soon(self._stop, old)  # as quitting would
            remote = self.source.connection
            if remote is not None:
                await remote.aclose("the TUI switched to another session")
            with anyio.fail_after(READY_TIMEOUT):
                await self._arrived.wait()
                await self.source.wait_connected()

    async def _stop(self, supervisor: WorkerSupervisor) -> None:
        self._stopping.append(supervisor)
        try:
            with anyio.CancelScope(shield=True):
                await supervisor.release()  # as /quit: the session left keeps running
        finally:
            self._stopping.remove(supervisor)

    async def reload_tui(self) -> list[ReloadOutcome]:
        reloader = self._run.reloader
        assert reloader is not None
        return await reloader.reload_all()

    def hold_worker_reload_toasts(self) -> Callable[[Iterable[str]], None]:
        return self._toasts.hold()

    async def aclose(self, *, stop: bool = True) -> None:
        """Stop watching, stop (``stop``) or release the worker this TUI started, close the
        source. Workers of sessions left by ``/resume`` are stopped either way."""
        self._closed = True
        self._watching.cancel()
        # Gone first: a worker that stops gives its other clients a moment to leave (its
        # status says it stops), not this one.
        await self.source.aclose()
        for supervisor in self._stopping:
            await supervisor.stop()
        if self._supervisor is not None:
            if stop:
                await self._supervisor.stop_worker()
            else:
                await self._supervisor.release()

    @property
    def closing(self) -> bool:
        """The TUI is leaving (:meth:`aclose` began)."""
        return self._closed


async def _show_screen(app: CodingAgentApp, screen: ModalScreen[Any]) -> Any:
    """Push ``screen`` (from a facet task) and wait until it is dismissed; its result."""
    done = anyio.Event()
    result: list[Any] = []

    def finished(value: Any) -> None:
        result.append(value)
        done.set()

    with app._context():  # pyright: ignore[reportPrivateUsage] - from a facet task
        app.push_screen(screen, finished)
    try:
        await done.wait()
    finally:
        if not done.is_set() and screen.is_attached:
            screen.dismiss(None)
    return result[0]


def _tree_host(app: CodingAgentApp, client: RemoteConversationClient, control: Any) -> TreeHost:
    """What ``/tree`` and ``/rewind`` act on: the followed conversation, the editor, screens."""
    # lazy: start-up time (made with the facets, after the first frame)
    from coding_agent.tui.commands.tree import TreeHost

    async def show_screen(screen: ModalScreen[Any]) -> Any:
        return await _show_screen(app, screen)

    def busy() -> bool:
        view = app.decoded_view
        return view is not None and view.turn is not None

    return TreeHost(
        conversation_id=lambda: client.conversation_id,
        follow=client.follow,
        busy=busy,
        restore_prompt=app.editor.restore,
        show_screen=show_screen,
        session=lambda: control.session,
        on_follow=client.on_follow,
    )


def _stopped_elsewhere(run: ClientRun, control: _SessionControl, status: dict[str, Any]) -> None:
    """The worker says it stops on a signal (``/stop`` in another TUI, a ``kill``) that this
    TUI did not send: leave (the command line prints one line saying so) instead of starting
    a worker again, which would resume what the other window stopped."""
    app = run.app
    if not status.get("stopping") or app.stop_requested or control.closing:
        return  # not stopping, or stopped by this TUI (/stop, leaving with a worker of its own)
    if run.stopped_elsewhere:
        return
    run.stopped_elsewhere = True
    control.stop_watching()
    app.exit()


async def _watch(
    supervisor: WorkerSupervisor, source: Any, app: CodingAgentApp, scope: anyio.CancelScope
) -> None:
    try:
        with scope:
            await supervisor.watch(source)
    except Exception as error:
        app.tui.notify(f"The session worker cannot be restarted: {error}", severity="error")


def _log_wire_error(error: BaseException) -> None:
    # A dropped connection is the normal sign of a restarting worker; log, never crash.
    _logger.info("session worker connection: %r", error)
