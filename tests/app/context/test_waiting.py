"""What an untrusted project holds that waits for /trust (issue 39 deliver 5), counted from the
files as Claude Code, pi and this agent lay them out."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from coding_agent.context.folders import markdown_files, skill_files
from coding_agent.context.prompt_templates import discover_templates
from coding_agent.context.skills import discover_skills
from coding_agent.context.waiting import describe_waiting, waiting_for_trust


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_every_kind_of_project_setup_is_named_with_its_count(tmp_path: Path) -> None:
    for name in ("a.md", "tools/b.md", "tools/deep/c.md", "notes.txt"):
        _write(tmp_path / ".claude/commands" / name, "x\n")
    _write(tmp_path / ".pi/prompts/p.md", "x\n")
    _write(tmp_path / ".claude/skills/one/SKILL.md", "x\n")
    _write(tmp_path / ".agents/skills/two/SKILL.md", "x\n")
    _write(tmp_path / ".claude/agents/reviewer.md", "x\n")
    _write(tmp_path / ".mcp.json", json.dumps({"mcpServers": {"a": {}, "b": {}, "c": {}}}))
    hooks = {"PreToolUse": [{"matcher": "Bash", "hooks": []}], "Stop": [{"hooks": []}]}
    rules = {"allow": ["Bash(npm test)"], "deny": ["Read(.env)", "Bash(rm:*)"]}
    _write(tmp_path / ".claude/settings.json", json.dumps({"hooks": hooks, "permissions": rules}))
    _write(tmp_path / ".coding-agent/SYSTEM.md", "x\n")
    _write(tmp_path / ".pi/skills/deploy/SKILL.md", "x\n")
    _write(tmp_path / ".pi/skills/notes.md", "x\n")
    _write(tmp_path / ".pi/APPEND_SYSTEM.md", "x\n")
    _write(tmp_path / ".pi/settings.json", '{"defaultThinkingLevel": "low"}')
    (tmp_path / ".coding-agent/facets/pkg").mkdir(parents=True)
    waiting = waiting_for_trust(tmp_path)
    assert describe_waiting(waiting) == (
        ".claude/commands (3), .pi/prompts (1), .claude/skills (1), .agents/skills (1), "
        ".pi/skills (2), .claude/agents (1), .mcp.json (3 servers), "
        ".claude/settings.json hooks (2 hooks), .claude/settings.json permissions (3 rules), "
        ".coding-agent/SYSTEM.md, .pi/APPEND_SYSTEM.md, .pi/settings.json, "
        ".coding-agent/facets (1 package)"
    )
    assert [w.place for w in waiting if w.live] == [
        ".claude/commands", ".pi/prompts", ".claude/skills", ".agents/skills", ".pi/skills",
        ".coding-agent/SYSTEM.md", ".pi/APPEND_SYSTEM.md",
    ]  # fmt: skip


def test_an_empty_project_and_malformed_files_wait_for_nothing_they_cannot_count(
    tmp_path: Path,
) -> None:
    assert waiting_for_trust(tmp_path) == []
    _write(tmp_path / ".mcp.json", "{not json")
    _write(tmp_path / ".claude/settings.json", "[]")
    assert describe_waiting(waiting_for_trust(tmp_path)) == ".mcp.json (1 server)"


def test_what_waits_is_counted_by_the_walker_that_loads_it(place: SimpleNamespace) -> None:
    """One folder walker (coding_agent.context.folders) for loading and counting: a skill's own
    sub-folders, hidden folders and node_modules hold nothing either one sees, so the count
    before /trust is what /trust then loads (review finding of issue 38)."""
    project = place.project
    for name in ("a.md", "tools/b.md", ".hidden/c.md", "node_modules/d.md", "notes.txt"):
        _write(project / ".claude/commands" / name, "x\n")
    skill = "---\nname: {0}\ndescription: Does {0}.\n---\nBody.\n"
    _write(project / ".claude/skills/one/SKILL.md", skill.format("one"))
    _write(project / ".claude/skills/one/examples/inner/SKILL.md", skill.format("inner"))
    _write(project / ".claude/skills/node_modules/dep/SKILL.md", skill.format("dep"))
    before = {w.place: w.count for w in waiting_for_trust(project)}
    assert before == {".claude/commands": 2, ".claude/skills": 1}
    place.trust()
    templates = discover_templates(project, place.env).templates
    assert sorted(t.name for t in templates if t.in_project) == ["a", "tools:b"]
    skills = [s.name for s in discover_skills(project, place.env).skills]
    assert skills == ["one"]
    assert before[".claude/commands"] == len(markdown_files(project / ".claude/commands"))
    assert before[".claude/skills"] == len(list(skill_files(project / ".claude/skills")))
