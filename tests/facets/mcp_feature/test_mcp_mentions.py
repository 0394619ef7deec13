"""Issue 40: ``@server:uri`` mentions of MCP resources in a prompt, resolved in the worker.

A real FastMCP stdio server; the faux model records every request. The prompt's mentioned
resources (a listed one, a template's, one that does not exist) are attached after its text;
a mention of a server that is not configured stays text. The attachment is read once and stored:
the next request shows the very same text although the resource (``memo://counter``) would
answer differently now, and the server was read once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_support import SDK_LEAKS, session, stdio_server, write_config

from chord.facet_packages import facet_package_from_folder, load_generation
from facets_mcp.mentions import MENTION_LIMIT, find_mentions
from pico3 import Models
from pico3.models import UserMessage
from pico3.models.faux import FauxProvider, faux_response

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]

PACKAGE = Path(__file__).parents[3] / "packages" / "facets-mcp"


def user_texts(request: Any) -> list[list[str]]:
    """Each user message of a request as its text blocks."""
    found: list[list[str]] = []
    for message in request.messages:
        if isinstance(message, UserMessage):
            content = message.content
            found.append([content] if isinstance(content, str) else [b.text for b in content])  # type: ignore[union-attr]
    return found


async def test_mentioned_resources_are_attached_once_and_kept(tmp_path: Path) -> None:
    reads = tmp_path / "reads"
    write_config(tmp_path / "config", {"echo": stdio_server("--extras", "--files", str(reads))})
    provider = FauxProvider([faux_response("first"), faux_response("second")])
    prompt = (
        "Compare @echo:memo://greeting with @echo:memo://note/alpha, count "
        "@echo:memo://counter. Also @nope:memo://x and @echo:memo://missing."
    )
    async with session(tmp_path, services={"models": Models([provider])}) as s:
        await s.server("echo", "ready")
        await s.turn(prompt)
        # a hot reload of the package: a new generation, a new server, an empty cache
        (package,) = facet_package_from_folder(PACKAGE)
        generation = load_generation(package, "session")
        try:
            release = s.worker.hold()
            try:
                await s.host.reload(list(generation.facets))
            finally:
                release()
            await s.until(lambda v: v["servers"] and v["servers"][0]["state"] == "ready")
            await s.turn("and now?")
        finally:
            await generation.dispose()
    first, second = provider.state.requests
    (asked,) = user_texts(first)
    assert asked[0] == prompt  # the prompt itself is untouched: @nope stays text
    attached = asked[1:]
    assert attached[:3] == [
        '<resource server="echo" uri="memo://greeting">\nhello\n</resource>',
        '<resource server="echo" uri="memo://note/alpha">\nnote alpha\n</resource>',
        '<resource server="echo" uri="memo://counter">\nread 1\n</resource>',
    ]
    assert len(attached) == 4 and attached[3].startswith(
        "[@echo:memo://missing could not be read: MCP server 'echo' failed read memo://missing"
    )
    # the next request, after the reload: the same attachment, from the conversation's state
    again, follow_up = user_texts(second)
    assert again == asked
    assert follow_up == ["and now?"]
    assert reads.read_text() == "read\n"  # the counter was read once (else "read 2")


def test_a_mention_is_a_configured_server_then_a_uri_without_closing_punctuation() -> None:
    servers = {"docs": object(), "a-b_1": object()}
    text = (
        "see @docs:file:///guide.md, (@a-b_1:memo://x/y?z=1). mail me@docs:file:///no "
        "@other:memo://x @docs:noscheme @docs:file:///guide.md"
    )
    assert find_mentions(text, servers) == [
        ("docs", "file:///guide.md"),
        ("a-b_1", "memo://x/y?z=1"),
    ]
    assert MENTION_LIMIT >= 10_000
