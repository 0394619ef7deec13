"""Differential interop with the real @earendil-works/chord 0.87.1, both directions, randomized.

* **Chord consumer → our server**: Chord's own parsers, state decoder and
  ``createRemoteServiceBinding`` (tests/interop/chord_peer.mjs, ``consumer``) attach over a Unix
  socket to our ``serve_provider``, with a per-client queue of 3 so bursts collapse, and must
  converge on the provider's values after every step of a random history: state changes (diff
  ops, UTF-16 string edits, big integers), singleton replacements, keyed spawns and closes. No
  update may fail Chord's parser (there is no ``reset`` in 0.87.1), and the error codes of a
  call on a closed instance come through.
* **Chord provider → our binding**: a real ``RemoteServiceProvider`` + ``createRemoteServiceEndpoint``
  with Chord's state encoder (``provider``) is served on a Unix socket; our ``RemoteConnection``
  and ``create_remote_service_binding`` must converge on its values after every step, and its
  error codes must reach us unchanged.

Each direction runs ``INTEROP_HISTORIES`` (default 1,000, ten times hypothesis's default; set it
higher for a deeper search) hypothesis histories through one long-lived node process and one
event loop (a blocking portal), so the module takes about 20 s.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from node_env import node_and_npm, staged_script

from chord.context import BACKGROUND, Context
from chord.delta import diff
from chord.json import equal_json
from chord.remote import (
    RemoteServiceError,
    RemoteServiceProvider,
    ServiceCall,
    ServiceProviderUpdate,
    create_remote_service_binding,
)
from chord.services import define_service
from chord.state import replicated_state
from chord.transport import FrameConnection, connect_unix, serve_unix
from chord.wire import RemoteCallError, RemoteConnection, serve_provider

HISTORIES = int(os.environ.get("INTEROP_HISTORIES", "1000"))
SCRIPT = Path(__file__).resolve().parent / "chord_peer.mjs"
Single = define_service("interop.single")
Keyed = define_service("interop.keyed")

# -- random histories ---------------------------------------------------------------------------

RESERVED = {"__proto__", "constructor", "prototype"}
texts = st.text(st.sampled_from('ab"\\é😀\u2028\x00'), max_size=6)
numbers = st.one_of(
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.sampled_from([2**53, 2**60, -(2**63), 10**20, 2**64 + 1]),  # beyond JS's exact range
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e20, 0.5, -0.0, 5e-324, 1.7976931348623157e308]),
)
scalars = st.none() | st.booleans() | numbers | texts
keys = st.text(st.sampled_from("xyé😀"), max_size=3)
shallow = scalars | st.lists(scalars, max_size=3)
values = shallow | st.dictionaries(keys, shallow, max_size=3)
# "10" < "9" < "B" < "a" < "é" by code point; localeCompare orders them differently
instance_keys = st.sampled_from(["k1", "k2", "10", "9", "B", "a", "é"])
ops = st.one_of(
    st.builds(lambda m, v: {"op": "set", "member": m, "value": v}, st.sampled_from("ab"), values),
    st.builds(lambda a, b: {"op": "replace", "a": a, "b": b}, values, values),
    st.builds(lambda k, v: {"op": "spawn", "key": k, "value": v}, instance_keys, values),
    st.builds(lambda k: {"op": "close", "key": k}, instance_keys),
    st.builds(lambda k, v: {"op": "keyedSet", "key": k, "value": v}, instance_keys, values),
)
# a step is a burst published with no await in between: longer than the queue, it collapses
histories = st.lists(st.lists(ops, min_size=1, max_size=8), min_size=1, max_size=4)

SETTINGS = settings(
    max_examples=HISTORIES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- the node peer ------------------------------------------------------------------------------


class NodePeer:
    """tests/interop/chord_peer.mjs under node: one JSON command line in, one reply line out."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self._buffer = b""

    @classmethod
    @asynccontextmanager
    async def run(cls, mode: str, socket: str) -> AsyncIterator[NodePeer]:
        node, _ = node_and_npm()
        script = staged_script(SCRIPT)
        process = await anyio.open_process([node, str(script), mode, socket], stderr=None)
        peer = cls(process)
        try:
            hello = await peer.read()
            assert hello == {"ready": True, "chord": "0.87.1"}
            yield peer
        finally:
            with anyio.CancelScope(shield=True):
                assert process.stdin is not None
                await process.stdin.aclose()  # the peer exits at the end of its stdin
                with anyio.move_on_after(5):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                await process.aclose()

    async def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            with anyio.fail_after(30):
                chunk = await self.process.stdout.receive()
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    async def ask(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(command).encode() + b"\n")
        reply = await self.read()
        assert "error" not in reply, reply.get("error")
        return reply


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    node_and_npm()  # skip or fail before starting anything
    with start_blocking_portal() as portal:
        yield portal


# -- direction 1: a Chord consumer against our server -------------------------------------------


class PythonProvider:
    """Our provider, rebuilt for every history, served with a per-client queue of 3."""

    def __init__(self) -> None:
        self.provider = RemoteServiceProvider([Single, (Keyed, "keyed")])
        self.a: Any = replicated_state({"v": None})
        self.b: Any = replicated_state({"v": None})
        self.keyed: dict[str, tuple[Any, Callable[[], None], int]] = {}
        self.generations: dict[str, int] = {}
        self.closed: list[tuple[str, int]] = []
        self.provider.provide(Single, self._implementation())

    def _implementation(self) -> dict[str, Any]:
        async def echo(value: Any, ctx: Context) -> Any:
            return value

        return {"a": self.a, "b": self.b, "echo": echo}

    def apply(self, op: dict[str, Any]) -> None:
        kind = op["op"]
        if kind == "set":
            _publish(self.a if op["member"] == "a" else self.b, {"v": op["value"]})
        elif kind == "replace":
            self.a = replicated_state({"v": op["a"]})
            self.b = replicated_state({"v": op["b"]})
            self.provider.replace(Single, self._implementation())
        elif kind == "spawn" and op["key"] not in self.keyed:
            key = op["key"]
            state: Any = replicated_state({"key": key, "v": op["value"]})
            close = self.provider.spawn(Keyed, key, {"state": state, "ping": _ping})
            self.generations[key] = self.generations.get(key, 0) + 1
            self.keyed[key] = (state, close, self.generations[key])
        elif kind == "close" and op["key"] in self.keyed:
            _, close, generation = self.keyed.pop(op["key"])
            close()
            self.closed.append((op["key"], generation))
        elif kind == "keyedSet" and op["key"] in self.keyed:
            _publish(self.keyed[op["key"]][0], {"key": op["key"], "v": op["value"]})

    def view(self) -> dict[str, Any]:
        keyed = {key: state.value for key, (state, _, _) in self.keyed.items()}
        return {"single": {"a": self.a.value, "b": self.b.value}, "keyed": keyed}


def _publish(state: Any, after: Any) -> None:
    ops = diff(state.value, after)  # s/d/a/t/p/m ops, not just a base `r`
    if ops:
        state.apply(BACKGROUND, ops)


async def _ping(ctx: Context) -> str:
    return "pong"


class ConsumerRig:
    def __init__(self, peer: NodePeer) -> None:
        self.peer = peer
        self.world = PythonProvider()
        self.socket = ""

    async def handle(self, conn: FrameConnection) -> None:
        await serve_provider(conn, self.world.provider, queue_limit=3)

    async def history(self, steps: list[list[dict[str, Any]]]) -> None:
        self.world = PythonProvider()
        assert (await self.peer.ask(cmd="attach"))["ok"]
        for step in steps:
            for op in step:  # one burst: nothing awaits in between
                self.world.apply(op)
            check = await self.peer.ask(cmd="check", expect=self.world.view())
            assert check["ok"], f"Chord's binding did not converge: {check} vs {self.world.view()}"
            assert check["errors"] == [], check["errors"]
        echoed = await self.peer.ask(cmd="call", value={"n": 2**52, "s": "a😀", "l": [1.5, None]})
        assert echoed["result"] == {"n": 2**52, "s": "a😀", "l": [1.5, None]}
        for key, generation in self.world.closed[:1]:
            call = {
                "serviceId": Keyed.id,
                "instance": {"key": key, "generation": generation},
                "member": "ping",
                "args": [],
            }
            live = self.world.keyed.get(key)
            expected = "service_stale_instance" if live else "service_instance_not_found"
            assert (await self.peer.ask(cmd="stale", call=call))["code"] == expected
        detached = await self.peer.ask(cmd="detach")
        assert detached["errors"] == []


@pytest.fixture(scope="module")
def consumer_rig(portal: BlockingPortal) -> Iterator[ConsumerRig]:
    @asynccontextmanager
    async def running() -> AsyncIterator[ConsumerRig]:
        with tempfile.TemporaryDirectory(prefix="chord-interop-") as folder:
            socket = os.path.join(folder, "py.sock")
            async with anyio.create_task_group() as group, NodePeer.run("consumer", socket) as peer:
                rig = ConsumerRig(peer)
                rig.socket = await group.start(serve_unix, socket, rig.handle)
                yield rig
                group.cancel_scope.cancel()

    with portal.wrap_async_context_manager(running()) as rig:
        yield rig


@SETTINGS
@given(histories)
def test_a_chord_consumer_converges_on_our_server_through_every_history(
    portal: BlockingPortal, consumer_rig: ConsumerRig, steps: list[list[dict[str, Any]]]
) -> None:
    portal.call(consumer_rig.history, steps)


# -- direction 2: our binding against a Chord provider ------------------------------------------


class Notifying:
    """Our RemoteConnection as the binding's transport, waking the test after every update."""

    def __init__(self, connection: RemoteConnection, changed: Callable[[], None]) -> None:
        self.connection = connection
        self.changed = changed

    async def invoke(self, call: ServiceCall, ctx: Context) -> Any:
        return await self.connection.invoke(call, ctx)

    async def subscribe(self, service_id: str, mode: Any, listener: Any, ctx: Context) -> Any:
        def wrapped(update: ServiceProviderUpdate, ctx: Context) -> None:
            listener(update, ctx)
            self.changed()

        return await self.connection.subscribe(service_id, mode, wrapped, ctx)


class ProviderRig:
    def __init__(self, peer: NodePeer, socket: str) -> None:
        self.peer = peer
        self.socket = socket
        self._changed = anyio.Event()

    def changed(self) -> None:
        self._changed.set()

    async def converge(self, view: Callable[[], Any], expected: Any, errors: list[Any]) -> None:
        with anyio.fail_after(60):  # a deadline, not a pace: node on a loaded machine is slow
            while not equal_json(view(), expected):
                assert errors == []
                self._changed = anyio.Event()
                await self._changed.wait()

    async def history(self, steps: list[list[dict[str, Any]]]) -> None:
        await self.peer.ask(cmd="new")
        errors: list[BaseException] = []
        live: set[Any] = set()
        async with anyio.create_task_group() as group:
            connection = RemoteConnection(await connect_unix(self.socket))
            group.start_soon(connection.run)
            binding = create_remote_service_binding(
                services=[Single, Keyed],
                transport=Notifying(connection, self.changed),
                on_error=errors.append,
                task_group=group,
            )
            single: Any = binding.use(Single)

            async def observer(view: Any, ctx: Context) -> None:
                live.add(view)
                self.changed()
                try:
                    await anyio.sleep_forever()
                finally:
                    live.discard(view)
                    self.changed()

            binding.observe(Keyed, observer)
            await binding.ready(BACKGROUND)

            def our_view() -> dict[str, Any]:
                keyed: dict[str, Any] = {}
                for view in list(live):
                    try:
                        value = view.state.value
                    except RemoteServiceError:
                        continue  # closed a moment ago
                    if value is not None:
                        keyed[value["key"]] = value
                return {"single": {"a": single.a.value, "b": single.b.value}, "keyed": keyed}

            for step in steps:
                reply = await self.peer.ask(cmd="step", ops=[_for_chord(op) for op in step])
                theirs = reply["view"]
                expected = {
                    "single": theirs["single"],
                    "keyed": {k: entry["value"] for k, entry in theirs["keyed"].items()},
                }
                await self.converge(our_view, expected, errors)
            assert equal_json(
                await single.echo({"n": 2**52, "s": "a😀"}, BACKGROUND), {"n": 2**52, "s": "a😀"}
            )
            with pytest.raises(RemoteServiceError) as chord_code:
                await single.fail("service_invalid_value", BACKGROUND)
            assert chord_code.value.code == "service_invalid_value"
            with pytest.raises(RemoteCallError) as app_code:
                await single.fail("not_authorized", BACKGROUND)
            assert app_code.value.code == "not_authorized"
            assert errors == []
            await binding.dispose(BACKGROUND)
            await connection.aclose()
            group.cancel_scope.cancel()


def _for_chord(op: dict[str, Any]) -> dict[str, Any]:
    """The same op for the Chord provider: state roots are ``{"v": ...}`` / ``{"key", "v"}``."""
    kind = op["op"]
    if kind == "set":
        return {**op, "value": {"v": op["value"]}}
    if kind == "replace":
        return {**op, "a": {"v": op["a"]}, "b": {"v": op["b"]}}
    if kind in ("spawn", "keyedSet"):
        return {**op, "value": {"key": op["key"], "v": op["value"]}}
    return op


@pytest.fixture(scope="module")
def provider_rig(portal: BlockingPortal) -> Iterator[ProviderRig]:
    @asynccontextmanager
    async def running() -> AsyncIterator[ProviderRig]:
        with tempfile.TemporaryDirectory(prefix="chord-interop-") as folder:
            socket = os.path.join(folder, "js.sock")
            async with NodePeer.run("provider", socket) as peer:
                yield ProviderRig(peer, socket)

    with portal.wrap_async_context_manager(running()) as rig:
        yield rig


@SETTINGS
@given(histories)
def test_our_binding_converges_on_a_chord_provider_through_every_history(
    portal: BlockingPortal, provider_rig: ProviderRig, steps: list[list[dict[str, Any]]]
) -> None:
    portal.call(provider_rig.history, steps)
