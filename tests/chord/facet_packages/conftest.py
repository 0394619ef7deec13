"""A small facet package written to a temporary folder, for the facet-package tests.

``echo_pkg`` (distribution ``echo-facets``, entry point ``echo``) provides the local singleton
``test.echo`` from its session facet; what ``answer`` returns lives in the submodule
``behaviour.py``, so tests change behaviour by rewriting that one file.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

PYPROJECT = """\
[project]
name = "echo-facets"
version = "0.1.0"

[project.entry-points."chord.facets"]
echo = "echo_pkg.plugin"
"""

CONTRACT = """\
from __future__ import annotations

from chord.services import define_service

Echo = define_service("test.echo", local=True)
"""

SESSION = """\
from __future__ import annotations

from chord.facets import define_facet

from . import behaviour
from .contract import Echo


class _Echo:
    def answer(self, text: str) -> str:
        return behaviour.answer(text)


def setup(env) -> None:
    env.provide(Echo, _Echo())


session_facet = define_facet("test/echo", setup)
"""

PLUGIN = """\
from __future__ import annotations

from chord import hookimpl

from .session import session_facet


@hookimpl
def chord_facets(host: str):
    return [session_facet] if host == "session" else []
"""


def behaviour(version: str) -> str:
    """Source of ``behaviour.py`` answering ``<version>:<text>``."""
    return f"def answer(text: str) -> str:\n    return {version!r} + ':' + text\n"


@dataclass
class EchoPackage:
    """The written package: edit its files through :meth:`write`."""

    project: Path

    @property
    def source(self) -> Path:
        return self.project / "src" / "echo_pkg"

    def write(self, relative: str, text: str) -> Path:
        path = self.source / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    def set_behaviour(self, version: str) -> Path:
        return self.write("behaviour.py", behaviour(version))


def write_echo_package(root: Path) -> EchoPackage:
    project = root / "echo-facets"
    package = EchoPackage(project)
    package.source.mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    package.write("__init__.py", "")
    package.write("contract.py", CONTRACT)
    package.write("session.py", SESSION)
    package.write("plugin.py", PLUGIN)
    package.set_behaviour("v1")
    return package


@pytest.fixture
def echo_package(tmp_path: Path) -> EchoPackage:
    return write_echo_package(tmp_path)


@pytest.fixture
def make_echo_package(tmp_path: Path) -> Callable[[str], EchoPackage]:
    def make(name: str) -> EchoPackage:
        root = tmp_path / name
        root.mkdir()
        return write_echo_package(root)

    return make
