"""A real crash inside the indexer's in-flight phase (docs/design/harness.md#task-kinds;
issue 6 crash tests).

A child process runs the seed indexer on JSONL storage and is SIGKILLed after the first batch's
effect and before the next checkpoint, the worst case of docs/design/storage.md#worst-cases. A second child reopens
the session: recovery enters the in-flight phase ``writing``, which repeats the write *with the
same key*; the fake idempotent sink sees that key twice and keeps one logical write.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.crash_child import child_line

CHILD = Path(__file__).with_name("_indexer_crash_child.py")


def deliveries(sink: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in sink.read_text().splitlines()]


def test_sigkill_inside_the_inflight_phase_repeats_the_keyed_effect_after_reopen(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("a.py", "b.py", "c.py"):
        (repo / name).write_text(name)

    # killed once the effect is done, before the next checkpoint
    assert child_line(CHILD, tmp_path, "park", kill=True) == "parked b.py"
    assert deliveries(tmp_path / "sink") == [{"key": "b.py", "files": ["a.py", "b.py"]}]

    line = child_line(CHILD, tmp_path, "recover", kill=False)
    assert line.startswith("done ")
    outcome = json.loads(line.removeprefix("done "))
    # As the example is written, `writing`'s recovery does not re-count the batch's files.
    assert outcome == {"status": "completed", "result": {"files": 1}}
    assert deliveries(tmp_path / "sink") == [
        {"key": "b.py", "files": ["a.py", "b.py"]},
        {"key": "b.py", "files": None},  # the in-flight phase's recovery write: same key
        {"key": "c.py", "files": ["c.py"]},
    ]
    logical = {record["key"] for record in deliveries(tmp_path / "sink")}
    assert logical == {"b.py", "c.py"}  # one logical write per key
