"""Gemini's Google Search grounding as the agent's ``web_search`` tool (issue 44 deliver 4), with
the real ``google-genai`` SDK talking to a local stub server speaking the Gemini REST protocol:
with no search backend the tool is offered to a Gemini model that has the search (and to no
other), running it makes a separate ``generateContent`` request with only the ``google_search``
tool and the query, and its result is the grounded text with numbered sources (kept in
``details.results``); an error is one line; ``[providers.google] web_search = false`` turns it
off. The whole loop runs through the real binary too."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from provider_support import BINARY, Sleeps, collect
from stub_server import Reply, StubServer
from test_google import USAGE, _chunk

from chord.context import BACKGROUND
from coding_agent.settings.config import load_config
from coding_agent.worker.provider_search import PROVIDER_SEARCH_DESCRIPTION, SearchFailed
from coding_agent.worker.providers.google import GoogleProvider
from coding_agent.worker.providers.openai import OpenAIProvider
from coding_agent.worker.providers.registry import resolve_model
from coding_agent.worker.tools import ToolContext, WebSettings, builtin_tools
from pico3 import ToolResult
from pico3.models import DoneEvent, Request, RetryPolicy, Tool, UserMessage

pytestmark = pytest.mark.anyio

MODEL = "gemini-2.5-flash"
QUERY = "python 3.13 release date"
ANSWER = "Python 3.13 was released on 7 October 2024. It adds a new REPL."
FIRST = "Python 3.13 was released on 7 October 2024."
GROUNDED: dict[str, Any] = {
    "candidates": [
        {
            "content": {"role": "model", "parts": [{"text": ANSWER}]},
            "finishReason": "STOP",
            "groundingMetadata": {
                "webSearchQueries": [QUERY],
                "groundingChunks": [
                    {
                        "web": {
                            "uri": "https://docs.python.org/3/whatsnew/3.13.html",
                            "title": "docs.python.org",
                        }
                    },
                    {
                        "web": {
                            "uri": "https://peps.python.org/pep-0719/",
                            "title": "peps.python.org",
                        }
                    },
                ],
                "groundingSupports": [
                    {
                        "segment": {
                            "startIndex": 0,
                            "endIndex": len(FIRST.encode()),
                            "text": FIRST,
                        },
                        "groundingChunkIndices": [0, 1],
                    },
                    {
                        "segment": {"startIndex": len(FIRST) + 1, "endIndex": len(ANSWER.encode())},
                        "groundingChunkIndices": [0],
                    },
                ],
            },
        }
    ],
    "modelVersion": MODEL,
}
QUOTA = {
    "error": {
        "code": 429,
        "message": "You exceeded your current quota,\nplease check your plan and billing details.",
        "status": "RESOURCE_EXHAUSTED",
    }
}


def _offered(web: WebSettings | None = None) -> list[Tool]:
    """The built-in tools as a request offers them."""
    return [Tool(s.name, s.description, s.parameters) for s in builtin_tools(web)]


def _provider(server: StubServer, *, web_search: bool = True) -> GoogleProvider:
    return GoogleProvider(
        api_key="gemini-key",
        base_url=server.url,
        sleep=Sleeps(),
        retry=RetryPolicy(max_retries=0),
        web_search=web_search,
    )


def _text(result: ToolResult) -> str:
    assert result.content is not None
    return result.content[0]["text"]


def _declared(body: dict[str, Any]) -> list[str]:
    tools = body.get("tools") or []
    return [d["name"] for t in tools for d in t.get("functionDeclarations") or []]


async def _stream_once(provider: Any, tools: list[Tool], model: str = MODEL) -> None:
    request = Request(model=model, messages=[UserMessage(content="hi")], tools=tools)
    events = await collect(provider, request)
    assert isinstance(events[-1], DoneEvent)


async def test_offered_to_a_gemini_model_without_a_backend_and_not_when_switched_off() -> None:
    done = [_chunk({"text": "ok"}, finish="STOP", usage=USAGE)]
    with StubServer([Reply(events=done) for _ in range(4)]) as server:
        await _stream_once(_provider(server), _offered())
        await _stream_once(_provider(server, web_search=False), _offered())
        await _stream_once(_provider(server), _offered(), model="gemini-1.5-pro")  # no grounding
        backend = _offered(WebSettings(search_backend="brave"))
        await _stream_once(_provider(server, web_search=False), backend)
    names = [_declared(r.body) for r in server.requests]
    assert names[0][-2:] == ["web_fetch", "web_search"]
    assert names[1][-1] == "web_fetch" and "web_search" not in names[1]
    assert "web_search" not in names[2]
    assert names[3][-2:] == ["web_fetch", "web_search"]  # a backend's tool always stays


async def test_another_provider_is_not_offered_the_provider_only_tool() -> None:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4.1",
            "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}  # fmt: skip
    with StubServer([Reply(events=[f"data: {json.dumps(body)}\n\n", "data: [DONE]\n\n"])]) as s:
        provider = OpenAIProvider(api_key="k", base_url=s.url, sleep=Sleeps())
        await _stream_once(provider, _offered(), model="gpt-4.1")
    offered = [t["function"]["name"] for t in s.requests[0].body["tools"]]
    assert offered[-1] == "web_fetch" and "web_search" not in offered


async def test_running_it_sends_only_the_google_search_tool_and_returns_grounded_sources() -> None:
    with StubServer([Reply(json_body=GROUNDED)]) as server:
        provider = _provider(server)
        search = builtin_tools()[-1]
        assert search.description == PROVIDER_SEARCH_DESCRIPTION

        async def searcher() -> Any:
            info = provider.model(MODEL)
            assert provider.serves_search(info)
            return lambda query: provider.search_web(query, info)

        tools = ToolContext(cwd=Path("."), provider_search=searcher)
        try:
            result = await search.execute({"query": QUERY}, tools)
        finally:
            await provider.aclose()
    [sent] = server.requests
    assert sent.path.endswith(f"/models/{MODEL}:generateContent")  # not the streaming one
    assert sent.body["contents"] == [{"role": "user", "parts": [{"text": QUERY}]}]
    assert sent.body["tools"] == [{"googleSearch": {}}]  # no function declarations
    assert "functionDeclarations" not in json.dumps(sent.body)
    assert not result.is_error
    text = _text(result)
    assert f"{FIRST}[1][2] It adds a new REPL.[1]" in text
    assert "Sources:\n[1] docs.python.org (https://docs.python.org/3/whatsnew/3.13.html)\n" in text
    assert "[2] peps.python.org (https://peps.python.org/pep-0719/)" in text
    assert result.details is not None
    assert result.details == {
        "query": QUERY,
        "backend": "google",
        "results": [
            {"title": "docs.python.org", "url": "https://docs.python.org/3/whatsnew/3.13.html",
             "snippet": ""},
            {"title": "peps.python.org", "url": "https://peps.python.org/pep-0719/", "snippet": ""},
        ],
    }  # fmt: skip


async def test_markers_count_utf8_bytes() -> None:
    text = "Zürich — größte Stadt. Next."
    head = "Zürich — größte Stadt."
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": "STOP", "groundingMetadata": {
                "groundingChunks": [{"web": {"uri": "https://z.example/", "title": "z.example"}}],
                "groundingSupports": [{"segment": {"endIndex": len(head.encode())},
                                       "groundingChunkIndices": [0]}]}}]}  # fmt: skip
    with StubServer([Reply(json_body=body)]) as server:
        provider = _provider(server)
        try:
            answer = await provider.search_web("z", provider.model(MODEL))
        finally:
            await provider.aclose()
    assert answer.markers == "Zürich — größte Stadt.[1] Next."


async def test_a_quota_error_is_one_line_naming_it() -> None:
    with StubServer([Reply(status=429, json_body=QUOTA)]) as server:
        provider = _provider(server)

        async def searcher() -> Any:
            return lambda query: provider.search_web(query, provider.model(MODEL))

        tools = ToolContext(cwd=Path("."), ctx=BACKGROUND, provider_search=searcher)
        try:
            result = await builtin_tools()[-1].execute({"query": QUERY}, tools)
            with pytest.raises(SearchFailed):
                await provider.search_web(QUERY, provider.model(MODEL))
        finally:
            await provider.aclose()
    assert result.is_error
    [line] = _text(result).splitlines()
    assert line.startswith("web_search: Google Search quota or rate limit reached: google 429")
    assert "exceeded your current quota" in line


async def test_a_refused_key_is_one_line_naming_the_variable() -> None:
    refused = {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                         "message": "API key not valid. Please pass a valid API key."}}  # fmt: skip
    with StubServer([Reply(status=400, json_body=refused)]) as server:
        provider = _provider(server)
        try:
            with pytest.raises(SearchFailed) as failed:
                await provider.search_web(QUERY, provider.model(MODEL))
        finally:
            await provider.aclose()
    [line] = str(failed.value).splitlines()
    assert line.startswith("Google Search refused the API key: google 400 INVALID_ARGUMENT")
    assert "GEMINI_API_KEY" in line


async def test_without_a_provider_search_the_tool_says_so_in_one_line() -> None:
    result = await builtin_tools()[-1].execute({"query": QUERY}, ToolContext(cwd=Path(".")))
    assert result.is_error
    [line] = _text(result).splitlines()
    assert "no search of its own" in line and "[web_search] backend" in line


def test_config_toml_turns_it_off(tmp_path: Path) -> None:
    folder = tmp_path / "config" / "coding-agent"
    folder.mkdir(parents=True)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path)}
    for text, expected in (("", True), ("[providers.google]\nweb_search = false\n", False)):
        (folder / "config.toml").write_text(text)
        registry = load_config(tmp_path, env=env).registry()
        selection = resolve_model(f"google/{MODEL}", config=registry, env={"GEMINI_API_KEY": "k"})
        assert isinstance(selection.provider, GoogleProvider)
        assert selection.provider.serves_search(selection.model) is expected
        assert (
            selection.provider.serves_search(selection.provider.model("gemini-2.5-pro")) is expected
        )


def test_a_headless_run_searches_with_google(agent_env: dict[str, str], tmp_path: Path) -> None:
    """The real binary: Gemini calls ``web_search`` (allowed by a rule: it needs approval), the
    worker runs the grounded request, and the result goes back as the function's response."""
    call = [_chunk({"functionCall": {"name": "web_search", "args": {"query": QUERY}}},
                   finish="STOP", usage=USAGE)]  # fmt: skip
    final = [_chunk({"text": "It came out on 7 October 2024."}, finish="STOP", usage=USAGE)]
    config = tmp_path / "config" / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[permissions]\nallow = ["web_search"]\n')
    replies = [Reply(events=call), Reply(json_body=GROUNDED), Reply(events=final)]
    with StubServer(replies) as server:
        env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config"),
               "GEMINI_API_KEY": "gemini-key", "GOOGLE_GEMINI_BASE_URL": server.url}  # fmt: skip
        done = subprocess.run(
            [str(BINARY), "-p", "when?", "--model", f"google/{MODEL}"],
            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "It came out on 7 October 2024.\n"), done.stderr
    first, search, last = server.requests
    assert "web_search" in _declared(first.body)
    assert search.path.endswith(f"/models/{MODEL}:generateContent")
    assert search.body["tools"] == [{"googleSearch": {}}]
    response = last.body["contents"][-1]["parts"][0]["functionResponse"]
    assert response["name"] == "web_search"
    output = response["response"]["output"]
    assert f"{FIRST}[1][2]" in output and "[2] peps.python.org" in output
