"""Facades: what a consumer holds in place of a remote service.

A :class:`RemoteServiceFacade` stands for one service (or one observed keyed instance). Each
attribute is a lazily created :class:`RemoteMember` that is both callable (``await
models.select(ref, ctx)``) and a replicated-state replica (``models.state.value``,
``models.state.subscribe(listener)``). The first use fixes which of the two it is, and the
provider's announcement must agree (``service_member_mismatch``).

Behind the facade, an :class:`InstanceFacade` holds one :class:`~chord.state.ReplicaState` per
state member and installs snapshots into them: a snapshot or reset *hydrates* (a rebaseline the
subscribers see as ``hydrate``), a ``state`` update must follow its sequence exactly.

Facades never pretend to be something else: names starting with ``_`` raise ``AttributeError`` (so
``await facade`` and ``iter(facade)`` fail plainly), and assigning attributes is refused.

Calls take their :class:`~chord.context.Context` as the trailing positional argument. The
arguments are checked as strict JSON before anything is sent and the result when it comes back,
so a non-JSON value fails here with its path (``service_invalid_value``) instead of somewhere on a
wire.

This module also holds :class:`StartOnce` (a subscription hand-off that runs exactly once, in the
binding's task group or in whoever awaits it first) and :class:`BindingRuntime`, the handful of
things facades and keyed bindings need from the binding that owns them.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

import anyio
import msgspec
from anyio.abc import TaskGroup

from chord.context import Context
from chord.json import JsonError, JsonValue, validate_json
from chord.remote.errors import RemoteServiceError
from chord.remote.grammar import (
    Op,
    ServiceCall,
    ServiceInstanceSnapshot,
    ServiceMemberSnapshot,
    ServiceStateSnapshot,
    ServiceSubscriptionSnapshot,
)
from chord.remote.source import RemoteServiceTransport, ServiceSubscription, ServiceUpdateListener
from chord.services import InstanceAddress, ServiceMode
from chord.state import Listener, ReplicaState

__all__ = [
    "BindingRuntime",
    "ErrorReporter",
    "InstanceFacade",
    "MemberKind",
    "RemoteMember",
    "RemoteServiceFacade",
    "StartOnce",
    "close_subscription",
    "no_access_check",
    "validate_reset_snapshot",
]

MemberKind = Literal["method", "state"]
ErrorReporter = Callable[[BaseException], None]


def no_access_check() -> None:
    """The default access gate: always open."""
    return None


async def close_subscription(subscription: ServiceSubscription, ctx: Context) -> None:
    """Close ``subscription``, awaiting the close when the transport returns an awaitable."""
    result = subscription.close(ctx)
    if result is not None and inspect.isawaitable(result):
        await result


# -- subscription starts ----------------------------------------------------------------------


class StartOnce:
    """One asynchronous start (a subscription hand-off), run exactly once.

    Whoever needs it first runs it: the binding's task group right away, or ``ready()`` when
    there is no task group. Everybody else waits for it. ``on_failure`` hears a failure once.
    """

    __slots__ = ("_done", "_error", "_on_failure", "_run", "_state")

    def __init__(
        self,
        run: Callable[[], Awaitable[None]],
        on_failure: Callable[[Exception], None] | None = None,
    ) -> None:
        self._run = run
        self._on_failure = on_failure
        self._state: Literal["pending", "running", "done"] = "pending"
        self._error: Exception | None = None
        self._done: anyio.Event | None = None

    @property
    def pending(self) -> bool:
        """True until somebody starts running it."""
        return self._state == "pending"

    async def run(self) -> None:
        """Run the start if nobody has (errors are kept for :meth:`wait`, not raised)."""
        if self._state != "pending":
            return
        self._state = "running"
        try:
            await self._run()
        except Exception as error:
            self._error = error
            if self._on_failure is not None:
                self._on_failure(error)
        except BaseException:
            self._error = RuntimeError("remote service subscription start was cancelled")
            raise
        finally:
            self._state = "done"
            if self._done is not None:
                self._done.set()

    async def wait(self) -> None:
        """Run or await the start, then raise its failure (if any)."""
        if self._state == "pending":
            await self.run()
        elif self._state == "running":
            if self._done is None:
                self._done = anyio.Event()
            await self._done.wait()
        if self._error is not None:
            raise self._error

    async def settle(self) -> None:
        """Like :meth:`wait` but never raises the start's failure."""
        try:
            await self.wait()
        except Exception:
            pass


class BindingRuntime(msgspec.Struct, frozen=True):
    """What facades and keyed bindings need from the binding that owns them."""

    transport: RemoteServiceTransport
    task_group: TaskGroup | None
    report: ErrorReporter
    """Where update, hydration and observer failures go (the binding's ``on_error``)."""
    assert_access: Callable[[], None]
    """Raises when handles may not be used (binding disposed, host not active)."""
    open: Callable[
        [str, ServiceMode, ServiceUpdateListener], Callable[[], Awaitable[ServiceSubscription]]
    ]
    """Starts a subscription now; the returned function awaits its hand-off."""
    schedule: Callable[[StartOnce], None]
    """Runs a start in the binding's task group (or leaves it to ``ready``)."""
    trusted: bool = False
    """The transport hands over only checked snapshots and ops (the loopback's, by reference
    from provider states in this process; the wire source's, checked as its connection decoded
    them): replicas skip re-checking them."""


# -- members ----------------------------------------------------------------------------------


class MemberSlot:
    """The state behind one facade attribute: its kind and its replica.

    A **lazy** slot (a member the provider mutes for this consumer, docs/wire.md#lazy-state)
    replicates only while it has subscribers: the first subscriber makes the facade follow it
    (the provider answers with a rebaseline, one ``r`` at its current sequence, then every
    update), the last one leaving unfollows it and clears the replica. Without subscribers its
    value is ``None`` and every hydration and update of it is dropped; while following, an update
    that does not continue the replica is one the provider sent before it heard of the follow and
    is dropped, and a whole ``r`` rebaselines it.
    """

    __slots__ = ("_expected", "_facade", "_followers", "_kind", "_lazy", "name", "replica")

    def __init__(self, facade: InstanceFacade, name: str) -> None:
        self._facade = facade
        self.name = name
        self.replica = ReplicaState(
            task_group=facade.runtime.task_group, on_error=facade.runtime.report
        )
        self._kind: MemberKind | None = None  # what the provider announced
        self._expected: MemberKind | None = None  # how the consumer used it
        self._lazy = facade.follow is not None and name in facade.lazy
        self._followers = 0

    def _label(self) -> str:
        return f"{self._facade.service_id}.{self.name}"

    def describe(self, kind: MemberKind) -> None:
        if self._kind is not None and self._kind != kind:
            raise RuntimeError(f"Remote service member {self._label()} changed kind")
        self._kind = kind
        if self._expected is not None and self._expected != kind:
            raise RemoteServiceError(
                "service_member_mismatch",
                f"Remote service member {self._label()} is a {kind}, not a {self._expected}",
            )

    def expect(self, kind: MemberKind) -> None:
        if self._expected is not None and self._expected != kind:
            raise RemoteServiceError(
                "service_member_mismatch",
                f"Remote service member {self._label()} was used as two different kinds",
            )
        self._expected = kind
        if self._kind is not None and self._kind != kind:
            raise RemoteServiceError(
                "service_member_mismatch",
                f"Remote service member {self._label()} is a {self._kind}, not a {kind}",
            )

    def hydrate(self, sequence: int, ops: Sequence[Op], ctx: Context) -> None:
        self.describe("state")
        if self._lazy and self._followers == 0:
            return  # nobody follows it: it stays cold
        self.replica.hydrate(sequence, ops, ctx, trusted=self._facade.runtime.trusted)

    def update(self, sequence: int, ops: Sequence[Op], ctx: Context) -> None:
        self.describe("state")
        trusted = self._facade.runtime.trusted
        if not self._lazy:
            self.replica.update(sequence, ops, ctx, trusted=trusted)
            return
        if self._followers == 0:
            return
        current = self.replica.sequence
        if current is not None and sequence == current + 1:
            self.replica.update(sequence, ops, ctx, trusted=trusted)
        elif len(ops) == 1 and ops[0][0] == "r" and (current is None or sequence > current):
            self.replica.hydrate(sequence, ops, ctx, trusted=trusted)  # a follow's rebaseline
        # else: sent before the provider heard of the follow (its rebaseline is on the way), or
        # already covered by the rebaseline

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Subscribe to the replica; the first subscriber of a lazy slot follows it."""
        unsubscribe = self.replica.subscribe(listener)
        if not self._lazy:
            return unsubscribe
        self._followers += 1
        if self._followers == 1:
            self._follow(True)
        stopped = False

        def stop() -> None:
            nonlocal stopped
            if stopped:
                return
            stopped = True
            unsubscribe()
            self._followers -= 1
            if self._followers == 0:
                self.replica.clear()
                self._follow(False)

        return stop

    def _follow(self, follow: bool) -> None:
        request = self._facade.follow
        if request is not None and self._facade.is_active():
            request(self.name, follow)

    def call(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Awaitable[JsonValue | None]:
        """Check the call here and now; the returned awaitable only does the transport part."""
        self.expect("method")
        facade = self._facade
        if not facade.is_active():
            raise RemoteServiceError(
                "service_stale_instance",
                f"Remote service {facade.service_id} is unavailable: its binding is closed "
                "(the provider is disconnected or not yet reachable)",
            )
        if kwargs:
            raise RemoteServiceError(
                "service_invalid_value",
                f"Remote service method {self._label()} takes positional arguments only "
                f"(got {', '.join(sorted(kwargs))})",
            )
        if not args or not isinstance(args[-1], Context):
            raise RemoteServiceError(
                "service_invalid_value",
                f"Remote service method {self._label()} requires a trailing Context",
            )
        business = args[:-1]
        for index, value in enumerate(business):
            try:
                validate_json(value)
            except JsonError as error:
                raise RemoteServiceError(
                    "service_invalid_value",
                    f"Remote service method {self._label()} argument {index} is not strict JSON: "
                    f"{error}",
                ) from None
        return self._invoke(business, args[-1])

    async def _invoke(self, args: tuple[Any, ...], ctx: Context) -> JsonValue | None:
        facade = self._facade
        call = ServiceCall(facade.service_id, self.name, args, facade.address)
        result = await facade.runtime.transport.invoke(call, ctx)
        try:
            validate_json(result)
        except JsonError as error:
            raise RemoteServiceError(
                "service_invalid_value",
                f"Remote service method {self._label()} returned a value that is not strict JSON: "
                f"{error}",
            ) from None
        return result


class RemoteMember:
    """One facade attribute: call it as a method, or read ``value``/``subscribe`` as a state.

    Which one it is gets fixed by the first use and must match what the provider announces.
    """

    __slots__ = ("_guard", "_slot")

    def __init__(self, slot: MemberSlot, guard: Callable[[], None]) -> None:
        self._slot = slot
        self._guard = guard

    def __call__(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        """Call the remote method: ``await member(*json_args, ctx)``.

        Fails at once (before returning an awaitable) for a closed binding, a missing trailing
        ``Context`` or a non-JSON argument.
        """
        self._guard()
        return self._slot.call(args, kwargs)

    @property
    def value(self) -> Any:
        """The replicated value, or ``None`` while unavailable or not yet hydrated."""
        self._guard()
        self._slot.expect("state")
        return self._slot.replica.value

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Follow the replicated value: ``listener(value, ctx, delivery)``."""
        self._guard()
        if not callable(listener):
            raise TypeError("Replicated state subscription listener must be callable")
        self._slot.expect("state")
        return self._slot.subscribe(listener)

    def __repr__(self) -> str:
        return f"<RemoteMember {self._slot._facade.service_id}.{self._slot.name}>"


class InstanceFacade:
    """The consumer's copy of one provider instance (a singleton, or one keyed generation)."""

    __slots__ = (
        "_descriptions",
        "_slots",
        "address",
        "follow",
        "is_active",
        "lazy",
        "runtime",
        "service_id",
    )

    def __init__(
        self,
        service_id: str,
        address: InstanceAddress | None,
        runtime: BindingRuntime,
        is_active: Callable[[], bool],
        *,
        lazy: frozenset[str] = frozenset(),
        follow: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.service_id = service_id
        self.address = address
        self.runtime = runtime
        self.is_active = is_active
        self.lazy = lazy
        """The state members the provider mutes for this consumer (:class:`MemberSlot`)."""
        self.follow = follow
        """``follow(member, True/False)`` asks the provider to send, or stop sending, one lazy
        member of this instance (``None``: nothing is lazy)."""
        self._slots: dict[str, MemberSlot] = {}
        self._descriptions: dict[str, MemberKind] = {}

    def names(self) -> list[str]:
        return sorted(self._descriptions)

    def slot(self, name: str) -> MemberSlot:
        slot = self._slots.get(name)
        if slot is None:
            slot = self._slots[name] = MemberSlot(self, name)
            kind = self._descriptions.get(name)
            if kind is not None:
                slot.describe(kind)
        return slot

    def install(self, snapshot: ServiceInstanceSnapshot, ctx: Context) -> None:
        """(Re)hydrate from an instance snapshot; accessed slots must still exist."""
        if snapshot.instance != self.address:
            raise RuntimeError(
                f"Remote service {self.service_id} snapshot has the wrong address "
                f"{snapshot.instance!r} (expected {self.address!r})"
            )
        members = _index_members(self.service_id, snapshot.members)
        for name in self._slots:
            if name not in members:
                raise RemoteServiceError(
                    "service_member_not_found",
                    f"Unknown remote service member {self.service_id}.{name}",
                )
        self._descriptions = {name: member.kind for name, member in members.items()}
        for name, member in members.items():
            slot = self._slots.get(name)
            if isinstance(member, ServiceStateSnapshot):
                (slot or self.slot(name)).hydrate(member.sequence, member.ops, ctx)
            elif slot is not None:
                slot.describe(member.kind)

    def update(self, member: str, sequence: int, ops: Sequence[Op], ctx: Context) -> None:
        if self._descriptions.get(member) != "state":
            raise RuntimeError(
                f"Remote service update targets non-state member {self.service_id}.{member}"
            )
        self.slot(member).update(sequence, ops, ctx)

    def clear(self) -> None:
        for slot in self._slots.values():
            slot.replica.clear()


def _index_members(
    service_id: str, members: Sequence[ServiceMemberSnapshot]
) -> dict[str, ServiceMemberSnapshot]:
    index: dict[str, ServiceMemberSnapshot] = {}
    for member in members:
        if not member.name or member.name in index:
            raise RuntimeError(
                f"Remote service {service_id} has invalid member descriptions "
                f"(empty or repeated name {member.name!r})"
            )
        index[member.name] = member
    return index


class RemoteServiceFacade:
    """The handle of one remote service (or of one observed keyed instance).

    Attribute access returns a :class:`RemoteMember` (the same object each time). Private and
    dunder names raise ``AttributeError``, so a facade never looks awaitable or iterable.
    """

    __slots__ = ("__facade", "__guard", "__members", "__view_guard")

    def __init__(
        self,
        facade: InstanceFacade,
        guard: Callable[[], None],
        view_guard: Callable[[], None] = no_access_check,
    ) -> None:
        object.__setattr__(self, "_RemoteServiceFacade__facade", facade)
        object.__setattr__(self, "_RemoteServiceFacade__guard", guard)
        object.__setattr__(self, "_RemoteServiceFacade__view_guard", view_guard)
        object.__setattr__(self, "_RemoteServiceFacade__members", {})

    def __getattr__(self, name: str) -> RemoteMember:
        if name.startswith("_"):
            raise AttributeError(name)
        self.__view_guard()
        members: dict[str, RemoteMember] = self.__members
        member = members.get(name)
        if member is None:
            member = members[name] = RemoteMember(self.__facade.slot(name), self.__guard)
        return member

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Remote service facade {self.__facade.service_id} is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Remote service facade {self.__facade.service_id} is read-only")

    def __dir__(self) -> list[str]:
        return self.__facade.names()

    def __repr__(self) -> str:
        facade = self.__facade
        where = (
            "" if facade.address is None else f" {facade.address.key}@{facade.address.generation}"
        )
        return f"<RemoteServiceFacade {facade.service_id}{where}>"


def validate_reset_snapshot(
    snapshot: ServiceSubscriptionSnapshot, service_id: str, mode: ServiceMode
) -> None:
    if snapshot.service_id != service_id or snapshot.mode != mode:
        raise RuntimeError(f"Remote service {service_id} reset has the wrong service or mode")
    if mode == "singleton" and len(snapshot.instances) > 1:
        raise RuntimeError(
            f"Remote service {service_id} reset has more than one singleton instance"
        )
    keys: set[str] = set()
    for instance in snapshot.instances:
        if (mode == "singleton") != (instance.instance is None):
            raise RuntimeError(f"Remote service {service_id} reset has an invalid instance address")
        if instance.instance is not None:
            if instance.instance.key in keys:
                raise RuntimeError(
                    f"Remote service {service_id} reset repeats instance key {instance.instance.key}"
                )
            keys.add(instance.instance.key)
        for member in instance.members:
            if isinstance(member, ServiceStateSnapshot) and not (
                len(member.ops) == 1 and member.ops[0][0] == "r"
            ):
                raise RuntimeError(
                    f"Remote service {service_id} reset must contain full root replacements"
                )
