"""Issue 40: the published reference server, ``@modelcontextprotocol/server-everything`` from
npm, configured exactly as its README says for Claude Code (``npx -y`` and the package name).

The package is installed once (pinned) into ``tests/facets/mcp_feature/.cache`` (ignored by git)
and the server's working folder is that one, so ``npx`` runs the installed copy without a
download during the test. Its tools are offered and called through the approval path
(``echo``, ``get-sum``), an exported variable reaches it (``get-env``), and an
``@everything:demo://...`` mention attaches one of its documents.

Without npm, or when npm cannot install the package (no network to its registry), the test is
skipped saying which; in CI (``CI=true``; ``.ci/run`` installs node and npm) it fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp_support import SDK_LEAKS, session, write_config

from pico3 import Models
from pico3.models import UserMessage
from pico3.models.faux import FauxProvider, faux_response, faux_tool_call

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]

PACKAGE = "@modelcontextprotocol/server-everything"
VERSION = "2026.8.31"
CACHE = Path(__file__).resolve().parent / ".cache" / "server-everything"
DOCUMENT = "demo://resource/static/document/architecture.md"


def unavailable(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def installed() -> Path:
    """The folder whose ``node_modules`` holds the pinned server (installed on first use)."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("npx") is None or shutil.which("node") is None:
        unavailable(f"{PACKAGE} needs node, npm and npx on PATH (apt-get install nodejs npm)")
    assert npm is not None
    manifest = CACHE / "node_modules" / PACKAGE / "package.json"
    if manifest.exists() and json.loads(manifest.read_text())["version"] == VERSION:
        return CACHE
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "package.json").write_text('{"private": true}\n')
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(CACHE),
             f"{PACKAGE}@{VERSION}"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        unavailable(f"npm did not install {PACKAGE}@{VERSION} within 300 s (no network?)")
        raise
    if done.returncode != 0 or not manifest.exists():
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        unavailable(
            f"npm could not install {PACKAGE}@{VERSION} (no network to its registry?):\n{tail}"
        )
    return CACHE


def user_texts(request: Any) -> list[str]:
    texts: list[str] = []
    for message in request.messages:
        if isinstance(message, UserMessage) and not isinstance(message.content, str):
            texts.extend(b.text for b in message.content)  # type: ignore[union-attr]
    return texts


async def test_the_published_reference_server_works_as_configured_for_claude_code(
    tmp_path: Path,
) -> None:
    folder = installed()
    write_config(
        tmp_path / "config",
        {"everything": {"command": "npx", "args": ["-y", PACKAGE]}},  # its README's entry
    )
    provider = FauxProvider(
        [
            faux_response(
                faux_tool_call("mcp__everything__echo", {"message": "hi"}, id="a"),
                faux_tool_call("mcp__everything__get-sum", {"a": 2, "b": 3}, id="b"),
                faux_tool_call("mcp__everything__get-env", {}, id="c"),
            ),
            faux_response("done"),
        ]
    )
    services = {
        "models": Models([provider]),
        "workspace": str(folder),
        "mcp_env": {"PATH": os.environ["PATH"], "EXPORTED_BY_USER": "reached-the-server"},
    }
    async with session(tmp_path, services=services) as s:
        ready = await s.server("everything", "ready")
        assert {"echo", "get-sum", "get-env"} <= {t["tool"] for t in ready["tools"]}
        echo, total, env = await s.turn(f"Read @everything:{DOCUMENT} then call the tools")
    assert echo["content"][0]["text"] == "Echo: hi"
    assert "5" in total["content"][0]["text"]
    assert "reached-the-server" in env["content"][0]["text"]
    attached = user_texts(provider.state.requests[0])
    assert attached[1].startswith(f'<resource server="everything" uri="{DOCUMENT}">\n')
    assert len(attached[1]) > 200
