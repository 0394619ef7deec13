"""The client binding over the loopback and a wire-codec transport (docs/design/chord.md#binding)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from anyio.abc import TaskGroup

from chord.context import BACKGROUND, Context, ContextCancelled, with_cancel
from chord.remote import (
    ProviderSubscription,
    RemoteServiceBinding,
    RemoteServiceError,
    RemoteServiceProvider,
    RemoteServiceTransport,
    ServiceCall,
    ServiceInstanceSnapshot,
    ServiceMethodSnapshot,
    ServiceProviderUpdate,
    ServiceStateSnapshot,
    ServiceStateUpdate,
    ServiceSubscription,
    ServiceSubscriptionSnapshot,
    ServiceUpdateListener,
    create_loopback_transport,
    create_remote_service_binding,
    create_service_state_decoder,
    create_service_state_encoder,
    parse_wire_service_provider_update,
    parse_wire_service_subscription_snapshot,
)
from chord.services import ServiceMode, define_service
from chord.state import Delivery, replicated_state

Models = define_service("test.models")
Dialogs = define_service("test.question-dialog")
Pair = define_service("test.delivery-pair")
Local = define_service("test.local", local=True)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The binding only uses anyio primitives: run it on both backends."""
    return request.param


def _assign(key: str, value: Any) -> Callable[[Any], None]:
    """A ``change`` callback that sets ``draft[key] = value``."""

    def mutate(draft: Any) -> None:
        draft[key] = value

    return mutate


def _value(member: Any) -> Any:
    """``member.value`` (typed ``Any`` so the checker does not narrow it across accesses)."""
    return member.value


class Errors(list[BaseException]):
    def __call__(self, error: BaseException) -> None:
        self.append(error)


def _models(revision: int = 0, select: Callable[..., Any] | None = None) -> dict[str, Any]:
    async def default_select(model: Any, ctx: Context) -> None:
        return None

    return {
        "state": replicated_state({"selected": None, "revision": revision}),
        "select": select or default_select,
    }


def _dialog(question: str, result: Any = None) -> dict[str, Any]:
    async def submit(answer: Any, ctx: Context) -> Any:
        return result if result is not None else {"accepted": True, "answer": answer}

    return {"request": replicated_state({"question": question}), "submit": submit}


@asynccontextmanager
async def _binding(
    provider: RemoteServiceProvider | None,
    *services: Any,
    transport: RemoteServiceTransport | None = None,
    **options: Any,
) -> AsyncIterator[tuple[RemoteServiceBinding, Errors, TaskGroup]]:
    errors = Errors()
    async with anyio.create_task_group() as group:
        assert transport is not None or provider is not None
        binding = create_remote_service_binding(
            services=list(services),
            transport=transport or create_loopback_transport(provider),  # type: ignore[arg-type]
            on_error=errors,
            task_group=group,
            **options,
        )
        try:
            yield binding, errors, group
        finally:
            await binding.dispose(BACKGROUND)


class _WireSubscription:
    def __init__(
        self,
        snapshot: ServiceSubscriptionSnapshot,
        inner: ProviderSubscription,
        hook: Callable[[], None],
    ):
        self.snapshot = snapshot
        self._inner = inner
        self._hook = hook

    def activate(self) -> None:
        self._hook()
        self._inner.activate()

    def close(self, ctx: Context | None = None) -> None:
        self._inner.close()


class WireTransport:
    """Encodes, serialises, parses and decodes every snapshot and update, like a socket would."""

    def __init__(
        self, provider: RemoteServiceProvider, before_activate: Callable[[], None] = lambda: None
    ):
        self.provider = provider
        self.before_activate = before_activate
        self.updates: list[ServiceProviderUpdate] = []

    def invoke(self, call: ServiceCall, ctx: Context) -> Awaitable[Any]:
        return self.provider.invoke(call, ctx)

    async def subscribe(
        self, service_id: str, mode: ServiceMode, listener: ServiceUpdateListener, ctx: Context
    ) -> ServiceSubscription:
        encoder, decoder = create_service_state_encoder(), create_service_state_decoder()

        def forward(update: ServiceProviderUpdate, update_ctx: Context) -> None:
            wire = parse_wire_service_provider_update(encoder.encode_update(update).to_json())
            decoded = decoder.decode_update(wire)
            self.updates.append(decoded)
            listener(decoded, update_ctx)

        inner = self.provider.subscribe(service_id, mode, forward)
        wire_snapshot = parse_wire_service_subscription_snapshot(
            encoder.encode_snapshot(inner.snapshot).to_json()
        )
        return _WireSubscription(
            decoder.decode_snapshot(wire_snapshot), inner, self.before_activate
        )


# -- facades ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_singleton_facade_hydrates_and_follows_state() -> None:
    provider = RemoteServiceProvider([Models])
    implementation = _models()
    provider.provide(Models, implementation)
    async with _binding(provider, Models) as (binding, errors, _):
        first = binding.use(Models)
        assert binding.use(Models) is first
        assert first.state.value is None
        await binding.ready(BACKGROUND)
        assert first.state.value == {"selected": None, "revision": 0}
        seen: list[tuple[Any, Delivery]] = []
        first.state.subscribe(lambda value, ctx, delivery: seen.append((value, delivery)))
        implementation["state"].replace(BACKGROUND, {"selected": "one", "revision": 1})
        assert first.state.value == {"selected": "one", "revision": 1}
        assert [delivery for _, delivery in seen] == [Delivery("hydrate", 0), Delivery("update", 1)]
        assert errors == []
    provider.dispose()


@pytest.mark.anyio
async def test_facade_is_stable_across_withdraw_and_replace() -> None:
    # item 45
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models(1))
    async with _binding(provider, Models) as (binding, errors, _):
        models = binding.use(Models)
        state, select = models.state, models.select
        await binding.ready(BACKGROUND)
        assert state.value["revision"] == 1
        provider.withdraw(Models)
        assert state.value is None
        with pytest.raises(RemoteServiceError) as caught:
            await select({"model": "x"}, BACKGROUND)
        assert caught.value.code == "service_not_found"
        calls: list[Any] = []

        async def replacement_select(model: Any, ctx: Context) -> str:
            calls.append(model)
            return "done"

        provider.replace(Models, _models(2, replacement_select))
        assert binding.use(Models) is models
        assert models.state is state
        assert _value(state)["revision"] == 2
        assert await select({"model": "y"}, BACKGROUND) == "done"
        assert calls == [{"model": "y"}]
        assert errors == []
    provider.dispose()


@pytest.mark.anyio
async def test_facades_never_look_awaitable_or_writable() -> None:
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models())
    async with _binding(provider, Models) as (binding, _, _):
        models = binding.use(Models)
        assert not inspect.isawaitable(models)
        assert not inspect.isawaitable(models.state)
        for name in ("__await__", "_private", "__iter__", "__aenter__"):
            with pytest.raises(AttributeError):
                getattr(models, name)
        with pytest.raises(TypeError):
            iter(models)  # type: ignore[call-overload]
        with pytest.raises(AttributeError, match="read-only"):
            models.state = 1
        assert models.state is models.state
        await binding.ready(BACKGROUND)
        assert dir(models) == ["select", "state"]
        assert repr(models) == "<RemoteServiceFacade test.models>"
    provider.dispose()


@pytest.mark.anyio
async def test_calls_need_a_trailing_context_and_json_values() -> None:
    provider = RemoteServiceProvider([Models])

    async def select(model: Any, ctx: Context) -> Any:
        reply = model.get("reply")
        return [float("nan")] if reply == "nan" else reply

    provider.provide(Models, _models(select=select))
    async with _binding(provider, Models) as (binding, _, _):
        models = binding.use(Models)
        await binding.ready(BACKGROUND)
        with pytest.raises(RemoteServiceError, match="requires a trailing Context") as missing:
            models.select({"a": 1})
        assert missing.value.code == "service_invalid_value"
        with pytest.raises(RemoteServiceError, match="positional arguments only"):
            models.select({"a": 1}, ctx=BACKGROUND)
        with pytest.raises(
            RemoteServiceError, match=r"argument 0 is not strict JSON.*\$\.when"
        ) as bad_arg:
            models.select({"when": datetime(2020, 1, 1)}, BACKGROUND)
        assert bad_arg.value.code == "service_invalid_value"
        with pytest.raises(
            RemoteServiceError, match=r"returned a value that is not strict JSON.*\$\[0\]"
        ):
            await models.select({"reply": "nan"}, BACKGROUND)
        assert await models.select({"reply": [1, "two"]}, BACKGROUND) == [1, "two"]
    provider.dispose()


@pytest.mark.anyio
async def test_member_kinds_are_fixed_by_use_and_checked_against_the_provider() -> None:
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models())
    async with _binding(provider, Models) as (binding, errors, _):
        models = binding.use(Models)
        await binding.ready(BACKGROUND)
        with pytest.raises(RemoteServiceError, match="is a method, not a state") as as_state:
            models.select.value  # noqa: B018
        assert as_state.value.code == "service_member_mismatch"
        with pytest.raises(RemoteServiceError, match="is a state, not a method"):
            models.state(BACKGROUND)
        with pytest.raises(RemoteServiceError) as unknown:
            await models.missing(BACKGROUND)
        assert unknown.value.code == "service_member_not_found"
        assert errors == []
    provider.dispose()


@pytest.mark.anyio
async def test_binding_checks_allowlist_modes_and_locality() -> None:
    provider = RemoteServiceProvider([Models, (Dialogs, "keyed")])
    with pytest.raises(TypeError, match="duplicate service IDs"):
        create_remote_service_binding(
            services=[Models, "test.models"], transport=create_loopback_transport(provider)
        )
    async with _binding(provider, Models, Dialogs.id) as (binding, _, _):
        with pytest.raises(RemoteServiceError, match="process-local") as local:
            binding.use(Local)
        assert local.value.code == "service_not_allowed"
        with pytest.raises(RemoteServiceError, match="not allowlisted") as outside:
            binding.use(define_service("test.other"))
        assert outside.value.code == "service_not_allowed"
        binding.observe(Dialogs, lambda view, ctx: None)
        with pytest.raises(RemoteServiceError, match="already used as keyed") as mixed:
            binding.use(Dialogs)
        assert mixed.value.code == "service_mode_mismatch"
    provider.dispose()


@pytest.mark.anyio
async def test_observe_needs_a_task_group() -> None:
    provider = RemoteServiceProvider([(Dialogs, "keyed")])
    binding = create_remote_service_binding(
        services=[Dialogs], transport=create_loopback_transport(provider)
    )
    with pytest.raises(TypeError, match="needs a task_group"):
        binding.observe(Dialogs, lambda view, ctx: None)
    await binding.dispose(BACKGROUND)


@pytest.mark.anyio
async def test_ready_drives_subscription_starts_without_a_task_group() -> None:
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models(4))
    binding = create_remote_service_binding(
        services=[Models], transport=create_loopback_transport(provider)
    )
    models = binding.use(Models)
    assert models.state.value is None
    await binding.ready(BACKGROUND)
    assert _value(models.state)["revision"] == 4
    await binding.dispose(BACKGROUND)
    provider.dispose()


# -- lifecycle --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_provider_and_binding_dispose_clear_facades() -> None:
    # item 50
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models(1))
    async with _binding(provider, Models) as (binding, _, _):
        models = binding.use(Models)
        state = models.state
        await binding.ready(BACKGROUND)
        provider.dispose()
        assert state.value is None
        with pytest.raises(RuntimeError, match="Remote service provider is disposed"):
            await models.select({"model": "one"}, BACKGROUND)
        await binding.dispose(BACKGROUND)
        await binding.dispose(BACKGROUND)
        with pytest.raises(RuntimeError, match="Remote service binding is disposed"):
            state.value  # noqa: B018
        with pytest.raises(RuntimeError, match="Remote service binding is disposed"):
            binding.use(Models)
        with pytest.raises(RuntimeError, match="Remote service binding is disposed"):
            await binding.ready(BACKGROUND)


@pytest.mark.anyio
async def test_provider_dispose_buffered_before_subscriptions_start() -> None:
    # item 51
    provider = RemoteServiceProvider([Models, (Dialogs, "keyed")])
    provider.provide(Models, _models(1))
    provider.spawn(Dialogs, "pending", _dialog("Pending?"))
    async with _binding(provider, Models, Dialogs) as (binding, errors, _):
        models = binding.use(Models)
        observed: list[Any] = []
        binding.observe(Dialogs, lambda view, ctx: observed.append(view))
        provider.dispose()
        await binding.ready(BACKGROUND)
        await wait_all_tasks_blocked()
        assert models.state.value is None
        assert observed == []
        assert errors == []


@pytest.mark.anyio
async def test_assert_access_gates_every_handle_access() -> None:
    # item 52
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models())
    active = False

    def assert_access() -> None:
        if not active:
            raise RuntimeError("Service handles are not active")

    async with _binding(provider, Models, bound=False, assert_access=assert_access) as (
        binding,
        _,
        _,
    ):
        models = binding.use(Models)
        with pytest.raises(RuntimeError, match="not active"):
            models.state.value  # noqa: B018
        with pytest.raises(RuntimeError, match="not active"):
            models.state.subscribe(lambda value, ctx, delivery: None)
        with pytest.raises(RuntimeError, match="not active"):
            models.select({"model": "one"}, BACKGROUND)
        await binding.rebind(True, BACKGROUND)
        active = True
        await binding.ready(BACKGROUND)
        assert models.state.value["revision"] == 0
    provider.dispose()


@pytest.mark.anyio
async def test_ready_rejects_with_the_start_failure_which_is_also_reported() -> None:
    # item 53
    failure = RuntimeError("initial hydration failed")

    class Failing:
        async def invoke(self, call: ServiceCall, ctx: Context) -> Any:
            raise AssertionError("unexpected invocation")

        async def subscribe(
            self, service_id: str, mode: ServiceMode, listener: ServiceUpdateListener, ctx: Context
        ) -> ServiceSubscription:
            raise failure

    async with _binding(None, Models, transport=Failing()) as (binding, errors, _):
        models = binding.use(Models)
        with pytest.raises(RuntimeError) as caught:
            await binding.ready(BACKGROUND)
        assert caught.value is failure
        assert models.state.value is None
        assert errors == [failure]


@pytest.mark.anyio
async def test_synchronous_subscribe_failure_is_a_start_failure() -> None:
    provider = RemoteServiceProvider([Models])  # no provider: subscribe raises at once
    async with _binding(provider, Models) as (binding, errors, _):
        binding.use(Models)
        with pytest.raises(RemoteServiceError, match="has no provider"):
            await binding.ready(BACKGROUND)
        assert len(errors) == 1


@pytest.mark.anyio
async def test_update_racing_hydration_is_delivered_after_the_snapshot() -> None:
    # item 54
    provider = RemoteServiceProvider([Models])
    implementation = _models()
    provider.provide(Models, implementation)

    class Racing:
        def invoke(self, call: ServiceCall, ctx: Context) -> Awaitable[Any]:
            return provider.invoke(call, ctx)

        async def subscribe(
            self, service_id: str, mode: ServiceMode, listener: ServiceUpdateListener, ctx: Context
        ) -> ServiceSubscription:
            subscription = provider.subscribe(service_id, mode, listener)
            implementation["state"].replace(BACKGROUND, {"selected": None, "revision": 1})
            return subscription

    async with _binding(None, Models, transport=Racing()) as (binding, errors, _):
        models = binding.use(Models)
        revisions: list[int] = []
        models.state.subscribe(lambda value, ctx, delivery: revisions.append(value["revision"]))
        await binding.ready(BACKGROUND)
        assert revisions == [0, 1]
        assert models.state.value["revision"] == 1
        assert errors == []
    provider.dispose()


@pytest.mark.parametrize(("kind", "sequence"), [("duplicate", 0), ("gap", 2)])
@pytest.mark.anyio
async def test_a_duplicate_or_gap_sequence_clears_the_value_and_reports_once(
    kind: str, sequence: int
) -> None:
    # item 55
    listeners: list[ServiceUpdateListener] = []
    snapshot = ServiceSubscriptionSnapshot(
        Models.id,
        "singleton",
        (
            ServiceInstanceSnapshot(
                (
                    ServiceMethodSnapshot("select"),
                    ServiceStateSnapshot("state", 0, (("r", {"selected": None, "revision": 0}),)),
                )
            ),
        ),
    )

    class Manual:
        async def invoke(self, call: ServiceCall, ctx: Context) -> Any:
            raise AssertionError("unexpected invocation")

        async def subscribe(
            self, service_id: str, mode: ServiceMode, listener: ServiceUpdateListener, ctx: Context
        ) -> ServiceSubscription:
            listeners.append(listener)
            return _Static(snapshot)

    async with _binding(None, Models, transport=Manual()) as (binding, errors, _):
        models = binding.use(Models)
        await binding.ready(BACKGROUND)
        assert models.state.value["revision"] == 0
        listeners[0](
            ServiceStateUpdate(
                "state", sequence, (("r", {"selected": None, "revision": sequence}),)
            ),
            BACKGROUND,
        )
        assert models.state.value is None
        assert len(errors) == 1
        assert "sequence has a gap" in str(errors[0])


class _Static:
    def __init__(self, snapshot: ServiceSubscriptionSnapshot) -> None:
        self.snapshot = snapshot

    def activate(self) -> None:
        return None

    def close(self, ctx: Context | None = None) -> None:
        return None


@pytest.mark.anyio
async def test_rebind_clears_and_rehydrates_from_fresh_snapshots() -> None:
    # item 56
    provider = RemoteServiceProvider([Models])
    implementation = _models()
    provider.provide(Models, implementation)
    state = implementation["state"]
    async with _binding(provider, Models, bound=False) as (binding, errors, _):
        models = binding.use(Models)
        revisions: list[int] = []
        models.state.subscribe(lambda value, ctx, delivery: revisions.append(value["revision"]))
        assert models.state.value is None
        state.replace(BACKGROUND, {"selected": None, "revision": 1})
        await binding.rebind(True, BACKGROUND)
        assert _value(models.state)["revision"] == 1
        state.replace(BACKGROUND, {"selected": None, "revision": 2})
        assert revisions == [1, 2]
        await binding.rebind(False, BACKGROUND)
        assert models.state.value is None
        state.replace(BACKGROUND, {"selected": None, "revision": 3})
        assert revisions == [1, 2]
        with pytest.raises(
            RemoteServiceError, match="unavailable: its binding is closed"
        ) as closed:
            models.select({"model": "x"}, BACKGROUND)
        assert closed.value.code == "service_stale_instance"
        await binding.rebind(True, BACKGROUND)
        assert _value(models.state)["revision"] == 3
        assert revisions == [1, 2, 3]
        assert errors == []
    provider.dispose()


@pytest.mark.anyio
async def test_rebind_failures_are_aggregated() -> None:
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models())
    async with _binding(provider, Models) as (binding, _, _):
        binding.use(Models)
        await binding.ready(BACKGROUND)
        provider.withdraw(Models)
        with pytest.raises(ExceptionGroup, match="Failed to rebind services"):
            await binding.rebind(True, BACKGROUND)
    provider.dispose()


# -- keyed ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_keyed_views_hydrate_before_handlers_and_close_with_their_instance() -> None:
    # item 57
    provider = RemoteServiceProvider([(Dialogs, "keyed")])
    async with _binding(provider, Dialogs) as (binding, errors, _):
        observed: list[dict[str, Any]] = []

        def handler(view: Any, ctx: Context) -> None:
            observed.append({"question": view.request.value, "view": view, "ctx": ctx})

        stop = binding.observe(Dialogs, handler)
        await binding.ready(BACKGROUND)
        first_request = replicated_state({"question": "First?"})
        answers: list[Any] = []

        async def submit(answer: Any, ctx: Context) -> Any:
            answers.append(answer)
            return {"accepted": True}

        close_first = provider.spawn(
            Dialogs, "invocation-1", {"request": first_request, "submit": submit}
        )
        await wait_all_tasks_blocked()
        assert [o["question"] for o in observed] == [{"question": "First?"}]
        first = observed[0]["view"]
        first_request.replace(BACKGROUND, {"question": "Updated?"})
        assert first.request.value == {"question": "Updated?"}
        assert await first.submit("yes", BACKGROUND) == {"accepted": True}
        assert answers == ["yes"]

        retained_submit = first.submit
        close_first()
        assert observed[0]["ctx"].cancelled
        with pytest.raises(RemoteServiceError, match="observation is closed"):
            first.request.value  # noqa: B018
        with pytest.raises(RemoteServiceError, match="observation is closed"):
            retained_submit("late", BACKGROUND)

        close_second = provider.spawn(Dialogs, "invocation-1", _dialog("Again?"))
        await wait_all_tasks_blocked()
        assert len(observed) == 2
        assert observed[1]["question"] == {"question": "Again?"}
        second = observed[1]["view"]
        assert second is not first
        retained_second = second.submit
        stop()
        assert observed[1]["ctx"].cancelled
        with pytest.raises(RemoteServiceError, match="observation is closed"):
            second.request.value  # noqa: B018
        with pytest.raises(RemoteServiceError, match="observation is closed"):
            retained_second("late", BACKGROUND)
        close_second()
        assert errors == []
    provider.dispose()


@pytest.mark.anyio
async def test_closing_an_instance_cancels_its_observer_task() -> None:
    provider = RemoteServiceProvider([(Dialogs, "keyed")])
    async with _binding(provider, Dialogs) as (binding, errors, _):
        finished = anyio.Event()
        started = anyio.Event()

        async def handler(view: Any, ctx: Context) -> None:
            try:
                started.set()
                await anyio.sleep_forever()
            finally:
                finished.set()

        binding.observe(Dialogs, handler)
        close = provider.spawn(Dialogs, "a", _dialog("?"))
        await started.wait()
        close()
        await finished.wait()
        assert errors == []
    provider.dispose()


@pytest.mark.anyio
async def test_observer_errors_are_reported_unless_the_instance_already_closed() -> None:
    provider = RemoteServiceProvider([(Dialogs, "keyed")])
    async with _binding(provider, Dialogs) as (binding, errors, _):

        def handler(view: Any, ctx: Context) -> None:
            raise ValueError(f"handler failed for {view.request.value['question']}")

        binding.observe(Dialogs, handler)
        provider.spawn(Dialogs, "a", _dialog("A?"))
        await wait_all_tasks_blocked()
        assert [str(e) for e in errors] == ["handler failed for A?"]
    provider.dispose()


@pytest.mark.anyio
async def test_late_observer_gets_a_task_per_existing_instance() -> None:
    provider = RemoteServiceProvider([(Dialogs, "keyed")])
    provider.spawn(Dialogs, "b", _dialog("B?"))
    provider.spawn(Dialogs, "a", _dialog("A?"))
    async with _binding(provider, Dialogs) as (binding, errors, _):
        seen: list[Any] = []
        binding.observe(Dialogs, lambda view, ctx: seen.append(view.request.value["question"]))
        await binding.ready(BACKGROUND)
        await wait_all_tasks_blocked()
        assert sorted(seen) == ["A?", "B?"]
        late: list[Any] = []
        binding.observe(Dialogs, lambda view, ctx: late.append(view.request.value["question"]))
        await wait_all_tasks_blocked()
        assert sorted(late) == ["A?", "B?"]
        assert errors == []
    provider.dispose()


# -- through the wire codecs (items 65-67) ----------------------------------------------------


@pytest.mark.anyio
async def test_overflow_rebaselines_every_member_then_resumes_contiguous_deltas() -> None:
    # item 65
    provider = RemoteServiceProvider([Pair])
    left, right = replicated_state({"value": 0}), replicated_state({"value": 0})
    provider.provide(Pair, {"left": left, "right": right})

    def burst() -> None:
        for value in range(1, 102):
            left.change(BACKGROUND, _assign("value", value))
            right.change(BACKGROUND, _assign("value", value))

    transport = WireTransport(provider, burst)
    async with _binding(None, Pair, transport=transport) as (binding, errors, _):
        pair = binding.use(Pair)
        await binding.ready(BACKGROUND)
        assert [u.type for u in transport.updates] == ["reset", "state"]
        assert pair.left.value == {"value": 101}
        assert pair.right.value == {"value": 101}
        for value in range(102, 105):
            left.change(BACKGROUND, _assign("value", value))
            right.change(BACKGROUND, _assign("value", value))
        assert pair.left.value == {"value": 104}
        assert pair.right.value == {"value": 104}
        assert errors == []
    provider.dispose()


@pytest.mark.anyio
async def test_overflow_reset_can_show_unavailable_before_a_later_replace() -> None:
    # item 66
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models())

    def churn() -> None:
        for value in range(1, 101):
            provider.replace(Models, _models(value))
        provider.withdraw(Models)

    transport = WireTransport(provider, churn)
    async with _binding(None, Models, transport=transport) as (binding, errors, _):
        models = binding.use(Models)
        await binding.ready(BACKGROUND)
        assert [u.to_json() for u in transport.updates] == [
            {
                "type": "reset",
                "snapshot": {"serviceId": Models.id, "mode": "singleton", "instances": []},
            }
        ]
        assert models.state.value is None
        replacement = _models(200)
        provider.replace(Models, replacement)
        replacement["state"].change(BACKGROUND, _assign("revision", 201))
        assert binding.use(Models) is models
        assert models.state.value == {"selected": None, "revision": 201}
        assert errors == []
    provider.dispose()


@pytest.mark.anyio
async def test_keyed_reset_keeps_live_generations_and_reconciles_the_rest() -> None:
    # item 67
    provider = RemoteServiceProvider([(Pair, "keyed")])
    retained = replicated_state({"value": 10})
    provider.spawn(Pair, "retained", {"state": retained})
    close_old = provider.spawn(Pair, "reused", {"state": replicated_state({"value": 20})})
    close_removed = provider.spawn(Pair, "removed", {"state": replicated_state({"value": 30})})
    transport = WireTransport(provider)
    async with _binding(None, Pair, transport=transport) as (binding, errors, _):
        # Observer tasks may run in any order (trio shuffles): name them by their first value.
        observed: dict[int, tuple[Any, Context]] = {}

        def record(view: Any, ctx: Context) -> None:
            observed[view.state.value["value"]] = (view, ctx)

        binding.observe(Pair, record)
        await binding.ready(BACKGROUND)
        await wait_all_tasks_blocked()
        assert sorted(observed) == [10, 20, 30]
        stable, old, removed = observed[10], observed[20], observed[30]
        replacement = replicated_state({"value": 500})

        def on_value(value: Any, ctx: Context, delivery: Delivery) -> None:
            if value["value"] != 1:
                return
            close_old()
            close_removed()
            provider.spawn(Pair, "reused", {"state": replacement})
            retained.replace(BACKGROUND, {"value": 102})
            for following in range(501, 602):
                replacement.replace(BACKGROUND, {"value": following})

        stable[0].state.subscribe(on_value)
        retained.replace(BACKGROUND, {"value": 1})
        await wait_all_tasks_blocked()
        assert any(u.type == "reset" for u in transport.updates)
        assert sorted(observed) == [10, 20, 30, 601]  # the reused key is a new task
        assert not stable[1].cancelled
        assert stable[0].state.value == {"value": 102}
        assert old[1].cancelled
        assert removed[1].cancelled
        reused = observed[601][0]
        replacement.change(BACKGROUND, _assign("value", 602))
        assert reused.state.value == {"value": 602}
        assert errors == []
    provider.dispose()


# -- readiness, observation lifetime and bad input --------------------------------------------


class GatedTransport:
    """Loopback whose subscription hand-offs wait for ``gate`` (a slow network, say)."""

    def __init__(self, provider: RemoteServiceProvider) -> None:
        self.inner = create_loopback_transport(provider)
        self.gate = anyio.Event()
        self.waiting = 0

    def invoke(self, call: ServiceCall, ctx: Context) -> Awaitable[Any]:
        return self.inner.invoke(call, ctx)

    def subscribe(
        self, service_id: str, mode: ServiceMode, listener: ServiceUpdateListener, ctx: Context
    ) -> Awaitable[ServiceSubscription]:
        pending = self.inner.subscribe(service_id, mode, listener, ctx)

        async def hand_off() -> ServiceSubscription:
            self.waiting += 1
            await self.gate.wait()
            return await pending

        return hand_off()


@pytest.mark.anyio
async def test_ready_waits_for_subscriptions_started_while_it_waits() -> None:
    Other = define_service("test.other")
    provider = RemoteServiceProvider([Models, Other])
    provider.provide(Models, _models(1))
    provider.provide(Other, _models(2))
    transport = GatedTransport(provider)
    async with _binding(None, Models, Other, transport=transport) as (binding, errors, group):
        models = binding.use(Models)
        done = anyio.Event()

        async def wait_ready() -> None:
            await binding.ready(BACKGROUND)
            done.set()

        group.start_soon(wait_ready)
        await wait_all_tasks_blocked()
        other = binding.use(Other)  # acquired while ready() is waiting
        await wait_all_tasks_blocked()
        assert transport.waiting == 2 and not done.is_set()
        transport.gate.set()
        await done.wait()
        assert _value(models.state)["revision"] == 1
        assert _value(other.state)["revision"] == 2
        assert errors == []
    provider.dispose()


@pytest.mark.anyio
async def test_ready_honours_its_context() -> None:
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models())
    transport = GatedTransport(provider)
    async with _binding(None, Models, transport=transport) as (binding, _, _):
        binding.use(Models)
        ctx, cancel = with_cancel(BACKGROUND)
        cancel("gave up")
        with pytest.raises(ContextCancelled, match="gave up"):
            await binding.ready(ctx)
        transport.gate.set()
        await binding.ready(BACKGROUND)
    provider.dispose()


@pytest.mark.anyio
async def test_unknown_service_and_wrong_mode_fail_the_start() -> None:
    provider = RemoteServiceProvider([(Dialogs, "keyed")])
    async with _binding(provider, Models) as (binding, errors, _):
        binding.use(Models)
        with pytest.raises(RemoteServiceError, match=r"test\.models") as unknown:
            await binding.ready(BACKGROUND)
        assert unknown.value.code == "service_not_allowed"
        assert errors == [unknown.value]
    async with _binding(provider, Dialogs) as (binding, errors, _):
        binding.use(Dialogs)
        with pytest.raises(RemoteServiceError, match="is keyed, not singleton") as mode:
            await binding.ready(BACKGROUND)
        assert mode.value.code == "service_mode_mismatch"
    provider.dispose()


@pytest.mark.anyio
async def test_an_accessed_member_missing_from_the_snapshot_is_reported() -> None:
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models())
    async with _binding(provider, Models) as (binding, errors, _):
        models = binding.use(Models)
        models.bogus  # noqa: B018 - accessing creates the slot
        with pytest.raises(
            RemoteServiceError, match=r"Unknown remote service member test\.models\.bogus"
        ) as e:
            await binding.ready(BACKGROUND)
        assert e.value.code == "service_member_not_found"
        assert errors == [e.value]
    provider.dispose()


@pytest.mark.anyio
async def test_stopping_the_last_observer_closes_the_keyed_subscription() -> None:
    provider = RemoteServiceProvider([(Dialogs, "keyed")])
    provider.spawn(Dialogs, "a", _dialog("A?"))
    async with _binding(provider, Dialogs) as (binding, errors, _):
        seen: list[str] = []
        stop = binding.observe(
            Dialogs, lambda view, ctx: seen.append(view.request.value["question"])
        )
        await binding.ready(BACKGROUND)
        await wait_all_tasks_blocked()
        stop()
        stop()
        await wait_all_tasks_blocked()
        provider.spawn(Dialogs, "b", _dialog("B?"))
        await wait_all_tasks_blocked()
        assert seen == ["A?"]
        binding.observe(Dialogs, lambda view, ctx: seen.append(view.request.value["question"]))
        await binding.ready(BACKGROUND)
        await wait_all_tasks_blocked()
        assert seen[0] == "A?" and sorted(seen[1:]) == ["A?", "B?"]
        assert errors == []
    provider.dispose()


@pytest.mark.anyio
async def test_binding_dispose_aborts_observer_tasks() -> None:
    provider = RemoteServiceProvider([(Dialogs, "keyed")])
    provider.spawn(Dialogs, "a", _dialog("A?"))
    async with _binding(provider, Dialogs) as (binding, errors, _):
        contexts: list[Context] = []
        finished = anyio.Event()

        async def handler(view: Any, ctx: Context) -> None:
            contexts.append(ctx)
            try:
                await anyio.sleep_forever()
            finally:
                finished.set()

        binding.observe(Dialogs, handler)
        await binding.ready(BACKGROUND)
        await wait_all_tasks_blocked()
        await binding.dispose(BACKGROUND)
        await finished.wait()
        assert contexts[0].cancelled
        assert errors == []
    provider.dispose()
