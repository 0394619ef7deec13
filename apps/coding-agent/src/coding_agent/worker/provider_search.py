"""A provider's own web search run as the agent's ``web_search`` tool (Gemini's grounding).

Anthropic and OpenAI Responses search as a *server tool* inside the answer (their adapters swap
the agent's ``web_search`` for it). Gemini 2.x cannot combine its built-in ``google_search`` tool
with function declarations in one request, so, as Gemini CLI's ``google_web_search`` does, the
search is a function the agent runs: ``web_search`` makes a separate ``generate_content`` request
with only the ``google_search`` tool and the query, and returns the grounded answer with its
sources (:class:`GroundedAnswer`).

What the parts share, kept here so neither the tools nor the providers import the other:

* :class:`ProviderSearch`: a provider that can run such a search (``serves_search`` for a model,
  ``search_web`` to run one). The tools facet looks the conversation's model up and hands the
  ``web_search`` tool a :data:`Searcher` when its provider is one and serves that model.
* :data:`PROVIDER_SEARCH_DESCRIPTION`: the description of the ``web_search`` tool offered when no
  search backend is configured. That tool works only through a provider's search, so every SDK
  adapter drops it from a request unless it serves the model (:func:`offered_tools`).
* :func:`grounded_text`: the answer with numbered source markers and a "Sources" list, from a
  response's ``grounding_metadata``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from pico3.models import ModelInfo, Request

__all__ = [
    "PROVIDER_SEARCH_DESCRIPTION",
    "GroundedAnswer",
    "ProviderSearch",
    "SearchFailed",
    "Searcher",
    "grounded_text",
    "offered_tools",
]

PROVIDER_SEARCH_DESCRIPTION = (
    "Search the web with the model provider's own search (Google Search grounding). Returns an "
    "answer drawn from current web results, with numbered markers citing its sources and the "
    "list of sources (title, URL). Use it for current information and documentation beyond "
    "your training data; read a source's page with web_fetch, and cite the URLs you rely on."
)
"""The ``web_search`` tool that only a provider's search can run (no backend configured)."""


class GroundedAnswer(msgspec.Struct, frozen=True):
    """A provider search's answer: ``text`` as the model wrote it and ``sources`` as
    ``{title, url, snippet}`` records (the backend tool's result shape); ``markers`` is ``text``
    with ``[n]`` after each grounded passage (:func:`grounded_text`)."""

    text: str
    markers: str
    sources: list[dict[str, str]]


class SearchFailed(Exception):
    """A provider search that did not answer; the message is one line naming why."""


Searcher = Callable[[str], Awaitable[GroundedAnswer]]
"""Runs one search for a query (:class:`SearchFailed` when it does not answer)."""


@runtime_checkable
class ProviderSearch(Protocol):
    """A provider that runs a web search of its own as a separate request."""

    def serves_search(self, info: ModelInfo) -> bool:
        """Whether ``info``'s model searches this way (and the configuration allows it)."""
        ...

    async def search_web(self, query: str, info: ModelInfo) -> GroundedAnswer:
        """One grounded search; :class:`SearchFailed` when it does not answer."""
        ...


def offered_tools(request: Request, serves: bool) -> Request:
    """``request`` without the provider-only ``web_search`` tool unless the provider ``serves``
    the search for the request's model (a backend's ``web_search`` always stays)."""
    if serves or not any(t.description == PROVIDER_SEARCH_DESCRIPTION for t in request.tools):
        return request
    kept = [t for t in request.tools if t.description != PROVIDER_SEARCH_DESCRIPTION]
    return msgspec.structs.replace(request, tools=kept)


def _get(value: Any, name: str) -> Any:
    return getattr(value, name, None)


def grounded_text(text: str, metadata: Any) -> GroundedAnswer:
    """``text`` with a ``[n]`` marker (1-based source numbers) after each passage a grounding
    support covers, and the sources of ``metadata`` (the SDK's ``GroundingMetadata``: its
    ``grounding_chunks`` are the sources, its ``grounding_supports`` tie byte ranges of the text to
    them). Segment offsets count UTF-8 bytes, so markers are inserted into the encoded text."""
    chunks: Sequence[Any] = _get(metadata, "grounding_chunks") or ()
    sources: list[dict[str, str]] = []
    for chunk in chunks:
        web = _get(chunk, "web")
        url = str(_get(web, "uri") or "")
        title = str(_get(web, "title") or "") or url
        sources.append({"title": title, "url": url, "snippet": ""})
    inserts: list[tuple[int, str]] = []
    for support in _get(metadata, "grounding_supports") or ():
        segment = _get(support, "segment")
        end = _get(segment, "end_index")
        indices: Sequence[int] = _get(support, "grounding_chunk_indices") or ()
        numbers = [i + 1 for i in indices if 0 <= i < len(sources)]
        if isinstance(end, int) and numbers:
            inserts.append((end, "".join(f"[{n}]" for n in numbers)))
    encoded = text.encode()
    for end, marker in sorted(inserts, key=lambda item: item[0], reverse=True):
        at = min(max(end, 0), len(encoded))
        encoded = encoded[:at] + marker.encode() + encoded[at:]
    return GroundedAnswer(text=text, markers=encoded.decode(errors="replace"), sources=sources)
