"""The session worker: one process that owns a session's harness and serves it on a socket.

docs/design/decisions.md#d9 splits the coding agent in two processes. This is the one with the authority: it
opens the harness on the session's JSONL storage (fsync on, so a ``kill -9`` loses nothing that
was committed), sets up the session facets, and serves their remotable services (``pi.conversation``
and the features' dialogs) over a Unix socket in the session folder with the chord wire. TUIs come
and go; the worker stays. A worker that dies is started again and resumes from storage: a turn
that was streaming, waiting for approval or running a tool carries on.

The facets, in the order the host gets them (docs/design/chord.md#built-in-services):

1. ``@pi/harness`` — :func:`pico3.facets.harness_session_facet`: ``pi.harness`` and one
   ``pi.conversation`` instance per conversation;
2. ``coding-agent/providers`` — the model providers (:mod:`.providers_facet`);
3. ``coding-agent/tools`` — read, write, edit, bash, grep, find, ls (:mod:`.tools_facet`), which
   journal every file ``write`` and ``edit`` change first (:mod:`.file_history`);
   ``coding-agent/session-tree`` — ``/tree``, ``/label``, ``/rewind`` (:mod:`.tree_service`);
4. ``coding-agent/context-files`` — the system prompt's sections (base prompt or ``SYSTEM.md``,
   ``APPEND_SYSTEM.md``, ``AGENTS.md`` / ``CLAUDE.md``, skills); ``coding-agent/shell`` — the
   user's ``!cmd`` runner (:mod:`.shell_service`);
5. ``coding-agent/worker-status`` — ``coding-agent.worker``: session, pid, models, ``--dev`` reloads;
   ``coding-agent/reload`` — ``coding-agent.reload``: ``/reload`` from a TUI (:mod:`coding_agent.settings.package_reload`);
   ``coding-agent/working-dirs`` — ``coding-agent.working-dirs``: ``/add-dir`` (:mod:`.working_dirs`);
6. every installed feature package's ``"session"`` facets (entry points ``chord.facets``), and
   those of ``--facets-dir`` folders.

Once the host is active (every facet registered its tools and hooks) the worker prepares the
root conversation (its model, and every registered tool selected), then calls
``pi.harness.resume``: recovery runs only now, with every hook in place.

Command line::

    python -m coding_agent.worker.main SESSION_DIR [--model provider/id] [--faux-script FILE]
        [--dev] [--facets-dir DIR]... [--no-fsync] [--exit-on-stdin-eof]
        [--permission-mode ask|accept-edits|plan|auto]
        [--tool-calling native|text] [--linger SECONDS]
        [--allowed-tool=RULE]... [--disallowed-tool=RULE]... [--system-prompt[-file]=...]
        [--append-system-prompt[-file]=...] [--mcp-config=FILE_OR_JSON]... [--strict-mcp-config]
        [--settings=FILE_OR_JSON] [--agents=JSON] [--tools=TOOLS]

The last line is Claude Code's run-scoped flags as the command line took them
(:mod:`coding_agent.settings.run_options`): this worker's only, stored nowhere.

It prints ``READY <socket path>`` on stdout once it serves, and exits 0 on SIGTERM or SIGINT, or
by itself once no client has been connected and nothing has been running for ``--linger`` seconds
(default 600; 0 never; see :mod:`coding_agent.worker.linger`).
:func:`open_session_host` is the same setup without a socket, for the headless modes.

Tests make a worker slow to start, deterministically, with ``CODING_AGENT_WORKER_START_GATE``
naming a FIFO: the worker reads one line from it before it does anything else (no socket, no lock
until then), so a test decides when it may serve (:data:`START_GATE_ENV`).

Why one module: it is the worker process's composition root: the command line, the session host's
setup (storage, facets in their order, features, permission mode) and the serving loop with its
linger and stop rules. Each part is short and exists only to hand its result to the next; the order
of the facets and the startup sequence are the point of the module, and reading them in one place
is what keeps them right.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.abc
import msgspec

from chord import (
    BACKGROUND,
    Facet,
    FacetDiscoveryError,
    FacetEnvironment,
    FacetGeneration,
    FacetHost,
    FacetLoadError,
    RemoteServiceError,
    ServiceCall,
    create_facet_host,
    define_facet,
    discover_facet_packages,
    load_facet_packages,
)
from coding_agent.context.skills import SubagentSkills
from coding_agent.contracts import APPROVAL_MODE, APPROVAL_RULES
from coding_agent.session_files.folders import (
    Session,
    SessionError,
    check_writable,
    load_session,
    update_settings,
)
from coding_agent.session_files.private import PrivacyError, private_dir, socket_folder
from coding_agent.settings.config import ConfigError, load_config
from coding_agent.settings.facets_site import activate as activate_facets_site
from coding_agent.settings.git_approvals import SERVICE as GIT_APPROVALS_SERVICE
from coding_agent.settings.git_approvals import GitApprovalStore
from coding_agent.settings.guarded_paths import SERVICE as GUARDED_PATHS_SERVICE
from coding_agent.settings.guarded_paths import guarded_paths
from coding_agent.settings.model_config import TOOL_CALLING_ENV, RegistryError, UnknownModel
from coding_agent.settings.notifications import NotificationSettings
from coding_agent.settings.package_reload import (
    PackageReloader,
    reload_service_facet,
    scan_packages,
)
from coding_agent.settings.permission_modes import PERMISSION_MODES
from coding_agent.settings.permissions import PermissionFiles
from coding_agent.settings.project_services import project_services
from coding_agent.settings.run_options import (
    RunFlags,
    RunOptions,
    RunOptionsError,
    add_worker_flags,
    worker_flags,
)
from coding_agent.settings.safety import unapproved_reason
from coding_agent.settings.sandbox import sandbox_policy, session_sandbox
from coding_agent.settings.secret_env import child_environment
from coding_agent.settings.told_notes import ToldNotes
from coding_agent.settings.trust import (
    TrustError,
    check_project,
)
from coding_agent.settings.xdg import state_home
from coding_agent.worker.activity import ActivityWriter, activity_recorder, visit_recorder
from coding_agent.worker.fallback import pick_fallback, with_fallback
from coding_agent.worker.file_history import FileHistory, project_blobs
from coding_agent.worker.gc_policy import (
    freeze_after_turns,
    freeze_after_turns_shared,
    pause_while_opening,
)
from coding_agent.worker.linger import DEFAULT_LINGER, ClientCount, wait_unattended
from coding_agent.worker.max_turns import turn_limit_facet
from coding_agent.worker.notifications import Notifier, TuiWatch
from coding_agent.worker.providers import OpenAIProvider
from coding_agent.worker.providers_facet import (
    ProviderChoice,
    providers_facet,
    resolve_providers,
)
from coding_agent.worker.settings_log import settings_log_facet
from coding_agent.worker.shared_features import SharedFeatures, take_preloaded
from coding_agent.worker.shared_state import (
    DatabaseHistoryStore,
    SharedProcessHost,
    StorageBox,
    carried_settings,
    store_settings,
)
from coding_agent.worker.shell_service import shell_service_facet
from coding_agent.worker.status import WorkerStatus
from coding_agent.worker.system_prompt_facet import system_prompt_facet
from coding_agent.worker.tools.host import CHECKED_TARGETS_SERVICE, CheckedTargets
from coding_agent.worker.tools.web import WebSettings
from coding_agent.worker.tools_facet import tools_facet
from coding_agent.worker.tree_service import session_tree_facet
from coding_agent.worker.working_dirs import SERVICE as WORKING_DIRS_SERVICE
from coding_agent.worker.working_dirs import (
    WorkingDirectories,
    agent_files,
    session_keeper,
    working_dirs_facet,
)
from pico3 import (
    ATTENDANCE_SERVICE,
    CHILD_ENVIRONMENT_SERVICE,
    SANDBOX_MODE_SERVICE,
    SANDBOX_SERVICE,
    Attendance,
    ChildEnvironment,
    CorruptStorage,
    DomainProxy,
    HarnessOptions,
    HarnessService,
    HarnessServiceApi,
    JsonlStorage,
    LocalProcessHost,
    Models,
    PostgresStorage,
    Sandbox,
    SandboxMode,
    StorageError,
    harness_session_facet,
    reload,
    sandbox_available,
)
from pico3.models import ModelInfo

if TYPE_CHECKING:  # imported where used: a -p run serves no socket and reloads nothing
    from chord import ReloadCoordinator, ReloadReport
    from coding_agent.worker.database import SharedDatabase

__all__ = [
    "EXIT_BUSY",
    "EXIT_MODEL",
    "EXIT_STORAGE",
    "EXIT_USAGE",
    "START_GATE_ENV",
    "WORKER_FACET_ID",
    "SessionRuntime",
    "WorkerBusy",
    "WorkerConfig",
    "apply_permission_mode",
    "check_run_rules",
    "load_features",
    "main",
    "open_session_host",
    "prepare_root",
    "serve",
    "session_worker_config",
]

WORKER_FACET_ID = "coding-agent/worker"
EXIT_USAGE = 2
EXIT_BUSY = 3
EXIT_MODEL = 4
EXIT_STORAGE = 5
"""The session's storage failed (disk full, I/O error, read-only): the supervisor restarts."""
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EROFS, errno.EDQUOT, errno.EFBIG})
FAULT_GRACE = 1.0
"""Seconds a worker that stops (its storage failed, a signal) keeps its clients, so they see
why, before it exits."""
"""The model could not be resolved (unknown provider, missing API key)."""

_log = logging.getLogger("coding_agent.worker")

NOTIFY_SETTLE = 5.0
"""Seconds a closing session host waits for due notifications to go out (they stay due, and
the next start sends them, when this is not enough)."""


class WorkerBusy(SessionError):
    """Another process (a worker, or a headless run) holds the session's lock."""


class WorkerConfig(msgspec.Struct, frozen=True):
    """What a session host needs: the session and the worker's options."""

    session: Session
    model: str | None = None
    faux_script: Path | None = None
    dev: bool = False
    facets_dirs: tuple[Path, ...] = ()
    add_dirs: tuple[str, ...] = ()
    """``--add-dir``: more working directories (:mod:`coding_agent.worker.working_dirs`)."""
    installed_features: bool = True
    fsync: bool = True
    storage: str | None = None
    """``--storage``: a PostgreSQL URL holding the session's commits (named by the session id)
    instead of the folder's JSONL storage."""
    lease: float | None = None
    """``--lease``: the PostgreSQL lease's expiry in seconds (``None``: pico3's default, 2 s)."""
    env: Mapping[str, str] | None = None
    model_config: Mapping[str, Any] | None = None
    permission_mode: str | None = None
    """``--permission-mode``: stored as the session's mode before recovery (see
    :func:`apply_permission_mode`); ``None`` keeps the stored one."""
    linger: float = DEFAULT_LINGER
    """``--linger``: seconds without a client and without live work after which :func:`serve`
    stops (0: never)."""
    thinking: str | None = None
    """``--thinking``: set as the root conversation's thinking level (an explicit choice)."""
    default_thinking: str | None = None
    """The thinking level a *new* root conversation starts with (the config file's)."""
    sandbox: bool = False
    """``sandbox.enabled``: the session's commands run in :mod:`pico3.sandbox` (when it works)."""
    sandbox_deny_read: tuple[str, ...] = ()
    sandbox_allow_write: tuple[str, ...] = ()
    sandbox_allow_domains: tuple[str, ...] = ()
    web: WebSettings = WebSettings()
    """The web tools' settings (``[web_fetch]``, ``[web_search]``, the sandbox's domains)."""
    notifications: NotificationSettings | None = None
    """``[notifications]``: what the session notifies of (``None``: nothing; see
    :mod:`coding_agent.worker.notifications`)."""
    environment: ChildEnvironment | None = None
    """What the session's child processes get for an environment (``None``: the provider
    keys' defaults, :meth:`pico3.ChildEnvironment.default`); see
    :mod:`coding_agent.settings.secret_env`."""
    hosted: bool = False
    """A session of a host process of many (:mod:`coding_agent.worker.host`): process-wide
    policies (the collector's) are the host's, not the session's."""
    database: SharedDatabase | None = None
    """In a host process of many sessions (:mod:`coding_agent.worker.host`): the PostgreSQL
    pool and lease renewer the sessions share (``None``: connections of the session's own)."""
    fallback_model: str | None = None
    """``--fallback-model`` (``-p``): the model an overloaded or unavailable one's requests go
    to, this run only (:mod:`coding_agent.worker.fallback`)."""
    run: RunOptions = RunOptions()
    """Claude Code's run-scoped flags (``--allowedTools``, ``--append-system-prompt``,
    ``--mcp-config``...): this process's only, stored nowhere (:mod:`coding_agent.settings.run_options`)."""


@dataclass
class SessionRuntime:
    """A running session host: the facet host, ``pi.harness``, the model choice, the status."""

    host: FacetHost
    harness: HarnessServiceApi
    choice: ProviderChoice
    status: WorkerStatus
    coordinator: ReloadCoordinator | None = None
    storage: StorageWatch | None = None
    """Set once the session's storage failed (see :class:`StorageWatch`)."""


class StorageWatch:
    """Whether the session's storage failed (ENOSPC, EIO, EROFS...): the kernel then refuses
    every commit (fail-stop), so the session cannot go on in this process.

    :meth:`failed` is called by the kernel once; it puts the failure in the worker's status
    (``storageFailure``: every client sees it) and sets :attr:`event`, on which :func:`serve`
    writes one line on stderr (``worker.log``) and stops the worker with :data:`EXIT_STORAGE`,
    so the supervisor starts a fresh one, which resumes from what was stored once the cause is
    gone (the headless modes print their own line and exit).
    Nothing acknowledged is lost: a commit is acknowledged only once stored.
    """

    def __init__(self, status: WorkerStatus) -> None:
        self._status = status
        self.message: str | None = None
        self.event = anyio.Event()
        self._callbacks: list[Callable[[], None]] = []

    def on_failure(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` when the storage fails (at once if it has)."""
        if self.message is not None:
            callback()
        else:
            self._callbacks.append(callback)

    def failed(self, error: BaseException) -> None:
        if self.message is not None:
            return
        cause = str(error).split("fail-stopped: ", 1)[-1]  # the storage's own words
        self.message = f"the session's storage failed: {cause}"
        self._status.set_storage_failure(self.message)
        self.event.set()
        for callback in self._callbacks:
            callback()


async def prepare_root(
    harness: HarnessServiceApi,
    choice: ProviderChoice,
    *,
    explicit: bool,
    thinking: str | None = None,
    default_thinking: str | None = None,
) -> None:
    """Give the root conversation a model (when it has none, or ``explicit``ly chosen), a
    thinking level (``thinking`` always; ``default_thinking`` only for a new conversation), and
    select every registered tool it does not select yet; one commit, or none."""
    root = await harness.harness.root(BACKGROUND)
    config = await root.config(BACKGROUND)
    patch: dict[str, Any] = {}
    new = config.get("model") is None
    if (explicit or new) and config.get("model") != choice.config:
        patch["model"] = choice.config
    level = thinking if thinking is not None else default_thinking if new else None
    if level is not None and config.get("thinkingLevel", "off") != level:
        patch["thinkingLevel"] = level
    selected = list(config.get("selectedTools") or [])
    wanted = selected + [name for name in harness.harness.tools.names() if name not in selected]
    if wanted != selected:
        patch["selectedTools"] = wanted
    if patch:
        await root.set_config(patch, BACKGROUND)


def load_features(
    config: WorkerConfig, shared: SharedFeatures | None = None
) -> list[FacetGeneration]:
    """Load one generation of every feature package's ``"session"`` facets: the installed ones
    (entry points ``chord.facets``, unless ``installed_features`` is off) and ``facets_dirs``.
    A broken installed package (its entry point, or its import) is logged and skipped, so the
    session starts without it (without facets-approval, pico3's approval gate then blocks every
    call that needs approval, naming the package); a broken folder raises (it was asked for).

    With ``shared`` (a host of many sessions) the packages' generations are the host's,
    lent (:class:`~coding_agent.worker.shared_features.SharedFeatures`); else fresh ones, or,
    in a child of the warm start's fork server, the generations the server preloaded, adopted
    (:func:`~coding_agent.worker.shared_features.take_preloaded`: those of an unchanged source
    text, lent and then the session's alone)."""

    def skip(error: FacetDiscoveryError | FacetLoadError) -> None:
        _log.error("skipping a broken facet package: %s", error)

    adopted = take_preloaded() if shared is None else None
    lender = shared if shared is not None else adopted
    discover = discover_facet_packages if lender is None else lender.discover
    loaded: list[FacetGeneration] = []
    try:
        packages = discover(config.facets_dirs, installed=config.installed_features, on_error=skip)
        for package in packages:
            try:
                if lender is None:
                    loaded.extend(load_facet_packages([package], "session"))
                else:
                    loaded.append(lender.lend(package))
            except FacetLoadError as error:
                if package.folder is not None:  # a --facets-dir folder: asked for, so it fails
                    raise
                skip(error)
    except BaseException:
        for generation in reversed(loaded):
            generation.purge()
        raise
    finally:
        if adopted is not None:  # the server's hold goes: what is lent is the session's alone
            adopted.close()
    return loaded


@asynccontextmanager
async def open_session_host(
    config: WorkerConfig,
    *,
    extra_facets: Sequence[Facet] = (),
    generations: list[FacetGeneration] | None = None,
    on_error: Callable[[BaseException], None] | None = None,
    attendance: Attendance | None = None,
    extra_services: Mapping[str, Any] | None = None,
    feature_loader: Callable[[WorkerConfig], list[FacetGeneration]] | None = None,
) -> AsyncIterator[SessionRuntime]:
    """Set up the session facets over the session's storage, resume, and yield the runtime.

    ``extra_services`` are more harness services, for this process's presentation (``coding-agent
    acp`` hands the editor's MCP servers and its file system and terminal to the features and
    the tools here).

    ``attendance`` (the served worker's client count) becomes the harness service
    ``attendance``: features let costly things go while nobody is attached (MCP servers).

    The session's ``worker.lock`` is held throughout (one harness per storage); another holder
    makes it raise :class:`WorkerBusy` at once.

    ``extra_facets`` join the host (the headless modes add their presentation here).
    ``generations`` are the feature packages (default: ``feature_loader(config)``, itself by default
    :func:`load_features`, called once the lock is held); the host owns them from here on and
    releases them when it closes. Raises
    :class:`~coding_agent.worker.providers.RegistryError` or ``ValueError`` for a bad model or
    faux script before anything is opened."""
    session = config.session
    check_writable(session)  # a read-only folder: one line naming it, not a traceback later
    try:  # 0700 whatever the umask (a folder of an older version is tightened)
        private_dir(session.path)
        private_dir(session.storage_dir)
    except PrivacyError as error:
        raise SessionError(str(error)) from None
    lock = _Lock(session)
    try:
        lock.acquire()  # one harness per storage: raises WorkerBusy before anything is loaded
    except BaseException:
        for generation in generations or ():
            generation.purge()
        raise
    # The sandbox probe starts bubblewrap once (tens of milliseconds of wall time, most of it in
    # the child): it runs beside the feature packages' loading, and _sandbox_service below gets
    # its cached answer (or, if the thread failed, probes again itself and reports why).
    probe = threading.Thread(target=_probe_sandbox, args=(config.env,), daemon=True)
    probe.start()
    if generations is None:
        try:
            generations = (feature_loader or load_features)(config)
        except BaseException:
            lock.release()
            raise
    probe.join()
    coordinator: ReloadCoordinator | None = None
    processes: LocalProcessHost | None = None
    proxy: DomainProxy | None = None
    choice: ProviderChoice | None = None
    opening = pause_while_opening()
    try:
        choice = resolve_providers(
            config.model if config.model is not None else session.model,
            env=config.env,
            config=config.model_config,
            faux_script=config.faux_script,
        )
        fallback = (  # checked as --model is, before the session opens
            None
            if config.fallback_model is None
            else pick_fallback(
                config.fallback_model,
                choice.model,
                choice.providers,
                env=config.env,
                config=config.model_config,
            )
        )
        models = Models()
        # ``state_dir`` and ``workspace`` are where feature kinds keep session state (the
        # indexer's SQLite index) and what they work on (facets-indexer's service keys).
        # Background jobs (``pi.job``) run under a process host whose records live in the
        # session folder: they outlive this process and a restarted worker re-finds them.
        environment = config.environment or ChildEnvironment.default()
        sandbox_service, sandbox_status, proxy = _sandbox_service(config)
        processes = LocalProcessHost(session.path / "processes", environment=environment)
        # On PostgreSQL, what another server's worker needs after a failover goes to the
        # session's blobs too (file history, process records, launch settings: .shared_state).
        shared = (
            StorageBox(lambda: _postgres_storage(config, processes)) if config.storage else None
        )
        rule_files = PermissionFiles(session.cwd, config.env, told=ToldNotes.default(config.env))
        working_dirs = WorkingDirectories(
            config.add_dirs,
            agent_files(session.cwd, config.env or os.environ, session.path),
            rule_files,
        )
        services: dict[str, Any] = {
            "models": models,
            "state_dir": str(session.path / "state"),
            # the agent's own state, shared by all sessions (facets-mcp's OAuth tokens)
            "agent_state_dir": str(state_home(config.env) / "coding-agent"),
            "workspace": str(session.cwd),
            "process_host": processes if shared is None else SharedProcessHost(processes, shared),
            # what an edit asks about in every mode but auto, with the reason the dialog shows:
            # the files that run code, the agent's config and trust, --facets-dir, its state
            GUARDED_PATHS_SERVICE: guarded_paths(
                config.env,
                facets_dirs=config.facets_dirs,
                state_dir=state_home(config.env) / "coding-agent",
            ),
            CHILD_ENVIRONMENT_SERVICE: environment,
            # where the approval leaves the real path it checked an edit's target as: the
            # write lands exactly there or fails (a symlink swapped in meanwhile cannot move it)
            CHECKED_TARGETS_SERVICE: CheckedTargets(),
            **sandbox_service,
            # The permission rules' files (config.toml, Claude Code's settings) for the
            # approval feature, which parses and applies them (coding_agent.settings.permissions).
            "permission_rules": rule_files,
            # the repositories whose git configuration the user allowed as it is (a dialog's
            # "Allow always while ... stays as is"; coding_agent.settings.git_approvals)
            GIT_APPROVALS_SERVICE: GitApprovalStore.default(config.env),
            # where the file tools read unasked: the project, --add-dir, the settings' folders
            # and the agent's own files (coding_agent.worker.working_dirs)
            WORKING_DIRS_SERVICE: working_dirs,
            # the skills a subagent definition's skills: preloads (facets-subagents reads them
            # through this service: a feature never imports the app)
            "skills": SubagentSkills(session.cwd, config.env),
            **project_services(session.cwd, config.env),
        }
        if attendance is not None:
            services[ATTENDANCE_SERVICE] = attendance
        # --mcp-config's servers, --settings' hooks, --agents' subagents: the user's own, this run
        services.update(config.run.services())
        if config.run.settings is not None:  # its rules and switches, beside the files'
            rule_files.set_run_settings(config.run.settings_source, config.run.settings)
        services.update(extra_services or {})
        # No approval package, no unapproved calls: pico3 blocks them (the approval gate) and
        # the model and the user read which package is missing and what restores it.
        options = HarnessOptions(
            services=services, on_report=on_error, unapproved=unapproved_reason()
        )
        features = [facet for generation in generations for facet in generation.facets]
        box: dict[str, HarnessServiceApi] = {}
        status = WorkerStatus(
            session_id=session.id,
            cwd=str(session.cwd),
            dev=config.dev,
            models=_known(choice),
            sandbox=sandbox_status,
            unconfigured=choice.unreachable,
            any_model=choice.any_model,
        )
        for provider in choice.providers:
            if isinstance(provider, OpenAIProvider):
                name = provider.name
                provider.on_text_fallback = lambda model, name=name: status.add_text_tool_calling(
                    f"{name}/{model}"
                )
        providers = choice.providers
        if fallback is not None:
            providers = with_fallback(providers, choice.model, fallback, _say_fallback)

        def worker(env: FacetEnvironment) -> None:
            box["harness"] = env.use(HarnessService)

        tuis = TuiWatch()  # which TUIs are attached (the desktop notifications wait for none)
        reloader = PackageReloader(  # /reload from a TUI: every package, on demand
            lambda: scan_packages(config.facets_dirs, installed=config.installed_features),
            "session",
        )

        activity = ActivityWriter(session, fsync=config.fsync)  # off the loop, in order
        async with anyio.create_task_group() as group:
            group.start_soon(activity.run)
            storage_dir = str(session.storage_dir)
            history = FileHistory(
                session.path / "file-history",
                fsync=config.fsync,
                store=DatabaseHistoryStore(shared) if shared is not None else None,
                blobs=project_blobs(session.path.parent, session.cwd),  # shared by the project
            )
            harness_facet = harness_session_facet(
                shared.make
                if shared is not None
                else (lambda: JsonlStorage(storage_dir, fsync=config.fsync, create=False)),
                options,
                task_group=group,
                on_error=on_error,
            )
            facets = [
                harness_facet,
                providers_facet(models, providers),
                tools_facet(
                    session.cwd,
                    spill_dir=session.path / "spill",
                    history=history,
                    models=models,
                    environment=environment,
                    web=config.web,
                    env=config.env,
                    left_out=config.run.left_out(),  # --tools
                ),
                session_tree_facet(
                    history, on_visit=visit_recorder(session, config.fsync, writer=activity)
                ),
                system_prompt_facet(
                    session.cwd,
                    system=config.run.system_prompt,
                    append=config.run.append_system_prompt,
                ),
                shell_service_facet(
                    session.cwd, spill_dir=session.path / "spill", environment=environment
                ),
                define_facet(WORKER_FACET_ID, worker),
                status.facet(),
                reload_service_facet(reloader),
                working_dirs_facet(
                    working_dirs,
                    session.cwd,
                    config.env or os.environ,
                    session_keeper(session, shared),
                ),
                settings_log_facet(on_root_change=_settings_recorder(session, shared, group)),
                tuis.facet(),
                turn_limit_facet(group),  # a client's -p --max-turns (--server, parked)
                *features,
                *extra_facets,
            ]
            async with create_facet_host(facets, on_error=on_error) as host:
                harness = box["harness"]
                registry = harness.harness.tools
                status.tool_source = lambda: [
                    tool for name in registry.names() if (tool := registry.get(name)) is not None
                ]
                watch = StorageWatch(status)

                def on_open(opened: Any) -> Callable[[], None]:
                    opened.kernel.add_fault_listener(watch.failed)
                    return lambda: None

                harness.add_registration(on_open)
                await prepare_root(
                    harness,
                    choice,
                    explicit=config.model is not None,
                    thinking=config.thinking,
                    default_thinking=config.default_thinking,
                )
                if config.permission_mode is not None:
                    await apply_permission_mode(host, config.permission_mode)
                await check_run_rules(host, config.run)  # a bad rule: nothing resumes
                rule_files.set_run_rules(config.run.rules())  # before any call is decided
                await harness.resume(BACKGROUND)
                # the branch the session is on: what every client that opens it follows
                harness.add_registration(activity.install)  # stored in the session's storage
                await activity.open(harness.harness)
                activity.on_branch(status.set_branch)
                # from here on, what the user does orders the session lists (not the resume)
                harness.add_registration(
                    activity_recorder(session, fsync=config.fsync, writer=activity)
                )
                notifier: Notifier | None = None
                if config.notifications is not None:  # decided from commits, sent from here
                    notifier = Notifier(
                        config.notifications,
                        session_id=session.id,
                        cwd=session.cwd,
                        env=environment.environ(),  # secrets withheld, as from commands
                        tuis=tuis,
                        publish=status.add_notice,
                    )
                    harness.add_registration(notifier.install)
                    group.start_soon(notifier.run)
                kernel = harness.harness.kernel
                unfreeze = (
                    freeze_after_turns_shared(kernel)
                    if config.hosted
                    else freeze_after_turns(kernel)
                )
                runtime = SessionRuntime(host, harness, choice, status, storage=watch)
                # The coordinator owns the generations: /reload uses it always, --dev watches.
                coordinator = _coordinator(host, harness, generations, status)
                generations = []
                runtime.coordinator = reloader.coordinator = coordinator
                if config.dev:
                    await group.start(coordinator.run)
                try:
                    opening(True)  # open: freeze what it loaded (``unfreeze`` undoes it)
                    yield runtime
                finally:
                    with anyio.CancelScope(shield=True):
                        await activity.settle()  # the last prompt's record is on disk
                    if notifier is not None:  # what the last commits made due goes out now
                        with anyio.CancelScope(shield=True):
                            await notifier.settle(NOTIFY_SETTLE)
                    unfreeze()
                    if coordinator is not None:
                        coordinator.stop()
            group.cancel_scope.cancel()
    finally:
        opening(False)  # the collector is on again whichever way the opening ended
        try:
            with anyio.CancelScope(shield=True):
                if coordinator is not None:
                    await coordinator.dispose()
                for generation in generations:
                    generation.purge()
                if choice is not None:
                    await _close_providers(choice)
        finally:
            if processes is not None:
                processes.close()  # the jobs' processes keep running
            if proxy is not None:
                proxy.close()  # a job's forwarder finds the next worker's socket
            lock.release()


def _settings_recorder(
    session: Session, box: StorageBox | None, group: anyio.abc.TaskGroup
) -> Callable[[str | None, str], None]:
    """Keep ``session.json``'s launch settings in step with ``/model`` and ``/thinking``, so
    the next worker of the session starts on the model and level the user chose last; on
    PostgreSQL in the session's blobs too, so a worker of another server does."""

    async def carry() -> None:
        assert box is not None
        try:
            await store_settings(box, session, BACKGROUND)
        except Exception as error:  # a lost lease: this worker stops at its next commit
            _log.warning("could not store the session's launch settings: %s", error)

    def record(model: str | None, thinking: str) -> None:
        try:
            current = load_session(session.path)
            settings = current.settings
            changed = msgspec.structs.replace(
                settings, model=model or settings.model, thinking=thinking
            )
            update_settings(current, changed)
        except (SessionError, OSError) as error:
            _log.warning("could not record the session's model and thinking level: %s", error)
            return
        if box is not None:
            group.start_soon(carry)

    return record


def _say_fallback(line: str) -> None:
    """``--fallback-model``'s one line when the run goes on with it (a ``-p`` run: this
    process is its worker, its stderr the user's)."""
    print(f"coding-agent: {line}", file=sys.stderr, flush=True)


async def _close_providers(choice: ProviderChoice) -> None:
    """Close the providers that hold HTTP connection pools (the SDK adapters' ``aclose``)."""
    for provider in choice.providers:
        aclose = getattr(provider, "aclose", None)
        if aclose is not None:
            await aclose()


def _probe_sandbox(env: Mapping[str, str] | None) -> None:
    """Run :func:`pico3.sandbox_available` once for ``env``'s ``PATH`` (a thread's target: the
    answer is cached for :func:`_sandbox_service`; an error is left for it to meet again)."""
    with contextlib.suppress(Exception):
        sandbox_available((env or os.environ).get("PATH"))


def _sandbox_service(
    config: WorkerConfig,
) -> tuple[dict[str, Any], dict[str, Any], DomainProxy | None]:
    """The harness service ``sandbox`` (``{}`` when bubblewrap cannot start here), what the
    worker's status says of it (``available``, ``reason``, ``enforced``, ``policy`` lines) and
    the started :class:`pico3.DomainProxy` of ``sandbox.allow_domains`` (the caller closes it)."""
    policy = sandbox_policy(
        config.session.cwd,
        config.session.id,
        env=config.env,
        deny_read=config.sandbox_deny_read,
        allow_write=config.sandbox_allow_write,
        allow_domains=config.sandbox_allow_domains,
    )
    found = session_sandbox(policy, config.env, enforced=config.sandbox)
    available = isinstance(found, Sandbox)
    reason = found.status.reason if isinstance(found, Sandbox) else found.reason
    said = {"available": available, "reason": reason, "enforced": config.sandbox}
    said["policy"] = policy.describe()
    if not available:
        _log.warning("the sandbox is unavailable: %s", reason)
        return {}, said, None
    proxy = None
    if policy.proxy_socket is not None:
        proxy = DomainProxy(policy.proxy_socket, policy.allow_domains).start()
    # the approval feature keeps SandboxMode current: hooks run inside in the sandbox mode too
    # (set from --permission-mode already: SessionStart hooks run before the mode is applied)
    mode = SandboxMode(config.permission_mode == "sandbox")
    return {SANDBOX_SERVICE: found, SANDBOX_MODE_SERVICE: mode}, said, proxy


PERMISSION_MODE_SERVICE = APPROVAL_MODE.id
"""The permission-mode service (facets-approval's contract; called by id, not imported)."""


async def check_run_rules(host: FacetHost, run: RunOptions) -> None:
    """Ask the approval feature whether every ``--allowedTools`` / ``--disallowedTools`` rule
    parses (its grammar is the feature's); raises ``ValueError`` (a usage error, before the
    session resumes) naming the first that does not, or when no loaded feature checks rules."""
    checked = [("allow", rule) for rule in run.allowed] + [("deny", r) for r in run.disallowed]
    if not checked:
        return
    if APPROVAL_RULES.id not in {entry.service_id for entry in host.services.catalogue}:
        raise ValueError(
            "--allowedTools/--disallowedTools need the approval feature (facets-approval), "
            "which is not loaded"
        )
    for kind, rule in checked:
        flag = "--allowedTools" if kind == "allow" else "--disallowedTools"
        try:
            await host.services.invoke(
                ServiceCall(APPROVAL_RULES.id, "check_rule", (rule, kind)), BACKGROUND
            )
        except RemoteServiceError as error:
            raise ValueError(f"{flag}: {error.message}") from None


async def apply_permission_mode(host: FacetHost, mode: str) -> None:
    """``--permission-mode MODE``: make ``mode`` the session's permission mode, durably.

    The rule: the mode lives in the session's storage, so a restarted worker keeps the one
    chosen last (in a TUI with Shift+Tab, say); only an explicit flag overrides it, and it is
    applied before ``resume``, so a call recovered from storage is decided in the new mode.
    Raises ``ValueError`` (a usage error) for a value that is not a mode or when no loaded
    feature provides ``approval.mode``.
    """
    offered = {entry.service_id for entry in host.services.catalogue}
    if PERMISSION_MODE_SERVICE not in offered:
        raise ValueError(
            "--permission-mode needs the approval feature (facets-approval), which is not loaded"
        )
    call = ServiceCall(PERMISSION_MODE_SERVICE, "set_mode", (mode,))
    try:
        await host.services.invoke(call, BACKGROUND)
    except RemoteServiceError as error:
        raise ValueError(f"--permission-mode: {error.message}") from None


def _known(choice: ProviderChoice) -> list[ModelInfo]:
    """The models ``choice``'s providers serve, the chosen one first (a ``/model`` picker's list)."""
    known = [choice.model]
    for provider in choice.providers:
        known.extend(
            model
            for model in provider.models()
            if (model.provider, model.id) != (choice.model.provider, choice.model.id)
        )
    return known


def _coordinator(
    host: FacetHost,
    harness: HarnessServiceApi,
    generations: list[FacetGeneration],
    status: WorkerStatus,
) -> ReloadCoordinator:
    """``--dev``: reload facet packages when their sources change (docs/design/reload.md#session-worker-reload around a swap)."""

    async def around_reload(perform: Callable[[], Any]) -> None:
        await reload(harness.handle, perform, BACKGROUND)

    def on_report(report: ReloadReport) -> None:
        status.add_report(report)
        line = f"coding-agent worker: reload {report.package}: {report.outcome}: {report.message}"
        print(line, file=sys.stderr, flush=True)

    from chord import ReloadCoordinator

    return ReloadCoordinator(host, generations, on_report=on_report, around_reload=around_reload)


def _postgres_storage(config: WorkerConfig, processes: LocalProcessHost) -> PostgresStorage:
    """The session on PostgreSQL. A worker restarted after a crash may find the dead one's
    lease still valid: it waits up to 5 s for the expiry (2 s by default); a live holder
    elsewhere, renewing its lease, is refused after that. Self-fencing: the session's commands
    are killed before its lease can expire unrenewed, and at once on ``LeaseLost``."""
    assert config.storage is not None
    if config.database is not None:  # a host of many sessions: its pool and its renewer
        storage = config.database.storage(config.session.id, fsync=config.fsync, lease=config.lease)
    elif config.lease is None:
        storage = PostgresStorage(config.storage, config.session.id, fsync=config.fsync, wait=5.0)
    else:
        storage = PostgresStorage(
            config.storage,
            config.session.id,
            fsync=config.fsync,
            lease_seconds=config.lease,
            wait=max(5.0, 2.5 * config.lease),
        )
    storage.on_fence(processes.fence)
    return storage


# -- the process ----------------------------------------------------------------------------------
class _Lock:
    """The session's ``worker.lock``: held with ``flock`` for the worker's lifetime."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self._session.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            if error.errno in (errno.EAGAIN, errno.EACCES):
                raise WorkerBusy(
                    f"session {self._session.id} is already served by pid {holder}"
                ) from None
            raise
        # The pid over the old one, then the file cut to it: a reader never finds the file
        # empty (truncating first left a moment when a lock held named no pid at all).
        pid = f"{os.getpid()}\n".encode()
        os.pwrite(fd, pid, 0)
        os.ftruncate(fd, len(pid))
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


async def _stdin_closed() -> None:
    """Return once stdin reaches end of file (read without a thread: a blocked reader thread
    would keep the process from exiting)."""
    fd = sys.stdin.fileno()
    while True:
        await anyio.wait_readable(fd)
        try:
            if not os.read(fd, 65536):
                return
        except BlockingIOError:  # pragma: no cover - woken without data
            continue


async def _wait_for_stop(
    signals: AsyncIterator[int],
    exit_on_stdin_eof: bool,
    unattended: Callable[[], Awaitable[None]] | None = None,
    *stops: Callable[[], Awaitable[None]],
    signalled: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Return at the first SIGTERM/SIGINT, once ``signalled()`` (when given) returns (or at
    stdin EOF, when asked, or when ``unattended`` returns: the worker lingered long enough with
    no client and no live work; or when one of ``stops`` returns)."""
    async with anyio.create_task_group() as group:

        async def on_stop(stop: Callable[[], Awaitable[None]]) -> None:
            await stop()
            group.cancel_scope.cancel()

        for stop in stops:
            group.start_soon(on_stop, stop)

        async def on_signal() -> None:
            async for _signal in signals:
                if signalled is not None:
                    await signalled()
                group.cancel_scope.cancel()
                return

        group.start_soon(on_signal)
        if unattended is not None:

            async def on_unattended() -> None:
                await unattended()
                group.cancel_scope.cancel()

            group.start_soon(on_unattended)
        if exit_on_stdin_eof:

            async def on_eof() -> None:
                await _stdin_closed()
                group.cancel_scope.cancel()

            group.start_soon(on_eof)


async def _no_signals() -> AsyncIterator[int]:
    await anyio.sleep_forever()
    yield 0  # pragma: no cover - never reached


async def serve(
    config: WorkerConfig,
    *,
    ready: Callable[[Path], None],
    exit_on_stdin_eof: bool = False,
    stop: Callable[[], Awaitable[None]] | None = None,
    feature_loader: Callable[[WorkerConfig], list[FacetGeneration]] | None = None,
) -> None:
    """Run the session host (which holds the session lock), serve it on the session socket,
    call ``ready(socket_path)``, and return on SIGTERM/SIGINT (or stdin EOF when asked), or
    once no client has been connected and nothing has been live for ``config.linger`` seconds
    (:mod:`coding_agent.worker.linger`; 0 never).

    With ``stop`` (a session in a host process of many, :mod:`coding_agent.worker.host`) it
    installs no signal handlers (they are the process's, and the host's) and returns once
    ``stop()`` returns instead; ``feature_loader`` is then the host's way to get the feature
    packages (see :func:`open_session_host`)."""
    socket = config.session.socket_path
    if socket.parent != config.session.path:
        socket_folder(socket.parent)  # $TMPDIR/coding-agent-<uid>/: ours, 0700, not a link
    clients = ClientCount()
    # Signals are caught from here on: one arriving during start-up stops the worker cleanly
    # once it is up, instead of killing it halfway.
    receiver = (
        contextlib.nullcontext(_no_signals())
        if stop is not None
        else anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT)
    )
    with receiver as signals:
        async with (
            open_session_host(config, attendance=clients, feature_loader=feature_loader) as runtime,
            anyio.create_task_group() as group,
        ):
            from chord import provider_handler, serve_unix  # only a served worker needs the wire

            handler = clients.handler(provider_handler(runtime.host.services))
            await group.start(serve_unix, socket, handler)
            ready(socket)

            def busy() -> bool:
                return bool(runtime.harness.harness.kernel.live_tasks())

            async def unattended() -> None:
                await wait_unattended(clients, busy, config.linger)
                _log.warning(
                    "no client and nothing running for %g s: stopping (the session is saved)",
                    config.linger,
                )

            watch = runtime.storage
            assert watch is not None

            async def storage_failed() -> None:
                await watch.event.wait()
                print(
                    f"coding-agent worker: {watch.message}; stopping (everything stored is "
                    "kept; a new worker resumes from it once the cause is fixed)",
                    file=sys.stderr,
                    flush=True,
                )
                # The status (storageFailure) goes to every client: give them a moment to get
                # it, or to leave, before the connections drop.
                with anyio.move_on_after(FAULT_GRACE):
                    while clients.count:
                        await clients.changed()

            async def signalled() -> None:
                # /stop in one TUI: the others are told (status "stopping"), so they leave
                # with one line instead of starting a worker again; a moment to get it.
                runtime.status.set_stopping("signal")
                with anyio.move_on_after(FAULT_GRACE):
                    while clients.count:
                        await clients.changed()

            await _wait_for_stop(
                signals,
                exit_on_stdin_eof,
                unattended if config.linger else None,
                storage_failed,
                *([stop] if stop is not None else []),
                signalled=signalled,
            )
            group.cancel_scope.cancel()
    if runtime.storage is not None and runtime.storage.message is not None:
        raise StorageStopped(runtime.storage.message)


class StorageStopped(SessionError):
    """:func:`serve` stopped because the session's storage failed (exit :data:`EXIT_STORAGE`)."""


def _seconds(text: str) -> float:
    """``--linger``: a finite number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m coding_agent.worker.main",
        description="Serve one coding-agent session over its Unix socket.",
    )
    parser.add_argument("session_dir", type=Path, help="the session folder (holds session.json)")
    parser.add_argument(
        "--model",
        help="provider/model-id (default: the session's, the config's, the environment's)",
    )
    parser.add_argument("--thinking", help="set the root conversation's thinking level")
    parser.add_argument("--faux-script", type=Path, help="a JSON script for the faux model")
    parser.add_argument(
        "--tool-calling",
        choices=("native", "text"),
        help="how OpenAI-compatible models call tools (sets CODING_AGENT_TOOL_CALLING)",
    )
    parser.add_argument("--dev", action="store_true", help="hot-reload facet packages")
    parser.add_argument(
        "--facets-dir",
        type=Path,
        action="append",
        default=[],
        help="a facet package folder to load (repeatable)",
    )
    parser.add_argument("--no-fsync", action="store_true", help="do not fsync the storage")
    parser.add_argument(
        "--storage",
        metavar="URL",
        help="keep the session's commits in PostgreSQL (postgresql://…; the session id names "
        "it there) instead of the folder's JSONL storage",
    )
    parser.add_argument(
        "--lease",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="with --storage postgresql://…: the session lease's expiry (default 2)",
    )
    parser.add_argument(
        "--permission-mode",
        choices=PERMISSION_MODES,
        help="store this as the session's permission mode "
        "(default: keep the stored one; a new session starts in ask)",
    )
    parser.add_argument(
        "--exit-on-stdin-eof", action="store_true", help="exit when stdin reaches end of file"
    )
    add_worker_flags(parser)  # Claude Code's run-scoped flags, as the command line took them
    parser.add_argument(
        "--linger",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="stop after this long with no client and nothing running (default: the session's,"
        f" else {DEFAULT_LINGER:g}; 0: never)",
    )
    return parser


START_GATE_ENV = "CODING_AGENT_WORKER_START_GATE"
"""A test hook: the FIFO (or file) a starting worker reads one line from before it starts."""


def _pass_start_gate() -> None:
    gate = os.environ.get(START_GATE_ENV)
    if gate:
        with open(gate, "rb") as fifo:  # a FIFO blocks here until the test writes a line
            fifo.readline()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the worker; returns the exit code (0, or 2 usage, 3 busy, 4 model, 5 storage)."""
    args = _parser().parse_args(argv)
    _pass_start_gate()
    logging.basicConfig(level=logging.WARNING, format="coding-agent worker: %(message)s")
    activate_facets_site()  # the packages `facets add` installed
    try:
        session = load_session(args.session_dir)
        if args.storage:  # launch settings changed on another server's worker
            session = carried_settings(session, args.storage)
    except SessionError as error:
        print(f"coding-agent worker: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        config = session_worker_config(
            session,
            model=args.model,
            thinking=args.thinking,
            faux_script=args.faux_script,
            dev=args.dev or None,
            facets_dirs=args.facets_dir or None,
            tool_calling=args.tool_calling,
            linger=args.linger,
            permission_mode=args.permission_mode,
            fsync=not args.no_fsync,
            storage=args.storage,
            lease=args.lease or None,
            run=worker_flags(args),
        )
    except (ConfigError, TrustError, RunOptionsError) as error:
        print(f"coding-agent worker: {error}", file=sys.stderr)
        return EXIT_USAGE
    if config.environment is not None:  # the providers read their keys from config.env
        config.environment.withhold_from_process()

    def ready(socket: Path) -> None:
        try:
            sys.stdout.write(f"READY {socket}\n")
            sys.stdout.flush()
        except BrokenPipeError:
            # Whoever started the worker is gone (a TUI quit while the worker started): the
            # worker serves all the same, for `--resume` to find it. Nothing more goes there.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)

    try:
        try:
            anyio.run(_serve_main, config, ready, args.exit_on_stdin_eof, backend="asyncio")
        except BaseExceptionGroup as group:  # a task group's wrapper around one usage error
            raise _sole(group) from None
    except Exception as error:
        known = exit_status(error)
        if known is None:
            raise
        code, message = known
        if message is not None:
            print(f"coding-agent worker: {message}", file=sys.stderr)
        return code
    return 0


def exit_status(error: BaseException) -> tuple[int, str | None] | None:
    """A session's failure as the worker's exit code and its one line (``None``: the line is
    written already), or ``None`` for an error that is a bug (a traceback's)."""
    error = _sole(error) if isinstance(error, BaseExceptionGroup) else error
    if isinstance(error, WorkerBusy):
        return EXIT_BUSY, str(error)
    if isinstance(error, StorageStopped):  # its one line is on stderr already
        return EXIT_STORAGE, None
    if isinstance(error, UnknownModel):  # a typo in --model or model =: a usage error
        return EXIT_USAGE, str(error)
    if isinstance(error, RegistryError):
        return EXIT_MODEL, str(error)
    if isinstance(error, CorruptStorage):
        return EXIT_USAGE, f"{error} (the file was left as it is)"
    if isinstance(error, StorageError):  # at open: unreachable, in use, schema too new or too old
        return EXIT_STORAGE, str(error)
    if isinstance(
        error,
        (SessionError, ValueError, FacetDiscoveryError, PrivacyError, TrustError, ConfigError),
    ):
        return EXIT_USAGE, str(error)
    if isinstance(error, OSError) and error.errno in _STORAGE_ERRNOS:
        return EXIT_STORAGE, f"the session's storage failed: {error}"
    return None


def session_worker_config(
    session: Session,
    *,
    model: str | None = None,
    thinking: str | None = None,
    faux_script: str | os.PathLike[str] | None = None,
    dev: bool | None = None,
    facets_dirs: Sequence[str | os.PathLike[str]] | None = None,
    tool_calling: str | None = None,
    linger: float | None = None,
    permission_mode: str | None = None,
    fsync: bool = True,
    storage: str | None = None,
    env: Mapping[str, str] | None = None,
    lease: float | None = None,
    run: RunFlags | None = None,
    fallback_model: str | None = None,
) -> WorkerConfig:
    """The :class:`WorkerConfig` of a worker of ``session``: the options given here, else the
    launch settings stored in ``session.json`` (:class:`~coding_agent.session_files.folders.LaunchSettings`),
    plus the configuration files (:mod:`coding_agent.settings.config`) and the facet folders of a
    trusted project. ``model``, ``thinking`` and ``permission_mode`` given here are explicit
    choices (applied to the conversation); stored ones are what the session has already.
    ``run``: Claude Code's run-scoped flags, read here (:meth:`RunFlags.resolve`). Raises
    :class:`~coding_agent.settings.config.ConfigError`, ``TrustError`` or
    :class:`~coding_agent.settings.run_options.RunOptionsError`."""
    stored = session.settings
    environ = dict(os.environ if env is None else env)
    files = load_config(session.cwd, env=environ)
    calling = tool_calling or stored.tool_calling
    if calling:
        environ[TOOL_CALLING_ENV] = calling
    script = faux_script if faux_script is not None else stored.faux_script
    folders = [Path(f) for f in (facets_dirs if facets_dirs is not None else stored.facets_dirs)]
    for folder in check_project(session.cwd).loaded_dirs:  # a trusted project's own packages
        if folder not in folders:
            folders.append(folder)
    stay = linger if linger is not None else stored.linger
    for warning in stored.gone_add_dirs():  # a folder since removed does not count
        _log.warning("%s", warning)  # (the command line and the TUI say it too)
    return WorkerConfig(
        session=session,
        model=model,
        faux_script=Path(script) if script is not None else None,
        dev=dev if dev is not None else stored.dev,
        facets_dirs=tuple(folders),
        add_dirs=stored.present_add_dirs(),
        fsync=fsync,
        storage=storage,
        lease=lease,
        env=environ,
        model_config=files.registry(),
        permission_mode=permission_mode,
        linger=stay if stay is not None else DEFAULT_LINGER,
        run=run.resolve() if run is not None else RunOptions(),
        fallback_model=fallback_model,
        thinking=thinking,
        default_thinking=stored.thinking or files.thinking,
        notifications=files.notifications,
        sandbox=files.sandbox_enabled,
        sandbox_deny_read=tuple(files.sandbox_deny_read),
        sandbox_allow_write=tuple(files.sandbox_allow_write),
        sandbox_allow_domains=tuple(files.sandbox_allow_domains),
        web=WebSettings(
            allow_private=tuple(files.web_allow_private),
            sandbox_domains=tuple(files.sandbox_allow_domains) if files.sandbox_enabled else None,
            search_backend=cast(Any, files.web_search_backend),
            search_url=files.web_search_url,
            search_key_env=files.web_search_key_env,
        ),
        environment=child_environment(
            secrets=[*files.secrets, *filter(None, [files.web_search_key_env])],
            passthrough=files.secrets_passthrough,
            registry=files.registry(),
            env=environ,
        ),
    )


def _sole(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception inside nested single-member groups, else ``group`` itself."""
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


async def _serve_main(config: WorkerConfig, ready: Callable[[Path], None], eof: bool) -> None:
    await serve(config, ready=ready, exit_on_stdin_eof=eof)


if __name__ == "__main__":
    sys.exit(main())
