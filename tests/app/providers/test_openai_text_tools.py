"""Text tool calling in the OpenAI adapter, with the real SDK against the local stub server.

Covers the tool calling loop (docs/design/agent.md#features) for weak local models: a model in
``text`` mode gets no ``tools`` parameter, its fenced ``tool_call`` blocks become real tool calls,
and a server that refuses tools switches the model to text mode for the rest of the session.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import pytest
from stub_server import Reply, StubServer, sse

from chord.context import BACKGROUND
from coding_agent.cli.headless import run_headless
from coding_agent.session_files.folders import create_session
from coding_agent.settings.model_config import LOCAL_COMPAT, TOOL_CALLING_ENV, RegistryError
from coding_agent.worker.main import WorkerConfig
from coding_agent.worker.providers import OpenAIProvider, resolve_model
from coding_agent.worker.providers.openai import build_params, rejects_tools
from coding_agent.worker.providers.text_tools import text_call_id
from pico3.models import (
    DoneEvent,
    ErrorEvent,
    Request,
    RetryPolicy,
    StreamEvent,
    TextContent,
    TextDeltaEvent,
    Tool,
    ToolCall,
    ToolCallEndEvent,
    ToolCallStartEvent,
    UserMessage,
    messages_from_json,
    reduce_events,
)

MODEL = "gemma3:4b"
READ = Tool(
    name="read",
    description="Read a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
NO_TOOLS = {
    "error": {
        "message": f"registry.ollama.ai/library/{MODEL} does not support tools",
        "type": "api_error",
        "param": None,
        "code": None,
    }
}


def _chunk(delta: dict[str, Any], finish: str | None = None, cid: str = "chatcmpl-7") -> str:
    return sse(
        {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def _answer(*parts: str, cid: str = "chatcmpl-7") -> list[str]:
    return [
        _chunk({"role": "assistant", "content": ""}, cid=cid),
        *(_chunk({"content": p}, cid=cid) for p in parts),
        _chunk({}, "stop", cid=cid),
        sse("[DONE]"),
    ]


class _Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _provider(server: StubServer, **kw: Any) -> OpenAIProvider:
    return OpenAIProvider(
        api_key="local",
        base_url=f"{server.url}/v1",
        compat=kw.pop("compat", LOCAL_COMPAT),
        sleep=_Sleeps(),
        retry=RetryPolicy(max_retries=2, base_delay=1.0, jitter=0.0),
        clock=lambda: 1_700_000_000.0,
        **kw,
    )


def _request(**kw: Any) -> Request:
    return Request(model=MODEL, messages=[UserMessage(content="read a.py")], tools=[READ], **kw)


async def _stream(provider: OpenAIProvider, request: Request) -> list[StreamEvent]:
    return [event async for event in provider.stream(request, BACKGROUND)]


@pytest.mark.anyio
async def test_text_mode_turns_a_fenced_block_into_a_real_tool_call() -> None:
    parts = ["I will read it.\n``", "`tool_", 'call\n{"name": "read", "argu', 'ments": {"path"']
    parts += [': "a.py"}}\n', "```", "\n"]
    with StubServer([Reply(events=_answer(*parts))]) as server:
        provider = _provider(server, tool_calling={MODEL: "text"})
        try:
            events = await _stream(provider, _request(system=["You are helpful."]))
        finally:
            await provider.aclose()
    shown = "".join(e.delta for e in events if isinstance(e, TextDeltaEvent))
    assert shown == "I will read it.\n"  # nothing of the block leaked into the text
    call_id = text_call_id("chatcmpl-7|1700000000000", 0)
    starts = [e for e in events if isinstance(e, ToolCallStartEvent)]
    assert [(e.id, e.name) for e in starts] == [(call_id, "read")]
    ends = [e for e in events if isinstance(e, ToolCallEndEvent)]
    assert ends[0].tool_call == ToolCall(id=call_id, name="read", arguments={"path": "a.py"})
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "toolUse"
    assert done.message.content == [
        TextContent(text="I will read it.\n"),
        ToolCall(id=call_id, name="read", arguments={"path": "a.py"}),
    ]
    assert reduce_events(events) == done.message
    body = server.requests[0].body
    assert "tools" not in body
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are helpful.\n\n")
    assert "```tool_call" in system["content"] and "## read\nRead a file." in system["content"]


@pytest.mark.anyio
async def test_a_server_that_refuses_tools_switches_the_model_to_text_mode() -> None:
    refused = Reply(400, json_body=NO_TOOLS)
    block = '```tool_call\n{"name": "read", "arguments": {"path": "a.py"}}\n```'
    replies = [refused, Reply(events=_answer(block)), Reply(events=_answer("Done."))]
    with StubServer(replies) as server:
        provider = _provider(server)
        switched: list[str] = []
        provider.on_text_fallback = switched.append
        assert provider.tool_calling(MODEL) == "native"
        try:
            first = await _stream(provider, _request())
            second = await _stream(provider, _request())
        finally:
            await provider.aclose()
    done = first[-1]
    assert isinstance(done, DoneEvent) and done.reason == "toolUse"
    assert [type(b) for b in done.message.content] == [ToolCall]
    assert not [e for e in first if isinstance(e, ErrorEvent)]
    assert provider.tool_calling(MODEL) == "text"
    assert provider.tool_calling("other-model") == "native"  # remembered per model
    assert switched == [MODEL]  # said once, when it switched (the worker tells its clients)
    bodies = [r.body for r in server.requests]
    assert len(bodies) == 3  # refused, retried in text mode, then text mode straight away
    assert "tools" in bodies[0] and "tools" not in bodies[1] and "tools" not in bodies[2]
    assert "```tool_call" in bodies[1]["messages"][0]["content"]
    final = second[-1]
    assert isinstance(final, DoneEvent) and final.message.content == [TextContent(text="Done.")]


@pytest.mark.anyio
async def test_other_400s_are_errors_and_keep_native_mode() -> None:
    bad_schema = {"error": {"message": "Invalid schema for function 'read': bad type"}}
    with StubServer([Reply(400, json_body=bad_schema)]) as server:
        provider = _provider(server)
        try:
            events = await _stream(provider, _request())
        finally:
            await provider.aclose()
    error = events[-1]
    assert isinstance(error, ErrorEvent) and not error.retryable
    assert "Invalid schema" in (error.error.error_message or "")
    assert len(server.requests) == 1 and provider.tool_calling(MODEL) == "native"


@pytest.mark.anyio
async def test_a_request_without_tools_is_not_retried_on_a_tools_refusal() -> None:
    with StubServer([Reply(400, json_body=NO_TOOLS)]) as server:
        provider = _provider(server)
        try:
            request = Request(model=MODEL, messages=[UserMessage(content="hi")])
            events = await _stream(provider, request)
        finally:
            await provider.aclose()
    assert isinstance(events[-1], ErrorEvent) and len(server.requests) == 1
    assert provider.tool_calling(MODEL) == "native"


@pytest.mark.anyio
async def test_a_malformed_block_stays_text_and_the_turn_ends() -> None:
    text = 'Reading.\n```tool_call\n{"name": "read", arguments: {}}\n```\n'
    with StubServer([Reply(events=_answer(text[:15], text[15:]))]) as server:
        provider = _provider(server, tool_calling={MODEL: "text"})
        try:
            events = await _stream(provider, _request())
        finally:
            await provider.aclose()
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "stop"
    assert done.message.content == [TextContent(text=text)]
    assert reduce_events(events) == done.message


def test_text_mode_history_has_no_tool_roles_and_repeats_calls_as_blocks() -> None:
    messages = messages_from_json(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Sure."},
                    {"type": "toolCall", "id": "c9", "name": "read", "arguments": {"path": "a"}},
                ],
            },
            {
                "role": "toolResult",
                "toolCallId": "c9",
                "toolName": "read",
                "content": [{"type": "text", "text": "print(1)"}],
            },
        ]
    )
    request = Request(model=MODEL, messages=messages, tools=[READ])
    params = build_params(
        request, OpenAIProvider(api_key="k").model(MODEL), LOCAL_COMPAT, tool_calling="text"
    )
    sent = params["messages"]
    assert "tools" not in params
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[2] == {
        "role": "assistant",
        "content": 'Sure.\n```tool_call\n{"name":"read","arguments":{"path":"a"}}\n```\n',
    }
    assert sent[3] == {"role": "user", "content": "Tool result for call c9 (read):\nprint(1)"}


# -- configuration -----------------------------------------------------------------------------
def test_the_environment_forces_text_mode_for_every_openai_model() -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", TOOL_CALLING_ENV: "text"}
    config = {"models": [{"provider": "openai", "id": "qwen3:8b", "tool_calling": "native"}]}
    provider = resolve_model("openai/llama3", env=env, config=config).provider
    assert isinstance(provider, OpenAIProvider)
    assert provider.tool_calling("llama3") == "text"
    assert provider.tool_calling("qwen3:8b") == "text"


def test_config_sets_the_mode_per_model_and_per_server() -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    config: dict[str, Any] = {
        "models": [{"provider": "openai", "id": "gemma3:4b", "tool_calling": "text"}]
    }
    provider = resolve_model("openai/qwen3:8b", env=env, config=config).provider
    assert isinstance(provider, OpenAIProvider)
    assert provider.tool_calling("gemma3:4b") == "text"
    assert provider.tool_calling("qwen3:8b") == "native"
    config["providers"] = {"openai": {"compat": {"tool_calling": "text"}}}
    provider = resolve_model("openai/qwen3:8b", env=env, config=config).provider
    assert isinstance(provider, OpenAIProvider)
    assert provider.tool_calling("qwen3:8b") == "text"


def test_bad_tool_calling_settings_are_refused_with_where_they_came_from() -> None:
    with pytest.raises(RegistryError, match=f"{TOOL_CALLING_ENV}.*'txt'"):
        resolve_model("faux/faux-1", env={TOOL_CALLING_ENV: "txt"})
    config = {"models": [{"provider": "anthropic", "id": "x", "tool_calling": "text"}]}
    with pytest.raises(RegistryError, match=r"\$\.models\[0\]\.tool_calling"):
        resolve_model("faux/faux-1", env={}, config=config)
    with pytest.raises(RegistryError, match="tool_calling"):
        resolve_model(
            "faux/faux-1",
            env={},
            config={"models": [{"provider": "openai", "id": "m", "tool_calling": "maybe"}]},
        )


# -- end to end --------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_the_harness_runs_a_text_tool_call_and_sends_its_result_as_text(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("# Sample\n\nThe answer is 42.\n")
    keys = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")
    env = {k: v for k, v in os.environ.items() if k not in keys}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    session = create_session(project, env=env)
    block = '```tool_call\n{"name": "read", "arguments": {"path": "README.md"}}\n```\n'
    replies = [
        Reply(events=_answer("Let me look.\n", block, cid="chatcmpl-1")),
        Reply(events=_answer("The README says 42.", cid="chatcmpl-2")),
    ]
    with StubServer(replies) as server:
        env["OPENAI_BASE_URL"] = f"{server.url}/v1"
        env[TOOL_CALLING_ENV] = "text"
        config = WorkerConfig(
            session, model=f"openai/{MODEL}", env=env, installed_features=False, fsync=False
        )
        out = io.StringIO()
        code = await run_headless("what does the README say?", config, out=out)
    assert code == 0 and out.getvalue() == "The README says 42.\n"
    assert len(server.requests) == 2
    first, second = (r.body for r in server.requests)
    assert "tools" not in first and "tools" not in second
    assert "## read\n" in first["messages"][0]["content"]
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assistant, result = second["messages"][2], second["messages"][3]
    assert assistant["content"] == (
        'Let me look.\n```tool_call\n{"name":"read","arguments":{"path":"README.md"}}\n```\n'
    )
    assert re.match(r"Tool result for call call_[0-9a-f]{12}_0 \(read\):\n", result["content"])
    assert "The answer is 42." in result["content"]


def test_the_command_lines_accept_the_tool_calling_flag() -> None:
    from coding_agent.cli.main import build_parser

    assert build_parser().parse_args(["--tool-calling", "text"]).tool_calling == "text"
    assert build_parser().parse_args([]).tool_calling is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--tool-calling", "json"])


_REFUSALS = [
    (400, "registry.ollama.ai/library/gemma:2b does not support tools", True),
    (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser', True),
    (400, "tools param requires --jinja flag", True),
    (422, "Extra inputs are not permitted: body.tools", True),
    (404, "function calling is not supported for this model", True),
    (400, "Invalid schema for function 'read': 'x' is not valid", False),
    (400, "maximum context length is 8192 tokens (200 in the functions)", False),
    (400, "Unknown parameter: 'x'.", False),
    (500, "does not support tools", False),
]


@pytest.mark.anyio
async def test_which_server_errors_count_as_refusing_tools() -> None:
    import openai

    replies = [Reply(status, json_body={"error": {"message": m}}) for status, m, _ in _REFUSALS]
    seen: list[bool] = []
    with StubServer(replies) as server:
        client = openai.AsyncOpenAI(api_key="k", base_url=f"{server.url}/v1", max_retries=0)
        try:
            for _ in _REFUSALS:
                with pytest.raises(openai.APIStatusError) as caught:
                    await client.chat.completions.create(model=MODEL, messages=[])
                seen.append(rejects_tools(caught.value))
        finally:
            await client.close()
    assert seen == [refused for _, _, refused in _REFUSALS]
    assert not rejects_tools(ValueError("does not support tools"))
