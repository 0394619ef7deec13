"""Write a new facet package from the template (``chord new-facet NAME [DIR]``).

The template lives next to this module in ``template/``: every file ends in ``.tmpl`` (so no tool
mistakes it for code of chord itself), a path segment ``__package__`` becomes the import name, and
these placeholders are replaced in the text:

* ``{{distribution}}``: distribution, entry-point and command name (``my-feature``);
* ``{{package}}``: import package name (``my_feature``);
* ``{{title}}``: class-style name of the service contract (``MyFeature``).

The package is written to a hidden sibling folder first and renamed into place, so a failure
leaves nothing half-written behind.
"""

from __future__ import annotations

import importlib.util
import keyword
import os
import re
import shutil
import sys
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


def new_facet_package(name: str, directory: str | Path = ".") -> Path:
    """Write the facet package ``name`` into ``directory/<distribution>``; return that folder.

    Raises :class:`FacetNameError` for a bad name, :class:`FileNotFoundError` when ``directory``
    does not exist and :class:`FileExistsError` when the target folder does.
    """
    names = facet_names(name)
    parent = Path(directory)
    if not parent.is_dir():
        raise FileNotFoundError(f"{parent}: directory does not exist")
    target = parent / names.distribution
    if target.exists():
        raise FileExistsError(f"{target}: already exists; choose another name or directory")
    staging = parent / f".{names.distribution}-{uuid.uuid4().hex[:12]}.partial"
    staging.mkdir()  # unlike tempfile.mkdtemp, honours the umask: the result is an ordinary folder
    try:
        _render(files("chord.packages") / "template", staging, names)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _render(source: Traversable, destination: Path, names: FacetNames) -> None:
    for entry in sorted(source.iterdir(), key=lambda item: item.name):
        target_name = entry.name.replace("__package__", names.package)
        if entry.is_dir():
            if entry.name == "__pycache__":
                continue
            (destination / target_name).mkdir()
            _render(entry, destination / target_name, names)
        elif entry.name.endswith(".tmpl"):
            text = entry.read_text(encoding="utf-8")
            text = (
                text.replace("{{distribution}}", names.distribution)
                .replace("{{package}}", names.package)
                .replace("{{title}}", names.title)
            )
            (destination / target_name.removesuffix(".tmpl")).write_text(text, encoding="utf-8")
