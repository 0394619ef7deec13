"""The loopback transport: a binding and a provider in the same process, with no wire between.

:func:`create_loopback_transport` connects a :class:`~chord.remote.binding.RemoteServiceBinding`
to a :class:`~chord.remote.provider.RemoteServiceProvider` directly. Calls go straight to
``provider.invoke`` and subscriptions straight to ``provider.subscribe``; arguments, results,
snapshots and ops are passed by reference, never cloned, so in-process consumers pay nothing for
the remote semantics they get (stable facades, ``unavailable``, hydration before observation).

The subscription starts *synchronously*: ``subscribe`` calls the provider before it returns and
hands back an already-resolved awaitable. A binding calls ``subscribe`` inside ``use``/``observe``,
so a revision published right after ``use`` is buffered by the provider and delivered after the
snapshot, exactly as a TypeScript loopback would order it.

:class:`LoopbackServiceSource` offers a provider's catalogue to a facet host as a
:class:`~chord.remote.source.RemoteServiceSource`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, Generic, TypeVar

from anyio.abc import TaskGroup

from chord.context import Context
from chord.json import JsonValue
from chord.remote.binding import RemoteServiceBinding, create_remote_service_binding
from chord.remote.grammar import ServiceCall, ServiceCatalogueEntry
from chord.remote.provider import ProviderSubscription, RemoteServiceProvider
from chord.remote.source import RemoteServiceTransport, ServiceUpdateListener
from chord.services import ServiceMode

__all__ = ["LoopbackServiceSource", "LoopbackTransport", "create_loopback_transport"]

T = TypeVar("T")


class _Resolved(Generic[T]):
    """An awaitable that is already complete (awaiting it never suspends)."""

    __slots__ = ("_value",)

    def __init__(self, value: T) -> None:
        self._value = value

    def __await__(self) -> Generator[Any, None, T]:
        yield from ()  # a generator that finishes at once, with the value
        return self._value


class LoopbackTransport:
    """A :class:`~chord.remote.source.RemoteServiceTransport` over a provider in this process."""

    __slots__ = ("provider",)

    def __init__(self, provider: RemoteServiceProvider) -> None:
        self.provider = provider

    def invoke(self, call: ServiceCall, ctx: Context) -> Awaitable[JsonValue | None]:
        """``provider.invoke(call, ctx)``; nothing is copied."""
        return self.provider.invoke(call, ctx)

    def subscribe(
        self,
        service_id: str,
        mode: ServiceMode,
        listener: ServiceUpdateListener,
        ctx: Context,
    ) -> Awaitable[ProviderSubscription]:
        """Subscribe at the provider now; the result is already resolved."""
        del ctx
        return _Resolved(self.provider.subscribe(service_id, mode, listener))


def create_loopback_transport(provider: RemoteServiceProvider) -> RemoteServiceTransport:
    """Connect a binding to ``provider`` in the same process (see the module docstring)."""
    return LoopbackTransport(provider)


class LoopbackServiceSource:
    """A :class:`~chord.remote.source.RemoteServiceSource` serving ``provider``'s catalogue."""

    def __init__(
        self,
        provider: RemoteServiceProvider,
        *,
        task_group: TaskGroup | None = None,
        accepts_unavailable_services: bool = False,
    ) -> None:
        self._provider = provider
        self._task_group = task_group
        self._accepts_unavailable = accepts_unavailable_services

    @property
    def accepts_unavailable_services(self) -> bool:
        return self._accepts_unavailable

    async def catalogue(self, ctx: Context) -> Sequence[ServiceCatalogueEntry]:
        del ctx
        return self._provider.catalogue

    def open(
        self,
        *,
        services: Sequence[str],
        assert_access: Callable[[], None],
        on_error: Callable[[BaseException], None],
    ) -> RemoteServiceBinding:
        return create_remote_service_binding(
            services=services,
            transport=create_loopback_transport(self._provider),
            on_error=on_error,
            assert_access=assert_access,
            task_group=self._task_group,
            trusted=True,
        )
