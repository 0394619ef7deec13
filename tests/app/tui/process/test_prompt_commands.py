"""Skills, prompt templates and /context in the real TUI over a real worker (issue 18 items 1-3).

The user's config folder, home and a trusted project hold real files; the worker runs the faux
model. Everything is driven through the keyboard with Textual's Pilot.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from chord.textual import ConfirmScreen
from coding_agent.session_files.folders import Session
from coding_agent.settings.trust import TrustStore, trust_path

pytestmark = pytest.mark.anyio

SKILL = """---
name: review
description: Review code for bugs. Use when asked to review.
---
# Review checklist

Run scripts/check.sh first.
"""

TEMPLATE = """---
description: Review the staged changes
argument-hint: "[focus]"
---
Review the staged diff, focusing on $1. Notes: $ARGUMENTS
"""


@pytest.fixture
def homes(
    tmp_path: Path, agent_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, session: Session
) -> dict[str, Path]:
    """A private home and config folder (for the worker and this TUI process), a user skill,
    a broken skill, a project template, a SYSTEM.md; the project is trusted."""
    home, config = tmp_path / "home", tmp_path / "config"
    for name, value in (("HOME", home), ("XDG_CONFIG_HOME", config)):
        value.mkdir()
        monkeypatch.setenv(name, str(value))
        agent_env[name] = str(value)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))  # the TUI's and the worker's
    agent_env["CLAUDE_CONFIG_DIR"] = str(home / ".claude")
    skill = config / "coding-agent/skills/review/SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL)
    broken = home / ".claude/skills/broken/SKILL.md"
    broken.parent.mkdir(parents=True)
    broken.write_text("---\nname: [oops\n---\n")
    prompts = session.cwd / ".coding-agent/prompts"
    prompts.mkdir(parents=True)
    (prompts / "review-staged.md").write_text(TEMPLATE)
    (config / "coding-agent/SYSTEM.md").write_text("You are the test robot.\n")
    TrustStore(trust_path(agent_env)).set(session.cwd, True)
    return {"skill": skill, "broken": broken}


def user_texts(kit: Any, app: Any) -> list[str]:
    texts: list[str] = []
    for entry in kit.entries(app):
        if entry["kind"] == "pi.user":
            content = entry["model"][0]["content"]
            texts.append(content if isinstance(content, str) else content[0]["text"])
    return texts


def system_text(kit: Any, app: Any) -> str:
    systems = [e for e in kit.entries(app) if e["kind"] == "pi.system"]
    return systems[-1]["model"][0]["content"] if systems else ""


async def test_skill_command_sends_the_skill_and_the_prompt_lists_it(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path, homes: dict[str, Path]
) -> None:
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "ok"}]))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await kit.wait_for(
            pilot, lambda: any(str(homes["broken"]) in m for _, m in kit.toasts(app)), "warning"
        )
        assert "skill:review" in app.tui.commands
        await pilot.press(*"/skill:review the parser", "enter")
        await kit.wait_for(pilot, lambda: "ok" in kit.assistant_texts(app), "the answer")
        seen["user"] = user_texts(kit, app)
        seen["system"] = system_text(kit, app)

    await kit.drive(session, keeper, test)
    (sent,) = seen["user"]
    assert sent.startswith(f'<skill name="review" location="{homes["skill"]}">')
    assert (
        "# Review checklist\n\nRun scripts/check.sh first.\n\nARGUMENTS: the parser\n</skill>"
        in sent
    )
    system = seen["system"]
    assert system.startswith("## system\nYou are the test robot.")  # SYSTEM.md replaced it
    assert "<name>review</name>" in system
    assert f"<location>{homes['skill']}</location>" in system
    assert "Run scripts/check.sh" not in system  # only the name and description: read it later


async def test_a_skill_is_also_the_command_of_its_own_name_as_in_claude_code(
    kit: Any,
    session: Session,
    agent_env: dict[str, str],
    tmp_path: Path,
    homes: dict[str, Path],
    claude_plugins: Callable[..., Path],
) -> None:
    """``/review the parser`` runs the skill ``review`` as ``/skill:review`` does (Claude Code's
    skills are slash commands); a template of a skill's name keeps the name, and a skill saying
    ``user-invocable: false`` gets no ``/NAME``."""
    hidden = homes["skill"].parent.parent / "quiet" / "SKILL.md"
    hidden.parent.mkdir()
    hidden.write_text("---\nname: quiet\ndescription: Q.\nuser-invocable: false\n---\nQ\n")
    clash = homes["skill"].parent.parent / "review-staged" / "SKILL.md"
    clash.parent.mkdir()
    clash.write_text("---\nname: review-staged\ndescription: The skill.\n---\nS\n")
    claude_plugins(Path(agent_env["CLAUDE_CONFIG_DIR"]), "example-plugin")  # a plugin's skills
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "ok"}]))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: "skill:review" in app.tui.commands, "the commands")
        seen["names"] = set(app.tui.commands)
        seen["staged"] = app.tui.commands["review-staged"].description
        await pilot.press(*"/review the parser", "enter")
        await kit.wait_for(pilot, lambda: "ok" in kit.assistant_texts(app), "the answer")
        seen["user"] = user_texts(kit, app)

    await kit.drive(session, keeper, test)
    assert {"review", "skill:quiet", "skill:review-staged"} <= seen["names"]
    assert {"example-skill", "example-plugin:example-skill"} <= seen["names"]
    assert "quiet" not in seen["names"]
    assert seen["staged"].endswith("Review the staged changes")  # the template keeps it
    (sent,) = seen["user"]
    assert sent.startswith(f'<skill name="review" location="{homes["skill"]}">')
    assert sent.endswith("\n\nARGUMENTS: the parser\n</skill>")


async def test_a_forked_skill_runs_in_its_agent_and_the_conversation_gets_its_report(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path, homes: dict[str, Path]
) -> None:
    """``/scan parser`` typed in the TUI, of a skill with ``context: fork`` and ``agent:
    scout`` (the user's agent file): the scout gets the skill's body (its echo is its report),
    and what the conversation receives is that report, framed as a subagent's result; the
    root answers it."""
    config = homes["skill"].parents[2]
    skill = config / "skills" / "scan" / "SKILL.md"
    skill.parent.mkdir()
    skill.write_text(
        "---\nname: scan\ndescription: Scan\ncontext: fork\nagent: scout\n---\nScan $0.\n"
    )
    (config / "agents").mkdir()
    (config / "agents" / "scout.md").write_text(
        "---\nname: scout\ndescription: Scouts\n---\nYou are SCOUT.\n"
    )
    script = tmp_path / "faux-script.json"
    scout = {"when": "You are SCOUT.", "steps": [{"echo": True}]}
    script.write_text(json.dumps({"steps": [{"text": "ok"}], "conversations": [scout]}))
    keeper = kit.supervisor(session, agent_env, faux_script=script)
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await kit.wait_for(pilot, lambda: "scan" in app.tui.commands, "the /scan command")
        await pilot.press(*"/scan parser", "enter")
        await kit.wait_for(pilot, lambda: "ok" in kit.assistant_texts(app), "the answer")
        seen["user"] = user_texts(kit, app)

    await kit.drive(session, keeper, test)
    (sent,) = seen["user"]  # the skill itself never reached the conversation
    assert sent.startswith("/scan ran in a subagent (scout), which returned:"), sent
    (report,) = sent.split('<subagent-result command="/scan" agent="scout">')[1:]
    assert "Scan parser." in report  # the scout's echo of what it was sent


async def test_a_skills_model_answers_the_turn_its_command_starts(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path, homes: dict[str, Path]
) -> None:
    """A skill's ``model:`` applies to the turn ``/NAME`` starts, as a command's does (and as
    Claude Code runs it); the next prompt goes to the conversation's model."""
    fast = homes["skill"].parent.parent / "fast" / "SKILL.md"
    fast.parent.mkdir()
    fast.write_text("---\nname: fast\ndescription: Quick.\nmodel: faux/faux-big\n---\nGo.\n")
    script = kit.script(tmp_path, [{"text": "one"}, {"text": "two"}])
    keeper = kit.supervisor(session, agent_env, faux_script=script)
    seen: dict[str, Any] = {}

    def answers(app: Any) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for entry in kit.entries(app):
            if entry["kind"] == "pi.assistant" and entry.get("model"):
                message = entry["model"][0]
                text = "".join(b.get("text", "") for b in message["content"] if b["type"] == "text")
                found.append((text, message["model"]))
        return found

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: "fast" in app.tui.commands, "the commands")
        await pilot.press(*"/fast", "enter")
        await kit.wait_for(pilot, lambda: "one" in kit.assistant_texts(app), "the answer")
        await kit.wait_for(pilot, lambda: kit.idle(app), "the turn's end")
        await pilot.press(*"again", "enter")
        await kit.wait_for(pilot, lambda: "two" in kit.assistant_texts(app), "the next answer")
        seen["answers"] = answers(kit.app_of(pilot))

    await kit.drive(session, keeper, test)
    assert seen["answers"] == [("one", "faux-big"), ("two", "faux-1")]


async def test_a_template_is_in_the_palette_and_expands_its_arguments(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path, homes: dict[str, Path]
) -> None:
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "ok"}]))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"/review-s")
        await kit.wait_for(pilot, lambda: app.editor.palette.display, "the palette")
        seen["rows"] = [(s.label, s.hint, s.description) for s in app.editor.palette.suggestions]
        await pilot.press("tab", *'security "error paths"', "enter")
        await kit.wait_for(pilot, lambda: "ok" in kit.assistant_texts(app), "the answer")
        seen["user"] = user_texts(kit, app)

    await kit.drive(session, keeper, test)
    assert seen["rows"][0] == ("/review-staged", "[focus]", "Review the staged changes")
    assert seen["user"] == [
        'Review the staged diff, focusing on security. Notes: security "error paths"'
    ]


async def test_context_lists_every_section_with_its_size(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path, homes: dict[str, Path]
) -> None:
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "ok"}]))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"/context", "enter")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Context: ~"), "the preview")
        seen["preview"] = kit.options(app)
        await pilot.press("escape")
        await pilot.press(*"hello", "enter")
        await kit.wait_for(pilot, lambda: "ok" in kit.assistant_texts(app), "the answer")
        await pilot.press(*"/context", "enter")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Context: ~"), "the listing")
        seen["sent"] = kit.options(app)
        seen["title"] = kit.dialog_title(app)
        await pilot.press(*["down"] * 4, "enter")  # the system section's row: its text
        await kit.wait_for(pilot, lambda: kit.dialog_ready(app, ConfirmScreen), "the text")
        seen["text"] = "\n".join(str(s.render()) for s in app.screen.query(Static))
        await pilot.press("escape")

    await kit.drive(session, keeper, test)
    config = agent_env["XDG_CONFIG_HOME"]
    for rows in (seen["preview"], seen["sent"]):
        # the budget first: system prompt, tools, messages, free space; then the details
        assert [r.split("  ")[0] for r in rows[:4]] == [
            "System prompt", "Tools", "Messages", "Free space",
        ]  # fmt: skip
        assert rows[0].startswith("System prompt  ~") and rows[0].endswith(" sections")
        assert rows[1].startswith("Tools  ~") and "tools, sent beside" in rows[1]
        assert rows[4].startswith("  system  ~")
        assert rows[4].endswith(f"tokens  {config}/coding-agent/SYSTEM.md")
        assert any(r.startswith("  skills  ~") and r.endswith("1 skill") for r in rows)
        # every tool offered, each with the size of its definition (measured by the worker);
        # the picker numbers rows 1-9 only, so later rows are compared without their indent
        sized = {
            r.split()[0]: r.split()[1]
            for r in rows[5:]
            if len(r.split()) == 3 and r.split()[2] == "tokens"
        }
        assert {"read", "bash", "edit", "write"} <= set(sized)
        assert all(size.startswith("~") for size in sized.values())
    assert "1 prompt, 1 answer" in seen["sent"][2] and seen["sent"][2].startswith("Messages  ~")
    assert seen["title"].startswith("Context: ~") and "200,000 tokens (" in seen["title"]
    assert "You are the test robot." in seen["text"]


async def test_a_templates_shell_command_runs_after_the_dialog_and_its_output_is_sent(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path, homes: dict[str, Path]
) -> None:
    """Issue 39 deliver 2: ``!`cmd``` in a template runs through the worker's ``!cmd`` runner
    once the user said yes; its output goes into the prompt; "no" sends nothing."""
    prompts = session.cwd / ".coding-agent/prompts"
    (prompts / "status.md").write_text("Files here:\n!`echo one; echo two`\nSay which.\n")
    keeper = kit.supervisor(
        session, agent_env, faux_script=kit.script(tmp_path, [{"text": "ok"}, {"text": "ok2"}])
    )
    seen: dict[str, Any] = {}

    async def answer(pilot: Any, app: Any, keys: list[str]) -> str:
        await pilot.press(*"/status", "enter")
        await kit.wait_for(pilot, lambda: kit.dialog_ready(app, ConfirmScreen), "the dialog")
        dialog = app.screen
        text = "\n".join(str(s.render()) for s in dialog.query(Static))
        await pilot.press(*keys)
        await kit.wait_for(pilot, lambda: app.screen is not dialog, "it to close")
        return text

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        seen["declined"] = await answer(pilot, app, ["2", "enter"])
        seen["after_no"] = user_texts(kit, app)
        await answer(pilot, app, ["1", "enter"])
        await kit.wait_for(pilot, lambda: "ok" in kit.assistant_texts(app), "the answer")
        seen["user"] = user_texts(kit, app)
        seen["kinds"] = kit.kinds(app)

    await kit.drive(session, keeper, test)
    assert "$ echo one; echo two" in seen["declined"]
    assert seen["after_no"] == []
    assert seen["user"] == ["Files here:\none\ntwo\nSay which."]
    assert "coding-agent.shell" in seen["kinds"]  # the command is in the transcript too


def _deny_touch_ask_echo(claude: Path, project: Path) -> None:
    """Your rules deny ``touch`` and ask for ``echo``; two project templates allow them."""
    claude.mkdir(parents=True, exist_ok=True)
    rules = {"permissions": {"deny": ["Bash(touch:*)"], "ask": ["Bash(echo:*)"]}}
    (claude / "settings.json").write_text(json.dumps(rules))
    prompts = project / ".coding-agent/prompts"
    (prompts / "mark.md").write_text(
        "---\nallowed-tools: Bash(touch:*)\n---\n!`touch MARKED`\nDone?\n"
    )
    (prompts / "hello.md").write_text("---\nallowed-tools: Bash(echo:*)\n---\n!`echo hi`\nOk?\n")


async def test_a_templates_shell_command_is_decided_as_a_bash_call_of_it(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path, homes: dict[str, Path]
) -> None:
    """A template's ``allowed-tools`` spares the dialog, never a rule: with ``deny:
    ["Bash(touch:*)"]`` its ``!`touch …``` is refused and nothing is sent (as ``-p`` does, and
    as a ``bash`` call of it would be); with ``ask: ["Bash(echo:*)"]`` its ``!`echo …``` asks
    although ``allowed-tools: Bash(echo:*)`` allows it."""
    _deny_touch_ask_echo(Path(agent_env["CLAUDE_CONFIG_DIR"]), session.cwd)
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "ok"}]))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"/mark", "enter")
        await kit.wait_for(
            pilot, lambda: any("was not sent" in m for _, m in kit.toasts(app)), "the refusal"
        )
        seen["refusal"] = [m for _, m in kit.toasts(app) if "was not sent" in m]
        seen["after_mark"] = user_texts(kit, app)
        await pilot.press(*"/hello", "enter")
        await kit.wait_for(pilot, lambda: kit.dialog_ready(app, ConfirmScreen), "the dialog")
        seen["asked"] = "\n".join(str(s.render()) for s in app.screen.query(Static))
        await pilot.press("2", "enter")  # no: nothing is sent

    await kit.drive(session, keeper, test)
    assert len(seen["refusal"]) == 1 and "touch MARKED" in seen["refusal"][0]
    assert "Bash(touch:*)" in seen["refusal"][0]  # the rule that refuses it is named
    assert not (session.cwd / "MARKED").exists()
    assert seen["after_mark"] == []
    assert "$ echo hi" in seen["asked"]


async def test_skills_without_any_opens_a_dialog_naming_the_folders_whole(
    kit: Any,
    session: Session,
    agent_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new user's /skills: where a skill goes, in a dialog as /hooks and /mcp show theirs.
    It was a toast, whose narrow column broke ``SKILL.md`` across two lines."""
    for name in ("HOME", "XDG_CONFIG_HOME"):
        folder = tmp_path / name.lower()
        folder.mkdir()
        monkeypatch.setenv(name, str(folder))
        agent_env[name] = str(folder)
    keeper = kit.supervisor(session, agent_env)
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"/skills", "enter")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Skills (0)"), "the dialog")
        seen["text"] = "\n".join(str(s.render()) for s in app.screen.query(Static))
        await pilot.press("escape")

    await kit.drive(session, keeper, test)
    assert (
        "No skills found. Put one in\n  ~/.config/coding-agent/skills/NAME/SKILL.md\n"
        in seen["text"]
    )
    assert "Also read: ~/.claude/skills, ~/.pi/agent/skills,\n  ~/.agents/skills" in seen["text"]
