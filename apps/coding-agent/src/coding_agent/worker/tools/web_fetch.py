"""The ``web_fetch`` tool: read a web page (HTML as Markdown), a text file or JSON from a URL.

Arguments: ``url`` (``http`` or ``https``), ``offset`` and ``limit`` (lines of the converted text,
as ``read`` takes them) and ``timeout`` (seconds, default 30, at most 120).

* **Where it goes.** Only ``http``/``https`` URLs. Every connection, the first and each redirect's,
  is checked where it is made (:mod:`.web`): a host resolving to a loopback, private or link-local
  address is refused unless ``web_fetch.allow_private`` lists it; with ``sandbox.enabled``, only
  the hosts in ``sandbox.allow_domains`` are reached. Redirects on the same host (or between
  ``host`` and ``www.host``) are followed, at most :data:`MAX_REDIRECTS`; a redirect to another
  host is not followed but reported with its target, so that reading it is a new call the
  permission rules (``WebFetch(domain:…)``) and the approval dialog see (the same answer Claude
  Code gives). A target the checks refuse is refused at once, saying why.
* **What it reads.** ``text/html`` and XHTML are converted to Markdown with ``markdownify``
  (scripts, styles, forms and inline ``data:`` images dropped); JSON is pretty-printed; other
  ``text/*`` and the textual ``application/*`` types (XML, YAML, JavaScript...) come as they are.
  Anything else (images, PDFs, archives) is refused by its ``Content-Type``, before the body is
  read, with a hint to download it with ``bash``. At most :data:`MAX_DOWNLOAD` bytes are read.
* **What it returns.** A header (final URL, title, type) and the requested lines, cut to 2000
  lines / 50 KB like ``read``, with ``Use offset=N to continue``. An HTTP error status is an
  error result with the status and the start of the body; a timeout, a refused connection or a
  name that does not resolve are errors saying so.

The tool has effects outside the conversation (it sends a request), so it is declared
``replay="unsafe"``: it needs approval like ``bash`` (facets-approval asks for ``web_fetch``) and
a call a crash interrupted is reported, not repeated.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from .spec import OnUpdate, ToolContext, ToolError, ToolResult, ToolSpec, abortable, text_result
from .truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head
from .web import AddressRefused, WebSettings, check_host, guarded_client, resolve_checked

__all__ = ["MAX_DOWNLOAD", "MAX_REDIRECTS", "html_to_markdown", "web_fetch_tool"]

MAX_REDIRECTS = 5
MAX_DOWNLOAD = 5 * 1024 * 1024
DEFAULT_TIMEOUT = 30
MAX_TIMEOUT = 120
_WRAP = 2000  # characters: a longer line (minified JSON, one-line HTML text) is split
_ACCEPT = "text/html, text/markdown;q=0.95, text/plain;q=0.9, application/json;q=0.9, */*;q=0.1"
_HTML = frozenset({"text/html", "application/xhtml+xml"})
_SNIFFED = frozenset({"", "application/octet-stream"})
"""Types that say nothing: the body's first bytes decide (a NUL byte: binary)."""
_TEXT_APPS = frozenset(
    {
        "application/json", "application/xml", "application/javascript",
        "application/x-javascript", "application/ecmascript", "application/yaml",
        "application/x-yaml", "application/toml", "application/x-ndjson", "application/rss+xml",
        "application/atom+xml", "application/x-sh", "application/sql", "application/graphql",
    }
)  # fmt: skip

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "The http:// or https:// URL to read"},
        "offset": {
            "type": "integer",
            "minimum": 1,
            "description": "Line of the converted page to start from (1-indexed)",
        },
        "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines"},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_TIMEOUT,
            "description": f"Seconds before giving up (default {DEFAULT_TIMEOUT})",
        },
    },
    "required": ["url"],
    "additionalProperties": False,
}


@dataclass
class _Page:
    url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes
    cut: bool  # more than MAX_DOWNLOAD bytes: only the start was read


@dataclass
class _Elsewhere:
    url: str
    target: str


def html_to_markdown(body: bytes | str, charset: str | None = None) -> tuple[str, str | None]:
    """``(markdown, title)`` of an HTML document (scripts, styles, forms, ``data:`` images
    dropped; at most one blank line in a row)."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(
        body, "html.parser", from_encoding=charset if isinstance(body, bytes) else None
    )
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text().split()) if title_tag is not None else None
    for tag in soup(["script", "style", "noscript", "template", "svg", "head", "form", "iframe"]):
        tag.decompose()
    for image in soup.find_all("img"):
        if str(image.get("src") or "").startswith("data:"):
            image.decompose()
    text = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    lines = [line.rstrip() for line in text.splitlines()]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return text, title or None


def _same_site(a: str, b: str) -> bool:
    first = (urlsplit(a).hostname or "").removeprefix("www.")
    second = (urlsplit(b).hostname or "").removeprefix("www.")
    return first == second


def _checked_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ToolError(
            f"web_fetch reads http:// and https:// URLs only, not {parts.scheme or 'this'}: "
            f"{url!r}. For a local file use read."
        )
    if not parts.hostname:
        raise ToolError(f"{url!r} has no host name (expected e.g. https://example.com/page)")
    return url


async def _download(url: str, settings: WebSettings, seconds: float) -> _Page | _Elsewhere:
    async with guarded_client(settings, timeout=seconds) as client:
        current = url
        for _hop in range(MAX_REDIRECTS + 1):
            async with client.stream("GET", current, headers={"Accept": _ACCEPT}) as response:
                location = response.headers.get("location")
                if response.is_redirect and location:
                    target = _checked_url(urljoin(current, location))
                    if not _same_site(current, target):
                        parts = urlsplit(target)
                        host = parts.hostname or ""
                        port = parts.port or (443 if parts.scheme == "https" else 80)
                        check_host(host, settings)
                        await resolve_checked(host, port, settings)
                        return _Elsewhere(current, target)
                    current = target
                    continue
                content_type, _, params = response.headers.get("content-type", "").partition(";")
                charset = None
                found = re.search(r"charset\s*=\s*\"?([\w.:-]+)", params, re.IGNORECASE)
                if found:
                    charset = found.group(1)
                body = bytearray()
                page = _Page(str(response.url), response.status_code, "", charset, b"", False)
                page.content_type = content_type.strip().lower()
                sniffed = page.content_type in _SNIFFED
                if (
                    response.status_code < 400
                    and not sniffed
                    and _kind(page.content_type, b"") is None
                ):
                    return page  # refused by its type: the body is not read
                async for chunk in response.aiter_bytes():
                    body.extend(chunk)
                    if len(body) > MAX_DOWNLOAD:
                        page.cut = True
                        del body[MAX_DOWNLOAD:]
                        break
                page.body = bytes(body)
                return page
        raise ToolError(
            f"{url} redirected more than {MAX_REDIRECTS} times (last: {current}); stopped"
        )


def _kind(content_type: str, body: bytes) -> str | None:
    """``"html"``, ``"json"``, ``"text"``, or ``None`` for a type web_fetch does not read."""
    if content_type in _HTML:
        return "html"
    if content_type == "application/json" or content_type.endswith("+json"):
        return "json"
    if content_type.startswith("text/") or content_type in _TEXT_APPS:
        return "text"
    if content_type.endswith("+xml"):
        return "text"
    if content_type in ("", "application/octet-stream") and body:
        head = body[:4096]
        if b"\x00" in head:
            return None
        if re.match(rb"\s*(<!doctype html|<html)", head, re.IGNORECASE):
            return "html"
        return "text"
    if content_type == "":
        return "text"
    return None


def _decode(page: _Page) -> str:
    try:
        return page.body.decode(page.charset or "utf-8", "replace")
    except LookupError:  # an unknown charset name
        return page.body.decode("utf-8", "replace")


def _convert(page: _Page) -> tuple[str, str | None, str]:
    """``(text, title, how)`` of a page whose type web_fetch reads."""
    kind = _kind(page.content_type, page.body)
    if kind == "html":
        text, title = html_to_markdown(page.body, page.charset)
        return text, title, "converted to Markdown"
    text = _decode(page)
    if kind == "json" and not page.cut:
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False), None, "JSON"
        except ValueError:
            pass
    return text, None, "text"


def _wrapped(text: str) -> list[str]:
    lines: list[str] = []
    for line in text.split("\n"):
        while len(line) > _WRAP:
            lines.append(line[:_WRAP])
            line = line[_WRAP:]
        lines.append(line)
    return lines


def _page_result(page: _Page, args: dict[str, Any]) -> ToolResult:
    kind = _kind(page.content_type, page.body)
    if kind is None and page.status >= 400:
        raise ToolError(
            f"{page.url} answered HTTP {page.status} ({page.content_type})",
            {"url": page.url, "status": page.status},
        )
    if kind is None:
        raise ToolError(
            f"{page.url} is {page.content_type}, which web_fetch does not read (it reads HTML, "
            "text and JSON). To save the file, download it with bash: "
            f"curl -L -o FILE '{page.url}'",
            {"url": page.url, "content_type": page.content_type},
        )
    text, title, how = _convert(page)
    details: dict[str, Any] = {
        "url": page.url,
        "status": page.status,
        "content_type": page.content_type,
        "bytes": len(page.body),
    }
    if page.status >= 400:
        excerpt = text[:1000].strip()
        raise ToolError(
            f"{page.url} answered HTTP {page.status}"
            + (f"; the page says:\n{excerpt}" if excerpt else " with an empty body"),
            details,
        )
    lines = _wrapped(text)
    total = len(lines)
    offset: int | None = args.get("offset")
    limit: int | None = args.get("limit")
    start = (offset or 1) - 1
    if total and start >= total:
        raise ToolError(f"Offset {offset} is beyond the end of {page.url} ({total} lines)")
    end = total if limit is None else min(total, start + limit)
    cut = truncate_head("\n".join(lines[start:end]))
    first = start + 1
    last = first + cut.output_lines - 1
    head = [f"URL: {page.url}"]
    if title:
        head.append(f"Title: {title}")
    head.append(f"Content-Type: {page.content_type or 'unknown'} ({how})")
    body = cut.content.rstrip() if text.strip() else "(empty page)"
    footer = ""
    if cut.truncated:
        footer = f"[Showing lines {first}-{last} of {total}. Use offset={last + 1} to continue.]"
        details["truncation"] = cut.as_details()
    elif end < total:
        footer = f"[{total - end} more lines. Use offset={end + 1} to continue.]"
    if page.cut:
        footer += (
            f"\n[The response is larger than {format_size(MAX_DOWNLOAD)}: only its start was read.]"
        )
        details["download_cut"] = True
    details["total_lines"] = total
    out = "\n".join(head) + "\n\n" + body + (f"\n\n{footer.strip()}" if footer else "")
    return text_result(out, details)


def _describe(error: Exception, url: str, timeout: float) -> str:
    import httpx

    if isinstance(error, httpx.TimeoutException):
        return f"Fetching {url} timed out after {timeout:g} s; try again or a larger timeout"
    if isinstance(error, httpx.ConnectError):
        return f"Cannot connect to {urlsplit(url).netloc}: {error or 'connection refused'}"
    if isinstance(error, httpx.TooManyRedirects):  # pragma: no cover - redirects are manual
        return f"{url}: too many redirects"
    return f"Fetching {url} failed: {type(error).__name__}: {error}"


def web_fetch_tool(settings: WebSettings | None = None) -> ToolSpec:
    """The ``web_fetch`` tool with ``settings`` (default: public addresses only, no sandbox)."""
    chosen = settings if settings is not None else WebSettings()

    async def fetch(
        args: dict[str, Any], tools: ToolContext, _on_update: OnUpdate | None
    ) -> ToolResult:
        import httpx

        url = _checked_url(args["url"].strip())
        timeout = float(args.get("timeout") or DEFAULT_TIMEOUT)
        try:
            check_host(urlsplit(url).hostname or "", chosen)
        except AddressRefused as refused:
            raise ToolError(f"web_fetch refused {url}: {refused}") from None
        got: list[_Page | _Elsewhere] = []
        try:
            with abortable(tools.ctx, timeout) as scope:
                got.append(await _download(url, chosen, timeout))
        except AddressRefused as refused:
            raise ToolError(f"web_fetch refused {url}: {refused}", {"url": url}) from None
        except httpx.HTTPError as error:
            raise ToolError(_describe(error, url, timeout), {"url": url}) from None
        if tools.ctx.cancelled:
            raise ToolError("Fetch aborted", {"url": url})
        if scope.cancelled_caught or not got:
            raise ToolError(
                f"Fetching {url} timed out after {timeout:g} s; try again or a larger timeout",
                {"url": url},
            )
        outcome = got[0]
        if isinstance(outcome, _Elsewhere):
            return text_result(
                f"{outcome.url} redirects to another host: {outcome.target}\n"
                f"To read it, call web_fetch again with url={outcome.target!r}.",
                {"url": outcome.url, "redirect": outcome.target},
            )
        return _page_result(outcome, args)

    return ToolSpec(
        name="web_fetch",
        description=(
            "Fetch a web page or text resource over http(s) and return it as Markdown (HTML is "
            "converted; JSON is pretty-printed; other text is returned as is; binary types are "
            f"refused). Output is cut to {DEFAULT_MAX_LINES} lines or "
            f"{DEFAULT_MAX_BYTES // 1024}KB; use offset/limit to read on. A redirect to another "
            "host is reported, not followed: fetch the new URL yourself. Loopback and private "
            "addresses are refused unless the user allowed them."
        ),
        parameters=PARAMETERS,
        handler=fetch,
    )
