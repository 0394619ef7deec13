"""The seams of the remote layer: transports, subscriptions and service sources.

A consumer never talks to a provider directly. Between them sits a
:class:`RemoteServiceTransport` with two operations, ``invoke`` and ``subscribe``, that the
application implements for its medium: :func:`chord.remote.create_loopback_transport` for the same
process, a socket adapter for another one. The binding (:mod:`chord.remote.binding`) is written
against this protocol only, so it behaves the same over any of them.

``subscribe`` returns an *awaitable* of the :class:`ServiceSubscription`, and the binding calls it
synchronously at the moment a service is first used. A transport may therefore start the
subscription eagerly (the loopback calls the provider before returning, so updates published
right after ``use`` are buffered, never lost) or lazily (an ``async def`` that sends a control
call when awaited). Until ``activate()`` is called, the provider side buffers updates; the binding
activates right after installing the snapshot, so nothing is missed and nothing is applied twice.

A :class:`RemoteServiceSource` is what a facet host consumes to use services provided elsewhere:
it lists a catalogue and opens :class:`RemoteServices` (a binding) for the ids the host needs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from chord.context import Context
from chord.json import JsonValue
from chord.remote.grammar import (
    ServiceCall,
    ServiceCatalogueEntry,
    ServiceProviderUpdate,
    ServiceSubscriptionSnapshot,
)
from chord.services import InstanceAddress, Service, ServiceMode

__all__ = [
    "LazyServiceSubscription",
    "ObserveHandler",
    "RemoteServiceSource",
    "RemoteServiceTransport",
    "RemoteServices",
    "ServiceSubscription",
    "ServiceUpdateListener",
]

T = TypeVar("T")

ServiceUpdateListener = Callable[[ServiceProviderUpdate, Context], None]
"""Receives each update of one subscription, synchronously and in order."""

ObserveHandler = Callable[[Any, Context], "Awaitable[None] | None"]
"""Runs once per live keyed instance with a view of it and a context aborted when it closes."""


@runtime_checkable
class ServiceSubscription(Protocol):
    """A provider subscription seen through a transport."""

    @property
    def snapshot(self) -> ServiceSubscriptionSnapshot:
        """Everything up to the subscription point; updates continue from here."""
        ...

    def activate(self) -> None:
        """Start delivering (buffered updates first). A second call does nothing."""
        ...

    def close(self, ctx: Context | None = None) -> Awaitable[None] | None:
        """Stop delivering; idempotent. A remote transport may return an awaitable."""
        ...


@runtime_checkable
class LazyServiceSubscription(ServiceSubscription, Protocol):
    """A subscription that can mute a state member and follow it per instance
    (docs/wire.md#lazy-state; the wire client's subscriptions are, the loopback's are not: in
    one process every update costs a reference, not a frame)."""

    async def mute(self, member: str, ctx: Context) -> None:
        """Stop receiving ``member``'s updates, except for the instances followed."""
        ...

    async def follow(
        self, instance: InstanceAddress | None, member: str, follow: bool, ctx: Context
    ) -> None:
        """Receive (a rebaseline, then every update) or stop receiving one muted member."""
        ...


class RemoteServiceTransport(Protocol):
    """How a binding reaches a provider: calls plus subscriptions."""

    def invoke(self, call: ServiceCall, ctx: Context) -> Awaitable[JsonValue | None]:
        """Run one call; ``ctx`` cancels this request only."""
        ...

    def subscribe(
        self,
        service_id: str,
        mode: ServiceMode,
        listener: ServiceUpdateListener,
        ctx: Context,
    ) -> Awaitable[ServiceSubscription]:
        """Open a subscription. Called synchronously; may start it before returning."""
        ...


class RemoteServices(Protocol):
    """Handles onto services provided elsewhere (a binding without ``rebind``)."""

    def use(self, service: Service[T]) -> T:
        """The stable facade of a singleton service."""
        ...

    def observe(self, service: Service[T], handler: ObserveHandler) -> Callable[[], None]:
        """Run ``handler`` once per live instance of a keyed service; returns ``stop``."""
        ...

    async def ready(self, ctx: Context) -> None:
        """Wait until every subscription started so far is hydrated (or failed)."""
        ...

    async def dispose(self, ctx: Context) -> None:
        """Close everything; later access raises. Idempotent."""
        ...


class RemoteServiceSource(Protocol):
    """Somewhere a facet host can find services it does not provide itself."""

    @property
    def accepts_unavailable_services(self) -> bool:
        """True when this source may own requirements nobody currently offers."""
        ...

    async def catalogue(self, ctx: Context) -> Sequence[ServiceCatalogueEntry]:
        """The services this source offers now."""
        ...

    def open(
        self,
        *,
        services: Sequence[str],
        assert_access: Callable[[], None],
        on_error: Callable[[BaseException], None],
    ) -> RemoteServices:
        """Handles for ``services``; every access first calls ``assert_access``."""
        ...
