"""Fixtures of the session worker tests (helpers live in ``worker_support``).

* ``agent_env`` (from ``tests/conftest.py``) — the worker's environment: a private
  ``XDG_STATE_HOME`` under ``tmp_path`` and no provider keys, so the offline ``faux`` model answers.
* ``project`` — a small project folder; ``session`` — a session for it.

The folder is put on ``sys.path`` so tests can import ``worker_support`` (importlib mode).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from coding_agent.session_files.folders import Session, create_session

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


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
