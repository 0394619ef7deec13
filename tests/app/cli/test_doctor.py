"""``coding-agent doctor``'s checks of a safety package, each failure named (issue 36 item 1):
installed, loads, approves tool calls. (The installed agent's ``doctor``, live and with
facets-approval removed: tests/app/cli/test_fail_closed_install.py.)

Packages are installed the way an installer would, into a folder put on ``sys.path``: the
package and a ``.dist-info`` folder declaring its ``chord.facets`` entry point."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from coding_agent.cli.doctor import check_safety_package, run_doctor

PLUGIN = """
from chord import hookimpl, define_facet

@hookimpl
def chord_facets(host):
    return [define_facet("test/idle", lambda env: None)] if host == "session" else []
"""


def install(site: Path, name: str, module: str, plugin: str) -> None:
    package = site / module
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(plugin)
    dist_info = site / f"{module}-0.1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (dist_info / "entry_points.txt").write_text(f"[chord.facets]\n{name} = {module}.plugin\n")


@pytest.fixture(autouse=True)
def _no_code_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a generation compiles through chord's code cache: kept in memory only here."""
    monkeypatch.setenv("CHORD_CODE_CACHE", "off")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_the_workspaces_approval_package_is_live() -> None:
    check = check_safety_package("facets-approval")
    assert check.live, check.detail
    assert check.detail.startswith("installed (facets-approval 0.1.0, ")
    assert check.detail.endswith("), loads, approves tool calls")


def test_a_package_that_is_not_installed(site: Path) -> None:
    check = check_safety_package("no-such-safety")
    assert not check.live and check.detail == "not installed"


def test_a_package_that_fails_to_load(site: Path) -> None:
    install(site, "broken-safety", "broken_safety", "def chord_facets(:\n")
    check = check_safety_package("broken-safety")
    assert not check.live
    assert check.detail.startswith("installed (broken-safety 0.1.0, ")
    assert "but fails to load: " in check.detail and "broken_safety" in check.detail


def test_a_package_that_loads_but_approves_nothing(site: Path) -> None:
    install(site, "idle-safety", "idle_safety", PLUGIN)
    check = check_safety_package("idle-safety")
    assert not check.live
    assert check.detail.endswith("and loads, but registers no approval authority")


def test_doctor_exits_1_naming_what_follows_and_the_restore_command(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import coding_agent.settings.safety as safety

    monkeypatch.setattr(safety, "SAFETY_PACKAGES", {"idle-safety": "nothing is approved"})
    install(site, "idle-safety", "idle_safety", PLUGIN)
    out, err = io.StringIO(), io.StringIO()
    assert run_doctor(out, err) == 1
    assert "  idle-safety: MISSING: installed (idle-safety 0.1.0, " in out.getvalue()
    assert err.getvalue().startswith(
        "coding-agent doctor: error: idle-safety is not live, so nothing is approved; restore "
        "it with `coding-agent facets add "
    )
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(safety, "SAFETY_PACKAGES", {"facets-approval": "calls are blocked"})
    assert run_doctor(out, err) == 0 and err.getvalue() == ""
