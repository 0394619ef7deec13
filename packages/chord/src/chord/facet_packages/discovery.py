"""Find facet packages: installed distributions' entry points, plus folders under development.

A facet package is an ordinary Python package whose distribution declares an entry point in the
group ``chord.facets``::

    [project.entry-points."chord.facets"]
    greeter = "greeter.plugin"

The entry point's value names the *plugin module*: the module holding the ``chord_facets(host)``
hook implementation (see :mod:`chord.facet_packages.hookspecs`). Discovery only *describes* packages as
:class:`FacetPackage` records, it imports nothing: loading is the job of
:mod:`chord.facet_packages.generation`, which imports a fresh copy of the package per generation.

Two sources, one record type:

* :func:`installed_facet_packages` enumerates the entry points visible to
  :mod:`importlib.metadata` (every distribution on ``sys.path``). An editable install (PEP 610
  ``direct_url.json`` says ``dir_info.editable``) is marked :attr:`FacetPackage.reloadable`.
* :func:`facet_package_from_folder` describes a package that is not installed, from a folder given
  on the command line: either a project folder whose ``pyproject.toml`` declares the entry point
  (``src/`` or flat layout), or the package folder itself (a directory holding ``__init__.py``;
  its plugin module is ``plugin.py`` when present, else the package's ``__init__``).

:func:`discover_facet_packages` combines both; a folder overrides an installed package of the same
name, so a checkout under development wins over the copy in the environment.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlparse

import msgspec

__all__ = [
    "ENTRY_POINT_GROUP",
    "FacetDiscoveryError",
    "FacetPackage",
    "discover_facet_packages",
    "facet_package_from_folder",
    "installed_facet_packages",
]

ENTRY_POINT_GROUP = "chord.facets"
"""The entry-point group a facet distribution declares its plugin module in."""


class FacetDiscoveryError(Exception):
    """A facet package could not be described: a bad folder, declaration or entry point."""


class FacetPackage(msgspec.Struct, frozen=True):
    """Where a facet package lives and how to load it. Describes; never imports.

    ``plugin_module`` is the dotted module named by the entry point (``"greeter.plugin"``), and
    ``package`` its top-level package (``"greeter"``), whose sources are in ``package_dir``.
    ``plugin_attr`` is the optional ``:attr`` part of the entry point: the object inside the
    plugin module that carries the hook implementations (the module itself when ``None``).
    """

    name: str
    """Entry-point name (or, for a bare package folder, the package name)."""
    plugin_module: str
    package: str
    package_dir: Path
    plugin_attr: str | None = None
    project_dir: Path | None = None
    """The folder holding ``pyproject.toml``, when known."""
    distribution: str | None = None
    """The installed distribution's name; ``None`` for a folder that is not installed."""
    reloadable: bool = False
    """Whether the sources are meant to be edited: an editable install or a development folder."""
    folder: Path | None = None
    """The folder this record was described from (``None`` for an installed entry point)."""

    @property
    def pyproject(self) -> Path | None:
        """The ``pyproject.toml`` declaring this package, if there is one."""
        if self.project_dir is None:
            return None
        path = self.project_dir / "pyproject.toml"
        return path if path.is_file() else None

    def refreshed(self) -> FacetPackage:
        """Describe the package again from its folder (after ``pyproject.toml`` changed).

        An installed entry point is returned unchanged: its metadata changes only on reinstall.
        """
        if self.folder is None:
            return self
        for package in _packages_in_folder(self.folder):
            if package.name == self.name:
                return package
        raise FacetDiscoveryError(
            f"{self.folder}: no longer declares the facet package {self.name!r} "
            f"in [project.entry-points.{ENTRY_POINT_GROUP!r}]"
        )


def discover_facet_packages(
    folders: Iterable[str | Path] = (),
    *,
    installed: bool = True,
    blocked: Iterable[str] = (),
    on_error: Callable[[FacetDiscoveryError], None] | None = None,
) -> list[FacetPackage]:
    """Every facet package: installed entry points (unless ``installed=False``) and ``folders``.

    A package from a folder replaces an installed one of the same name. Names in ``blocked`` are
    skipped. The result is sorted by name, so load order is deterministic. ``on_error`` is passed
    to :func:`installed_facet_packages`; a bad *folder* always raises (it was asked for).
    """
    skip = frozenset(blocked)
    found: dict[str, FacetPackage] = {}
    if installed:
        for package in installed_facet_packages(on_error=on_error):
            found[package.name] = package
    from_folders: dict[str, FacetPackage] = {}
    for folder in folders:
        for package in facet_package_from_folder(folder):
            other = from_folders.get(package.name)
            if other is not None:
                raise FacetDiscoveryError(
                    f"facet package {package.name!r} is given twice: "
                    f"{other.folder} and {package.folder}"
                )
            from_folders[package.name] = package
    found.update(from_folders)
    return [found[name] for name in sorted(found) if name not in skip]


def installed_facet_packages(
    group: str = ENTRY_POINT_GROUP,
    *,
    on_error: Callable[[FacetDiscoveryError], None] | None = None,
) -> list[FacetPackage]:
    """Describe every entry point of ``group`` visible to :mod:`importlib.metadata`.

    A bad entry point (naming a missing package, say) or two distributions declaring the same
    name raises :class:`FacetDiscoveryError`; with ``on_error``, the error is passed to it and
    the entry point skipped instead, so one broken package cannot keep the others out.
    """
    found: dict[str, FacetPackage] = {}
    importlib.invalidate_caches()  # a package installed since the last scan is seen too
    declared = _scanned_entry_points(group)
    if declared is None:
        declared = _metadata_entry_points(group)
    for entry_point in declared:
        try:
            package = _describe_entry_point(entry_point)
            other = found.get(package.name)
            if other is not None and other.distribution != package.distribution:
                raise FacetDiscoveryError(
                    f"facet package {package.name!r} is declared by two distributions: "
                    f"{other.distribution} and {package.distribution}"
                )
        except FacetDiscoveryError as error:
            if on_error is None:
                raise
            on_error(error)
            continue
        found.setdefault(package.name, package)
    return [found[name] for name in sorted(found)]


def facet_package_from_folder(folder: str | Path) -> list[FacetPackage]:
    """Describe the facet package(s) in a development folder that need not be installed.

    ``folder`` is a project folder whose ``pyproject.toml`` declares ``chord.facets`` entry points
    (one record per entry point), or a package folder holding ``__init__.py`` (one record).
    """
    path = Path(folder).expanduser().resolve()
    if not path.exists():
        raise FacetDiscoveryError(f"{folder}: facet folder does not exist")
    if not path.is_dir():
        raise FacetDiscoveryError(f"{folder}: facet folder is not a directory")
    return _packages_in_folder(path)


def _packages_in_folder(path: Path) -> list[FacetPackage]:
    if (path / "pyproject.toml").is_file():
        return _packages_in_project(path)
    if (path / "__init__.py").is_file():
        return [_package_folder(path)]
    raise FacetDiscoveryError(
        f"{path}: not a facet package folder "
        f"(expected a pyproject.toml declaring [project.entry-points.{ENTRY_POINT_GROUP!r}], "
        "or a package folder holding __init__.py)"
    )


def _packages_in_project(project_dir: Path) -> list[FacetPackage]:
    pyproject = project_dir / "pyproject.toml"
    import tomllib  # a project folder only (installed packages need no TOML)

    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise FacetDiscoveryError(f"{pyproject}: cannot read: {error}") from error
    project = data.get("project")
    groups = project.get("entry-points") if isinstance(project, dict) else None
    declared = groups.get(ENTRY_POINT_GROUP) if isinstance(groups, dict) else None
    if not isinstance(declared, dict) or not declared:
        raise FacetDiscoveryError(
            f"{pyproject}: declares no facet package "
            f'(add [project.entry-points.{ENTRY_POINT_GROUP!r}] name = "package.plugin")'
        )
    packages: list[FacetPackage] = []
    for name, value in sorted(declared.items()):
        where = f'{pyproject}: [project.entry-points."{ENTRY_POINT_GROUP}"] {name}'
        if not isinstance(value, str):
            raise FacetDiscoveryError(f"{where}: value must be a string, got {value!r}")
        module, attr = _split_value(value, where)
        top = module.partition(".")[0]
        package_dir = _find_package_dir(project_dir, top)
        if package_dir is None:
            raise FacetDiscoveryError(
                f"{where}: package {top!r} not found "
                f"(looked for src/{top}/__init__.py and {top}/__init__.py)"
            )
        packages.append(
            FacetPackage(
                name=name,
                plugin_module=module,
                plugin_attr=attr,
                package=top,
                package_dir=package_dir,
                project_dir=project_dir,
                reloadable=True,
                folder=project_dir,
            )
        )
    return packages


def _package_folder(package_dir: Path) -> FacetPackage:
    name = package_dir.name
    if not name.isidentifier():
        raise FacetDiscoveryError(f"{package_dir}: folder name {name!r} is not a Python identifier")
    module = f"{name}.plugin" if (package_dir / "plugin.py").is_file() else name
    project_dir = _enclosing_project(package_dir)
    return FacetPackage(
        name=name,
        plugin_module=module,
        package=name,
        package_dir=package_dir,
        project_dir=project_dir,
        reloadable=True,
        folder=package_dir,
    )


class _Distribution(Protocol):
    """What discovery reads of a distribution (:class:`importlib.metadata.Distribution` has it)."""

    @property
    def name(self) -> str | None: ...

    def read_text(self, filename: str) -> str | None: ...


class _EntryPoint(msgspec.Struct, frozen=True):
    name: str
    value: str
    dist: _Distribution | None


class _ScannedDistribution:
    """A ``.dist-info`` / ``.egg-info`` folder on ``sys.path``, read as importlib.metadata's
    ``PathDistribution`` reads it (its ``Name`` header, its files as UTF-8 text)."""

    __slots__ = ("_path",)

    def __init__(self, path: str) -> None:
        self._path = path

    def read_text(self, filename: str) -> str | None:
        try:
            return Path(self._path, filename).read_text(encoding="utf-8")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            return None

    @property
    def name(self) -> str | None:
        text = self.read_text("METADATA") or self.read_text("PKG-INFO") or ""
        for line in text.splitlines():
            if not line.strip():
                break  # the end of the headers
            key, colon, value = line.partition(":")
            if colon and not line[0].isspace() and key.strip().lower() == "name":
                return value.strip()
        return None


def _normalize(name: str) -> str:
    """PEP 503 normalisation with underscores (importlib.metadata's ``Prepared.normalize``)."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _scanned_entry_points(group: str) -> list[_EntryPoint] | None:
    """The entry points of ``group`` that :func:`importlib.metadata.entry_points` gives, read
    straight from the ``.dist-info`` / ``.egg-info`` folders of ``sys.path`` (in its order,
    the first distribution of a name winning), without importing :mod:`importlib.metadata`
    (with ``email``, ``zipfile``, ``csv``: a fifth of a worker's start-up). ``None`` when the
    path holds what only importlib.metadata reads (a zip or ``.egg`` entry, another finder of
    distributions on ``sys.meta_path``)."""
    for finder in sys.meta_path:
        if finder is not importlib.machinery.PathFinder and hasattr(finder, "find_distributions"):
            return None
    seen: set[str] = set()
    found: list[_EntryPoint] = []
    for root in sys.path:
        if os.path.basename(root).lower().endswith(".egg"):
            return None
        try:
            children = os.listdir(root or ".")
        except NotADirectoryError:
            return None  # a zip file: importlib.metadata reads inside it
        except OSError:
            continue
        infos: dict[str, list[str]] = {}  # grouped by name, as importlib.metadata's Lookup
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")):
                infos.setdefault(_normalize(low.rpartition(".")[0].partition("-")[0]), []).append(
                    os.path.join(root, child)
                )
        for path in (path for paths in infos.values() for path in paths):
            distribution = _ScannedDistribution(path)
            stem, ext = os.path.splitext(os.path.basename(path))
            if ext in (".dist-info", ".egg-info"):
                key = _normalize(stem.partition("-")[0])
            else:  # importlib.metadata names it by its metadata then
                key = _normalize(distribution.name or "")
            if key in seen:
                continue
            seen.add(key)
            found.extend(_declared(distribution, group))
    return found


def _declared(distribution: _ScannedDistribution, group: str) -> list[_EntryPoint]:
    """The entry points of ``group`` in a distribution's ``entry_points.txt``, parsed as
    importlib.metadata parses it (``Sectioned``: stripped lines, ``#`` comments, ``[group]``
    headers, ``name = value`` pairs; a line without ``=`` raises ``ValueError`` there too)."""
    section: str | None = None
    found: list[_EntryPoint] = []
    for line in (distribution.read_text("entry_points.txt") or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section is None:
            continue
        name, value = map(str.strip, line.split("=", 1))
        if section == group:
            found.append(_EntryPoint(name, value, distribution))
    return found


def _metadata_entry_points(group: str) -> list[_EntryPoint]:
    """The entry points of ``group`` through :mod:`importlib.metadata` itself."""
    from importlib.metadata import entry_points

    return [_EntryPoint(ep.name, ep.value, ep.dist) for ep in entry_points(group=group)]


def _describe_entry_point(entry_point: _EntryPoint) -> FacetPackage:
    distribution = entry_point.dist
    dist_name = distribution.name if distribution is not None else None
    where = f"entry point {entry_point.name!r} of {dist_name or 'an unknown distribution'}"
    module, attr = _split_value(entry_point.value, where)
    top = module.partition(".")[0]
    editable_root = _editable_root(distribution) if distribution is not None else None
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: imports nothing
    except (ImportError, ValueError) as error:
        raise FacetDiscoveryError(f"{where}: cannot locate package {top!r}: {error}") from error
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations and editable_root is not None:
        # Installed editable after this process started: its .pth entry is not on sys.path
        # yet, but the project folder says where the package is.
        found = _find_package_dir(editable_root, top)
        locations = [str(found)] if found is not None else []
    if not locations:
        raise FacetDiscoveryError(
            f"{where}: {top!r} is not an importable package (facet packages are packages)"
        )
    package_dir = Path(locations[0]).resolve()
    return FacetPackage(
        name=entry_point.name,
        plugin_module=module,
        plugin_attr=attr,
        package=top,
        package_dir=package_dir,
        project_dir=editable_root or _enclosing_project(package_dir),
        distribution=dist_name,
        reloadable=editable_root is not None,
    )


def _split_value(value: str, where: str) -> tuple[str, str | None]:
    module, _, attr = value.strip().partition(":")
    module, attr = module.strip(), attr.strip()
    if not module or not all(part.isidentifier() for part in module.split(".")):
        raise FacetDiscoveryError(f"{where}: {value!r} does not name a module")
    if attr and not all(part.isidentifier() for part in attr.split(".")):
        raise FacetDiscoveryError(f"{where}: {value!r} has an invalid attribute part")
    return module, attr or None


def _find_package_dir(project_dir: Path, top: str) -> Path | None:
    for base in (project_dir / "src", project_dir):
        candidate = base / top
        if (candidate / "__init__.py").is_file():
            return candidate.resolve()
    return None


def _enclosing_project(package_dir: Path) -> Path | None:
    # src layout (project/src/pkg) or flat layout (project/pkg)
    candidates: Sequence[Path] = (package_dir.parent.parent, package_dir.parent)
    if package_dir.parent.name != "src":
        candidates = (package_dir.parent,)
    for candidate in candidates:
        if (candidate / "pyproject.toml").is_file():
            return candidate
    return None


def _editable_root(distribution: _Distribution) -> Path | None:
    """The project folder of a PEP 660 editable install, from PEP 610 ``direct_url.json``."""
    try:
        raw = distribution.read_text("direct_url.json")
        record = json.loads(raw) if raw else None
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    dir_info = record.get("dir_info")
    url = record.get("url")
    if not (isinstance(dir_info, dict) and dir_info.get("editable") and isinstance(url, str)):
        return None
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path)).resolve()
