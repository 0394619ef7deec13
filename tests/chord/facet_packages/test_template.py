"""``chord new-facet NAME [PATH]``: the template writes a working facet package at PATH
(docs/design/chord.md#feature-layout)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from chord.cli import main
from chord.facet_packages import ENTRY_POINT_GROUP, facet_package_from_folder, load_generation
from chord.facet_packages.scaffold import FacetNameError, facet_names, new_facet_package

OFFLINE_HINT = (
    "\n\nuv ran offline (UV_OFFLINE=1) from its cache; if it names a package missing from the cache,"
    " fill the cache once with an online `uv sync` in a generated package, as .ci/run does."
)

FILES = {
    "README.md",
    "pyproject.toml",
    "src/my_greeter/__init__.py",
    "src/my_greeter/contract.py",
    "src/my_greeter/plugin.py",
    "src/my_greeter/py.typed",
    "src/my_greeter/session.py",
    "src/my_greeter/tui.py",
    "tests/session_process.py",
    "tests/test_my_greeter.py",
}


def test_the_package_has_the_seed_shape_and_declares_its_entry_point(tmp_path):
    target = new_facet_package("my-greeter", tmp_path / "my-greeter")
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
    sources = pyproject["tool"]["uv"]["sources"]  # chord and pico3 are on no package index
    for name, module in (("chord-runtime", "chord"), ("pico3", "pico3")):
        folder = Path(sources[name]["path"])
        assert folder.is_absolute() and (folder / "src" / module / "__init__.py").is_file()
    source = sum(
        len([line for line in (target / "src/my_greeter" / name).read_text().splitlines() if line])
        for name in ("contract.py", "session.py", "tui.py", "plugin.py")
    )
    assert source < 180, f"the template's feature should stay small, it has {source} lines"


def test_the_default_path_is_the_name_and_an_empty_folder_is_used(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert new_facet_package("greeter") == Path("greeter")
    assert (tmp_path / "greeter" / "src" / "greeter" / "plugin.py").is_file()
    (tmp_path / "empty").mkdir()
    assert new_facet_package("other", "empty") == Path("empty")
    assert (tmp_path / "empty" / "src" / "other" / "plugin.py").is_file()
    assert new_facet_package("deep", tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "empty", "greeter"]


def test_the_generated_package_passes_its_own_tests_with_uv_run_pytest(tmp_path):
    """The README's one command, in the package's own folder, outside this workspace."""
    target = new_facet_package("greeter", tmp_path / "greeter")
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("VIRTUAL_ENV", "UV_"))
    }
    environment |= {"UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never"}  # never the internet
    result = subprocess.run(
        ["uv", "run", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=target,
        env=environment,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr + OFFLINE_HINT
    assert "3 passed" in result.stdout
    assert (target / ".venv").is_dir()  # its own environment, not this workspace's


def test_the_generated_package_loads_as_a_generation_for_each_host_kind(tmp_path):
    (package,) = facet_package_from_folder(new_facet_package("greeter", tmp_path / "greeter"))
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


def test_the_command_writes_the_package_at_path(tmp_path, capsys):
    assert main(["new-facet", "greeter", str(tmp_path / "work" / "greeter")]) == 0
    assert (tmp_path / "work" / "greeter" / "src" / "greeter" / "plugin.py").is_file()
    assert f"created {tmp_path / 'work' / 'greeter'}" in capsys.readouterr().out


def test_the_command_refuses_a_non_empty_folder_and_leaves_it_alone(tmp_path, capsys):
    (tmp_path / "greeter").mkdir()
    (tmp_path / "greeter" / "mine.txt").write_text("keep")
    with pytest.raises(SystemExit) as caught:
        main(["new-facet", "greeter", str(tmp_path / "greeter")])
    assert caught.value.code == 1
    err = capsys.readouterr().err
    assert "folder exists and is not empty" in err and "choose a new or empty folder" in err
    assert [p.name for p in (tmp_path / "greeter").iterdir()] == ["mine.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["greeter"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit):
        main(["new-facet", "greeter", str(tmp_path / "file")])
    assert "is not a folder" in capsys.readouterr().err


def test_the_command_reports_bad_names(tmp_path, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["new-facet", "Bad Name", str(tmp_path / "x")])
    assert caught.value.code == 2
    assert "invalid facet package name 'Bad Name'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_console_script_is_installed():
    script = Path(sys.executable).parent / "chord"
    result = subprocess.run(
        [str(script), "new-facet", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert "NAME" in result.stdout and "PATH" in result.stdout
