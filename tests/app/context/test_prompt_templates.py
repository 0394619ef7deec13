"""Prompt templates (issue 18 item 2; issue 39 deliver 2: commands as Claude Code and pi write
them): discovery, namespacing, descriptions, argument substitution, !`cmd` and @file."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from coding_agent.context.prompt_templates import (
    TemplateError,
    discover_templates,
    expand_template,
    shell_commands,
)


def test_templates_come_from_the_config_folder_and_a_trusted_project(
    place: SimpleNamespace,
) -> None:
    place.write(
        place.config / "coding-agent/prompts/review.md",
        '---\ndescription: Review the staged changes\nargument-hint: "[focus]"\n---\nReview $1.\n',
    )
    place.write(place.project / ".coding-agent/prompts/plan.md", "# Make a plan\n\nPlan $@.\n")
    place.write(place.project / ".claude/commands/fix.md", "Fix issue $ARGUMENTS\n")
    place.write(place.config / "coding-agent/prompts/notes.txt", "not a template")
    names = [t.name for t in discover_templates(place.project, place.env).templates]
    assert names == ["review"]
    place.trust()
    found = discover_templates(place.project, place.env)
    assert [(t.name, t.description, t.argument_hint) for t in found.templates] == [
        ("review", "Review the staged changes", "[focus]"),
        ("plan", "Make a plan", ""),
        ("fix", "Fix issue $ARGUMENTS", ""),
    ]
    assert found.get("fix").source == ".claude/commands"
    assert found.warnings == ()


def test_bad_templates_are_warnings_naming_the_file(place: SimpleNamespace) -> None:
    root = place.config / "coding-agent/prompts"
    broken = place.write(root / "broken.md", "---\ndescription: [x\n---\nbody\n")
    unclosed = place.write(root / "unclosed.md", "---\ndescription: x\nbody\n")
    dotted = place.write(root / "a.b.md", "body\n")
    place.write(root / "fine.md", "Fine.\n")
    found = discover_templates(place.project, place.env)
    # YAML that does not parse is read line by line, as Claude Code does, with a warning.
    assert [(t.name, t.description) for t in found.templates] == [
        ("broken", "[x"),
        ("fine", "Fine."),
    ]
    warnings = "\n".join(found.warnings)
    assert f"{broken}: the frontmatter is not valid YAML (line 3)" in warnings
    assert "read line by line as text" in warnings
    assert f"{unclosed}: prompt template skipped: the frontmatter opened with ---" in warnings
    assert f"{dotted}: prompt template skipped: 'a.b' is not a command name" in warnings


def test_arguments_fill_positions_and_all_arguments() -> None:
    body = "First $1, second $2, ninth [$9]; all: $@; again: $ARGUMENTS."
    assert expand_template(body, 'one "two words" three') == (
        "First one, second two words, ninth []; all: one two words three; "
        'again: one "two words" three.'
    )
    # $ARGUMENTS is exactly what was typed: quotes, spacing and newlines kept.
    typed = 'fix "the  bug"\nin parser.py'
    assert expand_template("Task: $ARGUMENTS", typed) == f"Task: {typed}"
    assert expand_template(body, "") == "First , second , ninth []; all: ; again: ."
    # Substituted text is not expanded again, and unbalanced quotes split on spaces.
    assert expand_template("<$1> <$2>", "$2 x") == "<$2> <x>"
    assert expand_template("$1|$2", 'it"s fine') == 'it"s|fine'


def test_arguments_a_body_does_not_name_come_after_it_as_claude_code_puts_them() -> None:
    # /plain to Bob: nothing typed is dropped
    assert expand_template("Say hello.\n", ' to "Bob" ') == 'Say hello.\n\nARGUMENTS: to "Bob"'
    assert expand_template("Say hello.", "") == "Say hello."
    assert expand_template("Run !`git status` for $1.", "me", outputs={"git status": "ok"}) == (
        "Run ok for me."
    )


def test_pis_argument_slices_take_words_from_a_position() -> None:
    """pi's ``${@:N}`` (the words from the N-th on) and ``${@:N:L}`` (L words from the N-th)."""
    body = "Component $1 with: ${@:2}; two: ${@:2:2}; from zero: ${@:0}; past the end: [${@:9}]"
    assert expand_template(body, 'Button onClick "disabled state" tabIndex') == (
        "Component Button with: onClick disabled state tabIndex; two: onClick disabled state; "
        "from zero: Button onClick disabled state tabIndex; past the end: []"
    )
    assert expand_template("<${@:1:1}>", "") == "<>"


def test_claude_code_and_pi_command_folders_are_read_and_sub_folders_namespace(
    place: SimpleNamespace,
) -> None:
    place.write(place.home / ".claude/commands/tools/api-scaffold.md", "Scaffold $1\n")
    place.write(place.home / ".claude/commands/deep/er/x.md", "x\n")
    place.write(place.home / ".pi/agent/prompts/pi-one.md", "From pi\n")
    place.write(place.project / ".pi/prompts/local-pi.md", "Local pi\n")
    place.write(place.project / ".claude/commands/git/commit.md", "Commit\n")
    place.trust()
    found = discover_templates(place.project, place.env)
    assert [(t.name, t.source) for t in found.templates] == [
        ("deep:er:x", "~/.claude/commands"),
        ("tools:api-scaffold", "~/.claude/commands"),
        ("pi-one", "~/.pi/agent/prompts"),
        ("git:commit", ".claude/commands"),
        ("local-pi", ".pi/prompts"),
    ]
    assert found.warnings == ()


def test_claude_codes_documented_argument_hint_and_its_other_keys_load(
    place: SimpleNamespace,
) -> None:
    place.write(
        place.home / ".claude/commands/fix-issue.md",
        "---\nargument-hint: [issue-number] [priority]\ndescription: Fix an issue\n"
        "allowed-tools: Bash(git add:*), Bash(git status:*), Read\nmodel: claude-3-5-haiku\n"
        "---\nFix issue #$1 with priority $2.\n",
    )
    place.write(place.home / ".claude/commands/one.md", "---\nargument-hint: [focus]\n---\nx\n")
    found = discover_templates(place.project, place.env)
    fix = found.get("fix-issue")
    assert fix is not None
    assert (fix.argument_hint, fix.description, fix.model) == (
        "[issue-number] [priority]",
        "Fix an issue",
        "claude-3-5-haiku",
    )
    assert fix.allowed_tools == ("Bash(git add:*)", "Bash(git status:*)", "Read")
    assert found.get("one").argument_hint == "[focus]"
    assert expand_template(fix, "42 high") == "Fix issue #42 with priority high."


def test_shell_markers_are_listed_for_the_caller_and_their_output_put_in_place() -> None:
    body = "Status:\n!`git status --short`\nLog of $1:\n!`git log -n $1`\nDone."
    assert shell_commands(body, "3") == ["git status --short", "git log -n 3"]
    outputs = {"git status --short": " M a.py\n", "git log -n 3": "abc first\n"}
    assert expand_template(body, "3", outputs=outputs) == (
        "Status:\n M a.py\nLog of 3:\nabc first\nDone."
    )
    with pytest.raises(TemplateError, match=r"runs `git status --short` first, and it was not run"):
        expand_template(body, "3")


def test_at_file_puts_the_file_in_place_inside_the_project_only(
    place: SimpleNamespace, tmp_path: Path
) -> None:
    (place.project / "src").mkdir()
    (place.project / "src" / "app.py").write_text("print('hi')\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    place.write(place.project / ".claude/commands/review.md", "Review @src/app.py please\n")
    place.write(place.project / ".claude/commands/leak.md", "Read @../outside.txt\n")
    place.trust()
    found = discover_templates(place.project, place.env)
    text = expand_template(found.get("review"), "", cwd=place.project)
    assert text == "Review src/app.py:\n```\nprint('hi')\n```\n please"
    with pytest.raises(TemplateError, match="outside the project"):
        expand_template(found.get("leak"), "", cwd=place.project)
    # An @ that names no file (a user, an email) stays as written.
    assert expand_template("ask @alice or me@example.com", "", cwd=place.project) == (
        "ask @alice or me@example.com"
    )
    assert os.path.exists(place.project / "src" / "app.py")


def test_a_commands_named_arguments_are_the_words_at_their_positions(
    place: SimpleNamespace,
) -> None:
    # A Claude Code command with named arguments, its $name in a !`cmd` line too.
    place.write(
        place.home / ".claude/commands/fix-issue.md",
        "---\ndescription: Fix a GitHub issue\nargument-hint: <number> <branch>\n"
        "arguments: [number, branch]\nallowed-tools: Bash(gh issue view:*) Read\n---\n"
        "Issue: !`gh issue view $number`\nWork on $branch (not $branches); rest: $3.\n",
    )
    found = discover_templates(place.project, place.env)
    assert found.warnings == ()
    (template,) = found.templates
    assert template.allowed_tools == ("Bash(gh issue view:*)", "Read")
    assert shell_commands(template, "42 fix/login") == ["gh issue view 42"]
    text = expand_template(template, "42 fix/login", outputs={"gh issue view 42": "Login fails"})
    assert text == "Issue: Login fails\nWork on fix/login (not $branches); rest: ."


def test_a_commands_fork_runs_in_its_agent_and_the_rest_is_one_warning(
    place: SimpleNamespace,
) -> None:
    # Claude Code runs such a command in a forked subagent, and so does this agent (its fork).
    path = place.write(
        place.home / ".claude/commands/research.md",
        "---\ndescription: Research a topic deeply\ncontext: fork\nagent: Explore\n"
        "disallowed-tools: Write\neffort: high\n---\nResearch $ARGUMENTS.\n",
    )
    found = discover_templates(place.project, place.env)
    assert [(t.name, t.fork) for t in found.templates] == [("research", "Explore")]
    assert list(found.warnings) == [
        f"{path}: command /research: not honoured here: disallowed-tools (the tools it removes stay offered "
        "while it runs (deny rules in settings.json or config.toml take a tool away))"
    ]
