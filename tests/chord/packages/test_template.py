"""``chord new-facet``: the template writes a working facet package (issue 4, docs/design/chord.md#feature-layout)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from chord.cli import main
from chord.packages import ENTRY_POINT_GROUP, facet_package_from_folder, load_generation
from chord.packages.scaffold import FacetNameError, facet_names, new_facet_package

FILES = {
    "README.md",
    "pyproject.toml",
    "src/my_greeter/__init__.py",
    "src/my_greeter/contract.py",
    "src/my_greeter/plugin.py",
    "src/my_greeter/py.typed",
    "src/my_greeter/session.py",
    "src/my_greeter/tui.py",
    "tests/test_my_greeter.py",
}


def test_the_package_has_the_seed_shape_and_declares_its_entry_point(tmp_path):
    target = new_facet_package("my-greeter", tmp_path)
    assert target == tmp_path / "my-greeter"
    written = {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()}
    assert written == FILES
    pyproject = tomllib.loads((target / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == "my-greeter"
    assert pyproject["project"]["entry-points"][ENTRY_POINT_GROUP] == {
        "my-greeter": "my_greeter.plugin"
    }
    assert not any("{{" in p.read_text() for p in target.rglob("*") if p.is_file())
    assert [p.name for p in tmp_path.iterdir()] == ["my-greeter"]  # no staging folder left
    contract = (target / "src/my_greeter/contract.py").read_text()
    assert "import chord.textual" not in contract and "from chord.textual" not in contract


def test_the_generated_package_passes_its_own_test(tmp_path):
    target = new_facet_package("greeter", tmp_path)
    environment = {**os.environ, "PYTHONPATH": str(target / "src")}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=target,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_the_generated_package_loads_as_a_generation_for_each_host_kind(tmp_path):
    (package,) = facet_package_from_folder(new_facet_package("greeter", tmp_path))
    assert package.name == "greeter"
    assert package.reloadable
    for host, ids in (("session", ["@greeter/session"]), ("tui", ["@greeter/tui"]), ("web", [])):
        generation = load_generation(package, host)
        try:
            assert [facet.id for facet in generation.facets] == ids
        finally:
            generation.purge()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Greeter", "lower-case letters"),
        ("my--feature", "lower-case letters"),
        ("1st", "lower-case letters"),
        ("class", "is reserved"),
        ("chord", "is reserved"),
        ("json", "would shadow the standard library"),
        ("pytest", "is already importable here"),
    ],
)
def test_bad_names_are_refused_with_the_reason(name, message):
    with pytest.raises(FacetNameError, match=message):
        facet_names(name)


def test_names_derive_from_the_given_name():
    names = facet_names("my_feature")
    assert (names.distribution, names.package, names.title) == (
        "my-feature",
        "my_feature",
        "MyFeature",
    )


def test_the_command_writes_the_package(tmp_path, capsys):
    assert main(["new-facet", "greeter", str(tmp_path)]) == 0
    assert (tmp_path / "greeter" / "src" / "greeter" / "plugin.py").is_file()
    assert f"created {tmp_path / 'greeter'}" in capsys.readouterr().out


def test_the_command_refuses_an_existing_folder_and_leaves_it_alone(tmp_path, capsys):
    (tmp_path / "greeter").mkdir()
    (tmp_path / "greeter" / "mine.txt").write_text("keep")
    with pytest.raises(SystemExit) as caught:
        main(["new-facet", "greeter", str(tmp_path)])
    assert caught.value.code == 1
    assert "already exists" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "greeter").iterdir()] == ["mine.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["greeter"]


def test_the_command_reports_bad_names_and_missing_folders(tmp_path, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["new-facet", "Bad Name", str(tmp_path)])
    assert caught.value.code == 2
    assert "invalid facet package name 'Bad Name'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:
        main(["new-facet", "greeter", str(tmp_path / "missing")])
    assert caught.value.code == 1
    assert "directory does not exist" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_console_script_is_installed():
    script = Path(sys.executable).parent / "chord"
    result = subprocess.run(
        [str(script), "new-facet", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert "NAME" in result.stdout and "DIR" in result.stdout
