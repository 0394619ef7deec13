"""Agent files as Claude Code users have them (issue 39, item 1).

The fixtures below are written here in the shapes the public collections publish (a category
folder copied into ``~/.claude/agents``; a quoted one-line description with ``tools: Read, Write,
…`` and ``model: sonnet``; a ``>`` block description and ``model: opus``; the ``/agents``
generator's ``\\n``-escaped description with ``<example>`` blocks whose ``user:`` and
``assistant:`` lines start in the first column; an unquoted ``Triggers on: 'x'``; a dot in a
name; a YAML list of tools; ``tools: []``). They load with the right name, description, model
and tools; what does not load, or loads without a tool, is named with its file and line in the
exact words below; an untrusted project's ``.claude/agents`` is counted, not read; and one such
agent runs in the real worker with its mapped tools (its ``read`` is offered, not refused).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, define_facet
from chord.state import Delivery
from coding_agent.session_files.folders import create_session
from facets_subagents.claude_code import ANTHROPIC_ALIASES, resolve_model
from facets_subagents.contract import SubagentDefinitions
from facets_subagents.definitions import GENERAL_PURPOSE, agent_id, load_definitions
from pico3 import ConversationService

sys.path.insert(0, str(Path(__file__).parents[2] / "app" / "worker"))  # worker_support
from worker_support import (  # pyright: ignore[reportMissingImports]
    TIMEOUT,
    Client,
    connected,
    text_of,
    worker_process,
)

pytestmark = pytest.mark.anyio

# -- fixtures in the published shapes (written for these tests) ----------------------------------
API_DESIGNER = """---
name: api.designer
description: "Use this agent when designing APIs: REST or GraphQL endpoints, OpenAPI specs."
tools: Read, Write, Edit, Bash, Glob, Grep
model: sonnet
---

You are a senior API designer.
"""

AUDITOR = """---
name: security-auditor
description: >
  Audits code for vulnerabilities and insecure defaults.
  Use after a change that touches authentication.
model: opus
color: red
---
You are a security auditor.
"""

STORYTELLER = """---
name: visual-storyteller
description: Use this agent when a concept needs a picture. Examples:\\n\\n<example>\\nContext: \
An onboarding flow
user: "Explain our app in pictures"
assistant: "I'll use the visual-storyteller agent."
<commentary>
Pictures help.
</commentary>
</example>
color: purple
tools: Write, Read, MultiEdit, WebSearch, WebFetch
---

You are a visual storyteller.
"""

TRIGGERS = """---
name: privacy-review
description: Use when reviewing data practices. Triggers on: 'GDPR', 'consent'.
tools: Read, Grep, Glob, WebFetch, NotebookRead
model: haiku
---
You review privacy.
"""

LISTED = """---
name: team-lead
description: Leads a team.
tools:
  - Read
  - Grep
  - TeamCreate
  - mcp__github__get_issue
model: inherit
---
You lead.
"""

NO_TOOLS = """---
name: firmware
description: Writes firmware.
model: openai/gpt-5
tools: []
---
You write firmware.
"""

NO_FRONTMATTER = "# Content Creator\n\nWrites content.\n"
NO_NAME = "---\ndescription: Nameless.\n---\nBody.\n"
NO_DESCRIPTION = "---\nname: quiet\ntools: Read\n---\nBody.\n"
COLLECTION_README = "# Core development agents\n\nCopy these files into ~/.claude/agents.\n"


def env_for(tmp: Path) -> dict[str, str]:
    return {"HOME": str(tmp / "home"), "XDG_CONFIG_HOME": str(tmp / "config")}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def claude_dir(tmp: Path) -> Path:
    return tmp / "home" / ".claude" / "agents"


def test_published_shapes_load_with_their_name_description_model_and_tools(
    tmp_path: Path,
) -> None:
    agents = claude_dir(tmp_path)
    write(agents / "01-core-development" / "api-designer.md", API_DESIGNER)  # a copied category
    write(agents / "01-core-development" / "README.md", COLLECTION_README)
    write(agents / "security-auditor.md", AUDITOR)
    write(agents / "design" / "visual-storyteller.md", STORYTELLER)
    write(agents / "privacy-review.md", TRIGGERS)
    write(agents / "team-lead.md", LISTED)
    write(agents / "firmware.md", NO_TOOLS)
    found = load_definitions(env=env_for(tmp_path)).agents
    assert sorted(found) == [
        "api-designer",
        "firmware",
        "general-purpose",
        "privacy-review",
        "security-auditor",
        "team-lead",
        "visual-storyteller",
    ]
    api = found["api-designer"]
    assert api.written_name == "api.designer"
    assert api.description == (
        "Use this agent when designing APIs: REST or GraphQL endpoints, OpenAPI specs."
    )
    assert api.tools == ("read", "write", "edit", "bash", "find", "grep")
    assert api.model == "sonnet" and api.system_prompt == "You are a senior API designer."
    auditor = found["security-auditor"]
    assert auditor.description == (
        "Audits code for vulnerabilities and insecure defaults. Use after a change that touches "
        "authentication."
    )
    assert auditor.tools is None and auditor.model == "opus"
    story = found["visual-storyteller"]
    assert story.description == (
        "Use this agent when a concept needs a picture. Examples:\n\n<example>\n"
        'Context: An onboarding flow\nuser: "Explain our app in pictures"\n'
        'assistant: "I\'ll use the visual-storyteller agent."\n<commentary>\nPictures help.\n'
        "</commentary>\n</example>"
    )
    # MultiEdit is edit too, once; WebSearch and WebFetch are our web_search and web_fetch
    assert story.tools == ("write", "read", "edit", "web_search", "web_fetch")
    privacy = found["privacy-review"]
    assert privacy.description == (
        "Use when reviewing data practices. Triggers on: 'GDPR', 'consent'."
    )
    assert privacy.tools == ("read", "grep", "find", "web_fetch") and privacy.model == "haiku"
    lead = found["team-lead"]
    assert lead.tools == ("read", "grep", "mcp__github__get_issue") and lead.model is None
    assert found["firmware"].tools == () and found["firmware"].model == "openai/gpt-5"
    assert found["general-purpose"] is GENERAL_PURPOSE


def test_disallowed_tools_are_mapped_and_never_offered(tmp_path: Path) -> None:
    text = AUDITOR.replace("color: red", "color: red\ndisallowedTools: Bash, Write, MultiEdit")
    write(claude_dir(tmp_path) / "auditor.md", text)
    auditor = load_definitions(env=env_for(tmp_path)).agents["security-auditor"]
    assert auditor.tools is None and auditor.disallowed == ("bash", "write", "edit")


@pytest.mark.parametrize("tools", ["*", "'*'", "['*']", "\n  - '*'"])
def test_a_star_gives_the_callers_tools(tmp_path: Path, tools: str) -> None:
    write(
        claude_dir(tmp_path) / "any.md",
        LISTED.replace(
            LISTED[LISTED.index("tools:") : LISTED.index("model:")], f"tools: {tools}\n"
        ),
    )
    loaded = load_definitions(env=env_for(tmp_path))
    assert loaded.agents["team-lead"].tools is None and loaded.warnings == ()


def test_what_is_skipped_or_loads_without_a_tool_is_named_with_file_and_line(
    tmp_path: Path,
) -> None:
    agents = claude_dir(tmp_path)
    write(agents / "visual-storyteller.md", STORYTELLER)
    privacy = write(agents / "privacy-review.md", TRIGGERS)
    lead = write(agents / "team-lead.md", LISTED)
    firmware = write(agents / "firmware.md", NO_TOOLS)
    plain = write(agents / "content-creator.md", NO_FRONTMATTER)
    nameless = write(agents / "nameless.md", NO_NAME)
    junk = write(agents / "junk.md", "---\nJust a Title: in the frontmatter\n---\nBody.\n")
    quiet = write(agents / "quiet.md", NO_DESCRIPTION)
    loaded = load_definitions(env=env_for(tmp_path))
    assert list(loaded.errors) == [
        f"{plain}:1: no frontmatter: start the file with a --- line, name: and description: "
        "lines, and a closing --- line; the agent is skipped",
        f'{junk}:1: the frontmatter has no name: add "name: <agent-id>"; the agent is skipped',
        f'{nameless}:1: the frontmatter has no name: add "name: <agent-id>"; the agent is skipped',
        f'{quiet}:1: the frontmatter has no description: add "description: <when to use this '
        'agent>"; the agent is skipped',
    ]
    assert list(loaded.warnings) == [
        f"{firmware}:5: tools is empty, so the subagent has no tools (remove the line to give "
        "it the caller's tools)",
        f"{privacy}:4: NotebookRead: Claude Code tool this agent does not have yet; the "
        "subagent runs without it",
        f"{lead}:7: unknown tool 'TeamCreate' (not a Claude Code tool this agent maps, nor one "
        "of its own); the subagent runs without it",
    ]


def test_our_folder_and_a_trusted_projects_win_and_an_untrusted_projects_wait(
    tmp_path: Path,
) -> None:
    env = env_for(tmp_path)
    write(claude_dir(tmp_path) / "reviewer.md", TRIGGERS.replace("privacy-review", "reviewer"))
    ours = tmp_path / "config" / "coding-agent" / "agents"
    write(ours / "reviewer.md", AUDITOR.replace("security-auditor", "reviewer"))
    project = tmp_path / "project"
    write(project / ".claude" / "agents" / "reviewer.md", LISTED.replace("team-lead", "reviewer"))
    write(project / ".claude" / "agents" / "nested" / "api.md", API_DESIGNER)
    write(project / ".claude" / "agents" / "README.md", COLLECTION_README)
    write(project / ".coding-agent" / "agents" / "firmware.md", NO_TOOLS)

    untrusted = load_definitions(project=project, project_trusted=False, env=env)
    assert sorted(untrusted.agents) == ["general-purpose", "reviewer"]
    assert untrusted.agents["reviewer"].source == str(ours / "reviewer.md")  # ours over Claude's
    assert [(w.folder, w.count) for w in untrusted.waiting] == [
        (".claude/agents", 2),
        (".coding-agent/agents", 1),
    ]
    trusted = load_definitions(project=project, project_trusted=True, env=env)
    assert sorted(trusted.agents) == ["api-designer", "firmware", "general-purpose", "reviewer"]
    assert trusted.agents["reviewer"].source == str(project / ".claude/agents/reviewer.md")
    assert trusted.waiting == ()


def test_model_aliases_map_to_the_callers_provider_and_are_configurable() -> None:
    anthropic = {"provider": "anthropic", "modelId": "claude-sonnet-4-6"}
    openai = {"provider": "openai", "modelId": "gpt-5"}
    for alias, model_id in ANTHROPIC_ALIASES.items():
        assert resolve_model(alias, anthropic, {}) == (
            {"provider": "anthropic", "modelId": model_id},
            None,
        )
    assert resolve_model(None, openai, {}) == (openai, None)
    assert resolve_model("openai/o3", anthropic, {}) == (
        {"provider": "openai", "modelId": "o3"},
        None,
    )
    assert resolve_model("claude-sonnet-4-20250514", anthropic, {}) == (
        {"provider": "anthropic", "modelId": "claude-sonnet-4-20250514"},
        None,
    )
    # a pinned Claude id (wshobson's commands: claude-sonnet-4-0) names no model on openai
    assert resolve_model("claude-sonnet-4-0", openai, {}) == (
        openai,
        "model 'claude-sonnet-4-0' is a Claude model id, which provider 'openai' does not serve: "
        "the subagent uses the caller's (write provider/id, e.g. anthropic/claude-sonnet-4-0, to "
        "choose one)",
    )
    vertex = {"provider": "vertex", "modelId": "claude-sonnet-4-6"}
    assert resolve_model("claude-opus-4-1", vertex, {})[0] == {
        "provider": "vertex",
        "modelId": "claude-opus-4-1",
    }
    assert resolve_model("gpt-5-mini", openai, {})[0] == {
        "provider": "openai",
        "modelId": "gpt-5-mini",
    }
    assert resolve_model("haiku", openai, {}) == (
        openai,
        "model 'haiku' has no model on provider 'openai': the subagent uses the caller's (set "
        "ANTHROPIC_DEFAULT_HAIKU_MODEL=provider/id to choose one)",
    )
    # Claude Code's own variables choose: a bare id on anthropic, provider/id anywhere
    env = {"ANTHROPIC_DEFAULT_OPUS_MODEL": "claude-opus-4-1", "ANTHROPIC_DEFAULT_HAIKU_MODEL": "openai/gpt-5-mini"}  # fmt: skip
    assert resolve_model("opus", anthropic, env)[0] == {
        "provider": "anthropic",
        "modelId": "claude-opus-4-1",
    }
    assert resolve_model("opus", openai, env)[0] == openai
    assert resolve_model("haiku", openai, env)[0] == {"provider": "openai", "modelId": "gpt-5-mini"}


@given(st.text(max_size=80))
def test_a_normalised_name_is_a_usable_id_and_stays_as_it_is(name: str) -> None:
    normalised = agent_id(name)
    assert normalised == "" or re.fullmatch(r"[a-z0-9]([a-z0-9_-]{0,62}[a-z0-9])?", normalised)
    assert agent_id(normalised) == normalised


def test_names_are_normalised_not_refused(tmp_path: Path) -> None:
    assert agent_id("api.designer") == "api-designer"
    assert agent_id("PowerShell 5.1 Expert") == "powershell-5-1-expert"
    assert agent_id("code_reviewer") == "code_reviewer"
    # a name with nothing usable: the file's name is the id
    write(claude_dir(tmp_path) / "Kanji Helper.md", AUDITOR.replace("security-auditor", "漢字"))
    found = load_definitions(env=env_for(tmp_path)).agents
    assert found["kanji-helper"].written_name == "漢字"


def test_a_project_at_home_does_not_wait_for_its_own_claude_agents(tmp_path: Path) -> None:
    write(claude_dir(tmp_path) / "auditor.md", AUDITOR)
    loaded = load_definitions(
        project=tmp_path / "home", project_trusted=False, env=env_for(tmp_path)
    )
    assert "security-auditor" in loaded.agents and loaded.waiting == ()


# -- through the real worker ----------------------------------------------------------------------
READER = """---
name: notes.reader
description: "Reads notes: use it when a note must be read."
tools: Read, Grep, Glob, context-manager
disallowedTools: Grep
model: sonnet
color: green
---
You are the notes reader. Read the file you are told to and report its word.
"""

SCRIPT = {
    "steps": [
        {
            "toolCalls": [
                {
                    "name": "agent",
                    "arguments": {
                        "description": "read the notes",
                        "prompt": "Read NOTES.md and report the word.",
                        "subagent_type": "notes.reader",
                    },
                }
            ]
        },
        {"text": "parent done"},
    ],
    "conversations": [
        {
            "when": "You are the notes reader",
            "steps": [
                {"toolCalls": [{"name": "read", "arguments": {"path": "NOTES.md"}}]},
                {"text": "the word is fennel"},
            ],
        }
    ],
}


async def test_a_claude_code_agent_runs_in_the_worker_with_its_mapped_tools(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    project = tmp_path / "project"
    write(project / "NOTES.md", "The word is fennel.\n")
    write(project / ".claude" / "agents" / "waiting.md", AUDITOR)  # not trusted: waits
    reader = write(claude_dir(tmp_path) / "notes-reader.md", READER)
    stderr: list[str] = []
    env = {**agent_env, **env_for(tmp_path)}
    script = write(tmp_path / "script.json", json.dumps(SCRIPT))
    session = create_session(project, env=env)
    children: dict[int, Any] = {}  # a subagent's conversation id -> its latest view
    roots: list[Any] = []  # the root conversation's views (worker_support's Client takes the
    # first view without a parent for the root's, which a subagent's conversation also is)
    services: list[Any] = []

    def observer(fenv: FacetEnvironment) -> None:
        services.append(fenv.use(SubagentDefinitions))

        async def on_conversation(instance: Any, ctx: Context) -> None:
            info = instance.conversation.value
            if "parent" in info:
                return

            def deliver(value: Any, _ctx: Context, _delivery: Delivery) -> None:
                if "owner" in info:
                    children[info["id"]] = value
                else:
                    roots.append(value)
                client.notify()

            stop = instance.view.subscribe(deliver)
            try:
                await ctx.wait_cancelled()
            finally:
                stop()

        fenv.observe(ConversationService, on_conversation)

    client = Client()

    def on_stderr(line: str) -> None:
        stderr.append(line)
        client.notify()

    async with (
        worker_process(session, env, "--faux-script", str(script), on_stderr=on_stderr) as worker,
        connected(client, worker.socket, define_facet("test/observer", observer)),
    ):
        await client.root.send({"content": "go"}, BACKGROUND)

        def root_results() -> list[Any]:
            entries = roots[-1]["entries"] if roots else []
            return [e for e in entries if e["kind"] == "pi.tool_result"]

        def answered() -> bool:
            entries = roots[-1]["entries"] if roots else []
            return any(text_of(e) == "parent done" for e in entries)

        def child_read() -> bool:
            return any(
                e["kind"] == "pi.tool_result" for view in children.values() for e in view["entries"]
            )

        await client.wait_for(lambda: answered() and child_read())
        (view,) = children.values()
        assert view["config"]["selectedTools"] == ["read", "find"]  # Grep is disallowed
        assert view["config"]["model"] == {"provider": "faux", "modelId": "faux-1"}  # inherits
        (result,) = [e for e in view["entries"] if e["kind"] == "pi.tool_result"]
        message = result["model"][0]
        assert message["toolName"] == "read" and message["isError"] is False
        assert "The word is fennel." in message["content"][0]["text"]
        (report,) = root_results()
        assert report["model"][0]["content"][0]["text"] == "the word is fennel"
        with anyio.fail_after(TIMEOUT):
            summary = await services[0].summary(BACKGROUND)
        assert summary["waiting"] == [{"folder": ".claude/agents", "count": 1}]
        # a name no tool of the session answers to, and an alias the faux provider has no
        # model for, are each said once on the worker's stderr
        await client.wait_for(lambda: len(stderr) >= 2)
        assert [line.rstrip("\n") for line in stderr] == [
            f"coding-agent worker: {reader}:4: tool 'context-manager' is not available in this "
            "session; the subagent runs without it",
            f"coding-agent worker: {reader}: model 'sonnet' has no model on provider 'faux': the "
            "subagent uses the caller's (set ANTHROPIC_DEFAULT_SONNET_MODEL=provider/id to "
            "choose one)",
        ]
        assert {"notes-reader", "general-purpose"} <= {a["name"] for a in summary["agents"]}
        (named,) = [a for a in summary["agents"] if a["name"] == "notes-reader"]
        assert named["writtenName"] == "notes.reader" and named["source"] == str(reader)


PLUGIN_AGENTS = (
    Path(__file__).parents[2] / "app/fixtures/claude_plugins/feature-dev/agents"
)  # a real published plugin's (anthropics/claude-plugins-official, Apache-2.0)


def test_a_plugins_agents_load_first_and_any_folders_agent_of_that_name_replaces_them(
    tmp_path: Path,
) -> None:
    one_file = PLUGIN_AGENTS / "code-explorer.md"
    for path in (PLUGIN_AGENTS, one_file):  # a folder, or a file a manifest lists
        loaded = load_definitions(env=env_for(tmp_path), plugin_agents=[path])
        explorer = loaded.agents["code-explorer"]
        assert explorer.source == str(one_file) and explorer.model == "sonnet"
        assert loaded.errors == ()
    mine = write(
        claude_dir(tmp_path) / "explorer.md", READER.replace("notes.reader", "code-explorer")
    )
    loaded = load_definitions(env=env_for(tmp_path), plugin_agents=[PLUGIN_AGENTS])
    assert loaded.agents["code-explorer"].source == str(mine)


def test_agents_given_for_a_run_read_as_files_and_replace_a_files_agent(tmp_path: Path) -> None:
    write(
        claude_dir(tmp_path) / "reviewer.md", "---\nname: reviewer\ndescription: old\n---\nOld.\n"
    )
    given = {
        "source": "--agents",
        "agents": {
            "reviewer": {
                "description": "Reviews a diff",
                "prompt": "You review.",
                "tools": ["Read", "Glob", "TeamCreate"],
                "model": "sonnet",
                "permissionMode": "plan",
            },
            "Helper Bot": {"description": "helps", "prompt": ""},
            "broken": {"prompt": "no description"},
        },
    }
    loaded = load_definitions(env=env_for(tmp_path), given=given)
    reviewer = loaded.agents["reviewer"]  # the run's, over ~/.claude/agents' file
    assert (reviewer.description, reviewer.system_prompt) == ("Reviews a diff", "You review.")
    assert reviewer.tools == ("read", "find") and reviewer.model == "sonnet"
    assert reviewer.permission_mode == "plan" and reviewer.source == "--agents reviewer"
    assert loaded.agents["helper-bot"].system_prompt == "You are the helper-bot agent: helps"
    assert "broken" not in loaded.agents
    assert list(loaded.errors) == [
        '--agents broken:1: the frontmatter has no description: add "description: <when to use '
        'this agent>"; the agent is skipped'
    ]
    (warning,) = loaded.warnings  # an agent file's warning, naming the agent
    assert warning.startswith("--agents reviewer:1: unknown tool 'TeamCreate'")
