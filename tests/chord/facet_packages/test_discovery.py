"""Finding facet packages: entry points of group chord.facets, and development folders (docs/design/decisions.md#d7)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from chord.facet_packages import (
    ENTRY_POINT_GROUP,
    FacetDiscoveryError,
    discover_facet_packages,
    facet_package_from_folder,
    installed_facet_packages,
    load_generation,
)


def install_into(site: Path, echo_package: Any, *, editable: bool = False) -> Path:
    """Install ``echo_pkg`` the way an installer would: the package and a dist-info folder."""
    site.mkdir(exist_ok=True)
    shutil.copytree(echo_package.source, site / "echo_pkg")
    dist_info = site / "echo_facets-0.1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: echo-facets\nVersion: 0.1.0\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\necho = echo_pkg.plugin\n", encoding="utf-8"
    )
    if editable:
        record = {"url": echo_package.project.as_uri(), "dir_info": {"editable": True}}
        (dist_info / "direct_url.json").write_text(json.dumps(record), encoding="utf-8")
    return site


def test_an_installed_distribution_is_found_through_its_entry_point(
    tmp_path, echo_package, monkeypatch
):
    site = install_into(tmp_path / "site", echo_package)
    monkeypatch.syspath_prepend(str(site))
    found = {package.name: package for package in installed_facet_packages()}
    package = found["echo"]
    assert package.plugin_module == "echo_pkg.plugin"
    assert package.package == "echo_pkg"
    assert package.package_dir == (site / "echo_pkg").resolve()
    assert package.distribution == "echo-facets"
    assert package.reloadable is False  # an ordinary install is not watched
    assert package.folder is None
    generation = load_generation(package, "session")
    try:
        assert [facet.id for facet in generation.facets] == ["test/echo"]
    finally:
        generation.purge()


def test_discovery_describes_without_importing(tmp_path, echo_package, monkeypatch):
    import sys

    site = install_into(tmp_path / "site", echo_package)
    monkeypatch.syspath_prepend(str(site))
    discover_facet_packages()
    assert "echo_pkg" not in sys.modules
    assert "echo_pkg.plugin" not in sys.modules


def test_an_editable_install_is_reloadable_and_knows_its_project(
    tmp_path, echo_package, monkeypatch
):
    site = install_into(tmp_path / "site", echo_package, editable=True)
    monkeypatch.syspath_prepend(str(site))
    package = {p.name: p for p in installed_facet_packages()}["echo"]
    assert package.reloadable is True
    assert package.project_dir == echo_package.project.resolve()
    assert package.pyproject == echo_package.project.resolve() / "pyproject.toml"


def test_a_project_folder_is_described_from_its_pyproject(echo_package):
    (package,) = facet_package_from_folder(echo_package.project)
    assert package.name == "echo"
    assert package.plugin_module == "echo_pkg.plugin"
    assert package.package_dir == echo_package.source.resolve()
    assert package.project_dir == echo_package.project.resolve()
    assert package.reloadable is True
    assert package.distribution is None


def test_a_flat_layout_project_folder_is_understood(echo_package):
    flat = echo_package.project
    shutil.move(echo_package.source, flat / "echo_pkg")
    (package,) = facet_package_from_folder(flat)
    assert package.package_dir == (flat / "echo_pkg").resolve()


def test_a_bare_package_folder_uses_its_plugin_module(echo_package):
    (package,) = facet_package_from_folder(echo_package.source)
    assert package.name == "echo_pkg"
    assert package.plugin_module == "echo_pkg.plugin"
    assert package.project_dir == echo_package.project.resolve()
    (echo_package.source / "plugin.py").unlink()
    (package,) = facet_package_from_folder(echo_package.source)
    assert package.plugin_module == "echo_pkg"


def test_a_folder_replaces_the_installed_package_of_the_same_name(
    tmp_path, echo_package, monkeypatch
):
    site = install_into(tmp_path / "site", echo_package)
    monkeypatch.syspath_prepend(str(site))
    packages = {p.name: p for p in discover_facet_packages([echo_package.project])}
    assert packages["echo"].folder == echo_package.project.resolve()
    assert packages["echo"].package_dir == echo_package.source.resolve()
    assert "echo" not in {p.name for p in discover_facet_packages(blocked=["echo"])}


def test_the_same_package_given_twice_is_an_error(make_echo_package):
    first, second = make_echo_package("a"), make_echo_package("b")
    with pytest.raises(FacetDiscoveryError, match="'echo' is given twice"):
        discover_facet_packages([first.project, second.project], installed=False)


def test_a_changed_pyproject_is_read_again(echo_package):
    (package,) = facet_package_from_folder(echo_package.project)
    pyproject = echo_package.project / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('"echo_pkg.plugin"', '"echo_pkg.session:plugin"')
    )
    refreshed = package.refreshed()
    assert (refreshed.plugin_module, refreshed.plugin_attr) == ("echo_pkg.session", "plugin")
    pyproject.write_text(pyproject.read_text().replace("echo =", "renamed ="))
    with pytest.raises(FacetDiscoveryError, match="no longer declares the facet package 'echo'"):
        package.refreshed()


@pytest.mark.parametrize(
    ("pyproject", "message"),
    [
        ("[project]\nname = 'x'\n", "declares no facet package"),
        ("[project\n", "cannot read"),
        (
            f'[project.entry-points."{ENTRY_POINT_GROUP}"]\necho = "missing_pkg.plugin"\n',
            "package 'missing_pkg' not found",
        ),
        (
            f'[project.entry-points."{ENTRY_POINT_GROUP}"]\necho = "not a module"\n',
            "does not name a module",
        ),
        (f'[project.entry-points."{ENTRY_POINT_GROUP}"]\necho = 3\n', "must be a string"),
    ],
)
def test_bad_project_declarations_are_named(echo_package, pyproject, message):
    (echo_package.project / "pyproject.toml").write_text(pyproject)
    with pytest.raises(FacetDiscoveryError, match=message) as caught:
        facet_package_from_folder(echo_package.project)
    assert "pyproject.toml" in str(caught.value)


def test_bad_folders_are_named(tmp_path):
    with pytest.raises(FacetDiscoveryError, match="does not exist"):
        facet_package_from_folder(tmp_path / "nope")
    (tmp_path / "file").write_text("")
    with pytest.raises(FacetDiscoveryError, match="is not a directory"):
        facet_package_from_folder(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FacetDiscoveryError, match="not a facet package folder"):
        facet_package_from_folder(tmp_path / "empty")


def test_an_entry_point_naming_a_missing_package_is_an_error(tmp_path, monkeypatch):
    site = tmp_path / "site"
    dist_info = site / "ghost-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: ghost\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nghost = ghost_pkg\n")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(FacetDiscoveryError, match="entry point 'ghost' of ghost"):
        installed_facet_packages()
    errors: list[FacetDiscoveryError] = []
    assert "ghost" not in {p.name for p in discover_facet_packages(on_error=errors.append)}
    assert len(errors) == 1 and "is not an importable package" in str(errors[0])


def _as_metadata_reads(group: str) -> list[tuple[str, str, str | None, str | None]]:
    from importlib.metadata import entry_points

    return [
        (ep.name, ep.value, ep.dist.name if ep.dist else None, _direct_url(ep.dist))
        for ep in entry_points(group=group)
    ]


def _as_scanned(group: str) -> list[tuple[str, str, str | None, str | None]]:
    from chord.facet_packages.discovery import _scanned_entry_points  # pyright: ignore[reportPrivateUsage]

    scanned = _scanned_entry_points(group)
    assert scanned is not None
    return [
        (ep.name, ep.value, ep.dist.name if ep.dist else None, _direct_url(ep.dist))
        for ep in scanned
    ]


def _direct_url(dist: Any) -> str | None:
    return dist.read_text("direct_url.json") if dist is not None else None


def test_the_entry_point_scan_reads_what_importlib_metadata_reads(
    tmp_path, echo_package, monkeypatch
):
    # Discovery reads entry points straight from the dist-info folders (importlib.metadata
    # costs a fifth of a worker's start-up to import): the same entry points, in the same
    # order, of the same distributions (name, direct_url.json) for this environment and for a
    # path with a shadowed distribution (the first of a name on sys.path wins), an egg-info
    # folder, comments and other groups.
    for group in (ENTRY_POINT_GROUP, "console_scripts", "pytest11"):
        assert _as_scanned(group) == _as_metadata_reads(group)
    first = install_into(tmp_path / "first", echo_package, editable=True)
    second = install_into(tmp_path / "second", echo_package)
    egg = tmp_path / "second" / "Old_Thing.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.0\nName: Old.Thing\n", encoding="utf-8")
    (egg / "entry_points.txt").write_text(
        f"# a comment\n\n[other]\nx = y\n[{ENTRY_POINT_GROUP}]\n  old  =  old_thing.plugin  \n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    for group in (ENTRY_POINT_GROUP, "other", "console_scripts"):
        assert _as_scanned(group) == _as_metadata_reads(group)
    names = [entry[0] for entry in _as_scanned(ENTRY_POINT_GROUP)]
    assert names.count("echo") == 1 and "old" in names
