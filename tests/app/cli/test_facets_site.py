"""``coding-agent facets add`` installs where ``uv sync`` does not remove it, and refuses a
package that holds no facet (issue 38 item 4), through the real binary and real uv.

The packages are local folders (a facet package written by ``chord new-facet``, a plain
library), so nothing comes from the internet but the build backend, from uv's cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

BINARY = Path(sys.executable).with_name("coding-agent")

pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv on PATH")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "VIRTUAL_"))}
    environment |= {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    if "HOME" in os.environ and (Path(os.environ["HOME"]) / ".cache" / "uv").is_dir():
        environment["UV_CACHE_DIR"] = str(Path(os.environ["HOME"]) / ".cache" / "uv")
    return environment


def _run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BINARY), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )


def _in_environment(distribution: str) -> list[Path]:
    """``distribution``'s metadata in the environment the agent runs from (what uv sync manages)."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    return list(purelib.glob(f"{distribution.replace('-', '_')}-*.dist-info"))


def test_an_added_facet_lives_outside_the_synced_environment_and_is_loaded_from_there(
    tmp_path: Path, env: dict[str, str]
) -> None:
    made = subprocess.run(
        [sys.executable, "-m", "chord.cli", "new-facet", "greeter-site", str(tmp_path / "greeter")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "created" in made.stdout
    added = _run(env, tmp_path, "facets", "add", str(tmp_path / "greeter"))
    assert added.returncode == 0, added.stderr
    assert "added greeter_site" in added.stdout or "added greeter-site" in added.stdout
    site = tmp_path / "data" / "coding-agent" / "facets"
    assert list(site.glob("greeter_site-*.dist-info")), "installed into the facets site"
    assert not _in_environment("greeter-site"), "nothing in the environment uv sync manages"

    listed = _run(env, tmp_path, "facets", "list")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if "greeter" in line)
    assert f"editable {tmp_path / 'greeter'}" in row and row.endswith("enabled")

    removed = _run(env, tmp_path, "facets", "remove", "greeter-site")
    assert removed.returncode == 0, removed.stderr
    assert not list(site.glob("greeter_site-*.dist-info"))
    assert "greeter" not in _run(env, tmp_path, "facets", "list").stdout


def test_a_package_that_holds_no_facet_is_refused_and_nothing_is_left_installed(
    tmp_path: Path, env: dict[str, str]
) -> None:
    library = tmp_path / "plain-library"
    (library / "src" / "plain_library").mkdir(parents=True)
    (library / "src" / "plain_library" / "__init__.py").write_text("")
    (library / "pyproject.toml").write_text(
        '[project]\nname = "plain-library"\nversion = "1.0"\n'
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/plain_library"]\n'
    )
    refused = _run(env, tmp_path, "facets", "add", str(library))
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        f"coding-agent facets add: error: {library} is not a feature package: plain-library "
        "declares no facet package (no `chord.facets` entry point), so nothing was installed."
    )
    site = tmp_path / "data" / "coding-agent" / "facets"
    assert not (site.exists() and any(site.iterdir())), "nothing left in the facets site"
    assert not _in_environment("plain-library")
    leftovers = [p for p in (tmp_path / "data" / "coding-agent").iterdir() if p != site]
    assert leftovers == [], "the staging folder is gone"
