"""Child process of the crash tests: runs a turn on JSONL storage until a crash point, prints
``READY`` and waits to be SIGKILLed. Usage: ``crash_child.py SCENARIO DIRECTORY``.

Scenarios: ``before_started`` (a before_tool hook hangs), ``safe_started`` / ``unsafe_started``
(the tool recorded its effect and hangs), ``stream`` / ``stream_no_retry`` (the model stream
hangs mid-answer; the second with retries disabled), ``before_request`` (fsync on: a
``before_request`` hook hangs, the "prepared" checkpoint, committed without waiting for its
write, still queued).
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import anyio

from chord.context import BACKGROUND, Context
from pico3.harness import Harness, HarnessOptions
from pico3.models.faux import FauxProvider, faux_pause, faux_response, faux_tool_call
from pico3.storage import JsonlStorage
from pico3.tools import ToolApi, ToolDeclaration, ToolResult
from pico3.turn.model_call import MODEL_CALL_KIND
from pico3.turn.models import Models
from pico3.turn.tool import TOOL_KIND

MODEL = {"provider": "faux", "modelId": "faux-1"}


def _record(directory: Path, key: str) -> None:
    with open(directory / "effects.txt", "a") as f:
        f.write(key + "\n")


def effect_tool(directory: Path, *, replay: str, hang: bool) -> ToolDeclaration:
    """A tool with an external effect: one line per run in ``effects.txt``, keyed by a memo
    written before the effect."""

    async def run(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        key = await api.memo("key", uuid.uuid4().hex, ctx)
        _record(directory, key)
        if hang:
            print("READY", flush=True)
            await anyio.sleep_forever()
        return ToolResult.text(f"effect {key}")

    return ToolDeclaration(
        "effect",
        "Has an effect.",
        {"type": "object"},
        run,
        replay=replay,  # type: ignore[arg-type]
    )


async def main(scenario: str, directory: Path) -> None:
    never = anyio.Event()
    if scenario.startswith("stream"):
        script = [faux_response("partial answer words ", faux_pause(never), "never")]
    else:
        script = [faux_response(faux_tool_call("effect", {}))]
    options = HarnessOptions(
        require_approval=False, services={"models": Models([FauxProvider(script)])}
    )
    fsync = scenario == "before_request"  # group commit (the queue) needs fsync on
    harness = await Harness.open(
        JsonlStorage(directory / "store", fsync=fsync), options, BACKGROUND
    )
    async with harness:
        replay = "safe" if scenario == "safe_started" else "unsafe"
        harness.register_tool(
            effect_tool(directory, replay=replay, hang=scenario != "before_started")
        )
        if scenario == "before_started":
            ns = harness.namespace("crash")

            async def hang(call: Any, api: Any, ctx: Context) -> None:
                print("READY", flush=True)
                await anyio.sleep_forever()

            harness.hooks(ns, TOOL_KIND, {"before_tool": hang})
        if scenario == "before_request":
            ns = harness.namespace("crash")

            async def hang_request(request: Any, api: Any, ctx: Context) -> None:
                print("READY", flush=True)
                await anyio.sleep_forever()

            harness.hooks(ns, MODEL_CALL_KIND, {"before_request": hang_request})
        root = await harness.root(BACKGROUND)
        config: dict[str, Any] = {"model": MODEL, "selectedTools": ["effect"]}
        if scenario == "stream_no_retry":
            config["retry"] = {
                "enabled": False,
                "maxRetries": 3,
                "baseDelayMs": 10,
                "maxAgentDelayMs": 10,
            }
        await root.set_config(config, BACKGROUND)
        watch = await root.watch(BACKGROUND)

        def listen(envelope: Any) -> None:
            if scenario.startswith("stream") and any(
                list(op[1])[:2] == ["turn", "message"] and op[0] == "a" for op in envelope.ops
            ):
                print("READY", flush=True)

        watch.start(listen)
        await harness.resume(BACKGROUND)
        await root.send("go", BACKGROUND)
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], Path(sys.argv[2]))
