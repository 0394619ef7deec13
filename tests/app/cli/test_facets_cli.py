"""``coding-agent facets list|remove`` in process (``facets add`` runs for real in
tests/docs/test_authoring_walkthrough.py, against a throwaway environment)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_agent.cli.main import main


@pytest.fixture(autouse=True)
def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)


def test_list_shows_every_installed_package_with_source_version_trust_and_state(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["facets", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "DISTRIBUTION", "VERSION", "SOURCE", "TRUST", "STATE"]
    approval = next(line for line in lines if line.startswith("facets-approval "))
    assert "0.1.0" in approval and "editable " in approval and approval.endswith("enabled")


def test_list_shows_project_folders_as_disabled_until_the_project_is_trusted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local = tmp_path / ".coding-agent" / "facets" / "repo_tools"
    local.mkdir(parents=True)
    (local / "__init__.py").write_text("")
    (local / "plugin.py").write_text("")
    assert main(["facets", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "repo_tools" in line)
    assert "untrusted project" in row and "disabled (coding-agent --trust to load)" in row


def test_remove_names_an_unknown_package_and_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["facets", "remove", "no-such-feature"]) == 1
    err = capsys.readouterr().err
    assert "no installed facet package is named 'no-such-feature'" in err
    assert "coding-agent facets list" in err


def test_remove_refuses_a_safety_package_without_force_and_says_what_follows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["facets", "remove", "facets-approval"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(
        "coding-agent facets remove: error: refusing to remove facets-approval: the agent's "
        "safety depends on it (without facets-approval, every tool call that needs approval "
    )
    assert captured.err.endswith(
        "Remove it anyway with `coding-agent facets remove facets-approval --force`.\n"
    )
    assert main(["facets", "list"]) == 0  # still installed
    assert any(line.startswith("facets-approval ") for line in capsys.readouterr().out.split("\n"))
