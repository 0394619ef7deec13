"""``@server:uri`` mentions of MCP resources in the user's prompts, resolved in the worker.

A prompt that says ``summarise @docs:file:///guide.md`` names the resource ``file:///guide.md``
of the configured server ``docs`` (Claude Code's syntax). When that prompt is first sent to the
model (the ``before_request`` hook of ``pi.generation``), each mentioned resource is read
(``resources/read``; a server that is starting or asleep is waited for, at most
:data:`~.client.INIT_TIMEOUT`) and its text is attached after the prompt, as an ``@file``'s
content would be::

    <resource server="docs" uri="file:///guide.md">
    ...
    </resource>

What was attached is stored in the conversation's rewindable state (namespace ``mcp-mentions``,
``prompts``: the prompt's key → the blocks), written before the request goes out: every later
request shows the model the very same text (a stable prompt prefix), a restarted worker does not
read the resource again, and a rewind before the prompt forgets it. A resource that cannot be
read is one line saying why in its place (the model can try ``mcp__read_resource``). Text past
:data:`MENTION_LIMIT` characters is cut with a note; non-text content is named, not attached.
Mentions of a server that is not configured are left as they are (``@name:`` may be anything).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from chord import Context
from pico3 import MODEL_CALL_KIND, Harness, HarnessServiceApi

if TYPE_CHECKING:
    from .client import ServerRunner

__all__ = ["MENTION", "MENTION_LIMIT", "find_mentions", "mentions_registration"]

MENTION = re.compile(
    r"(?<![\w@])@(?P<server>[A-Za-z0-9_-]{1,40}):(?P<uri>[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+)"
)
"""``@server:scheme://rest``: the server's configured name, then the resource's URI."""
MENTION_LIMIT = 100_000
"""Characters of one resource's text attached to a prompt; the rest is cut with a note."""
NAMESPACE = "mcp-mentions"
_TRAILING = ".,;:!?)]}"

Runners = Callable[[], Mapping[str, "ServerRunner"]]


def find_mentions(text: str, servers: Mapping[str, object]) -> list[tuple[str, str]]:
    """The ``(server, uri)`` pairs ``text`` mentions, in order and once each, of the
    ``servers`` configured (a sentence's closing punctuation is not part of a URI)."""
    found: list[tuple[str, str]] = []
    for match in MENTION.finditer(text):
        server, uri = match["server"], match["uri"].rstrip(_TRAILING)
        if server in servers and (server, uri) not in found:
            found.append((server, uri))
    return found


def _plain(value: Any) -> Any:
    """``value`` (a transaction's view of stored JSON) as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = [b.get("text", "") for b in content or [] if isinstance(b, dict)]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return "".join(str(p) for p in parts)  # pyright: ignore[reportUnknownVariableType]


def _key(message: dict[str, Any]) -> str:
    raw = json.dumps([message.get("content"), message.get("timestamp")], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _attach(message: dict[str, Any], blocks: list[dict[str, Any]]) -> None:
    content = message.get("content")
    if isinstance(content, str):
        message["content"] = [{"type": "text", "text": content}, *blocks]
    elif isinstance(content, list):
        message["content"] = [*content, *blocks]  # pyright: ignore[reportUnknownVariableType]


async def _ready(runner: ServerRunner) -> None:
    """Wait (bounded) until ``runner`` is not starting; wake it when it sleeps."""
    from .client import INIT_TIMEOUT

    with anyio.move_on_after(INIT_TIMEOUT):
        while runner.asleep or runner.state == "starting":
            runner.wake()
            await runner.state_changed()


async def _read(runner: ServerRunner, server: str, uri: str) -> str:
    """One mention as the text attached: the resource's text pieces, or why not."""
    from .client import McpCallError

    await _ready(runner)
    try:
        pieces = await runner.read_resource(uri)
    except McpCallError as exc:
        return f"[@{server}:{uri} could not be read: {exc}]"
    texts: list[str] = []
    for piece in pieces:
        if piece.get("type") == "text":
            text = str(piece["text"])
            head = f"[resource {uri}]\n"
            texts.append(text[len(head) :] if text.startswith(head) else text)
        else:
            texts.append(f"[{piece.get('mimeType', 'binary')} content, not attached]")
    text = "\n".join(texts)
    if len(text) > MENTION_LIMIT:
        text = (
            text[:MENTION_LIMIT] + f"\n[cut at {MENTION_LIMIT} characters of {len(text)}; "
            "read the rest with mcp__read_resource]"
        )
    return f'<resource server="{server}" uri="{uri}">\n{text}\n</resource>'


def mentions_registration(
    service: HarnessServiceApi, runners: Runners
) -> Callable[[Harness], Callable[[], None]]:
    """The harness registration of the ``before_request`` hook that resolves mentions (for
    ``add_registration``)."""
    stored: dict[int, dict[str, Any]] = {}  # conversation -> its resolved prompts (a cache)

    def install(h: Harness) -> Callable[[], None]:
        ns = h.namespace(NAMESPACE, {"rewindable": {"prompts": {}}})
        stored.clear()

        async def resolved(conversation: Any, ctx: Context) -> dict[str, Any]:
            cid = conversation.id
            if cid not in stored:

                def read(tx: Any, _ctx: Context) -> dict[str, Any]:
                    return _plain(tx.plugins(ns)["prompts"])  # the state's views end with tx

                stored[cid] = await conversation.commit(read, ctx)
            return stored[cid]

        async def before_request(request: Any, api: Any, ctx: Context) -> Any:
            servers = runners()
            messages: list[dict[str, Any]] = request.get("messages") or []
            users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
            wanted = [(m, find_mentions(_text(m), servers)) for m in users]
            wanted = [(m, found) for m, found in wanted if found]
            if not wanted:
                return None
            conversation = await service.harness.conversation(api.conversation_id, ctx)
            if conversation is None:  # pragma: no cover - the generation's conversation exists
                return None
            prompts = await resolved(conversation, ctx)
            last = next((m for m in reversed(messages) if m.get("role") != "system"), None)
            for message, found in wanted:
                key = _key(message)
                if key not in prompts and message is last:  # a new prompt: read them now
                    texts = [await _read(servers[s], s, uri) for s, uri in found if s in servers]
                    blocks = [{"type": "text", "text": text} for text in texts]
                    prompts[key] = blocks

                    def write(tx: Any, _ctx: Context, key: str = key, blocks: Any = blocks) -> None:
                        current = dict(tx.plugins(ns)["prompts"])
                        current.setdefault(key, blocks)
                        tx.plugins(ns)["prompts"] = current

                    await conversation.commit(write, ctx)
                blocks = prompts.get(key)
                if isinstance(blocks, list) and blocks:
                    _attach(message, [dict(b) for b in blocks])  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
            return {"messages": messages}

        undo_hooks = h.hooks(ns, MODEL_CALL_KIND, {"before_request": before_request})

        def uninstall() -> None:
            undo_hooks()
            ns.unregister()

        return uninstall

    return install
