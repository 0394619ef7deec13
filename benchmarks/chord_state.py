"""Benchmark: replicated-state changes through the wire, ours against the real Chord 0.87.1.

Each workload runs ``change()`` on a mutable replicated state; a source listener (the op stream a
remote provider uses) encodes every revision's ops with the stateful wire encoder, turns them into
JSON text, parses, decodes and applies them to a replica with ``apply_immutable``. We report
changes per second and wire bytes per change (compact JSON of the encoded batch).

Workloads (the issue's numbers; ``--quick`` divides N by 10):

* stream-append: N changes, each appending 32 characters to ``turn.message.content[0].text``;
* entries-push: N pushes of a small object onto ``entries``;
* tool-output: 8 tool slots; each change appends one line to one slot's ``output``.

The same workloads run on @earendil-works/chord 0.87.1 under node in the same run (installed once
from the npm registry into ``benchmarks/.cache/chord-node``) and the ratio ours/Chord is printed.
Without node, or if the install fails, the baseline is skipped with the reason.

Run: ``uv run python benchmarks/chord_state.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chord import delta
from chord.context import BACKGROUND
from chord.state import replicated_state

CHORD_VERSION = "0.87.1"
CACHE = Path(__file__).resolve().parent / ".cache" / "chord-node"
CHUNK = "x" * 31 + "\n"
ENTRY_TEXT = "a short entry"
SLOTS = 8

Workload = tuple[str, Any, Callable[[int], Callable[[Any], None]]]


def _append_chunk(i: int) -> Callable[[Any], None]:
    def mutate(d: Any) -> None:
        d["turn"]["message"]["content"][0]["text"] += CHUNK

    return mutate


def _push_entry(i: int) -> Callable[[Any], None]:
    def mutate(d: Any) -> None:
        d["entries"].append({"id": i, "kind": "note", "text": ENTRY_TEXT})

    return mutate


def _tool_line(i: int) -> Callable[[Any], None]:
    def mutate(d: Any) -> None:
        d["tools"][i % SLOTS]["output"] += f"line {i}\n"

    return mutate


def workloads() -> list[Workload]:
    return [
        (
            "stream-append",
            {"turn": {"message": {"role": "assistant", "content": [{"type": "text", "text": ""}]}}},
            _append_chunk,
        ),
        ("entries-push", {"entries": []}, _push_entry),
        (
            "tool-output",
            {"tools": [{"id": f"tool-{k}", "output": ""} for k in range(SLOTS)]},
            _tool_line,
        ),
    ]


def run_ours(
    initial: Any, make: Callable[[int], Callable[[Any], None]], n: int
) -> tuple[float, float]:
    """(changes/s, wire bytes/change) for n changes through change → wire → apply_immutable."""
    state = replicated_state(json.loads(json.dumps(initial)))
    enc, dec = delta.encoder(), delta.decoder()
    replica: list[Any] = [json.loads(json.dumps(initial))]
    wire_bytes = [0]

    def on_ops(ops: Any, sequence: int, ctx: Any) -> None:
        text = json.dumps(enc.encode(ops), separators=(",", ":"), ensure_ascii=False)
        wire_bytes[0] += len(text.encode())
        replica[0] = delta.apply_immutable(replica[0], dec.decode(json.loads(text)))

    state.add_source_listener(on_ops)
    mutations = [make(i) for i in range(n)]
    start = time.perf_counter()
    for mutate in mutations:
        state.change(BACKGROUND, mutate)
    elapsed = time.perf_counter() - start
    if replica[0] != state.value:
        raise AssertionError("the replica diverged from the state")
    return n / elapsed, wire_bytes[0] / n


_JS = r"""
import { pathToFileURL } from "node:url";
import { join } from "node:path";
const root = process.argv[2];
const n = Number(process.argv[3]);
const pkg = join(root, "node_modules", "@earendil-works", "chord", "dist");
const chord = await import(pathToFileURL(join(pkg, "index.js")).href);
const delta = await import(pathToFileURL(join(pkg, "delta", "index.js")).href);
const internals = await import(pathToFileURL(join(pkg, "services", "state-internals.js")).href);
const ctx = (await import(pathToFileURL(join(pkg, "context", "index.js")).href)).BACKGROUND_CONTEXT;
const CHUNK = "x".repeat(31) + "\n";
const SLOTS = 8;
const workloads = [
  ["stream-append", { turn: { message: { role: "assistant", content: [{ type: "text", text: "" }] } } },
    () => (d) => { d.turn.message.content[0].text += CHUNK; }],
  ["entries-push", { entries: [] },
    (i) => (d) => { d.entries.push({ id: i, kind: "note", text: "a short entry" }); }],
  ["tool-output", { tools: Array.from({ length: SLOTS }, (_, k) => ({ id: `tool-${k}`, output: "" })) },
    (i) => (d) => { d.tools[i % SLOTS].output += `line ${i}\n`; }],
];
const results = {};
for (const [name, initial, make] of workloads) {
  const state = chord.replicatedState(JSON.parse(JSON.stringify(initial)));
  const enc = delta.encoder();
  const dec = delta.decoder();
  let replica = JSON.parse(JSON.stringify(initial));
  let bytes = 0;
  internals.getReplicatedStateInternals(state).subscribe((ops) => {
    const text = JSON.stringify(enc.encode(ops));
    bytes += Buffer.byteLength(text);
    replica = delta.applyImmutable(replica, dec.decode(JSON.parse(text)));
  });
  const mutations = Array.from({ length: n }, (_, i) => make(i));
  const start = performance.now();
  for (const mutate of mutations) state.change(ctx, mutate);
  const elapsed = (performance.now() - start) / 1000;
  if (JSON.stringify(replica) !== JSON.stringify(state.value)) throw new Error(`${name}: replica diverged`);
  results[name] = [n / elapsed, bytes / n];
}
console.log(JSON.stringify(results));
"""


def run_chord(n: int) -> tuple[dict[str, tuple[float, float]] | None, str]:
    """Chord's numbers per workload, or None and the reason the baseline was skipped."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None, "node/npm not found on PATH"
    package = CACHE / "node_modules" / "@earendil-works" / "chord" / "package.json"
    installed = package.exists() and json.loads(package.read_text()).get("version") == CHORD_VERSION
    if not installed:
        CACHE.mkdir(parents=True, exist_ok=True)
        install = subprocess.run(
            [npm, "install", "--prefix", str(CACHE), f"@earendil-works/chord@{CHORD_VERSION}"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if install.returncode != 0:
            return None, f"npm install failed: {install.stderr.strip()[-300:]}"
    script = CACHE / "chord_state_bench.mjs"
    script.write_text(_JS)
    run = subprocess.run(
        [node, str(script), str(CACHE), str(n)], capture_output=True, text=True, timeout=1800
    )
    if run.returncode != 0:
        return None, f"node failed: {run.stderr.strip()[-300:]}"
    raw = json.loads(run.stdout.strip().splitlines()[-1])
    return {name: (float(v[0]), float(v[1])) for name, v in raw.items()}, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="N / 10 (a smoke run)")
    parser.add_argument("-n", type=int, default=None, help="changes per workload (default 20000)")
    args = parser.parse_args(argv)
    n = args.n or (2_000 if args.quick else 20_000)
    chord, reason = run_chord(n)
    if chord is None:
        print(f"Chord {CHORD_VERSION} baseline skipped: {reason}")
    for name, initial, make in workloads():
        rate, size = run_ours(initial, make, n)
        line = f"{name}: ours {rate:,.0f} changes/s, {size:.1f} B/change"
        if chord is not None and name in chord:
            their_rate, their_size = chord[name]
            line += (
                f" | chord {their_rate:,.0f} changes/s, {their_size:.1f} B/change"
                f" | ratio {rate / their_rate:.1f}x"
            )
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
