"""Benchmark: the memory a reopened worker host holds for a realistic tool-turn session (issue 15).

One session of about ``--entries`` stored entries (default 10,000) is built through the real
agent path: the worker's own session host (:func:`coding_agent.worker.main.open_session_host`:
the session facets, the installed features, JSONL storage with fsync on, permission mode
``auto``) driven turn by turn, the model ``openai/gpt-4o`` served by a stub Chat Completions
server on loopback (its own process; the real SDK as the client) and the tools the real ones,
run on a small project in a temporary folder. Each turn is what a coding turn looks like:

* the user's prompt (a few hundred bytes);
* an assistant message with text and two tool calls: ``read`` of a module (a tool result of
  about 3 KB) and ``bash`` running ``grep``/``wc`` over the project (about 1 KB);
* an assistant message with text and an ``edit`` of that module (its result: a short diff);
* the final answer (a few hundred bytes of text).

That is seven entries per turn. The stub answers from the request itself (the last message says
which step the turn is at), so the history compacts as it would with this model: at its
128k-token window the agent summarises (about every 80 turns), and the view then holds the
entries since the summary. The closed session is then reopened in the worker's session
host, as a restarted worker opens it (storage open, harness open and resume, the features, one
view bridge and replicated view per conversation), and the memory it holds is measured twice:

* **tracemalloc**: the Python memory allocated by the open and still held once it returned;
* **RSS**: the growth of a fresh process's resident set across the open (in a child process
  that imports everything first, so the imports are not counted).

Both are printed per stored entry, next to baselines measured in the same run: the same
measures for a 1-turn session of the same shape (what a host holds regardless of history), and
the bytes of the session's storage on disk (the JSON it holds); then the tracemalloc peak while
the host opened.

Target (issue 15): worker memory held for a realistic 10k-entry session ≤ 2 KB/entry.

Run: ``uv run python benchmarks/session_memory.py [--entries N] [--keep DIR | --reuse DIR]
[--profile]``. ``--keep DIR`` leaves the built session in ``DIR`` (it must not exist);
``--reuse DIR`` measures a session kept that way instead of building one (building 10,000
entries takes minutes; a ``bench.json`` there may name another ``model``); ``--profile`` also prints the tracemalloc snapshot's largest holders
grouped by traceback.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
from _stub_process import StubProcess, serve_until_stdin_closes

os.environ["CODING_AGENT_WARM_START"] = "0"  # processes start cold unless a line says warm

ENTRIES_PER_TURN = 7
MODEL = "gpt-4o"  # a 128k-token window: a long session compacts as it would with this model
MODULES = 12
TARGET = 2_000


# -- the project and the script -----------------------------------------------------------------


def _module_text(index: int) -> str:
    """A ~3 KB Python module with one ``VERSION = 0`` line the turns edit."""
    lines = [
        f'"""Module {index}: parsing and formatting of the records of kind {index}."""',
        "",
        "from __future__ import annotations",
        "",
        "VERSION = 0",
        "",
    ]
    for n in range(9):
        lines += [
            f"def handle_{index}_{n}(record: dict[str, object], *, strict: bool = False) -> str:",
            f'    """Render field {n} of ``record`` (kind {index}); strict refuses a missing one."""',
            f'    value = record.get("field_{n}")',
            "    if value is None and strict:",
            f'        raise KeyError("field_{n} is missing from the record")',
            f'    return f"{{value!r:>12}} ({n})"',
            "",
        ]
    return "\n".join(lines) + "\n"


def _prompt(turn: int, module: int) -> str:
    return (
        f"Turn {turn}: in src/mod_{module}.py, bump VERSION by one, and tell me briefly what "
        f"the handle_{module}_* functions do and whether strict mode is used consistently. "
        "Keep the change minimal; do not touch the other modules or the tests."
    )


def _answer_text(turn: int, module: int, new: int) -> str:
    return (
        f"Done: `src/mod_{module}.py` now has `VERSION = {new}`.\n\n"
        f"The nine `handle_{module}_*` functions each render one field of a record of this "
        "kind, right-aligned with its field number; in strict mode a missing field raises "
        "`KeyError` naming it, otherwise `None` is rendered. Strict mode is handled "
        f"identically in all of them, so nothing else needed changing (turn {turn})."
    )


SUMMARY = (
    "Summary of the work so far: the user asks, turn by turn, to bump `VERSION` in one of the "
    "modules src/mod_0.py .. src/mod_11.py and to describe its `handle_*` functions. Each turn "
    "read the module, listed its handlers with grep, edited the VERSION line and explained "
    "that the handlers render one field each and treat strict mode the same way. Nothing is "
    "open; the other modules and the tests were never touched. " * 3
)


def _reply(body: dict[str, Any]) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """The stub model's answer to one Chat Completions request: (text, tool calls). It reads
    the turn from the request itself (the last message), so a compacted history changes
    nothing: a user prompt gets ``read`` + ``bash``, their results get the ``edit``, the edit's
    result the final answer; a summarizer's request gets a summary."""
    messages = body["messages"]
    if any("You write summaries" in str(m.get("content")) for m in messages[:1]):
        return SUMMARY, []
    last = messages[-1]
    if last["role"] == "user":
        found = re.search(r"Turn (\d+): in src/mod_(\d+)\.py", str(last["content"]))
        turn, module = (int(found[1]), int(found[2])) if found else (0, 0)
        path = f"src/mod_{module}.py"
        text = (
            f"I'll read `{path}` first and look at how its handlers are used across the "
            "project before changing anything."
        )
        grep = f"grep -n 'def handle_{module}_' {path} | head -n 9; wc -l src/*.py"
        return text, [("read", {"path": path}), ("bash", {"command": grep})]
    calls = next(m for m in reversed(messages) if m["role"] == "assistant")["tool_calls"]
    read = next((c for c in calls if c["function"]["name"] == "read"), None)
    path = json.loads(calls[0]["function"]["arguments"]).get("path", "src/mod_0.py")
    module = int(re.findall(r"\d+", path)[-1]) if re.findall(r"\d+", path) else 0
    prompt = next(m for m in reversed(messages) if m["role"] == "user")
    found = re.search(r"Turn (\d+):", str(prompt["content"]))
    turn = int(found[1]) if found else 0
    if read is not None:  # the read and the grep came back: edit
        results = "".join(str(m.get("content")) for m in messages[-2:])
        version = re.search(r"VERSION = (\d+)", results)
        old = int(version[1]) if version else 0
        text = (
            f"`VERSION` is {old}; the handlers all take `strict` the same way. "
            "Bumping the version now."
        )
        edit = {"oldText": f"VERSION = {old}\n", "newText": f"VERSION = {old + 1}\n"}
        return text, [("edit", {"path": path, "edits": [edit]})]
    edits = json.loads(calls[0]["function"]["arguments"]).get("edits") or [{}]
    version = re.search(r"VERSION = (\d+)", str(edits[0].get("newText")))
    return _answer_text(turn, module, int(version[1]) if version else 0), []


def _make_project(project: Path) -> None:
    (project / "src").mkdir(parents=True)
    (project / "README.md").write_text("# Records\n\nParsing and formatting of records.\n")
    for index in range(MODULES):
        (project / "src" / f"mod_{index}.py").write_text(_module_text(index))


# -- the stub model server (a child process: ``--serve``) --------------------------------------


def _events(text: str, calls: list[tuple[str, dict[str, Any]]], serial: int) -> bytes:
    """The Chat Completions stream of one answer: the text in pieces, then each tool call."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": MODEL}
        return f"data: {json.dumps({**body, 'choices': [choice]})}\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    words = text.split(" ")
    out += [chunk({"content": " ".join(words[i : i + 8]) + " "}) for i in range(0, len(words), 8)]
    for index, (name, arguments) in enumerate(calls):
        call = {"id": f"call_{serial}_{index}", "type": "function"}
        function = {"name": name, "arguments": json.dumps(arguments)}
        out.append(chunk({"tool_calls": [{"index": index, **call, "function": function}]}))
    out.append(chunk({}, "tool_calls" if calls else "stop"))
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def serve() -> None:
    """Serve until stdin closes; print the base URL first."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    serials = iter(range(1, 10**9))

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            text, calls = _reply(json.loads(raw))
            body = _events(text, calls, next(serials))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    serve_until_stdin_closes(ThreadingHTTPServer(("127.0.0.1", 0), Handler))


# -- building the session through the agent ------------------------------------------------------


def _env(state: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENAI_", "ANTHROPIC_"))
    }
    env["XDG_STATE_HOME"] = str(state)
    return env


def _config(place: Path, url: str = "http://127.0.0.1:9") -> Any:
    """The worker config for the session kept in ``place`` (made by :func:`build`), its model
    served at ``url`` (a reopen never asks it)."""
    from coding_agent.session_files.folders import load_session
    from coding_agent.worker.main import WorkerConfig

    meta = json.loads((place / "bench.json").read_text())
    env = {**_env(place / "state"), "OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": f"{url}/v1"}
    model = f"openai/{meta.get('model', MODEL)}"
    return WorkerConfig(load_session(meta["session"]), model=model, env=env, permission_mode="auto")


async def build(place: Path, turns: int) -> float:
    """Build a ``turns``-turn session in ``place`` (a new folder); returns the seconds taken."""
    from coding_agent.session_files.folders import create_session

    project = place / "project"
    _make_project(project)
    session = create_session(project, env=_env(place / "state"))
    (place / "bench.json").write_text(json.dumps({"session": str(session.path), "turns": turns}))
    start = time.perf_counter()
    with StubProcess(__file__) as url:
        await _drive(_config(place, url), turns)
    return time.perf_counter() - start


async def _drive(config: Any, turns: int) -> None:
    from chord.context import BACKGROUND
    from coding_agent.worker.main import open_session_host

    async with open_session_host(config) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)
        for turn in range(1, turns + 1):
            handle = await root.send(_prompt(turn, turn % MODULES), BACKGROUND)
            record = await handle.wait(BACKGROUND)
            if record.status != "done":
                raise RuntimeError(f"turn {turn} ended {record.status!r}: {record}")
            if turn % 100 == 0:
                print(f"  built {turn:,} / {turns:,} turns", file=sys.stderr, flush=True)


# -- measuring the reopened host -----------------------------------------------------------------


def _storage_bytes(place: Path) -> int:
    config = _config(place)
    return sum(f.stat().st_size for f in config.session.storage_dir.rglob("*") if f.is_file())


async def _entry_counts(runtime: Any) -> tuple[int, dict[str, int]]:
    from chord.context import BACKGROUND
    from pico3.storage import EntryScan

    storage = runtime.harness.harness.kernel.storage
    kinds: dict[str, int] = {}
    for conversation in await storage.conversations(BACKGROUND):
        scan = EntryScan(conversation_id=conversation.id, limit=10**9)
        for entry in await storage.scan_entries(scan, BACKGROUND):
            if entry.conversation_id == conversation.id:
                kinds[entry.kind] = kinds.get(entry.kind, 0) + 1
    return sum(kinds.values()), kinds


async def held_tracemalloc(place: Path, profile: int) -> tuple[int, int, int, dict[str, int]]:
    """(bytes tracemalloc sees held by the open host, the peak above the start while it
    opened, stored entries, entries by kind); with ``profile``, print the largest holders
    grouped by traceback."""
    from coding_agent.worker.main import open_session_host

    config = _config(place)
    async with open_session_host(config):  # a first open: imports, caches, the features' code
        pass
    gc.collect()
    tracemalloc.start(25 if profile else 1)
    before = tracemalloc.take_snapshot() if profile else None
    base = tracemalloc.get_traced_memory()[0]
    async with open_session_host(config) as runtime:
        gc.collect()
        now, peak = tracemalloc.get_traced_memory()
        held, peak = now - base, peak - base
        after = tracemalloc.take_snapshot() if profile else None
        tracemalloc.stop()
        count, kinds = await _entry_counts(runtime)
    if before is not None and after is not None:
        _print_profile(before, after, profile)
    return held, peak, count, kinds


def _print_profile(before: Any, after: Any, top: int) -> None:
    filters = [tracemalloc.Filter(False, tracemalloc.__file__)]
    stats = after.filter_traces(filters).compare_to(before.filter_traces(filters), "traceback")
    print(f"  largest holders (tracemalloc, by traceback, top {top}):")
    for stat in stats[:top]:
        ours = [f for f in stat.traceback if "/src/" in f.filename] or list(stat.traceback)
        where = " < ".join(
            f"{f.filename.split('/src/')[-1]}:{f.lineno}" for f in reversed(ours[-4:])
        )
        print(f"  {stat.size_diff / 1e6:7.2f} MB {stat.count_diff:>8,} blocks  {where}")


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _rss_child(place: Path) -> None:
    """(child process) Print the RSS growth across an open, after a first open in this
    process loaded the code (its objects freed again)."""
    from coding_agent.worker.main import open_session_host

    config = _config(place)
    async with open_session_host(config):
        pass
    gc.collect()
    before = _rss()
    async with open_session_host(config):
        gc.collect()
        print(_rss() - before, flush=True)


def held_rss(place: Path) -> int:
    out = subprocess.run(
        [sys.executable, __file__, "--rss-child", str(place)],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.strip().splitlines()[-1])


def measure(place: Path, profile: int) -> dict[str, Any]:
    held, peak, count, kinds = anyio.run(held_tracemalloc, place, profile)
    return {
        "held": held,
        "peak": peak,
        "entries": count,
        "kinds": kinds,
        "rss": held_rss(place),
        "disk": _storage_bytes(place),
    }


def report(big: dict[str, Any], one: dict[str, Any], turns: int) -> None:
    entries, extra = big["entries"], big["entries"] - one["entries"]
    kinds = ", ".join(f"{kind} {n:,}" for kind, n in sorted(big["kinds"].items()))
    print(f"session: {turns:,} turns, {entries:,} stored entries ({kinds})")
    print(
        f"session storage on disk: {big['disk']:,} B = {big['disk'] / entries:,.0f} B/entry "
        f"| 1-turn session: {one['disk']:,} B"
    )
    for name, key in (("tracemalloc", "held"), ("RSS", "rss")):
        per = big[key] / entries
        marginal = (big[key] - one[key]) / max(extra, 1)
        print(
            f"memory held by the reopened worker host ({name}): {big[key] / 1e6:.1f} MB for "
            f"{entries:,} entries = {per:,.0f} B/entry ({per / (big['disk'] / entries):.1f}x "
            f"the bytes on disk) | 1-turn session: {one[key] / 1e6:.1f} MB | above it: "
            f"{marginal:,.0f} B/entry [target <= {TARGET:,} B/entry]"
        )
    print(
        f"tracemalloc peak while the host opened: {big['peak'] / 1e6:.1f} MB "
        f"({big['peak'] / entries:,.0f} B/entry) | 1-turn session: {one['peak'] / 1e6:.1f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000, help="stored entries to build")
    parser.add_argument("--keep", type=Path, help="leave the built session in this new folder")
    parser.add_argument("--reuse", type=Path, help="measure a session kept with --keep")
    parser.add_argument(
        "--profile", type=int, nargs="?", const=15, default=0, help="print the top N holders"
    )
    parser.add_argument("--rss-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.rss_child is not None:
        anyio.run(_rss_child, args.rss_child)
        return
    if args.entries < ENTRIES_PER_TURN:
        parser.error(f"--entries must be at least {ENTRIES_PER_TURN}")
    with tempfile.TemporaryDirectory() as tmp:
        if args.reuse is not None:
            place = args.reuse
            turns = json.loads((place / "bench.json").read_text())["turns"]
        else:
            place = args.keep if args.keep is not None else Path(tmp) / "big"
            place.mkdir(parents=True)
            turns = max(1, args.entries // ENTRIES_PER_TURN)
            took = anyio.run(build, place, turns)
            print(f"built {turns:,} tool turns through the worker host in {took:,.1f} s")
        small = Path(tmp) / "one"
        small.mkdir()
        anyio.run(build, small, 1)
        one = measure(small, 0)
        big = measure(place, args.profile)
        report(big, one, turns)
        if args.keep is None and args.reuse is None:
            shutil.rmtree(place, ignore_errors=True)


if __name__ == "__main__":
    main()
