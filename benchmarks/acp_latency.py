"""Benchmark: ``coding-agent acp`` against our own ``--json`` (issue 43, target <= 1.2x).

Both run the same scripted model (the faux provider, one answer of ``--chars`` characters that it
streams in small deltas) in a fresh session, and both are timed from the moment the session is
asked for to the events that reach the client:

* **first update**: ACP — ``session/new`` then ``session/prompt`` sent, until the first
  ``session/update`` arrives at the SDK's client; ``--json`` — the ``coding-agent --json``
  process started, until its first ``entry.added`` line (the same point: the session is open
  and the prompt was admitted). The ACP agent process is started before the clock (an editor
  keeps it running); the ``--json`` process is not (that is how it is used), so the baseline
  pays the process start the ACP figure does not: both are printed, with the ratio;
* **per chunk**: the whole answer's streaming, from the first to the last text update (ACP:
  ``agent_message_chunk``s; ``--json``: from its first to its last line), divided by the
  number of updates each sent.

Median of ``--runs``. Run: ``uv run python benchmarks/acp_latency.py [--runs N] [--chars N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import DeniedOutcome, RequestPermissionResponse

os.environ["CODING_AGENT_WARM_START"] = "0"  # processes start cold unless a line says warm

BINARY = Path(sys.executable).with_name("coding-agent")


class _Editor:
    def __init__(self) -> None:
        self.times: list[float] = []
        self.first = asyncio.Event()

    async def request_permission(self, **_: Any) -> RequestPermissionResponse:
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        del session_id
        if update.session_update == "agent_message_chunk":
            self.times.append(time.perf_counter())
            self.first.set()

    def on_connect(self, conn: Any) -> None:
        del conn


async def _acp(folder: Path, env: dict[str, str], script: Path) -> tuple[float, float, int]:
    editor = _Editor()
    async with spawn_agent_process(
        editor, str(BINARY), "acp", "--faux-script", str(script), env=env, cwd=str(folder)
    ) as (conn, _process):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        start = time.perf_counter()
        session = await conn.new_session(cwd=str(folder), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
    first = editor.times[0] - start
    span = editor.times[-1] - editor.times[0]
    return first, span / max(len(editor.times) - 1, 1), len(editor.times)


async def _json(folder: Path, env: dict[str, str], script: Path) -> tuple[float, float, int]:
    start = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        str(BINARY), "--faux-script", str(script), "--json", "go",
        cwd=folder, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    first: float | None = None
    times: list[float] = []
    async for line in process.stdout:
        now = time.perf_counter()
        event = json.loads(line)
        if first is None and event.get("type") == "entry.added":
            first = now - start
        times.append(now)
    await process.wait()
    assert first is not None
    return first, (times[-1] - times[0]) / max(len(times) - 1, 1), len(times)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--chars", type=int, default=20_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        env = {
            **os.environ,
            "XDG_STATE_HOME": str(root / "state"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "CLAUDE_CONFIG_DIR": str(root / "claude"),
        }
        for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
            env.pop(key, None)
        words = " ".join("word" for _ in range(options.chars // 5))
        script = root / "script.json"
        script.write_text(json.dumps([{"text": words}]))
        acp_runs: list[tuple[float, float, int]] = []
        json_runs: list[tuple[float, float, int]] = []
        for run in range(options.runs + 1):  # the first of each is unmeasured (compiles)
            folder = root / f"p{run}"
            folder.mkdir()
            a = await _acp(folder, env, script)
            j = await _json(folder, env, script)
            if run:
                acp_runs.append(a)
                json_runs.append(j)
    acp_first = statistics.median(r[0] for r in acp_runs)
    json_first = statistics.median(r[0] for r in json_runs)
    acp_chunk = statistics.median(r[1] for r in acp_runs)
    json_chunk = statistics.median(r[1] for r in json_runs)
    print(
        f"first update   acp {acp_first * 1000:7.1f} ms | --json {json_first * 1000:7.1f} ms "
        f"(with its process start) | ratio {acp_first / json_first:.2f} (target <= 1.2)"
    )
    print(
        f"per update     acp {acp_chunk * 1e6:7.1f} us ({acp_runs[0][2]} updates) | --json "
        f"{json_chunk * 1e6:7.1f} us ({json_runs[0][2]} lines) | ratio "
        f"{acp_chunk / json_chunk:.2f} (target <= 1.2)"
    )


if __name__ == "__main__":
    asyncio.run(main())
