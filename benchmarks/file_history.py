"""Benchmark: the disk file history uses for a session's first ``bash`` command (issue 38, 9).

A checkout is generated (``--files`` files of ``--size`` bytes each, under a few folders,
committed to a fresh git repository) and a session's first foreground ``bash`` command is
replayed the way the worker wraps one: :meth:`FileHistory.snapshot` before, the command's effect
(``--changed`` files appended to, one deleted, one made), the snapshot after, and
:meth:`FileHistory.record_changes`. Printed for each case: the bytes file history stored (the
session's ``file-history`` folder and the project's shared store) next to the checkout's size:

* **git checkout, first session** — what the issue measured (8.2 MB stored for a 6.7 MB
  checkout before): now only the changed files' earlier contents and the journal;
* **git checkout, second session** — a second session of the same project, same command;
* **plain folder, first / second session** — the same files without git: the first session
  copies them (within the caps: 1 MiB a file, 16 MiB a run), the second finds them stored.

Run: ``uv run python benchmarks/file_history.py [--files N] [--size BYTES] [--changed N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from coding_agent.worker.file_history import FileHistory


def _generate(project: Path, files: int, size: int) -> int:
    for number in range(files):
        folder = project / f"pkg{number % 8}"
        folder.mkdir(parents=True, exist_ok=True)
        line = f"line of file {number:05d}\n".encode()
        (folder / f"module{number:05d}.py").write_bytes((line * (size // len(line) + 1))[:size])
    return files * size


def _git(project: Path, *args: str) -> None:
    env = {**os.environ, "HOME": str(project.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    identity = ("-c", "user.email=bench@example.com", "-c", "user.name=bench")
    subprocess.run(["git", *identity, *args], cwd=project, env=env, check=True, capture_output=True)


def _bytes_under(*places: Path) -> int:
    total = 0
    for place in places:
        for folder, _dirs, names in os.walk(place):
            total += sum(os.lstat(os.path.join(folder, name)).st_size for name in names)
    return total


def _first_command(project: Path, session: Path, shared: Path, changed: int, tag: str) -> float:
    """One session's first bash command; returns the seconds the two snapshots took."""
    history = FileHistory(session / "file-history", fsync=False, blobs=shared)
    started = time.perf_counter()
    before = history.snapshot(project)
    took = time.perf_counter() - started
    assert before is not None, "the project is over the snapshot limits"
    for number in range(changed):  # the command's effect
        with open(project / f"pkg{number % 8}" / f"module{number:05d}.py", "a") as file:
            file.write(f"# changed by {tag}\n")
    (project / "pkg7" / f"module{changed + 7:05d}.py").unlink(missing_ok=True)
    (project / f"made-by-{tag}.txt").write_text("new\n")
    started = time.perf_counter()
    after = history.snapshot(project, keep=False)
    assert after is not None
    history.record_changes(before, after, conversation=1, anchor=1)
    return took + time.perf_counter() - started


def _case(root: Path, name: str, *, git: bool, files: int, size: int, changed: int) -> None:
    project = root / name / "project"
    checkout = _generate(project, files, size)
    if git:
        _git(project, "init", "-q", ".")
        _git(project, "add", "-A")
        _git(project, "commit", "-qm", "generated")
    shared = root / name / "projects" / "blobs"
    stored = 0
    for session in ("first", "second"):
        folder = root / name / session
        took = _first_command(project, folder, shared, changed, session)
        now = _bytes_under(root / name / "first", root / name / "second", shared)
        print(
            f"{name}, {session} session: first bash command stored {(now - stored) / 1e6:7.3f} MB"
            f" for a {checkout / 1e6:.1f} MB checkout ({100 * (now - stored) / checkout:5.2f} %,"
            f" snapshots {took * 1000:.0f} ms)"
        )
        stored = now


def main() -> None:
    parser = argparse.ArgumentParser(description="the disk of a first bash command")
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--size", type=int, default=13_400)  # 500 x 13.4 kB = the 6.7 MB
    parser.add_argument("--changed", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="file-history-bench-"))
    try:
        if shutil.which("git") is not None:
            _case(root, "git checkout", git=True, **vars(args))
        else:
            print("git checkout: skipped (git is not installed)")
        _case(root, "plain folder", git=False, **vars(args))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
