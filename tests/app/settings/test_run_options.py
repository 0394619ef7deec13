"""The run-scoped flags' values (:mod:`coding_agent.settings.run_options`): rules split as Claude
Code splits them, and what travels to the session worker comes back as it was given."""

from __future__ import annotations

import argparse
from pathlib import Path

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
