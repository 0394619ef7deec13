"""What a built-in tool is: a name, a description, a JSON Schema and an async ``execute``.

A tool is plain data plus one coroutine, independent of any harness:

* :class:`ToolSpec` names the tool, describes it for the model and declares its arguments as a
  JSON Schema dict (docs/design/decisions.md#d8-g16). :func:`validate_args` checks a call against
  that schema with pico3's :class:`~pico3.ArgumentSchema`, the validator the harness itself uses,
  and raises :class:`ToolArgumentError` with the same message (every bad field, at its path).
* :class:`ToolContext` is everything a tool needs from its caller: the working directory, the
  chord :class:`~chord.context.Context` that can abort it, and a few knobs tests turn
  (search backend, temp folder, per-file locks).
* A tool returns pico3's :class:`~pico3.ToolResult`, the one result type of every tool, and
  follows pi's split: ``content`` is what the model sees (a list of ``{"type": "text", "text":
  ...}`` blocks; :attr:`~pico3.ToolResult.plain_text` joins their text), ``details`` is
  structured data for the UI and for state (diffs, truncation facts, spill-file paths; always a
  dict here), and ``is_error`` marks a failed call.

Handlers signal an expected failure by raising :class:`ToolError`; :meth:`ToolSpec.execute`
turns it (and bad arguments) into a result with ``is_error=True`` so the agent loop continues.
Anything else is a bug and propagates.

Every result is made storable (:func:`storable`): a file name that is not UTF-8 reaches Python
with lone surrogates (``surrogateescape``), which cannot be stored or sent; they become ``\\xNN``
escapes of the original bytes (other lone surrogates become U+FFFD).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from chord import BACKGROUND, Context
from coding_agent.worker.provider_search import Searcher
from pico3 import ArgumentSchema, ChildEnvironment, InvalidArguments, Sandbox, ToolResult

from .host import EditorFiles, JobControl, ReadLedger, TodoStore

__all__ = [
    "OnUpdate",
    "SearchBackend",
    "ToolArgumentError",
    "ToolContext",
    "ToolError",
    "ToolHandler",
    "ToolResult",
    "ToolSpec",
    "abortable",
    "resolve_path",
    "storable",
    "text_result",
    "validate_args",
]

SearchBackend = Literal["auto", "ripgrep", "python"]
"""How grep and find search: ``ripgrep`` when ``rg`` is found (``auto``), or always/never."""


class ToolError(Exception):
    """An expected tool failure; its message is what the model reads, ``details`` goes along."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}


class ToolArgumentError(ToolError):
    """Arguments a tool refuses: those its schema rejects, and the checks a schema cannot express
    (``edit``'s two argument forms). ``problems`` are ``path: reason`` lines (``arguments.path:
    is required``); the message is :class:`pico3.InvalidArguments`'s, so the model reads the same
    text whichever side refused the call."""

    def __init__(self, tool: str, problems: list[str]) -> None:
        super().__init__(str(InvalidArguments(tool, problems)), {"problems": list(problems)})
        self.tool = tool
        self.problems = problems


def text_result(
    text: str, details: dict[str, Any] | None = None, *, is_error: bool = False
) -> ToolResult:
    """A result holding a single text block (``details`` is always a dict for the app's tools)."""
    return ToolResult(
        content=[{"type": "text", "text": text}], details=details or {}, is_error=is_error
    )


OnUpdate = Callable[[ToolResult], None]
"""Receives partial results while a tool runs (bash streams its output tail this way)."""


@dataclass
class ToolContext:
    """What a tool receives from its caller.

    ``cwd`` anchors relative paths. ``ctx`` aborts the call when cancelled (bash kills its process
    tree and reports "Command aborted"). ``search_backend`` picks ripgrep or the pure-Python
    search. ``temp_dir`` is where bash spills long output. ``file_locks`` serialises writes and
    edits to one file; share one ToolContext (or one dict) between concurrent calls of a session.
    ``jobs`` starts and reads background jobs (``bash`` with ``background: true``, ``job_output``,
    ``job_kill``); without one those calls fail with a clear error. ``reads`` is the
    conversation's :class:`~.files.ReadLedger`: with one, ``read`` records what it showed and
    ``edit``/``write`` of an existing file refuse unless it was read (or written by the agent)
    and has not changed on disk since; without one nothing is checked. ``remember`` stores a
    value durably for this call (``bash`` records its process group there before the command
    runs) and ``recall`` reads it back (``None`` when absent), after a restart too.
    ``before_write`` is called by ``write`` and ``edit`` with the resolved path and the bytes
    about to be written, inside the file's lock, right before the file changes (the session
    records the file's pre-image there, for ``/rewind``); when it fails, the file is left alone
    and the call fails. ``environment`` is what the processes a tool starts (``bash``, a
    background job, ripgrep) get for an environment: this process's without the session's
    secrets (default :meth:`~pico3.ChildEnvironment.default`).
    ``sandbox`` is the :class:`~pico3.Sandbox` those commands run in, when sandboxing is on.
    """

    cwd: str | os.PathLike[str]
    ctx: Context = BACKGROUND
    search_backend: SearchBackend = "auto"
    temp_dir: str | None = None
    file_locks: dict[str, anyio.Lock] = field(default_factory=dict)
    jobs: JobControl | None = None
    reads: ReadLedger | None = None
    remember: Callable[[str, Any], Awaitable[None]] | None = None
    recall: Callable[[str], Awaitable[Any]] | None = None
    accepts_images: Callable[[], Awaitable[bool]] | None = None
    """Whether the conversation's current model takes images (``read`` of an image file is
    refused when it says no); ``None``: not known, images are returned."""
    before_write: Callable[[Path, bytes], Awaitable[None]] | None = None
    before_read: Callable[[Path], Awaitable[None]] | None = None
    """Called by ``read`` (and ``ls``, ``grep``, ``find``) with the real path it resolved (and
    compared with :attr:`checked_target`), right before it opens the file (the folder): the
    last point before anything is read (tests swap a folder for a symlink there; the open must
    then fail). When it fails, the call fails and nothing is read."""
    environment: ChildEnvironment = field(default_factory=ChildEnvironment.default)
    sandbox: Sandbox | None = None
    """The sandbox commands run in (``bash``, its background jobs), ``None``: unsandboxed."""
    todos: TodoStore | None = None
    """Where the ``todo`` tool keeps the conversation's list (``None``: the tool fails)."""
    editor: EditorFiles | None = None
    """An editor's buffers (``coding-agent acp``): ``read``, ``write`` and ``edit`` of a text
    file go through them (:class:`~.host.EditorFiles`); ``None``: the disk."""
    checked_target: str | None = None
    """The real path the approval resolved this call's ``path`` to when it decided (symlinks
    followed); ``write`` and ``edit`` fail, writing nothing, and ``read`` fails, reading nothing,
    when the path leads elsewhere by the time they run. ``None``: nothing was checked (an edit in
    ``auto`` mode, no approval)."""
    provider_search: Callable[[], Awaitable[Searcher | None]] | None = None
    """The conversation's model's own web search, when its provider runs one as a separate
    request (Gemini's grounding: :mod:`coding_agent.worker.provider_search`) and it is not
    turned off; ``web_search`` uses it. ``None`` (or a ``None`` answer): there is none."""

    def child_env(self) -> dict[str, str]:
        """The whole environment of a process this call starts (see :attr:`environment`)."""
        return self.environment.environ()

    async def about_to_write(self, path: Path, data: bytes, shown: str) -> None:
        """Run :attr:`before_write` (if any) for ``path``; a failure becomes a :class:`ToolError`."""
        if self.before_write is None:
            return
        try:
            await self.before_write(path, data)
        except OSError as error:
            raise ToolError(
                f"Cannot write {shown}: recording its previous content failed: "
                f"{error.strerror or error}"
            ) from None

    async def about_to_read(self, path: Path, shown: str) -> None:
        """Run :attr:`before_read` (if any) for ``path``; a failure becomes a :class:`ToolError`."""
        if self.before_read is None:
            return
        try:
            await self.before_read(path)
        except OSError as error:
            raise ToolError(f"Cannot read {shown}: {error.strerror or error}") from None

    def lock_for(self, path: Path) -> anyio.Lock:
        """The lock that serialises mutations of ``path`` (one per resolved path)."""
        try:
            key = os.path.realpath(path)
        except OSError:  # a link swapped while it was read: the path as given (it is real)
            key = os.fspath(path)
        lock = self.file_locks.get(key)
        if lock is None:
            lock = self.file_locks[key] = anyio.Lock()
        return lock

    @property
    def spill_dir(self) -> str:
        return self.temp_dir if self.temp_dir is not None else tempfile.gettempdir()


ToolHandler = Callable[[dict[str, Any], ToolContext, OnUpdate | None], Awaitable[ToolResult]]
"""A tool body: checked arguments, the caller's context, an optional progress callback."""


Recover = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]
"""Reports a call a worker crash interrupted after it started (see :attr:`ToolSpec.recover`)."""


@dataclass(frozen=True)
class ToolSpec:
    """A built-in tool: the model-facing declaration and the coroutine that runs it.

    ``recover`` (optional) runs in a restarted worker for a call that was interrupted after it
    started: with the call's arguments and a context whose ``recall`` reads what the
    interrupted run ``remember``-ed; it cleans up (``bash`` kills the command's processes) and
    returns the result the model reads (an error)."""

    name: str
    description: str
    parameters: dict[str, Any]
    handler: ToolHandler
    recover: Recover | None = None
    _arguments: ArgumentSchema = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_arguments", ArgumentSchema(self.name, self.parameters))

    def check(self, args: Any) -> dict[str, Any]:
        """``args`` when they fit :attr:`parameters`, else :class:`ToolArgumentError`."""
        try:
            self._arguments.validate(args)
        except InvalidArguments as error:
            raise ToolArgumentError(self.name, error.problems) from None
        return args

    async def execute(
        self, args: Any, ctx: ToolContext, *, on_update: OnUpdate | None = None
    ) -> ToolResult:
        """Validate ``args``, run the tool, and turn a :class:`ToolError` into an error result."""
        try:
            checked = validate_args(self, args)
            result = await self.handler(checked, ctx, on_update)
        except ToolError as error:
            result = text_result(error.message, error.details, is_error=True)
        return dataclasses.replace(
            result,
            content=storable(result.content or []),
            details=storable(result.details) if result.details is not None else {},
        )


def storable_text(text: str) -> str:
    """``text`` without lone surrogates: those ``surrogateescape`` made of undecodable bytes
    become ``\\xNN`` escapes of the bytes, any other becomes U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def storable(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with every string made :func:`storable_text`."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(str(k)): storable(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def validate_args(spec: ToolSpec, args: Any) -> dict[str, Any]:
    """Check ``args`` against ``spec.parameters``; return them or raise :class:`ToolArgumentError`
    naming every bad field (``arguments.edits[0].newText: is required``)."""
    return spec.check(args)


def resolve_path(path: str, cwd: str | os.PathLike[str]) -> Path:
    """Resolve a model-supplied path: ``~`` expanded, relative to ``cwd``, a leading ``@`` dropped.

    Models copy ``@file`` mentions from the prompt, so ``@src/x.py`` means ``src/x.py``. Nothing
    is refused: approvals are a separate feature.
    """
    if path.startswith("@"):
        path = path[1:]
    expanded = Path(os.path.expanduser(path))
    if not expanded.is_absolute():
        expanded = Path(os.path.expanduser(os.fspath(cwd))) / expanded
    return Path(os.path.normpath(expanded))


@contextmanager
def abortable(ctx: Context, timeout: float | None = None) -> Iterator[anyio.CancelScope]:
    """A cancel scope ended by ``ctx``'s cancellation, its deadline, or ``timeout`` seconds.

    Unlike :func:`chord.context.cancel_scope` it never raises on exit: afterwards the caller asks
    ``ctx.cancelled`` (aborted) or ``scope.cancelled_caught`` (timed out) and reports either.
    """
    deadline = float("inf") if timeout is None else anyio.current_time() + timeout
    scope = anyio.CancelScope(deadline=deadline)
    remove: Callable[[], None] | None = None
    signal = ctx.abort_signal
    if signal is not None:
        remove = signal.add_listener(lambda _reason: scope.cancel())
    if ctx.deadline is not None:
        scope.deadline = min(
            scope.deadline, anyio.current_time() + (ctx.deadline - time.monotonic())
        )
    if ctx.cancelled:
        scope.cancel()
    try:
        with scope:
            yield scope
    finally:
        if remove is not None:
            remove()
