"""Fixtures of the session worker tests (helpers live in ``worker_support``).

* ``agent_env`` — the worker's environment: a private ``XDG_STATE_HOME`` under ``tmp_path`` and
  no provider keys, so the offline ``faux`` model answers.
* ``project`` — a small project folder; ``session`` — a session for it.

The folder is put on ``sys.path`` so tests can import ``worker_support`` (importlib mode).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from coding_agent.sessions import Session, create_session

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

_PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


@pytest.fixture
def agent_env(tmp_path: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _PROVIDER_KEYS}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return env


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "README.md").write_text("# Sample project\n\nThe answer is 42.\n")
    (folder / "main.py").write_text("print('hello')\n")
    return folder


@pytest.fixture
def session(project: Path, agent_env: dict[str, str]) -> Session:
    return create_session(project, env=agent_env)
