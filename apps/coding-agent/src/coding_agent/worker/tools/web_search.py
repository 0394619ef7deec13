"""The ``web_search`` tool: a web search through the backend config.toml names.

Arguments: ``query`` and ``count`` (results, 1 to 20, default 8). The answer is a numbered list
of results, each a title, a URL and a snippet; ``details["results"]`` keeps them as
``{title, url, snippet}`` records, so the conversation's entry holds the citations.

Backends (``[web_search] backend = ...``; :class:`~.web.WebSettings`):

* ``brave``: the Brave Search API (``GET /res/v1/web/search``, ``X-Subscription-Token``), key in
  ``BRAVE_API_KEY``; results from ``web.results[]`` (``title``, ``url``, ``description``).
* ``tavily``: Tavily's search API (``POST /search``, ``Authorization: Bearer``), key in
  ``TAVILY_API_KEY``; results from ``results[]`` (``title``, ``url``, ``content``).
* ``searxng``: a SearXNG instance at ``url`` (``GET /search?format=json``; the instance must
  allow the JSON format), no key unless ``api_key_env`` names one (sent as a bearer token, for an
  instance behind a proxy that checks it); results from ``results[]``.

**The provider's own search** (Gemini's Google Search grounding, :mod:`coding_agent.worker.provider_search`):
when the conversation's model is served by one (``ToolContext.provider_search``), ``web_search``
runs it instead of the backend, as Anthropic's and OpenAI's server-side searches replace the
backend tool. With no backend configured, :func:`provider_search_tool` is the ``web_search``
tool: it is offered only to a model whose provider runs such a search (the adapters drop it
otherwise). Its answer is the grounded text with ``[n]`` source markers and the numbered
sources; ``details["results"]`` keeps the sources (title, URL) as the backend's results are.

``url`` overrides Brave's and Tavily's endpoints too (a proxy, or a test's stub). The key is read
from the environment when a search runs; a missing key is an error naming the variable. A search
sends the query to a third party, so the tool needs approval like ``web_fetch``.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Mapping
from typing import Any

from coding_agent.worker.provider_search import (
    PROVIDER_SEARCH_DESCRIPTION,
    Searcher,
    SearchFailed,
)

from .spec import OnUpdate, ToolContext, ToolError, ToolResult, ToolSpec, abortable, text_result
from .web import SearchBackendName, WebSettings

__all__ = ["DEFAULT_KEY_ENV", "DEFAULT_URLS", "provider_search_tool", "web_search_tool"]

DEFAULT_URLS: dict[SearchBackendName, str] = {
    "brave": "https://api.search.brave.com/res/v1/web/search",
    "tavily": "https://api.tavily.com/search",
}
DEFAULT_KEY_ENV: dict[SearchBackendName, str] = {
    "brave": "BRAVE_API_KEY",
    "tavily": "TAVILY_API_KEY",
}
TIMEOUT = 20.0
_SNIPPET = 400

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": "What to search the web for"},
        "count": {
            "type": "integer",
            "minimum": 1,
            "maximum": 20,
            "description": "How many results (default 8)",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


def _plain(text: Any) -> str:
    """A snippet without HTML tags or entities (Brave marks matches with ``<strong>``)."""
    cleaned = html.unescape(re.sub(r"<[^>]+>", "", str(text or "")))
    cleaned = " ".join(cleaned.split())
    return cleaned if len(cleaned) <= _SNIPPET else cleaned[: _SNIPPET - 1] + "…"


def _results(items: Any, snippet_key: str) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    for item in items if isinstance(items, list) else []:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(item, dict):
            continue
        fields: dict[str, Any] = item  # pyright: ignore[reportUnknownVariableType]
        url = fields.get("url")
        if not isinstance(url, str) or not url:
            continue
        found.append(
            {
                "title": _plain(fields.get("title")) or url,
                "url": url,
                "snippet": _plain(fields.get(snippet_key)),
            }
        )
    return found


PROVIDER_NAME = "google"
"""The provider search's name in ``details["backend"]`` (Gemini's is the only one run here)."""


async def _provider_searcher(tools: ToolContext) -> Searcher | None:
    return await tools.provider_search() if tools.provider_search is not None else None


async def _provider_search(searcher: Searcher, query: str, tools: ToolContext) -> ToolResult:
    """Run ``searcher`` for ``query``: the grounded answer, its sources numbered after it."""
    got: list[Any] = []
    try:
        with abortable(tools.ctx, TIMEOUT * 3) as scope:
            got.append(await searcher(query))
    except SearchFailed as error:
        raise ToolError(f"web_search: {error}") from None
    if tools.ctx.cancelled:
        raise ToolError("Search aborted")
    if scope.cancelled_caught or not got:
        raise ToolError(f"web_search (Google Search) timed out after {TIMEOUT * 3:g} s; try again")
    answer = got[0]
    results = answer.sources
    details = {"query": query, "backend": PROVIDER_NAME, "results": results}
    lines = [f'Web search results for "{query}" (Google Search):', "", answer.markers.strip()]
    if results:
        lines += ["", "Sources:"]
        lines += [f"[{n}] {r['title']} ({r['url']})" for n, r in enumerate(results, 1)]
    lines += ["", "Cite the URLs you use. Read a page with web_fetch."]
    return text_result("\n".join(lines), details)


def provider_search_tool() -> ToolSpec:
    """The ``web_search`` tool when no backend is configured: it runs the conversation's model's
    own search (module docstring), and is offered only where a provider runs one."""

    async def search(
        args: dict[str, Any], tools: ToolContext, _on_update: OnUpdate | None
    ) -> ToolResult:
        searcher = await _provider_searcher(tools)
        if searcher is None:
            raise ToolError(
                "web_search cannot search: this model's provider has no search of its own "
                "and no [web_search] backend is configured in config.toml"
            )
        return await _provider_search(searcher, args["query"], tools)

    return ToolSpec(
        name="web_search",
        description=PROVIDER_SEARCH_DESCRIPTION,
        parameters={
            "type": "object",
            "properties": {"query": PARAMETERS["properties"]["query"]},
            "required": ["query"],
            "additionalProperties": False,
        },
        handler=search,
    )


def web_search_tool(settings: WebSettings, env: Mapping[str, str] | None = None) -> ToolSpec:
    """The ``web_search`` tool on ``settings.search_backend`` (which must be set); the key is
    read from ``env`` (default ``os.environ``) when a search runs."""
    backend = settings.search_backend
    if backend is None:
        raise ValueError("web_search_tool needs settings.search_backend")
    url = settings.search_url or DEFAULT_URLS.get(backend)
    if url is None:
        raise ValueError(f"web_search: the {backend} backend needs web_search.url")
    key_env = settings.search_key_env or DEFAULT_KEY_ENV.get(backend)

    def key() -> str | None:
        if key_env is None:
            return None
        found = (os.environ if env is None else env).get(key_env, "").strip()
        if not found:
            raise ToolError(
                f"web_search cannot search: the {backend} backend needs an API key in the "
                f"environment variable {key_env}, which is not set. Tell the user to set "
                f"{key_env} before starting the agent (or to name another variable with "
                "web_search.api_key_env in config.toml)."
            )
        return found

    async def search(
        args: dict[str, Any], tools: ToolContext, _on_update: OnUpdate | None
    ) -> ToolResult:
        import httpx

        query: str = args["query"]
        searcher = await _provider_searcher(tools)
        if searcher is not None:  # the model's provider searches itself (Gemini's grounding)
            return await _provider_search(searcher, query, tools)
        count: int = args.get("count") or 8
        secret = key()
        headers = {"Accept": "application/json"}
        got: list[Any] = []
        try:
            with abortable(tools.ctx, TIMEOUT) as scope:
                async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                    if backend == "brave":
                        headers["X-Subscription-Token"] = secret or ""
                        response = await client.get(
                            url, params={"q": query, "count": count}, headers=headers
                        )
                    elif backend == "tavily":
                        headers["Authorization"] = f"Bearer {secret}"
                        response = await client.post(
                            url, json={"query": query, "max_results": count}, headers=headers
                        )
                    else:
                        if secret:
                            headers["Authorization"] = f"Bearer {secret}"
                        endpoint = url.rstrip("/")
                        if not endpoint.endswith("/search"):
                            endpoint += "/search"
                        response = await client.get(
                            endpoint, params={"q": query, "format": "json"}, headers=headers
                        )
                    got.append(response)
        except httpx.HTTPError as error:
            raise ToolError(f"web_search ({backend}) could not reach {url}: {error}") from None
        if tools.ctx.cancelled:
            raise ToolError("Search aborted")
        if scope.cancelled_caught or not got:
            raise ToolError(f"web_search ({backend}) timed out after {TIMEOUT:g} s; try again")
        response = got[0]
        if response.status_code in (401, 403):
            raise ToolError(
                f"web_search ({backend}) was refused (HTTP {response.status_code}): the key in "
                f"{key_env} is not accepted. Tell the user. {response.text[:300]}"
            )
        if response.status_code == 429:
            raise ToolError(f"web_search ({backend}) is rate-limited (HTTP 429); wait, then retry")
        if response.status_code >= 400:
            raise ToolError(
                f"web_search ({backend}) failed: HTTP {response.status_code}: {response.text[:300]}"
            )
        try:
            data: Any = response.json()
        except ValueError:
            hint = " (is format=json enabled in its settings.yml?)" if backend == "searxng" else ""
            raise ToolError(
                f"web_search ({backend}) answered something that is not JSON{hint}"
            ) from None
        if backend == "brave":
            web: Any = data.get("web") if isinstance(data, dict) else None
            items = web.get("results") if isinstance(web, dict) else []  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            results = _results(items, "description")
        else:
            items = data.get("results") if isinstance(data, dict) else []  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            results = _results(items, "content")
        results = results[:count]
        details = {"query": query, "backend": backend, "results": results}
        if not results:
            return text_result(f'No results for "{query}".', details)
        lines = [f'Results for "{query}" ({backend}):', ""]
        for number, result in enumerate(results, 1):
            lines.append(f"{number}. {result['title']}")
            lines.append(f"   {result['url']}")
            if result["snippet"]:
                lines.append(f"   {result['snippet']}")
        lines += ["", "Cite the URLs you use. Read a page with web_fetch."]
        return text_result("\n".join(lines), details)

    return ToolSpec(
        name="web_search",
        description=(
            "Search the web. Returns a numbered list of results (title, URL, snippet). Use it "
            "for current information and documentation beyond your training data; read a "
            "result's page with web_fetch, and cite the URLs you rely on."
        ),
        parameters=PARAMETERS,
        handler=search,
    )
