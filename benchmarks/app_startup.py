"""Benchmark: the coding agent's TUI — first paint and streaming at 2,000 tokens/s (issue 8).

Everything runs headless (Textual's ``run_test``) against a view served by a real chord
``replicated_state`` through the same :class:`~coding_agent.tui.conversation.ViewRelay` a live client
uses, so the cost of delivery is included.

* first paint, empty session: from creating the app to the first rendered frame;
* first paint, 10,000 entries (a mix of prompts, Markdown answers with code, tool calls and
  results): only the newest ``TAIL`` entries are rendered; older ones load on demand;
* streaming: a producer appends one token (~4 characters, with paragraphs, lists and code
  fences) per change at 2,000 tokens/s for a few seconds while the UI renders. Every 250 ms it
  samples the lag (tokens produced but not yet handed to the Markdown widget); a growing backlog
  shows as a lag that rises from the first half of the run to the second.

Targets (issue 8): first paint <= 1.5 s for 10,000 entries; no growing backlog.

Run: ``uv run python benchmarks/app_startup.py [--quick]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import anyio

from chord.context import BACKGROUND, Context
from chord.state import MutableReplicatedState, replicated_state
from coding_agent.tui import CodingAgentApp, SessionInfo
from coding_agent.tui.conversation import InputAbortResult, SendMode, ViewRelay
from coding_agent.tui.widgets import TAIL

SIZE = (120, 40)
TOKENS_PER_SECOND = 2000
FIRST_PAINT_TARGET = 1.5


class _Client:
    def __init__(self, document: dict[str, Any]) -> None:
        self.state: MutableReplicatedState = replicated_state(document, trusted=True)
        self.relay = ViewRelay()
        self.relay.follow(self.state)
        self.session = SessionInfo("bench-session", "/tmp/bench", "faux/faux-1", 200_000)

    @property
    def view(self) -> ViewRelay:
        return self.relay

    async def send(self, text: str, mode: SendMode, ctx: Context) -> int:
        raise NotImplementedError("the benchmark never sends")

    async def abort(self, ctx: Context) -> None:
        raise NotImplementedError("the benchmark never aborts")

    async def input_abort(self, input_id: int, ctx: Context) -> InputAbortResult:
        raise NotImplementedError("the benchmark never cancels")


def _view(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "conversation": {"id": 1},
        "entries": entries,
        "config": {"model": {"provider": "faux", "modelId": "faux-1"}},
        "inbox": [],
        "tasks": {},
        "plugins": {},
    }


_ANSWER = (
    "Here is what I found in `src/module_{n}.py`:\n\n"
    "1. The loader reads the file **twice**.\n"
    "2. The cache key ignores the mtime.\n\n"
    "```python\ndef load(path):\n    return cache.get(path) or read(path)\n```\n\n"
    "I'll fix both and run the tests."
)


def _entries(count: int) -> list[dict[str, Any]]:
    """A realistic transcript: prompt, answer with a tool call, its result, a final answer."""
    out: list[dict[str, Any]] = []
    entry_id = 0
    while len(out) < count:
        n = len(out)
        entry_id += 1
        out.append(
            {
                "id": entry_id,
                "conversationId": 1,
                "kind": "pi.user",
                "model": [{"role": "user", "content": f"Please look at module {n}."}],
            }
        )
        entry_id += 1
        call_id = f"call_{entry_id}"
        out.append(
            {
                "id": entry_id,
                "conversationId": 1,
                "kind": "pi.assistant",
                "model": [
                    {
                        "role": "assistant",
                        "stopReason": "toolUse",
                        "content": [
                            {"type": "text", "text": "Let me read it."},
                            {
                                "type": "toolCall",
                                "id": call_id,
                                "name": "read",
                                "arguments": {"path": f"src/module_{n}.py"},
                            },
                        ],
                        "usage": {
                            "input": 900,
                            "output": 40,
                            "totalTokens": 940,
                            "cost": {"total": 0.001},
                        },
                    }
                ],
            }
        )
        entry_id += 1
        out.append(
            {
                "id": entry_id,
                "conversationId": 1,
                "kind": "pi.tool_result",
                "model": [
                    {
                        "role": "toolResult",
                        "toolCallId": call_id,
                        "toolName": "read",
                        "isError": False,
                        "content": [
                            {"type": "text", "text": "\n".join(f"line {i}" for i in range(30))}
                        ],
                    }
                ],
            }
        )
        entry_id += 1
        out.append(
            {
                "id": entry_id,
                "conversationId": 1,
                "kind": "pi.assistant",
                "model": [
                    {
                        "role": "assistant",
                        "stopReason": "stop",
                        "content": [{"type": "text", "text": _ANSWER.format(n=n)}],
                        "usage": {
                            "input": 1200,
                            "output": 90,
                            "totalTokens": 1290,
                            "cost": {"total": 0.002},
                        },
                    }
                ],
            }
        )
    return out[:count]


async def first_paint(count: int) -> float:
    document = _view(_entries(count))
    start = time.perf_counter()
    app = CodingAgentApp(_Client(document))
    async with app.run_test(size=SIZE) as pilot:
        await app.wait_rendered()
        await pilot.pause()  # let the compositor paint the frame
        elapsed = time.perf_counter() - start
        assert len(app.transcript.rendered_ids) == min(count, TAIL)
    return elapsed


def _token(index: int) -> str:
    if index % 400 == 0:
        return f"\n\n## Section {index // 400}\n\n"
    if index % 120 == 0:
        return "\n\n```python\nprint('chunk')\n```\n\n"
    if index % 60 == 0:
        return "\n- a list item with `code` "
    return "word" if index % 7 else "word. "


async def streaming(seconds: float) -> None:
    document = _view(_entries(40))
    document["turn"] = {
        "inputs": [1],
        "tools": [],
        "generation": {"stage": "streaming", "attempt": 1},
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": ""}],
            "stopReason": "stop",
        },
    }
    client = _Client(document)
    app = CodingAgentApp(client)
    total = int(TOKENS_PER_SECOND * seconds)
    produced_chars = [0]
    produced_tokens = [0]
    lengths: list[int] = []  # cumulative characters after each token
    samples: list[tuple[float, int]] = []

    def rendered_chars() -> int:
        live = app.transcript.live
        markdowns = live.markdowns if live is not None else []
        return len(markdowns[0].source) if markdowns else 0

    def lag_tokens() -> int:
        rendered = rendered_chars()
        behind = 0
        index = produced_tokens[0]
        while index > 0 and lengths[index - 1] > rendered:
            index -= 1
            behind += 1
        return behind

    async def produce() -> None:
        start = time.perf_counter()
        for index in range(total):
            due = start + index / TOKENS_PER_SECOND
            delay = due - time.perf_counter()
            if delay > 0:
                await anyio.sleep(delay)
            token = _token(index)

            def append(doc: Any, token: str = token) -> None:
                block = doc["turn"]["message"]["content"][0]
                block["text"] = block["text"] + token

            client.state.change(BACKGROUND, append)
            produced_chars[0] += len(token)
            lengths.append(produced_chars[0])
            produced_tokens[0] = index + 1

    async def sample(done: anyio.Event) -> None:
        start = time.perf_counter()
        while not done.is_set():
            await anyio.sleep(0.25)
            samples.append((time.perf_counter() - start, lag_tokens()))

    async with app.run_test(size=SIZE) as pilot:
        await app.wait_rendered()
        done = anyio.Event()
        start = time.perf_counter()
        real_rate = caught_up = 0.0
        async with anyio.create_task_group() as group:
            group.start_soon(sample, done)
            await produce()
            produced_at = time.perf_counter()
            real_rate = total / (produced_at - start)
            while rendered_chars() < produced_chars[0]:
                await pilot.pause(0.005)
            caught_up = time.perf_counter() - produced_at
            done.set()
        live = app.transcript.live
        assert live is not None
        markdown = live.markdowns[0]
        parses = markdown.parse_count
    half = len(samples) // 2
    first = max((lag for _, lag in samples[:half]), default=0)
    second = max((lag for _, lag in samples[half:]), default=0)
    mean = sum(lag for _, lag in samples) / max(1, len(samples))
    growing = second > 2 * max(first, 40)
    print(
        f"streaming: {total} tokens at {real_rate:,.0f} tokens/s achieved "
        f"(target {TOKENS_PER_SECOND}/s), {app.render_passes} render passes, "
        f"{parses} Markdown parses"
    )
    print(
        f"streaming lag: mean {mean:.0f} tokens ({1000 * mean / TOKENS_PER_SECOND:.0f} ms), "
        f"max first half {first} / second half {second} tokens, caught up "
        f"{1000 * caught_up:.0f} ms after the last token"
    )
    print(
        f"streaming backlog: {'GROWING' if growing else 'none (bounded lag)'} "
        f"[target: no growing backlog] {'FAIL' if growing else 'OK'}"
    )


async def main(quick: bool) -> None:
    empty = await first_paint(0)
    print(f"first paint, empty session: {1000 * empty:.0f} ms")
    count = 1000 if quick else 10_000
    large = await first_paint(count)
    verdict = "OK" if large <= FIRST_PAINT_TARGET else "FAIL"
    print(
        f"first paint, {count:,} entries: {1000 * large:.0f} ms "
        f"[target <= {FIRST_PAINT_TARGET:.1f} s] {verdict}"
    )
    await streaming(1.5 if quick else 5.0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="TUI first paint and streaming benchmark")
    parser.add_argument("--quick", action="store_true", help="smaller runs (CI smoke)")
    args = parser.parse_args()
    anyio.run(main, args.quick, backend="asyncio")
