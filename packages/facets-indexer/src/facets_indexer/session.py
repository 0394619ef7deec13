"""The indexer session facet: the ``repo.indexer`` kind, the ``code_search`` tool, ``pi.indexer``.

Three contributions, all made through the harness (docs/design/chord.md#feature-layout):

* the ``repo.indexer`` task kind (:mod:`.kind`), registered through
  :meth:`~pico3.facets.contract.HarnessServiceApi.add_registration` in ``on_activate``, so it is
  present before ``resume()`` (indexer tasks may exist in storage) and again after every reopen;
* the ``code_search`` tool (:func:`code_search_tool`), which lets the model query the index;
* :data:`~.contract.IndexerService` (``pi.indexer``): ``start`` creates a background indexer
  task in one commit, or returns the live one. It is how a presentation (``/index``) starts a
  run; it holds nothing durable.

:func:`install_indexer` is the harness half alone (kind + tool, one uninstaller), usable without
chord. The facet's ``env.own`` releases the registration when the facet is retired, so a reload
unregisters the old kind and tool before the new generation registers its own (the host retires
first, docs/design/decisions.md#d4).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio.to_thread

from chord import Context, Facet, FacetEnvironment, define_facet
from pico3 import (
    Harness,
    HarnessService,
    HarnessServiceApi,
    TaskKind,
    ToolApi,
    ToolDeclaration,
    ToolResult,
    Transaction,
)

from .contract import INDEXER_KIND, IndexerService, IndexRequest, IndexStarted
from .kind import WORKSPACE_SERVICE, IndexerNotConfigured, index_file, indexer_kind
from .store import AsyncIndexStore, QueryError

__all__ = [
    "CODE_SEARCH",
    "MAX_RESULTS",
    "IndexerStarter",
    "code_search_tool",
    "indexer_session_facet",
    "install_indexer",
    "session_facet",
]

CODE_SEARCH = "code_search"
"""The tool's name."""

MAX_RESULTS = 50
"""The most lines one ``code_search`` call returns."""

_DEFAULT_RESULTS = 20

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": 'Words that must all occur on one line; "quoted phrases" match exactly.',
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_RESULTS,
            "description": f"How many matching lines to return (default {_DEFAULT_RESULTS}).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


def code_search_tool(locate: Callable[[], Path]) -> ToolDeclaration:
    """The ``code_search`` tool over the index file ``locate()`` names (resolved per call).

    The result lists ``path:line: text`` with matched words in «guillemets», best first. An index
    that does not exist yet, a query with nothing to search for, or a session without a state
    folder give an error result that says what to do; nothing is created by searching.
    """

    async def execute(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        query: str = args["query"]
        limit: int = args.get("limit", _DEFAULT_RESULTS)
        try:
            path = locate()
        except IndexerNotConfigured as error:
            return ToolResult.text(f"code_search is unavailable: {error}", is_error=True)
        if not path.is_file():
            return ToolResult.text(
                "The code index does not exist yet: ask the user to run /index.", is_error=True
            )
        ctx.raise_if_cancelled()
        async with await AsyncIndexStore.open(path) as store:
            try:
                hits = await store.search(query, limit)
            except QueryError as error:
                return ToolResult.text(f"code_search: {error}", is_error=True)
            stats = await store.stats()
        if not hits:
            text = f"No line matches {query!r} ({stats.files} files indexed)."
        else:
            lines = [f"{hit.path}:{hit.line}: {hit.snippet}" for hit in hits]
            text = "\n".join([f"{len(hits)} matching lines for {query!r}:", *lines])
        details = {"matches": [{"path": h.path, "line": h.line} for h in hits]}
        return ToolResult.text(text, details=details)

    return ToolDeclaration(
        CODE_SEARCH,
        "Search the indexed working tree (.gitignore respected) for lines containing words or "
        "phrases; returns file:line and the line. Faster than grep for finding where something "
        "is defined or used. The index is built by the user's /index command.",
        _PARAMETERS,
        execute,
        replay="safe",
    )


def install_indexer(harness: Harness, kind: TaskKind) -> Callable[[], None]:
    """Register ``kind`` and the ``code_search`` tool on ``harness``; returns the uninstaller
    (idempotent). The tool finds the index through the harness services (see :mod:`.kind`)."""
    services: Mapping[str, Any] = harness.scheduler.services
    unregister_kind = harness.register_task_kind(kind)
    try:
        unregister_tool = harness.register_tool(code_search_tool(lambda: index_file(services)))
    except BaseException:
        unregister_kind()
        raise

    def uninstall() -> None:
        unregister_tool()
        unregister_kind()

    return uninstall


def _check_request(request: object) -> IndexRequest:
    if type(request) is not dict:
        raise TypeError(f"start: the request must be a JSON object, got {type(request).__name__}")
    unknown = sorted(set(request) - {"conversationId", "root"})  # pyright: ignore[reportUnknownArgumentType]
    if unknown:
        raise ValueError(f"start: unknown request fields {unknown}")
    checked: IndexRequest = {}
    cid: object = request.get("conversationId")
    if cid is not None:
        if type(cid) is not int:
            raise TypeError(f"start: conversationId must be an integer, got {cid!r}")
        checked["conversationId"] = cid
    root: object = request.get("root")
    if root is not None:
        if not isinstance(root, str) or not root.strip():
            raise TypeError(f"start: root must be a non-empty string, got {root!r}")
        checked["root"] = root.strip()
    return checked


def _resolve_root(workspace: str | os.PathLike[str] | None, root: str) -> Path:
    base = Path(workspace) if workspace is not None else Path.cwd()
    resolved = (base / Path(root).expanduser()).resolve()
    if not resolved.is_dir():
        raise NotADirectoryError(f"start: cannot index {str(resolved)!r}: not a directory")
    return resolved


class IndexerStarter:
    """:data:`~.contract.IndexerService` as the session facet provides it."""

    def __init__(self, harness: HarnessServiceApi, kind: TaskKind) -> None:
        self._harness = harness
        self._kind = kind

    async def start(self, request: IndexRequest, ctx: Context) -> IndexStarted:
        """Create a background indexer task (see :class:`~.contract.IndexerServiceApi`).

        The root is resolved in this process: relative to the workspace (``services
        ["workspace"]``, else the worker's current directory). Bad input — an unknown field, a
        root that is not a directory, a conversation that does not exist, no state folder —
        raises before anything is written.
        """
        checked = _check_request(request)
        harness = self._harness.harness
        services = harness.scheduler.services
        index_file(services)  # no state folder: refuse now, not in the task
        root = await anyio.to_thread.run_sync(
            _resolve_root, services.get(WORKSPACE_SERVICE), checked.get("root", ".")
        )
        if "conversationId" in checked:
            conversation = await harness.conversation(checked["conversationId"], ctx)
            if conversation is None:
                raise LookupError(f"start: conversation {checked['conversationId']} does not exist")
        else:
            conversation = await harness.root(ctx)
        kind = self._kind

        async def build(tx: Transaction, _ctx: Context) -> IndexStarted:
            live = [t for t in await tx.tasks(kind=INDEXER_KIND) if t.status != "terminal"]
            if live:
                return {"taskId": live[0].id, "started": False}
            task_id = tx.create_task(kind, {"root": str(root)}, background=True)
            return {"taskId": task_id, "started": True}

        return await conversation.commit(build, ctx)


def indexer_session_facet(make_kind: Callable[[], TaskKind] = indexer_kind) -> Facet:
    """The session facet with a kind from ``make_kind`` (the entry point serves
    :data:`session_facet`, which uses the default :func:`~.kind.indexer_kind`)."""

    def setup(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        kind = make_kind()
        env.provide(IndexerService, IndexerStarter(harness, kind))

        def activate() -> None:
            env.own(harness.add_registration(lambda h: install_indexer(h, kind)))

        env.on_activate(activate)

    return define_facet("@pi/indexer", setup)


session_facet = indexer_session_facet()
"""The indexer session facet with the default kind."""
