"""Claude Code plugins the user installed and enabled load through the app's own loaders:
their commands are prompt templates (``/plugin:command``, and ``/command`` when unambiguous),
their skills are skills; a project's ``enabledPlugins`` counts only when it is trusted; a plugin
that cannot be read is one warning naming the file. Real plugins (anthropics/
claude-plugins-official, tests/app/fixtures/claude_plugins) in a real ``~/.claude/plugins``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from coding_agent.context.prompt_templates import discover_templates, shell_commands
from coding_agent.context.skills import discover_skills
from coding_agent.settings.claude_plugins import enabled_plugins

MARKET = "claude-plugins-official"


def test_an_enabled_plugins_commands_are_templates_namespaced_and_plain(
    place: SimpleNamespace, claude_plugins: Callable[..., Path]
) -> None:
    claude_plugins(place.home / ".claude", "commit-commands", "example-plugin")
    found = discover_templates(place.project, place.env)
    assert found.warnings == ()
    names = [t.name for t in found.templates]
    assert names == [
        "commit-commands:commit",
        "example-plugin:example-command",
        "commit",
        "example-command",
    ]
    commit = found.get("commit-commands:commit")
    assert commit is not None
    assert commit.description == "Create a git commit"
    assert commit.source == f"plugin commit-commands@{MARKET}"
    assert commit.allowed_tools == (
        "Bash(git add:*)", "Bash(git status:*)", "Bash(git commit:*)"
    )  # fmt: skip
    assert "git status" in shell_commands(commit)
    assert found.get("commit") is not None and found.get("commit").body == commit.body  # type: ignore[union-attr]
    example = found.get("example-command")
    assert example is not None and example.argument_hint == "<required-arg> [optional-arg]"


def test_a_plain_name_another_command_has_stays_namespaced(
    place: SimpleNamespace, claude_plugins: Callable[..., Path]
) -> None:
    mine = place.write(place.home / ".claude/commands/commit.md", "My own commit flow\n")
    claude_plugins(place.home / ".claude", "commit-commands")
    found = discover_templates(place.project, place.env)
    assert found.get("commit").path == mine.resolve()  # type: ignore[union-attr]
    assert found.get("commit-commands:commit") is not None
    assert found.warnings == ()


def test_a_disabled_or_not_enabled_plugin_loads_nothing(
    place: SimpleNamespace, claude_plugins: Callable[..., Path]
) -> None:
    claude = place.home / ".claude"
    claude_plugins(claude, "commit-commands", enable=False)
    assert discover_templates(place.project, place.env).templates == ()
    settings = claude / "settings.json"
    settings.write_text(json.dumps({"enabledPlugins": {f"commit-commands@{MARKET}": False}}))
    found = discover_templates(place.project, place.env)
    assert (found.templates, found.warnings) == ((), ())


def test_an_enabled_plugins_skills_are_skills(
    place: SimpleNamespace, claude_plugins: Callable[..., Path]
) -> None:
    claude_plugins(place.home / ".claude", "example-plugin")
    skills = discover_skills(place.project, place.env)
    assert skills.warnings == ()
    assert [(s.name, s.source) for s in skills.skills] == [
        ("example-command", f"plugin example-plugin@{MARKET}"),
        ("example-skill", f"plugin example-plugin@{MARKET}"),
    ]
    assert skills.get("example-skill").path.parent.name == "example-skill"  # type: ignore[union-attr]


def test_a_project_enables_plugins_only_when_trusted(
    place: SimpleNamespace, claude_plugins: Callable[..., Path]
) -> None:
    claude_plugins(place.home / ".claude", "commit-commands", enable=False)
    place.write(
        place.project / ".claude/settings.json",
        json.dumps({"enabledPlugins": {f"commit-commands@{MARKET}": True}}),
    )
    assert discover_templates(place.project, place.env).templates == ()
    place.trust()
    names = [t.name for t in discover_templates(place.project, place.env).templates]
    assert names == ["commit-commands:commit", "commit"]
    # a trusted project's local file may turn it off again (later files win, as in Claude Code)
    place.write(
        place.project / ".claude/settings.local.json",
        json.dumps({"enabledPlugins": {f"commit-commands@{MARKET}": False}}),
    )
    assert discover_templates(place.project, place.env).templates == ()


def test_a_plugin_that_cannot_be_read_is_one_warning_naming_the_file(
    place: SimpleNamespace, claude_plugins: Callable[..., Path]
) -> None:
    claude = place.home / ".claude"
    folder = claude_plugins(claude, "commit-commands")
    manifest = folder / ".claude-plugin/plugin.json"
    manifest.write_text('{"name": "commit-commands",')
    settings = json.loads((claude / "settings.json").read_text())
    settings["enabledPlugins"]["ghost@elsewhere"] = True
    (claude / "settings.json").write_text(json.dumps(settings))
    found = discover_templates(place.project, place.env)
    assert found.templates == ()
    assert len(found.warnings) == 2
    broken, ghost = found.warnings
    assert broken.startswith(f"{manifest}: not valid JSON (")
    assert broken.endswith(f"plugin commit-commands@{MARKET} is not loaded")
    assert ghost.startswith(f"{claude / 'settings.json'}: plugin ghost@elsewhere is enabled but")
    assert "not installed" in ghost


def test_a_manifest_path_outside_the_plugin_is_refused(
    place: SimpleNamespace, claude_plugins: Callable[..., Path]
) -> None:
    folder = claude_plugins(place.home / ".claude", "commit-commands")
    place.write(place.home / "elsewhere/evil.md", "outside\n")
    manifest = folder / ".claude-plugin/plugin.json"
    data = json.loads(manifest.read_text())
    data["commands"] = ["../../../../../../elsewhere/evil.md", "./commands/commit.md"]
    manifest.write_text(json.dumps(data))
    found = enabled_plugins(place.home / ".claude", place.project, False)
    assert [p.name for p in found.plugins] == ["commit-commands"]
    assert found.warnings == (
        f"{manifest}: `commands` path '../../../../../../elsewhere/evil.md' is outside the "
        "plugin; not read",
    )
    names = [t.name for t in discover_templates(place.project, place.env).templates]
    assert names == ["commit-commands:commit", "commit"]


def test_a_version_1_record_and_a_cache_folder_without_a_record_are_found(
    place: SimpleNamespace, claude_plugins: Callable[..., Path]
) -> None:
    claude = place.home / ".claude"
    folder = claude_plugins(claude, "commit-commands")
    records = claude / "plugins/installed_plugins.json"
    records.write_text(json.dumps({
        "version": 1,
        "plugins": {f"commit-commands@{MARKET}": {"installPath": str(folder), "version": "1.0.0"}},
    }))  # fmt: skip
    assert [p.root for p in enabled_plugins(claude, None, False).plugins] == [folder]
    records.unlink()
    assert [p.root for p in enabled_plugins(claude, None, False).plugins] == [folder]


def test_what_the_worker_hands_the_features_names_each_plugins_parts(
    place: SimpleNamespace, claude_plugins: Callable[..., Path]
) -> None:
    claude = place.home / ".claude"
    example = claude_plugins(claude, "example-plugin")
    explanatory = claude_plugins(claude, "explanatory-output-style")
    agents = claude_plugins(claude, "feature-dev")
    found = {p.name: p.to_json() for p in enabled_plugins(claude, place.project, False).plugins}
    assert found["example-plugin"] == {
        "id": f"example-plugin@{MARKET}",
        "name": "example-plugin",
        "root": str(example),
        "agents": [],
        "hooks": [],
        "mcpServers": [str(example / ".mcp.json")],
    }
    assert found["explanatory-output-style"]["hooks"] == [str(explanatory / "hooks/hooks.json")]
    assert found["feature-dev"]["agents"] == [str(agents / "agents")]
    # the manifest's own places replace the defaults; inline objects are handed on as written
    manifest = example / ".claude-plugin/plugin.json"
    inline = {"stdio": {"command": "${CLAUDE_PLUGIN_ROOT}/server"}}
    manifest.write_text(json.dumps({"name": "example-plugin", "mcpServers": inline,
                                    "hooks": "./skills/../.mcp.json"}))  # fmt: skip
    (plugin,) = [p for p in enabled_plugins(claude, None, False).plugins if p.root == example]
    assert plugin.to_json()["mcpServers"] == [inline]
    assert plugin.to_json()["hooks"] == [str(example / ".mcp.json")]
