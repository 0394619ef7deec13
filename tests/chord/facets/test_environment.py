"""The facet environment (docs/design/chord.md#facet-environment): declarations, phases and disposal order."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from chord.context import Context
from chord.facets import Facet, FacetEnvironment, create_facet_host, define_facet
from chord.services import define_service
from chord.state import MutableReplicatedState


def _raises(error: Exception) -> Callable[[], None]:
    """A callback that raises ``error`` (for disposals and activations that fail)."""

    def run() -> None:
        raise error

    return run


Tool = define_service("test.env.tool", local=True)
Dialogs = define_service("test.env.dialogs", local=True)


class _Tool:
    def run(self) -> str:
        return "ran"


def _tool_provider(env: FacetEnvironment) -> None:
    env.provide(Tool, _Tool())


def test_define_facet_works_as_a_function_and_as_a_decorator() -> None:
    def setup(env: FacetEnvironment) -> None:
        return None

    direct = define_facet("direct", setup)
    assert direct == Facet("direct", setup)

    @define_facet("decorated")
    def decorated(env: FacetEnvironment) -> None:
        return None

    assert isinstance(decorated, Facet)
    assert decorated.id == "decorated"
    with pytest.raises(dataclasses.FrozenInstanceError):
        direct.id = "other"  # type: ignore[misc]
    with pytest.raises(TypeError, match="setup must be callable"):
        Facet("broken", None)  # type: ignore[arg-type]


def test_service_ids_starting_with_the_reserved_prefix_are_rejected() -> None:
    with pytest.raises(TypeError, match=r"beginning with \$chord\. are reserved"):
        define_service("$chord.service")
    with pytest.raises(TypeError, match="must not be empty"):
        define_service("")
    assert define_service("x").local is False


@pytest.mark.anyio
async def test_setup_only_operations_raise_after_setup() -> None:
    captured: list[FacetEnvironment] = []
    failures: dict[str, str] = {}

    def setup(env: FacetEnvironment) -> None:
        captured.append(env)

        def attempt() -> None:
            for name, call in [
                ("use", lambda: env.use(Tool)),
                ("observe", lambda: env.observe(Dialogs, lambda d, c: None)),
                ("provide", lambda: env.provide(Tool, _Tool())),
                ("provide_many", lambda: env.provide_many(Dialogs)),
                ("on_activate", lambda: env.on_activate(lambda: None)),
            ]:
                try:
                    call()
                except RuntimeError as error:
                    failures[name] = str(error)

        env.on_activate(attempt)

    async with create_facet_host([define_facet("late", setup)]):
        pass
    assert failures == {
        "use": "Facet late can acquire services only during setup",
        "observe": "Facet late can observe services only during setup",
        "provide": "Facet late can provide services only during setup",
        "provide_many": "Facet late can provide service instances only during setup",
        "on_activate": "Facet late can register activation callbacks only during setup",
    }
    env = captured[0]
    with pytest.raises(RuntimeError, match="Facet late cannot own resources while dead"):
        env.own(lambda: None)
    with pytest.raises(RuntimeError, match="Facet late cannot own resources while dead"):
        env.on_deactivate(lambda: None)
    with pytest.raises(RuntimeError, match="Facet late cannot create replicated state while dead"):
        env.replicated_state({"a": 1})


@pytest.mark.anyio
async def test_provide_requires_an_object_implementation() -> None:
    for bad in (None, 3, "text", [1], (1,), True):

        def setup(env: FacetEnvironment, bad: Any = bad) -> None:
            env.provide(Tool, bad)

        with pytest.raises(TypeError, match=f"Service {Tool.id} implementation must be an object"):
            async with create_facet_host([define_facet("bad", setup)]):
                pass


@pytest.mark.anyio
async def test_providing_one_service_twice_in_a_facet_is_rejected() -> None:
    def setup(env: FacetEnvironment) -> None:
        env.provide(Tool, _Tool())
        env.provide(Tool, _Tool())

    with pytest.raises(RuntimeError, match=f"Facet twice already provides {Tool.id}"):
        async with create_facet_host([define_facet("twice", setup)]):
            pass


@pytest.mark.anyio
async def test_non_service_tokens_are_rejected() -> None:
    def setup(env: FacetEnvironment) -> None:
        env.use("test.env.tool")  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="Expected a Service token"):
        async with create_facet_host([define_facet("token", setup)]):
            pass


@pytest.mark.anyio
async def test_replicated_state_is_available_in_setup_and_while_active() -> None:
    states: list[MutableReplicatedState] = []

    def setup(env: FacetEnvironment) -> None:
        states.append(env.replicated_state({"n": 1}))
        env.on_activate(lambda: states.append(env.replicated_state([1, 2])))

    async with create_facet_host([define_facet("stateful", setup)]):
        assert [state.value for state in states] == [{"n": 1}, [1, 2]]
        assert all(isinstance(state, MutableReplicatedState) for state in states)


@pytest.mark.anyio
async def test_spawner_rules() -> None:
    outcomes: dict[str, str] = {}

    def setup(env: FacetEnvironment) -> None:
        dialogs = env.provide_many(Dialogs)
        try:
            dialogs.spawn("early", _Tool())
        except RuntimeError as error:
            outcomes["setup"] = str(error)

        def activate() -> None:
            for name, key, impl in [("empty", "", _Tool()), ("primitive", "k", 7)]:
                try:
                    dialogs.spawn(key, impl)
                except TypeError as error:
                    outcomes[name] = str(error)
            close = dialogs.spawn("k", _Tool())
            try:
                dialogs.spawn("k", _Tool())
            except RuntimeError as error:
                outcomes["duplicate"] = str(error)
            env.own(close)  # closing through `own` and through the spawner is harmless
            close()
            close()
            dialogs.spawn("k", _Tool())  # the key is free again
            outcomes["keys"] = ",".join(dialogs.keys)

        env.on_activate(activate)

    async with create_facet_host([define_facet("spawner", setup)]):
        pass
    assert outcomes["setup"] == "Facet spawner can spawn service instances only while active"
    assert "key must be a non-empty string" in outcomes["empty"]
    assert "implementation must be an object" in outcomes["primitive"]
    assert outcomes["duplicate"] == "Facet service already has a live instance with key k"
    assert outcomes["keys"] == "k"


@pytest.mark.anyio
async def test_disposal_list_is_lifo_across_own_observations_and_spawned_instances() -> None:
    trace: list[str] = []

    def provider(env: FacetEnvironment) -> None:
        dialogs = env.provide_many(Dialogs)
        env.own(lambda: trace.append("provider own (setup)"))

        def activate() -> None:
            trace.append("provider activate")
            close = dialogs.spawn("one", _Tool())

            def closing() -> None:
                trace.append("close one")
                close()

            env.own(closing)

        env.on_activate(activate)
        env.on_deactivate(lambda: trace.append("provider on_deactivate (setup)"))

    def consumer(env: FacetEnvironment) -> None:
        env.own(lambda: trace.append("consumer own (setup)"))

        def handler(dialog: Any, ctx: Context) -> None:
            trace.append("observed one")
            ctx.abort_signal.add_listener(lambda reason: trace.append("observation aborted"))  # type: ignore[union-attr]

        env.observe(Dialogs, handler)

        async def deactivate() -> None:
            trace.append("consumer on_deactivate (activation)")

        env.on_activate(lambda: env.on_deactivate(deactivate))

    async with create_facet_host(
        [define_facet("consumer", consumer), define_facet("provider", provider)]
    ):
        assert trace == ["provider activate", "observed one"]
    assert trace[2:] == [
        "consumer on_deactivate (activation)",
        "observation aborted",  # the observation stop runs before the setup-time entries
        "consumer own (setup)",
        "close one",
        "provider on_deactivate (setup)",
        "provider own (setup)",
    ]


@pytest.mark.anyio
async def test_disposal_errors_are_collected_and_every_entry_still_runs() -> None:
    ran: list[str] = []

    def one_failure(env: FacetEnvironment) -> None:
        env.own(lambda: ran.append("first"))
        env.own(_raises(ValueError("only failure")))

    def two_failures(env: FacetEnvironment) -> None:
        def fail(message: str) -> Any:
            def run() -> None:
                ran.append(message)
                raise ValueError(message)

            return run

        env.own(fail("a"))
        env.own(fail("b"))

    with pytest.raises(ValueError, match="only failure"):
        async with create_facet_host([define_facet("one", one_failure)]):
            pass
    assert ran == ["first"]

    with pytest.raises(ExceptionGroup, match="Failed to dispose facet two") as caught:
        async with create_facet_host([define_facet("two", two_failures)]):
            pass
    assert [str(error) for error in caught.value.exceptions] == ["b", "a"]
