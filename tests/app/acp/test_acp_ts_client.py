"""``coding-agent acp`` driven by the TypeScript SDK's client (``@agentclientprotocol/sdk`` from
npm, pinned) under node, as an editor built on it would (issue 43 deliver 1): initialize,
session/new, a prompt whose answer streams, a permission request answered.

The package is installed once with npm into ``tests/interop/.cache/acp-sdk`` (ignored by git);
without node and npm the test is skipped, except in CI (``CI=true``) where it fails, as the other
interop tests (``tests/interop/node_env.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_support import BINARY, TIMEOUT

pytestmark = pytest.mark.anyio

PACKAGE = "@agentclientprotocol/sdk"
VERSION = "2.4.0"
ROOT = Path(__file__).resolve().parents[3]
CACHE = ROOT / "tests" / "interop" / ".cache" / "acp-sdk"
SCRIPT = Path(__file__).with_name("ts_editor.mjs")


def unavailable(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def installed() -> Path:
    """The folder holding the pinned SDK and the editor script (installed on first use)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        unavailable(f"{PACKAGE} needs node and npm on PATH (apt-get install nodejs npm)")
    assert npm is not None
    manifest = CACHE / "node_modules" / PACKAGE / "package.json"
    if not manifest.exists() or json.loads(manifest.read_text())["version"] != VERSION:
        CACHE.mkdir(parents=True, exist_ok=True)
        (CACHE / "package.json").write_text('{"private": true, "type": "module"}\n')
        try:
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--ignore-scripts",
                 "--prefix", str(CACHE), f"{PACKAGE}@{VERSION}"],
                capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            unavailable(f"npm did not install {PACKAGE}@{VERSION} within 300 s (no network?)")
            raise
        if done.returncode != 0 or not manifest.exists():
            tail = "\n".join(done.stderr.strip().splitlines()[-5:])
            unavailable(f"npm could not install {PACKAGE}@{VERSION}:\n{tail}")
    staged = CACHE / SCRIPT.name  # next to node_modules, so node resolves the package
    if not staged.exists() or staged.read_bytes() != SCRIPT.read_bytes():
        staged.write_bytes(SCRIPT.read_bytes())
    return staged


async def test_the_typescript_sdks_client_drives_the_real_binary(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    script = installed()
    node = shutil.which("node")
    assert node is not None
    project = tmp_path / "project"
    project.mkdir()
    steps = [
        {"text": "Writing the list.",
         "toolCalls": [{"name": "write", "arguments": {"path": "list.txt", "content": "milk\n"}}]},
        {"text": "The list is written."},
    ]  # fmt: skip
    faux = tmp_path / "script.json"
    faux.write_text(json.dumps(steps))
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    with anyio.fail_after(TIMEOUT):
        done = await anyio.run_process(
            [node, str(script), str(BINARY), "acp", "--faux-script", str(faux)],
            cwd=project, env=env, check=False, stderr=sys.stderr.fileno(),
        )  # fmt: skip
    lines = done.stdout.decode().splitlines()
    assert done.returncode == 0 and lines[-1] == "done", lines
    seen: list[dict[str, Any]] = [json.loads(line) for line in lines[:-1]]
    kinds = [item["kind"] for item in seen]
    init = seen[kinds.index("initialize")]["value"]
    assert init["agentCapabilities"]["loadSession"] is True
    assert init["agentInfo"]["name"] == "coding-agent"
    session = seen[kinds.index("session")]["value"]
    assert session["modes"]["currentModeId"] == "ask"
    updates = [item["value"] for item in seen if item["kind"] == "update"]
    text = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert text == "Writing the list.The list is written."
    (asked,) = [item["value"] for item in seen if item["kind"] == "permission"]
    assert asked == {
        "title": "write list.txt",
        "options": ["allow_once", "allow_always", "reject_once"],
    }
    finished = [u for u in updates if u.get("status") == "completed"]
    assert finished[0]["content"][-1] == {
        "type": "diff", "path": str(project / "list.txt"), "newText": "milk\n"
    }  # fmt: skip
    assert seen[kinds.index("stop")]["value"]["stopReason"] == "end_turn"
    assert kinds.index("permission") < kinds.index("stop")
    assert (project / "list.txt").read_text() == "milk\n"
