"""Fixtures shared by the app's tests in every folder: a small real disk that can be filled up."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted after the test (needs root: skipped elsewhere, failing in CI)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        reason = "needs root and mount(8) for a small tmpfs"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI runs as root")
        pytest.skip(reason)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", str(folder)],
        check=True,
        capture_output=True,
    )
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


def _fill(disk: Path, leave: int = 64 * 1024) -> Path:
    filler = disk / "filler"
    chunk = b"\0" * 4096
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            os.write(fd, chunk)
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


@pytest.fixture
def fill_disk() -> Callable[[Path], Path]:
    """``fill_disk(disk)`` fills ``disk`` up, then frees 64 KiB (small writes such as
    session.json fit) and returns the filler file (delete it to make room again)."""
    return _fill


CLAUDE_PLUGINS = Path(__file__).parent / "fixtures" / "claude_plugins"
"""Real published plugins (anthropics/claude-plugins-official, Apache-2.0: see its README)."""

MARKETPLACE = "claude-plugins-official"


@pytest.fixture
def claude_plugins() -> Callable[..., Path]:
    """``install(claude_home, *names, enable=True, project=None)``: install the fixture plugins
    ``names`` into ``claude_home/plugins`` as Claude Code's ``/plugin install
    NAME@claude-plugins-official`` does (``cache/MARKETPLACE/NAME/VERSION``, an
    ``installed_plugins.json`` version 2 record, ``known_marketplaces.json``) and, with
    ``enable``, turn them on in ``claude_home/settings.json``'s ``enabledPlugins`` (other keys
    kept). Returns the cache folder of the last one."""
    import json

    def install(claude: Path, *names: str, enable: bool = True) -> Path:
        plugins = claude / "plugins"
        plugins.mkdir(parents=True, exist_ok=True)
        record_file = plugins / "installed_plugins.json"
        records = (
            json.loads(record_file.read_text())
            if record_file.exists()
            else {"version": 2, "plugins": {}}
        )
        (plugins / "known_marketplaces.json").write_text(
            json.dumps({
                MARKETPLACE: {
                    "source": {"source": "github", "repo": "anthropics/claude-plugins-official"},
                    "installLocation": str(plugins / "marketplaces" / MARKETPLACE),
                    "lastUpdated": "2026-08-21T16:44:54.000Z",
                }
            })
        )  # fmt: skip
        target = plugins
        for name in names:
            manifest = json.loads(
                (CLAUDE_PLUGINS / name / ".claude-plugin/plugin.json").read_text()
            )
            version = manifest.get("version", "340e33aef211")
            target = plugins / "cache" / MARKETPLACE / name / version
            shutil.copytree(CLAUDE_PLUGINS / name, target, dirs_exist_ok=True)
            records["plugins"][f"{name}@{MARKETPLACE}"] = [{
                "scope": "user",
                "installPath": str(target),
                "version": version,
                "installedAt": "2026-08-21T16:44:54.000Z",
                "lastUpdated": "2026-08-21T16:44:54.000Z",
                "gitCommitSha": "340e33aef211d95769d252324854497af871dafe",
            }]  # fmt: skip
        record_file.write_text(json.dumps(records, indent=2))
        if enable:
            settings_file = claude / "settings.json"
            settings = json.loads(settings_file.read_text()) if settings_file.exists() else {}
            enabled = settings.setdefault("enabledPlugins", {})
            enabled.update({f"{name}@{MARKETPLACE}": True for name in names})
            settings_file.write_text(json.dumps(settings, indent=2))
        return target

    return install
