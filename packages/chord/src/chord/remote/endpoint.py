"""The endpoint: what one remote peer sees of a provider (docs/design/chord.md#endpoint).

A :class:`~chord.remote.provider.RemoteServiceProvider` is shared by every peer; the endpoint is
the per-peer half. It answers the ``$chord.service`` control calls and forwards everything else:

* ``catalogue()`` returns the provider's catalogue entries;
* ``subscribe(subscriptionId, serviceId, mode)`` opens a provider subscription whose listener
  forwards each update as ``publish(subscription_id, update, ctx)``, **activates** it and returns
  its snapshot. Because activation comes first, buffered updates may reach ``publish`` before the
  caller has the snapshot: an adapter that writes responses asynchronously must hold a
  subscription's updates until its subscribe response is written (the wire server does);
* ``unsubscribe(subscriptionId)`` closes one subscription;
* ``mute(subscriptionId, member)``, ``follow(subscriptionId, instance, member)`` and
  ``unfollow(...)`` (an extension Chord 0.87.1 never sends, docs/wire.md#lazy-state): after
  ``mute``, the state updates of ``member`` are not forwarded, except for the instances this peer
  follows. ``follow`` returns the member's current ``{"sequence", "value"}``
  (:meth:`ProviderSubscription.state_of`; ``None`` for no such instance) and forwards every
  update after it; ``unfollow`` stops forwarding again. Lifecycle updates (spawned, closed,
  reset, ...) always go. Both run synchronously, so a transport that writes results and updates
  in one queue (the wire server) writes the follow's result before the updates that continue it;
* any other call goes to ``provider.invoke``.

A synchronous raise from ``publish`` reaches the publisher (the state's ``change``, ``replace``
and so on, docs/design/chord.md#provider-queue). An awaitable returned by ``publish`` is not awaited; it is closed so
it is never reported as "never awaited".

:meth:`RemoteServiceEndpoint.dispose` closes this peer's subscriptions (never anything the
provider owns) and makes later invokes raise. A transport disposes the endpoint when its peer
disconnects.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from chord.context import Context
from chord.remote.grammar import (
    CatalogueControlCall,
    FollowControlCall,
    MuteControlCall,
    ServiceCall,
    ServiceCatalogueEntry,
    ServiceClosedUpdate,
    ServiceProviderUpdate,
    ServiceStateUpdate,
    ServiceSubscriptionSnapshot,
    SubscribeControlCall,
    UnsubscribeControlCall,
    decode_service_control_call,
)
from chord.remote.provider import ProviderSubscription, RemoteServiceProvider
from chord.services import InstanceAddress

__all__ = [
    "EndpointPublish",
    "RemoteServiceEndpoint",
    "ServiceEndpointError",
    "ServiceEndpointErrorCode",
    "create_remote_service_endpoint",
]

EndpointPublish = Callable[[str, ServiceProviderUpdate, Context], "Awaitable[Any] | None"]
"""Receives ``(subscription_id, update, ctx)`` synchronously, in order, per subscription."""

ServiceEndpointErrorCode = Literal[
    "subscription_active", "subscription_not_found", "endpoint_disposed"
]


class ServiceEndpointError(RuntimeError):
    """A control call the endpoint refuses; ``code`` is stable and travels on the wire."""

    code: ServiceEndpointErrorCode
    message: str

    def __init__(self, code: ServiceEndpointErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class RemoteServiceEndpoint:
    """One peer's subscriptions on a shared provider. See the module docstring."""

    def __init__(self, provider: RemoteServiceProvider) -> None:
        self._provider = provider
        self._subscriptions: dict[str, ProviderSubscription] = {}
        self._muted: dict[str, _Muted] = {}
        self._disposed = False

    @property
    def provider(self) -> RemoteServiceProvider:
        return self._provider

    @property
    def disposed(self) -> bool:
        return self._disposed

    @property
    def subscription_ids(self) -> tuple[str, ...]:
        """The ids of this peer's open subscriptions, oldest first."""
        return tuple(self._subscriptions)

    def subscription(self, subscription_id: str) -> ProviderSubscription | None:
        """The open provider subscription ``subscription_id`` (``None`` if there is none)."""
        return self._subscriptions.get(subscription_id)

    async def invoke(
        self, call: ServiceCall, publish: EndpointPublish, ctx: Context
    ) -> ServiceSubscriptionSnapshot | tuple[ServiceCatalogueEntry, ...] | Any:
        """Answer a control call or forward ``call`` to the provider.

        Returns the catalogue entries for ``catalogue``, the (decoded) snapshot for
        ``subscribe``, ``None`` for ``unsubscribe`` and the method's result otherwise.
        """
        result = self.start(call, publish, ctx)
        if inspect.isawaitable(result):
            result = await result
        return result

    def start(
        self, call: ServiceCall, publish: EndpointPublish, ctx: Context
    ) -> ServiceSubscriptionSnapshot | tuple[ServiceCatalogueEntry, ...] | Any:
        """:meth:`invoke` up to the method's first suspension: control calls are answered here,
        and a method call returns what the method returned (an awaitable for an async method,
        which the caller awaits; see :meth:`RemoteServiceProvider.start`)."""
        self._assert_active()
        control = decode_service_control_call(call)
        if control is None:
            return self._provider.start(call, ctx)
        if isinstance(control, CatalogueControlCall):
            return self._provider.catalogue
        if isinstance(control, SubscribeControlCall):
            return self._subscribe(control, publish)
        if isinstance(control, (MuteControlCall, FollowControlCall)):
            return self._mute(control)
        assert isinstance(control, UnsubscribeControlCall)
        self._muted.pop(control.subscription_id, None)
        subscription = self._subscriptions.pop(control.subscription_id, None)
        if subscription is None:
            raise ServiceEndpointError(
                "subscription_not_found",
                f"Service subscription was not found: {control.subscription_id}",
            )
        subscription.close(ctx)
        return None

    def dispose(self) -> None:
        """Close every subscription of this peer; later invokes raise. Idempotent."""
        if self._disposed:
            return
        self._disposed = True
        subscriptions, self._subscriptions = self._subscriptions, {}
        self._muted.clear()
        for subscription in subscriptions.values():
            subscription.close()

    def _subscribe(
        self, control: SubscribeControlCall, publish: EndpointPublish
    ) -> ServiceSubscriptionSnapshot:
        subscription_id = control.subscription_id
        if subscription_id in self._subscriptions:
            raise ServiceEndpointError(
                "subscription_active",
                f"Service subscription ID is already active: {subscription_id}",
            )

        def listener(update: ServiceProviderUpdate, ctx: Context) -> None:
            muted = self._muted.get(subscription_id)
            if muted is not None and not muted.forwards(update):
                return
            outcome = publish(subscription_id, update, ctx)
            if outcome is not None and inspect.iscoroutine(outcome):
                outcome.close()

        subscription = self._provider.subscribe(control.service_id, control.mode, listener)
        self._subscriptions[subscription_id] = subscription
        subscription.activate()
        return subscription.snapshot

    def _mute(self, control: MuteControlCall | FollowControlCall) -> dict[str, Any] | None:
        subscription_id = control.subscription_id
        subscription = self._subscriptions.get(subscription_id)
        if subscription is None:
            raise ServiceEndpointError(
                "subscription_not_found", f"Service subscription was not found: {subscription_id}"
            )
        muted = self._muted.setdefault(subscription_id, _Muted())
        if isinstance(control, MuteControlCall):
            muted.members.add(control.member)
            return None
        key = (control.instance, control.member)
        if not control.follow:
            muted.followed.discard(key)
            return None
        current = subscription.state_of(control.instance, control.member)
        if current is None:
            return None
        muted.followed.add(key)
        return {"sequence": current[0], "value": current[1]}

    def unfollowed(self, subscription_id: str) -> Callable[[InstanceAddress | None, str], bool]:
        """A test of which state members this peer does not receive on ``subscription_id``: a
        member it muted, of an instance it does not follow. The wire's collapse leaves them out
        of its comparison (their sequences on the peer are stale by design, not changed)."""
        muted = self._muted.get(subscription_id)
        if muted is None or not muted.members:
            return _nothing_unfollowed
        members, followed = muted.members, muted.followed
        return lambda instance, member: member in members and (instance, member) not in followed

    def _assert_active(self) -> None:
        if self._disposed:
            raise ServiceEndpointError("endpoint_disposed", "Remote service endpoint is disposed")


def _nothing_unfollowed(instance: InstanceAddress | None, member: str) -> bool:
    return False


class _Muted:
    """One subscription's muted members and the (instance, member) pairs the peer follows."""

    __slots__ = ("followed", "members")

    def __init__(self) -> None:
        self.members: set[str] = set()
        self.followed: set[tuple[InstanceAddress | None, str]] = set()

    def forwards(self, update: ServiceProviderUpdate) -> bool:
        if isinstance(update, ServiceStateUpdate):
            return (
                update.member not in self.members
                or (update.instance, update.member) in self.followed
            )
        if isinstance(update, ServiceClosedUpdate):  # a closed instance is followed no more
            closed = update.instance
            self.followed = {key for key in self.followed if key[0] != closed}
        return True


def create_remote_service_endpoint(provider: RemoteServiceProvider) -> RemoteServiceEndpoint:
    """A fresh endpoint for one peer of ``provider``."""
    return RemoteServiceEndpoint(provider)
