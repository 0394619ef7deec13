"""Export one branch of a session: a self-contained HTML page, or the raw entries as JSONL.

::

    coding-agent export SESSION [-o FILE] [--format html|jsonl] [--branch N]
    /export [FILE]                      (in the TUI: the branch you are on)

The session is read straight from its ``storage/main.jsonl`` (nothing is opened or locked, so a
running session exports too). The branch is a conversation and the part of each ancestor it
was forked from; by default the branch the user is on (:func:`default_branch`: the one they last
prompted in or made, as the session's ``activity`` record says), not the newest-made one (an
empty rewind branch). A session with no conversation yet is refused with a message saying so;
a branch with no message exports (an empty page) and :func:`has_messages` lets the command
line warn about it.

The HTML page has everything inline: the CSS, the Markdown rendered to HTML (``markdown-it``,
raw HTML in messages escaped), tool calls and their results as collapsible ``<details>``, the
diffs of ``edit`` coloured line by line; a file, folder or image attached to a prompt shows as its
mark (``📎 src/app.py (3 lines)``: :func:`coding_agent.marks.attachment_mark`), as the TUI's
transcript shows it, not its text (JSONL keeps the whole block). It has no script and loads nothing: no network request
is made when it is opened (a Markdown image becomes a link to its address, and the page's
``Content-Security-Policy`` forbids every fetch but its own inline CSS). ``--format jsonl``
writes a header line ``{"type": "session", "id", "cwd", "branch"}`` and then every entry of the
branch, oldest first, in the view's JSON shape.

Both formats redact secrets (:mod:`coding_agent.settings.secret_env`): the value of each secret variable
(provider keys, the server token, the config's ``secrets``) in the exporting process's
environment and each ``api_key`` of the config files becomes ``[redacted NAME]``, and text shaped
like a well-known key (``sk-…``, ``ghp_…``, ``AKIA…``, ``xoxb-…``) ``[redacted key]``.

No control character appears raw in the page: the finished page is made inert
(:func:`chord.inert`, which adds no ``<`` or ``&``), so an ESC, a bidi override or a zero-width
space from the model, a tool or a file reads as ``\\x1b``, ``\\u202e``, ``\\u200b``. JSONL is data
and keeps every character (JSON escapes the C0 controls as ``\\u001b``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from markdown_it import MarkdownIt

from chord import inert
from coding_agent.marks import attachment_mark
from coding_agent.session_files.folders import Session, SessionError, open_regular
from coding_agent.session_files.tree import (
    branch_number,
    branch_of_number,
    build_outline,
    lineage,
)
from coding_agent.settings.secret_env import redact, secret_values
from pico3 import NoticeEntry, ToolResultEntry, UserEntry, ViewDecoder
from pico3.models import (
    AssistantMessage,
    Message,
    ServerToolContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
)

__all__ = [
    "branch_entries",
    "default_branch",
    "export_html",
    "export_jsonl",
    "has_messages",
    "read_session_records",
]


def read_session_records(session: Session) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(conversations, entries)`` of ``session`` in view shapes, in commit order."""
    path = session.storage_dir / "main.jsonl"
    try:
        with open(open_regular(path), "rb") as file:  # a FIFO or a device is refused
            raw = file.read()
    except FileNotFoundError:
        return [{"id": 1}], []
    except OSError as error:
        raise SessionError(f"{path}: cannot read: {error.strerror}") from None
    from pico3 import stored_writes

    conversations: list[dict[str, Any]] = []
    entries: list[dict[str, Any]] = []
    # lines that do not decode (the unfinished tail of a crash) are skipped
    for write in stored_writes(raw):
        kind = write.get("type")
        if kind == "conversation":
            conv = write["conversation"]
            shape: dict[str, Any] = {"id": conv["id"]}
            parent = conv.get("parent")
            if parent:
                shape["parent"] = {
                    "conversationId": parent["conversation_id"],
                    "at": parent["at"],
                }
            if "owner" in conv:
                shape["owner"] = conv["owner"]
            conversations.append(shape)
        elif kind == "entry":
            entry = write["entry"]
            out = {k: v for k, v in entry.items() if k != "conversation_id"}
            out["conversationId"] = entry["conversation_id"]
            entries.append(out)
    return conversations, entries


def default_branch(session: Session, known: set[int], entries: list[dict[str, Any]]) -> int:
    """The branch the user is on: the session's recorded one (:meth:`Session.current_branch`)
    when it is one of ``known``, else the one with the newest prompt, else the first."""
    recorded = session.current_branch()
    if recorded in known:
        return cast(int, recorded)
    prompts = [e for e in entries if e["conversationId"] in known and e.get("kind") == "pi.user"]
    return prompts[-1]["conversationId"] if prompts else min(known)


def has_messages(entries: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a branch's entries hold a message an export shows (a prompt or an answer)."""
    return any(e.get("kind") in ("pi.user", "pi.assistant") for e in entries)


def branch_entries(
    session: Session, branch: int | None = None, *, number: int | None = None
) -> tuple[int, int, list[dict[str, Any]]]:
    """``(conversation id, branch number, its entries oldest first)`` of the branch whose
    conversation id is ``branch``, or whose number (as users see it: 1, 2, 3 in creation order,
    :func:`~coding_agent.session_files.tree.branch_number`) is ``number``; by default the
    branch the user is on (:func:`default_branch`). Raises :class:`SessionError` for a session
    with no conversation yet, or a branch it does not have."""
    conversations, entries = read_session_records(session)
    outline = build_outline(conversations, entries)
    known = {c["id"] for c in outline["conversations"]}
    if not known:
        raise SessionError(
            f"session {session.id} has no conversation yet, so there is nothing to export "
            f"(send a prompt in it first: coding-agent --resume {session.id})"
        )
    if number is not None:
        found_id = branch_of_number(outline, number)
        if found_id is None:
            raise SessionError(
                f"session {session.id} has no branch {number} (its branches: "
                f"1 to {len(known)}; coding-agent sessions lists them)"
            )
        chosen = found_id
    elif branch is None:
        chosen = default_branch(session, known, entries)
    elif branch not in known:
        raise SessionError(f"session {session.id} has no conversation {branch}")
    else:
        chosen = branch
    path = lineage(outline, chosen)
    found = [
        e
        for e in entries
        if e["conversationId"] in path
        and (path[e["conversationId"]] is None or e["id"] <= cast(int, path[e["conversationId"]]))
    ]
    found.sort(key=lambda e: e["id"])
    return chosen, cast(int, branch_number(outline, chosen)), found


def export_jsonl(
    session: Session,
    branch: int | None = None,
    *,
    number: int | None = None,
    secrets: Mapping[str, str] | None = None,
) -> str:
    """The branch as JSON lines: a header (``branch``: its number as users see it,
    ``conversation``: its id), then every entry (``secrets``: value → name of what to redact;
    default :func:`~coding_agent.settings.secret_env.secret_values` of the session's folder)."""
    chosen, shown, entries = branch_entries(session, branch, number=number)
    entries = _redacted(entries, _secrets_of(session, secrets))
    header = {
        "type": "session",
        "id": session.id,
        "cwd": str(session.cwd),
        "branch": shown,
        "conversation": chosen,
    }
    lines = [json.dumps(header, ensure_ascii=False)]
    lines += [json.dumps(entry, ensure_ascii=False) for entry in entries]
    return "\n".join(lines) + "\n"


_CSS = """
ul.todo { list-style: none; padding-left: 1em; margin: .3em 0; }
body { font: 15px/1.5 system-ui, sans-serif; max-width: 960px; margin: 2em auto; padding: 0 1em;
       color: #1f2328; background: #fff; }
header { border-bottom: 1px solid #d0d7de; margin-bottom: 1.5em; }
header p { color: #59636e; margin: .2em 0; }
.msg { margin: 1em 0; padding: .6em 1em; border-radius: 8px; }
.user { background: #ddf4ff; border-left: 4px solid #0969da; }
.assistant { background: #f6f8fa; border-left: 4px solid #8250df; }
.notice { background: #fff8c5; border-left: 4px solid #bf8700; }
.role { font-size: 12px; font-weight: 600; color: #59636e; text-transform: uppercase; }
.meta { font-size: 12px; color: #59636e; float: right; }
details { margin: .5em 0; border: 1px solid #d0d7de; border-radius: 6px; background: #fff; }
summary { cursor: pointer; padding: .3em .6em; font-family: ui-monospace, monospace;
          font-size: 13px; }
details pre { margin: 0; padding: .6em; border-top: 1px solid #d0d7de; }
pre { overflow-x: auto; font: 13px/1.4 ui-monospace, monospace; white-space: pre-wrap; }
code { font-family: ui-monospace, monospace; }
.add { background: #dafbe1; color: #116329; display: block; }
.del { background: #ffebe9; color: #82071e; display: block; }
.hunk { color: #8250df; display: block; }
.error summary { color: #cf222e; }
.thinking { color: #59636e; font-style: italic; }
.attachment { color: #59636e; font-family: ui-monospace, monospace; font-size: 13px; }
"""


def _time(message: Message) -> str:
    """When ``message`` was made (``""`` when it does not say: a timestamp of 0 is left out of
    the stored JSON)."""
    if message.timestamp:
        return datetime.fromtimestamp(message.timestamp / 1000).strftime("%Y-%m-%d %H:%M:%S")
    return ""


def _texts(content: str | Sequence[object]) -> Iterable[tuple[str, str]]:
    """``(type, text)`` of a message's content blocks (a string is one text block)."""
    if isinstance(content, str):
        yield "text", content
        return
    for block in content:
        if isinstance(block, TextContent):
            sources = "".join(
                f"\n- [{c.title or c.url}]({c.url})"
                + (f': "{c.cited_text}"' if c.cited_text else "")
                for c in block.citations or ()
            )
            yield "text", block.text + (f"\n\nSources:{sources}" if sources else "")
        elif isinstance(block, ThinkingContent):
            yield "thinking", block.thinking
        elif isinstance(block, ServerToolContent):  # the provider's own web search
            query = block.input.get("query")
            found = "".join(f"\n- [{r.title or r.url}]({r.url})" for r in block.results)
            yield "text", f"Searched the web ({block.name}): {query}{found}"


def _diff(text: str) -> str:
    out: list[str] = []
    for line in text.splitlines():
        escaped = html.escape(line) or " "
        if line.startswith("+") and not line.startswith("+++"):
            out.append(f'<span class="add">{escaped}</span>')
        elif line.startswith("-") and not line.startswith("---"):
            out.append(f'<span class="del">{escaped}</span>')
        elif line.startswith("@@"):
            out.append(f'<span class="hunk">{escaped}</span>')
        else:
            out.append(f"<span>{escaped}</span>")
    return "<pre>" + "".join(out) + "</pre>"


def export_html(
    session: Session,
    branch: int | None = None,
    *,
    number: int | None = None,
    name: str | None = None,
    secrets: Mapping[str, str] | None = None,
) -> str:
    """The branch as one self-contained HTML page (``secrets`` as in :func:`export_jsonl`)."""
    _chosen, chosen, stored = branch_entries(session, branch, number=number)
    values = _secrets_of(session, secrets)
    decoder = ViewDecoder()  # the entries' view shapes, read as pico3's records
    entries = [decoder.entry(entry) for entry in _redacted(stored, values)]
    name = _redact(name, values) if name is not None else None
    markdown = MarkdownIt("commonmark", {"html": False}).enable("table")
    markdown.add_render_rule("image", _image_as_link)
    results: dict[str, ToolResultEntry] = {}
    for entry in entries:
        if isinstance(entry, ToolResultEntry) and entry.message is not None:
            results[entry.message.tool_call_id] = entry
    title = name or f"Session {session.id}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # No script, nothing fetched: the page works offline and makes no request.
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<header><h1>{html.escape(title)}</h1>",
        f"<p>Session <code>{html.escape(session.id)}</code> · branch {chosen} · "
        f"{html.escape(str(session.cwd))}</p></header>",
    ]
    for entry in entries:
        for message in entry.messages:
            user = isinstance(entry, UserEntry)
            meta = entry.data.meta if isinstance(entry, UserEntry) else None
            if meta:  # not typed by the user (an import's): one collapsed line
                body = "".join(_user_text(t, markdown) for _, t in _texts(message.content))
                label = html.escape(f"({meta})")
                parts.append(
                    f'<details class="msg notice"><summary class="role">{label}</summary>'
                    f"{body}</details>"
                )
            elif user or (isinstance(entry, NoticeEntry) and isinstance(message, UserMessage)):
                css = "user" if user else "notice"
                body = "".join(_user_text(t, markdown) for _, t in _texts(message.content))
                if isinstance(entry, UserEntry) and entry.data.typed:  # an imported command
                    body = f"<p>{html.escape(entry.data.typed)}</p>"
                parts.append(
                    f'<section class="msg {css}"><span class="meta">{_time(message)}</span>'
                    f'<div class="role">{"you" if css == "user" else "notice"}</div>{body}</section>'
                )
            elif isinstance(message, AssistantMessage):
                parts.append(_assistant(message, markdown, results))
    parts.append("</body></html>")
    return inert("\n".join(parts) + "\n")  # no control character raw in the page


def _user_text(text: str, markdown: MarkdownIt) -> str:
    """A user message's text block as HTML: an attached file, folder or image as its mark
    (``📎 src/app.py (3 lines)``, as the transcript shows it), any other text as Markdown."""
    mark = attachment_mark(text)
    if mark is not None:
        return f'<p class="attachment">{html.escape(mark)}</p>'
    return markdown.render(text)


def _assistant(
    message: AssistantMessage, markdown: MarkdownIt, results: Mapping[str, ToolResultEntry]
) -> str:
    model = "/".join(name for name in (message.provider, message.model) if name)
    body: list[str] = []
    for kind, text in _texts(message.content):
        if kind == "thinking":
            body.append(
                f'<details class="thinking"><summary>thinking</summary>'
                f"<pre>{html.escape(text)}</pre></details>"
            )
        else:
            body.append(markdown.render(text))
    for call in message.content:
        if not isinstance(call, ToolCall):
            continue
        arguments = json.dumps(call.arguments, indent=2, ensure_ascii=False)
        result = results.get(call.id)
        answer = result.message if result is not None else None
        error = answer is not None and answer.is_error
        todos = _todo_list(call.arguments) if call.name == "todo" else None
        inner = todos if todos is not None else f"<pre>{html.escape(arguments)}</pre>"
        if todos is not None and not error:  # the list is the call's whole point: shown open
            label = html.escape(f"todo ({_todo_count(call.arguments)})")
            body.append(f"<details open><summary>⚙ {label}</summary>{inner}</details>")
            continue
        if result is not None and answer is not None:
            text = "\n".join(t for _, t in _texts(answer.content))
            inner += f"<pre>{html.escape(text)}</pre>"
            if result.diff:
                inner += _diff(result.diff)
        label = html.escape(f"{call.name} {_brief(call.arguments)}".strip())
        css = ' class="error"' if error else ""
        body.append(f"<details{css}><summary>⚙ {label}</summary>{inner}</details>")
    return (
        f'<section class="msg assistant"><span class="meta">{html.escape(model)} '
        f'{_time(message)}</span><div class="role">assistant</div>{"".join(body)}</section>'
    )


CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; font-src 'none'; "
    "script-src 'none'; connect-src 'none'; media-src 'none'; object-src 'none'; "
    "frame-src 'none'; base-uri 'none'; form-action 'none'"
)
"""The export's policy: its inline ``<style>`` and nothing else (no fetch of any kind)."""


def _image_as_link(renderer: Any, tokens: Any, index: int, options: Any, env: Any) -> str:
    """A Markdown image rendered as a link to its address: opening the page fetches nothing."""
    token = tokens[index]
    src = str(token.attrGet("src") or "")
    alt = renderer.renderInlineAsText(token.children or [], options, env) or src
    href = html.escape(src, quote=True)
    return f'<a class="image" href="{href}" rel="noreferrer">[image: {html.escape(alt)}]</a>'


def _secrets_of(session: Session, secrets: Mapping[str, str] | None) -> Mapping[str, str]:
    if secrets is not None:
        return secrets

    return secret_values(session.cwd)


def _redact(text: str, values: Mapping[str, str]) -> str:

    return redact(text, values)


def _redacted(value: Any, values: Mapping[str, str]) -> Any:
    """``value`` (entries, JSON shapes) with every string redacted (:func:`_redact`)."""
    if isinstance(value, str):
        return _redact(value, values)
    if isinstance(value, list):
        return [_redacted(item, values) for item in cast(list[Any], value)]
    if isinstance(value, dict):
        return {k: _redacted(v, values) for k, v in cast(dict[str, Any], value).items()}
    return value


_TODO_MARKS = {"completed": "☑", "in_progress": "▶", "pending": "☐"}


def _todo_items(arguments: Any) -> list[dict[str, Any]] | None:
    todos = arguments.get("todos") if isinstance(arguments, dict) else None
    if not isinstance(todos, list):
        return None
    items = [cast(dict[str, Any], item) for item in todos if isinstance(item, dict)]
    return items if len(items) == len(todos) else None  # pyright: ignore[reportUnknownArgumentType]


def _todo_list(arguments: Any) -> str | None:
    """A ``todo`` call's list as a checklist (``None``: not the tool's shape; shown as JSON)."""
    items = _todo_items(arguments)
    if items is None:
        return None
    rows = "".join(
        f"<li>{_TODO_MARKS.get(str(item.get('status')), '☐')} "
        f"{html.escape(str(item.get('content', '')))}</li>"
        for item in items
    )
    return f'<ul class="todo">{rows}</ul>' if rows else "<p>(the list was cleared)</p>"


def _todo_count(arguments: Any) -> str:
    items = _todo_items(arguments) or []
    done = sum(1 for item in items if item.get("status") == "completed")
    return f"{done}/{len(items)} done"


def _brief(arguments: Any) -> str:
    if isinstance(arguments, dict):
        for key in ("path", "command", "pattern"):
            value = cast(dict[str, Any], arguments).get(key)
            if isinstance(value, str):
                return value if len(value) <= 80 else value[:79] + "…"
    return ""


def write_export(
    session: Session,
    output: Path,
    *,
    format: str = "html",
    branch: int | None = None,
    name: str | None = None,
) -> Path:
    """Write the export of ``session`` to ``output``; returns the path written."""
    text = (
        export_jsonl(session, branch)
        if format == "jsonl"
        else export_html(session, branch, name=name)
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    return output
