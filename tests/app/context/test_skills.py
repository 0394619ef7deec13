"""Skills (issue 18 item 1): discovery, validation, the system prompt section, /skill: text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from coding_agent.context.skills import (
    SubagentSkills,
    discover_skills,
    invoke_skill,
    render_skills_section,
    skills_section_value,
)


def skill(
    name: str, description: str = "Does things.", extra: str = "", body: str = "Body."
) -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n"


def test_skills_come_from_every_user_folder_and_a_trusted_project(place: SimpleNamespace) -> None:
    place.write(place.config / "coding-agent/skills/own/SKILL.md", skill("own"))
    place.write(place.home / ".claude/skills/claude-one/SKILL.md", skill("claude-one"))
    place.write(place.home / ".pi/agent/skills/group/pi-one/SKILL.md", skill("pi-one"))
    place.write(place.project / ".coding-agent/skills/local/SKILL.md", skill("local"))
    place.write(place.project / ".claude/skills/local-claude/SKILL.md", skill("local-claude"))
    place.write(place.home / ".agents/skills/shared-one/SKILL.md", skill("shared-one"))
    place.write(place.project / ".agents/skills/local-shared/SKILL.md", skill("local-shared"))
    untrusted = discover_skills(place.project, place.env)
    assert [s.name for s in untrusted.skills] == ["own", "claude-one", "pi-one", "shared-one"]
    assert untrusted.warnings == ()
    place.trust()
    found = discover_skills(place.project, place.env)
    assert [(s.name, s.source) for s in found.skills] == [
        ("own", str(place.config / "coding-agent/skills")),
        ("claude-one", "~/.claude/skills"),
        ("pi-one", "~/.pi/agent/skills"),
        ("shared-one", "~/.agents/skills"),
        ("local", ".coding-agent/skills"),
        ("local-claude", ".claude/skills"),
        ("local-shared", ".agents/skills"),
    ]
    assert found.get("pi-one").path == place.home / ".pi/agent/skills/group/pi-one/SKILL.md"


def test_pis_skill_folders_are_read_as_pi_reads_them(place: SimpleNamespace) -> None:
    """pi reads a project's ``.pi/skills/`` and takes a ``NAME.md`` file directly in its two
    skill folders as a skill of its own (named by its frontmatter, else by the file)."""
    pi_skills = place.home / ".pi/agent/skills"
    place.write(pi_skills / "quick-notes.md", skill("quick-notes"))
    place.write(pi_skills / "unnamed.md", "---\ndescription: No name given.\n---\nBody.\n")
    place.write(pi_skills / "group/deep.md", skill("deep"))  # not at the root: not a skill
    place.write(pi_skills / "pr-review/SKILL.md", skill("pr-review"))
    place.write(place.project / ".pi/skills/deploy/SKILL.md", skill("deploy"))
    place.write(place.project / ".pi/skills/release.md", skill("release"))
    place.write(place.home / ".agents/skills/loose.md", skill("loose"))  # pi ignores these
    assert [s.name for s in discover_skills(place.project, place.env).skills] == [
        "pr-review", "quick-notes", "unnamed",
    ]  # fmt: skip
    place.trust()
    found = discover_skills(place.project, place.env)
    assert [(s.name, s.source) for s in found.skills] == [
        ("pr-review", "~/.pi/agent/skills"),
        ("quick-notes", "~/.pi/agent/skills"),
        ("unnamed", "~/.pi/agent/skills"),
        ("deploy", ".pi/skills"),
        ("release", ".pi/skills"),
    ]
    assert found.warnings == ()
    assert found.get("quick-notes").path == pi_skills / "quick-notes.md"
    assert found.get("quick-notes").folder == pi_skills


def test_xdg_config_home_moves_the_config_folder(place: SimpleNamespace) -> None:
    place.write(place.home / ".config/coding-agent/skills/default/SKILL.md", skill("default"))
    place.write(place.config / "coding-agent/skills/moved/SKILL.md", skill("moved"))
    assert [s.name for s in discover_skills(place.project, place.env).skills] == ["moved"]
    env = {"HOME": place.env["HOME"]}
    assert [s.name for s in discover_skills(place.project, env).skills] == ["default"]


def test_bad_skills_are_warnings_naming_the_file_never_errors(place: SimpleNamespace) -> None:
    root = place.config / "coding-agent/skills"
    # not YAML, and not key: value lines either (a list item): nothing can read it
    broken = place.write(root / "broken/SKILL.md", "---\nname: x\n- [oops\n---\nbody\n")
    unclosed = place.write(root / "unclosed/SKILL.md", "---\nname: unclosed\n")
    listed = place.write(root / "listed/SKILL.md", "---\n- a\n- b\n---\n")
    bare = place.write(root / "bare/SKILL.md", "---\nname: bare\n---\nno description\n")
    odd = place.write(root / "odd/SKILL.md", skill("Odd_Name"))
    moved = place.write(root / "here/SKILL.md", skill("elsewhere"))
    place.write(root / "good/SKILL.md", skill("good"))
    place.write(place.home / ".claude/skills/good/SKILL.md", skill("good", "Another."))
    found = discover_skills(place.project, place.env)
    assert [s.name for s in found.skills] == ["good", "elsewhere", "Odd_Name"]
    warnings = "\n".join(found.warnings)
    assert f"{broken}: skill skipped: the frontmatter is not valid YAML" in warnings
    assert f"{unclosed}: skill skipped: the frontmatter opened with --- is never closed" in warnings
    assert f"{listed}: skill skipped: the frontmatter must be a mapping" in warnings
    assert f"{bare}: skill skipped: the frontmatter needs a 'description'" in warnings
    assert f"{odd}: skill name 'Odd_Name' should use only lowercase letters" in warnings
    assert f"{moved}: skill name 'elsewhere' does not match its folder 'here'" in warnings
    assert "is also defined by" in warnings and "the first one is used" in warnings
    assert found.get("good").description == "Does things."  # the first one wins


def test_a_description_over_the_limit_loads_and_the_warning_says_so(place: SimpleNamespace) -> None:
    # Anthropic's own claude-api skill has a 1,068-character description
    long = "Use it. " * 140
    place.write(place.home / ".claude/skills/long/SKILL.md", skill("long", long))
    found = discover_skills(place.project, place.env)
    assert [s.name for s in found.skills] == ["long"]
    (warning,) = found.warnings
    assert warning.endswith(
        "the description is longer than 1024 characters (the Agent Skills limit); the skill "
        "loads with all of it"
    )


def test_the_section_lists_names_descriptions_and_files_but_not_hidden_skills(
    place: SimpleNamespace,
) -> None:
    root = place.config / "coding-agent/skills"
    place.write(root / "pdf/SKILL.md", skill("pdf", "Read <PDF> & tables."))
    place.write(root / "manual/SKILL.md", skill("manual", extra="disable-model-invocation: true\n"))
    found = discover_skills(place.project, place.env)
    value = skills_section_value(found)
    assert value == {
        "skills": [
            {
                "name": "pdf",
                "description": "Read <PDF> & tables.",
                "location": str(root / "pdf/SKILL.md"),
            }
        ]
    }
    text = render_skills_section(value)
    assert "use the read tool to load its file" in text
    assert "<name>pdf</name>" in text and "Read &lt;PDF&gt; &amp; tables." in text
    assert f"<location>{root / 'pdf/SKILL.md'}</location>" in text
    assert "manual" not in text
    assert found.get("manual") is not None  # still invocable with /skill:manual


def test_invoking_a_skill_sends_its_body_and_the_arguments(place: SimpleNamespace) -> None:
    root = place.config / "coding-agent/skills"
    place.write(root / "review/SKILL.md", skill("review", body="# Review\n\nRun scripts/check.sh."))
    (found,) = discover_skills(place.project, place.env).skills
    text = invoke_skill(found, "  the parser  ")
    assert text.startswith(f'<skill name="review" location="{root / "review/SKILL.md"}">')
    assert f"References are relative to {root / 'review'}." in text
    assert "name: review" not in text  # the frontmatter stays out
    # the body names no argument: they come at its end as ARGUMENTS:, as Claude Code appends them
    assert text.endswith("# Review\n\nRun scripts/check.sh.\n\nARGUMENTS: the parser\n</skill>")
    assert invoke_skill(found).endswith("# Review\n\nRun scripts/check.sh.\n</skill>")
    assert invoke_skill(found, "   ").endswith("Run scripts/check.sh.\n</skill>")


def test_a_skills_arguments_and_folder_are_substituted_as_claude_code_does(
    place: SimpleNamespace,
) -> None:
    root = place.config / "coding-agent/skills"
    body = (
        "Fix issue $ARGUMENTS[0] ($0) with priority $1; all: $ARGUMENTS; missing: $2.\n"
        "Run ${CLAUDE_SKILL_DIR}/scripts/check.sh."
    )
    place.write(root / "fix/SKILL.md", skill("fix", body=body))
    (found,) = discover_skills(place.project, place.env).skills
    text = invoke_skill(found, ' 42 "very high" ')
    assert (
        'Fix issue 42 (42) with priority very high; all: 42 "very high"; missing: $2.\n'
        f"Run {root / 'fix'}/scripts/check.sh.\n</skill>"
    ) in text
    assert text.endswith("</skill>")  # the body used them: they are not repeated after it


def test_claude_code_skill_fields_not_honoured_are_one_warning_naming_each(
    place: SimpleNamespace,
) -> None:
    root = place.config / "coding-agent/skills"
    extra = (
        "allowed-tools: Read Grep\ncontext: fork\nagent: Explore\nmodel: haiku\n"
        "hooks:\n  PreToolUse: []\nargument-hint: [issue]\n"
    )
    path = place.write(
        root / "triage/SKILL.md", skill("triage", extra=extra, body="State: !`git status`")
    )
    quiet = "argument-hint: [x]\nallowed-tools: Read\nmodel: haiku\nuser-invocable: false\n"
    place.write(root / "plain/SKILL.md", skill("plain", extra=quiet))
    found = discover_skills(place.project, place.env)
    assert [s.name for s in found.skills] == ["plain", "triage"]  # both still load
    # context: fork and agent are honoured: /triage runs in an Explore subagent
    assert [s.fork for s in found.skills] == [None, "Explore"]
    assert list(found.warnings) == [
        f"{path}: skill 'triage': not honoured here: hooks (its hooks do NOT run; put them in "
        "the hooks of ~/.claude/settings.json); !`command` lines (they are not run; the model reads them as "
        "written)"
    ]


def test_a_skills_agent_without_context_fork_is_a_warning_and_it_runs_inline(
    place: SimpleNamespace,
) -> None:
    """``agent`` means something only with ``context: fork`` (as in Claude Code), and a
    ``context`` other than ``fork`` nothing: both run in the conversation, with a warning each;
    ``context: fork`` alone runs in a ``general-purpose`` subagent."""
    root = place.config / "coding-agent/skills"
    lone = place.write(root / "lone/SKILL.md", skill("lone", extra="agent: Explore\n"))
    odd = place.write(root / "odd/SKILL.md", skill("odd", extra="context: inline\n"))
    place.write(root / "plain/SKILL.md", skill("plain", extra="context: fork\n"))
    found = discover_skills(place.project, place.env)
    assert {s.name: s.fork for s in found.skills} == {
        "lone": None, "odd": None, "plain": "general-purpose",
    }  # fmt: skip
    assert sorted(found.warnings) == [
        f"{lone}: skill 'lone': not honoured here: agent (only used with 'context: fork': it "
        "runs in the conversation)",
        f"{odd}: skill 'odd': not honoured here: context ('inline' is not 'fork': it runs in "
        "the conversation)",
    ]


def test_a_skills_argument_hint_is_read_even_where_yaml_refuses_it(place: SimpleNamespace) -> None:
    """Claude Code's ``argument-hint: [pr-number] [priority]`` is two YAML lists on one line: the
    skill loads with it as written (the block read line by line, as Claude Code does, with a
    warning saying so) and ``/review-pr 12`` sends its body; ``[focus]`` alone is a list of
    one; a skill without one has none."""
    root = place.config / "coding-agent/skills"
    path = place.write(
        root / "review-pr/SKILL.md",
        skill("review-pr", extra="argument-hint: [pr-number] [priority]\n", body="Review PR $0."),
    )
    place.write(root / "focus/SKILL.md", skill("focus", extra="argument-hint: [focus]\n"))
    place.write(root / "plain/SKILL.md", skill("plain"))
    found = discover_skills(place.project, place.env)
    hints = {s.name: s.argument_hint for s in found.skills}
    assert hints == {"review-pr": "[pr-number] [priority]", "focus": "[focus]", "plain": ""}
    (warning,) = found.warnings
    assert warning.startswith(f"{path}: the frontmatter is not valid YAML (line 4)")
    assert warning.endswith("read line by line as text (as Claude Code does)")
    review = found.get("review-pr")
    assert review is not None and review.description == "Does things."
    assert "Review PR 12." in invoke_skill(review, "12 high")


def test_a_project_folder_others_may_write_is_never_read(place: SimpleNamespace) -> None:
    place.write(place.project / ".claude/skills/planted/SKILL.md", skill("planted"))
    place.write(place.project / ".coding-agent/skills/own/SKILL.md", skill("own"))
    place.trust()
    (place.project / ".claude").chmod(0o777)
    try:
        assert [s.name for s in discover_skills(place.project, place.env).skills] == ["own"]
    finally:
        (place.project / ".claude").chmod(0o755)


def test_the_skills_and_prompts_pis_settings_list_are_read(place: SimpleNamespace) -> None:
    """pi's ``"skills": ["~/.codex/skills", ...]`` and ``"prompts": [...]`` in settings.json
    (relative to ~/.pi/agent, or to a trusted project's .pi/ and inside it) add their folders
    and files; pi's patterns are left out."""
    from coding_agent.context.prompt_templates import discover_templates

    place.write(place.home / ".codex/skills/codex-one/SKILL.md", skill("codex-one"))
    place.write(place.home / ".pi/agent/extra/single.md", skill("single"))
    place.write(place.home / "team/prompts/standup.md", "Write my standup.\n")
    place.write(place.home / "team/one-off.md", "One off.\n")
    place.write(
        place.home / ".pi/agent/settings.json",
        '{"skills": ["~/.codex/skills", "extra/single.md", "!nope", "~/globbed/*"],'
        ' "prompts": ["~/team/prompts", "../../team/one-off.md"]}',
    )
    place.write(place.project / "tools/skills/local-one/SKILL.md", skill("local-one"))
    place.write(place.home / "outside/skills/far/SKILL.md", skill("far"))
    place.write(
        place.project / ".pi/settings.json",
        '{"skills": ["../tools/skills", "../../home/outside/skills"]}',
    )
    found = discover_skills(place.project, place.env)
    assert [(s.name, s.source) for s in found.skills] == [
        ("codex-one", "~/.codex/skills"),
        ("single", "~/.pi/agent/extra"),
    ]
    templates = discover_templates(place.project, place.env)
    assert [(t.name, t.source) for t in templates.templates] == [
        ("standup", "~/team/prompts"),
        ("one-off", "~/team"),
    ]
    place.trust()  # the project's list joins, only what is inside the project
    names = [s.name for s in discover_skills(place.project, place.env).skills]
    assert names == ["codex-one", "single", "local-one"]


# -- the skills harness service (a subagent definition's skills:) --------------------------------
def test_the_skills_service_gives_a_skills_whole_text_read_afresh(place: SimpleNamespace) -> None:
    path = place.write(
        place.home / ".claude/skills/review/SKILL.md", skill("review", body="Check X.")
    )
    service = SubagentSkills(place.project, place.env)
    found = service.skill("review")
    assert found == {
        "name": "review",
        "location": str(path),
        "text": f'<skill name="review" location="{path}">\nReferences are relative to '
        f"{path.parent}.\n\nCheck X.\n</skill>",
    }
    assert service.skill("missing") is None
    assert service.names() == ["review"]
    path.write_text(skill("review", body="Check Y."))  # edited: the next subagent gets this
    assert "Check Y." in (service.skill("review") or {})["text"]
    place.write(place.home / ".claude/skills/later/SKILL.md", skill("later"))
    assert sorted(service.names()) == ["later", "review"]
    path.write_text("---\nname: review\ndescription: x\n- [broken\n---\n")  # unreadable
    assert service.skill("review") is None  # no longer a skill (discovery warns about it)


def test_a_plugins_skill_is_found_as_plugin_colon_skill(
    place: SimpleNamespace, claude_plugins: Callable[..., Path]
) -> None:
    claude_plugins(place.home / ".claude", "example-plugin")
    service = SubagentSkills(place.project, place.env)
    namespaced = service.skill("example-plugin:example-skill")
    assert namespaced is not None and namespaced["name"] == "example-skill"
    assert service.skill("other-plugin:example-skill") == namespaced  # the name still finds it
    assert service.skill("example-plugin:nothing") is None


def test_when_to_use_follows_the_description_in_the_models_listing(
    place: SimpleNamespace,
) -> None:
    # As published skills write it (Claude Code appends it to the description it lists).
    root = place.home / ".claude/skills"
    place.write(
        root / "skill-creator/SKILL.md",
        "---\nname: skill-creator\n"
        "description: Authors Claude Code skills (SKILL.md files).\n"
        "when_to_use: >-\n  Creating, editing or debugging any skill. Triggers on\n"
        '  "write a SKILL.md" or "turn this into a skill".\n'
        "---\n# Skill creator\n",
    )
    found = discover_skills(place.project, place.env)
    assert found.warnings == ()
    (listed,) = (skills_section_value(found) or {})["skills"]
    assert listed["description"] == (
        "Authors Claude Code skills (SKILL.md files). Creating, editing or debugging any skill. "
        'Triggers on "write a SKILL.md" or "turn this into a skill".'
    )
    # the palette keeps the description alone
    assert found.skills[0].description == "Authors Claude Code skills (SKILL.md files)."


def test_a_skills_named_arguments_are_the_words_at_their_positions(
    place: SimpleNamespace,
) -> None:
    root = place.home / ".claude/skills"
    place.write(
        root / "fix-issue/SKILL.md",
        "---\nname: fix-issue\ndescription: Fix a GitHub issue on a branch.\n"
        "argument-hint: <issue> <branch>\narguments: [issue, branch, issue_title]\n---\n"
        "Read issue #$issue (gh issue view $issue), then work on $branch; title: "
        "$issue_title. Cost: $5 (not an argument). Typed: $ARGUMENTS.\n",
    )
    (found,) = discover_skills(place.project, place.env).skills
    assert found.arguments == ("issue", "branch", "issue_title")
    text = invoke_skill(found, "1234 fix/login")
    assert (
        "Read issue #1234 (gh issue view 1234), then work on fix/login; title: $issue_title. "
        "Cost: $5 (not an argument). Typed: 1234 fix/login."
    ) in text
    assert "ARGUMENTS: " not in text  # the body used them
    # `arguments: issue branch` (a string) names the same words
    place.write(
        root / "short/SKILL.md",
        "---\ndescription: Short.\narguments: issue branch\n---\nOn $branch for $issue.\n",
    )
    short = discover_skills(place.project, place.env).get("short")
    assert short is not None and "On main for 7.\n</skill>" in invoke_skill(short, "7 main")


def test_disallowed_tools_and_paths_are_named_in_the_skills_warning(
    place: SimpleNamespace,
) -> None:
    root = place.home / ".claude/skills"
    path = place.write(
        root / "loop/SKILL.md",
        "---\nname: loop\ndescription: Poll a build until it finishes.\n"
        "disallowed-tools: AskUserQuestion\npaths: ['ci/**']\neffort: low\nlicense: MIT\n"
        "---\nPoll.\n",
    )
    found = discover_skills(place.project, place.env)
    assert [s.name for s in found.skills] == ["loop"]
    assert list(found.warnings) == [
        f"{path}: skill 'loop': not honoured here: disallowed-tools (the tools it removes stay "
        "offered while it runs (deny rules in settings.json or config.toml take a tool away)); "
        "paths (it is offered in every conversation, not only once the agent works on a file "
        "its paths match)"
    ]


def test_a_skills_model_and_allowed_tools_are_read_as_a_commands(place: SimpleNamespace) -> None:
    root = place.home / ".claude/skills"
    place.write(
        root / "ship/SKILL.md",
        "---\nname: ship\ndescription: Commit and push.\nmodel: haiku\n"
        "allowed-tools: Bash(git add:*) Bash(git commit:*), Read\n---\nShip it.\n",
    )
    place.write(root / "same/SKILL.md", "---\ndescription: Same.\nmodel: inherit\n---\nx\n")
    found = discover_skills(place.project, place.env)
    ship, same = found.get("ship"), found.get("same")
    assert ship is not None and same is not None
    assert ship.model == "haiku"
    assert ship.allowed_tools == ("Bash(git add:*)", "Bash(git commit:*)", "Read")
    assert same.model is None and same.allowed_tools == ()
