"""The real binary run headless on a faux script: the one way the CLI tests of
test_run_flags.py, test_subagent_restrictions.py, test_command_model.py,
test_headless_commands.py, test_headless_claude_edges.py, test_headless_output_format.py and
test_headless_hook_on_failure.py start it (:func:`run_scripted`; ``text=True`` for its output
decoded), and the ``--json`` entries of its stdout (:func:`json_entries`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, overload

import anyio

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120


@overload
async def run_scripted(
    project: Path, env: Mapping[str, str], steps: Any, *args: str, text: Literal[False] = False
) -> subprocess.CompletedProcess[bytes]: ...


@overload
async def run_scripted(
    project: Path, env: Mapping[str, str], steps: Any, *args: str, text: Literal[True]
) -> subprocess.CompletedProcess[str]: ...


async def run_scripted(
    project: Path, env: Mapping[str, str], steps: Any, *args: str, text: bool = False
) -> subprocess.CompletedProcess[bytes] | subprocess.CompletedProcess[str]:
    """``coding-agent --faux-script <steps> ARGS`` in ``project`` with ``env`` and no stdin;
    the script is written beside the project (``faux-script.json``). ``text=True`` decodes
    stdout and stderr (UTF-8), as ``subprocess.run``'s ``text`` does."""
    script = project.parent / "faux-script.json"
    script.write_text(json.dumps(steps))
    with anyio.fail_after(TIMEOUT):
        done = await anyio.run_process(
            [str(BINARY), "--faux-script", str(script), *args],
            env=dict(env), cwd=project, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    if not text:
        return done
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def json_entries(stdout: bytes) -> list[dict[str, Any]]:
    """The entries a ``--json`` run printed (its ``entry.added`` lines), in order."""
    lines = [json.loads(line) for line in stdout.decode().splitlines() if line.strip()]
    return [line["entry"] for line in lines if line.get("type") == "entry.added"]
