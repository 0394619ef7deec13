"""The indexer survives SIGKILL (issue 7 "Tests"; docs/design/harness.md#task-kinds).

A real child process (``_crash_worker.py``) indexes a real tree on ``JsonlStorage(fsync=False)``
and is SIGKILLed right after a batch write, before the commit that records it: the checkpoint is
the in-flight ``writing{batchKey}``. The next process re-enters that phase, repeats the write
with the same key (the store answers "held"), carries on mid-scan, and completes with the right
file count. Every attempt is logged by key, so the test sees the repeat and that each batch was
written once logically.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from facets_indexer.contract import INDEX_FILE_NAME
from facets_indexer.store import IndexStore
from tests.crash_child import child_line

CHILD = Path(__file__).with_name("_crash_worker.py")
FILES = 26  # batches of 4: seven batches, the last one short
BATCHES = 7


def make_tree(root: Path) -> None:
    for i in range(FILES):
        path = root / f"pkg{i % 3}" / f"mod{i:02d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def handler_{i}():\n    return 'token{i}'\n")
    (root / ".gitignore").write_text("*.tmp\n")  # listed and indexed: 27 files
    (root / "scratch.tmp").write_text("def handler_ignored(): pass\n")


def attempts(directory: Path) -> list[tuple[str, str]]:
    lines = (directory / "attempts").read_text().splitlines()
    return [(key, what) for key, what in (line.split(" ") for line in lines)]


def kill_after_attempt(directory: Path, n: int) -> str:
    line = child_line(CHILD, directory, str(n), kill=True)
    assert line.startswith("parked ")
    return line.removeprefix("parked ")


def recover(directory: Path) -> dict[str, object]:
    line = child_line(CHILD, directory, "recover", kill=False)
    assert line.startswith("done ")
    return json.loads(line.removeprefix("done "))


def check_index(directory: Path) -> None:
    with IndexStore.open(directory / "state" / INDEX_FILE_NAME) as store:
        stats = store.stats()
        assert (stats.files, stats.batches) == (FILES + 1, BATCHES)
        assert [hit.path for hit in store.search("token17")] == ["pkg2/mod17.py"]
        assert store.search("handler_ignored") == []


def test_a_run_killed_between_a_batch_write_and_its_commit_resumes_and_completes(
    tmp_path: Path,
) -> None:
    make_tree(tmp_path / "repo")
    killed_key = kill_after_attempt(tmp_path, 3)
    assert [what for _key, what in attempts(tmp_path)] == ["written"] * 3
    outcome = recover(tmp_path)
    assert outcome == {
        "status": "completed",
        "result": {"files": FILES + 1, "batches": BATCHES, "removed": 0},
    }
    log = attempts(tmp_path)
    # The in-flight phase repeated the killed batch's write with the same key; the store held it.
    assert log[3] == (killed_key, "held")
    per_key = Counter(key for key, _what in log)
    assert len(per_key) == BATCHES
    assert per_key[killed_key] == 2 and all(
        count == 1 for key, count in per_key.items() if key != killed_key
    )
    # Each batch was written once logically: one "written" per key.
    assert sorted(key for key, what in log if what == "written") == sorted(per_key)
    check_index(tmp_path)


def test_a_run_killed_twice_mid_scan_still_completes_with_the_right_file_count(
    tmp_path: Path,
) -> None:
    make_tree(tmp_path / "repo")
    first = kill_after_attempt(tmp_path, 2)
    second = kill_after_attempt(tmp_path, 3)  # the recovery's own third attempt: a later batch
    assert first != second
    outcome = recover(tmp_path)
    assert outcome == {
        "status": "completed",
        "result": {"files": FILES + 1, "batches": BATCHES, "removed": 0},
    }
    log = attempts(tmp_path)
    written = [key for key, what in log if what == "written"]
    assert len(written) == len(set(written)) == BATCHES
    assert Counter(key for key, _what in log) == Counter(
        {key: 2 if key in (first, second) else 1 for key in written}
    )
    check_index(tmp_path)
