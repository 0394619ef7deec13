"""What the sandbox adds to a command: ``true`` and ``git status`` in a 1,000-file repository,
each run under :class:`pico3.Sandbox` (bubblewrap) and unsandboxed, interleaved in the same run.

Both sides start ``bash -c COMMAND`` the way the ``bash`` tool does (a new session, the
session's environment); the sandboxed side's argv is :meth:`pico3.Sandbox.wrap`'s (a fresh
user, mount, PID and network namespace, the file system read-only but the project and the
temporary folder, the credentials hidden). Each side does ``WARMUP`` runs, then ``RUNS`` timed
ones, alternating so both see the same machine load. Prints the medians and p90s and the
difference.

Run: ``uv run python benchmarks/sandbox.py`` (target: the sandbox adds <= 30 ms to the median).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pico3 import Sandbox, SandboxPolicy, sandbox_available

WARMUP = 5
RUNS = 40
FILES = 1000


def _repo(root: Path) -> Path:
    repo = root / "repo"
    for index in range(FILES):
        folder = repo / f"d{index // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{index}.txt").write_text(f"file {index}\n")
    git = ["git", "-c", "user.email=b@b", "-c", "user.name=b"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "files"], cwd=repo, check=True)
    return repo


def _time(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True, start_new_session=True
    )
    return (time.perf_counter() - start) * 1000


def _line(name: str, plain: list[float], boxed: list[float]) -> str:
    def p90(values: list[float]) -> float:
        return statistics.quantiles(values, n=10)[-1]

    added = statistics.median(boxed) - statistics.median(plain)
    return (
        f"{name:<12} unsandboxed median {statistics.median(plain):6.1f} ms p90 {p90(plain):6.1f}"
        f" | sandboxed median {statistics.median(boxed):6.1f} ms p90 {p90(boxed):6.1f}"
        f" | added {added:+6.1f} ms (target <= 30)"
    )


def main() -> int:
    status = sandbox_available()
    if not status.available:
        print(f"no sandbox here: {status.reason}")
        return 1
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        repo = _repo(root)
        sandbox = Sandbox(SandboxPolicy(str(repo), str(root / "tmp")), status)
        env = dict(os.environ)
        for name, command in (("true", "true"), ("git status", "git status --porcelain")):
            plain_argv = ["bash", "-c", command]
            boxed_argv, boxed_env = sandbox.wrap(plain_argv, cwd=str(repo), env=env)
            plain: list[float] = []
            boxed: list[float] = []
            for run in range(WARMUP + RUNS):
                a = _time(plain_argv, repo, env)
                b = _time(boxed_argv, repo, boxed_env)
                if run >= WARMUP:
                    plain.append(a)
                    boxed.append(b)
            print(_line(name, plain, boxed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
