"""The real @earendil-works/chord 0.87.1 for the interop tests: node, npm and a cached install.

:func:`chord_cache` installs the package once with npm into ``tests/interop/.cache`` (ignored by
git) and returns that folder; scripts run from there so Node resolves the package. Without node
or npm the tests are skipped, except in CI (``CI=true``), where they fail: an interop suite that
silently never runs proves nothing. ``.ci/run`` installs node and npm when they are missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHORD_PACKAGE = "@earendil-works/chord"
CHORD_VERSION = "0.87.1"
CACHE = Path(__file__).resolve().parent / ".cache"


def node_and_npm() -> tuple[str, str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        message = "the Chord interop tests need node and npm on PATH (apt-get install nodejs npm)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return node, npm


def chord_cache() -> Path:
    """The folder holding ``node_modules/@earendil-works/chord`` at exactly 0.87.1."""
    _, npm = node_and_npm()
    manifest = CACHE / "node_modules" / CHORD_PACKAGE / "package.json"
    if manifest.exists() and json.loads(manifest.read_text())["version"] == CHORD_VERSION:
        return CACHE
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "package.json").write_text('{"private": true, "type": "module"}\n')
    result = subprocess.run(
        [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--prefix",
            str(CACHE),
            f"{CHORD_PACKAGE}@{CHORD_VERSION}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0 or not manifest.exists():
        pytest.fail(f"npm could not install {CHORD_PACKAGE}@{CHORD_VERSION}:\n{result.stderr}")
    return CACHE


def staged_script(source: Path) -> Path:
    """``source`` copied next to the cached node_modules, so ``import`` finds the package."""
    target = chord_cache() / source.name
    data = source.read_bytes()
    if not target.exists() or target.read_bytes() != data:
        target.write_bytes(data)
    return target
