"""Write a new facet package from the template (``chord new-facet NAME [PATH]``).

The template lives next to this module in ``template/``: every file ends in ``.tmpl`` (so no tool
mistakes it for code of chord itself), a path segment ``__package__`` becomes the import name, and
these placeholders are replaced in the text:

* ``{{distribution}}``: distribution, entry-point and command name (``my-feature``);
* ``{{package}}``: import package name (``my_feature``);
* ``{{title}}``: class-style name of the service contract (``MyFeature``);
* ``{{sources}}``: a ``[tool.uv.sources]`` table pointing ``chord-runtime`` and ``pico3`` at the
  checkout this chord runs from (they are not on any package index), so ``uv run pytest`` works
  in the new package's own folder; empty when chord is installed from a wheel.

``PATH`` is the package's own folder (default ``./NAME``), as with ``uv init PATH`` or
``cargo new PATH``: missing parents are created, an existing empty folder is used, and anything
else that exists is refused. The package is written to a hidden sibling folder first and renamed
into place, so a failure leaves nothing half-written behind.
"""

from __future__ import annotations

import importlib.util
import json
import keyword
import os
import re
import shutil
import sys
import tomllib
import uuid
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

__all__ = ["FacetNameError", "FacetNames", "facet_names", "new_facet_package"]

_NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
_RESERVED = frozenset({"chord", "pico3", "coding_agent", "test", "tests", "src"})


class FacetNameError(ValueError):
    """The requested facet package name cannot be used."""


@dataclass(frozen=True, slots=True)
class FacetNames:
    """The names one facet package is known by."""

    distribution: str
    package: str
    title: str


def facet_names(name: str) -> FacetNames:
    """Check ``name`` and derive the package's names; :class:`FacetNameError` says what is wrong."""
    if not _NAME.fullmatch(name):
        raise FacetNameError(
            f"invalid facet package name {name!r}: use lower-case letters, digits and single "
            "'-' or '_' between them, starting with a letter (e.g. 'greeter', 'my-feature')"
        )
    package = name.replace("-", "_")
    if keyword.iskeyword(package) or package in _RESERVED:
        raise FacetNameError(f"invalid facet package name {name!r}: {package!r} is reserved")
    if package in sys.stdlib_module_names:
        raise FacetNameError(
            f"invalid facet package name {name!r}: {package!r} would shadow the standard library"
        )
    if importlib.util.find_spec(package) is not None:
        raise FacetNameError(
            f"invalid facet package name {name!r}: a module {package!r} is already importable here"
        )
    title = "".join(part.capitalize() for part in package.split("_"))
    return FacetNames(distribution=package.replace("_", "-"), package=package, title=title)


def new_facet_package(name: str, path: str | Path | None = None) -> Path:
    """Write the facet package ``name`` into the folder ``path`` (default ``./<name>``).

    Returns the folder. Raises :class:`FacetNameError` for a bad name and
    :class:`FileExistsError` when ``path`` is a file or a folder that is not empty.
    """
    names = facet_names(name)
    target = Path(path) if path is not None else Path(name)
    if target.is_dir() and any(target.iterdir()):
        raise FileExistsError(
            f"{target}: folder exists and is not empty; choose a new or empty folder "
            f"(e.g. chord new-facet {name} {target / name})"
        )
    if target.exists() and not target.is_dir():
        raise FileExistsError(f"{target}: exists and is not a folder; choose another PATH")
    parent = target.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = parent / f".{names.distribution}-{uuid.uuid4().hex[:12]}.partial"
    staging.mkdir()  # unlike tempfile.mkdtemp, honours the umask: the result is an ordinary folder
    try:
        _render(files("chord.facet_packages") / "template", staging, names, _sources())
        os.rename(staging, target)  # onto an empty folder too (POSIX rename of directories)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _source_project(module: str, distribution: str) -> Path | None:
    """The source checkout ``module`` is imported from (an editable ``src/`` layout), if any."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    project = Path(spec.origin).resolve().parent.parent.parent
    pyproject = project / "pyproject.toml"
    try:
        declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["name"]
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return None
    return project if declared == distribution else None


def _sources() -> str:
    found = {
        distribution: _source_project(module, distribution)
        for module, distribution in (("chord", "chord-runtime"), ("pico3", "pico3"))
    }
    if any(project is None for project in found.values()):
        return ""
    lines = [
        "",
        "# chord-runtime and pico3 are not on a package index: use the checkout this package was",
        "# created from (written by chord new-facet; edit if the checkout moves).",
        "[tool.uv.sources]",
    ]
    lines += [
        f"{name} = {{ path = {json.dumps(str(project))}, editable = true }}"
        for name, project in found.items()
    ]
    return "\n".join(lines) + "\n"


def _render(source: Traversable, destination: Path, names: FacetNames, sources: str) -> None:
    for entry in sorted(source.iterdir(), key=lambda item: item.name):
        target_name = entry.name.replace("__package__", names.package)
        if entry.is_dir():
            if entry.name == "__pycache__":
                continue
            (destination / target_name).mkdir()
            _render(entry, destination / target_name, names, sources)
        elif entry.name.endswith(".tmpl"):
            text = entry.read_text(encoding="utf-8")
            text = (
                text.replace("{{distribution}}", names.distribution)
                .replace("{{package}}", names.package)
                .replace("{{title}}", names.title)
                .replace("{{sources}}", sources)
            )
            (destination / target_name.removesuffix(".tmpl")).write_text(text, encoding="utf-8")
