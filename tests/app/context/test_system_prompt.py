"""SYSTEM.md and APPEND_SYSTEM.md (issue 18 item 3) and the sections of the system prompt."""

from __future__ import annotations

from types import SimpleNamespace

from coding_agent.context.system_prompt import (
    DEFAULT_SYSTEM_PROMPT,
    build_sections,
    estimate_tokens,
    prompt_sections,
)


def rendered(place: SimpleNamespace) -> dict[str, str]:
    built = build_sections(place.project, place.env)
    sections = prompt_sections()
    return {key: sections[key].render(v) for key, v in built.values.items() if v is not None}


def test_without_files_the_default_prompt_names_the_working_folder(place: SimpleNamespace) -> None:
    text = rendered(place)
    assert list(text) == ["system"]
    assert (
        text["system"] == f"{DEFAULT_SYSTEM_PROMPT}\n\nCurrent working directory: {place.project}"
    )


def test_system_md_replaces_the_default_and_append_system_md_follows(
    place: SimpleNamespace,
) -> None:
    place.write(place.config / "coding-agent/SYSTEM.md", "You are a terse robot.\n")
    place.write(place.config / "coding-agent/APPEND_SYSTEM.md", "Always say please.\n")
    text = rendered(place)
    assert list(text) == ["system", "append-system"]
    assert text["system"].startswith("You are a terse robot.\n\nCurrent working directory:")
    assert DEFAULT_SYSTEM_PROMPT not in text["system"]
    assert text["append-system"] == "Always say please."
    built = build_sections(place.project, place.env)
    assert built.sources["system"] == str(place.config / "coding-agent/SYSTEM.md")


def test_a_trusted_projects_files_win_and_an_untrusted_ones_are_ignored(
    place: SimpleNamespace,
) -> None:
    place.write(place.config / "coding-agent/SYSTEM.md", "User prompt.\n")
    place.write(place.project / ".coding-agent/SYSTEM.md", "Project prompt.\n")
    place.write(place.project / ".coding-agent/APPEND_SYSTEM.md", "Project extra.\n")
    assert rendered(place)["system"].startswith("User prompt.")
    assert "append-system" not in rendered(place)
    place.trust()
    text = rendered(place)
    assert text["system"].startswith("Project prompt.")
    assert text["append-system"] == "Project extra."


def test_pis_system_files_are_read_after_ours(place: SimpleNamespace) -> None:
    """pi's ``~/.pi/agent/SYSTEM.md`` and ``APPEND_SYSTEM.md`` and a trusted project's
    ``.pi/`` ones count as pi reads them; ours win where both have one."""
    place.write(place.home / ".pi/agent/SYSTEM.md", "Pi user prompt.\n")
    place.write(place.home / ".pi/agent/APPEND_SYSTEM.md", "Pi extra.\n")
    text = rendered(place)
    assert text["system"].startswith("Pi user prompt.\n\nCurrent working directory:")
    assert text["append-system"] == "Pi extra."
    place.write(place.project / ".pi/SYSTEM.md", "Pi project prompt.\n")
    assert rendered(place)["system"].startswith("Pi user prompt.")  # untrusted: not read
    place.trust()
    assert rendered(place)["system"].startswith("Pi project prompt.")
    place.write(place.project / ".coding-agent/SYSTEM.md", "Our project prompt.\n")
    assert rendered(place)["system"].startswith("Our project prompt.")
    place.write(place.config / "coding-agent/APPEND_SYSTEM.md", "Our extra.\n")
    assert rendered(place)["append-system"] == "Our extra."


def test_context_files_and_skills_join_in_order(place: SimpleNamespace) -> None:
    place.write(place.project / "AGENTS.md", "Use tabs.\n")
    place.write(
        place.config / "coding-agent/skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: PDF work.\n---\nbody\n",
    )
    place.write(place.config / "coding-agent/skills/bad/SKILL.md", "---\nname: [\n---\n")
    built = build_sections(place.project, place.env)
    assert [k for k, v in built.values.items() if v is not None] == [
        "system",
        "context-files",
        "skills",
    ]
    assert any(str(place.config / "coding-agent/skills/bad/SKILL.md") in w for w in built.warnings)
    assert estimate_tokens("abcdefgh") == 2 and estimate_tokens("abcdefghi") == 3
