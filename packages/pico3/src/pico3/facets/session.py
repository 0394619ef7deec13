"""The harness session facet: ``pi.harness`` plus one ``pi.conversation`` instance per conversation.

::

    @define_facet("worker")
    def worker(env):                              # the session worker's own facet
        handles["harness"] = env.use(HarnessService)

    async with anyio.create_task_group() as tg:
        session = harness_session_facet(lambda: JsonlStorage(path), options, task_group=tg)
        async with create_facet_host([session, worker, *features]) as host:
            await handles["harness"].resume(ctx)  # once every facet registered (docs/design/chord.md#built-in-services)
            ...                                   # serve host.services on the session socket

What the facet does (docs/design/chord.md#built-in-services, followed literally):

* **setup** declares ``provide(HarnessService, session)`` and ``provide_many(ConversationService)``.
* **on_activate** starts the session's runner in ``task_group`` (it owns the
  :class:`~pico3.handle.HarnessHandle` and the bridges' tasks), opens the harness *without*
  resuming (features register in their own ``on_activate``, which runs after this one because
  they ``use(HarnessService)``), and spawns one instance per conversation that exists.
* Every conversation created later (a fork, a subagent) gets its instance too: a commit
  listener sees the commit that created it, and the session's supervisor task watches it.
* Each instance's ``view`` is fed by a :class:`~pico3.facets.bridge.ViewBridge`: one envelope,
  one ``view.apply``, one sequence. A bridge that overflows or whose publish raises is closed and
  its conversation respawned from a fresh snapshot (a new instance generation); the commit that
  caused it stands.
* ``suspend`` closes every instance before the storage closes; ``reopen`` respawns them all
  from the new opening (so does reopening the raw handle, e.g. through
  :func:`pico3.registration_swap.reload`: each opening first closes the instances of the one before).
  Disposal closes the instances, the harness and the runner.

Everything async that touches instances (watching, spawning, respawning) happens in one
supervisor task, in the order the triggers were posted, so a conversation never has two live
incarnations and nothing is spawned after the facet started to dispose.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import anyio.abc
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from chord.context import BACKGROUND, Context
from chord.facets import Facet, FacetEnvironment, ServiceSpawner, define_facet
from chord.state import MutableReplicatedState
from pico3.facets.bridge import BRIDGE_QUEUE_LIMIT, BridgeFailure, ViewBridge
from pico3.facets.contract import ConversationService, ConversationServiceApi, HarnessService
from pico3.facets.endpoint import ConversationEndpoint
from pico3.handle import HarnessHandle, Registration
from pico3.harness import ConversationHandle, Harness, HarnessOptions
from pico3.kernel.errors import Closed
from pico3.kernel.tx import Batch
from pico3.storage.base import Storage

__all__ = ["HARNESS_FACET_ID", "SessionHarness", "harness_session_facet"]

HARNESS_FACET_ID = "@pi/harness"

_log = logging.getLogger("pico3.facets")


def _log_error(error: BaseException) -> None:
    _log.error("harness session facet error", exc_info=error)


# -- supervisor commands --------------------------------------------------------------------------
class _Opened(msgspec.Struct, frozen=True):
    harness: Harness


class _Created(msgspec.Struct, frozen=True):
    harness: Harness
    conversation_ids: tuple[int, ...]


class _Respawn(msgspec.Struct, frozen=True):
    bridge: ViewBridge


class _Barrier(msgspec.Struct, frozen=True):
    done: anyio.Event


_Command = _Opened | _Created | _Respawn | _Barrier


class SessionHarness:
    """``pi.harness`` as the session facet provides it (see the module docstring).

    Implements :class:`~pico3.facets.contract.HarnessServiceApi`; :meth:`bridge` is diagnostics.
    """

    def __init__(
        self,
        storage_factory: Callable[[], Storage],
        options: HarnessOptions | None,
        spawner: ServiceSpawner[ConversationServiceApi],
        create_state: Callable[[Any], MutableReplicatedState],
        *,
        queue_limit: int = BRIDGE_QUEUE_LIMIT,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        if type(queue_limit) is not int or queue_limit < 1:
            raise ValueError(f"queue_limit must be a positive int, got {queue_limit!r}")
        self._factory = storage_factory
        self._options = options or HarnessOptions()
        self._spawner = spawner
        self._create_state = create_state
        self._limit = queue_limit
        self._reporter = on_error or self._options.on_report or _log_error
        self._handle: HarnessHandle | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._current: Harness | None = None
        self._bridges: dict[int, ViewBridge] = {}
        self._active = False
        self._stop = anyio.Event()
        self._done = anyio.Event()
        sender, receiver = anyio.create_memory_object_stream[_Command](math.inf)
        self._commands: MemoryObjectSendStream[_Command] = sender
        self._inbox: MemoryObjectReceiveStream[_Command] = receiver

    def _report(self, error: BaseException) -> None:
        try:
            self._reporter(error)
        except Exception as failure:  # a broken reporter must not break the bridge
            _log_error(failure)

    # -- HarnessServiceApi ------------------------------------------------------------------------
    @property
    def handle(self) -> HarnessHandle:
        """The underlying :class:`~pico3.handle.HarnessHandle`."""
        if self._handle is None:
            raise RuntimeError("the harness session is not running")
        return self._handle

    @property
    def harness(self) -> Harness:
        """The current opening (raises when suspended or closed)."""
        return self.handle.harness

    @property
    def is_open(self) -> bool:
        """True while a harness is open."""
        return self._handle is not None and self._handle.is_open

    def add_registration(self, install: Registration) -> Callable[[], None]:
        """Apply ``install`` now (when open) and on every reopen; returns a remover."""
        return self.handle.add_registration(install)

    async def conversation(self, conversation_id: int, ctx: Context) -> ConversationHandle | None:
        """A handle on an existing conversation of the current opening, or ``None``."""
        return await self.harness.conversation(conversation_id, ctx)

    async def resume(self, ctx: Context) -> list[int]:
        """Start dispatching; call once every facet registered. Returns orphaned task ids."""
        return await self.handle.resume(ctx)

    def quiescent(self) -> bool:
        """See :meth:`pico3.harness.Harness.quiescent`."""
        return self.handle.quiescent()

    def hold(self) -> Callable[[], None]:
        """See :meth:`pico3.harness.Harness.hold` (raises ``NotQuiescent``)."""
        return self.handle.hold()

    async def suspend(self, ctx: Context, *, abort_removed: bool = False) -> None:
        """Close every conversation instance, then suspend the harness (records stay live)."""
        handle = self.handle
        self._current = None
        self._close_bridges()
        await handle.suspend(ctx, abort_removed=abort_removed)

    async def reopen(self, ctx: Context) -> None:
        """Open again (registrations re-applied, recovery runs, dispatch resumes); returns once
        every conversation has its new instance."""
        await self.handle.reopen(ctx)
        await self.settle()

    # -- diagnostics -----------------------------------------------------------------------------
    def bridge(self, conversation_id: int) -> ViewBridge | None:
        """The live bridge feeding a conversation's instance, if it has one."""
        return self._bridges.get(conversation_id)

    async def settle(self) -> None:
        """Return once every trigger posted so far (openings, new conversations, respawns) has
        been handled by the supervisor."""
        done = anyio.Event()
        self._post(_Barrier(done))
        await done.wait()

    # -- lifecycle (driven by the facet) --------------------------------------------------------
    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The runner: owns the harness handle and the supervisor/bridge tasks until stopped."""
        try:
            async with (
                HarnessHandle(self._factory, self._options) as handle,
                anyio.create_task_group() as group,
            ):
                self._handle = handle
                self._group = group
                group.start_soon(self._supervise)
                task_status.started()
                await self._stop.wait()
                group.cancel_scope.cancel()
        finally:
            self._group = None
            self._done.set()

    async def open(self, ctx: Context) -> None:
        """Open the harness without resuming and spawn the existing conversations' instances."""
        handle = self.handle
        self._active = True
        handle.add_registration(self._install)
        await handle.open(ctx, resume=False)
        await self.settle()

    async def aclose(self) -> None:
        """Close instances, the harness and the runner (idempotent; facet disposal)."""
        self._active = False
        self._current = None
        self._close_bridges()
        with anyio.CancelScope(shield=True):
            try:
                if self._handle is not None:
                    await self._handle.close(BACKGROUND)
            finally:
                self._stop.set()
                if self._handle is not None:
                    await self._done.wait()

    # -- triggers --------------------------------------------------------------------------------
    def _install(self, harness: Harness) -> Callable[[], None]:
        """Applied to every opening: follow conversation creation and spawn what exists.

        Instances still live belong to an earlier opening (the handle was suspended and reopened
        directly, e.g. by :func:`pico3.registration_swap.reload`): they are closed and respawned here."""
        self._current = harness
        self._close_bridges()

        def on_commit(batch: Batch) -> None:
            if batch.created:
                self._post(_Created(harness, tuple(batch.created)))

        remove = harness.kernel.add_commit_listener(on_commit)
        self._post(_Opened(harness))
        return remove

    def _post(self, command: _Command) -> None:
        try:
            self._commands.send_nowait(command)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            if isinstance(command, _Barrier):
                command.done.set()

    def _on_failure(self, bridge: ViewBridge, failure: BridgeFailure) -> None:
        self._report(failure)
        self._post(_Respawn(bridge))

    # -- the supervisor --------------------------------------------------------------------------
    async def _supervise(self) -> None:
        try:
            async for command in self._inbox:
                if isinstance(command, _Barrier):
                    command.done.set()
                    continue
                try:
                    await self._handle_command(command)
                except Exception as error:
                    self._report(error)
        finally:
            # Wake every settle() still waiting; nothing else will handle its barrier.
            self._commands.close()
            for command in self._drain_inbox():
                if isinstance(command, _Barrier):
                    command.done.set()
            self._inbox.close()

    def _drain_inbox(self) -> list[_Command]:
        drained: list[_Command] = []
        while True:
            try:
                drained.append(self._inbox.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return drained

    async def _handle_command(self, command: _Command) -> None:
        if isinstance(command, _Opened):
            harness = command.harness
            for conversation_id in sorted(harness.kernel.conversations):
                await self._spawn(harness, conversation_id)
        elif isinstance(command, _Created):
            for conversation_id in command.conversation_ids:
                await self._spawn(command.harness, conversation_id)
        elif isinstance(command, _Respawn):
            bridge = command.bridge
            cid = bridge.conversation_id
            if self._bridges.get(cid) is bridge:
                del self._bridges[cid]
                if self._current is not None:
                    await self._spawn(self._current, cid)

    async def _spawn(self, harness: Harness, conversation_id: int) -> None:
        """Watch ``conversation_id`` and spawn its instance, unless it has one or the opening
        is no longer current."""
        if not self._live(harness) or conversation_id in self._bridges:
            return
        try:
            conversation = await harness.conversation(conversation_id, BACKGROUND)
            if conversation is None:
                return
            watch = await conversation.watch(BACKGROUND)
        except Closed:
            return  # suspended or closed meanwhile; the next opening spawns it
        if not self._live(harness) or conversation_id in self._bridges:
            watch.stop()
            return
        view = self._create_state({**watch.view, "commit": {"events": []}})
        bridge = ViewBridge(
            conversation_id,
            view,
            on_failure=self._on_failure,
            report=self._report,
            limit=self._limit,
        )
        watch.start(bridge.push)  # envelopes queue from here on; the bridge publishes them
        try:
            info = self._create_state(dict(watch.view["conversation"]))
            endpoint = ConversationEndpoint(conversation, view, self.settle, info)
            close = self._spawner.spawn(str(conversation_id), endpoint)
        except BaseException:
            watch.stop()
            raise
        bridge.attach(watch, close)
        self._bridges[conversation_id] = bridge
        assert self._group is not None
        self._group.start_soon(bridge.run)

    def _live(self, harness: Harness) -> bool:
        return self._active and harness is self._current and self._group is not None

    def _close_bridges(self) -> None:
        bridges = list(self._bridges.values())
        self._bridges.clear()
        for bridge in bridges:
            bridge.close()


def harness_session_facet(
    storage_factory: Callable[[], Storage],
    options: HarnessOptions | None = None,
    *,
    task_group: anyio.abc.TaskGroup,
    queue_limit: int = BRIDGE_QUEUE_LIMIT,
    on_error: Callable[[BaseException], None] | None = None,
    facet_id: str = HARNESS_FACET_ID,
) -> Facet:
    """The session worker's harness facet (docs/design/chord.md#built-in-services).

    ``storage_factory`` makes a fresh storage object over the session's place for every
    opening; ``options`` are the harness options (models and the process host go in
    ``options.services`` and outlive every opening). ``task_group`` runs the session's runner
    and must outlive the facet host. ``queue_limit`` bounds each view bridge; ``on_error``
    receives bridge failures and supervisor errors (default: ``options.on_report``, else the
    ``pico3.facets`` logger). The worker calls ``resume`` on ``pi.harness`` once the host is up.
    """
    if type(queue_limit) is not int or queue_limit < 1:
        raise ValueError(f"queue_limit must be a positive int, got {queue_limit!r}")

    def setup(env: FacetEnvironment) -> None:
        spawner = env.provide_many(ConversationService)
        session = SessionHarness(
            storage_factory,
            options,
            spawner,
            # the view a watch captures is a checked copy of the kernel's (strict JSON): the
            # state need not walk the whole transcript again to check it
            partial(env.replicated_state, trusted=True),
            queue_limit=queue_limit,
            on_error=on_error,
        )
        env.provide(HarnessService, session)

        async def activate() -> None:
            await task_group.start(session.run)
            env.own(session.aclose)
            await session.open(BACKGROUND)

        env.on_activate(activate)

    return define_facet(facet_id, setup)
