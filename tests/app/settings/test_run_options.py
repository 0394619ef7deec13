"""The run-scoped flags' values (:mod:`coding_agent.settings.run_options`): rules split as Claude
Code splits them, and what travels to the session worker comes back as it was given."""

from __future__ import annotations

import argparse
from pathlib import Path

from coding_agent.settings.permissions import PermissionFiles
from coding_agent.settings.run_options import (
    RunFlags,
    add_worker_flags,
    split_rules,
    worker_flags,
)


def test_rules_split_at_commas_and_spaces_outside_parentheses() -> None:
    assert split_rules(["Bash(npm run test:*) Edit", "Read,WebFetch(domain:a.b, x)", "Edit"]) == (
        "Bash(npm run test:*)",
        "Edit",
        "Read",
        "WebFetch(domain:a.b, x)",
    )


def test_the_worker_command_line_carries_the_flags_as_given(tmp_path: Path) -> None:
    prompt = tmp_path / "p.md"
    prompt.write_text("From a file.\n")
    flags = RunFlags(
        allowed=("Bash(git log:*)", "-odd"),
        disallowed=("WebFetch",),
        system_prompt="Line one.\n--not-a-flag",
        append_system_prompt_file=str(prompt),
        mcp_config=('{"mcpServers": {"a": {"command": "x"}}}',),
        strict_mcp_config=True,
        settings='{"permissions": {"deny": ["Bash"]}}',
        agents='{"r": {"description": "d", "prompt": "p"}}',
        tools="",
    )
    parser = argparse.ArgumentParser()
    add_worker_flags(parser)
    assert worker_flags(parser.parse_args(flags.worker_args())) == flags
    resolved = flags.resolve()
    assert resolved.append_system_prompt == "From a file.\n"
    assert resolved.mcp_service() == {
        "source": "--mcp-config",
        "mcpServers": {"a": {"command": "x"}},
        "strict": True,
    }
    assert [r["kind"] for r in resolved.rules()] == ["deny", "allow", "allow"]
    assert resolved.tools == () and "bash" in resolved.left_out()  # "": no built-in tool
    assert resolved.services()["claude_run_agents"]["agents"]["r"]["prompt"] == "p"


def test_tools_take_claude_codes_names_and_ours_and_default_is_every_tool() -> None:
    assert RunFlags(tools="Bash, Edit,MultiEdit read").resolve().tools == ("bash", "edit", "read")
    assert RunFlags(tools="default").resolve().left_out() == frozenset()
    left = RunFlags(tools="Read,Task").resolve().left_out()
    assert {"bash", "edit", "write"} <= left and not {"read", "agent"} & left


def test_settings_join_the_rule_files_as_your_own_and_note_what_they_do_not_set(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "added"
    folder.mkdir()
    data = {
        "permissions": {
            "allow": ["Bash(npm test:*)"],
            "defaultMode": "acceptEdits",
            "denyInsteadOfPrompting": True,
            "additionalDirectories": [str(folder)],
        },
        "enabledPlugins": {"x@y": True},
        "statusLine": {"command": "x"},
    }
    files = PermissionFiles(tmp_path, {"HOME": str(tmp_path / "home")})
    files.set_run_settings("--settings (JSON)", data)
    loaded = files.load()
    assert [(r["rule"], r["source"]) for r in loaded["rules"]] == [
        ("Bash(npm test:*)", "--settings (JSON)")
    ]
    assert loaded["restrictions"] == {"denyInsteadOfPrompting": "--settings (JSON)"}
    assert files.working_directories().added == (str(folder),)
    notes = [note.split(": ", 1)[1] for note in loaded["problems"]]
    assert [note.split(":")[0] for note in notes] == [
        "`statusLine`",
        "`permissions.defaultMode`",
        "`enabledPlugins`",
    ]
    assert "--permission-mode" in notes[1]
