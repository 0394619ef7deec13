"""The built-in tools as a session facet: each :class:`ToolSpec` becomes a pico3 tool.

The app's tools (:func:`~coding_agent.worker.tools.builtin_tools`) know nothing about the
harness: they take ``(args, ToolContext)`` and return a :class:`pico3.ToolResult` (the one result
type of every tool). This module is the adapter in between. :func:`tool_declaration` wraps one spec as a
:class:`pico3.tools.ToolDeclaration` whose ``execute(args, api, ctx)`` runs the spec in the
session's project folder with the harness's context (so an abort kills a ``bash`` process tree)
and hands ``content``, ``details`` and ``is_error`` back unchanged.

Read-only tools are declared ``replay="safe"`` (after a crash they simply run again); ``write``,
``edit`` and ``bash`` are ``"unsafe"``, so a call interrupted after it started is reported as
interrupted (it may have had partial effects) rather than repeated. A spec's ``recover``
becomes the declaration's ``interrupted`` callback: ``bash`` records its command's process
session in a memo before the command runs, and the restarted worker kills what is left of it
before the result is written. The built-in tools already truncate their own output to pi's
limits (2000 lines / 50 KB), so the harness's output bounds are set just above those.

Live output: a tool that reports partial results (``bash`` does, with the tail of its output so
far) has the new text streamed into its slot's ``output`` (``ToolApi.stream``), which the
harness flushes to the view a few times a second, so every presentation shows the command's
output while it runs. The final result replaces it.

:func:`tools_facet` registers every declaration through ``pi.harness``'s ``add_registration``,
which re-applies it on every opening of the session (reload, suspend/reopen).

Read before edit: the facet registers the namespace ``coding-agent.files`` with a *rewindable*
``reads`` map (per conversation; a fork or a rewind takes the reads as of that point, which is
what the model's context then holds). Every call gets a :class:`HarnessReadLedger` over it as
its ``ToolContext.reads``: ``read`` records the stamp (size, mtime, SHA-256) of what it showed,
``write``/``edit`` record what they wrote, and refuse an existing file without a matching stamp.
The stamps are committed like everything else, so they survive a worker restart. A commit is
made only when a stamp changes (reading an unchanged file again costs none).

Per-call memory: ``ToolContext.remember``/``recall`` are the call's memos (``ToolApi.memo``,
in the tool task's slot, deleted with it), durable across a restart.

Provider search: with no search backend, ``web_search`` is the tool only a model provider's own
search runs (:mod:`coding_agent.worker.provider_search`). A ``system_instructions`` hook drops it
from the loadout of a conversation whose model's provider does not serve it (the faux provider,
an SDK model without search), so the request, the ``pi.system`` entry and ``/context`` name only
tools the model can use.

Background jobs: every call gets a :class:`~coding_agent.worker.job_control.HarnessJobs` as its
``ToolContext.jobs``, built from the call's ``ToolApi`` and the harness the facet registered on
(``bash`` with ``background: true``, ``job_output``, ``job_kill``; see :mod:`.job_control`).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any, cast

import anyio

from chord import Context, Facet, FacetEnvironment, define_facet
from coding_agent.worker.file_history import FileHistory
from coding_agent.worker.job_control import HarnessJobs
from coding_agent.worker.provider_search import (
    PROVIDER_SEARCH_DESCRIPTION,
    ProviderSearch,
    Searcher,
)
from coding_agent.worker.tools import (
    TODO_NAMESPACE,
    JobControl,
    TodoStore,
    ToolContext,
    ToolSpec,
    WebSettings,
    builtin_tools,
)
from coding_agent.worker.tools.bash import prune_spills
from coding_agent.worker.tools.host import (
    CHECKED_TARGETS_SERVICE,
    EDITOR_FILES_SERVICE,
    EditorFiles,
    FileStamp,
)
from pico3 import (
    MISSING,
    MODEL_CALL_KIND,
    SANDBOX_SERVICE,
    ChildEnvironment,
    Harness,
    HarnessService,
    Models,
    Namespace,
    OutputBounds,
    OutputBuffer,
    Sandbox,
    ToolApi,
    ToolDeclaration,
    ToolResult,
    Transaction,
)

__all__ = [
    "FILES_NAMESPACE",
    "READ_ONLY_TOOLS",
    "TAIL_TOOLS",
    "TOOLS_FACET_ID",
    "HarnessReadLedger",
    "HarnessTodoStore",
    "tool_declaration",
    "tools_facet",
]

_CHECKED_TOOLS = frozenset({"write", "edit", "read", "grep", "find", "ls"})
"""The tools that take the real path the approval checked their ``path`` as
(:data:`~coding_agent.worker.tools.host.CHECKED_TARGETS_SERVICE`) and hold to it."""

TOOLS_FACET_ID = "coding-agent/tools"

FILES_NAMESPACE = "coding-agent.files"
"""The namespace holding each conversation's read stamps (rewindable ``reads``)."""

READ_ONLY_TOOLS = frozenset({"read", "grep", "find", "ls", "job_output", "todo"})
"""Tools without effects outside the conversation: safe to run again after a crash."""

TAIL_TOOLS = frozenset({"bash"})
"""Tools whose output matters most at its end (live output keeps the tail)."""

_HEAD_BOUNDS = OutputBounds(max_bytes=64 * 1024, max_lines=2_100, retain="head")
_TAIL_BOUNDS = OutputBounds(max_bytes=64 * 1024, max_lines=2_100, retain="tail")


def _plain(value: Any) -> Any:
    return value.to_plain() if hasattr(value, "to_plain") else value


class HarnessReadLedger:
    """A conversation's read stamps in the ``coding-agent.files`` namespace (durable).

    Given the tool call's ``api``, a stamp the call puts rides in the commit that stores the
    call's result (:meth:`~pico3.tools.ToolApi.with_result`), not in a commit of its own: it
    says what the call read or wrote, which the result says too (a call that never gets its
    result leaves no stamp, and a later edit asks for a fresh read); the call's own later gets
    see it at once."""

    def __init__(
        self,
        harness: Harness,
        namespace: Namespace,
        conversation_id: int,
        ctx: Context,
        api: ToolApi | None = None,
    ) -> None:
        self._harness = harness
        self._namespace = namespace
        self._conversation_id = conversation_id
        self._ctx = ctx
        self._api = api
        self._pending: dict[str, FileStamp] = {}  # put by this call, written with its result

    async def _commit(self, build: Callable[[Transaction, Context], Any]) -> Any:
        conversation = await self._harness.conversation(self._conversation_id, self._ctx)
        if conversation is None:  # pragma: no cover - the calling task's conversation exists
            raise RuntimeError(f"conversation {self._conversation_id} is not open")
        return await conversation.commit(build, self._ctx)

    async def get(self, key: str) -> FileStamp | None:
        pending = self._pending.get(key)
        if pending is not None:
            return pending
        ns = self._namespace

        def read(tx: Transaction, _ctx: Context) -> Any:
            return _plain(tx.plugins(ns)["reads"].get(key))

        return FileStamp.from_json(await self._commit(read))

    async def put(self, key: str, stamp: FileStamp) -> None:
        api = self._api
        if api is not None and key not in self._pending:  # written once, the newest stamp
            api.with_result(lambda tx: self._write(tx, key, self._pending[key]))
        if api is not None:
            self._pending[key] = stamp
            return
        await self._commit(lambda tx, _ctx: self._write(tx, key, stamp))

    def _write(self, tx: Transaction, key: str, stamp: FileStamp) -> None:
        reads = tx.plugins(self._namespace)["reads"]
        value = stamp.to_json()
        if _plain(reads.get(key)) != value:  # unchanged: nothing written
            reads[key] = value


class HarnessTodoStore:
    """A conversation's todo list in the ``coding-agent.todo`` namespace (rewindable
    ``todos``), written in the commit that stores the ``todo`` call's result
    (:meth:`~pico3.tools.ToolApi.with_result`): durable exactly when the result is."""

    def __init__(self, namespace: Namespace, api: ToolApi) -> None:
        self._namespace = namespace
        self._api = api
        self._latest: list[dict[str, str]] | None = None

    async def put(self, todos: list[dict[str, str]]) -> None:
        if self._latest is None:
            self._api.with_result(self._write)
        self._latest = todos

    def _write(self, tx: Transaction) -> None:
        tx.plugins(self._namespace)["todos"] = list(self._latest or [])


def _todo_view(state: dict[str, Any]) -> dict[str, Any]:
    """The todo namespace's projection into the conversation view."""
    return {"todos": _plain(state.get("todos")) or []}


def tool_declaration(
    spec: ToolSpec,
    cwd: str | os.PathLike[str],
    *,
    spill_dir: str | None = None,
    file_locks: dict[str, Any] | None = None,
    jobs: Callable[[ToolApi], JobControl | None] | None = None,
    reads: Callable[[ToolApi, Context], HarnessReadLedger | None] | None = None,
    history: FileHistory | None = None,
    images: Callable[[ToolApi, Context], Callable[[], Awaitable[bool]] | None] | None = None,
    environment: Callable[[], ChildEnvironment] | None = None,
    sandbox: Callable[[], Sandbox | None] | None = None,
    todos: Callable[[ToolApi], TodoStore | None] | None = None,
    editor: Callable[[], EditorFiles | None] | None = None,
    provider_search: Callable[[ToolApi, Context], Callable[[], Awaitable[Searcher | None]]]
    | None = None,
    checked: Callable[[ToolApi], str | None] | None = None,
) -> ToolDeclaration:
    """``spec`` as a pico3 tool running in ``cwd`` (bash spills long output to ``spill_dir``;
    ``jobs`` gives each call its background-job control, ``reads`` its read ledger; ``history``
    records the pre-image of every file ``write`` and ``edit`` change, for ``/rewind``;
    ``environment`` gives the :class:`~pico3.ChildEnvironment` its processes start in;
    ``checked`` the real path the approval checked the call's target as)."""
    locks: dict[str, Any] = file_locks if file_locks is not None else {}
    folder = os.fspath(cwd)

    def context_for(api: ToolApi, ctx: Context) -> ToolContext:
        async def remember(name: str, value: Any) -> None:
            await api.memo(name, value, ctx)

        async def recall(name: str) -> Any:
            value = await api.memo(name, ctx)
            return None if value is MISSING else value

        return ToolContext(
            cwd=folder,
            ctx=ctx,
            temp_dir=spill_dir,
            file_locks=locks,
            jobs=jobs(api) if jobs is not None else None,
            reads=reads(api, ctx) if reads is not None else None,
            remember=remember,
            recall=recall,
            before_write=_recorder(history, api, spec.name, ctx) if history is not None else None,
            accepts_images=images(api, ctx) if images is not None else None,
            environment=environment() if environment is not None else ChildEnvironment.default(),
            sandbox=sandbox() if sandbox is not None else None,
            todos=todos(api) if todos is not None else None,
            editor=editor() if editor is not None else None,
            provider_search=provider_search(api, ctx) if provider_search is not None else None,
            checked_target=checked(api) if checked is not None else None,
        )

    async def execute(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        context = context_for(api, ctx)
        shown = [""]

        def on_update(partial: ToolResult) -> None:
            # A partial result is the whole live tail so far; stream only what is new. When the
            # tail window moved (long output), start the live buffer over from the new tail.
            text = partial.plain_text
            if text.startswith(shown[0]):
                delta = text[len(shown[0]) :]
            else:
                api.buffer = OutputBuffer(api.buffer.bounds)
                delta = text
            shown[0] = text
            if delta:
                api.stream(delta)

        before = None  # bash (foreground): the project's files before, to see what it changed
        if history is not None and spec.name == "bash" and not args.get("background"):
            before = await anyio.to_thread.run_sync(history.snapshot, folder)
        result = await spec.execute(args, context, on_update=on_update)
        if history is not None and before is not None:
            await _record_bash(history, api, folder, before, ctx)
        return ToolResult(
            content=list(result.content or ()),
            is_error=result.is_error,
            details=dict(result.details) if result.details else None,
        )

    interrupted: Callable[[dict[str, Any], ToolApi, Context], Awaitable[ToolResult]] | None = None
    if spec.recover is not None:
        recover = spec.recover

        async def report(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
            result = await recover(args, context_for(api, ctx))
            return ToolResult(
                content=list(result.content or ()),
                is_error=True,
                details=dict(result.details) if result.details else None,
            )

        interrupted = report

    return ToolDeclaration(
        name=spec.name,
        description=spec.description,
        parameters=spec.parameters,
        execute=execute,
        interrupted=interrupted,
        replay="safe" if spec.name in READ_ONLY_TOOLS else "unsafe",
        output=_TAIL_BOUNDS if spec.name in TAIL_TOOLS else _HEAD_BOUNDS,
    )


async def _anchor(api: ToolApi, ctx: Context) -> int:
    """The assistant entry whose tool call this is (the task id when it cannot be read)."""
    task = await api.get_task(api.task_id, ctx)
    source: Any = task.input if task is not None else None
    anchor = source.get("assistant") if isinstance(source, dict) else None
    return anchor if type(anchor) is int else api.task_id


async def _record_bash(
    history: FileHistory, api: ToolApi, folder: str, before: Any, ctx: Context
) -> None:
    """Journal what a ``bash`` command changed (the project snapshot after vs before)."""
    after = await anyio.to_thread.run_sync(lambda: history.snapshot(folder, keep=False))
    if after is None:
        return
    at = await _anchor(api, ctx)
    await anyio.to_thread.run_sync(
        lambda: history.record_changes(before, after, conversation=api.conversation_id, anchor=at)
    )


def _recorder(
    history: FileHistory, api: ToolApi, tool: str, ctx: Context
) -> Callable[[Path, bytes], Awaitable[None]]:
    """The ``before_write`` of one call: journal the file's pre-image (durably, in a thread),
    anchored at the assistant entry that made the call."""

    async def before_write(path: Path, data: bytes) -> None:
        at = await _anchor(api, ctx)
        await anyio.to_thread.run_sync(
            lambda: history.record(
                path, data, conversation=api.conversation_id, anchor=at, tool=tool
            )
        )

    return before_write


def tools_facet(
    cwd: str | os.PathLike[str],
    *,
    specs: Sequence[ToolSpec] | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
    history: FileHistory | None = None,
    models: Models | None = None,
    environment: ChildEnvironment | None = None,
    web: WebSettings | None = None,
    env: Mapping[str, str] | None = None,
    left_out: frozenset[str] = frozenset(),
) -> Facet:
    """A session facet registering ``specs`` (default: every built-in tool) on the harness;
    with ``history``, ``write`` and ``edit`` journal each file's pre-image there first.
    ``models`` resolves the conversation's model, so ``read`` knows whether images may be
    returned to it (without it, they are). The processes the tools start get ``environment``
    (default: the harness service ``child_environment``, else
    :meth:`~pico3.ChildEnvironment.default`). ``web`` configures ``web_fetch`` and
    ``web_search`` (whose key is read from ``env``). ``left_out``: the tools (any facet's,
    by name) no conversation is offered this run (Claude Code's ``--tools``: the same
    ``system_instructions`` hook leaves them out of every loadout)."""
    chosen = list(builtin_tools(web, env) if specs is None else specs)
    spill = os.fspath(spill_dir) if spill_dir is not None else None
    if spill is not None:
        Path(spill).mkdir(mode=0o700, parents=True, exist_ok=True)
        prune_spills(spill)  # spill files older than the retention period go
    locks: dict[str, Any] = {}  # one lock table for the session: writes to a file serialise
    opened: list[Harness] = []  # the harness the tools are registered on (for job control)
    namespaces: list[Namespace] = []  # its coding-agent.files namespace
    todo_namespaces: list[Namespace] = []  # its coding-agent.todo namespace

    def todos(api: ToolApi) -> TodoStore | None:
        return HarnessTodoStore(todo_namespaces[-1], api) if todo_namespaces else None

    def jobs(api: ToolApi) -> JobControl | None:
        return HarnessJobs(api, opened[-1]) if opened else None

    def reads(api: ToolApi, ctx: Context) -> HarnessReadLedger | None:
        if not opened or not namespaces:
            return None
        return HarnessReadLedger(opened[-1], namespaces[-1], api.conversation_id, ctx, api)

    def child_environment() -> ChildEnvironment:
        if environment is not None:
            return environment
        if opened:
            return ChildEnvironment.of(opened[-1].scheduler.services)
        return ChildEnvironment.default()

    def session_sandbox() -> Sandbox | None:
        found = opened[-1].scheduler.services.get(SANDBOX_SERVICE) if opened else None
        return found if isinstance(found, Sandbox) else None

    def session_editor() -> EditorFiles | None:
        # an editor's buffers, when a client brought them (coding-agent acp)
        found = opened[-1].scheduler.services.get(EDITOR_FILES_SERVICE) if opened else None
        return cast("EditorFiles", found) if found is not None else None

    def checked(api: ToolApi) -> str | None:
        # the real path the approval checked this call's target as (taken: used once)
        found = opened[-1].scheduler.services.get(CHECKED_TARGETS_SERVICE) if opened else None
        if not isinstance(found, MutableMapping):
            return None
        targets = cast("MutableMapping[str, Any]", found)
        value = targets.pop(f"{api.conversation_id}:{api.call_id}", None)
        return value if isinstance(value, str) else None

    def images(api: ToolApi, ctx: Context) -> Callable[[], Awaitable[bool]] | None:
        if models is None or not opened:
            return None
        harness, known = opened[-1], models

        async def accepts() -> bool:
            conversation = await harness.conversation(api.conversation_id, ctx)
            config = await conversation.config(ctx) if conversation is not None else {}
            resolved = known.resolve(config.get("model"))
            return resolved is None or resolved.info.supports_images

        return accepts

    def searcher(api: ToolApi, ctx: Context) -> Callable[[], Awaitable[Searcher | None]]:
        async def find() -> Searcher | None:
            # the conversation's current model, if its provider searches as a separate request
            if models is None or not opened:
                return None
            conversation = await opened[-1].conversation(api.conversation_id, ctx)
            config = await conversation.config(ctx) if conversation is not None else {}
            resolved = models.resolve(config.get("model"))
            if resolved is None:
                return None
            provider, info = resolved.provider, resolved.info
            if not isinstance(provider, ProviderSearch) or not provider.serves_search(info):
                return None
            return lambda query: provider.search_web(query, info)

        return find

    provider_only = [s.name for s in chosen if s.description == PROVIDER_SEARCH_DESCRIPTION]

    def unserved(payload: dict[str, Any]) -> bool:
        # the provider-only web_search leaves the loadout of a model whose provider cannot run
        # it (the faux one, most SDK models), so /context lists only what the model can use
        if models is None or not any(name in payload["tools"] for name in provider_only):
            return False
        resolved = models.resolve(payload["config"].get("model"))
        if resolved is None:
            return False
        provider, info = resolved.provider, resolved.info
        return not (isinstance(provider, ProviderSearch) and provider.serves_search(info))

    def loadout(payload: dict[str, Any], api: Any, ctx: Context) -> Any:
        # one hook for both (pico3 chains the overrides: a later hook starts from this one's)
        del api, ctx
        tools = payload["tools"]
        dropped = left_out | (frozenset(provider_only) if unserved(payload) else frozenset())
        if not dropped.intersection(tools):
            return None
        return {"tools": [name for name in tools if name not in dropped]}

    declarations = [
        tool_declaration(
            spec,
            cwd,
            spill_dir=spill,
            file_locks=locks,
            jobs=jobs,
            reads=reads,
            history=history,
            images=images,
            environment=child_environment,
            sandbox=session_sandbox,
            todos=todos,
            editor=session_editor,
            provider_search=searcher,
            checked=checked if spec.name in _CHECKED_TOOLS else None,
        )
        for spec in chosen
    ]

    def install(harness: Harness) -> Callable[[], None]:
        namespace = harness.namespace(FILES_NAMESPACE, {"rewindable": {"reads": {}}})
        todo = harness.namespace(TODO_NAMESPACE, {"rewindable": {"todos": []}}, view=_todo_view)
        opened.append(harness)
        namespaces.append(namespace)
        todo_namespaces.append(todo)

        def forget() -> None:
            opened.remove(harness)
            namespaces.remove(namespace)
            todo_namespaces.remove(todo)
            namespace.unregister()
            todo.unregister()

        removers: list[Callable[[], None]] = [forget]
        try:
            for declaration in declarations:
                removers.append(harness.register_tool(declaration))
            if provider_only or left_out:
                hooks = {"system_instructions": loadout}
                removers.append(harness.hooks(namespace, MODEL_CALL_KIND, hooks))
        except BaseException:
            for remove in reversed(removers):
                remove()
            raise

        def uninstall() -> None:
            for remove in reversed(removers):
                remove()

        return uninstall

    def setup(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        env.on_activate(lambda: env.own(harness.add_registration(install)))

    return define_facet(TOOLS_FACET_ID, setup)
