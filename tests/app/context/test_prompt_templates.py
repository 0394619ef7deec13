"""Prompt templates (issue 18 item 2): discovery, descriptions, argument substitution."""

from __future__ import annotations

from types import SimpleNamespace

from coding_agent.context.prompt_templates import discover_templates, expand_template


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
    dotted = place.write(root / "a.b.md", "body\n")
    place.write(root / "fine.md", "Fine.\n")
    found = discover_templates(place.project, place.env)
    assert [t.name for t in found.templates] == ["fine"]
    warnings = "\n".join(found.warnings)
    assert f"{broken}: prompt template skipped: the frontmatter is not valid YAML" in warnings
    assert f"{dotted}: prompt template skipped: 'a.b' is not a command name" in warnings


def test_arguments_fill_positions_and_all_arguments() -> None:
    body = "First $1, second $2, ninth [$9]; all: $@; again: $ARGUMENTS."
    assert expand_template(body, 'one "two words" three') == (
        "First one, second two words, ninth []; all: one two words three; "
        "again: one two words three."
    )
    assert expand_template(body, "") == "First , second , ninth []; all: ; again: ."
    # Substituted text is not expanded again, and unbalanced quotes split on spaces.
    assert expand_template("<$1> <$2>", "$2 x") == "<$2> <x>"
    assert expand_template("$1|$2", 'it"s fine') == 'it"s|fine'
