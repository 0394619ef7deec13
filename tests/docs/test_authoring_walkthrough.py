"""docs/authoring-facets.md's walk-through, executed: its ``sh`` blocks, in order, as written.

They run in one ``bash -e`` from the repository root, against real uv, pytest and the agent's
``facets`` command, with three changes that keep the test off the developer's machine state:

* ``../my-feature`` (the folder the guide creates next to the clone) becomes a temporary folder;
* ``UV_PROJECT_ENVIRONMENT`` is a relative name, so the workspace (``uv run coding-agent``) and the
  new package (``uv run pytest``) each get a throwaway environment of their own, and
  ``XDG_DATA_HOME`` is a temporary folder, so ``coding-agent facets add`` installs into a
  throwaway facets site, never into the developer's;
* ``UV_OFFLINE=1``: everything comes from uv's cache, nothing from the internet.

The ``python`` blocks are compiled (they are fragments of a package or an app, not scripts).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "authoring-facets.md"
ENVIRONMENT = ".venv-authoring-test"


def _blocks(language: str) -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def test_the_python_blocks_compile() -> None:
    blocks = _blocks("python")
    assert blocks
    for number, block in enumerate(blocks, 1):
        name = f"{GUIDE.name} python block {number}"
        compile(block, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    blocks = _blocks("sh")
    script = "\n".join(blocks)
    assert "chord new-facet my-feature ../my-feature" in script
    assert "coding-agent facets add ../my-feature" in script
    feature = tmp_path / "my-feature"
    script = script.replace("../my-feature", str(feature))
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("VIRTUAL_ENV", "UV_", "XDG_"))
    }
    environment |= {
        "UV_OFFLINE": "1",
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_PROJECT_ENVIRONMENT": ENVIRONMENT,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_DATA_HOME": str(tmp_path / "data"),  # where `facets add` installs
    }
    if "HOME" in os.environ and (Path(os.environ["HOME"]) / ".cache" / "uv").is_dir():
        environment["UV_CACHE_DIR"] = str(Path(os.environ["HOME"]) / ".cache" / "uv")
    try:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        shutil.rmtree(ROOT / ENVIRONMENT, ignore_errors=True)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output + (
        "\n\nuv ran offline (UV_OFFLINE=1) from its cache; if it names a package missing from the"
        " cache, fill the cache once with an online `uv sync` in a generated package, as .ci/run does."
    )
    assert f"created {feature}" in result.stdout
    assert "3 passed" in result.stdout  # the package's own tests, from its folder
    assert "added my-feature (my-feature 0.1.0, editable): enabled" in result.stdout
    listed = [line for line in result.stdout.splitlines() if line.startswith("my-feature ")]
    assert listed and f"editable {feature}" in listed[0] and "enabled" in listed[0]
    assert "removed my-feature (my-feature)" in result.stdout
    assert (feature / ENVIRONMENT).is_dir()  # the package's own environment, not the workspace's
