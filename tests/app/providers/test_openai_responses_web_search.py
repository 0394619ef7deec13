"""OpenAI's own web search through the Responses API (issue 44 deliver 4), with the real
``openai`` SDK talking to a local stub server speaking the Responses stream: the ``web_search``
tool is offered in place of the agent's where the model has it, a ``web_search_call`` item and
the answer's ``url_citation`` annotations are kept in the message (through its stored JSON), and
the next request's input carries the item back as it came."""

from __future__ import annotations

from typing import Any

import pytest
from provider_support import READ, Sleeps, collect_each
from stub_server import Reply, StubServer
from test_openai_responses import _completed, _event

from coding_agent.worker.providers.openai_responses import (
    WEB_SEARCH_TOOL,
    OpenAIResponsesProvider,
)
from pico3.models import (
    Citation,
    DoneEvent,
    Request,
    ServerToolContent,
    TextContent,
    Tool,
    UserMessage,
    message_to_json,
    messages_from_json,
    reduce_events,
)

pytestmark = pytest.mark.anyio

FETCH = Tool(name="web_fetch", description="Fetch a URL", parameters={"type": "object"})
ACTION = {
    "type": "search",
    "query": "python 3.13 release date",
    "sources": [{"type": "url", "url": "https://docs.python.org/3/whatsnew/3.13.html"}],
}
ANNOTATION = {
    "type": "url_citation",
    "url": "https://docs.python.org/3/whatsnew/3.13.html",
    "title": "What's New In Python 3.13",
    "start_index": 0,
    "end_index": 30,
}


def _provider(server: StubServer, **kw: Any) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(
        api_key="test-key", base_url=f"{server.url}/v1", sleep=Sleeps(), **kw
    )


def _search_answer() -> list[str]:
    call = {"type": "web_search_call", "id": "ws_1", "status": "in_progress"}
    done_call = {**call, "status": "completed", "action": ACTION}
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    text = "It came out on 7 October 2024."
    part = {"type": "output_text", "text": text, "annotations": [ANNOTATION]}
    return [
        _event("response.output_item.added", output_index=0, item=call),
        _event("response.web_search_call.in_progress", output_index=0, item_id="ws_1"),
        _event("response.web_search_call.completed", output_index=0, item_id="ws_1"),
        _event("response.output_item.done", output_index=0, item=done_call),
        _event("response.output_item.added", output_index=1, item=message),
        _event(
            "response.output_text.delta",
            output_index=1,
            item_id="msg_1",
            content_index=0,
            delta=text,
        ),
        _event(
            "response.output_text.annotation.added",
            output_index=1,
            item_id="msg_1",
            content_index=0,
            annotation_index=0,
            annotation=ANNOTATION,
        ),
        _event("response.output_item.done", output_index=1, item={**message, "content": [part]}),
        _completed(),
    ]


def _answer(text: str) -> list[str]:
    message = {"type": "message", "id": "msg_2", "role": "assistant", "content": []}
    return [
        _event("response.output_item.added", output_index=0, item=message),
        _event(
            "response.output_text.delta",
            output_index=0,
            item_id="msg_2",
            content_index=0,
            delta=text,
        ),
        _event("response.output_item.done", output_index=0, item=message),
        _completed(),
    ]


async def test_the_server_search_is_offered_kept_with_its_citations_and_replayed() -> None:
    question = UserMessage(content="When did Python 3.13 come out?")
    tools = [READ, FETCH]
    with StubServer([Reply(events=_search_answer()), Reply(events=_answer("ok"))]) as server:
        request = Request(model="gpt-5", messages=[question], tools=tools)
        [events] = await collect_each(_provider(server), request)
        done = events[-1]
        assert isinstance(done, DoneEvent) and done.reason == "stop"
        (stored,) = messages_from_json([message_to_json(done.message)])
        again = Request(
            model="gpt-5", messages=[question, stored, UserMessage("And 3.14?")], tools=tools
        )
        [second] = await collect_each(_provider(server), again)
    assert isinstance(second[-1], DoneEvent)
    offered = server.requests[0].body["tools"]
    assert [t.get("name") for t in offered] == ["read", "web_fetch", None]
    assert offered[-1] == WEB_SEARCH_TOOL
    item = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": ACTION}
    search = ServerToolContent(
        id="ws_1",
        name="web_search",
        input={"query": "python 3.13 release date"},
        results=[Citation(url="https://docs.python.org/3/whatsnew/3.13.html")],
        blocks=[item],
    )
    cited = TextContent(
        text="It came out on 7 October 2024.",
        citations=[Citation(url=ANNOTATION["url"], title=ANNOTATION["title"], data=ANNOTATION)],
    )
    assert done.message.content == [search, cited]
    assert stored == done.message
    assert reduce_events(events) == done.message
    assert server.requests[1].body["input"] == [
        {"role": "user", "content": "When did Python 3.13 come out?"},
        item,
        {"role": "assistant", "content": "It came out on 7 October 2024."},
        {"role": "user", "content": "And 3.14?"},
    ]


async def test_citations_only_in_the_done_item_are_kept_and_the_search_can_be_off() -> None:
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    part = {"type": "output_text", "text": "See the docs.", "annotations": [ANNOTATION]}
    script = [
        _event("response.output_item.added", output_index=0, item=message),
        _event(
            "response.output_text.delta",
            output_index=0,
            item_id="msg_1",
            content_index=0,
            delta="See the docs.",
        ),
        _event("response.output_item.done", output_index=0, item={**message, "content": [part]}),
        _completed(),
    ]
    backend = Tool(name="web_search", description="Search (backend)", parameters={})
    with StubServer([Reply(events=script)]) as server:
        request = Request(model="gpt-5", messages=[UserMessage("q")], tools=[backend])
        [events] = await collect_each(_provider(server, web_search=False), request)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.message.content == [
        TextContent(
            text="See the docs.",
            citations=[Citation(url=ANNOTATION["url"], title=ANNOTATION["title"], data=ANNOTATION)],
        )
    ]
    assert [t["name"] for t in server.requests[0].body["tools"]] == ["web_search"]
    assert server.requests[0].body["tools"][0]["type"] == "function"
