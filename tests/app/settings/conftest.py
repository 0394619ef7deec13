"""Fixtures shared by the settings tests: a fresh home and configuration folders for the agent's
environment, a project folder, a JSON settings file written where a test says, and (for the
``config.toml`` tests) an environment and a user ``config.toml`` of a test's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The variables that point every settings file the agent reads into ``tmp_path``: ``HOME``
    (``~/.claude``...), ``XDG_CONFIG_HOME``, ``XDG_STATE_HOME`` and ``CLAUDE_CONFIG_DIR``; the
    folders themselves are not made. A test passes it to a subprocess's ``env`` or to the
    loaders that take an environment (nothing of the test process's own is changed)."""
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder (``tmp_path/project``, holding ``.git``: the project root)."""
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    return folder


def write_json(path: Path, data: object) -> Path:
    """``data`` as JSON in ``path`` (its folders made); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def config_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a ``config.toml`` test: ``HOME``, ``XDG_CONFIG_HOME`` and
    ``XDG_STATE_HOME`` in ``tmp_path`` and a plain ``PATH`` (no ``CLAUDE_CONFIG_DIR``: Claude
    Code's files play no part)."""
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PATH": "/usr/bin:/bin",
    }


def user_config(tmp_path: Path, text: str) -> Path:
    """``text`` as the user's ``config.toml`` of :func:`config_env`'s environment."""
    path = tmp_path / "config" / "coding-agent" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
