"""Benchmark: the scripted edit task, ours against Claude Code (issue 45).

One scripted model plays the same four steps to both agents, over the Anthropic Messages API
(streaming SSE, as both agents call it) from a loopback server in this process:

1. read ``calc.py`` (a scratch project whose ``add`` subtracts);
2. edit it (``return a - b`` becomes ``return a + b``);
3. run ``python3 check.py`` (which prints ``CHECK PASSED`` when ``add`` adds);
4. answer in text.

Each agent gets the tools under its own names and argument shapes (ours: ``read``/``edit``/
``bash``; Claude Code's: ``Read``/``Edit``/``Bash``), chosen from the tool list its request
carries. Any other request (Claude Code's side calls: titles, quota checks, ...) gets a short text
answer and is logged; the benchmark prints how many there were and of what kind.

The agents, run headless as a user would, each approving the edit and the command:

* ours, cold: ``coding-agent -p PROMPT --model anthropic/claude-sonnet-4-6 --approve allow``
  with the warm start off (``CODING_AGENT_WARM_START=0``: a first run, before a server is up);
* ours as by default, with the warm start (``coding_agent.warm``): the same command forked by a
  server started and preloaded before the timing
  (its runs share one HOME and data folder, which the server's preload depends on; state and
  config folders and the project are fresh per run; its CPU is the thin client's and the
  children's the server reaps, read from the server's ``/proc/PID/stat`` after the runs);
* Claude Code: ``claude -p PROMPT --output-format json --model claude-sonnet-4-6 --allowedTools
  Read Edit 'Bash(python3 check.py)'``, with ``ANTHROPIC_BASE_URL`` at the stub, a dummy key,
  and telemetry, auto-update and non-essential traffic off.

Every run gets a fresh copy of the project and fresh HOME/XDG folders; the runs alternate
(ours, Claude Code, ours, ...) so both see the same machine load; each run is checked: the file
was edited, the stub received the command's output (``CHECK PASSED``) as a tool result, and the
agent printed the scripted answer. As in ``benchmarks/startup.py``, Python caches bytecode (in a
private ``PYTHONPYCACHEPREFIX``; ``PYTHONDONTWRITEBYTECODE`` is dropped) and each agent keeps its
XDG cache folder across its runs, and a first round runs unmeasured: the figures are those of an
installed app after its first run. Figures are wall time from spawn to exit (median of
``--runs``), with the CPU time the process and its reaped children used, next to ``python -c
pass`` measured in the same run. Target (issue 45): ours <= 0.5x Claude Code's wall time.

Claude Code is installed once with npm into ``benchmarks/.cache/claude-code`` (ignored by git);
without node/npm, or when the install fails, the benchmark says so and times ours alone.
``--claude PATH`` uses a ``claude`` binary of your own instead.

Run: ``uv run python benchmarks/edit_task.py [--runs N] [--claude PATH]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

sys.path.insert(0, str(Path(__file__).parent))
from startup import warm_server  # a sibling script, not a package

os.environ["CODING_AGENT_WARM_START"] = "0"  # processes start cold unless a line says warm

PYTHON = sys.executable
AGENT = str(Path(PYTHON).parent / "coding-agent")
CACHE = Path(__file__).resolve().parent / ".cache" / "claude-code"
CLAUDE_PACKAGE = "@anthropic-ai/claude-code"
CLAUDE_VERSION = "2.1.197"
MODEL = "claude-sonnet-4-6"
PROMPT = "Fix the bug in calc.py so that check.py passes, then run python3 check.py."
ANSWER = "Fixed add in calc.py; python3 check.py now prints CHECK PASSED."
SCRIPT_ID = "toolu_edittask_"

CALC = 'def add(a, b):\n    """The sum of a and b."""\n    return a - b\n'
CHECK = "from calc import add\n\nassert add(2, 3) == 5, add(2, 3)\nprint('CHECK PASSED')\n"


# --- the scripted model --------------------------------------------------------------------


def _sse(kind: str, body: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **body})}\n\n".encode()


def _message(block: dict[str, Any], stop: str) -> dict[str, Any]:
    return {
        "id": "msg_edittask",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }


def _stream(block: dict[str, Any], stop: str) -> bytes:
    """``block`` (a text or tool_use block) as a streamed Messages answer."""
    start = {**_message(block, stop), "content": [], "stop_reason": None}
    if block["type"] == "text":
        opening: dict[str, Any] = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    else:
        opening = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    return b"".join(
        (
            _sse("message_start", {"message": start}),
            _sse("content_block_start", {"index": 0, "content_block": opening}),
            _sse("content_block_delta", {"index": 0, "delta": delta}),
            _sse("content_block_stop", {"index": 0}),
            _sse(
                "message_delta",
                {
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 20},
                },
            ),
            _sse("message_stop", {}),
        )
    )


def _tool_results(messages: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """(tool_use_id, text) of every tool result in ``messages``."""
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            inner = block.get("content")
            if isinstance(inner, list):
                inner = "".join(part.get("text", "") for part in inner if isinstance(part, dict))
            yield str(block.get("tool_use_id")), str(inner or "")


def _step(names: set[str], project: str, step: int) -> tuple[dict[str, Any], str]:
    """The script's answer at ``step`` (0..3) for an agent offering tools ``names``."""
    claude = "Read" in names
    calc = os.path.join(project, "calc.py")
    if step >= 3:
        return {"type": "text", "text": ANSWER}, "end_turn"
    if step == 0:
        name, args = ("Read", {"file_path": calc}) if claude else ("read", {"path": "calc.py"})
    elif step == 1:
        old, new = "return a - b", "return a + b"
        if claude:
            name, args = "Edit", {"file_path": calc, "old_string": old, "new_string": new}
        else:
            name, args = "edit", {"path": "calc.py", "edits": [{"oldText": old, "newText": new}]}
    else:
        command = "python3 check.py"
        name = "Bash" if claude else "bash"
        args = (
            {"command": command, "description": "Run the check"} if claude else {"command": command}
        )
    block = {"type": "tool_use", "id": f"{SCRIPT_ID}{step}", "name": name, "input": args}
    return block, "tool_use"


class ScriptedModel:
    """A loopback Messages API server playing the script; logs every request it answers."""

    def __init__(self) -> None:
        self.project = ""
        self.log: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _send(self, status: int, kind: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                model.note({"path": self.path, "kind": "GET"})
                self._send(200, "application/json", b"{}")

            def do_HEAD(self) -> None:
                model.note({"path": self.path, "kind": "HEAD"})
                self._send(200, "application/json", b"")

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                try:
                    request = json.loads(raw or b"{}")
                except ValueError:
                    request = {}
                status, kind, body = model.answer(self.path, request)
                self._send(status, kind, body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def note(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.log.append({**entry, "at": time.monotonic()})

    def answer(self, path: str, request: dict[str, Any]) -> tuple[int, str, bytes]:
        if not path.split("?")[0].endswith("/v1/messages"):
            self.note({"path": path, "kind": "other"})
            if path.split("?")[0].endswith("/count_tokens"):
                return 200, "application/json", b'{"input_tokens": 100}'
            return 200, "application/json", b"{}"
        names = {
            str(tool.get("name")) for tool in request.get("tools") or () if isinstance(tool, dict)
        }
        results = [
            (tool_id, text)
            for tool_id, text in _tool_results(request.get("messages") or [])
            if tool_id.startswith(SCRIPT_ID)
        ]
        if names & {"Read", "read"} and names & {"Bash", "bash"}:
            block, stop = _step(names, self.project, len(results))
            self.note({"path": path, "kind": "script", "step": len(results), "results": results})
        else:  # a side call (a title, a quota check, ...): any short text does
            block, stop = {"type": "text", "text": "ok"}, "end_turn"
            self.note({"path": path, "kind": "side", "model": request.get("model")})
        if request.get("stream"):
            return 200, "text/event-stream", _stream(block, stop)
        return 200, "application/json", json.dumps(_message(block, stop)).encode()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# --- the agents ----------------------------------------------------------------------------


def claude_binary() -> tuple[Path | None, str]:
    """Claude Code's native binary, installed into ``CACHE`` when needed; or why it is absent."""
    native = CACHE / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
    manifest = CACHE / "node_modules" / CLAUDE_PACKAGE / "package.json"
    if not (manifest.exists() and json.loads(manifest.read_text())["version"] == CLAUDE_VERSION):
        npm = shutil.which("npm")
        if npm is None:
            return None, "npm is not on PATH (apt-get install nodejs npm)"
        CACHE.mkdir(parents=True, exist_ok=True)
        (CACHE / "package.json").write_text('{"private": true}\n')
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix",
             str(CACHE), f"{CLAUDE_PACKAGE}@{CLAUDE_VERSION}"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            return (
                None,
                f"npm install {CLAUDE_PACKAGE}@{CLAUDE_VERSION} failed: {done.stderr[-500:]}",
            )
    # The package's postinstall (skipped) would link its platform package's binary into bin/.
    for candidate in sorted(
        (CACHE / "node_modules" / "@anthropic-ai").glob("claude-code-*/claude")
    ):
        if candidate.name == "claude" and os.access(candidate, os.X_OK):
            native = candidate
            break
    if not native.exists():
        return None, f"no native claude binary for this platform under {CACHE}"
    return native, ""


def _env(home: Path, cache: Path, url: str) -> dict[str, str]:
    """Private HOME and XDG folders (the cache kept across an agent's runs, as a user's is)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        PYTHONPYCACHEPREFIX=str(cache / "pycache"),
        HOME=str(home),
        XDG_STATE_HOME=str(home / "state"),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_CACHE_HOME=str(cache),
        XDG_DATA_HOME=str(home / "data"),
        ANTHROPIC_BASE_URL=url,
        ANTHROPIC_API_KEY="sk-ant-edittask",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    return env


def _command(agent: str, claude: Path | None) -> list[str]:
    if agent in ("ours", "ours-warm"):
        return [AGENT, "-p", PROMPT, "--model", f"anthropic/{MODEL}", "--approve", "allow"]
    assert claude is not None
    return [str(claude), "-p", PROMPT, "--output-format", "json", "--model", MODEL,
            "--allowedTools", "Read", "Edit", "Bash(python3 check.py)"]  # fmt: skip


Timing = tuple[float, float]
"""(wall seconds, CPU seconds)."""


Phases = tuple[float, float, float]
"""(spawn -> first scripted request, first -> last scripted request, last -> exit) seconds."""


def run_once(
    agent: str, claude: Path | None, model: ScriptedModel, tmp: Path, warm: Any = None
) -> tuple[Timing, Phases]:
    """One checked run of ``agent`` on a fresh project; (wall, CPU) and its phases."""
    work = Path(tempfile.mkdtemp(dir=tmp, prefix=f"{agent}-"))
    project = work / "project"
    project.mkdir()
    (project / "calc.py").write_text(CALC)
    (project / "check.py").write_text(CHECK)
    (work / "home").mkdir()
    model.project = str(project)
    model.log.clear()
    env = _env(work / "home", tmp / f"cache-{agent}", model.url)
    before = 0.0
    if warm is not None:  # the server's HOME and data folder; fresh state and config
        env = {**env, **warm.env, "ANTHROPIC_BASE_URL": model.url,
               "XDG_STATE_HOME": str(work / "home" / "state"),
               "XDG_CONFIG_HOME": str(work / "home" / "config")}  # fmt: skip
        before = _server_children_cpu(warm.process.pid)
    start = time.monotonic()
    process = subprocess.Popen(
        _command(agent, claude),
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = process.communicate(timeout=300)
    wall = time.monotonic() - start
    cpu = _children_cpu()
    if warm is not None:  # the forked child's CPU, its teardown after the client's exit too
        warm.settled()
        cpu += _server_children_cpu(warm.process.pid) - before
    _check(agent, process.returncode, out, err, project, model.log)
    shutil.rmtree(work, ignore_errors=True)
    script = [entry["at"] - start for entry in model.log if entry["kind"] == "script"]
    return (wall, cpu), (script[0], script[-1] - script[0], wall - script[-1])


def _server_children_cpu(pid: int) -> float:
    """CPU seconds of the children ``pid`` has reaped (``cutime + cstime`` of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


_LAST_CHILDREN_CPU = [0.0]


def _children_cpu() -> float:
    """CPU seconds of the children reaped since the last call (this process's children usage)."""
    usage = os.times()
    total = usage.children_user + usage.children_system
    spent = total - _LAST_CHILDREN_CPU[0]
    _LAST_CHILDREN_CPU[0] = total
    return spent


def _check(agent: str, code: int | None, out: bytes, err: bytes, project: Path,
           log: list[dict[str, Any]]) -> None:  # fmt: skip
    """Raise unless the run did the task: edited, ran the check, answered."""
    problems = []
    if code != 0:
        problems.append(f"exit {code}")
    if "return a + b" not in (project / "calc.py").read_text():
        problems.append("calc.py was not edited")
    final = [entry for entry in log if entry["kind"] == "script" and entry["step"] == 3]
    if not final or not any("CHECK PASSED" in text for _, text in final[-1]["results"]):
        problems.append("the stub never received CHECK PASSED as a tool result")
    if ANSWER not in out.decode(errors="replace"):
        problems.append("the answer was not printed")
    if problems:
        raise RuntimeError(
            f"{agent}: {'; '.join(problems)}\nstdout: {out.decode(errors='replace')[-800:]}"
            f"\nstderr: {err.decode(errors='replace')[-800:]}\nrequests: {log}"
        )


def _side_calls(log: list[dict[str, Any]]) -> str:
    kinds = [
        entry.get("model") or entry["path"] for entry in log if entry["kind"] not in ("script",)
    ]
    return ", ".join(sorted(set(kinds))) if kinds else "none"


def _median(samples: list[Timing]) -> Timing:
    return statistics.median(w for w, _ in samples), statistics.median(c for _, c in samples)


def _show(timing: Timing) -> str:
    return f"{timing[0]:.3f} s (CPU {timing[1]:.3f} s)"


def _phases(samples: list[Phases]) -> str:
    first, steps, end = (statistics.median(phase[i] for phase in samples) for i in range(3))
    return f"spawn -> first request {first:.3f} s, three tool steps {steps:.3f} s, answer -> exit {end:.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per agent (median)")
    parser.add_argument("--claude", type=Path, default=None, help="a claude binary to use")
    parser.add_argument("--ours-only", action="store_true", help="do not run Claude Code")
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    claude: Path | None = args.claude
    if claude is None and not args.ours_only:
        claude, why = claude_binary()
        if claude is None:
            print(f"Claude Code is absent: {why}; timing ours alone")
    agents = ["ours", "ours-warm"] + (["claude"] if claude is not None else [])
    model = ScriptedModel()
    samples: dict[str, list[Timing]] = {agent: [] for agent in agents}
    phases: dict[str, list[Phases]] = {agent: [] for agent in agents}
    side: dict[str, str] = {}
    bare: list[Timing] = []
    with tempfile.TemporaryDirectory(prefix="edit-task-") as name:
        tmp = Path(name)
        (tmp / "warm-home").mkdir()
        warm_env = _env(tmp / "warm-home", tmp / "cache-ours-warm", model.url)
        try:
            with warm_server(warm_env) as warm:
                for index in range(args.runs + 1):  # the first round warms caches: unmeasured
                    order = agents if index % 2 == 0 else agents[::-1]
                    for agent in order:
                        served = warm.served()
                        timing, phase = run_once(
                            agent, claude, model, tmp, warm if agent == "ours-warm" else None
                        )
                        if agent == "ours-warm" and warm.served() != served + 1:
                            raise RuntimeError("the warm run was not served by the server")
                        side[agent] = _side_calls(model.log)
                        if index:
                            samples[agent].append(timing)
                            phases[agent].append(phase)
                    start = time.monotonic()
                    subprocess.run([PYTHON, "-c", "pass"], check=True)
                    bare.append((time.monotonic() - start, _children_cpu()))
        finally:
            model.close()
    ours = _median(samples["ours"])
    ours_warm = _median(samples["ours-warm"])
    print(f"baseline: python -c pass {_show(_median(bare[1:]))}")
    print(
        f"ours, COLD (coding-agent -p, warm start off or its first run): {_show(ours)}; "
        f"{_phases(phases['ours'])}"
    )
    print(f"  other requests: {side['ours']}")
    print(
        f"ours, the default: WARM START (its fork server up and preloaded before timing; CPU: "
        f"client + forked child): {_show(ours_warm)}; {_phases(phases['ours-warm'])}"
    )
    if claude is None:
        return
    theirs = _median(samples["claude"])
    print(f"Claude Code {CLAUDE_VERSION} (claude -p): {_show(theirs)}; {_phases(phases['claude'])}")
    print(f"  other requests: {side['claude']}")
    for label, figure in ((", cold", ours), (", the default (warm start)", ours_warm)):
        ratio = figure[0] / theirs[0]
        print(
            f"ratio{label} (wall, median of {args.runs} paired runs): {ratio:.2f}x "
            f"(target <= 0.5x: {'met' if ratio <= 0.5 else 'missed'}); CPU ratio "
            f"{figure[1] / theirs[1]:.2f}x"
        )


if __name__ == "__main__":
    main()
