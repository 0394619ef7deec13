"""What the sandbox adds to a command: ``true`` and ``git status`` in a 1,000-file repository,
and ``true`` in a monorepo of ``MONOREPO`` packages (2,000 folders three levels down, a
``.vscode`` in every package: what the sandbox looks for in a project's folders), each run
under :class:`pico3.Sandbox` (bubblewrap) and unsandboxed, interleaved in the same run; and to
a whole task: the tour's edit task in ``sandbox`` mode against ``auto``.

Both sides start ``bash -c COMMAND`` the way the ``bash`` tool does (a new session, the
session's environment); the sandboxed side is timed from :meth:`pico3.Sandbox.wrap`, called
for each run as the tool does (the app's policy, :func:`coding_agent.settings.sandbox.
sandbox_policy`: a fresh user, mount, PID and network namespace, the file system read-only but
the project and the temporary folder, the credentials hidden; the repository and what runs
code in the project's folders read-only, the placeholders laid and removed: a ``bash`` wrapper
and ``flock`` around bubblewrap), to the end of its output. Each side does ``WARMUP`` runs,
then ``RUNS`` timed ones, alternating so both see the same machine load. Prints the medians and
p90s and the difference.

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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coding_agent.settings.sandbox import sandbox_policy, session_sandbox
from pico3 import Sandbox, sandbox_available

WARMUP = 5
RUNS = 40
FILES = 1000
MONOREPO = 20
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


def _monorepo(root: Path) -> Path:
    """``MONOREPO`` packages of 10 modules of 10 folders each, a ``.vscode`` in each package;
    its folders dated an hour back, as an existing project's (the sandbox lists again only the
    folders changed since its last look, and those changed in the last 2 s:
    :mod:`pico3.sandbox_scan`)."""
    repo = root / "monorepo"
    for package in range(MONOREPO):
        (repo / f"p{package}" / ".vscode").mkdir(parents=True)
        for module in range(10):
            for folder in range(10):
                (repo / f"p{package}" / f"m{module}" / f"f{folder}").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    an_hour_ago = time.time_ns() - 3600 * 10**9  # a project's folders, not all just made
    for folder, _, _ in os.walk(repo):
        os.utime(folder, ns=(an_hour_ago, an_hour_ago))
    return repo


def _time(argv: list[str], cwd: Path, env: dict[str, str], sandbox: Sandbox | None = None) -> float:
    """One run's wall time (ms): with ``sandbox``, wrapped first, as the ``bash`` tool does;
    to the end of its output, as the tool reads it."""
    start = time.perf_counter()
    if sandbox is not None:
        argv, env = sandbox.wrap(argv, cwd=str(cwd), env=env)
    subprocess.run(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, check=True, start_new_session=True
    )
    return (time.perf_counter() - start) * 1000


def _line(name: str, plain: list[float], boxed: list[float]) -> str:
    def p90(values: list[float]) -> float:
        return statistics.quantiles(values, n=10)[-1]

    added = statistics.median(boxed) - statistics.median(plain)
    return (
        f"{name:<14} unsandboxed median {statistics.median(plain):6.1f} ms p90 {p90(plain):6.1f}"
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
        env = dict(os.environ)
        made: list[Path] = []  # the sessions' temporary folders, removed at the end
        rows = [
            ("true", "true", _repo(root)),
            ("git status", "git status --porcelain", root / "repo"),
            ("true, monorepo", "true", _monorepo(root)),
        ]
        for name, command, repo in rows:
            # the app's policy of a session in that project (the placeholders of the folders
            # no command may create are made and removed by each run)
            policy = sandbox_policy(repo, f"bench-{os.getpid()}", env=env)
            sandbox = session_sandbox(policy, env)
            assert isinstance(sandbox, Sandbox), sandbox
            made.append(Path(policy.temp_dir))
            plain_argv = ["bash", "-c", command]
            plain: list[float] = []
            boxed: list[float] = []
            for run in range(WARMUP + RUNS):
                a = _time(plain_argv, repo, env)
                b = _time(plain_argv, repo, env, sandbox)
                if run >= WARMUP:
                    plain.append(a)
                    boxed.append(b)
            print(_line(name, plain, boxed))
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
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
