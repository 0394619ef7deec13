"""The real Claude Agent SDK (``claude_agent_sdk.query`` and ``ClaudeSDKClient``) driving the real
``coding-agent`` binary through ``ClaudeAgentOptions(cli_path=...)``: a small wrapper runs it on
the scripted faux model (nothing reaches the network). The SDK speaks ``--input-format
stream-json`` and the control protocol (:mod:`coding_agent.cli.claude_control`): the
``initialize`` handshake, prompts as user lines (several turns in one process), ``can_use_tool``
requests that decide the approvals with ``--permission-prompt-tool stdio`` (a denied call does
not run), ``interrupt``, ``set_permission_mode``, an error for a request not served, and
``--include-partial-messages`` (``stream_event`` lines). "Always allow": the requests'
``permission_suggestions`` are the approval dialog's narrow session rules, an allow that keeps
them lets the matching calls run unasked, and any other ``updated_permissions`` refuses the
call."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    Message,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    PermissionUpdate,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ToolPermissionContext,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    query,
)
from claude_agent_sdk.types import PermissionRuleValue

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def _bash(command: str) -> dict[str, Any]:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}


def _options(
    project: Path, agent_env: dict[str, str], script: Any, **more: Any
) -> ClaudeAgentOptions:
    """Options whose ``cli_path`` is a wrapper running our binary on ``script`` (the faux
    model's steps), in ``project``, with the test's private state and no provider keys."""
    (project.parent / "script.json").write_text(json.dumps(script))
    wrapper = project.parent / "coding-agent-faux"
    wrapper.write_text(
        "#!/bin/sh\n"
        "unset ANTHROPIC_API_KEY OPENAI_API_KEY OPENAI_BASE_URL ANTHROPIC_BASE_URL\n"
        f'exec "{BINARY}" --faux-script "{project.parent / "script.json"}" "$@"\n'
    )
    wrapper.chmod(0o755)
    env = {
        **agent_env,
        "XDG_CONFIG_HOME": str(project.parent / "config"),
        "CODING_AGENT_WARM_START": "0",  # the run in this process, nothing outlives the test
    }
    return ClaudeAgentOptions(cli_path=str(wrapper), cwd=str(project), env=env, **more)


async def _all(messages: AsyncIterator[Message]) -> list[Message]:
    with anyio.fail_after(TIMEOUT):
        return [message async for message in messages]


def _texts(messages: list[Message]) -> list[str]:
    return [
        block.text
        for message in messages
        if isinstance(message, AssistantMessage)
        for block in message.content
        if isinstance(block, TextBlock)
    ]


def _tool_results(messages: list[Message]) -> list[ToolResultBlock]:
    return [
        block
        for message in messages
        if isinstance(message, UserMessage) and isinstance(message.content, list)
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]


@pytest.mark.anyio
async def test_query_gets_the_answer_and_a_result(project: Path, agent_env: dict[str, str]) -> None:
    options = _options(project, agent_env, [{"text": "Hello from the faux model."}])
    messages = await _all(query(prompt="say hello", options=options))
    init, *_, result = messages
    assert isinstance(init, SystemMessage) and init.subtype == "init"
    assert init.data["cwd"] == str(project)
    assert _texts(messages) == ["Hello from the faux model."]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error) == ("success", False)
    assert result.result == "Hello from the faux model."
    assert result.session_id == init.data["session_id"]


@pytest.mark.anyio
async def test_can_use_tool_allows_a_call_and_it_runs(
    project: Path, agent_env: dict[str, str]
) -> None:
    asked: list[tuple[str, dict[str, Any], str | None]] = []

    async def allow(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow:
        asked.append((name, tool_input, context.tool_use_id))
        return PermissionResultAllow()

    script = [_bash("touch allowed.txt"), {"text": "Made it."}]
    options = _options(project, agent_env, script, can_use_tool=allow)
    messages = await _all(query(prompt="make the file", options=options))
    ((name, tool_input, tool_use_id),) = asked
    assert (name, tool_input["command"]) == ("Bash", "touch allowed.txt")
    uses = [b for m in messages if isinstance(m, AssistantMessage) for b in m.content
            if isinstance(b, ToolUseBlock)]  # fmt: skip
    assert [use.id for use in uses] == [tool_use_id]
    assert (project / "allowed.txt").exists()
    (tool_result,) = _tool_results(messages)
    assert not tool_result.is_error
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.result == "Made it."


@pytest.mark.anyio
async def test_can_use_tool_denies_a_call_and_it_does_not_run(
    project: Path, agent_env: dict[str, str]
) -> None:
    async def deny(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultDeny:
        return PermissionResultDeny(message="no files today")

    script = [_bash("touch denied.txt"), {"text": "I could not."}]
    options = _options(project, agent_env, script, can_use_tool=deny)
    messages = await _all(query(prompt="make the file", options=options))
    assert not (project / "denied.txt").exists()
    (tool_result,) = _tool_results(messages)
    assert tool_result.is_error
    assert "no files today" in str(tool_result.content)  # the model reads the SDK's reason
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.result == "I could not."
    assert result.permission_denials == [
        {"tool_name": "Bash", "tool_use_id": tool_result.tool_use_id,
         "tool_input": {"command": "touch denied.txt"}}
    ]  # fmt: skip


@pytest.mark.anyio
async def test_without_the_stdio_prompt_tool_the_usual_rules_refuse_the_call(
    project: Path, agent_env: dict[str, str]
) -> None:
    # no can_use_tool: no --permission-prompt-tool stdio, and headless asks nobody
    script = [_bash("touch unasked.txt"), {"text": "Blocked."}]
    messages = await _all(
        query(prompt="make the file", options=_options(project, agent_env, script))
    )
    assert not (project / "unasked.txt").exists()
    result = messages[-1]
    assert isinstance(result, ResultMessage) and not result.is_error
    assert [d["tool_name"] for d in result.permission_denials or []] == ["Bash"]


@pytest.mark.anyio
async def test_two_turns_on_one_client_share_the_session(
    project: Path, agent_env: dict[str, str]
) -> None:
    script = [{"text": "First answer."}, {"text": "Second answer."}]
    async with ClaudeSDKClient(_options(project, agent_env, script)) as client:
        await client.query("one")
        first = await _all(client.receive_response())
        await client.query("two")
        second = await _all(client.receive_response())
    assert _texts(first) == ["First answer."] and _texts(second) == ["Second answer."]
    one, two = first[-1], second[-1]
    assert isinstance(one, ResultMessage) and isinstance(two, ResultMessage)
    assert (one.result, two.result) == ("First answer.", "Second answer.")
    assert one.session_id == two.session_id  # one process, one session, two turns


@pytest.mark.anyio
async def test_interrupt_aborts_the_running_turn_and_the_session_goes_on(
    project: Path, agent_env: dict[str, str]
) -> None:
    started = anyio.Event()

    async def allow(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow:
        started.set()
        return PermissionResultAllow()

    script = [_bash("sleep 300 && touch late.txt"), {"text": "After the interrupt."}]
    options = _options(project, agent_env, script, can_use_tool=allow)
    async with ClaudeSDKClient(options) as client:
        await client.query("wait a long time")
        with anyio.fail_after(TIMEOUT):
            await started.wait()
        await client.interrupt()
        aborted = await _all(client.receive_response())
        await client.query("and now?")
        after = await _all(client.receive_response())
    stopped = aborted[-1]
    assert isinstance(stopped, ResultMessage)
    assert (stopped.subtype, stopped.is_error) == ("error_during_execution", True)
    assert "interrupted (an interrupt request): the turn was aborted" in (stopped.result or "")
    done = after[-1]
    assert isinstance(done, ResultMessage) and done.result == "After the interrupt."
    assert done.session_id == stopped.session_id
    assert not (project / "late.txt").exists()


@pytest.mark.anyio
async def test_set_permission_mode_and_unserved_requests(
    project: Path, agent_env: dict[str, str]
) -> None:
    asked: list[str] = []

    async def deny(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultDeny:
        asked.append(name)
        return PermissionResultDeny(message="not asked in acceptEdits")

    write = {"name": "write", "arguments": {"path": "notes.txt", "content": "edited\n"}}
    script = [{"toolCalls": [write]}, {"text": "Written."}]
    async with ClaudeSDKClient(_options(project, agent_env, script, can_use_tool=deny)) as client:
        with pytest.raises(Exception, match="Unsupported control request subtype: mcp_status"):
            await client.get_mcp_status()
        with pytest.raises(Exception, match="bypassPermissions is --permission-mode auto"):
            await client.set_permission_mode("bypassPermissions")
        await client.set_permission_mode("acceptEdits")  # an edit in the project runs unasked
        await client.query("write the notes")
        messages = await _all(client.receive_response())
    assert asked == []
    assert (project / "notes.txt").read_text() == "edited\n"
    init = messages[0]
    assert isinstance(init, SystemMessage) and init.data["permissionMode"] == "acceptEdits"


@pytest.mark.anyio
async def test_prompts_as_content_blocks_each_get_a_result(
    project: Path, agent_env: dict[str, str]
) -> None:
    def user(content: Any) -> dict[str, Any]:
        return {"type": "user", "message": {"role": "user", "content": content},
                "parent_tool_use_id": None, "session_id": ""}  # fmt: skip

    async def prompts() -> AsyncIterator[dict[str, Any]]:
        pdf = {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}
        yield user([{"type": "document", "source": pdf}])  # not sendable: an error result
        yield user([{"type": "text", "text": "first block"}, {"type": "text", "text": " second"}])

    options = _options(project, agent_env, [{"echo": True}])
    messages = await _all(query(prompt=prompts(), options=options))
    results = [m for m in messages if isinstance(m, ResultMessage)]
    refused, answered = results
    assert (refused.subtype, refused.is_error) == ("error_during_execution", True)
    assert "a document content block is not supported here" in (refused.result or "")
    assert not answered.is_error
    assert "user: first block second" in (answered.result or "")  # what the model was sent


@pytest.mark.anyio
async def test_partial_messages_stream_the_answer_before_its_message(
    project: Path, agent_env: dict[str, str]
) -> None:
    answer = "The quick brown fox jumps over the lazy dog, twice over the fence."
    script = [{"thinking": "Let me think about it.", "text": answer}]
    options = _options(project, agent_env, script, include_partial_messages=True)
    messages = await _all(query(prompt="a fox?", options=options))
    kinds = [type(m).__name__ for m in messages]
    assert kinds[0] == "SystemMessage" and kinds[-2:] == ["AssistantMessage", "ResultMessage"]
    events = [m.event for m in messages if isinstance(m, StreamEvent)]
    assert len(events) == len(messages) - 3  # every line between init and the answer
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert "".join(d["text"] for d in deltas if d["type"] == "text_delta") == answer
    thought = "".join(d["thinking"] for d in deltas if d["type"] == "thinking_delta")
    assert thought == "Let me think about it."
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert starts == ["thinking", "text"]


def test_a_signal_ends_a_stream_json_run_while_stdin_stays_open(
    project: Path, agent_env: dict[str, str]
) -> None:
    """SIGTERM between turns ends the run at once (exit 130), though its stdin is still open:
    the lines are not read by a thread the interpreter would wait for at exit."""
    script = project.parent / "script.json"
    script.write_text(json.dumps([{"text": "unused"}]))
    env = {**agent_env, "XDG_CONFIG_HOME": str(project.parent / "config"),
           "CODING_AGENT_WARM_START": "0"}  # fmt: skip
    process = subprocess.Popen(
        [str(BINARY), "--faux-script", str(script), "--output-format", "stream-json",
         "--input-format", "stream-json"],
        cwd=project, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    try:
        request = {"subtype": "initialize", "hooks": None}
        process.stdin.write(json.dumps({"type": "control_request", "request_id": "r1",
                                        "request": request}) + "\n")  # fmt: skip
        process.stdin.flush()
        answer = json.loads(process.stdout.readline())  # the run is reading stdin now
        assert answer["response"]["subtype"] == "success"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=TIMEOUT) == 130  # stdin is still open
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.mark.anyio
async def test_set_model_switches_the_model_of_the_next_turns(
    project: Path, agent_env: dict[str, str]
) -> None:
    script = {"steps": [{"text": "One."}, {"text": "Two."}, {"text": "Three."}],
              "models": [{"id": "faux-2"}]}  # fmt: skip
    async with ClaudeSDKClient(_options(project, agent_env, script)) as client:
        await client.query("one")
        first = await _all(client.receive_response())
        with pytest.raises(Exception, match="a model is provider/id"):
            await client.set_model("claude-sonnet-5")
        with pytest.raises(Exception, match=r"unknown model faux/nope \(available: faux/faux-1"):
            await client.set_model("faux/nope")
        await client.set_model("faux/faux-2")
        await client.query("two")
        second = await _all(client.receive_response())
        await client.set_model(None)  # the model the run started with
        await client.query("three")
        third = await _all(client.receive_response())
    models = []
    for turn in (first, second, third):
        init, answer = turn[0], turn[-2]
        assert isinstance(init, SystemMessage) and isinstance(answer, AssistantMessage)
        models.append((init.data["model"], answer.model))
    assert models == [
        ("faux/faux-1", "faux-1"), ("faux/faux-2", "faux-2"), ("faux/faux-1", "faux-1")
    ]  # fmt: skip


def _session_rules(*rules: tuple[str, str | None]) -> dict[str, Any]:
    """A ``permission_suggestions`` entry as Claude Code sends it: allow rules for this session."""
    values = [{"toolName": t, **({"ruleContent": c} if c is not None else {})} for t, c in rules]
    return {"type": "addRules", "destination": "session", "rules": values, "behavior": "allow"}


@pytest.mark.anyio
async def test_can_use_tool_suggests_the_dialogs_narrow_session_rules(
    project: Path, agent_env: dict[str, str]
) -> None:
    suggested: dict[str, list[dict[str, Any]]] = {}

    async def allow(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        said = tool_input.get("command") or Path(tool_input["file_path"]).name
        suggested[said] = [update.to_dict() for update in context.suggestions]
        if said.startswith('touch "$PWD'):
            return PermissionResultDeny(message="not this one")
        return PermissionResultAllow()

    write = {"name": "write", "arguments": {"path": "notes.txt", "content": "hi\n"}}
    script = [
        _bash("touch made.txt"),
        _bash("mkdir -p out && git diff --stat"),
        {"toolCalls": [write]},
        _bash('touch "$PWD/late.txt"'),  # a word known only when it runs: no narrow rule
        {"text": "Done."},
    ]
    options = _options(project, agent_env, script, can_use_tool=allow)
    await _all(query(prompt="work", options=options))
    assert suggested == {
        "touch made.txt": [_session_rules(("Bash", "touch made.txt"))],  # touch: exact only
        "mkdir -p out && git diff --stat": [  # a compound line: one rule per command
            _session_rules(("Bash", "mkdir:*"), ("Bash", "git diff:*"))
        ],
        "notes.txt": [_session_rules(("Write", "./notes.txt"))],  # this path, not every write
        'touch "$PWD/late.txt"': [],
    }
    assert (project / "made.txt").exists() and (project / "notes.txt").exists()


@pytest.mark.anyio
async def test_an_allow_keeping_the_suggestion_lets_matching_calls_run_unasked(
    project: Path, agent_env: dict[str, str]
) -> None:
    asked: list[str] = []

    async def always(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow:
        asked.append(tool_input["command"])
        return PermissionResultAllow(updated_permissions=context.suggestions)

    line = "mkdir -p out && touch out/made.txt"
    script = [_bash(line), _bash(line), _bash("mkdir -p other"), _bash("touch elsewhere.txt"),
              {"text": "Done."}]  # fmt: skip
    async with ClaudeSDKClient(_options(project, agent_env, script, can_use_tool=always)) as client:
        await client.query("work")
        messages = await _all(client.receive_response())
    # the same line runs unasked, and so does mkdir (its rule is mkdir:*); touch is exact only
    assert asked == [line, "touch elsewhere.txt"]
    assert [result.is_error for result in _tool_results(messages)] == [False] * 4
    assert (project / "other").is_dir() and (project / "elsewhere.txt").exists()


_SUGGESTED = [
    PermissionRuleValue("Bash", "mkdir:*"),
    PermissionRuleValue("Bash", "touch out/made.txt"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("update", "said"),
    [
        pytest.param(
            PermissionUpdate("addRules", [PermissionRuleValue("Bash")], "allow",
                             destination="session"),
            "the rule 'Bash' was not suggested (suggested: 'Bash(mkdir:*)', "
            "'Bash(touch out/made.txt)'); an SDK app cannot widen an approval",
            id="all-of-bash",
        ),
        pytest.param(
            PermissionUpdate("addRules", [_SUGGESTED[0], PermissionRuleValue("Bash", "touch:*")],
                             "allow", destination="session"),
            "the rule 'Bash(touch:*)' was not suggested",
            id="a-wider-prefix",
        ),
        pytest.param(
            PermissionUpdate("addRules", _SUGGESTED[:1], "allow", destination="session"),
            "the suggested rules are kept all together, and Bash(touch out/made.txt) was left out",
            id="a-part-of-the-compound-rules",
        ),
        pytest.param(
            PermissionUpdate("addRules", _SUGGESTED, "allow", destination="localSettings"),
            "an updatedPermissions addRules for 'localSettings' is not applied by coding-agent "
            "(an SDK app does not write settings files here",
            id="a-settings-file",
        ),
        pytest.param(
            PermissionUpdate("addRules", _SUGGESTED, "deny", destination="session"),
            "an updatedPermissions addRules with behavior 'deny' is not applied",
            id="a-deny-rule",
        ),
        pytest.param(
            PermissionUpdate("setMode", mode="bypassPermissions", destination="session"),
            "an updatedPermissions 'setMode' is not applied by coding-agent",
            id="set-mode",
        ),
        pytest.param(
            PermissionUpdate("removeDirectories", directories=["/tmp"], destination="session"),
            "an updatedPermissions 'removeDirectories' is not applied by coding-agent",
            id="remove-directories",
        ),
    ],
)  # fmt: skip
async def test_updates_other_than_the_suggestion_refuse_the_call(
    project: Path, agent_env: dict[str, str], update: PermissionUpdate, said: str
) -> None:
    asked: list[list[dict[str, Any]]] = []

    async def allow(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow:
        asked.append([s.to_dict() for s in context.suggestions])
        return PermissionResultAllow(updated_permissions=[update])

    line = "mkdir -p out && touch out/made.txt"
    errors: list[str] = []
    script = [_bash(line), _bash(line), {"text": "Refused."}]
    options = _options(project, agent_env, script, can_use_tool=allow, stderr=errors.append)
    messages = await _all(query(prompt="work", options=options))
    assert asked == [[_session_rules(("Bash", "mkdir:*"), ("Bash", "touch out/made.txt"))]] * 2
    assert not (project / "out").exists()  # neither call ran, and no rule was kept
    first, second = _tool_results(messages)
    assert first.is_error and second.is_error
    assert said in str(first.content)  # the model reads why
    assert "the call was refused" in str(first.content)
    result = messages[-1]
    assert isinstance(result, ResultMessage) and len(result.permission_denials or []) == 2
    refusals = [e for e in errors if e.startswith("coding-agent: error: ")]
    assert len(refusals) == 2 and all(said in e for e in refusals)
    assert "the Agent SDK's can_use_tool for Bash allowed, but" in refusals[0]
    assert not (project / ".claude").exists()  # no settings file was written


def test_an_update_of_an_unknown_type_refuses_the_call(
    project: Path, agent_env: dict[str, str]
) -> None:
    """An ``updatedPermissions`` entry of a type no SDK sends yet (the Python SDK refuses to
    send one; another client may): spoken on the wire, the call is refused."""
    script = project.parent / "script.json"
    script.write_text(json.dumps([_bash("touch made.txt"), {"text": "Refused."}]))
    env = {**agent_env, "XDG_CONFIG_HOME": str(project.parent / "config"),
           "CODING_AGENT_WARM_START": "0"}  # fmt: skip
    process = subprocess.Popen(
        [str(BINARY), "--faux-script", str(script), "--output-format", "stream-json",
         "--verbose", "--input-format", "stream-json", "--permission-prompt-tool", "stdio"],
        cwd=project, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None

    def send(line: dict[str, Any]) -> None:
        assert process.stdin is not None
        process.stdin.write(json.dumps(line) + "\n")
        process.stdin.flush()

    try:
        send({"type": "user", "message": {"role": "user", "content": "make it"}})
        lines: list[dict[str, Any]] = []
        while not lines or lines[-1]["type"] != "result":
            line = process.stdout.readline()
            assert line, "the run ended before its result"
            lines.append(json.loads(line))
            if lines[-1]["type"] == "control_request":
                request = lines[-1]
                update = {"type": "grantEverything", "destination": "session"}
                answer = {"behavior": "allow", "updatedInput": request["request"]["input"],
                          "updatedPermissions": [update]}  # fmt: skip
                send({"type": "control_response", "response": {"subtype": "success",
                      "request_id": request["request_id"], "response": answer}})  # fmt: skip
        process.stdin.close()
        assert process.wait(timeout=TIMEOUT) == 0
        errors = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()
    assert not (project / "made.txt").exists()
    assert [line["request"]["subtype"] for line in lines if line["type"] == "control_request"] == [
        "can_use_tool"
    ]
    assert [d["tool_name"] for d in lines[-1]["permission_denials"]] == ["Bash"]
    assert (
        "coding-agent: error: the Agent SDK's can_use_tool for Bash allowed, but an "
        "updatedPermissions 'grantEverything' is not applied by coding-agent"
    ) in errors
