"""Benchmark: one coding-agent session driven through N short turns over real HTTP (issue 15).

For each provider path (``openai`` Chat Completions and ``anthropic`` Messages) one session is
opened with the worker's own session host (:func:`coding_agent.worker.main.open_session_host`:
the session facets, the installed features, JSONL storage with fsync on) and the real SDK as the
client, pointed at a stub model server on loopback. The server runs in its own process (so its
work does not compete with the agent for the GIL) and answers every request with a short
streamed answer in the protocol of the path it was called on.

Printed per path:

* ms/turn at turns 10, 100, 500, 1,000 and 2,000 (the median of the nine turns ending there:
  the machine may be shared), from ``send`` to the turn's input done, and the CPU time this
  process spent in those turns (the stub server runs in another process);
* the baseline measured in the same run: the *same request bodies* (the agent's first request,
  grown by one user and one assistant message per turn) built with plain ``json.dumps``, posted
  with plain ``httpx`` to the same server and the streamed answer parsed with plain
  ``json.loads`` — no agent, no SDK. ``overhead`` is the agent's ms/turn minus the baseline's;
* the late turns' cost against turn 10 of fresh sessions, *interleaved*: after the long
  session's last turn, ``ROUNDS`` rounds each open a fresh session in a second host and drive
  its turns 1 to 10, each followed at once by one more turn of the long session (turns N+1 to
  N+10 in the first round, and so on). A round's ratio is the median of the long session's
  turns over the median of the fresh one's turns 2 to 10 (the window of the turn-10 figure),
  measured turn by turn side by side, so both sides share the machine's load of that moment;
  the line prints the median of the rounds' ratios and each round's. The plain ratio compares
  figures taken minutes apart, and a shared machine's load can change a lot in between;
* the wall time of all N turns and the session's bytes on disk after it is closed;
* the floor under the wall time, measured in the same turns: the durable writes the process
  made (``os.pwrite`` on the log's ``O_DSYNC`` descriptor, ``os.fsync``, ``os.fdatasync``; the
  calls are timed where they are made, in the storage's and the worker's threads) per turn
  and the milliseconds a turn spent in them;
* the resume: the closed session reopened in the worker's session host (best of three, wall and
  CPU), next to the same for a 1-turn session, and the Python memory the reopened host holds
  per stored entry (tracemalloc).

Targets (issue 15): the turn-2,000 cost ≤ 1.2 × the turn-10 cost and ≤ 40 ms over the model;
2,000 turns in ≤ 60 s; session bytes for 2,000 short turns ≤ 1.5 MB; resume of a 2,000-turn
session ≤ 0.1 s more than a 1-turn one. Issue 45 tightens the per-turn growth to ≤ 1.1 × (the
interleaved line, which compares turns measured side by side).

Run: ``uv run python benchmarks/long_session.py [--turns N] [--provider openai|anthropic|both]``
(default 2,000 turns, both paths; ``--turns 100`` is a quick run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import anyio
from _stub_process import StubProcess, serve_until_stdin_closes

os.environ["CODING_AGENT_WARM_START"] = "0"  # processes start cold unless a line says warm

CHECKPOINTS = (10, 100, 500, 1_000, 2_000)
WINDOW = 9
REFERENCE = 10  # turns of each fresh reference session, interleaved with the long session's
ROUNDS = 12  # fresh reference sessions
ANSWER = ("Done", ": the short", " answer.")
LONG_PROMPT = "Write the long answer."
LONG_ANSWER = tuple(f"{i:07d} long streamed answer text. "[:25] for i in range(4_000))  # 100 KB
MODELS = {"openai": "openai/gpt-4.1", "anthropic": "anthropic/claude-sonnet-4-6"}
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


# -- the stub model server (runs in a child process: ``--serve``) -----------------------------


def _openai_events(prompt_tokens: int, answer: tuple[str, ...]) -> list[bytes]:
    def chunk(choices: list[Any], **extra: Any) -> bytes:
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "gpt-4.1",
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(body)}\n\n".encode()

    out = [chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}}])]
    out += [chunk([{"index": 0, "delta": {"content": piece}}]) for piece in answer]
    out.append(chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 5, "total_tokens": 5}
    out.append(chunk([], usage=usage))
    out.append(b"data: [DONE]\n\n")
    return out


def _anthropic_events(input_tokens: int, answer: tuple[str, ...]) -> list[bytes]:
    def event(kind: str, body: dict[str, Any]) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **body})}\n\n".encode()

    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }
    out = [event("message_start", {"message": message})]
    out.append(
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    )
    for piece in answer:
        delta = {"type": "text_delta", "text": piece}
        out.append(event("content_block_delta", {"index": 0, "delta": delta}))
    out.append(event("content_block_stop", {"index": 0}))
    out.append(
        event(
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
    )
    out.append(event("message_stop", {}))
    return out


def serve() -> None:
    """Serve until stdin closes; print the base URL first. ``GET /first`` returns the body of
    the first model request (the baseline replays it)."""
    first: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body leave at once (no delayed-ACK stall)

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_GET(self) -> None:
            body = first[0] if first else b"{}"
            self._send(200, "application/json", [body])

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(length)
            if not first and self.headers.get("x-baseline") is None:
                first.append(raw)
            tokens = length // 4
            answer = LONG_ANSWER if LONG_PROMPT.encode() in raw else ANSWER
            if self.path.endswith("/chat/completions"):
                events = _openai_events(tokens, answer)
            elif self.path.endswith("/messages"):
                events = _anthropic_events(tokens, answer)
            else:
                self._send(404, "application/json", [b"{}"])
                return
            self._send(200, "text/event-stream", events)

        def _send(self, status: int, kind: str, parts: list[bytes]) -> None:
            body = b"".join(parts)
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    serve_until_stdin_closes(ThreadingHTTPServer(("127.0.0.1", 0), Handler))


# -- the agent ----------------------------------------------------------------------------


def _folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class SyncClock:
    """Counts and times the durable-write calls (``os.pwrite``, ``os.fsync``, ``os.fdatasync``)
    made while entered, from any thread: the fsync floor under a turn's wall time."""

    NAMES = ("pwrite", "fsync", "fdatasync")

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self._lock = threading.Lock()
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> SyncClock:
        for name in self.NAMES:
            self._saved[name] = original = getattr(os, name)
            setattr(os, name, self._timed(original))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, original in self._saved.items():
            setattr(os, name, original)

    def _timed(self, original: Any) -> Any:
        def timed(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args)
            finally:
                took = time.perf_counter() - start
                with self._lock:
                    self.calls += 1
                    self.seconds += took

        return timed


class Round(NamedTuple):
    """One interleaved round: a fresh session's turns 1 to ``REFERENCE`` and the long session's
    turn right after each (seconds and CPU seconds per turn)."""

    fresh: list[float]
    fresh_cpu: list[float]
    late: list[float]
    late_cpu: list[float]


async def agent_run(
    provider: str,
    url: str,
    turns: int,
    tmp: Path,
    prompt: str | None = None,
    syncs: SyncClock | None = None,
) -> tuple[list[float], list[float], int, Any]:
    """(seconds per turn, CPU seconds per turn, session bytes on disk after close, the worker
    config to reopen the session with); every turn sends ``prompt`` when given; ``syncs``
    times the durable writes of the turns (not of the opening and closing)."""
    from chord.context import BACKGROUND
    from coding_agent.session_files.folders import create_session
    from coding_agent.worker.main import WorkerConfig, open_session_host

    project = tmp / "project"
    project.mkdir()
    (project / "README.md").write_text("# A project\n")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENAI_", "ANTHROPIC_"))
    }
    env["XDG_STATE_HOME"] = str(tmp / "state")
    if provider == "openai":
        env.update(OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=f"{url}/v1")
    else:
        env.update(ANTHROPIC_API_KEY="sk-ant-bench", ANTHROPIC_BASE_URL=url)
    session = create_session(project, env=env)
    config = WorkerConfig(session, model=MODELS[provider], env=env)
    times: list[float] = []
    cpu: list[float] = []

    async with open_session_host(config) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)
        with syncs if syncs is not None else contextlib.nullcontext():
            for n in range(1, turns + 1):
                await _turn(root, prompt or f"Turn {n}: answer briefly.", (times, cpu))
    return times, cpu, _folder_bytes(session.path), config


async def _turn(root: Any, text: str, into: tuple[list[float], list[float]]) -> None:
    from chord.context import BACKGROUND

    start, start_cpu = time.perf_counter(), time.process_time()
    handle = await root.send(text, BACKGROUND)
    record = await handle.wait(BACKGROUND)
    into[0].append(time.perf_counter() - start)
    into[1].append(time.process_time() - start_cpu)
    if record.status != "done":
        raise RuntimeError(f"turn {text!r} ended {record.status!r}: {record}")


async def interleaved_run(config: Any, turns: int) -> list[Round]:
    """The closed long session (``turns`` turns) reopened in the worker's session host, its
    next turns interleaved with fresh sessions' first ``REFERENCE`` turns: ``ROUNDS`` rounds,
    each a fresh session in a second host (opened in the same process, its host closed before
    the next round) whose every turn is followed at once by one turn of the long session, so
    each late turn is measured right beside an early one, under the same load. (The long
    session is reopened rather than kept open so that its bytes on disk and its resume are
    measured at exactly ``turns`` turns.)"""
    from chord.context import BACKGROUND
    from coding_agent.session_files.folders import create_session
    from coding_agent.worker.main import WorkerConfig, open_session_host

    rounds: list[Round] = []
    async with open_session_host(config) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)
        late_turn = turns
        for _ in range(ROUNDS):
            one = Round([], [], [], [])
            session = create_session(config.session.cwd, env=config.env)
            other = WorkerConfig(session, model=config.model, env=config.env)
            async with open_session_host(other) as fresh:
                reference = await fresh.harness.harness.root(BACKGROUND)
                for n in range(1, REFERENCE + 1):
                    await _turn(reference, f"Turn {n}: answer briefly.", (one.fresh, one.fresh_cpu))
                    late_turn += 1
                    await _turn(
                        root, f"Turn {late_turn}: answer briefly.", (one.late, one.late_cpu)
                    )
            rounds.append(one)
    return rounds


async def resume_run(config: Any, runs: int = 3) -> tuple[float, float, int, int]:
    """Reopen a closed session in the worker's session host (storage open, harness open and
    resume, the features, the views) and close it again: (best wall seconds, best CPU seconds,
    bytes of Python memory the open host holds (tracemalloc, a separate open), stored entries)."""
    import gc
    import tracemalloc

    from chord.context import BACKGROUND
    from coding_agent.worker.main import open_session_host
    from pico3.storage import EntryScan

    best = (float("inf"), float("inf"))
    for _ in range(runs):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        async with open_session_host(config):
            took = (time.perf_counter() - start, time.process_time() - start_cpu)
        best = min(best, took)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    async with open_session_host(config) as runtime:
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        storage = runtime.harness.harness.kernel.storage
        count = 0
        for conversation in await storage.conversations(BACKGROUND):
            scan = EntryScan(conversation_id=conversation.id, limit=10**9)
            count += sum(
                e.conversation_id == conversation.id
                for e in await storage.scan_entries(scan, BACKGROUND)
            )
    return best[0], best[1], held, count


# -- the baseline: the same bodies with plain json and httpx ----------------------------------


def baseline_run(provider: str, url: str, turns: int) -> list[float]:
    """Seconds per turn: the agent's first body, grown per turn, posted and parsed plainly."""
    import httpx2 as httpx  # what both SDKs use

    with httpx.Client(base_url=url, timeout=60) as client:
        body = json.loads(client.get("/first").content)
        messages: list[dict[str, Any]] = body["messages"]
        first_user = next(m for m in messages if m["role"] == "user")
        del messages[messages.index(first_user) :]
        headers = {"content-type": "application/json", "x-baseline": "1"}
        times: list[float] = []
        text = ""
        for turn in range(1, turns + 1):
            start = time.perf_counter()
            if text:
                if provider == "openai":
                    messages.append({"role": "assistant", "content": text})
                else:
                    messages.append(
                        {"role": "assistant", "content": [{"type": "text", "text": text}]}
                    )
            prompt = f"Turn {turn}: answer briefly."
            if provider == "openai":
                messages.append({"role": "user", "content": prompt})
            else:
                messages.append({"role": "user", "content": [{"type": "text", "text": prompt}]})
            payload = json.dumps(body).encode()
            text = ""
            with client.stream("POST", PATHS[provider], content=payload, headers=headers) as reply:
                for line in reply.iter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    event = json.loads(line[6:])
                    if provider == "openai":
                        for choice in event["choices"]:
                            text += choice["delta"].get("content") or ""
                    elif event["type"] == "content_block_delta":
                        text += event["delta"]["text"]
            times.append(time.perf_counter() - start)
        assert text == "".join(ANSWER), text
        return times


def _at(times: list[float], turn: int) -> float:
    return 1000 * statistics.median(times[max(0, turn - WINDOW) : turn])


def report(provider: str, turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, StubProcess(__file__) as url:
        syncs = SyncClock()
        agent, cpu, size, config = anyio.run(
            agent_run, provider, url, turns, Path(tmp), None, syncs
        )
        base = baseline_run(provider, url, turns)
        resumed = anyio.run(resume_run, config)
        rounds = anyio.run(interleaved_run, config, turns) if turns >= 2 * REFERENCE else []
    with tempfile.TemporaryDirectory() as tmp, StubProcess(__file__) as url:
        _, _, long_size, config = anyio.run(agent_run, provider, url, 1, Path(tmp), LONG_PROMPT)
        resumed_one = anyio.run(resume_run, config)
    marks = [c for c in CHECKPOINTS if c <= turns] or [turns]
    if marks[-1] != turns:
        marks.append(turns)
    for mark in marks:
        a, b = _at(agent, mark), _at(base, mark)
        print(
            f"{provider} turn {mark:>5,}: {a:7.1f} ms/turn (CPU {_at(cpu, mark):6.1f} ms) | "
            f"baseline (plain json+httpx): {b:5.1f} ms/turn | overhead {a - b:7.1f} ms [target <= 40 ms]"
        )
    first, last = _at(agent, marks[0]), _at(agent, marks[-1])
    print(
        f"{provider} turn {marks[-1]:,} / turn {marks[0]:,}: {last / first:.2f}x "
        f"[target <= 1.2x] | baseline: {_at(base, marks[-1]) / _at(base, marks[0]):.2f}x"
    )
    if rounds:
        ratios = [statistics.median(one.late) / statistics.median(one.fresh[1:]) for one in rounds]
        cpu_ratios = [
            statistics.median(one.late_cpu) / statistics.median(one.fresh_cpu[1:]) for one in rounds
        ]
        fresh_ms = 1000 * statistics.median(t for one in rounds for t in one.fresh[1:])
        late_ms = 1000 * statistics.median(t for one in rounds for t in one.late)
        after = turns + len(rounds) * REFERENCE
        print(
            f"{provider} turns {turns + 1:,}-{after:,} / turn {REFERENCE} of fresh sessions, "
            f"interleaved turn by turn ({len(rounds)} rounds): {statistics.median(ratios):.2f}x "
            f"[target <= 1.1x] ({late_ms:.1f} / {fresh_ms:.1f} ms) | CPU "
            f"{statistics.median(cpu_ratios):.2f}x | rounds: "
            + " ".join(f"{r:.2f}" for r in ratios)
        )
    # The request body grows with the history, so the baseline's own cost grows; what the agent
    # adds on top of it, and the CPU this process spends, show the agent's own growth.
    over_first = first - _at(base, marks[0])
    over_last = last - _at(base, marks[-1])
    print(
        f"{provider} turn {marks[-1]:,} / turn {marks[0]:,}, the agent's own part: overhead "
        f"{over_last / over_first:.2f}x, CPU {_at(cpu, marks[-1]) / _at(cpu, marks[0]):.2f}x"
    )
    total = sum(agent)
    print(
        f"{provider} {turns:,} turns: {total:,.1f} s | baseline {sum(base):,.1f} s "
        f"[target: 2,000 turns <= 60 s]"
    )
    print(
        f"{provider} the fsync floor, same turns: {syncs.calls / turns:.1f} durable writes/turn "
        f"(pwrite O_DSYNC, fsync, fdatasync), {1000 * syncs.seconds / turns:.1f} ms/turn in "
        f"them = {syncs.seconds:,.1f} s of the {total:,.1f} s "
        f"({100 * syncs.seconds / total:.0f}%; threads may overlap them)"
    )
    print(
        f"{provider} session bytes after {turns:,} turns: {size:,} B "
        f"({size / turns:,.0f} B/turn) [target: 2,000 turns <= 1,500,000 B]"
    )
    (wall, cpu_s, held, entries), (wall_1, cpu_1, _, _) = resumed, resumed_one
    print(
        f"{provider} resume of the {turns:,}-turn session (worker host open): {wall:.3f} s "
        f"(CPU {cpu_s:.3f} s) | 1-turn session: {wall_1:.3f} s (CPU {cpu_1:.3f} s) | "
        f"{wall - wall_1:+.3f} s (CPU {cpu_s - cpu_1:+.3f} s) [target <= +0.1 s]"
    )
    print(
        f"{provider} memory held by the reopened worker host: {held / 1e6:.1f} MB for "
        f"{entries:,} entries = {held / max(entries, 1):,.0f} B/entry (tracemalloc) "
        f"[target, 10k-entry tool-turn session: <= 2 KB/entry]"
    )
    text = len("".join(LONG_ANSWER))
    print(
        f"{provider} session bytes, one {text / 1000:,.0f} KB streamed answer: {long_size:,} B "
        f"= {long_size / text:.2f}x the text [target <= 1.1x]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=2_000, help="turns per session")
    parser.add_argument("--provider", choices=("openai", "anthropic", "both"), default="both")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.turns < 1:
        parser.error("--turns must be at least 1")
    for provider in ("openai", "anthropic") if args.provider == "both" else (args.provider,):
        report(provider, args.turns)


if __name__ == "__main__":
    main()
