"""The API reference build (mkdocs + mkdocstrings, docs/api/): Sphinx roles in docstrings become
cross-references, and the strict build fails on one that names nothing the reference documents.

CI builds the real reference with ``uv run mkdocs build --strict``; these tests build a one-page
reference of a small probe package with the same extension, so they run in seconds.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = ROOT / "docs" / "griffe_roles.py"


def _roles():
    spec = importlib.util.spec_from_file_location("griffe_roles", EXTENSION)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_roles_become_cross_references_or_code() -> None:
    roles = _roles()

    def convert(text: str) -> str:
        return roles.ROLE.sub(roles._link, text)

    assert convert(":class:`Harness`") == "[`Harness`][Harness]"
    assert convert(":func:`~chord.with_cancel`") == (
        '<autoref identifier="chord.with_cancel"><code>with_cancel</code></autoref>'
    )
    assert convert(":meth:`pico3.Harness.open`") == (
        '<autoref identifier="pico3.Harness.open"><code>pico3.Harness.open</code></autoref>'
    )
    assert convert("raises :class:`ValueError`") == "raises `ValueError`"
    assert convert(":mod:`importlib.metadata`") == "`importlib.metadata`"
    assert convert("``define_task`` and :param x: stay") == "``define_task`` and :param x: stay"


def _build(tmp_path: Path, docstring: str) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "src" / "probe_api"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text(
        textwrap.dedent(
            f'''
            """The probe."""

            __all__ = ["Thing", "make"]


            class Thing:
                """A thing."""


            def make() -> Thing:
                """{docstring}"""
                return Thing()
            '''
        )
    )
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Probe\n\n::: probe_api\n")
    (tmp_path / "mkdocs.yml").write_text(
        textwrap.dedent(
            f"""
            site_name: probe
            docs_dir: docs
            plugins:
              - mkdocstrings:
                  handlers:
                    python:
                      paths: [src]
                      options:
                        extensions:
                          - {EXTENSION}:SphinxRoles:
                              packages: [probe_api]
                        scoped_crossrefs: true
                        docstring_style: sphinx
                        show_source: false
            """
        )
    )
    mkdocs = Path(sys.executable).with_name("mkdocs")
    return subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_reference_to_a_documented_object_links(tmp_path: Path) -> None:
    result = _build(tmp_path, "Make a :class:`Thing` (see :class:`~probe_api.Thing`).")
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "site" / "index.html").read_text()
    assert 'href="#probe_api.Thing"' in page
    assert ":class:" not in page


def test_a_reference_to_an_undocumented_name_fails_the_strict_build(tmp_path: Path) -> None:
    result = _build(tmp_path, "Make one with :func:`probe_api.internal.helper`.")
    assert result.returncode == 1
    assert "Could not find cross-reference target 'probe_api.internal.helper'" in result.stderr
