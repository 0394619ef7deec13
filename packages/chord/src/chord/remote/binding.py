"""The binding: the client half of chord's remote layer.

A :class:`RemoteServiceBinding` turns a :class:`~chord.remote.source.RemoteServiceTransport` into
handles that look like the services themselves:

* ``use(Service)`` returns the **facade** of a singleton: one object per service id, stable for
  the binding's life, across withdrawals, replacements and reconnects. Each attribute is a
  lazily created **member** that is both callable (``await models.select(ref, ctx)``) and a
  replicated-state replica (``models.state.value``, ``models.state.subscribe(listener)``). The
  first use fixes which of the two it is; the provider's announcement must agree.
* ``observe(Service, handler)`` follows a keyed service: ``handler(view, ctx)`` runs in its own
  task once per live instance, *after* the instance's state members have hydrated, and ``ctx`` is
  aborted (and the task's cancel scope cancelled) when the instance closes. The view then refuses
  every access with ``"observation is closed"``, including methods captured earlier.
* ``ready(ctx)`` waits until every subscription started so far has hydrated, and raises the first
  start failure. ``rebind(bound, ctx)`` drops everything and, when ``bound``, resubscribes
  (a reconnect); ``dispose(ctx)`` ends the binding.

Facades and members are described in :mod:`chord.remote.facade`, keyed observation in
:mod:`chord.remote.keyed`. While a service is unavailable its state values are ``None``; a call
still goes to the provider, which answers ``service_not_found`` at once. Nothing is queued.

Concurrency: the binding never starts bare tasks. Subscription starts and observer tasks run in
the ``task_group`` given at creation; without one, ``ready()`` drives pending starts itself and
``observe`` is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup

from chord.context import BACKGROUND, Context, run_with_context
from chord.remote.errors import RemoteServiceError
from chord.remote.facade import (
    BindingRuntime,
    ErrorReporter,
    InstanceFacade,
    RemoteServiceFacade,
    StartOnce,
    close_subscription,
    no_access_check,
    validate_reset_snapshot,
)
from chord.remote.grammar import (
    ServiceProviderUpdate,
    ServiceReplacedUpdate,
    ServiceResetUpdate,
    ServiceStateUpdate,
    ServiceUnavailableUpdate,
)
from chord.remote.keyed import KeyedBinding
from chord.remote.source import (
    ObserveHandler,
    RemoteServiceTransport,
    ServiceSubscription,
    ServiceUpdateListener,
)
from chord.services import Service, ServiceMode

__all__ = ["RemoteServiceBinding", "create_remote_service_binding"]

T = TypeVar("T")

_logger = logging.getLogger("chord.remote")


def _default_report(error: BaseException) -> None:
    _logger.error("remote service binding error: %r", error, exc_info=error)


def _raise_collected(errors: list[Exception], message: str) -> None:
    if errors:
        raise ExceptionGroup(message, errors)


# -- singletons -------------------------------------------------------------------------------


class _SingletonBinding:
    __slots__ = ("active", "facade", "handle", "revision", "start", "subscription")

    def __init__(self) -> None:
        self.active = True
        self.revision = 0
        self.start: StartOnce | None = None
        self.subscription: ServiceSubscription | None = None
        self.facade: InstanceFacade
        self.handle: RemoteServiceFacade


# -- the binding ------------------------------------------------------------------------------


class RemoteServiceBinding:
    """Client-side handles onto the services of one transport. See the module docstring."""

    def __init__(
        self,
        *,
        services: Sequence[Service[Any] | str],
        transport: RemoteServiceTransport,
        bound: bool = True,
        on_error: ErrorReporter | None = None,
        assert_access: Callable[[], None] | None = None,
        task_group: TaskGroup | None = None,
        trusted: bool = False,
    ) -> None:
        ids = [service if isinstance(service, str) else service.id for service in services]
        if len(set(ids)) != len(ids):
            raise TypeError("Remote service binding has duplicate service IDs")
        self._allowlist = frozenset(ids)
        self._transport = transport
        self._bound = bound
        self._report_error = on_error if on_error is not None else _default_report
        self._assert_access = assert_access if assert_access is not None else no_access_check
        self._task_group = task_group
        self._modes: dict[str, ServiceMode] = {}
        self._singletons: dict[str, _SingletonBinding] = {}
        self._keyed: dict[str, KeyedBinding] = {}
        self._readiness = 0
        self._transition: StartOnce | None = None
        self._disposed = False
        self._runtime = BindingRuntime(
            transport=transport,
            task_group=task_group,
            report=self._report,
            assert_access=self._assert_handle_access,
            open=self._open,
            schedule=self._schedule,
            trusted=trusted,
        )

    # -- public API ---------------------------------------------------------------------------

    @property
    def bound(self) -> bool:
        return self._bound

    @property
    def disposed(self) -> bool:
        return self._disposed

    def use(self, service: Service[T]) -> T:
        """The stable facade of singleton ``service`` (subscribing on first use when bound)."""
        self._assert_remotable(service)
        self._assert_available(service.id, "singleton")
        existing = self._singletons.get(service.id)
        if existing is not None:
            return existing.handle  # type: ignore[return-value]
        binding = _SingletonBinding()
        binding.facade = InstanceFacade(
            service.id,
            None,
            self._runtime,
            lambda: binding.active and not self._disposed and self._bound,
        )
        binding.handle = RemoteServiceFacade(binding.facade, self._assert_handle_access)
        self._singletons[service.id] = binding
        self._readiness += 1
        if self._bound:
            revision = binding.revision

            def on_failure(error: Exception) -> None:
                if (
                    binding.active
                    and binding.revision == revision
                    and not self._disposed
                    and self._bound
                ):
                    self._report(error)

            binding.start = self._begin_singleton(service.id, binding, on_failure)
            self._schedule(binding.start)
        return binding.handle  # type: ignore[return-value]

    def observe(self, service: Service[T], handler: ObserveHandler) -> Callable[[], None]:
        """Run ``handler(view, ctx)`` in a task per live instance of keyed ``service``.

        Returns ``stop``: it aborts every task of this observation; the keyed subscription
        closes when its last observer stops.
        """
        self._assert_remotable(service)
        if self._task_group is None:
            raise TypeError(
                f"Remote service binding needs a task_group to observe keyed service {service.id}"
            )
        self._assert_available(service.id, "keyed")
        keyed = self._keyed.get(service.id)
        if keyed is None:
            keyed = KeyedBinding(
                self._runtime,
                service.id,
                self._task_group,
                self._bound,
                self._drop_keyed,
                service.lazy,
            )
            self._keyed[service.id] = keyed
            self._readiness += 1
        return keyed.observe(handler)

    async def ready(self, ctx: Context) -> None:
        """Wait until every subscription started so far has hydrated (or failed).

        Loops until no new subscription was started while waiting; raises the first start
        failure (which was also reported to ``on_error``).
        """
        if self._disposed:
            raise RuntimeError("Remote service binding is disposed")
        while True:
            revision = self._readiness
            await run_with_context(self._wait_for_starts, ctx)
            if self._disposed:
                raise RuntimeError("Remote service binding is disposed")
            if revision == self._readiness:
                return

    async def rebind(self, bound: bool, ctx: Context) -> None:
        """Drop every subscription (values become ``None``, keyed tasks abort) and, when
        ``bound``, subscribe again from fresh snapshots. Failures raise together as
        ``"Failed to rebind services"``."""
        if self._disposed:
            raise RuntimeError("Remote service binding is disposed")
        self._bound = bound
        self._readiness += 1
        transitions: list[StartOnce] = []
        for service_id, binding in self._singletons.items():
            binding.revision += 1
            binding.facade.clear()
            old_start, binding.start = binding.start, None
            subscription, binding.subscription = binding.subscription, None
            transitions.append(
                self._singleton_transition(service_id, binding, old_start, subscription, bound, ctx)
            )
        keyed = list(self._keyed.values())

        async def run() -> None:
            errors: list[Exception] = []

            async def settle(step: Callable[[], Awaitable[None]]) -> None:
                try:
                    await step()
                except Exception as error:
                    errors.append(error)

            async with anyio.create_task_group() as group:
                for transition in transitions:
                    group.start_soon(settle, transition.wait)
                for binding in keyed:
                    group.start_soon(settle, lambda binding=binding: binding.rebind(bound, ctx))
            _raise_collected(errors, "Failed to rebind services")

        transition = self._transition = StartOnce(run)
        await transition.wait()

    async def dispose(self, ctx: Context) -> None:
        """Close every subscription and abort every observer task; later access raises
        ``"Remote service binding is disposed"``. Idempotent."""
        if self._disposed:
            return
        self._disposed = True
        errors: list[Exception] = []
        for binding in self._singletons.values():
            binding.active = False
            binding.facade.clear()
        for binding in self._singletons.values():
            if binding.start is not None:
                await binding.start.settle()
            if binding.subscription is not None:
                try:
                    await close_subscription(binding.subscription, ctx)
                except Exception as error:
                    errors.append(error)
                binding.subscription = None
        for keyed in list(self._keyed.values()):
            try:
                await keyed.close(ctx)
            except Exception as error:
                errors.append(error)
        self._singletons.clear()
        self._keyed.clear()
        _raise_collected(errors, "Failed to dispose services")

    # -- internals ----------------------------------------------------------------------------

    def _report(self, error: BaseException) -> None:
        try:
            self._report_error(error)
        except Exception as failure:
            _default_report(failure)

    def _assert_handle_access(self) -> None:
        if self._disposed:
            raise RuntimeError("Remote service binding is disposed")
        self._assert_access()

    def _assert_remotable(self, service: Service[Any]) -> None:
        if service.local:
            raise RemoteServiceError(
                "service_not_allowed", f"Service {service.id} is process-local"
            )

    def _assert_available(self, service_id: str, mode: ServiceMode) -> None:
        if self._disposed:
            raise RuntimeError("Remote service binding is disposed")
        if service_id not in self._allowlist:
            raise RemoteServiceError(
                "service_not_allowed", f"Remote service {service_id} is not allowlisted"
            )
        existing = self._modes.get(service_id)
        if existing is not None and existing != mode:
            raise RemoteServiceError(
                "service_mode_mismatch",
                f"Remote service {service_id} is already used as {existing}",
            )
        self._modes[service_id] = mode

    def _schedule(self, start: StartOnce) -> None:
        if self._task_group is not None:
            self._task_group.start_soon(start.run)

    def _open(
        self, service_id: str, mode: ServiceMode, listener: ServiceUpdateListener
    ) -> Callable[[], Awaitable[ServiceSubscription]]:
        """Call ``transport.subscribe`` now (synchronously); await the hand-off later."""
        try:
            awaitable = self._transport.subscribe(service_id, mode, listener, BACKGROUND)
        except Exception as error:
            failure = error

            async def failed() -> ServiceSubscription:
                raise failure

            return failed

        async def hand_off() -> ServiceSubscription:
            return await awaitable

        return hand_off

    def _begin_singleton(
        self,
        service_id: str,
        binding: _SingletonBinding,
        on_failure: Callable[[Exception], None] | None,
    ) -> StartOnce:
        revision = binding.revision

        def listener(update: ServiceProviderUpdate, ctx: Context) -> None:
            if binding.active and binding.revision == revision:
                self._singleton_update(service_id, binding, update, ctx)

        pending = self._open(service_id, "singleton", listener)

        async def run() -> None:
            subscription = await pending()
            if (
                not binding.active
                or self._disposed
                or not self._bound
                or binding.revision != revision
            ):
                await close_subscription(subscription, BACKGROUND)
                return
            binding.subscription = subscription
            snapshot = subscription.snapshot
            if (
                snapshot.mode != "singleton"
                or snapshot.service_id != service_id
                or len(snapshot.instances) != 1
            ):
                raise RuntimeError(
                    f"Remote service {service_id} returned an invalid singleton snapshot"
                )
            binding.facade.install(snapshot.instances[0], BACKGROUND)
            subscription.activate()

        return StartOnce(run, on_failure)

    def _singleton_transition(
        self,
        service_id: str,
        binding: _SingletonBinding,
        old_start: StartOnce | None,
        subscription: ServiceSubscription | None,
        bound: bool,
        ctx: Context,
    ) -> StartOnce:
        async def run() -> None:
            if old_start is not None and old_start.pending:
                await old_start.settle()  # a stale start closes its own subscription
            if subscription is not None:
                await close_subscription(subscription, ctx)
            if bound:
                await self._begin_singleton(service_id, binding, None).wait()

        start = binding.start = StartOnce(run)
        return start

    def _singleton_update(
        self,
        service_id: str,
        binding: _SingletonBinding,
        update: ServiceProviderUpdate,
        ctx: Context,
    ) -> None:
        try:
            if isinstance(update, ServiceResetUpdate):
                validate_reset_snapshot(update.snapshot, service_id, "singleton")
                if update.snapshot.instances:
                    binding.facade.install(update.snapshot.instances[0], ctx)
                else:
                    binding.facade.clear()
            elif isinstance(update, ServiceUnavailableUpdate):
                binding.facade.clear()
            elif isinstance(update, ServiceReplacedUpdate):
                if update.snapshot.instance is not None:
                    raise RuntimeError(
                        f"Remote service {service_id} singleton replacement has an instance address"
                    )
                binding.facade.install(update.snapshot, ctx)
            elif isinstance(update, ServiceStateUpdate) and update.instance is None:
                binding.facade.update(update.member, update.sequence, update.ops, ctx)
            # spawned/closed (and addressed state) cannot concern a singleton: ignored
        except Exception as error:
            self._report(error)

    def _drop_keyed(self, keyed: KeyedBinding) -> None:
        for service_id, candidate in list(self._keyed.items()):
            if candidate is keyed:
                del self._keyed[service_id]
                self._readiness += 1
                if self._task_group is not None:
                    self._task_group.start_soon(self._close_keyed, keyed)

    async def _close_keyed(self, keyed: KeyedBinding) -> None:
        try:
            await keyed.close(BACKGROUND)
        except Exception as error:
            self._report(error)

    async def _wait_for_starts(self) -> None:
        starts: list[StartOnce] = []
        if self._transition is not None:
            starts.append(self._transition)
        starts.extend(b.start for b in self._singletons.values() if b.start is not None)
        for keyed in self._keyed.values():
            start = keyed.ready()
            if start is not None:
                starts.append(start)
        for start in starts:
            await start.wait()


def create_remote_service_binding(
    *,
    services: Sequence[Service[Any] | str],
    transport: RemoteServiceTransport,
    bound: bool = True,
    on_error: ErrorReporter | None = None,
    assert_access: Callable[[], None] | None = None,
    task_group: TaskGroup | None = None,
    trusted: bool = False,
) -> RemoteServiceBinding:
    """Handles onto ``services`` (an allowlist of ids) reached through ``transport``.

    ``bound=False`` creates the facades without subscribing until ``rebind(True, ctx)``.
    ``on_error`` receives update and hydration failures (default: logged on ``chord.remote``).
    ``assert_access`` gates every handle access (a host raises until it is active).
    ``task_group`` runs subscription starts and keyed observer tasks. ``trusted=True`` lets the
    replicas skip checking snapshots and ops again, for a transport that hands over only checked
    ones: the loopback (passed by reference from states in this process, checked when they were
    published) and the wire's :class:`~chord.wire.WireServiceSource` (its connection checks each
    frame, snapshot and update as it decodes them). A transport that does not check what crossed
    a wire must leave it ``False``, the default.
    """
    return RemoteServiceBinding(
        services=services,
        transport=transport,
        bound=bound,
        on_error=on_error,
        assert_access=assert_access,
        task_group=task_group,
        trusted=trusted,
    )
