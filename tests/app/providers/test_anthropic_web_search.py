"""Anthropic's own web search (issue 44 deliver 4), with the real SDK talking to a local stub
server speaking the Messages stream: the server tool is offered in place of the agent's
``web_search`` tool where the model has it, its ``server_tool_use`` / ``web_search_tool_result``
blocks and the text's citations are kept in the message (through its stored JSON), and the next
request sends them back as they came."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from provider_support import Sleeps, collect
from stub_server import Reply, StubServer
from test_anthropic_adapter import MODEL, _block_start, _block_stop, _delta, _end, _start

from coding_agent.settings.config import load_config
from coding_agent.worker.providers.anthropic import WEB_SEARCH_TOOL, AnthropicProvider
from coding_agent.worker.providers.registry import resolve_model
from pico3.models import (
    Citation,
    DoneEvent,
    Request,
    ServerToolContent,
    ServerToolEvent,
    TextContent,
    Tool,
    UserMessage,
    message_to_json,
    messages_from_json,
    reduce_events,
)

pytestmark = pytest.mark.anyio

RESULTS = [
    {
        "type": "web_search_result",
        "url": "https://docs.python.org/3/whatsnew/3.13.html",
        "title": "What's New In Python 3.13",
        "encrypted_content": "EqgfCioIARgBIiQ3YTAw",
        "page_age": "October 7, 2024",
    },
    {
        "type": "web_search_result",
        "url": "https://peps.python.org/pep-0719/",
        "title": "PEP 719 – Python 3.13 Release Schedule",
        "encrypted_content": "EpMBCioIARgBIiQ5NmI0",
        "page_age": None,
    },
]
CITATION = {
    "type": "web_search_result_location",
    "url": "https://docs.python.org/3/whatsnew/3.13.html",
    "title": "What's New In Python 3.13",
    "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0",
    "cited_text": "Python 3.13 was released on October 7, 2024.",
}
BACKEND_TOOL = Tool(
    name="web_search",
    description="Search the web (the configured backend)",
    parameters={"type": "object", "properties": {"query": {"type": "string"}}},
)
READ_TOOL = Tool(name="read", description="Read a file", parameters={"type": "object"})
FETCH_TOOL = Tool(name="web_fetch", description="Fetch a URL", parameters={"type": "object"})


def _search_answer() -> list[str]:
    return [
        _start(),
        _block_start(0, {"type": "text", "text": "Let me search."}),
        _block_stop(0),
        _block_start(
            1, {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {}}
        ),
        _delta(1, {"type": "input_json_delta", "partial_json": '{"query": "python 3.13'}),
        _delta(1, {"type": "input_json_delta", "partial_json": ' release date"}'}),
        _block_stop(1),
        _block_start(
            2,
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": RESULTS},
        ),
        _block_stop(2),
        _block_start(3, {"type": "text", "text": "", "citations": []}),
        _delta(3, {"type": "citations_delta", "citation": CITATION}),
        _delta(3, {"type": "text_delta", "text": "It came out on 7 October 2024."}),
        _block_stop(3),
        *_end("end_turn", 30),
    ]


def _text(text: str) -> list[str]:
    return [
        _start(),
        _block_start(0, {"type": "text", "text": ""}),
        _delta(0, {"type": "text_delta", "text": text}),
        _block_stop(0),
        *_end("end_turn", 3),
    ]


def _provider(server: StubServer, **kw: Any) -> AnthropicProvider:
    return AnthropicProvider(api_key="test-key", base_url=server.url, sleep=Sleeps(), **kw)


async def test_the_server_search_is_offered_kept_with_its_citations_and_replayed() -> None:
    question = UserMessage(content="When did Python 3.13 come out?")
    with StubServer([Reply(events=_search_answer()), Reply(events=_text("ok"))]) as server:
        tools = [READ_TOOL, BACKEND_TOOL]
        request = Request(model=MODEL, messages=[question], tools=tools)
        events = await collect(_provider(server), request)
        done = events[-1]
        assert isinstance(done, DoneEvent) and done.reason == "stop"
        # The entry keeps it: through the message's stored JSON and back.
        (stored,) = messages_from_json([message_to_json(done.message)])
        follow_up = UserMessage(content="And 3.14?")
        request = Request(model=MODEL, messages=[question, stored, follow_up], tools=tools)
        second = await collect(_provider(server), request)  # a resumed session's provider
    assert isinstance(second[-1], DoneEvent), second[-1]
    # Offered in place of the backend tool (whose function definition is not sent).
    assert server.requests[0].body["tools"] == [
        {"name": "read", "description": "Read a file", "input_schema": {"type": "object"}},
        WEB_SEARCH_TOOL,
    ]
    search = ServerToolContent(
        id="srvtoolu_01",
        name="web_search",
        input={"query": "python 3.13 release date"},
        results=[
            Citation(url=RESULTS[0]["url"], title=RESULTS[0]["title"]),
            Citation(url=RESULTS[1]["url"], title=RESULTS[1]["title"]),
        ],
        blocks=[
            {
                "type": "server_tool_use",
                "id": "srvtoolu_01",
                "name": "web_search",
                "input": {"query": "python 3.13 release date"},
            },
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": RESULTS},
        ],
    )
    cited = TextContent(
        text="It came out on 7 October 2024.",
        citations=[
            Citation(
                url=CITATION["url"],
                title=CITATION["title"],
                cited_text=CITATION["cited_text"],
                data=CITATION,
            )
        ],
    )
    assert done.message.content == [TextContent(text="Let me search."), search, cited]
    assert stored == done.message
    assert [e.block for e in events if isinstance(e, ServerToolEvent)] == [search]
    assert reduce_events(events) == done.message
    # The next request sends the blocks back as Anthropic sent them, citations included.
    replayed = server.requests[1].body["messages"][1]
    assert replayed == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me search."},
            *search.blocks,
            {"type": "text", "text": "It came out on 7 October 2024.", "citations": [CITATION]},
        ],
    }


async def test_without_a_backend_the_search_is_added_where_the_web_tools_are() -> None:
    replies = [Reply(events=_text("a")), Reply(events=_text("b"))]
    with StubServer(replies) as server:
        request = Request(model=MODEL, messages=[UserMessage("hi")], tools=[READ_TOOL, FETCH_TOOL])
        await collect(_provider(server), request)
        limited = Request(model=MODEL, messages=[UserMessage("hi")], tools=[READ_TOOL])
        await collect(_provider(server), limited)  # no web tools (a limited subagent): none
    fetch = {"name": "web_fetch", "description": "Fetch a URL", "input_schema": {"type": "object"}}
    read = {"name": "read", "description": "Read a file", "input_schema": {"type": "object"}}
    assert [r.body["tools"] for r in server.requests] == [[read, fetch, WEB_SEARCH_TOOL], [read]]


async def test_the_backend_tool_stays_when_the_search_is_off_or_the_model_has_none() -> None:
    replies = [Reply(events=_text("a")), Reply(events=_text("b"))]
    with StubServer(replies) as server:
        off = _provider(server, web_search=False)
        await collect(off, Request(model=MODEL, messages=[UserMessage("hi")], tools=[BACKEND_TOOL]))
        old = _provider(server)  # a model Anthropic's web search does not serve
        request = Request(
            model="claude-3-opus-20240229", messages=[UserMessage("hi")], tools=[BACKEND_TOOL]
        )
        await collect(old, request)
    backend = {
        "name": "web_search",
        "description": "Search the web (the configured backend)",
        "input_schema": BACKEND_TOOL.parameters,
    }
    assert [r.body["tools"] for r in server.requests] == [[backend], [backend]]


async def test_another_apis_search_blocks_and_citations_are_not_sent() -> None:
    search = ServerToolContent(
        id="ws_1", name="web_search", blocks=[{"type": "web_search_call", "id": "ws_1"}]
    )
    foreign = messages_from_json(
        [
            {
                "role": "assistant",
                "api": "openai-responses",
                "content": [
                    msgspec.to_builtins(search),
                    {"type": "text", "text": "Found it.", "citations": [{"url": "https://a.b/"}]},
                ],
            }
        ]
    )
    with StubServer([Reply(events=_text("ok"))]) as server:
        request = Request(model=MODEL, messages=[UserMessage("q"), *foreign, UserMessage("more")])
        await collect(_provider(server), request)
    assert server.requests[0].body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Found it."}],
    }


def test_config_toml_turns_the_providers_search_off(tmp_path: Path) -> None:
    folder = tmp_path / "config" / "coding-agent"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(
        '[providers.anthropic]\napi_key = "k"\nweb_search = false\n\n'
        '[[models]]\nprovider = "anthropic"\nid = "claude-next"\nsupports_web_search = true\n'
    )
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path)}
    registry = load_config(tmp_path, env=env).registry()
    off = resolve_model("anthropic/claude-next", config=registry, env={})
    assert isinstance(off.provider, AnthropicProvider) and off.provider.web_search is False
    assert off.provider.model("claude-next").supports_web_search  # a [[models]] entry says so
    (folder / "config.toml").write_text('[providers.anthropic]\napi_key = "k"\n')
    on = resolve_model(
        "anthropic/claude-sonnet-4-6", config=load_config(tmp_path, env=env).registry(), env={}
    )
    assert isinstance(on.provider, AnthropicProvider) and on.provider.web_search is True
    assert not on.provider.model("claude-3-opus-20240229").supports_web_search  # the catalog's
