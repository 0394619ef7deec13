"""The load scenario shared by ``test_load.py`` (CI-sized) and ``benchmarks/reliability_load.py``.

One session worker, many subagents, many attached clients, one of them slow (issue 9 item 3).

The worker
    The real harness session facet (:func:`pico3.facets.harness_session_facet`) on
    ``JsonlStorage(fsync=False)``, its remotable services (``pi.conversation``) served over a Unix
    socket by :func:`chord.wire.provider_handler` with a bounded per-client ``queue_limit``. The
    worker lives in this process; the clients reach it only through the socket.

The load
    ``conversations`` supervisor tasks are created in the root conversation by one commit. Each
    creates an *owned* conversation (a subagent, :func:`pico3.owned.create_owned`) atomically
    with its checkpoint, sends it ``"job <n>"`` and waits for the answer. The child's turn is a
    faux-model answer with ``tools_per_turn`` calls of the ``work`` tool, then a final text. The
    tool is a barrier: each call waits until every call of its turn has started, so the turn
    only completes if its calls really run concurrently (a serial runner times out into an
    error result, which the transcript check reports). ``rounds - 1`` more turns follow, sent
    to every subagent at once; then ``tail_writes`` passive notes go to the root in batches.

The clients
    ``clients`` facet hosts, each with its own :func:`chord.wire.connect_service_source`,
    observe every ``pi.conversation`` instance and fold each delivery (sequence, kind, value).
    The last ``slow_clients`` of them read through a :class:`GatedStream`: once hydrated, their
    socket is not read until the end. After every round and every batch the run waits for the
    fast clients to hold exactly the worker's final (sequence, value) of every instance, so a
    fast client is never more than one round or batch behind (:attr:`LoadReport.round_frames`);
    the slow client falls behind by all of them, so the worker's queue for it overflows and
    collapses into a reset (a fresh snapshot, seen as a second ``hydrate``). Nothing sleeps:
    every wait is on a delivery, a commit or a task outcome.

:func:`run_load` returns a :class:`LoadReport`; it asserts nothing itself, so the test states
the invariants and the benchmark prints the figures. :func:`run_baseline` runs the same turn
sequentially in one conversation without clients.
"""

from __future__ import annotations

import re
import resource
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from socket import SO_SNDBUF, SOL_SOCKET
from typing import Any

import anyio
import anyio.abc

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.state import Delivery
from chord.transport import FrameConnection, serve_unix
from chord.transport.unix import open_unix_stream
from chord.wire import connect_service_source, provider_handler
from pico3 import ConversationService, HarnessService, harness_session_facet
from pico3.facets.session import SessionHarness
from pico3.harness import Harness, HarnessOptions
from pico3.kernel.tx import Transaction
from pico3.models.faux import FauxProvider, FauxResponse, FauxState, faux_response, faux_tool_call
from pico3.models.provider import Request, TextContent, ToolResultMessage, UserMessage
from pico3.owned import OwnedConversation, create_owned
from pico3.storage import JsonlStorage
from pico3.storage.records import UNSET, Task
from pico3.tasks import Completion, Done, Next, Runtime, Step, TaskInfo, TaskKind, define_task
from pico3.tools import ToolApi, ToolDeclaration, ToolResult
from pico3.turn.models import Models

__all__ = [
    "ClientReport",
    "GatedStream",
    "LoadConfig",
    "LoadReport",
    "run_baseline",
    "run_load",
    "transcript_problems",
]

MODEL = {"provider": "faux", "modelId": "faux-1"}
TOOL_NAME = "work"
_JOB = re.compile(r"job (\d+)(?: round (\d+))?")


@dataclass(frozen=True, slots=True)
class LoadConfig:
    """The size of one run. ``timeout`` bounds every wait (seconds), never paces anything.

    ``rounds``: turns per subagent (round 1 creates them; each later round sends every one of
    them one more job at once). ``tail_writes``: passive notes written to the root afterwards,
    ``tail_batch`` at a time, each batch awaited by the fast clients; they only lengthen the
    slow client's backlog (see :attr:`LoadReport.round_frames`).
    """

    conversations: int = 50
    rounds: int = 1
    tools_per_turn: int = 4
    tail_writes: int = 2000
    tail_batch: int = 250
    clients: int = 10
    slow_clients: int = 1
    peer_queue_limit: int = 1024
    payload_bytes: int = 1024
    timeout: float = 120.0

    def __post_init__(self) -> None:
        sizes = (self.conversations, self.rounds, self.tools_per_turn, self.peer_queue_limit)
        if min(sizes) < 1 or min(self.payload_bytes, self.tail_writes) < 0 or self.tail_batch < 1:
            raise ValueError(f"LoadConfig: sizes must be positive, got {self!r}")
        if not 0 <= self.slow_clients <= self.clients:
            raise ValueError(f"LoadConfig: slow_clients must be within 0..clients, got {self!r}")


@dataclass(slots=True)
class ClientReport:
    """What one attached client saw, summed over every conversation instance it observed.

    ``updates``: ``update`` deliveries; ``rebaselines``: ``hydrate`` deliveries after an
    instance's first (a reset's fresh snapshot); ``gaps``: updates whose sequence was not the
    previous one plus one; ``respawns``: conversations seen with more than one instance
    generation; ``final``: the last value per conversation id.
    """

    slow: bool
    updates: int = 0
    rebaselines: int = 0
    gaps: int = 0
    respawns: int = 0
    bytes_received: int = 0
    updates_when_fast_converged: int = 0
    final: dict[int, Any] = field(default_factory=dict[int, Any])


@dataclass(slots=True)
class LoadReport:
    """The outcome of :func:`run_load` (figures for the benchmark, facts for the test)."""

    config: LoadConfig
    turns_done: int = 0
    turn_statuses: list[str] = field(default_factory=list[str])
    tool_calls: int = 0
    peak_concurrent_tools: int = 0
    transcript_problems: list[str] = field(default_factory=list[str])
    live_tasks: list[str] = field(default_factory=list[str])
    errors: list[str] = field(default_factory=list[str])
    clients: list[ClientReport] = field(default_factory=list[ClientReport])
    expected: dict[int, Any] = field(default_factory=dict[int, Any])
    slow_converged_before_release: bool = False
    round_frames: list[int] = field(default_factory=list[int])
    """Per round (then per tail batch), the most frames a fast client received in it (updates
    plus new instances): how far a fast client could ever fall behind, since each starts with
    all of them converged. Below ``peer_queue_limit``, a fast client can never overflow its
    queue, however the worker and the clients are scheduled; the slow client misses all of
    them, ``sum(round_frames)`` frames, far more than the limit plus a socket buffer."""
    load_seconds: float = 0.0
    fast_converged_seconds: float = 0.0
    peak_rss_bytes: int = 0
    socket_buffer_bytes: int = 0
    """The kernel's send buffer size for a client socket (``SO_SNDBUF``, the system default a
    worker-side socket gets too): the slow client only overflows the worker's queue once the
    run sends it well beyond this."""

    @property
    def fast(self) -> list[ClientReport]:
        return [client for client in self.clients if not client.slow]

    @property
    def slow(self) -> list[ClientReport]:
        return [client for client in self.clients if client.slow]


# -- the worker's code: a supervisor kind, the barrier tool, the faux model --------------------------
async def _no_abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return lambda tx, current, ctx: None


def _supervisor(tools_per_turn: int) -> TaskKind:
    """Creates its owned child with its first checkpoint, sends ``job <n>``, waits, completes."""
    spec = {"rewindable": {"model": MODEL, "selectedTools": [TOOL_NAME]}}

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        async def create(tx: Transaction, current: Task, _ctx: Context) -> dict[str, Any]:
            return {"phase": "asking", "child": await create_owned(tx, current, spec)}

        return Next(create)

    async def asking(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        assert task.checkpoint is not None
        child = await OwnedConversation.attach(rt, task.checkpoint["child"], ctx)
        sent = await child.send(f"job {task.input['job']}", ctx, request_id=f"{task.id}:job")
        record = await sent.wait(ctx)
        reason = None if record.reason is UNSET else record.reason
        result = {"status": record.status, "reason": reason, "child": child.id}
        return Done(lambda tx, cur, c: Completion.completed(result))

    return define_task(
        "load.supervisor", initial=initial, phases={"asking": asking}, abort=_no_abort
    )


class _Barriers:
    """Per conversation: release the turn's tool calls once all of them have started."""

    def __init__(self, size: int, timeout: float) -> None:
        self._size = size
        self._timeout = timeout
        self._arrived: dict[tuple[int, int], set[str]] = {}
        self._open: dict[tuple[int, int], anyio.Event] = {}
        self.calls = 0
        self.running = 0
        self.peak = 0

    async def work(self, args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        turn = (api.conversation_id, args["round"])
        arrived = self._arrived.setdefault(turn, set())
        gate = self._open.setdefault(turn, anyio.Event())
        arrived.add(api.call_id)
        self.calls += 1
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            if len(arrived) >= self._size:
                gate.set()
            with anyio.fail_after(self._timeout):
                await gate.wait()  # a tool runner that is not concurrent never gets past this
        finally:
            self.running -= 1
        filler = "x" * args["pad"]
        job, round_, part = args["job"], args["round"], args["part"]
        return ToolResult.text(f"job {job} round {round_} part {part}: {filler}")


def _declare(barriers: _Barriers) -> ToolDeclaration:
    schema = {
        "type": "object",
        "properties": {
            "job": {"type": "integer"},
            "round": {"type": "integer"},
            "part": {"type": "integer"},
            "pad": {"type": "integer", "minimum": 0},
        },
        "required": ["job", "round", "part", "pad"],
    }
    return ToolDeclaration(TOOL_NAME, "One part of a job.", schema, barriers.work, replay="safe")


def _text(message: Any) -> str:
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return message.content
        return "".join(b.text for b in message.content if isinstance(b, TextContent))
    return ""


def _model_step(tools_per_turn: int, pad: int) -> Callable[[Request, FauxState], FauxResponse]:
    """Reactive, so concurrent conversations may take steps in any order: a user ``job <n>
    [round <r>]`` gets ``tools_per_turn`` calls of ``work``; tool results get the final answer."""

    def step(request: Request, state: FauxState) -> FauxResponse:
        del state
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return faux_response("all parts done")
        found = _JOB.search(_text(last))
        job = int(found.group(1)) if found else -1
        round_ = int(found.group(2) or 1) if found else -1
        calls = (
            faux_tool_call(TOOL_NAME, {"job": job, "round": round_, "part": part, "pad": pad})
            for part in range(tools_per_turn)
        )
        return faux_response(*calls)

    return step


# -- checks -------------------------------------------------------------------------------------------
def _summary(message: dict[str, Any]) -> str:
    role = str(message.get("role"))
    if role == "assistant":
        detail = message.get("errorMessage") or message.get("stopReason")
        return f"assistant({detail})"
    return role


def transcript_problems(
    conversation_id: int, job: int, messages: list[Any], tools_per_turn: int, rounds: int = 1
) -> list[str]:
    """What is wrong with a child's derived context (empty when valid).

    Leaving out ``system`` messages (the rendered system prompt entry), the context must be
    ``rounds`` turns, each: the user's ``job <n>``, one assistant with ``tools_per_turn`` calls,
    their results in call order (same ids, not errors, the right text, none synthesized by the
    repair), then the final assistant answer.
    """
    where = f"conversation {conversation_id} (job {job})"
    turn = [message for message in messages if message.get("role") != "system"]
    roles = [message.get("role") for message in turn]
    one = ["user", "assistant", *(["toolResult"] * tools_per_turn), "assistant"]
    if roles != one * rounds:
        return [f"{where}: context is {[_summary(m) for m in turn]}, expected {one} x {rounds}"]
    problems: list[str] = []
    for number in range(rounds):
        at = f"{where} round {number + 1}"
        messages_of_turn = turn[number * len(one) : (number + 1) * len(one)]
        assistant, results, answer = (
            messages_of_turn[1],
            messages_of_turn[2:-1],
            messages_of_turn[-1],
        )
        calls = [block for block in assistant["content"] if block.get("type") == "toolCall"]
        if len(calls) != tools_per_turn:
            problems.append(f"{at}: {len(calls)} tool calls, expected {tools_per_turn}")
        for index, (call, result) in enumerate(zip(calls, results, strict=False)):
            text = "".join(block.get("text", "") for block in result.get("content", []))
            if result.get("toolCallId") != call.get("id"):
                problems.append(f"{at}: result {index} answers {result.get('toolCallId')!r}")
            if result.get("isError") or (result.get("details") or {}).get("reason"):
                problems.append(f"{at}: result {index} is an error: {text[:200]!r}")
            part = call.get("arguments", {}).get("part")
            if not text.startswith(f"job {job} round {number + 1} part {part}: "):
                problems.append(f"{at}: result {index} says {text[:80]!r}")
        if answer.get("stopReason") != "stop":
            problems.append(f"{at}: the final answer is {_summary(answer)}")
    return problems


# -- the clients -----------------------------------------------------------------------------------------
class GatedStream(anyio.abc.ByteStream):
    """A client's socket whose *reads* can be held (the slow client's blocked reader).

    Writes pass through; :meth:`block` makes the next ``receive`` wait until :meth:`release`.
    The kernel buffer fills, then the worker's queue for this client, which collapses.
    """

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream
        self._open = anyio.Event()
        self._open.set()

    def block(self) -> None:
        """Hold the reads from the next one on (a read already waiting completes)."""
        if self._open.is_set():
            self._open = anyio.Event()

    def release(self) -> None:
        """Let reads through again."""
        self._open.set()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await self._open.wait()
        return await self._stream.receive(max_bytes)

    async def send(self, item: bytes) -> None:
        await self._stream.send(item)

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        self._open.set()
        await self._stream.aclose()


def _without_commit(value: Any) -> Any:
    return {key: item for key, item in value.items() if key != "commit"}


class _Changes:
    def __init__(self, timeout: float) -> None:
        self._event = anyio.Event()
        self._timeout = timeout

    def notify(self) -> None:
        event, self._event = self._event, anyio.Event()
        event.set()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        with anyio.fail_after(self._timeout):
            while not predicate():
                await self._event.wait()


class _Instance:
    """One observed conversation instance (one generation) as a client folds it."""

    __slots__ = ("client", "conversation_id", "last", "matches", "rebaselines", "value")

    def __init__(self, client: _Client) -> None:
        self.client = client
        self.conversation_id: int | None = None
        self.last: int | None = None
        self.value: Any = None
        self.matches = False
        self.rebaselines = 0

    def deliver(self, value: Any, _ctx: Context, delivery: Delivery) -> None:
        client = self.client
        if self.last is None:
            cid: int = value["conversation"]["id"]
            self.conversation_id = cid
            client.instances += 1
            client.generations[cid] = client.generations.get(cid, 0) + 1
        elif delivery.kind == "hydrate":
            self.rebaselines += 1
            client.rebaselines += 1
        else:
            client.updates += 1
            if delivery.sequence != self.last + 1:
                client.gaps += 1
        self.last = delivery.sequence
        self.value = value
        assert self.conversation_id is not None
        client.live[self.conversation_id] = self
        client.check(self)
        client.changes.notify()


class _Client:
    """One attached presentation: a facet host observing every ``pi.conversation`` instance."""

    def __init__(self, name: str, slow: bool, changes: _Changes) -> None:
        self.slow = slow
        self.changes = changes
        self.gate: GatedStream | None = None
        self.conn: FrameConnection | None = None
        self.socket_buffer = 0
        self.live: dict[int, _Instance] = {}
        self.generations: dict[int, int] = {}
        self.expected: dict[int, tuple[int, Any]] | None = None
        self.updates = 0
        self.rebaselines = 0
        self.gaps = 0
        self.instances = 0
        self.facet = define_facet(f"load.client.{name}", self._setup)

    def _setup(self, env: FacetEnvironment) -> None:
        async def on_instance(instance: Any, ctx: Context) -> None:
            observed = _Instance(self)
            stop = instance.view.subscribe(observed.deliver)
            try:
                await ctx.wait_cancelled()
            finally:
                stop()
                cid = observed.conversation_id
                if cid is not None and self.live.get(cid) is observed:
                    del self.live[cid]
                self.changes.notify()

        env.observe(ConversationService, on_instance)

    async def connect(self, socket: Path) -> FrameConnection:
        raw = await open_unix_stream(socket)
        self.socket_buffer = raw.extra(anyio.abc.SocketAttribute.raw_socket).getsockopt(
            SOL_SOCKET, SO_SNDBUF
        )
        stream: anyio.abc.ByteStream = raw
        if self.slow:
            stream = self.gate = GatedStream(stream)
        self.conn = FrameConnection(stream, name=f"unix:{socket}")
        return self.conn

    def check(self, instance: _Instance) -> None:
        expected = self.expected
        if expected is not None and instance.conversation_id is not None:
            want = expected.get(instance.conversation_id)
            instance.matches = (
                want is not None and instance.last == want[0] and instance.value == want[1]
            )

    def expect(self, expected: dict[int, tuple[int, Any]]) -> None:
        """Converge on ``expected``: per conversation, the worker's final (sequence, value)."""
        self.expected = expected
        for instance in self.live.values():
            self.check(instance)

    @property
    def frames(self) -> int:
        """Everything delivered: first hydrations, updates and rebaselines."""
        return self.instances + self.updates + self.rebaselines

    def has(self, conversation_id: int) -> bool:
        return conversation_id in self.live

    def converged(self) -> bool:
        expected = self.expected
        if expected is None:
            return False
        return all((found := self.live.get(cid)) is not None and found.matches for cid in expected)

    def report(self) -> ClientReport:
        return ClientReport(
            slow=self.slow,
            updates=self.updates,
            rebaselines=self.rebaselines,
            gaps=self.gaps,
            respawns=sum(1 for count in self.generations.values() if count > 1),
            bytes_received=0 if self.conn is None else self.conn.bytes_received,
            final={cid: instance.value for cid, instance in self.live.items()},
        )


# -- the run ------------------------------------------------------------------------------------------------
async def run_load(config: LoadConfig, directory: Path) -> LoadReport:
    """Run the scenario once in ``directory`` (store and socket) and report what happened."""
    report = LoadReport(config)
    errors: list[BaseException] = []
    barriers = _Barriers(config.tools_per_turn, config.timeout)
    step = _model_step(config.tools_per_turn, config.payload_bytes)
    faux = FauxProvider([step] * (2 * config.conversations * config.rounds))
    options = HarnessOptions(services={"models": Models([faux])}, on_report=errors.append)
    kind = _supervisor(config.tools_per_turn)
    tool = _declare(barriers)
    socket = directory / "worker.sock"
    store = directory / "session"
    box: dict[str, Any] = {}
    changes = _Changes(config.timeout)

    def worker(env: FacetEnvironment) -> None:
        box["session"] = env.use(HarnessService)

    def install(harness: Harness) -> Callable[[], None]:
        removers = [harness.register_task_kind(kind), harness.register_tool(tool)]

        def remove() -> None:
            for remover in removers:
                remover()

        return remove

    async with anyio.create_task_group() as group:
        session_facet = harness_session_facet(
            lambda: JsonlStorage(store, fsync=False), options, task_group=group
        )
        async with (
            create_facet_host([session_facet, define_facet("load.worker", worker)]) as host,
            AsyncExitStack() as stack,
        ):
            session: SessionHarness = box["session"]
            session.add_registration(install)
            await session.resume(BACKGROUND)
            root = await session.harness.root(BACKGROUND)
            handler = provider_handler(
                host.services, queue_limit=config.peer_queue_limit, on_error=errors.append
            )
            await group.start(serve_unix, socket, handler)

            clients = [
                _Client(str(n), n >= config.clients - config.slow_clients, changes)
                for n in range(config.clients)
            ]
            for client in clients:
                source = connect_service_source(
                    lambda c=client: c.connect(socket), task_group=group, on_error=errors.append
                )
                stack.push_async_callback(source.aclose)
                await stack.enter_async_context(
                    create_facet_host(
                        [client.facet], service_sources=[source], on_error=errors.append
                    )
                )
            await changes.wait_for(lambda: all(c.has(root.id) for c in clients))
            for client in clients:
                if client.gate is not None:
                    client.gate.block()

            fast = [c for c in clients if not c.slow]
            slow = [c for c in clients if c.slow]

            async def converge(targets: list[_Client]) -> None:
                """Wait until ``targets`` hold exactly the worker's final views."""
                # The final views, straight from the kernel: what every client must reach.
                expected: dict[int, Any] = {}
                for cid in sorted(session.harness.kernel.conversations):
                    handle = await session.harness.conversation(cid, BACKGROUND)
                    assert handle is not None
                    watch = await handle.watch(BACKGROUND)
                    expected[cid] = watch.view
                    watch.stop()
                report.expected = expected
                # Wait for the worker's instances to publish all of it, then take their final
                # (sequence, value): a client has converged when its replica is at exactly that.
                await session.settle()
                bridges = {cid: session.bridge(cid) for cid in expected}

                def poke(_value: Any, _ctx: Context, _delivery: Delivery) -> None:
                    changes.notify()

                stops = [bridge.view.subscribe(poke) for bridge in bridges.values() if bridge]

                def drained() -> bool:
                    return all(
                        bridge is not None
                        and bridge.pending == 0
                        and _without_commit(bridge.view.value) == expected[cid]
                        for cid, bridge in bridges.items()
                    )

                await changes.wait_for(drained)
                for stop in stops:
                    stop()
                served = {
                    cid: (bridge.view.sequence, bridge.view.value)
                    for cid, bridge in bridges.items()
                    if bridge is not None
                }
                for client in clients:
                    client.expect(served)
                await changes.wait_for(lambda: all(c.converged() for c in targets))

            def record(status: str, reason: Any) -> None:
                report.turn_statuses.append(status if reason is None else f"{status} ({reason})")
                report.turns_done += status == "done"

            # Round 1: every supervisor in one commit, so they all start together.
            def create_all(tx: Transaction, _ctx: Context) -> list[int]:
                return [tx.create_task(kind, {"job": n}) for n in range(config.conversations)]

            async def later_turn(cid: int, job: int, number: int) -> None:
                handle = await session.harness.conversation(cid, BACKGROUND)
                assert handle is not None
                sent = await handle.send(f"job {job} round {number}", BACKGROUND)
                done = await sent.wait(BACKGROUND)
                record(done.status, None if done.reason is UNSET else done.reason)

            children: dict[int, int] = {}
            for number in range(1, config.rounds + 1):
                before = {id(c): c.frames for c in fast}
                started = time.perf_counter()
                with anyio.fail_after(config.timeout):
                    if number == 1:
                        task_ids: list[int] = await root.commit(create_all, BACKGROUND)
                        for job, task_id in enumerate(task_ids):
                            task = await session.harness.wait_for_task(task_id, BACKGROUND)
                            outcome: dict[str, Any] = (
                                task.outcome if task.outcome is not UNSET else {}
                            )
                            result: dict[str, Any] = outcome.get("result") or {}
                            record(str(result.get("status")), result.get("reason"))
                            if "child" in result:
                                children[result["child"]] = job
                    else:  # one more turn in every subagent, all sent at once
                        async with anyio.create_task_group() as turns:
                            for cid, job in children.items():
                                turns.start_soon(later_turn, cid, job, number)
                    await session.harness.wait_for_idle(BACKGROUND)
                report.load_seconds += time.perf_counter() - started
                await converge(fast)
                report.fast_converged_seconds += time.perf_counter() - started
                report.round_frames.append(max((c.frames - before[id(c)] for c in fast), default=0))
                if any(c.converged() for c in slow):
                    report.slow_converged_before_release = True

            # The tail: the session goes on changing while the slow client is still blocked.
            # Each batch is bounded, and awaited by the fast clients before the next one.
            for first in range(0, config.tail_writes, config.tail_batch):
                before = {id(c): c.frames for c in fast}
                for n in range(first, min(first + config.tail_batch, config.tail_writes)):
                    await root.write("load.note", BACKGROUND, data={"n": n})
                await converge(fast)
                report.round_frames.append(max((c.frames - before[id(c)] for c in fast), default=0))
                if any(c.converged() for c in slow):
                    report.slow_converged_before_release = True

            counts_at_fast_convergence = {id(c): c.updates for c in clients}
            for client in slow:
                assert client.gate is not None
                client.gate.release()
            await changes.wait_for(lambda: all(c.converged() for c in slow))

            # Transcripts and leftovers, read from the worker's harness.
            for cid, job in sorted(children.items()):
                handle = await session.harness.conversation(cid, BACKGROUND)
                assert handle is not None
                context = await handle.context(BACKGROUND)
                messages = list(context.messages)
                report.transcript_problems.extend(
                    transcript_problems(cid, job, messages, config.tools_per_turn, config.rounds)
                )

            async def all_tasks(tx: Transaction, _ctx: Context) -> list[Task]:
                return await tx.tasks()

            for task in await session.harness.kernel.commit(all_tasks, BACKGROUND):
                if task.status != "terminal":
                    report.live_tasks.append(f"task {task.id} {task.kind} {task.status}")
            report.socket_buffer_bytes = max(c.socket_buffer for c in clients) if clients else 0
            report.tool_calls = barriers.calls
            report.peak_concurrent_tools = barriers.peak
            for client in clients:
                entry = client.report()
                entry.updates_when_fast_converged = counts_at_fast_convergence[id(client)]
                report.clients.append(entry)
        group.cancel_scope.cancel()
    report.errors = [repr(error) for error in errors]
    report.peak_rss_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return report


async def run_baseline(config: LoadConfig, directory: Path, turns: int) -> tuple[float, float]:
    """The same turn (same faux model, same barrier tool, same storage) run ``turns`` times in
    one conversation, one after the other, with no owned conversations and no clients.

    Returns (turns per second, tool calls per second): the floor the load run is compared with.
    """
    barriers = _Barriers(config.tools_per_turn, config.timeout)
    step = _model_step(config.tools_per_turn, config.payload_bytes)
    faux = FauxProvider([step] * (2 * turns))
    options = HarnessOptions(services={"models": Models([faux])})
    harness = await Harness.open(
        JsonlStorage(directory / "baseline", fsync=False), options, BACKGROUND
    )
    async with harness:
        harness.register_tool(_declare(barriers))
        root = await harness.root(BACKGROUND)
        await root.set_config({"model": MODEL, "selectedTools": [TOOL_NAME]}, BACKGROUND)
        await harness.resume(BACKGROUND)
        started = time.perf_counter()
        for job in range(turns):
            sent = await root.send(f"job {job}", BACKGROUND)
            with anyio.fail_after(config.timeout):
                record = await sent.wait(BACKGROUND)
            if record.status != "done":
                raise RuntimeError(f"baseline turn {job} ended {record.status}")
        elapsed = time.perf_counter() - started
    return turns / elapsed, barriers.calls / elapsed
