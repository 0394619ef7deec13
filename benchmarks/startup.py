"""Benchmark: how fast the coding agent starts (issue 15).

Each figure is the median of ``--runs`` fresh processes, printed next to baselines measured in
the same run: ``python -c pass`` (the interpreter alone), ``python -c "import ssl, socket"``
(what any client of an HTTPS API pays before its first request) and ``python -c "import
textual"``.
Every figure is wall time and, in parentheses, the CPU time (user + system) the process used
until then (read with ``wait4`` after it is killed at that point): on a shared, loaded machine
the CPU time is the steadier of the two.

* ``--help`` and ``--version``: process start to exit;
* start → first provider request: ``coding-agent -p PROMPT --model openai/gpt-4.1`` (and the
  anthropic path) with the SDK pointed at a stub server in this process; measured from spawning
  the process to the first byte of the request arriving (one monotonic clock for both sides),
  with the CPU time of the process's main thread alone (the critical path: work a thread does
  beside it on another core, such as loading the TLS certificates, is not on it), cold (the
  warm start off: ``CODING_AGENT_WARM_START=0``, what a first run pays before its server is up);
  then as by default, with the warm start (``coding_agent.warm``): a fork server is started and
  its preload done before the timing, each run is checked to be served by it, and the CPU is the
  thin client's plus the forked child's (from ``/proc``);
* ``-p`` stream consumption: ``coding-agent -p`` against a stub server that streams an answer of
  ``--tokens`` one-token deltas (on each provider's protocol), from the first byte of the stream
  to the process's exit, in tokens per second (wall, and per CPU second of the process over the
  same span, read from ``/proc``); next to a plain consumer of the same stream in the same run
  (``httpx2`` + ``json.loads`` per event, the text joined and printed);
* worker start → serving: ``python -m coding_agent.worker.main SESSION`` until it prints
  ``READY``, for sessions of 0, 1,000 and 10,000 entries, first start and after a ``SIGKILL``
  of the running worker (the restart a crashed worker gets); and for an empty session with an
  Anthropic API key set (its model's SDK is imported at the first request, not before serving).
  "First" is the first start of that session; one unmeasured start of a scratch session runs
  before them all (the installation's first run, which compiles).

Bytecode: every process of the run (the baselines too) caches compiled modules in a private
``PYTHONPYCACHEPREFIX`` (``PYTHONDONTWRITEBYTECODE`` is dropped) and each command runs once
unmeasured first, so the figures are those of an installed app after its first run; with
``--cold`` nothing is cached and every process compiles every module it imports from source.
(Facet modules are read from source at every load; their compiles are kept by source hash in a
private ``CHORD_CODE_CACHE``, which ``--cold`` turns off: see ``chord.facet_packages.codecache``.)

* the TUI (issue 38): ``coding-agent`` launched in a tmux pane (a new session on the faux model;
  its worker starts beside it) until its first screen (the editor's top border with its ``›``
  marker is on the pane), and until the editor accepts input (a key sent the moment the editor
  shows appears in the editor's box); the pane is polled every ``POLL_INTERVAL`` (10 ms: a
  capture costs a tmux client and the server 2-3 ms of CPU, so captures back to back would take
  most of a core of a 2-core machine from the TUI and the worker starting beside it). CPU is the
  TUI process's own, read from ``/proc`` at each point (the nanoseconds its threads ran; its
  worker's is not counted).

Targets (issue 15): ``--help``/``--version`` <= 0.15 s; first request (issue 45) <= 0.15 s and
<= 5x ``import ssl, socket`` on both paths;
``-p`` stream consumption >= 30k tokens/s on both paths; worker start -> serving <= 0.4 s empty,
<= 0.8 s at 10,000 entries. (Issue 38) TUI first screen <= 0.5 s and <= 3x ``import textual``;
editor accepting input <= 0.5 s. Each line says whether its target is met.

Run: ``uv run python benchmarks/startup.py [--runs N] [--quick] [--cold] [--tokens N] [--only
WHAT]`` (``--quick``: 3 runs, and sessions of 0 and 1,000 entries only; ``--only`` one of
``help``, ``first``, ``stream``, ``worker``, ``tui``; the TUI figures need tmux).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

PYTHON = sys.executable
BIN = Path(PYTHON).parent
AGENT = str(BIN / "coding-agent")


ENV: dict[str, str] = {**os.environ, "CODING_AGENT_WARM_START": "0"}
"""The environment of every process the benchmark starts (see the bytecode note above): the
warm start off, but where a line says it runs with it (then its own server serves the runs)."""


Timing = tuple[float, float]
"""(wall seconds, CPU seconds)."""


def _median(samples: list[Timing]) -> Timing:
    return (
        statistics.median(wall for wall, _ in samples),
        statistics.median(cpu for _, cpu in samples),
    )


def _show(timing: Timing) -> str:
    return f"{timing[0]:.3f} s (CPU {timing[1]:.3f} s)"


def _reap(process: subprocess.Popen[Any], kill: bool = True) -> float:
    """Kill (unless it exits by itself) and reap ``process``; the CPU seconds it used."""
    if kill:
        process.send_signal(signal.SIGKILL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], runs: int) -> Timing:
    """Median (wall, CPU) from spawn to exit."""
    samples: list[Timing] = []
    for _ in range(runs + 1):
        start = time.monotonic()
        process = subprocess.Popen(
            command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        cpu = _reap(process, kill=False)
        samples.append((time.monotonic() - start, cpu))
    return _median(samples[1:])  # the first run may compile: unmeasured


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a client killed mid-request is expected here


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None


class _Loopback:
    """A threaded HTTP server on 127.0.0.1 (a free port) serving ``handler``."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = _Server(("127.0.0.1", 0), handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class FirstRequest(_Loopback):
    """A loopback server that notes when a request first arrives and answers 503 (the client
    gives up; only the arrival matters)."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.at = 0.0
        stub = self

        class Handler(_Handler):
            def do_POST(self) -> None:
                if not stub.arrived.is_set():
                    stub.at = time.monotonic()
                    stub.arrived.set()
                body = b'{"error": {"type": "invalid_request_error", "message": "benchmark"}}'
                self.send_response(400)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._serve(Handler)


class WarmServer:
    """A warm-start fork server (``coding_agent.warm``) for clients of ``env``: started, its
    preload done and answering before anything is timed; stopped (and waited for) at the end.
    ``env`` is what the clients will use (``CODING_AGENT_WARM_START=1`` and a private
    ``XDG_RUNTIME_DIR`` added): the server refuses a client whose environment differs in a
    variable its preload read (HOME, XDG_DATA_HOME, PYTHON*, ...), so a benchmark keeps those
    the same across the runs it times warm."""

    def __init__(self, env: dict[str, str]) -> None:
        from coding_agent.settings import warm_start

        self._rendezvous = warm_start
        self._runtime = tempfile.mkdtemp(prefix="wsb")  # short: a socket path has ~107 bytes
        self.env = {**env, "XDG_RUNTIME_DIR": self._runtime, warm_start.ENV: "1"}
        self.process = subprocess.Popen(
            [PYTHON, "-P", "-m", "coding_agent.warm.server"],
            env={k: v for k, v in self.env.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 300
        while warm_start.ping(self.env) is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the warm-start server did not start")
            time.sleep(0.05)  # polling for the preload's end, before anything is timed

    def served(self) -> int:
        """How many commands the server forked so far."""
        answer = self._rendezvous.ping(self.env)
        return int(answer["served"]) if answer else -1

    def settled(self) -> None:
        """Wait until the server runs no child: a command's child tells its client the exit
        status before its own interpreter's teardown, so it may still be ending when the
        client has exited; once reaped, its CPU is in the server's ``cutime``."""
        deadline = time.monotonic() + 60
        while True:
            answer = self._rendezvous.ping(self.env)
            if answer is not None and int(answer["children"]) == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the warm-start server's child did not end within 60 s")
            time.sleep(0.005)  # polling the server's count, after the timed part

    def child(self) -> int:
        """The pid of the one child the server runs now (the command being timed)."""
        children = [
            int(entry) for entry in os.listdir("/proc") if entry.isdigit() and _ppid(entry) == self.process.pid
        ]  # fmt: skip
        if len(children) != 1:
            raise RuntimeError(f"the warm-start server runs {len(children)} children, not 1")
        return children[0]

    def close(self) -> None:
        self._rendezvous.stop(self.env)
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self._runtime, ignore_errors=True)


def _ppid(pid: str) -> int | None:
    """The parent of a live process ``pid`` (``None`` for a zombie: a child already dead)."""
    try:
        state, parent = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[:2]
    except (OSError, ValueError):
        return None
    return None if state == "Z" else int(parent)


@contextlib.contextmanager
def warm_server(env: dict[str, str]) -> Iterator[WarmServer]:
    """:class:`WarmServer` for the length of the block."""
    server = WarmServer(env)
    try:
        yield server
    finally:
        server.close()


def _stub_env(tmp: Path) -> dict[str, str]:
    """``ENV`` without provider settings, with private state and config folders under ``tmp``."""
    env = {k: v for k, v in ENV.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env["XDG_STATE_HOME"] = str(tmp / "state")
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    return env


def _use_stub(env: dict[str, str], provider: str, url: str) -> str:
    """Point ``provider``'s SDK in ``env`` at the stub server at ``url``; the model to ask for."""
    if provider == "openai":
        env.update(OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=f"{url}/v1")
        return "openai/gpt-4.1"
    env.update(ANTHROPIC_API_KEY="sk-ant-bench", ANTHROPIC_BASE_URL=url)
    return "anthropic/claude-sonnet-4-6"


def first_request(
    provider: str, runs: int, tmp: Path, warm: WarmServer | None = None
) -> tuple[Timing, float]:
    """Median (wall, CPU) from spawning ``coding-agent -p`` to its first provider request, and
    the median CPU seconds of its main thread alone until then (``/proc``; work another thread
    does beside it, such as loading TLS certificates, is off that critical path).

    ``warm``: through that warm-start server; the CPU is then the thin client's and the forked
    child's together (the child's read from ``/proc``), the main thread the child's."""
    samples: list[Timing] = []
    main_thread: list[float] = []
    project = tmp / "project"
    project.mkdir(exist_ok=True)
    for _ in range(runs + 1):  # the first run may compile: unmeasured
        server = FirstRequest()
        env = {**_stub_env(tmp), **(warm.env if warm is not None else {})}
        model = _use_stub(env, provider, server.url)
        served = warm.served() if warm is not None else 0
        start = time.monotonic()
        process = subprocess.Popen(
            [AGENT, "-p", "hello", "--model", model],
            cwd=project,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            if not server.arrived.wait(120):
                raise RuntimeError(f"{provider}: no request arrived within 120 s")
            child = 0.0
            if warm is not None:
                pid = warm.child()
                main_thread.append(_cpu_now(pid, thread=True) or float("nan"))
                child = _cpu_now(pid) or 0.0
            else:
                main_thread.append(_cpu_now(process.pid, thread=True) or float("nan"))
            samples.append((server.at - start, _reap(process) + child))
            if warm is not None and warm.served() != served + 1:
                raise RuntimeError("the warm run was not served by the warm-start server")
        finally:
            if process.returncode is None:
                _reap(process)
            server.close()
    return _median(samples[1:]), statistics.median(main_thread[1:])


def _stream_body(provider: str, tokens: int) -> bytes:
    """An SSE answer of ``tokens`` one-token text deltas on ``provider``'s protocol."""
    if provider == "openai":

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            body = {"id": "c1", "object": "chat.completion.chunk", "created": 0,
                    "model": "gpt-4.1", "choices": [choice] if delta is not None else [], **extra}  # fmt: skip
            return b"data: " + json.dumps(body).encode() + b"\n\n"

        parts = [chunk({"role": "assistant", "content": ""})]
        parts += [chunk({"content": " tok"})] * tokens
        parts.append(chunk({}, "stop"))
        usage = {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": tokens + 10}
        parts.append(b"data: " + json.dumps({"id": "c1", "choices": [], "usage": usage}).encode())
        parts.append(b"\n\ndata: [DONE]\n\n")
        return b"".join(parts)

    def event(kind: str, body: dict[str, Any]) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **body})}\n\n".encode()

    message = {"id": "msg_1", "type": "message", "role": "assistant",
               "model": "claude-sonnet-4-6", "content": [], "stop_reason": None,
               "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}  # fmt: skip
    delta = event(
        "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": " tok"}}
    )
    parts = [
        event("message_start", {"message": message}),
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        delta * tokens,
        event("content_block_stop", {"index": 0}),
        event(
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": tokens},
            },
        ),
        event("message_stop", {}),
    ]
    return b"".join(parts)


class StreamServer(_Loopback):
    """A loopback server answering every POST with one prepared SSE body; notes when the body
    starts going out."""

    def __init__(self, body: bytes) -> None:
        self.started = threading.Event()
        self.at = 0.0
        stub = self

        class Handler(_Handler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.flush()
                stub.at = time.monotonic()
                stub.started.set()
                self.wfile.write(body)

        self._serve(Handler)


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_now(pid: int, *, thread: bool = False, exited_threads: bool = False) -> float | None:
    """The CPU seconds process ``pid`` (with ``thread``: its main thread alone) used so far
    (Linux ``/proc``; ``None`` elsewhere): the nanoseconds its threads ran (``schedstat``),
    else its user and system clock ticks (1/100 s apart: too coarse to tell two TUI start-ups
    apart).

    ``schedstat`` lists only the threads alive now: a thread that already ended (the TLS
    certificates' loader of a provider client) is missing, though the exit's ``rusage`` counts
    it. For a span that ends at exit, pass ``exited_threads``: the process's clock ticks,
    which count them."""
    if not exited_threads:
        try:
            tasks = [Path(f"/proc/{pid}/task/{pid}")] if thread else None
            if tasks is None:
                tasks = list(Path(f"/proc/{pid}/task").iterdir())
            return sum(int((task / "schedstat").read_text().split()[0]) for task in tasks) / 1e9
        except (OSError, ValueError, IndexError):
            pass
    stat = f"/proc/{pid}/task/{pid}/stat" if thread else f"/proc/{pid}/stat"
    try:
        fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS


_PLAIN_CONSUMER = """
import json, sys, httpx2
url, provider = sys.argv[1], sys.argv[2]
path = "/v1/chat/completions" if provider == "openai" else "/v1/messages"
text = []
with httpx2.Client() as client, client.stream("POST", url + path, content=b"{}") as response:
    for line in response.iter_lines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if provider == "openai":
            for choice in event.get("choices") or ():
                text.append((choice.get("delta") or {}).get("content") or "")
        elif event.get("type") == "content_block_delta":
            text.append(event["delta"].get("text", ""))
sys.stdout.write("".join(text) + "\\n")
"""


def _consume(command: list[str], env: dict[str, str], cwd: Path, server: StreamServer,
             tokens: int) -> Timing:  # fmt: skip
    """(tokens per wall second, tokens per CPU second) from the stream's first byte to exit."""
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        if not server.started.wait(120):
            raise RuntimeError(f"{command[:3]}: no request arrived within 120 s")
        cpu_start = _cpu_now(process.pid, exited_threads=True)  # the span ends at exit
        assert process.stdout is not None
        out = process.stdout.read()
        cpu = _reap(process, kill=False)
        wall = time.monotonic() - server.at
    finally:
        if process.returncode is None:
            _reap(process)
    if out.count(b"tok") != tokens:
        raise RuntimeError(f"{command[:3]}: printed {out.count(b'tok')} of {tokens} tokens")
    spent = cpu - cpu_start if cpu_start is not None else float("nan")
    return tokens / wall, tokens / spent if spent > 0 else float("nan")


def stream_rates(provider: str, runs: int, tokens: int, tmp: Path) -> tuple[Timing, Timing]:
    """Median (wall, CPU) token rates of ``coding-agent -p`` and of the plain consumer."""
    body = _stream_body(provider, tokens)
    project = tmp / "project-stream"
    project.mkdir(exist_ok=True)
    agent: list[Timing] = []
    plain: list[Timing] = []
    for _ in range(runs + 1):  # the first run may compile: unmeasured
        for rates, command, url_suffix in (
            (agent, None, ""),
            (plain, [PYTHON, "-c", _PLAIN_CONSUMER], ""),
        ):
            server = StreamServer(body)
            env = _stub_env(tmp)
            if command is None:
                run = [AGENT, "-p", "hello", "--model", _use_stub(env, provider, server.url)]
            else:
                run = [*command, server.url + url_suffix, provider]
            try:
                rates.append(_consume(run, env, project, server, tokens))
            finally:
                server.close()
    return _median(agent[1:]), _median(plain[1:])


def _rate(timing: Timing) -> str:
    return f"{timing[0]:,.0f} tok/s (per CPU second {timing[1]:,.0f})"


async def _fill(session_dir: Path, entries: int) -> None:
    """Append ``entries`` transcript entries to the session's storage (plain notes)."""
    from chord.context import BACKGROUND
    from pico3.harness import Harness
    from pico3.storage import JsonlStorage

    harness = await Harness.open(
        JsonlStorage(session_dir / "storage", fsync=False), None, BACKGROUND
    )
    async with harness:
        root = await harness.root(BACKGROUND)
        for i in range(entries):
            await root.write("bench.note", BACKGROUND, data={"i": i, "text": f"note {i} " * 8})


def _worker(session_dir: Path, env: dict[str, str]) -> Timing:
    """Start the worker, SIGKILL it once it is serving; (wall, CPU) to ``READY``."""
    start = time.monotonic()
    process = subprocess.Popen(
        [PYTHON, "-m", "coding_agent.worker.main", str(session_dir), "--linger", "0"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    wall = time.monotonic() - start
    cpu = _reap(process)
    if not line.startswith("READY"):
        raise RuntimeError(f"the worker did not start: {line!r}")
    return wall, cpu


def _warm_worker(tmp: Path) -> None:
    """One unmeasured worker start of a scratch session: it compiles the modules and fills the
    code and schema caches, which the first measured start would otherwise pay for (and the
    restarts right after it share the machine with that first run's write-back)."""
    from coding_agent.session_files.folders import create_session

    project = tmp / "project-warm-up"
    project.mkdir()
    env = {k: v for k, v in ENV.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env["XDG_STATE_HOME"] = str(tmp / "state")
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    _worker(create_session(project, env=env).path, env)


def worker_times(entries: int, runs: int, tmp: Path, *, key: bool = False) -> tuple[Timing, Timing]:
    """(the first start -> serving, the median start after a SIGKILL -> serving) for a
    session of ``entries`` entries; with ``key`` an Anthropic API key is set (the session's
    model is then Anthropic's, and its SDK must not delay serving)."""
    from coding_agent.session_files.folders import create_session

    project = tmp / f"project-{entries}{'-key' if key else ''}"
    project.mkdir()
    env = {k: v for k, v in ENV.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env["XDG_STATE_HOME"] = str(tmp / "state")
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    if key:
        env["ANTHROPIC_API_KEY"] = "sk-ant-bench"
    session = create_session(project, env=env)
    if entries:
        anyio.run(_fill, session.path, entries)
    first = _worker(session.path, env)  # every start ends in a SIGKILL ...
    restarts = [_worker(session.path, env) for _ in range(runs)]  # ... so these are restarts
    return first, _median(restarts)


_TYPED = "qzxj"
"""What the TUI benchmark types into the editor (found on no other part of its screen)."""


class _Tmux:
    """A private tmux server (its own socket, 120×40) the TUI benchmark launches into."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.socket = str(tmp / "tmux.sock")
        self.env = env
        self("new-session", "-d", "-s", "bench", "-n", "idle", "-x", "120", "-y", "40", "sleep 600")

    def __call__(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", self.socket, *args], env=self.env,
                              capture_output=True, text=True, check=True, timeout=30)  # fmt: skip
        return done.stdout

    def screen(self, window: str) -> str:
        return self("capture-pane", "-p", "-t", f"bench:{window}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], env=self.env, check=False)


def _editor_shown(screen: str) -> bool:
    """The TUI's editor is painted: its top border with the prompt marker ``›``."""
    return any("╭─ ›" in line for line in screen.splitlines())


def _typed_shown(screen: str) -> bool:
    """The typed text is on screen, inside the editor's box."""
    return any(_TYPED in line and "│" in line for line in screen.splitlines())


POLL_INTERVAL = 0.01
"""Seconds between two captures of the TUI's pane (see the module docstring)."""


def _poll(tmux: _Tmux, window: str, check: Any, what: str, start: float) -> float:
    """Poll the pane (every ``POLL_INTERVAL``) until ``check(screen)``; seconds since start."""
    while True:
        screen = tmux.screen(window)
        if check(screen):
            return time.monotonic() - start
        if time.monotonic() - start > 120:
            raise RuntimeError(f"the TUI showed no {what} within 120 s; the screen was:\n{screen}")
        time.sleep(POLL_INTERVAL)


def tui_times(runs: int, tmp: Path) -> tuple[Timing, Timing]:
    """Median (wall, CPU) from launching ``coding-agent`` in a tmux pane to its first screen
    (the editor painted) and to the editor accepting input (a key typed the moment the editor
    shows appears in it). Each run is a new session (plain ``coding-agent``, the faux model);
    its worker starts beside the TUI, as a user's would, and is stopped after the run. CPU is
    the TUI process's own (``/proc``) when each point is reached."""
    from coding_agent.session_files.folders import list_sessions

    if not shutil.which("tmux"):
        raise RuntimeError("the TUI figures need tmux (apt-get install tmux)")
    project = tmp / "project-tui"
    project.mkdir(exist_ok=True)
    env = _stub_env(tmp)
    env.update(TERM="xterm-256color", COLORTERM="truecolor", LANG="C.UTF-8")
    env.pop("TMUX", None)
    tmux = _Tmux(tmp, env)
    screens: list[Timing] = []
    inputs: list[Timing] = []
    try:
        for run in range(runs + 1):  # the first run may compile: unmeasured
            window = f"run{run}"
            start = time.monotonic()
            tmux("new-window", "-d", "-n", window, "-c", str(project), f"exec {AGENT}")
            pid = int(tmux("display-message", "-p", "-t", f"bench:{window}", "#{pane_pid}"))
            shown = _poll(tmux, window, _editor_shown, "editor", start)
            shown_cpu = _cpu_now(pid) or float("nan")
            tmux("send-keys", "-t", f"bench:{window}", "-l", _TYPED)
            typed = _poll(tmux, window, _typed_shown, "typed text", start)
            typed_cpu = _cpu_now(pid) or float("nan")
            screens.append((shown, shown_cpu))
            inputs.append((typed, typed_cpu))
            tmux("kill-window", "-t", f"bench:{window}")
            for session in list_sessions(env=env):  # each run's worker: stop it
                _stop_worker(session)
    finally:
        tmux.close()
        for session in list_sessions(env=env):
            _stop_worker(session)
    return _median(screens[1:]), _median(inputs[1:])


def _stop_worker(session: Any) -> None:
    """SIGTERM the worker serving ``session`` (the pid its lock file names), if any, and wait
    until it let go of the session."""
    if not session.worker_running():
        return
    try:
        os.kill(int(session.lock_path.read_text().split()[0]), signal.SIGTERM)
    except (OSError, ValueError, IndexError):
        return
    deadline = time.monotonic() + 30
    while session.worker_running() and time.monotonic() < deadline:
        time.sleep(0.02)


def _print_first_requests(runs: int, tmp: Path, ssl: Timing, base: str) -> None:
    """Start -> first provider request on both paths, with the warm start off (a cold process:
    also the first run after a log-in, before a server is up) and then as by default, with the
    warm start's fork server started and preloaded before timing, each next to its target."""
    for warm_start in (False, True):
        with warm_server(_stub_env(tmp)) if warm_start else contextlib.nullcontext() as warm:
            for provider in ("openai", "anthropic"):
                took, main_thread = first_request(provider, runs, tmp, warm)
                ratio = took[0] / ssl[0]
                met = "met" if took[0] <= 0.15 and ratio <= 5 else "NOT met"
                how = (
                    ", the default: WARM START (its fork server up and preloaded before timing; "
                    "CPU: client + forked child)"
                    if warm_start
                    else ", COLD (warm start off, or its first run: no server yet)"
                )
                thread = "child's main thread" if warm_start else "main thread"
                print(
                    f"start -> first provider request ({provider}){how}: {_show(took)} ({thread} "
                    f"{main_thread:.3f} s), {ratio:.1f}x import ssl, socket (CPU "
                    f"{took[1] / max(ssl[1], 1e-3):.1f}x) [target <= 0.15 s and <= 5x import ssl, "
                    f"socket: {met}] | {base}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="processes per figure (median)")
    parser.add_argument("--quick", action="store_true", help="3 runs; sessions up to 1,000")
    parser.add_argument("--cold", action="store_true", help="cache no bytecode (see above)")
    parser.add_argument("--tokens", type=int, default=50_000, help="tokens per streamed answer")
    parser.add_argument(
        "--only", choices=("help", "first", "stream", "worker", "tui"), default=None
    )
    args = parser.parse_args()
    runs = 3 if args.quick else args.runs
    cache = tempfile.TemporaryDirectory()
    if not args.cold:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = cache.name
        ENV["CHORD_CODE_CACHE"] = str(Path(cache.name) / "chord-code")
    else:
        ENV["CHORD_CODE_CACHE"] = "off"
    print("bytecode: " + ("none cached (--cold)" if args.cold else "cached after a first run"))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    bare = timed([PYTHON, "-c", "pass"], runs)
    textual = timed([PYTHON, "-c", "import textual"], runs)
    ssl = timed([PYTHON, "-c", "import ssl, socket"], runs)
    base = (
        f"baseline: python -c pass {_show(bare)}, import ssl, socket {_show(ssl)}, "
        f"import textual {_show(textual)}"
    )
    wanted = {args.only} if args.only else {"help", "first", "stream", "worker", "tui"}
    if "help" in wanted:
        for flag in ("--help", "--version"):
            took = timed([AGENT, flag], runs)
            print(f"coding-agent {flag}: {_show(took)} [target <= 0.15 s] | {base}")
    with tempfile.TemporaryDirectory() as tmp:
        if "first" in wanted:
            _print_first_requests(runs, Path(tmp), ssl, base)
        for provider in ("openai", "anthropic") if "stream" in wanted else ():
            agent, plain = stream_rates(provider, runs, args.tokens, Path(tmp))
            print(
                f"-p stream consumption ({provider}, {args.tokens:,} tokens): {_rate(agent)} "
                f"[target >= 30,000 tok/s] | baseline: httpx2 + json.loads {_rate(plain)}"
            )
        sizes = (0, 1_000) if args.quick else (0, 1_000, 10_000)
        if "worker" in wanted:
            _warm_worker(Path(tmp))
        for entries in sizes if "worker" in wanted else ():
            start, restart = worker_times(entries, runs, Path(tmp))
            target = 0.4 if entries == 0 else 0.8 if entries == 10_000 else None
            goal = f"[target <= {target} s]" if target is not None else "[no target]"
            print(
                f"worker start -> serving, {entries:,} entries: first {_show(start)}; after "
                f"SIGKILL {_show(restart)} {goal} | {base}"
            )
        if "worker" in wanted:
            start, restart = worker_times(0, runs, Path(tmp), key=True)
            print(
                f"worker start -> serving, 0 entries, ANTHROPIC_API_KEY set: first "
                f"{_show(start)}; after SIGKILL {_show(restart)} [target <= 0.4 s] | {base}"
            )
        if "tui" in wanted:
            shown, typed = tui_times(runs, Path(tmp))
            ratio = shown[0] / textual[0]
            met = "met" if shown[0] <= 0.5 and ratio <= 3 else "NOT met"
            print(
                f"TUI launch -> first screen: {_show(shown)}, {ratio:.1f}x import textual "
                f"(CPU {shown[1] / textual[1]:.1f}x) [target <= 0.5 s and <= 3x import textual: "
                f"{met}] | {base}"
            )
            met = "met" if typed[0] <= 0.5 else "NOT met"
            print(
                f"TUI launch -> editor accepts input: {_show(typed)} [target <= 0.5 s: {met}] "
                f"| {base}"
            )
    cache.cleanup()


if __name__ == "__main__":
    main()
