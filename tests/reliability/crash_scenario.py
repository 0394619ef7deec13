"""Crash injection against the real session worker (issue 9 item 1), shared by
``test_crash_injection.py`` (CI-sized) and ``benchmarks/crash_injection.py`` (long runs).

One *trial* is one session served by ``python -m coding_agent.worker.main --no-fsync`` and
watched by one client (a facet host over :func:`chord.wire.connect_service_source`, the way the
TUI attaches). The worker is killed with ``SIGKILL`` ``kills`` times at random points and started
again on the same session each time; the client stays and reconnects on its own.

The work
    The faux model follows a ``--faux-script`` of rounds. Each prompt ``round <r>`` is a turn of
    five answers: ``read`` + two ``bash`` calls + ``ls`` at once; ``question`` + ``bash`` +
    a background ``bash`` (a ``pi.job``); ``code_search`` + ``bash`` + ``job_output`` (the job
    list); an ``agent`` call (a subagent, facets-subagents: a durable owned conversation with
    its own script, keyed by its prompt ``subtask r<r>: …``, which runs ``bash`` + ``read`` and
    reports ``Subtask <r> report.``); then the text ``Round <r> done.``. ``bash`` and ``question``
    wait for the client's dialogs (``pi.approval-dialog``, ``pi.question-dialog``); the client
    allows most calls and denies some (chosen per call id from the seed, so a call asked again
    after a crash gets the same answer). Each ``bash`` call appends its own token to an effects
    file *outside* the session (``echo <token> >> effects.log``): the file counts real effects.
    The background call's job sleeps briefly, then appends its token (``r<r>-job``) and exits;
    it runs under the worker's process host (``<session>/processes``), so a kill of the worker
    leaves its process running, and it ends with a ``pi.notice`` (``… exited with code 0.``).
    At the start the client asks ``pi.indexer`` to index the project (a background
    ``repo.indexer`` task that checkpoints batch by batch). Prompts carry a ``requestId``, so a
    send retried after a crash is not doubled.

The kills
    Rounds are sent until the kills are used (at least ``rounds``); each round gets one or two
    kills, and each kill point is drawn from the trial's seed, counted from the prompt or the
    previous restart: either a delay (uniform in ``[0, max_delay)``) or "after N more view
    updates" (N uniform in ``[1, max_updates]``, bounded by ``max_delay`` when the session is
    idle). After the kill the worker is started again; the time from the kill until the
    client's root view is hydrated again is the restart time.

The invariants (a :class:`Violation` per breach, by kind)
    ``lost-commit``: every entry the client ever saw in a view (they are committed before they
    are published) is in the view rehydrated from storage after each restart, unchanged.
    ``effect-repeated``: no token appears twice in the effects file; ``denied-effect``: a denied
    call's token never appears; ``effect-missing``: a ``bash`` result that reports exit code 0
    has its token exactly once.
    ``dialog-repeated``: once the client answered a dialog and then saw proof that the answer was
    recorded (a ``tool.started`` event for an approval, the call's result for either kind), no
    dialog for that call appears again.
    ``transcript``: after every restart, each tool result answers an earlier call of the same
    name exactly once; at the end every call of a finished answer has its result (in the root
    and in every subagent's conversation).
    ``lost-commit`` covers the subagents' conversations too: at the end, every entry the client
    ever saw in one is in its view rehydrated after the last restart, unchanged.
    ``subagent``: every round's ``agent`` call made exactly one subagent conversation, and its
    result (the only thing the parent sees) is that subagent's report, once, not an error.
    ``task-outcome``: after the last restart the session runs to idle: every round's turn ended
    with ``Round <r> done.`` exactly once, no task is live, the indexer wrote its
    ``Indexed <n> files`` notice with the project's file count.
    ``job-effect``: at idle, the token of every job that exists (its ``bash`` result named it,
    the client saw it in ``view.tasks``, or it wrote its notice) is in the effects file exactly
    once, one call never made two jobs, and a background call without a job (denied, or
    interrupted before the commit that creates the job) has no effect.
    ``job-outcome``: every job that exists ended with exactly one notice, reporting exit code 0
    (so it was carried on, not lost, across every kill), and every ``job_output`` succeeded.
    ``reattach``: after every restart the client's root view hydrates again (bounded wait).
    ``start`` / ``restart``: the worker starts on the fresh session, and again after every kill
    (it prints ``READY``; else its exit code and the end of its log are reported).

Failover (``CrashConfig(failover=True, storage=URL)``, issue 23 deliver 4)
    The same trial against two ``coding-agent serve`` on one PostgreSQL database
    (:class:`crash_servers.ServerPair`): the client dials both (the last one that answered
    first), a kill is the SIGKILL of the server hosting the session and of its worker, the other
    server's worker takes the lease and resumes, and the killed server is started again. Every
    invariant above is checked the same way; a failover whose worker does not start is a
    ``restart`` breach.

:func:`run_trial` returns a :class:`TrialReport` and asserts nothing: the test asserts and the
benchmark prints. Nothing sleeps to synchronise; the only sleep is the random kill delay.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from crash_servers import ServerPair, WorkerFailed  # pyright: ignore[reportMissingImports]

from chord import FrameConnection
from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.json import equal_json
from chord.services import define_service
from chord.state import Delivery
from chord.transport import connect_unix
from chord.wire import Backoff, connect_service_source
from coding_agent.session_files.folders import LaunchSettings, Session, create_session
from pico3 import ConversationService

__all__ = [
    "VIOLATION_KINDS",
    "CrashConfig",
    "TrialReport",
    "Violation",
    "WorkerFailed",
    "job_problems",
    "run_trial",
    "transcript_problems",
]

VIOLATION_KINDS = (
    "lost-commit",
    "effect-repeated",
    "denied-effect",
    "effect-missing",
    "dialog-repeated",
    "transcript",
    "task-outcome",
    "subagent",
    "job-effect",
    "job-outcome",
    "reattach",
    "start",
    "restart",
)

_APPROVALS = define_service("pi.approval-dialog")
_QUESTIONS = define_service("pi.question-dialog")
_INDEXER = define_service("pi.indexer")
_PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")
_TOKEN = re.compile(r"echo (\S+) >>")
_JOB_DELAY = 0.1
"""Seconds a background job sleeps before its effect (so kills land while it runs)."""
_INDEXED = re.compile(r"Indexed (\d+) files")


@dataclass(frozen=True)
class CrashConfig:
    """The size of one trial."""

    kills: int = 10
    """SIGKILLs of the worker in the trial (each followed by a restart)."""
    rounds: int = 2
    """Prompts sent at least; more are sent while kills remain (up to ``max_rounds``)."""
    max_rounds: int = 40
    """Rounds in the faux script (the most prompts a trial sends)."""
    max_delay: float = 0.25
    """Upper bound of a kill delay, in seconds."""
    max_updates: int = 40
    """Upper bound of a kill point counted in view updates."""
    deny_ratio: float = 0.2
    """Share of approvals the client denies."""
    files: int = 150
    """Files in the project (what the indexer indexes)."""
    timeout: float = 120.0
    """Bound of every wait for progress (a worker start, a round, the final idle)."""
    subagent_share: float = 0.2
    """Share of kill points placed inside a running subagent (after a few of its view
    updates); the others are a delay or a count of the root's view updates."""
    fsync: bool = False
    """Run the worker with fsync on (the durable ``O_DIRECT`` log of :mod:`pico3.storage._log`)
    instead of ``--no-fsync``; process death must lose nothing acknowledged either way."""
    storage: str | None = None
    """A PostgreSQL URL: the worker keeps the session there (``--storage``) instead of in the
    folder's JSONL files; a restarted worker waits out the killed one's lease."""
    failover: bool = False
    """With ``storage``: two ``coding-agent serve`` on that database host the session
    (:class:`crash_servers.ServerPair`); a kill is the SIGKILL of the server hosting it and of
    its worker, the client fails over to the other server, and the killed one is started again.
    The servers' workers run with their defaults (``fsync`` is the database's)."""
    lease: float = 2.0
    """With ``failover``: the servers' ``--lease`` (the PostgreSQL lease's expiry, seconds)."""
    separate_state: bool = False
    """With ``failover``: every server but the first has a state folder of its own (another
    machine), so it adopts the session from the database's session directory."""
    servers: int = 2
    """With ``failover``: how many servers share the database (with more than two, a kill
    right after a failover need not wait for the killed server to be up again)."""
    cutoff_share: float = 0.0
    """With ``failover`` and ``separate_state`` (a stopped worker on the same machine keeps its
    folder's lock, so a server of that folder would wait for it): share of kills that SIGKILL
    the host server but only stop its workers, which are let go on once another server's
    worker took the lease. Fenced, they must exit without a trace in the session."""
    takeover_share: float = 0.25
    """With ``failover``: share of kills followed, after a delay uniform in ``[0, 1.5 x
    lease)``, by a second SIGKILL: of the server taking the session over (its worker
    starting, waiting for the lease, replaying) or, once it took over, of that new host."""


@dataclass(frozen=True)
class Violation:
    """One breached invariant: its kind (one of :data:`VIOLATION_KINDS`) and what happened."""

    kind: str
    detail: str


@dataclass
class TrialReport:
    """What one trial did and found."""

    seed: int
    kills: int = 0
    resumes: int = 0
    """Restarts that found work in flight (a live turn or task) and carried it on."""
    rounds: int = 0
    restart_seconds: list[float] = field(default_factory=list[float])
    kill_points: list[str] = field(default_factory=list[str])
    violations: list[Violation] = field(default_factory=list[Violation])
    effects: int = 0
    """Lines in the effects file (bash calls that really ran)."""
    dialogs: int = 0
    """Dialogs the client answered."""
    jobs: int = 0
    """Background jobs that existed (each must have run once and ended with exit code 0)."""
    subagents: int = 0
    """Subagent conversations that existed (each round's one, each reported once)."""
    subagent_kills: int = 0
    """Kills that landed while a subagent ran (the restarted worker had to resume it)."""
    failovers: int = 0
    """With ``failover``: kills after which the other server took the session over."""
    takeover_seconds: list[float] = field(default_factory=list[float])
    """With ``failover``: from each SIGKILL to the other server's worker started (lease taken)."""
    delayed_kills: int = 0
    """With ``failover``: kills that waited for the server killed before to listen again."""
    takeover_kills: int = 0
    """With ``failover``: second kills of the server taking the session over."""
    cutoffs: int = 0
    """With ``failover``: kills whose workers were only cut off (stopped, then let go on)."""
    twice: list[int] = field(default_factory=list[int])
    """With ``failover``: the kills (indices of ``restart_seconds``) followed by a second kill
    in their takeover (their failover time counts both)."""


# -- the transcript -------------------------------------------------------------------------------
def transcript_problems(entries: list[dict[str, Any]], *, complete: bool) -> list[str]:
    """What is wrong with ``entries`` as a context: results that answer no earlier call, answer
    one twice or under another name, calls made twice; with ``complete``, also calls of finished
    answers (``stopReason`` ``toolUse``) left without a result."""
    problems: list[str] = []
    calls: dict[str, str] = {}
    finished: list[str] = []
    answered: set[str] = set()
    for entry in entries:
        for message in entry.get("model") or []:
            if entry["kind"] == "pi.assistant":
                for block in message.get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "toolCall":
                        call_id = str(block.get("id"))
                        if call_id in calls:
                            problems.append(f"entry {entry['id']}: call {call_id} made twice")
                        calls[call_id] = str(block.get("name"))
                        if message.get("stopReason") == "toolUse":
                            finished.append(call_id)
            elif entry["kind"] == "pi.tool_result":
                call_id = str(message.get("toolCallId"))
                if call_id not in calls:
                    problems.append(f"entry {entry['id']}: result for unknown call {call_id}")
                elif call_id in answered:
                    problems.append(f"entry {entry['id']}: second result for call {call_id}")
                elif calls[call_id] != message.get("toolName"):
                    problems.append(
                        f"entry {entry['id']}: result named {message.get('toolName')!r} for "
                        f"a {calls[call_id]!r} call"
                    )
                answered.add(call_id)
    if complete:
        problems.extend(f"call {c} has no result" for c in finished if c not in answered)
    return problems


def _text(entry: dict[str, Any]) -> str:
    parts: list[str] = []
    for message in entry.get("model") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        else:
            parts.extend(
                str(block.get("text", ""))
                for block in content or []
                if isinstance(block, dict) and block.get("type") == "text"
            )
    return "".join(parts)


# -- the script -----------------------------------------------------------------------------------
def _bash(token: str, effects: Path) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": f"echo {token} >> {effects}"}}


def _job(token: str, effects: Path) -> dict[str, Any]:
    command = f"sleep {_JOB_DELAY}; echo {token} >> {effects}"
    return {"name": "bash", "arguments": {"command": command, "background": True}}


def _script(rounds: int, effects: Path) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for r in range(rounds):
        steps += [
            {
                "text": f"Round {r}: looking around.",
                "toolCalls": [
                    {"name": "read", "arguments": {"path": "README.md"}},
                    _bash(f"r{r}-a", effects),
                    _bash(f"r{r}-b", effects),
                    {"name": "ls", "arguments": {"path": "."}},
                ],
            },
            {
                "text": "A question, and a command.",
                "toolCalls": [
                    {
                        "name": "question",
                        "arguments": {"question": f"Go on with round {r}?", "options": ["yes"]},
                    },
                    _bash(f"r{r}-c", effects),
                    _job(f"r{r}-job", effects),
                ],
            },
            {
                "thinking": "Search the index.",
                "toolCalls": [
                    {"name": "code_search", "arguments": {"query": "answer"}},
                    _bash(f"r{r}-d", effects),
                    {"name": "job_output", "arguments": {}},
                ],
            },
            {
                "text": "A subagent checks the rest.",
                "toolCalls": [
                    {
                        "name": "agent",
                        "arguments": {"description": f"subtask {r}", "prompt": _subtask(r)},
                    }
                ],
            },
            {"text": f"Round {r} done."},
        ]
    return steps


def _subtask(r: int) -> str:
    return f"subtask r{r}: run the check and report"


def _subagent_scripts(rounds: int, effects: Path) -> list[dict[str, Any]]:
    """Each round's subagent: its own conversation, scripted by its prompt."""
    return [
        {
            "when": f"subtask r{r}:",
            "steps": [
                {
                    "text": f"Subtask {r}: checking.",
                    "toolCalls": [
                        _bash(f"r{r}-s", effects),
                        {"name": "read", "arguments": {"path": "README.md"}},
                    ],
                },
                {"text": f"Subtask {r} report."},
            ],
        }
        for r in range(rounds)
    ]


def _make_project(folder: Path, files: int) -> int:
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("# Crash project\n\nThe answer is 42.\n")
    for n in range(files):
        (folder / f"module_{n:04d}.py").write_text(f"def f{n}():\n    return {n}  # answer\n")
    return files + 1


# -- the worker process ---------------------------------------------------------------------------
class _Worker:
    """The worker process of the trial, started and killed again and again."""

    def __init__(
        self,
        session: Session,
        env: dict[str, str],
        script: Path,
        log: Path,
        fsync: bool = False,
        storage: str | None = None,
    ) -> None:
        self._fsync = fsync
        self._storage = storage
        self._session = session
        self._env = env
        self._script = script
        self._log = log
        self.process: anyio.abc.Process | None = None

    async def start(self, bound: float) -> None:
        command = [
            sys.executable,
            "-m",
            "coding_agent.worker.main",
            str(self._session.path),
            "--faux-script",
            str(self._script),
            *(() if self._fsync else ("--no-fsync",)),
            *(() if self._storage is None else ("--storage", self._storage)),
            "--exit-on-stdin-eof",
        ]
        with self._log.open("ab") as log:
            self.process = await anyio.open_process(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=self._env,
                cwd=str(self._session.cwd),
            )
        assert self.process.stdout is not None
        lines = BufferedByteReceiveStream(self.process.stdout)
        try:
            with anyio.fail_after(bound):
                line = (await lines.receive_until(b"\n", 4096)).decode()
        except (anyio.IncompleteRead, anyio.EndOfStream):
            line = ""
        if not line.startswith("READY "):
            code: int | None = None
            if not line:  # it exited: wait for its exit code
                with anyio.CancelScope(shield=True):
                    code = await self.process.wait()
            tail = self._log.read_text(errors="replace")[-2000:]
            raise WorkerFailed(f"the worker did not start (exit code {code}): {line!r}\n{tail}")

    def connect(self) -> Callable[[], Awaitable[FrameConnection]]:
        """The client's connect function: the worker's own socket."""
        return lambda: connect_unix(self._session.socket_path)

    async def __aenter__(self) -> _Worker:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def kill(self, bound: float) -> float:
        """SIGKILL the worker and wait for its end; the ``perf_counter`` time of the signal."""
        process = self.process
        assert process is not None
        killed = time.perf_counter()
        process.send_signal(signal.SIGKILL)
        with anyio.fail_after(bound):
            await process.wait()
        await process.aclose()
        self.process = None
        return killed

    async def aclose(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGKILL)
                await process.wait()
            await process.aclose()


# -- the client -----------------------------------------------------------------------------------
@dataclass(eq=False)
class _Client:
    """The TUI minus the screen: follows the root view, answers dialogs, checks as it goes."""

    seed: int
    deny_ratio: float
    report: TrialReport
    view: dict[str, Any] | None = None
    root: Any = None
    root_live: bool = False
    hydrations: int = 0
    updates: int = 0
    indexer: Any = None
    seen: dict[int, dict[str, Any]] = field(default_factory=dict[int, dict[str, Any]])
    recorded: set[str] = field(default_factory=set[str])
    """Call ids whose dialog answer (or result) the client saw recorded in a view."""
    jobs: set[int] = field(default_factory=set[int])
    """Ids of the ``pi.job`` tasks the client saw in ``view.tasks``."""
    approved: set[str] = field(default_factory=set[str])
    """Call ids whose approval dialog the client answered."""
    children: dict[int, dict[str, Any]] = field(default_factory=dict[int, dict[str, Any]])
    """The latest view of each subagent conversation (``conversation.owner`` set)."""
    child_seen: dict[int, dict[int, dict[str, Any]]] = field(
        default_factory=dict[int, dict[int, dict[str, Any]]]
    )
    """Every entry the client saw in each subagent conversation."""
    child_hydrations: dict[int, int] = field(default_factory=dict[int, int])
    child_updates: int = 0
    """View updates of subagent conversations (kill points count them)."""
    denied: set[str] = field(default_factory=set[str])
    _changed: anyio.Event = field(default_factory=anyio.Event)

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def wait_for(self, predicate: Callable[[], bool], bound: float) -> None:
        with anyio.fail_after(bound):
            while not predicate():
                await self._changed.wait()

    def _violation(self, kind: str, detail: str) -> None:
        self.report.violations.append(Violation(kind, detail))

    def _take_child(self, value: dict[str, Any], delivery: Delivery) -> None:
        cid = value["conversation"]["id"]
        self.children[cid] = value
        if delivery.kind == "hydrate":
            self.child_hydrations[cid] = self.child_hydrations.get(cid, 0) + 1
        else:
            self.child_updates += 1
            self._record_events(value)
        seen = self.child_seen.setdefault(cid, {})
        for entry in value["entries"]:
            seen.setdefault(entry["id"], entry)
            if entry["kind"] == "pi.tool_result":
                for message in entry.get("model") or []:
                    self.recorded.add(str(message.get("toolCallId")))

    def _record_events(self, value: dict[str, Any]) -> None:
        for event in value["commit"]["events"]:
            # ``tool.started`` follows the approval memo's commit (the hook runs before
            # it); a question's call starts before it asks, so only its result counts.
            call_id = event.get("callId")
            if event.get("type") == "tool.started" and call_id in self.approved:
                self.recorded.add(str(event["callId"]))

    def _take(self, value: dict[str, Any], delivery: Delivery) -> None:
        self.view = value
        if delivery.kind == "hydrate":
            self.hydrations += 1
        else:
            self.updates += 1
            self._record_events(value)
        for key, task in value["tasks"].items():
            if task.get("kind") == "pi.job":
                self.jobs.add(int(key))
        for entry in value["entries"]:
            self.seen.setdefault(entry["id"], entry)
            if entry["kind"] == "pi.tool_result":
                for message in entry.get("model") or []:
                    self.recorded.add(str(message.get("toolCallId")))

    def decision(self, call_id: str) -> str:
        chooser = random.Random(f"{self.seed}:{call_id}")
        return "deny" if chooser.random() < self.deny_ratio else "allow"

    def facet(self) -> Any:
        def setup(env: FacetEnvironment) -> None:
            async def on_conversation(instance: Any, ctx: Context) -> None:
                mine = False

                def deliver(value: Any, _ctx: Context, delivery: Delivery) -> None:
                    nonlocal mine
                    conversation = value["conversation"]
                    if (
                        delivery.kind == "hydrate"
                        and "parent" not in conversation
                        and "owner" not in conversation
                    ):
                        mine = True
                        self.root, self.root_live = instance, True
                    if mine:
                        self._take(value, delivery)
                        self._notify()
                    elif "owner" in conversation:  # a subagent's owned conversation
                        self._take_child(value, delivery)
                        self._notify()

                stop = instance.view.subscribe(deliver)
                try:
                    await ctx.wait_cancelled()
                finally:
                    stop()
                    if mine:
                        self.root_live = False
                        self._notify()

            def dialogs(kind: str) -> Any:
                async def on_dialog(facade: Any, ctx: Context) -> None:
                    request = dict(facade.request.value)
                    call_id = str(request["callId"])
                    if call_id in self.recorded:
                        self._violation(
                            "dialog-repeated",
                            f"{kind} dialog for call {call_id} asked again after its answer "
                            "was recorded",
                        )
                    try:
                        if kind == "approval":
                            decision = self.decision(call_id)
                            if decision == "deny":
                                self.denied.add(call_id)
                            await facade.decide({"decision": decision, "by": "crash"}, BACKGROUND)
                            self.approved.add(call_id)
                        else:
                            answer = {"outcome": "answered", "answer": "yes", "by": "crash"}
                            await facade.submit(answer, BACKGROUND)
                    except Exception:  # the worker died under the call: it will ask again
                        return
                    self.report.dialogs += 1

                return on_dialog

            self.indexer = env.use(_INDEXER)
            env.observe(ConversationService, on_conversation)
            env.observe(_APPROVALS, dialogs("approval"))
            env.observe(_QUESTIONS, dialogs("question"))

        return define_facet("reliability/crash-client", setup)


# -- the trial ------------------------------------------------------------------------------------
def _entries(client: _Client) -> list[dict[str, Any]]:
    return client.view["entries"] if client.view is not None else []


def _subagent_live(client: _Client) -> bool:
    view = client.view
    return view is not None and any(
        task.get("kind") == "subagents.run" for task in view["tasks"].values()
    )


def _round_done(client: _Client, r: int) -> bool:
    view = client.view
    if view is None or not client.root_live or "turn" in view or view["inbox"]:
        return False
    return any(
        e["kind"] == "pi.assistant" and _text(e) == f"Round {r} done." for e in view["entries"]
    )


async def _call(client: _Client, bound: float, call: Callable[[], Any]) -> Any:
    """Run a client call, retrying across worker restarts until it returns (bounded)."""
    with anyio.fail_after(bound):
        while True:
            await client.wait_for(lambda: client.root_live, bound)
            root = client.root
            try:
                return await call()
            except Exception:
                # The worker died under the call (every call here is idempotent, so it is
                # retried once the client is attached again); any other error is raised.
                try:
                    await client.wait_for(
                        lambda root=root: client.root is not root or not client.root_live, 10
                    )
                except TimeoutError:
                    raise RuntimeError("a client call failed with the worker alive") from None


def _check_restart(client: _Client, before: dict[int, dict[str, Any]]) -> None:
    entries = {e["id"]: e for e in _entries(client)}
    for entry_id, entry in before.items():
        now = entries.get(entry_id)
        if now is None:
            client._violation("lost-commit", f"entry {entry_id} ({entry['kind']}) is gone")
        elif not equal_json(now, entry):
            client._violation("lost-commit", f"entry {entry_id} changed across the restart")
    for problem in transcript_problems(_entries(client), complete=False):
        client._violation("transcript", problem)


_SUBTASK = re.compile(r"subtask r(\d+):")


def _check_subagents(client: _Client, rounds: int, entries: list[dict[str, Any]]) -> None:
    """``subagent``, and the subagents' ``lost-commit`` and ``transcript`` breaches."""
    client.report.subagents = len(client.children)
    made: Counter[int] = Counter()
    for view in client.children.values():
        first = next((e for e in view["entries"] if e["kind"] == "pi.user"), None)
        match = _SUBTASK.match(_text(first)) if first is not None else None
        if match is not None:
            made[int(match.group(1))] += 1
    reports: Counter[str] = Counter()
    for entry in entries:
        message = (entry.get("model") or [{}])[0]
        if entry["kind"] != "pi.tool_result" or message.get("toolName") != "agent":
            continue
        if message.get("isError"):
            client._violation("subagent", f"agent call failed: {_text(entry)[:200]}")
        reports[_text(entry)] += 1
    for r in range(rounds):
        if made[r] != 1:
            client._violation("subagent", f"round {r}'s agent call made {made[r]} subagents")
        if reports[f"Subtask {r} report."] != 1:
            client._violation(
                "subagent",
                f"round {r}'s report reached the parent {reports[f'Subtask {r} report.']}x",
            )
    for cid, seen in client.child_seen.items():
        now = {e["id"]: e for e in client.children[cid]["entries"]}
        for entry_id, entry in seen.items():
            if entry_id not in now:
                client._violation("lost-commit", f"subagent {cid}: entry {entry_id} is gone")
            elif not equal_json(now[entry_id], entry):
                client._violation("lost-commit", f"subagent {cid}: entry {entry_id} changed")
        for problem in transcript_problems(client.children[cid]["entries"], complete=True):
            client._violation("transcript", f"subagent {cid}: {problem}")


def _check_end(client: _Client, rounds: int, effects: Path, project_files: int) -> None:
    view = client.view
    assert view is not None
    _check_subagents(client, rounds, view["entries"])
    children = [e for child in client.children.values() for e in child["entries"]]
    entries = view["entries"] + children  # the effects of subagents' bash calls count too
    for problem in transcript_problems(view["entries"], complete=True):
        client._violation("transcript", problem)
    for r in range(rounds):
        count = sum(
            1 for e in entries if e["kind"] == "pi.assistant" and _text(e) == f"Round {r} done."
        )
        if count != 1:
            client._violation("task-outcome", f"round {r} ended {count} times")
    if view["tasks"]:
        client._violation("task-outcome", f"tasks still live at idle: {sorted(view['tasks'])}")
    for cid, child in client.children.items():
        if child["tasks"] or "turn" in child:
            client._violation("task-outcome", f"subagent {cid} still busy at idle")
    indexed = [int(m.group(1)) for e in entries if (m := _INDEXED.search(_text(e)))]
    if project_files not in indexed:
        client._violation(
            "task-outcome", f"no 'Indexed {project_files} files' notice (found {indexed})"
        )
    lines = effects.read_text().split() if effects.exists() else []
    counts = Counter(lines)
    client.report.effects = len(lines)
    for token, count in counts.items():
        if count > 1:
            client._violation("effect-repeated", f"bash token {token} ran {count} times")
    calls: dict[str, str] = {}
    for entry in entries:
        for message in entry.get("model") or []:
            for block in message.get("content") or [] if entry["kind"] == "pi.assistant" else []:
                if isinstance(block, dict) and block.get("name") == "bash":
                    found = _TOKEN.search(str(block.get("arguments", {}).get("command", "")))
                    if found:
                        calls[str(block.get("id"))] = found.group(1)
    for call_id in client.denied:
        token = calls.get(call_id)
        if token is not None and counts[token]:
            client._violation("denied-effect", f"denied call {call_id} ran (token {token})")
    for entry in entries:
        details = (entry.get("data") or {}).get("details") or {}
        if entry["kind"] != "pi.tool_result" or details.get("exit_code") != 0:
            continue
        call_id = str(entry["model"][0].get("toolCallId"))
        token = calls.get(call_id)
        if token is not None and counts[token] != 1:
            client._violation(
                "effect-missing", f"call {call_id} reported success, token ran {counts[token]}x"
            )
    problems, client.report.jobs = job_problems(entries, counts, client.jobs)
    client.report.violations.extend(problems)


def job_problems(
    entries: list[dict[str, Any]], effects: Counter[str], seen: set[int]
) -> tuple[list[Violation], int]:
    """``job-effect`` and ``job-outcome`` breaches of a session at idle (see the module
    docstring), and how many jobs existed. ``effects`` counts the tokens of the effects file;
    ``seen`` holds the ids of the ``pi.job`` tasks a client saw in ``view.tasks``."""
    found: list[Violation] = []
    calls: dict[str, str] = {}  # call id -> token, for every bash call
    background: set[str] = set()  # the tokens of background calls
    for entry in entries:
        for message in entry.get("model") or [] if entry["kind"] == "pi.assistant" else []:
            for block in message.get("content") or []:
                if not isinstance(block, dict) or block.get("name") != "bash":
                    continue
                arguments = block.get("arguments") or {}
                match = _TOKEN.search(str(arguments.get("command", "")))
                if match is not None:
                    calls[str(block.get("id"))] = match.group(1)
                    if arguments.get("background") is True:
                        background.add(match.group(1))
    tokens: dict[int, str] = {}  # job id -> its call's token
    notices: dict[int, list[dict[str, Any]]] = {}
    for entry in entries:
        data = entry.get("data") or {}
        if entry["kind"] == "pi.tool_result":
            message = entry["model"][0]
            details = data.get("details") or {}
            if message.get("toolName") == "job_output" and message.get("isError"):
                found.append(Violation("job-outcome", f"job_output failed: {_text(entry)[:200]}"))
            if details.get("background") is True and type(details.get("job_id")) is int:
                token = calls.get(str(message.get("toolCallId")))
                if token is not None:
                    tokens[details["job_id"]] = token
        elif entry["kind"] == "pi.notice" and type(data.get("job")) is int:
            notices.setdefault(data["job"], []).append(entry)
            match = _TOKEN.search(_text(entry))
            if match is not None:
                tokens.setdefault(data["job"], match.group(1))
    known = set(tokens) | set(notices) | seen
    for job in sorted(known):
        ended = notices.get(job, [])
        if len(ended) != 1:
            found.append(Violation("job-outcome", f"job {job} wrote {len(ended)} end notices"))
        elif (ended[0].get("data") or {}).get("exitCode") != 0:
            found.append(Violation("job-outcome", f"job {job}: {_text(ended[0])[:200]}"))
        token = tokens.get(job)
        if token is None:
            found.append(Violation("job-outcome", f"job {job}: nothing names its command"))
        elif effects[token] != 1:
            found.append(
                Violation("job-effect", f"job {job} (token {token}) ran {effects[token]}x")
            )
    by_token = Counter(tokens.values())
    for token in sorted(background):
        if by_token[token] > 1:
            found.append(
                Violation("job-effect", f"the call of {token} made {by_token[token]} jobs")
            )
        elif by_token[token] == 0 and effects[token]:
            found.append(
                Violation("job-effect", f"token {token} ran {effects[token]}x with no job")
            )
    return found, len(known)


async def run_trial(seed: int, config: CrashConfig, workdir: Path) -> TrialReport:
    """Run one trial in ``workdir`` (an empty folder) and report what it found."""
    rng = random.Random(seed)
    report = TrialReport(seed=seed)
    effects = workdir / "effects.log"
    project_files = _make_project(workdir / "project", config.files)
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_KEYS}
    env["XDG_STATE_HOME"] = str(workdir / "state")
    script = workdir / "script.json"
    settings = LaunchSettings(faux_script=str(script)) if config.failover else None
    session = create_session(workdir / "project", settings=settings, env=env)
    script.write_text(
        json.dumps(
            {
                "steps": _script(config.max_rounds, effects),
                "conversations": _subagent_scripts(config.max_rounds, effects),
            }
        )
    )
    worker: _Worker | ServerPair
    if config.failover:
        if config.storage is None:
            raise ValueError("CrashConfig(failover=True) needs storage (a PostgreSQL URL)")
        if config.cutoff_share and not config.separate_state:
            raise ValueError("CrashConfig(cutoff_share=...) needs separate_state=True")
        worker = ServerPair(
            session, env, session.cwd, config.storage, config.lease, workdir / "servers.log",
            separate=workdir / "state-of" if config.separate_state else None,
            servers=config.servers,
        )  # fmt: skip
    else:
        worker = _Worker(session, env, script, workdir / "worker.log", config.fsync, config.storage)
    client = _Client(seed, config.deny_ratio, report)
    timeout = config.timeout
    child_hydrations: dict[int, int] = {}  # each subagent view's hydrations at the last kill

    async def drive_round(r: int) -> None:
        prompt = {"content": f"round {r}", "requestId": f"round-{r}"}
        await _call(client, timeout, lambda: client.root.send(prompt, BACKGROUND))
        await client.wait_for(lambda: _round_done(client, r), timeout)

    async def kill_once() -> None:
        draw = rng.random()
        if draw < config.subagent_share:
            # once this round's subagent runs (or the round is over), after a few of its updates
            more = rng.randint(1, 10)
            point = f"in a subagent, after {more} of its view updates"
            r = report.rounds
            await client.wait_for(lambda: _subagent_live(client) or _round_done(client, r), timeout)
            target = client.child_updates + more
            with anyio.move_on_after(config.max_delay):
                await client.wait_for(lambda: client.child_updates >= target, timeout)
        elif draw < config.subagent_share + (1 - config.subagent_share) / 2:
            delay = rng.uniform(0, config.max_delay)
            point = f"after {delay:.3f} s"
            await anyio.sleep(delay)
        else:
            more = rng.randint(1, config.max_updates)
            target = client.updates + more
            point = f"after {more} view updates"
            with anyio.move_on_after(config.max_delay):
                await client.wait_for(lambda: client.updates >= target, timeout)
        report.kill_points.append(f"round {report.rounds}, {point} (update {client.updates})")
        if _subagent_live(client):
            report.subagent_kills += 1
        hydrations = client.hydrations
        nonlocal child_hydrations
        child_hydrations = dict(client.child_hydrations)
        if isinstance(worker, ServerPair) and config.cutoff_share:
            worker.cut_off_next = rng.random() < config.cutoff_share
            if worker.cut_off_next:
                report.kill_points[-1] += " (its worker cut off: stopped, let go on later)"
        try:
            started = await worker.kill(timeout)
            if isinstance(worker, ServerPair) and rng.random() < config.takeover_share:
                delay = rng.uniform(0, 1.5 * config.lease)
                report.kill_points[-1] += f", then {await worker.kill_takeover(delay, timeout)}"
                report.twice.append(len(report.restart_seconds))
        except WorkerFailed as error:
            client._violation("restart", f"at kill {len(report.kill_points)}: {error}")
            raise
        try:
            await client.wait_for(lambda: not client.root_live, timeout)
        except TimeoutError:
            client._violation("reattach", "the client never saw the worker go")
            raise
        before = dict(client.seen)
        try:
            await worker.start(timeout)
        except WorkerFailed as error:
            client._violation("restart", f"after kill {len(report.kill_points)}: {error}")
            raise
        source.retry_now()  # as the TUI's supervisor does once the new worker is ready
        if isinstance(worker, ServerPair):
            report.failovers = worker.failovers
            report.takeover_seconds = list(worker.takeover_seconds)
            report.delayed_kills = worker.delayed_kills
            report.takeover_kills = worker.takeover_kills
            report.cutoffs = worker.cutoffs
        try:
            await client.wait_for(
                lambda: client.root_live and client.hydrations > hydrations, timeout
            )
        except TimeoutError:
            client._violation("reattach", "the client's view did not rehydrate")
            raise
        report.restart_seconds.append(time.perf_counter() - started)
        report.kills += 1
        view = client.view or {}
        if "turn" in view or view.get("inbox") or view.get("tasks"):
            report.resumes += 1
        _check_restart(client, before)

    async def run_rounds() -> None:
        # Each round's kills (one or two, drawn) land while that round runs: the kill points are
        # measured from the prompt, so they fall in the turn, its tool calls, its dialogs, the
        # indexer (round 0) or, when drawn late, the idle session after it.
        await _call(client, timeout, lambda: client.indexer.start({}, BACKGROUND))
        remaining = config.kills
        while remaining or report.rounds < config.rounds:
            if report.rounds >= config.max_rounds:  # the script is used up: kill at idle
                await kill_once()
                remaining -= 1
                continue
            here = min(remaining, rng.choice((1, 1, 2)))
            remaining -= here
            async with anyio.create_task_group() as work:
                work.start_soon(drive_round, report.rounds)
                for _ in range(here):
                    await kill_once()
            report.rounds += 1

    async with AsyncExitStack() as stack:
        await stack.enter_async_context(worker)
        try:
            await worker.start(timeout)
        except WorkerFailed as error:
            report.violations.append(Violation("start", f"a fresh session: {error}"))
            return report
        group = await stack.enter_async_context(anyio.create_task_group())
        source = connect_service_source(
            worker.connect(),
            task_group=group,
            on_error=lambda _error: None,
            retry=Backoff(initial=0.01, maximum=0.05),
        )
        stack.push_async_callback(source.aclose)
        if isinstance(worker, ServerPair):
            stack.callback(worker.release)  # before the client closes (LIFO)
        await stack.enter_async_context(
            create_facet_host([client.facet()], service_sources=[source])
        )
        await client.wait_for(lambda: client.root_live, timeout)
        stuck = False
        try:
            await run_rounds()
        except* (TimeoutError, WorkerFailed):
            stuck = True
        if stuck:
            if not report.violations:
                report.violations.append(
                    Violation(
                        "task-outcome",
                        f"no progress within {timeout} s after {report.kill_points[-1:]}",
                    )
                )
            return report
        try:
            await client.wait_for(
                lambda: (
                    client.root_live
                    and client.view is not None
                    and "turn" not in client.view
                    and not client.view["inbox"]
                    and not client.view["tasks"]
                ),
                timeout,
            )
        except TimeoutError:
            report.violations.append(Violation("task-outcome", "the session never became idle"))
            return report
        try:  # the subagents' views, rehydrated from storage after the last restart
            await client.wait_for(
                lambda: all(
                    client.child_hydrations.get(cid, 0) > count
                    and not client.children[cid]["tasks"]
                    and "turn" not in client.children[cid]
                    for cid, count in child_hydrations.items()
                ),
                timeout,
            )
        except TimeoutError:
            report.violations.append(
                Violation("reattach", "a subagent's view did not rehydrate after the last restart")
            )
            return report
        _check_end(client, report.rounds, effects, project_files)
    return report
