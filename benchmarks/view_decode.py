"""Benchmark: decoding the conversation view into pico3's typed records (``pico3.ViewDecoder``).

The TUI decodes every revision it renders, and while a reply streams a revision arrives per
token. This measures, on the same documents in the same run:

* **hydrate**: the first decode of a view with 10,000 entries (``app_startup.py``'s realistic
  transcript), and a re-hydrate with an equal copy of it (a reconnect) by the same decoder;
* **per streamed token**: 2,000 revisions, each appending one token to ``turn.message``
  through chord's copy-on-write state, decoded *fresh* (``view_from_json``: everything again,
  what a decoder without reuse costs) and *incrementally* (one ``ViewDecoder``: only the
  streaming message is new);
* **per new entry**: 200 revisions each appending one entry to the 10,000.

Run: ``uv run python benchmarks/view_decode.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from chord.context import BACKGROUND
from chord.state import replicated_state
from pico3 import ViewDecoder, view_from_json

sys.path.insert(0, str(Path(__file__).parent))
from app_startup import _entries, _token, _view  # a sibling script, not a package


def _streaming_revisions(entries: int, tokens: int) -> list[Any]:
    document = _view(_entries(entries))
    document["turn"] = {
        "inputs": [1],
        "tools": [],
        "generation": {"stage": "streaming", "attempt": 1},
        "message": {"role": "assistant", "content": [{"type": "text", "text": ""}]},
    }
    state = replicated_state(document, trusted=True)
    revisions: list[Any] = []
    for index in range(tokens):

        def append(doc: Any, token: str = _token(index)) -> None:
            block = doc["turn"]["message"]["content"][0]
            block["text"] = block["text"] + token

        state.change(BACKGROUND, append)
        revisions.append(state.value)
    return revisions


def _entry_revisions(entries: int, count: int) -> list[Any]:
    """The first revision (the baseline) and ``count`` more, each appending one entry."""
    state = replicated_state(_view(_entries(entries)), trusted=True)
    revisions: list[Any] = [state.value]
    extra = _entries(entries + count)[entries:]
    for entry in extra:

        def add(doc: Any, entry: dict[str, Any] = entry) -> None:
            doc["entries"].append(entry)

        state.change(BACKGROUND, add)
        revisions.append(state.value)
    return revisions


def _per_revision(revisions: list[Any], decode: Any) -> float:
    start = time.perf_counter()
    for value in revisions:
        decode(value)
    return (time.perf_counter() - start) / len(revisions)


def main(quick: bool) -> None:
    count = 2_000 if quick else 10_000
    document = _view(_entries(count))
    start = time.perf_counter()
    decoder = ViewDecoder()
    decoder.decode(document)
    hydrate = time.perf_counter() - start
    copy = msgspec.json.decode(msgspec.json.encode(document))
    start = time.perf_counter()
    decoder.decode(copy)
    rehydrate = time.perf_counter() - start
    print(f"hydrate, {count:,} entries: {1000 * hydrate:.0f} ms first decode")
    print(f"re-hydrate, an equal copy (a reconnect), same decoder: {1000 * rehydrate:.0f} ms")

    tokens = 500 if quick else 2_000
    revisions = _streaming_revisions(count, tokens)
    fresh = _per_revision(revisions[: max(20, tokens // 20)], view_from_json)
    incremental = ViewDecoder()
    incremental.decode(revisions[0])
    per_token = _per_revision(revisions[1:], incremental.decode)
    print(
        f"per streamed token, {count:,} entries: fresh decode {1000 * fresh:.2f} ms, "
        f"incremental {1e6 * per_token:.1f} µs ({fresh / per_token:,.0f}x less)"
    )

    added = _entry_revisions(count, 200)
    incremental = ViewDecoder()
    incremental.decode(added[0])
    per_entry = _per_revision(added[1:], incremental.decode)
    print(f"per new entry, {count:,} entries: incremental {1e6 * per_entry:.0f} µs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="decoding the view into typed records")
    parser.add_argument("--quick", action="store_true", help="2,000 entries, 500 tokens")
    main(parser.parse_args().quick)
