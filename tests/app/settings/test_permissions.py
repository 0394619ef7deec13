"""The permission rules' files (issue 36 deliver 3): config.toml's ``[permissions]`` and Claude
Code's ``settings.json`` files, the project's only in a trusted project; problems named per
file; a rule appended with the user's comments kept; a rule removed from TOML and JSON.

The grammar of a rule is the approval feature's (``tests/facets/approval``); these files only
carry the lists, and a wrong *type* in ``config.toml`` is a configuration error like any other.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coding_agent.cli.main import main
from coding_agent.settings.config import ConfigError, load_config
from coding_agent.settings.permissions import PermissionFiles
from coding_agent.settings.trust import TrustStore, trust_path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    (folder / "src").mkdir()
    return folder


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def user_toml(env: dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml"


def rules_of(files: PermissionFiles) -> list[tuple[str, str, str]]:
    return [(r["kind"], r["rule"], r["scope"]) for r in files.load()["rules"]]


def every_file(env: dict[str, str], project: Path) -> dict[str, Path]:
    home = Path(env["HOME"])
    return {
        "user": write(user_toml(env), '[permissions]\nallow = ["Bash(git diff:*)"]\n'),
        "project": write(project / ".coding-agent" / "config.toml", '[permissions]\nask = ["Bash(git push:*)"]\n'),
        "claude-user": write(home / ".claude" / "settings.json", json.dumps({"permissions": {"deny": ["Read(~/.ssh/**)"]}})),
        "claude-project": write(
            project / ".claude" / "settings.json",
            json.dumps({"permissions": {"allow": ["Bash(npm run test:*)"], "defaultMode": "acceptEdits"}}),
        ),
        "claude-local": write(project / ".claude" / "settings.local.json", json.dumps({"permissions": {"deny": ["Read(./.env)"]}})),
    }  # fmt: skip


def test_every_file_is_read_in_a_trusted_project(env: dict[str, str], project: Path) -> None:
    paths = every_file(env, project)
    TrustStore(trust_path(env)).set(project, True)
    files = PermissionFiles(project / "src", env)
    loaded = files.load()
    assert rules_of(files) == [
        ("allow", "Bash(git diff:*)", "user"),
        ("ask", "Bash(git push:*)", "project"),
        ("deny", "Read(~/.ssh/**)", "claude-user"),
        ("allow", "Bash(npm run test:*)", "claude-project"),
        ("deny", "Read(./.env)", "claude-local"),
    ]
    assert [r["source"] for r in loaded["rules"]] == [str(p) for p in paths.values()]
    assert loaded["root"] == str(project)  # ./ in a rule is the project root, not src/
    assert loaded["scopes"] == ["project", "user"]
    assert loaded["problems"] == [  # a project's file may only make the mode stricter
        f"{paths['claude-project']}: `permissions.defaultMode`: 'acceptEdits' is not taken from a "
        "project's settings (a project may only make the mode stricter: default or plan); set it "
        "in ~/.claude/settings.json or permission_mode in your config.toml"
    ]


def test_an_untrusted_project_keeps_only_the_users_files_and_says_what_it_left_out(
    env: dict[str, str], project: Path
) -> None:
    paths = every_file(env, project)
    files = PermissionFiles(project, env)
    assert rules_of(files) == [
        ("allow", "Bash(git diff:*)", "user"),
        ("deny", "Read(~/.ssh/**)", "claude-user"),
    ]
    reason = "not read, the project is not trusted (/trust to trust it)"
    assert files.load()["problems"] == [
        f"{paths['project']}: {reason}",
        f"{paths['claude-project']}: {reason}",
        f"{paths['claude-local']}: {reason}",
    ]
    assert files.load()["scopes"] == ["user"]
    with pytest.raises(ValueError, match="is not trusted"):
        files.add("Bash(ls:*)", "allow", "project")
    TrustStore(trust_path(env)).set(project, True)  # /trust: the next read sees the project
    assert len(rules_of(files)) == 5


def test_claude_config_dir_moves_the_claude_user_file(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    write(tmp_path / "elsewhere" / "settings.json", '{"permissions": {"ask": ["Bash"]}}')
    files = PermissionFiles(project, {**env, "CLAUDE_CONFIG_DIR": str(tmp_path / "elsewhere")})
    assert rules_of(files) == [("ask", "Bash", "claude-user")]


def test_a_file_of_the_wrong_shape_is_a_problem_naming_it(
    env: dict[str, str], project: Path
) -> None:
    home = Path(env["HOME"])
    bad_json = write(home / ".claude" / "settings.json", "{not json")
    files = PermissionFiles(project, env)
    assert files.load()["problems"] == [
        f"{bad_json}: not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
    ]
    write(bad_json, '{"permissions": {"allow": "Bash", "deny": ["Bash(rm:*)"]}}')
    assert files.load()["problems"] == [
        f"{bad_json}: `permissions.allow` must be a list of rules, got 'Bash'"
    ]
    assert rules_of(files) == [("deny", "Bash(rm:*)", "claude-user")]  # the good list still applies
    write(bad_json, '{"permissions": ["Bash"]}')
    assert files.load()["problems"] == [
        f"{bad_json}: `permissions` must be a table/object of allow, ask and deny lists"
    ]
    write(bad_json, '{"permissions": {"allow": [3, "Bash(ls:*)"]}}')  # the feature names the 3
    assert files.load()["rules"][0]["rule"] == 3


def test_a_wrongly_typed_permissions_key_is_a_config_error(
    env: dict[str, str], project: Path
) -> None:
    path = write(user_toml(env), 'model = "openai/x"\n\n[permissions]\nallow = "Bash"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(project, env=env)
    assert str(caught.value) == f"{path}:4: key `permissions.allow`: Expected `array`, got `str`"
    write(path, "[permissions]\nalow = []\n")
    with pytest.raises(ConfigError) as caught:
        load_config(project, env=env)
    assert str(caught.value) == f"{path}:2: key `permissions.alow`: unknown key"


def test_a_rule_is_appended_with_the_users_comments_kept(
    env: dict[str, str], project: Path
) -> None:
    path = write(
        user_toml(env),
        '# my settings\ntheme = "light"  # easier on the eyes\n\n'
        '[permissions]\n# things I trust\nallow = [\n  "Bash(git diff:*)",  # reviews\n]\n',
    )
    files = PermissionFiles(project, env)
    assert files.add("Bash(npm run test:*)", "allow", "user") == str(path)
    text = path.read_text()
    assert "# my settings" in text and "# easier on the eyes" in text
    assert "# things I trust" in text and "# reviews" in text
    assert rules_of(files) == [
        ("allow", "Bash(git diff:*)", "user"),
        ("allow", "Bash(npm run test:*)", "user"),
    ]
    files.add("Bash(npm run test:*)", "allow", "user")  # idempotent
    assert text == path.read_text()
    load_config(project, env=env)  # still a valid config.toml


def test_a_project_rule_goes_to_the_projects_config(env: dict[str, str], project: Path) -> None:
    TrustStore(trust_path(env)).set(project, True)
    files = PermissionFiles(project / "src", env)
    written = files.add("Edit(./src/app.py)", "allow", "project")
    assert written == str(project / ".coding-agent" / "config.toml")
    assert Path(written).read_text() == '[permissions]\nallow = ["Edit(./src/app.py)"]\n'
    with pytest.raises(ValueError) as caught:
        files.add("Bash", "allow", "claude-local")
    assert (
        str(caught.value)
        == "rules are written to the user or project config.toml, not 'claude-local'"
    )


def test_a_rule_is_removed_from_toml_and_from_claude_json(
    env: dict[str, str], project: Path
) -> None:
    paths = every_file(env, project)
    TrustStore(trust_path(env)).set(project, True)
    write(
        paths["user"],
        '# keep me\n[permissions]\nallow = ["Bash(git diff:*)", "Bash(ls:*)"]  # two\n',
    )
    files = PermissionFiles(project, env)
    files.remove("Bash(git diff:*)", "allow", str(paths["user"]))
    assert paths["user"].read_text() == '# keep me\n[permissions]\nallow = ["Bash(ls:*)"]  # two\n'
    files.remove("Bash(npm run test:*)", "allow", str(paths["claude-project"]))
    assert json.loads(paths["claude-project"].read_text()) == {
        "permissions": {"allow": [], "defaultMode": "acceptEdits"}
    }
    with pytest.raises(ValueError) as caught:
        files.remove("Bash(npm run test:*)", "allow", str(paths["claude-project"]))
    assert str(caught.value) == f"{paths['claude-project']} has no allow rule Bash(npm run test:*)"
    with pytest.raises(ValueError) as caught:
        files.remove("Bash", "allow", "/etc/passwd")
    assert str(caught.value) == "/etc/passwd is not one of this session's permission files"


def test_coding_agent_config_lists_the_rules_and_what_it_did_not_read(
    env: dict[str, str],
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    paths = every_file(env, project)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.chdir(project)
    assert main(["config"]) == 0
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert f"permissions.allow = Bash(git diff:*) # {paths['user']}" in lines
    assert f"permissions.deny = Read(~/.ssh/**) # {paths['claude-user']}" in lines
    assert not any("Bash(npm run test:*)" in line for line in lines)  # untrusted: not read
    reason = "not read, the project is not trusted (/trust to trust it)"
    assert f"# permission rules: {paths['claude-project']}: {reason}" in lines
