"""Property: whatever bytes a peer sends, the server loop ends cleanly and the provider lives on."""

from __future__ import annotations

import json
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chord.context import BACKGROUND, Context
from chord.remote import RemoteServiceProvider, ServiceCall
from chord.services import define_service
from chord.state import replicated_state
from chord.transport import memory_connection_pair
from chord.wire import open_remote_connection, serve_provider

Target = define_service("test.wire.fuzz")


def _provider() -> RemoteServiceProvider:
    provider = RemoteServiceProvider([Target])
    state: Any = replicated_state({"n": 0})

    def bump(ctx: Context) -> int:
        state.change(ctx, lambda draft: draft.__setitem__("n", draft["n"] + 1))
        return state.value["n"]

    provider.provide(Target, {"state": state, "bump": bump})
    return provider


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
calls = st.fixed_dictionaries(
    {
        "serviceId": st.sampled_from([Target.id, "$chord.service", "", "nope"]),
        "member": st.sampled_from(["bump", "state", "catalogue", "subscribe", "unsubscribe", "x"]),
        "args": st.lists(json_values, max_size=3),
    },
    optional={"instance": json_values, "extra": json_values},
)
frames = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("request"), "id": st.integers(-2, 2**54), "call": calls | json_values}
    ),
    st.fixed_dictionaries({"type": st.just("cancel"), "id": st.integers(-2, 5)}),
    st.fixed_dictionaries({"type": st.just("closed")}, optional={"reason": json_values}),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["result", "update", "hello", 1])},
        optional={"id": json_values, "ok": json_values, "update": json_values},
    ),
    st.dictionaries(st.text(max_size=5), json_values, max_size=4),
)
lines = st.one_of(
    st.binary(max_size=300),
    frames.map(lambda frame: json.dumps(frame).encode() + b"\n"),
    st.sampled_from([b"NaN\n", b'{"a": 1, "a": 2}\n', b"\n\n", b"\xff\xfe\n", b"x" * 600]),
)


async def _scenario(provider: RemoteServiceProvider, chunks: list[bytes]) -> None:
    client, server = memory_connection_pair(max_frame_size=512, buffer=1024)
    errors: list[BaseException] = []
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: serve_provider(server, provider, on_error=errors.append))
        for chunk in chunks:
            try:
                await client.stream.send(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                break
        await client.stream.send_eof()
        with anyio.fail_after(10):
            try:
                while True:
                    await client.receive()  # drain whatever the server answers
            except Exception:
                pass  # a garbled answer or end of stream: the server side is what we test
        await client.aclose()
    # the server loop returned (no exception escaped the task group) and the provider is intact
    assert provider.disposed is False
    other_client, other_server = memory_connection_pair()
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: serve_provider(other_server, provider))
        async with open_remote_connection(other_client) as remote:
            result = await remote.invoke(ServiceCall(Target.id, "bump"), BACKGROUND)
            assert isinstance(result, int)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=st.lists(lines, min_size=1, max_size=6))
def test_random_bytes_and_adversarial_frames_never_crash_the_server_loop(
    chunks: list[bytes],
) -> None:
    provider = _provider()
    anyio.run(_scenario, provider, chunks)
    provider.dispose()
