"""``host.reload`` in docs/design/decisions.md#d4's order (retire first),  adapted to it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from chord.context import BACKGROUND, Context
from chord.facets import Facet, FacetEnvironment, create_facet_host, define_facet
from chord.remote import RemoteServiceError
from chord.services import define_service


def _raises(error: Exception) -> Callable[[], None]:
    """A callback that raises ``error`` (for disposals and activations that fail)."""

    def run() -> None:
        raise error

    return run


Reader = define_service("test.reload.reader")
Registry = define_service("test.reload.registry", local=True)
Names = define_service("test.reload.names", local=True)
Other = define_service("test.reload.other", local=True)


class _Reader:
    def __init__(self, value: str, calls: list[str] | None = None) -> None:
        self._value = value
        self._calls = calls if calls is not None else []

    async def read(self, ctx: Context) -> str:
        self._calls.append(self._value)
        return self._value


class _NameRegistry:
    """Like harness registrations: a second live registration of one name is refused."""

    def __init__(self, trace: list[str]) -> None:
        self.live: set[str] = set()
        self.trace = trace

    def register(self, name: str, owner: str) -> Any:
        if name in self.live:
            raise ValueError(f"{name} is already registered")
        self.live.add(name)
        self.trace.append(f"register {name} ({owner})")

        def unregister() -> None:
            self.live.discard(name)
            self.trace.append(f"unregister {name} ({owner})")

        return unregister


def _reader_provider(value: str, calls: list[str] | None = None) -> Facet:
    return define_facet("reader", lambda env: env.provide(Reader, _Reader(value, calls)))


def _collector(facet_id: str, service: Any, into: list[Any]) -> Facet:
    return define_facet(facet_id, lambda env: into.append(env.use(service)))


@pytest.mark.anyio
async def test_reload_preconditions() -> None:
    async with create_facet_host([_reader_provider("a")]) as host:
        await host.reload([])  # nothing to do
        with pytest.raises(RuntimeError, match="Reloaded facet IDs must be unique"):
            await host.reload([_reader_provider("b"), _reader_provider("c")])
        with pytest.raises(RuntimeError, match="Facet ghost is not active"):
            await host.reload([define_facet("ghost", lambda env: None)])
        with pytest.raises(RuntimeError, match="Facet ID must not be empty"):
            await host.reload([define_facet("", lambda env: None)])
        assert host.phase == "active"
    with pytest.raises(RuntimeError, match="Facet host cannot reload while dead"):
        await host.reload([])


@pytest.mark.anyio
async def test_seed_order_old_unregister_runs_before_new_register() -> None:
    # item 90: registrations in on_activate, unregister owned; the registry refuses duplicates
    trace: list[str] = []
    registry = _NameRegistry(trace)

    def feature(generation: str) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            names = env.use(Registry)
            trace.append(f"setup {generation}")
            env.on_activate(lambda: env.own(names.register("ns", generation)))

        return define_facet("feature", setup)

    harness = define_facet("harness", lambda env: env.provide(Registry, registry))
    async with create_facet_host([feature("old"), harness]) as host:
        await host.reload([feature("new")])
        assert registry.live == {"ns"}
    assert trace == [
        "setup old",
        "register ns (old)",
        "setup new",  # the candidate's setup runs first (and must not register)
        "unregister ns (old)",
        "register ns (new)",
        "unregister ns (new)",
    ]


@pytest.mark.anyio
async def test_a_shape_change_is_refused_and_the_old_generation_stays_untouched() -> None:
    # item 84 (second half)
    trace: list[str] = []
    handles: list[Any] = []

    def provider(generation: str, *, extra: bool = False, keyed: bool = False) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            if keyed:
                env.provide_many(Names)
            else:
                env.provide(Names, {"generation": generation})
            if extra:
                env.use(Other)
            env.own(lambda: trace.append(f"dispose {generation}"))

        return define_facet("names", setup)

    other = define_facet("other", lambda env: env.provide(Other, {"x": 1}))
    async with create_facet_host(
        [provider("old"), other, _collector("consumer", Names, handles)]
    ) as host:
        with pytest.raises(RuntimeError, match="restart required") as caught:
            await host.reload([provider("new", extra=True)])
        assert "requirements added test.reload.other/singleton" in str(caught.value)
        with pytest.raises(RuntimeError, match="restart required") as caught:
            await host.reload([provider("keyed", keyed=True)])
        assert "must preserve its service requirements and provisions" in str(caught.value)
        # only the refused candidates' setup-time disposals ran; the old one still serves
        assert trace == ["dispose new", "dispose keyed"]
        assert handles[0].generation == "old"
        assert host.phase == "active"


@pytest.mark.anyio
async def test_a_remotable_member_shape_change_is_refused_before_anything_retires() -> None:
    # item 85
    trace: list[str] = []

    class _Wider:
        async def read(self, ctx: Context) -> str:
            return "wider"

        async def write(self, value: str, ctx: Context) -> None:
            return None

    def wider(env: FacetEnvironment) -> None:
        env.provide(Reader, _Wider())
        env.own(lambda: trace.append("dispose wider"))

    def original(env: FacetEnvironment) -> None:
        env.provide(Reader, _Reader("original"))
        env.own(lambda: trace.append("dispose original"))

    handles: list[Any] = []
    async with create_facet_host(
        [define_facet("reader", original), _collector("consumer", Reader, handles)]
    ) as host:
        with pytest.raises(RemoteServiceError, match="preserve its member shape"):
            await host.reload([define_facet("reader", wider)])
        assert trace == ["dispose wider"]
        assert await handles[0].read(BACKGROUND) == "original"


@pytest.mark.anyio
async def test_handles_survive_and_reach_the_new_provider() -> None:
    # item 84 (first half)
    handles: list[Any] = []
    async with create_facet_host(
        [_reader_provider("one"), _collector("consumer", Reader, handles)]
    ) as host:
        handle = handles[0]
        assert await handle.read(BACKGROUND) == "one"
        await host.reload([_reader_provider("two")])
        assert handles == [handle]
        assert await handle.read(BACKGROUND) == "two"
        assert await host.services.use(Reader).read(BACKGROUND) == "two"


def _slow_retiring_pair(
    value: str, calls: list[str], in_window: anyio.Event | None, release: anyio.Event | None
) -> list[Facet]:
    """``reader`` (remotable, uses ``names``) and ``names`` whose old deactivation can hang."""

    def names(env: FacetEnvironment) -> None:
        env.provide(Names, {"value": value})

        async def deactivate() -> None:
            if in_window is not None and release is not None:
                in_window.set()
                await release.wait()

        env.on_deactivate(deactivate)

    def reader(env: FacetEnvironment) -> None:
        env.use(Names)
        env.provide(Reader, _Reader(value, calls))

    return [define_facet("names", names), define_facet("reader", reader)]


@pytest.mark.anyio
async def test_a_call_during_the_swap_waits_and_reaches_the_new_provider() -> None:
    # adapted to docs/design/decisions.md#d4: reader retires first, then names hangs in its deactivation
    calls: list[str] = []
    handles: list[Any] = []
    in_window = anyio.Event()
    release = anyio.Event()
    old = _slow_retiring_pair("old", calls, in_window, release)
    async with create_facet_host([*old, _collector("consumer", Reader, handles)]) as host:
        results: list[str] = []

        async def wait_for(call: Any) -> None:
            results.append(await call)

        async with anyio.create_task_group() as group:
            group.start_soon(host.reload, _slow_retiring_pair("new", calls, None, None))
            with anyio.fail_after(5):
                await in_window.wait()
            assert host.phase == "reloading"
            group.start_soon(wait_for, handles[0].read(BACKGROUND))  # made inside the window
            await anyio.lowlevel.checkpoint()
            assert results == []
            release.set()
        assert results == ["new"]
        assert calls == ["new"]  # the retired provider never saw the call


@pytest.mark.anyio
async def test_the_wait_during_a_swap_is_bounded() -> None:
    handles: list[Any] = []
    in_window = anyio.Event()
    release = anyio.Event()
    old = _slow_retiring_pair("old", [], in_window, release)
    async with create_facet_host(
        [*old, _collector("consumer", Reader, handles)], reload_wait_seconds=0.05
    ) as host:
        async with anyio.create_task_group() as group:
            group.start_soon(host.reload, _slow_retiring_pair("new", [], None, None))
            with anyio.fail_after(5):
                await in_window.wait()
            with pytest.raises(RuntimeError, match=r"not routed to a new provider within 0.05 s"):
                await handles[0].read(BACKGROUND)
            release.set()
        assert await handles[0].read(BACKGROUND) == "new"


@pytest.mark.anyio
async def test_local_members_during_the_swap_async_waits_sync_refuses() -> None:
    class _Names:
        def __init__(self, value: str) -> None:
            self.value = value

        def now(self) -> str:
            return self.value

        async def soon(self) -> str:
            return self.value

    in_window = anyio.Event()
    release = anyio.Event()

    def names(value: str) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            env.provide(Names, _Names(value))
            env.use(Other)  # so ``other`` activates first and retires last

        return define_facet("names", setup)

    def other(hang: bool) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            env.provide(Other, {"x": 1})

            async def deactivate() -> None:
                if hang:
                    in_window.set()
                    await release.wait()

            env.on_deactivate(deactivate)

        return define_facet("other", setup)

    handles: list[Any] = []
    async with create_facet_host(
        [other(True), names("old"), _collector("consumer", Names, handles)]
    ) as host:
        local = handles[0]
        captured_soon = local.soon
        results: list[str] = []

        async def wait_for(call: Any) -> None:
            results.append(await call)

        async with anyio.create_task_group() as group:
            group.start_soon(host.reload, [names("new"), other(False)])
            with anyio.fail_after(5):
                await in_window.wait()
            with pytest.raises(
                RuntimeError, match="its member now is not an async method, so it cannot wait"
            ):
                local.now()
            group.start_soon(wait_for, local.soon())
            group.start_soon(wait_for, captured_soon())
            release.set()
        assert results == ["new", "new"]
        assert local.now() == "new"


@pytest.mark.anyio
async def test_a_failed_candidate_activation_restores_the_previous_generation() -> None:
    # adapted to docs/design/decisions.md#d4
    trace: list[str] = []
    errors: list[BaseException] = []
    peer: list[Any] = []

    def names(generation: str) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            trace.append(f"setup names {generation}")
            env.provide(Names, {"generation": generation})
            env.on_activate(lambda: trace.append(f"activate names {generation}"))
            env.on_deactivate(lambda: trace.append(f"dispose names {generation}"))

        return define_facet("names", setup)

    def consumer(generation: str, *, fail: bool = False) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            trace.append(f"setup consumer {generation}")
            env.use(Names)

            def activate() -> None:
                trace.append(f"activate consumer {generation}")
                if fail:
                    raise ValueError("candidate activation failed")

            env.on_activate(activate)
            env.on_deactivate(lambda: trace.append(f"dispose consumer {generation}"))

        return define_facet("consumer", setup)

    async with create_facet_host(
        [names("A"), consumer("A"), _collector("peer", Names, peer)], on_error=errors.append
    ) as host:
        del trace[:]
        with pytest.raises(ValueError, match="candidate activation failed"):
            await host.reload([consumer("B", fail=True), names("B")])
        assert trace == [
            "setup consumer B",
            "setup names B",
            "dispose consumer A",
            "dispose names A",
            "activate names B",
            "activate consumer B",
            "dispose consumer B",
            "dispose names B",
            "setup names A",  # fresh setup of the old Facet objects
            "activate names A",
            "setup consumer A",
            "activate consumer A",
        ]
        assert [str(error) for error in errors] == ["candidate activation failed"]
        assert host.phase == "active"
        assert peer[0].generation == "A"  # routed back to the restored provider
        await host.reload([names("C")])  # and the host keeps working
        assert peer[0].generation == "C"


@pytest.mark.anyio
async def test_a_failed_restore_terminates_the_host() -> None:
    errors: list[BaseException] = []
    setups = 0

    def flaky(env: FacetEnvironment) -> None:
        nonlocal setups
        setups += 1
        if setups == 2:  # the restore's fresh setup
            raise KeyError("cannot set up again")
        env.provide(Names, {"n": setups})

    def failing(env: FacetEnvironment) -> None:
        env.provide(Names, {"n": 0})
        env.on_activate(_raises(ValueError("candidate failed")))

    host = create_facet_host([define_facet("names", flaky)], on_error=errors.append)
    async with host:
        # the first setup counts 1; the failing candidate does not use `flaky`
        with pytest.raises(ExceptionGroup, match="previous facets could not be restored") as caught:
            await host.reload([define_facet("names", failing)])
        assert [type(error) for error in caught.value.exceptions] == [ValueError, KeyError]
        assert host.phase == "dead"
        assert errors and errors[-1] is caught.value


@pytest.mark.anyio
async def test_retirement_errors_are_reported_and_the_reload_completes() -> None:
    errors: list[BaseException] = []

    def names(generation: str, *, fail_cleanup: bool) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            env.provide(Names, {"generation": generation})
            if fail_cleanup:
                env.on_deactivate(_raises(ValueError("cleanup failed")))

        return define_facet("names", setup)

    handles: list[Any] = []
    async with create_facet_host(
        [names("A", fail_cleanup=True), _collector("consumer", Names, handles)],
        on_error=errors.append,
    ) as host:
        await host.reload([names("B", fail_cleanup=False)])
        assert [str(error) for error in errors] == ["cleanup failed"]
        assert handles[0].generation == "B"
        assert host.phase == "active"


@pytest.mark.anyio
async def test_the_host_cannot_be_disposed_or_reloaded_while_a_reload_runs() -> None:
    in_window = anyio.Event()
    release = anyio.Event()
    old = _slow_retiring_pair("old", [], in_window, release)
    async with create_facet_host(old) as host:
        async with anyio.create_task_group() as group:
            group.start_soon(host.reload, _slow_retiring_pair("new", [], None, None))
            with anyio.fail_after(5):
                await in_window.wait()
            with pytest.raises(RuntimeError, match="Facet host cannot be disposed while reloading"):
                await host.dispose()
            with pytest.raises(RuntimeError, match="Facet host cannot reload while reloading"):
                await host.reload([])
            release.set()
        assert host.phase == "active"


@pytest.mark.anyio
async def test_a_subscriber_failing_on_a_retired_instance_is_reported_and_the_reload_completes() -> (
    None
):
    # adapted to docs/design/decisions.md#d4: retirement problems never undo the new generation
    Dialogs = define_service("test.reload.dialogs")
    errors: list[BaseException] = []

    def provider(name: str) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            dialogs = env.provide_many(Dialogs)
            request = env.replicated_state({"name": name})
            env.on_activate(lambda: env.own(dialogs.spawn("current", {"request": request})))

        return define_facet("dialogs", setup)

    def listener(update: Any, ctx: Context) -> None:
        if update.type == "closed":
            raise ValueError("subscriber failed on close")

    async with create_facet_host([provider("A")], on_error=errors.append) as host:
        subscription = host.services.subscribe(Dialogs.id, "keyed", listener)
        subscription.activate()
        await host.reload([provider("B")])
        assert host.phase == "active"
        assert any("subscriber failed on close" in str(error) for error in errors)
        probe = host.services.subscribe(Dialogs.id, "keyed", lambda u, c: None)
        (instance,) = probe.snapshot.instances
        probe.close()
        assert instance.instance is not None and instance.instance.generation == 2
        subscription.close()  # or the host's own disposal would meet the failing listener too


@pytest.mark.anyio
async def test_cancelling_a_reload_half_way_through_the_swap_terminates_the_host() -> None:
    in_window = anyio.Event()
    never = anyio.Event()
    handles: list[Any] = []
    old = _slow_retiring_pair("old", [], in_window, never)
    async with create_facet_host([*old, _collector("consumer", Reader, handles)]) as host:
        async with anyio.create_task_group() as group:
            group.start_soon(host.reload, _slow_retiring_pair("new", [], None, None))
            with anyio.fail_after(5):
                await in_window.wait()
            group.cancel_scope.cancel()
        assert host.phase == "dead"
        with pytest.raises(RuntimeError, match="Facet consumer service handles cannot be used"):
            handles[0].read(BACKGROUND)
