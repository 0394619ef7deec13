"""Service handles: what ``env.use`` returns and what an ``observe`` handler receives.

A facet never holds a provider's object directly. It holds a *handle* scoped to itself, so the host
can switch the facet's access on and off and can re-route the service during a reload without the
facet noticing:

* **Per-facet, stable.** ``env.use(S)`` returns the same handle on every call within one facet
  incarnation, and a different handle for every other facet and every later incarnation.
* **Access follows the facet.** Touching a member while the facet is ``setting_up`` raises
  ``"Facet <id> service handles cannot be used while setting_up"``; once the facet is dead every
  member access, *including a method captured earlier*, raises ``"... while dead"``.
* **Local services pass through.** A ``local=True`` service's members are the provider's own
  objects; only functions and methods are wrapped (so the access check also guards captured
  methods). Calls dispatch to whatever the slot holds *now*: after a reload, a method captured by
  a facet that was not reloaded reaches the new implementation.
* **Remotable services behave as if remote.** The handle reads a facade of the host's internal
  loopback binding: states are read-only replicas, methods are awaited, and every argument and
  result must be strict JSON (the binding raises ``service_invalid_value`` naming the method and
  the path). Each member is wrapped once per handle, so ``handle.state`` keeps its identity for
  the handle's whole life, also across reloads.

During a reload (docs/design/decisions.md#d4) the old provider retires before its replacement activates. The
:class:`ServiceSlot` is then *gated*: an async call arriving in that window waits for the new
provider (at most the host's ``reload_wait_seconds``, by default :data:`RELOAD_WAIT_SECONDS`)
instead of failing. A local service's member that is not an async method cannot wait, so touching
it in that window raises a clear error.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, NoReturn

import anyio

from chord.services import Service

__all__ = ["RELOAD_WAIT_SECONDS", "ServiceSlot", "ServiceView", "member_of"]

RELOAD_WAIT_SECONDS = 10.0
"""How long a call made during a reload waits for the replacement provider before failing."""


def member_of(target: object, name: str) -> Any:
    """Read member ``name`` of an implementation: an attribute, or a key of a mapping."""
    if isinstance(target, Mapping):
        try:
            return target[name]  # pyright: ignore[reportUnknownVariableType]
        except KeyError:
            raise AttributeError(name) from None
    return getattr(target, name)


def _is_method(value: object) -> bool:
    return (
        inspect.isfunction(value)
        or inspect.ismethod(value)
        or inspect.isbuiltin(value)
        or isinstance(value, partial)
    )


def _is_async_method(value: object) -> bool:
    target = value.func if isinstance(value, partial) else value
    return inspect.iscoroutinefunction(target)


class ServiceSlot:
    """The routing point of one singleton service id inside a host.

    Every handle for the service (one per using facet) reads its target through the slot, so
    re-routing happens in one place. ``close_gate``/``open_gate`` bracket the window of a reload in
    which the old provider is retired and the new one is not routed yet.
    """

    __slots__ = ("_bound", "_gate", "_target", "service", "wait_seconds")

    def __init__(self, service: Service[Any], *, wait_seconds: float = RELOAD_WAIT_SECONDS) -> None:
        self.service = service
        self.wait_seconds = wait_seconds
        self._target: object = None
        self._bound = False
        self._gate: anyio.Event | None = None

    @property
    def remotable(self) -> bool:
        """True when the slot holds a loopback facade rather than a local implementation."""
        return not self.service.local

    @property
    def bound(self) -> bool:
        """True once :meth:`bind` routed the service (until :meth:`unbind`)."""
        return self._bound

    @property
    def swapping(self) -> bool:
        """True while a reload has retired the provider and not yet routed its replacement."""
        return self._gate is not None

    @property
    def target(self) -> object:
        """The current implementation (local) or loopback facade (remotable)."""
        if not self._bound:
            raise RuntimeError(f"Service {self.service.id} is not bound")
        return self._target

    def bind(self, target: object) -> None:
        """Route the service to ``target`` and release every waiting call."""
        self._target = target
        self._bound = True
        self.open_gate()

    def unbind(self) -> None:
        """Detach the target for good (host disposal); waiting calls wake and fail."""
        self._target = None
        self._bound = False
        self.open_gate()

    def close_gate(self) -> None:
        """Start the reload window: async calls wait until :meth:`open_gate` or :meth:`bind`."""
        if self._gate is None:
            self._gate = anyio.Event()

    def open_gate(self) -> None:
        """End the reload window and wake waiting calls."""
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.set()

    async def wait_routed(self) -> None:
        """Return at once unless gated; otherwise wait for the new provider, bounded."""
        gate = self._gate
        if gate is None:
            return
        with anyio.move_on_after(self.wait_seconds) as scope:
            await gate.wait()
        if scope.cancelled_caught:
            raise RuntimeError(
                f"Service {self.service.id} was not routed to a new provider within "
                f"{self.wait_seconds:g} s of a reload"
            )


class ServiceView:
    """A facet's view of one service target (a singleton handle or one keyed instance).

    ``check`` raises when the owning facet (or observation) may not touch the service now;
    ``resolve`` returns the current target; ``slot`` is set for singletons, whose target can be
    re-routed by a reload.
    """

    __slots__ = (
        "_chord_check",
        "_chord_label",
        "_chord_members",
        "_chord_resolve",
        "_chord_service",
        "_chord_slot",
    )

    def __init__(
        self,
        service: Service[Any],
        *,
        check: Callable[[], None],
        resolve: Callable[[], object],
        slot: ServiceSlot | None = None,
        label: str = "",
    ) -> None:
        object.__setattr__(self, "_chord_service", service)
        object.__setattr__(self, "_chord_check", check)
        object.__setattr__(self, "_chord_resolve", resolve)
        object.__setattr__(self, "_chord_slot", slot)
        object.__setattr__(self, "_chord_label", label)
        object.__setattr__(self, "_chord_members", {})

    _chord_service: Service[Any]
    _chord_check: Callable[[], None]
    _chord_resolve: Callable[[], object]
    _chord_slot: ServiceSlot | None
    _chord_label: str
    _chord_members: dict[str, _RemoteMemberView]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        self._chord_check()
        if self._chord_service.local:
            return self._local_member(name)
        return self._remote_member(name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Service {self._chord_service.id} handles are read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Service {self._chord_service.id} handles are read-only")

    def __repr__(self) -> str:
        suffix = f" {self._chord_label}" if self._chord_label else ""
        return f"<service handle {self._chord_service.id}{suffix}>"

    # -- local services: the raw objects, methods wrapped for the access check -------------------
    def _local_member(self, name: str) -> Any:
        value = member_of(self._chord_resolve(), name)
        slot = self._chord_slot
        if slot is not None and slot.swapping:
            if not _is_async_method(value):
                self._swap_error(name)
            return self._waiting_local_call(name)
        if _is_method(value):
            return self._local_method(name)
        return value

    def _local_method(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self._chord_check()
            current = member_of(self._chord_resolve(), name)
            slot = self._chord_slot
            if slot is not None and slot.swapping:
                if not _is_async_method(current):
                    self._swap_error(name)
                return self._waiting_local_call(name)(*args, **kwargs)
            return current(*args, **kwargs)

        call.__name__ = name
        call.__qualname__ = f"{self._chord_service.id}.{name}"
        return call

    def _waiting_local_call(self, name: str) -> Callable[..., Awaitable[Any]]:
        """An async method of a gated local service: wait for the new provider, then call it."""

        async def call(*args: Any, **kwargs: Any) -> Any:
            slot = self._chord_slot
            assert slot is not None
            await slot.wait_routed()
            self._chord_check()
            return await member_of(self._chord_resolve(), name)(*args, **kwargs)

        return call

    def _swap_error(self, name: str) -> NoReturn:
        raise RuntimeError(
            f"Service {self._chord_service.id} is being reloaded; its member {name} is not an "
            "async method, so it cannot wait for the new provider"
        )

    # -- remotable services: loopback facades ---------------------------------------------------
    def _remote_member(self, name: str) -> Any:
        member = self._chord_members.get(name)
        if member is None:
            member = _RemoteMemberView(self, name)
            self._chord_members[name] = member
        return member


class _RemoteMemberView:
    """A handle's stable view of one member of a remotable service: a method or a state.

    Like the binding's own member it is both callable and state-like; the provider's member kind
    decides which use succeeds. Every use first runs the handle's access check, and a call made
    while a reload has the service gated waits for the new provider.
    """

    __slots__ = ("_name", "_view")

    def __init__(self, view: ServiceView, name: str) -> None:
        self._view = view
        self._name = name

    def _member(self) -> Any:
        self._view._chord_check()
        return member_of(self._view._chord_resolve(), self._name)

    def __call__(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        """Call the method: ``await handle.method(*json_args, ctx)``."""
        member = self._member()
        slot = self._view._chord_slot
        if slot is not None and slot.swapping:
            return self._call_after_reload(slot, args, kwargs)
        return member(*args, **kwargs)

    async def _call_after_reload(
        self, slot: ServiceSlot, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        await slot.wait_routed()
        return await self._member()(*args, **kwargs)

    @property
    def value(self) -> Any:
        """The state replica's current value (``None`` while unavailable)."""
        return self._member().value

    def subscribe(self, listener: Callable[..., Any]) -> Callable[[], None]:
        """Subscribe to the state replica (hydrate, then updates); returns unsubscribe."""
        return self._member().subscribe(listener)

    def __repr__(self) -> str:
        return f"<{self._view._chord_service.id}.{self._name} of {self._view!r}>"
