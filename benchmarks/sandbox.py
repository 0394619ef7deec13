"""What the sandbox adds to a command: ``true`` and ``git status`` in a 1,000-file repository,
each run under :class:`pico3.Sandbox` (bubblewrap) and unsandboxed, interleaved in the same run;
and to a whole task: the tour's edit task in ``sandbox`` mode against ``auto``.

Both sides start ``bash -c COMMAND`` the way the ``bash`` tool does (a new session, the
session's environment); the sandboxed side's argv is :meth:`pico3.Sandbox.wrap`'s (a fresh
user, mount, PID and network namespace, the file system read-only but the project and the
temporary folder, the credentials hidden; the repository read-only and the app's placeholders
laid and removed: a ``bash`` wrapper and ``flock`` around bubblewrap). Each side does ``WARMUP`` runs, then ``RUNS`` timed
ones, alternating so both see the same machine load. Prints the medians and p90s and the
difference.

**The tour's edit task** (the faux tour's steps without its question: list, read, write a notes
file, edit it, run ``ls -1 && wc -l`` on it, sum up) runs as ``coding-agent --json`` with a faux
script in a fresh project and a temporary HOME, ``TOUR_RUNS`` times in each permission mode,
alternating (which mode goes first alternates too): ``--permission-mode sandbox`` (the edits run without asking, the command inside
the sandbox) against ``--permission-mode auto`` (everything unconfined). Each run is checked:
exit 0, the notes edited, and the command sandboxed exactly in ``sandbox`` mode. The whole
process is timed (Python starting the agent dominates); the difference is the sandbox's.

Run: ``uv run python benchmarks/sandbox.py`` (target: the sandbox adds <= 30 ms to the median).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coding_agent.settings.sandbox import PROJECT_PLACEHOLDERS
from pico3 import Sandbox, SandboxPolicy, sandbox_available

WARMUP = 5
RUNS = 40
FILES = 1000
TOUR_RUNS = 7

TOUR = [
    {"text": "The files.", "toolCalls": [{"name": "ls", "arguments": {"path": "."}}]},
    {"toolCalls": [{"name": "read", "arguments": {"path": "README.md"}}]},
    {
        "toolCalls": [
            {
                "name": "write",
                "arguments": {"path": "notes.md", "content": "# Notes\n\nTopic: (to be decided)\n"},
            }
        ]
    },
    {
        "toolCalls": [
            {
                "name": "edit",
                "arguments": {
                    "path": "notes.md",
                    "edits": [{"oldText": "Topic: (to be decided)", "newText": "Topic: Testing"}],
                },
            }
        ]
    },
    {"toolCalls": [{"name": "bash", "arguments": {"command": "ls -1 && wc -l notes.md"}}]},
    {"text": "Done."},
]
"""The tour's edit task as a faux script (the built-in tour asks a question first)."""

_PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "CODING_AGENT_TOKEN")


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


def _tour(root: Path, index: int, mode: str) -> float:
    """One run of the tour's edit task in ``mode``; its wall time in ms (checked)."""
    home, project = root / f"tour{index}-{mode}", root / f"tour{index}-{mode}" / "project"
    project.mkdir(parents=True)
    (project / "README.md").write_text("A small project.\n")
    script = home / "script.json"
    script.write_text(json.dumps(TOUR))
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_KEYS}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".state"),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
    )
    agent = [sys.executable, "-m", "coding_agent.cli.main"]
    argv = [*agent, "--json", "tour", "--faux-script", str(script), "--permission-mode", mode]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True)
    took = (time.perf_counter() - start) * 1000
    if done.returncode != 0 or "Topic: Testing" not in (project / "notes.md").read_text():
        raise RuntimeError(f"the tour failed in {mode} mode: {done.stderr[-2000:]}")
    sandboxed = '"sandboxed":true' in done.stdout.replace(" ", "")
    if sandboxed != (mode == "sandbox"):
        raise RuntimeError(f"the tour's command ran sandboxed={sandboxed} in {mode} mode")
    return took


def _tour_line(auto: list[float], boxed: list[float]) -> str:
    added = statistics.median(boxed) - statistics.median(auto)
    return (
        f"tour edit task ({TOUR_RUNS} runs each, whole coding-agent --json process)  "
        f"auto median {statistics.median(auto):7.1f} ms | sandbox mode median "
        f"{statistics.median(boxed):7.1f} ms | added {added:+6.1f} ms"
    )


def main() -> int:
    status = sandbox_available()
    if not status.available:
        print(f"no sandbox here: {status.reason}")
        return 1
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        repo = _repo(root)
        # the app's project rules: its repository read-only, the placeholders of the folders
        # no command may create (each run makes and removes them: pico3.sandbox_placeholders)
        policy = SandboxPolicy(
            str(repo),
            str(root / "tmp"),
            read_only_repositories=(str(repo),),
            read_only_folders=tuple(str(repo / name) for name in PROJECT_PLACEHOLDERS),
        )
        sandbox = Sandbox(policy, status)
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
        auto: list[float] = []
        boxed_tour: list[float] = []
        _tour(root, -1, "auto")  # warm the file cache and bytecode
        for index in range(TOUR_RUNS):  # ABBA: neither mode always goes first
            for mode in ("auto", "sandbox") if index % 2 == 0 else ("sandbox", "auto"):
                (auto if mode == "auto" else boxed_tour).append(_tour(root, index, mode))
        print(_tour_line(auto, boxed_tour))
    return 0


if __name__ == "__main__":
    sys.exit(main())
