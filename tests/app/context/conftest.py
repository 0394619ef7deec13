"""Real files in a temporary home, config folder and project for the prompt-material tests."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from coding_agent.settings.trust import TrustStore, trust_path


@pytest.fixture
def place(tmp_path: Path) -> SimpleNamespace:
    """``home``, ``config`` (XDG_CONFIG_HOME), ``project`` (a git root) and ``env``; call
    ``trust()`` to trust the project and ``write(path, text)`` to make a file."""
    home = tmp_path / "home"
    config = tmp_path / "config"
    project = tmp_path / "project"
    for folder in (home, config, project / ".git"):
        folder.mkdir(parents=True)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(config)}

    def trust(trusted: bool = True) -> None:
        TrustStore(trust_path(env)).set(project, trusted)

    def write(path: Path, text: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return SimpleNamespace(
        home=home, config=config, project=project, env=env, trust=trust, write=write
    )
