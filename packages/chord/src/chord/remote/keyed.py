"""Keyed services on the consumer side: live instances and one observer task per instance.

A :class:`KeyedBinding` follows one keyed service for one binding. It subscribes on the first
``observe``, installs (hydrates) every instance of the snapshot, activates the subscription and only
then starts observer tasks, so a handler can read ``view.request.value`` at once. Later updates
add instances (``spawned``, or a new generation of a key, which replaces the old one), remove them
(``closed``) or reconcile the whole set (``reset``: same generations stay, with their tasks).

Each (observer, instance) pair gets one task in the binding's task group, with a fresh context
from ``with_cancel(BACKGROUND)``. Closing the instance aborts that context and then cancels the
task's cancel scope, so a handler stuck in an ``await`` ends too; errors raised after the abort are
normal cleanup and are not reported. The view handed to the handler refuses every access once the
observation is closed, including methods captured earlier. The subscription closes when the last
observer stops.

Lazy members (the service's :attr:`~chord.services.Service.lazy`, docs/wire.md#lazy-state): when
the subscription can mute (:class:`~chord.remote.source.LazyServiceSubscription`, the wire's), the
binding mutes each lazy member before it installs the snapshot, and each instance's facade
follows a lazy member while it has subscribers (:class:`~chord.remote.facade.MemberSlot`). The
follow and unfollow calls go out one at a time, in the order they were asked for. A provider
that refuses ``mute`` (Chord 0.87.1) keeps sending that member: the binding treats it as eager.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator

import anyio
from anyio.abc import TaskGroup

from chord.context import BACKGROUND, Context, with_cancel
from chord.remote.errors import RemoteServiceError
from chord.remote.facade import (
    BindingRuntime,
    InstanceFacade,
    RemoteServiceFacade,
    StartOnce,
    close_subscription,
    validate_reset_snapshot,
)
from chord.remote.grammar import (
    ServiceClosedUpdate,
    ServiceInstanceSnapshot,
    ServiceProviderUpdate,
    ServiceReplacedUpdate,
    ServiceResetUpdate,
    ServiceSpawnedUpdate,
    ServiceUnavailableUpdate,
)
from chord.remote.source import (
    LazyServiceSubscription,
    ObserveHandler,
    ServiceSubscription,
    ServiceUpdateListener,
)
from chord.services import InstanceAddress

__all__ = ["KeyedBinding"]


class _ObserverTask:
    __slots__ = ("cancel", "ctx", "scope")

    def __init__(self) -> None:
        self.ctx, self.cancel = with_cancel(BACKGROUND)
        self.scope = anyio.CancelScope()

    def stop(self, reason: str) -> None:
        self.cancel(reason)  # abort the context first, so the handler sees why
        self.scope.cancel()


class _Observer:
    __slots__ = ("closed", "handler", "tasks")

    def __init__(self, handler: ObserveHandler) -> None:
        self.handler = handler
        self.tasks: dict[_KeyedEntry, _ObserverTask] = {}
        self.closed = False


class _KeyedEntry:
    __slots__ = ("active", "address", "facade")

    def __init__(self, address: InstanceAddress, facade: InstanceFacade) -> None:
        self.address = address
        self.facade = facade
        self.active = True

    def deactivate(self) -> None:
        self.active = False
        self.facade.clear()


class _InstanceDirectory:
    """Live keyed instances and one observer task per (observer, instance)."""

    __slots__ = ("_disposed", "_entries", "_observers", "_ready", "_run_task")

    def __init__(self, run_task: Callable[[_Observer, _KeyedEntry, _ObserverTask], None]) -> None:
        self._entries: dict[str, _KeyedEntry] = {}
        self._observers: dict[_Observer, None] = {}
        self._ready = False
        self._disposed = False
        self._run_task = run_task

    @property
    def observer_count(self) -> int:
        return len(self._observers)

    def get(self, key: str) -> _KeyedEntry | None:
        return self._entries.get(key)

    def values(self) -> Iterator[_KeyedEntry]:
        return iter(list(self._entries.values()))

    def replace(self, entry: _KeyedEntry) -> None:
        previous = self._entries.get(entry.address.key)
        if previous is not None:
            if previous.address.generation == entry.address.generation:
                raise RuntimeError(
                    f"Keyed service repeated live generation {entry.address.generation} "
                    f"of key {entry.address.key}"
                )
            self._remove(previous)
        self._entries[entry.address.key] = entry
        if self._ready:
            for observer in list(self._observers):
                self._start(observer, entry)

    def remove(self, entry: _KeyedEntry) -> None:
        if self._entries.get(entry.address.key) is entry:
            self._remove(entry)

    def mark_ready(self) -> None:
        if self._ready or self._disposed:
            return
        self._ready = True
        for entry in list(self._entries.values()):
            for observer in list(self._observers):
                self._start(observer, entry)

    def reset(self) -> None:
        self._ready = False
        for entry in list(self._entries.values()):
            self._remove(entry)

    def observe(self, handler: ObserveHandler) -> _Observer:
        observer = _Observer(handler)
        self._observers[observer] = None
        if self._ready:
            for entry in list(self._entries.values()):
                self._start(observer, entry)
        return observer

    def stop(self, observer: _Observer) -> None:
        if observer.closed:
            return
        observer.closed = True
        tasks = list(observer.tasks.values())
        observer.tasks.clear()
        self._observers.pop(observer, None)
        for task in tasks:
            task.stop("observation stopped")

    def dispose(self) -> None:
        if self._disposed:
            return
        self._disposed = True
        for observer in list(self._observers):
            self.stop(observer)
        for entry in list(self._entries.values()):
            entry.deactivate()
        self._entries.clear()

    def _remove(self, entry: _KeyedEntry) -> None:
        del self._entries[entry.address.key]
        entry.deactivate()
        for observer in list(self._observers):
            task = observer.tasks.pop(entry, None)
            if task is not None:
                task.stop("instance closed")

    def _start(self, observer: _Observer, entry: _KeyedEntry) -> None:
        if observer.closed or entry in observer.tasks:
            return
        task = observer.tasks[entry] = _ObserverTask()
        self._run_task(observer, entry, task)


class KeyedBinding:
    """One keyed service of one binding: its subscription, directory and observers."""

    def __init__(
        self,
        runtime: BindingRuntime,
        service_id: str,
        task_group: TaskGroup,
        bound: bool,
        on_empty: Callable[[KeyedBinding], None],
        lazy: frozenset[str] = frozenset(),
    ) -> None:
        self._runtime = runtime
        self._lazy = lazy
        self._muted: frozenset[str] = frozenset()  # the lazy members the provider mutes now
        self._follow_lock = anyio.Lock()
        self._service_id = service_id
        self._task_group = task_group
        self._bound = bound
        self._on_empty = on_empty
        self._directory = _InstanceDirectory(self._run_task)
        self._subscription: ServiceSubscription | None = None
        self._start: StartOnce | None = None
        self._closed = False
        self._revision = 0

    # observers -------------------------------------------------------------------------------

    def observe(self, handler: ObserveHandler) -> Callable[[], None]:
        if self._closed:
            raise RuntimeError(f"Remote keyed service binding {self._service_id} is closed")
        observer = self._directory.observe(handler)
        if self._bound and self._start is None:
            self._begin(self._revision, report=True)

        def stop() -> None:
            if observer.closed:
                return
            self._directory.stop(observer)
            if self._directory.observer_count == 0:
                self._on_empty(self)

        return stop

    def _run_task(self, observer: _Observer, entry: _KeyedEntry, task: _ObserverTask) -> None:
        service_id = self._service_id
        assert_access = self._runtime.assert_access

        def guard() -> None:
            assert_access()
            if observer.closed or task.ctx.cancelled:
                raise RemoteServiceError(
                    "service_stale_instance", f"Remote service {service_id} observation is closed"
                )

        view = RemoteServiceFacade(entry.facade, guard, guard)
        self._task_group.start_soon(self._observe_instance, observer.handler, view, task)

    async def _observe_instance(
        self, handler: ObserveHandler, view: RemoteServiceFacade, task: _ObserverTask
    ) -> None:
        if task.ctx.cancelled:
            return
        with task.scope:
            try:
                result = handler(view, task.ctx)
                if result is not None and inspect.isawaitable(result):
                    await result
            except Exception as error:
                if not task.ctx.cancelled:
                    self._runtime.report(error)

    # lifecycle -------------------------------------------------------------------------------

    def ready(self) -> StartOnce | None:
        return self._start

    def _begin(self, revision: int, *, report: bool) -> StartOnce:
        pending = self._runtime.open(self._service_id, "keyed", self._listener(revision))

        async def run() -> None:
            subscription = await pending()
            if self._closed or not self._bound or self._revision != revision:
                await close_subscription(subscription, BACKGROUND)
                return
            self._subscription = subscription
            snapshot = subscription.snapshot
            if snapshot.mode != "keyed" or snapshot.service_id != self._service_id:
                raise RuntimeError(
                    f"Remote service {self._service_id} returned the wrong keyed snapshot"
                )
            self._muted = await self._mute(subscription)
            if self._closed or not self._bound or self._revision != revision:
                return  # the reset that made it stale closes the subscription
            for instance in snapshot.instances:
                self._spawn(instance, BACKGROUND)
            subscription.activate()
            self._directory.mark_ready()

        def on_failure(error: Exception) -> None:
            if report and not self._closed and self._revision == revision and self._bound:
                self._runtime.report(error)

        start = self._start = StartOnce(run, on_failure)
        self._runtime.schedule(start)
        return start

    async def _mute(self, subscription: ServiceSubscription) -> frozenset[str]:
        """Mute every lazy member the provider agrees to; returns those it muted."""
        if not self._lazy or not isinstance(subscription, LazyServiceSubscription):
            return frozenset()
        muted: set[str] = set()
        for member in sorted(self._lazy):
            try:
                await subscription.mute(member, BACKGROUND)
            except Exception:  # a provider without the extension: the member stays eager
                continue
            muted.add(member)
        return frozenset(muted)

    def _follower(self, address: InstanceAddress) -> Callable[[str, bool], None] | None:
        """The facade's ``follow(member, on)``, or ``None`` when nothing is muted."""
        subscription = self._subscription
        if not self._muted or not isinstance(subscription, LazyServiceSubscription):
            return None
        revision = self._revision

        def follow(member: str, on: bool) -> None:
            if self._revision == revision and not self._closed:
                self._task_group.start_soon(
                    self._send_follow, subscription, revision, address, member, on
                )

        return follow

    async def _send_follow(
        self,
        subscription: LazyServiceSubscription,
        revision: int,
        address: InstanceAddress,
        member: str,
        on: bool,
    ) -> None:
        # One at a time, in the order asked (anyio's lock is fair): a follow never overtakes
        # the unfollow asked before it.
        async with self._follow_lock:
            if self._revision != revision or self._closed:
                return  # that subscription is gone; a new one starts muted and unfollowed
            try:
                await subscription.follow(address, member, on, BACKGROUND)
            except Exception as error:
                if self._revision == revision and getattr(error, "code", None) != "unavailable":
                    self._runtime.report(error)

    async def rebind(self, bound: bool, ctx: Context) -> None:
        if self._closed:
            return
        self._bound = bound
        self._revision += 1
        revision = self._revision
        await self._reset(ctx, wait_for_start=False)
        if self._closed or self._revision != revision or self._bound != bound:
            return
        if bound and self._directory.observer_count > 0:
            await self._begin(revision, report=False).wait()

    async def close(self, ctx: Context) -> None:
        if self._closed:
            return
        self._closed = True
        self._revision += 1
        await self._reset(ctx, wait_for_start=True)
        self._directory.dispose()

    async def _reset(self, ctx: Context, *, wait_for_start: bool) -> None:
        self._directory.reset()
        start, self._start = self._start, None
        subscription, self._subscription = self._subscription, None
        if start is not None and (wait_for_start or start.pending):
            await start.settle()  # a stale start closes its own subscription
        if subscription is not None:
            await close_subscription(subscription, ctx)

    # updates ---------------------------------------------------------------------------------

    def _listener(self, revision: int) -> ServiceUpdateListener:
        def listener(update: ServiceProviderUpdate, ctx: Context) -> None:
            if self._revision == revision:
                self._update(update, ctx)

        return listener

    def _update(self, update: ServiceProviderUpdate, ctx: Context) -> None:
        if self._closed:
            return
        try:
            if isinstance(update, ServiceResetUpdate):
                validate_reset_snapshot(update.snapshot, self._service_id, "keyed")
                snapshots = {i.instance.key: i for i in update.snapshot.instances if i.instance}
                for entry in self._directory.values():
                    fresh = snapshots.get(entry.address.key)
                    if fresh is None or fresh.instance != entry.address:
                        self._directory.remove(entry)
                for key, snapshot in snapshots.items():
                    entry = self._directory.get(key)
                    if entry is None:
                        self._spawn(snapshot, ctx)
                    else:
                        entry.facade.install(snapshot, ctx)
            elif isinstance(update, (ServiceUnavailableUpdate, ServiceReplacedUpdate)):
                raise RuntimeError(
                    f"Keyed service {self._service_id} received a singleton lifecycle update "
                    f"({update.type})"
                )
            elif isinstance(update, ServiceSpawnedUpdate):
                self._spawn(update.instance, ctx)
            elif isinstance(update, ServiceClosedUpdate):
                entry = self._directory.get(update.instance.key)
                if entry is not None and entry.address == update.instance:
                    self._directory.remove(entry)
            else:
                if update.instance is None:
                    raise RuntimeError(
                        f"Keyed service {self._service_id} state update has no instance address"
                    )
                entry = self._directory.get(update.instance.key)
                if entry is None or entry.address != update.instance:
                    return  # an update of an instance we no longer hold
                entry.facade.update(update.member, update.sequence, update.ops, ctx)
        except Exception as error:
            self._runtime.report(error)

    def _spawn(self, snapshot: ServiceInstanceSnapshot, ctx: Context) -> None:
        address = snapshot.instance
        if address is None:
            raise RuntimeError(f"Keyed service {self._service_id} instance snapshot has no address")
        entry: _KeyedEntry | None = None

        def is_active() -> bool:
            return entry is not None and entry.active and not self._closed

        facade = InstanceFacade(
            self._service_id,
            address,
            self._runtime,
            is_active,
            lazy=self._muted,
            follow=self._follower(address),
        )
        facade.install(snapshot, ctx)
        entry = _KeyedEntry(address, facade)
        self._directory.replace(entry)
