"""Claude Code's ``--fallback-model`` through the real binary (:mod:`coding_agent.worker.fallback`),
against a local Anthropic-compatible server that answers the main model with HTTP 529
(overloaded; ``Retry-After: 0``, so the provider's own retries do not wait) and the fallback
model with an answer: the run answers on the fallback, says so in one stderr line, and the next
request of the run goes straight to the fallback. A fallback equal to the model, an unknown
fallback and ``--fallback-model`` outside ``-p`` are usage errors, nothing run."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120
MAIN = "claude-sonnet-4-5"
FALLBACK = "claude-haiku-4-5"


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _answer(model: str, text: str) -> bytes:
    usage = {"input_tokens": 10, "output_tokens": 1}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
               "content": [], "stop_reason": None, "usage": usage}  # fmt: skip
    return b"".join([
        _sse("message_start", {"type": "message_start", "message": message}),
        _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": text}}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                               "usage": {"output_tokens": 5}}),
        _sse("message_stop", {"type": "message_stop"}),
    ])  # fmt: skip


class Anthropic:
    """An Anthropic Messages server on 127.0.0.1: the main model is overloaded (529), any
    other model answers ``answered by MODEL``; ``asked`` lists the model of each request."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                model = body["model"]
                server.asked.append(model)
                if model == MAIN:
                    status, kind = 529, "application/json"
                    error = {"type": "overloaded_error", "message": "Overloaded"}
                    data = json.dumps({"type": "error", "error": error}).encode()
                else:
                    status, kind, data = (
                        200,
                        "text/event-stream",
                        _answer(model, f"answered by {model}"),
                    )
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("retry-after", "0")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Anthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@pytest.fixture
def server() -> Iterator[Anthropic]:
    with Anthropic() as running:
        yield running


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
def env(agent_env: dict[str, str], server: Anthropic, tmp_path: Path) -> dict[str, str]:
    return {**agent_env, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.url,
            "XDG_CONFIG_HOME": str(tmp_path / "config")}  # fmt: skip


async def _run(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    with anyio.fail_after(TIMEOUT):
        result = await anyio.run_process(
            [str(BINARY), *args], env=env, cwd=project, check=False, stdin=subprocess.DEVNULL
        )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


async def test_an_overloaded_model_falls_back_once_and_the_run_goes_on_with_it(
    project: Path, env: dict[str, str], server: Anthropic
) -> None:
    done = await _run(project, env, "-p", "hello", "--model", f"anthropic/{MAIN}",
                      "--fallback-model", f"anthropic/{FALLBACK}", "--output-format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == f"answered by {FALLBACK}"
    (line,) = done.stderr.splitlines()
    assert line == (
        f"coding-agent: anthropic/{MAIN} is unavailable (anthropic 529 overloaded_error: "
        f"Overloaded): going on with --fallback-model anthropic/{FALLBACK}"
    )
    # the provider's own retries of the main model, then the fallback: once
    assert server.asked[-1] == FALLBACK and server.asked.count(FALLBACK) == 1
    assert set(server.asked[:-1]) == {MAIN}
    # the session's model is still the main one: the next run starts on it again
    again = await _run(project, env, "-p", "--continue", "and again",
                       "--fallback-model", f"anthropic/{FALLBACK}")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == f"answered by {FALLBACK}"
    assert f"anthropic/{MAIN} is unavailable" in again.stderr


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["-p", "hi", "--model", f"anthropic/{MAIN}", "--fallback-model", f"anthropic/{MAIN}"],
         "--fallback-model is the same model as --model"),
        (["-p", "hi", "--fallback-model", f"anthropic/{MAIN}"],  # the session's model
         f"--fallback-model anthropic/{MAIN} is the model this run uses"),
        (["-p", "hi", "--model", f"anthropic/{MAIN}", "--fallback-model", "opus"],
         "got 'opus'"),
        (["--fallback-model", f"anthropic/{FALLBACK}", "sessions"], "--fallback-model: for a"),
    ],
)  # fmt: skip
async def test_a_bad_fallback_is_one_usage_line_and_nothing_is_asked(
    project: Path, env: dict[str, str], server: Anthropic, flags: list[str], says: str
) -> None:
    if "sessions" not in flags and "--model" not in flags:  # the session's model: MAIN
        (Path(env["XDG_CONFIG_HOME"]) / "coding-agent").mkdir(parents=True)
        config = Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml"
        config.write_text(f'model = "anthropic/{MAIN}"\n')
    done = await _run(project, env, *flags)
    assert done.returncode in (1, 2), done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("coding-agent: error: ") and says in line, line
    assert server.asked == []
