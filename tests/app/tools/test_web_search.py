"""``web_search`` against a local stub of each backend, answering in that API's real format
(Brave's ``web.results[]``, Tavily's ``results[]``, SearXNG's ``format=json``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from coding_agent.worker.tools import ToolContext
from coding_agent.worker.tools.web import WebSettings
from coding_agent.worker.tools.web_search import web_search_tool

from .web_server import Handler, Server, serve

pytestmark = pytest.mark.anyio

BRAVE = {
    "type": "search",
    "query": {"original": "textual pilot", "more_results_available": True},
    "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": False}]},
    "web": {
        "type": "search",
        "family_friendly": True,
        "results": [
            {
                "type": "search_result",
                "title": "Testing - <strong>Textual</strong>",
                "url": "https://textual.textualize.io/guide/testing/",
                "description": "Use the <strong>Pilot</strong> object to simulate key presses &amp; clicks.",
                "is_source_local": False,
                "language": "en",
                "profile": {"name": "Textual", "url": "https://textual.textualize.io"},
                "age": "March 3, 2025",
            },
            {
                "type": "search_result",
                "title": "textual/tests",
                "url": "https://github.com/Textualize/textual/tree/main/tests",
                "description": "Tests of the framework.",
            },
        ],
    },
}

TAVILY = {
    "query": "textual pilot",
    "follow_up_questions": None,
    "answer": None,
    "images": [],
    "results": [
        {
            "title": "Testing - Textual",
            "url": "https://textual.textualize.io/guide/testing/",
            "content": "Textual's Pilot simulates user input in tests.",
            "score": 0.92,
            "raw_content": None,
        }
    ],
    "response_time": 1.2,
}

SEARXNG = {
    "query": "textual pilot",
    "number_of_results": 0,
    "results": [
        {
            "url": "https://textual.textualize.io/guide/testing/",
            "title": "Testing - Textual",
            "content": "Pilot drives the app.",
            "engine": "duckduckgo",
            "engines": ["duckduckgo", "brave"],
            "score": 2.0,
            "category": "general",
        }
    ],
    "answers": [],
    "corrections": [],
    "infoboxes": [],
    "suggestions": [],
    "unresponsive_engines": [],
}


def _json(data: object):
    return lambda h: h.reply(200, json.dumps(data), {"Content-Type": "application/json"})


def _brave(handler: Handler) -> None:
    if handler.headers.get("X-Subscription-Token") != "brave-key":
        handler.reply(
            401,
            json.dumps({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}}),
        )
        return
    _json(BRAVE)(handler)


@pytest.fixture
def server() -> Iterator[Server]:
    routes = {
        "/res/v1/web/search": _brave,
        "/search": _json(TAVILY),
        "/searx/search": _json(SEARXNG),
        "/html/search": lambda h: h.reply(
            200, "<html>no json</html>", {"Content-Type": "text/html"}
        ),
    }
    with serve(routes) as running:
        yield running


async def test_brave_results_are_titles_urls_and_snippets(server: Server) -> None:
    settings = WebSettings(search_backend="brave", search_url=server.url("/res/v1/web/search"))
    tool = web_search_tool(settings, {"BRAVE_API_KEY": "brave-key"})
    result = await tool.execute({"query": "textual pilot", "count": 5}, ToolContext(cwd=Path(".")))
    assert not result.is_error, result.plain_text
    assert result.plain_text.splitlines()[:5] == [
        'Results for "textual pilot" (brave):',
        "",
        "1. Testing - Textual",
        "   https://textual.textualize.io/guide/testing/",
        "   Use the Pilot object to simulate key presses & clicks.",
    ]
    assert result.details is not None
    assert result.details["results"][1] == {
        "title": "textual/tests",
        "url": "https://github.com/Textualize/textual/tree/main/tests",
        "snippet": "Tests of the framework.",
    }
    seen = server.seen[-1]
    assert seen.path == "/res/v1/web/search?q=textual+pilot&count=5"
    assert seen.headers["x-subscription-token"] == "brave-key"


async def test_a_refused_key_names_its_variable(server: Server) -> None:
    settings = WebSettings(search_backend="brave", search_url=server.url("/res/v1/web/search"))
    result = await web_search_tool(settings, {"BRAVE_API_KEY": "wrong"}).execute(
        {"query": "x"}, ToolContext(cwd=Path("."))
    )
    assert result.is_error
    assert "refused (HTTP 401): the key in BRAVE_API_KEY is not accepted" in result.plain_text


async def test_a_missing_key_names_the_variable_and_sends_nothing(server: Server) -> None:
    settings = WebSettings(search_backend="tavily", search_url=server.url("/search"))
    result = await web_search_tool(settings, {}).execute({"query": "x"}, ToolContext(cwd=Path(".")))
    assert result.is_error
    assert "needs an API key in the environment variable TAVILY_API_KEY" in result.plain_text
    assert server.seen == []


async def test_tavily_is_asked_with_a_bearer_key(server: Server) -> None:
    settings = WebSettings(
        search_backend="tavily", search_url=server.url("/search"), search_key_env="MY_TAVILY"
    )
    result = await web_search_tool(settings, {"MY_TAVILY": "tvly-1"}).execute(
        {"query": "textual pilot"}, ToolContext(cwd=Path("."))
    )
    assert "1. Testing - Textual" in result.plain_text
    assert "Textual's Pilot simulates user input in tests." in result.plain_text
    seen = server.seen[-1]
    assert seen.method == "POST" and seen.headers["authorization"] == "Bearer tvly-1"
    assert json.loads(seen.body) == {"query": "textual pilot", "max_results": 8}


async def test_searxng_needs_no_key(server: Server) -> None:
    settings = WebSettings(search_backend="searxng", search_url=server.url("/searx"))
    result = await web_search_tool(settings, {}).execute({"query": "q"}, ToolContext(cwd=Path(".")))
    assert "Pilot drives the app." in result.plain_text
    assert server.seen[-1].path == "/searx/search?q=q&format=json"
    assert "authorization" not in server.seen[-1].headers


async def test_a_searxng_without_json_says_what_to_enable(server: Server) -> None:
    settings = WebSettings(search_backend="searxng", search_url=server.url("/html"))
    result = await web_search_tool(settings, {}).execute({"query": "q"}, ToolContext(cwd=Path(".")))
    assert result.is_error and "format=json enabled" in result.plain_text
