"""The session's sandbox policy as ``/sandbox`` and ``coding-agent config`` show it."""

from __future__ import annotations

from pathlib import Path

from coding_agent.settings.sandbox import PROJECT_PLACEHOLDERS, sandbox_policy


def test_the_policy_names_each_path_once(tmp_path: Path) -> None:
    """``.claude``, ``.vscode``... are read-only folders kept absent; they were also in the
    plain read-only list, and ``/sandbox`` named each twice."""
    project = tmp_path / "project"
    project.mkdir()
    policy = sandbox_policy(project, "s", env={"HOME": str(tmp_path / "home")})
    lines = policy.describe()
    assert len(lines) == len(set(lines)), [line for line in lines if lines.count(line) > 1]
    paths = [line.rsplit(": ", 1)[-1] for line in lines if line.startswith("  ")]
    assert len(paths) == len(set(paths)), sorted(p for p in paths if paths.count(p) > 1)
    for name in PROJECT_PLACEHOLDERS:
        folder = str(project.resolve() / name)
        assert f"  read-only inside, and not created where missing: {folder}" in lines
        assert folder in policy.read_only_folders and folder not in policy.read_only


def test_the_placeholder_folders_are_still_kept_read_only(tmp_path: Path) -> None:
    """Listed once, still read-only where they exist (``kept_read_only``)."""
    project = tmp_path / "project"
    (project / ".vscode").mkdir(parents=True)
    (project / ".envrc").write_text("")
    policy = sandbox_policy(project, "s", env={"HOME": str(tmp_path / "home")})
    kept = policy.kept_read_only()
    assert str(project.resolve() / ".vscode") in kept
    assert str(project.resolve() / ".envrc") in kept
