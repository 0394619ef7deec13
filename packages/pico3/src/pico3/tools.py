"""Tools: declarations, the registry, argument validation, and the API a running tool gets.

A tool is a :class:`ToolDeclaration`: a model-facing ``name`` and ``description``, ``parameters``
as a JSON Schema dict (docs/design/decisions.md#d8-g16, checked with :mod:`jsonschema` when the declaration is built), a
``replay`` policy and output bounds, and ``execute(args, api, ctx) -> ToolResult``. Tools are
registered on the harness (:class:`ToolRegistry`, a :class:`~pico3.registry.NamedRegistry`):
names are unique while live, unregistering is exact and idempotent, and every change bumps the
registry revision (docs/design/reload.md#registrations). An invocation keeps the declaration it captured.

Durability (docs/design/harness.md#tools). A tool has no checkpoint of its own; it runs inside ``pi.tool``, whose
``started`` checkpoint is the effect evidence. What it keeps is in its **slot**
(``turn.tools[i]``): streamed ``output``, ``progress``/``details``/``continuedBy``, and
**memos**. :meth:`ToolApi.memo` is ``memo_once`` on that slot, one commit per call, with
presence semantics: ``None`` is a stored value, and a read of an absent memo returns the
:data:`MISSING` sentinel (never ``None``), so "answered ``null``" and "not answered" differ::

    answer = await api.memo("answer", ctx)              # recorded before a crash?
    if answer is MISSING:
        answer = await api.memo("answer", await ask(args, ctx), ctx)   # first writer wins

Memos are keyed ``tool:<name>`` (hooks use ``hook:<namespace>:<name>``, see
:mod:`pico3.hooks`), live in the tool task's slot and are deleted in the tool's terminal commit
(docs/design/decisions.md#d8-g10), so they never leak into a later call. They never appear in the view.

Where the slot lives is ``pi.tool``'s business: a :class:`ToolApi` reaches it only through a
:data:`SlotCommit` — "run this function on the tool's slot inside one commit with the tool task's
authority" — which the turn loop provides. Streaming goes through :class:`OutputBuffer`, a
kernel-owned bounded buffer; :meth:`ToolApi.streaming` flushes it to the slot at most every
``flush_interval`` seconds and once at the end, and never swallows a flush failure.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, final, overload

import anyio
import jsonschema
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from chord.context import Context
from chord.json import JsonError, copy_json
from pico3.kernel.documents import memo_once
from pico3.kernel.errors import Forbidden
from pico3.kernel.tx import Transaction
from pico3.registry import NamedRegistry, Registration, RegistrySnapshot

__all__ = [
    "FREE_SLOT_FIELDS",
    "MISSING",
    "InvalidArguments",
    "Missing",
    "OutputBounds",
    "OutputBuffer",
    "RuntimeTools",
    "SlotCommit",
    "SlotRejected",
    "ToolApi",
    "ToolDeclaration",
    "ToolRegistry",
    "ToolResult",
    "ToolRuntime",
    "memo_key",
    "runtime_slot",
    "slot_memo",
    "split_memo_args",
    "validate_arguments",
]

T = TypeVar("T")

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Tool names every provider accepts (letters, digits, ``_`` and ``-``; at most 64)."""

FREE_SLOT_FIELDS = frozenset({"progress", "details", "continuedBy"})
"""The slot fields a tool may change through :meth:`ToolApi.progress`; the rest (``callId``,
``name``, ``args``, ``status``, ``output``, ``waitingOn``, ``entry``, ``memos``) are protected."""


# -- the memo sentinel ---------------------------------------------------------------------
@final
class Missing:
    """The type of :data:`MISSING`: "no memo stored under this key" (``None`` is a value)."""

    _instance: Missing | None = None

    def __new__(cls) -> Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "MISSING"


MISSING = Missing()
"""Returned by a memo read when nothing is stored under the key."""


# -- declarations --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class OutputBounds:
    """How much of a tool's output is kept: ``max_bytes`` (UTF-8) and ``max_lines``, keeping the
    ``head`` or the ``tail`` (docs/design/turn.md#tool; default 64 KiB / 200 lines / head)."""

    max_bytes: int = 64 * 1024
    max_lines: int = 200
    retain: Literal["head", "tail"] = "head"

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_lines"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"OutputBounds.{name} must be a positive int, got {value!r}")
        if self.retain not in ("head", "tail"):
            raise ValueError(f"OutputBounds.retain must be 'head' or 'tail', got {self.retain!r}")


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What ``execute`` returns (and ``after_tool`` hooks may replace).

    ``content`` is a list of content blocks (``{"type": "text", "text": ...}`` or images); leave
    it ``None`` when the tool streamed, and the stream becomes the content. ``details`` is JSON
    for renderers, ``diagnostics`` a list of ``{"severity", "message", "code"?}``, ``control``
    ``{"terminate"?, "handoff"?, "addTools"?}`` for the post-tools step.
    """

    content: list[dict[str, Any]] | None = None
    is_error: bool = False
    details: Any = None
    diagnostics: list[dict[str, Any]] | None = None
    control: dict[str, Any] | None = None

    @classmethod
    def text(cls, text: str, *, is_error: bool = False, details: Any = None) -> ToolResult:
        """A one-text-block result."""
        return cls(content=[{"type": "text", "text": text}], is_error=is_error, details=details)


Execute = Callable[[dict[str, Any], "ToolApi", Context], Awaitable[ToolResult]]


@dataclass(frozen=True, slots=True)
class ToolDeclaration:
    """A tool. ``parameters`` is a JSON Schema for the arguments object; it is checked (and
    deep-copied) when the declaration is built, so a bad schema fails at definition time.

    ``interrupted`` (optional, same signature as ``execute``) reports a call of an ``"unsafe"``
    tool that a crash interrupted after it started: it runs once, in the restarted process,
    with the call's arguments and a :class:`ToolApi` whose memos are the ones the interrupted
    run stored, so it can clean up what that run left behind (``bash`` kills the command's
    processes) and say what is known. Its result closes the call as an error."""

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Execute
    replay: Literal["safe", "unsafe"] = "unsafe"
    output: OutputBounds = field(default_factory=OutputBounds)
    interrupted: Execute | None = None
    _validator: Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not TOOL_NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {TOOL_NAME.pattern}")
        if not isinstance(self.description, str):
            raise TypeError(f"tool {self.name!r}: description must be a str")
        if self.replay not in ("safe", "unsafe"):
            raise ValueError(f"tool {self.name!r}: replay must be 'safe' or 'unsafe'")
        if not isinstance(self.output, OutputBounds):
            raise TypeError(f"tool {self.name!r}: output must be an OutputBounds")
        if not callable(self.execute):
            raise TypeError(f"tool {self.name!r}: execute must be callable")
        if self.interrupted is not None and not callable(self.interrupted):
            raise TypeError(f"tool {self.name!r}: interrupted must be callable or None")
        try:
            schema = copy_json(self.parameters, ("parameters",))
        except JsonError as exc:
            raise ValueError(f"tool {self.name!r}: {exc}") from None
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise ValueError(
                f'tool {self.name!r}: parameters must be a JSON Schema with "type": "object"'
            )
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except SchemaError as exc:
            where = _path("parameters", exc.path)
            raise ValueError(
                f"tool {self.name!r}: invalid JSON Schema at {where}: {exc.message}"
            ) from None
        _check_references(self.name, schema)
        object.__setattr__(self, "parameters", schema)
        object.__setattr__(self, "_validator", cls(schema))

    def validate(self, arguments: Any) -> None:
        """Raise :class:`InvalidArguments` naming every bad field of ``arguments``."""
        validate_arguments(self, arguments)

    def wire(self) -> dict[str, Any]:
        """The model-facing shape ``{name, description, parameters}`` (a fresh copy)."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": copy_json(self.parameters),
        }


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
"""Keywords whose values are instance data, not schemas (a ``$ref`` key there is data)."""


_DESCENDING = frozenset(
    {
        "properties",
        "patternProperties",
        "additionalProperties",
        "unevaluatedProperties",
        "propertyNames",
        "items",
        "prefixItems",
        "additionalItems",
        "unevaluatedItems",
        "contains",
    }
)
"""Keywords whose subschemas apply to a *part* of the instance (recursion through them ends)."""


def _check_references(tool: str, schema: dict[str, Any]) -> None:
    """Refuse a ``$ref`` that validation could not follow, when the tool is declared.

    ``check_schema`` accepts any string as a ``$ref``; resolution happens only when a call
    reaches it, where it would raise instead of naming bad arguments. Tool parameters may only
    use local references: ``#``, a JSON pointer ``#/...`` into the schema, or ``#name`` for a
    declared ``$anchor``; and a reference to an enclosing schema must pass through a keyword
    that descends into the arguments (``{"$ref": "#"}`` at the root would recurse forever).
    """
    refs: list[tuple[str, list[str]]] = []
    anchors: set[str] = set()

    def walk(node: Any, segments: list[str]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():  # pyright: ignore[reportUnknownVariableType]
                if key == "$ref" and isinstance(value, str):
                    refs.append((value, segments))
                elif key == "$anchor" and isinstance(value, str):
                    anchors.add(value)
                elif key not in _DATA_KEYWORDS:
                    walk(value, [*segments, str(key)])  # pyright: ignore[reportUnknownArgumentType]
        elif isinstance(node, list):
            for index, value in enumerate(node):  # pyright: ignore[reportUnknownVariableType]
                walk(value, [*segments, str(index)])

    walk(schema, [])
    for ref, segments in refs:
        where = "".join(f"[{s}]" if s.isdigit() else f".{s}" for s in ["parameters", *segments])
        where = where[1:]
        if ref.startswith("#") and ref[1:] in anchors and not ref.startswith("#/"):
            continue
        target = _pointer(schema, ref)
        if target is None:
            raise ValueError(
                f"tool {tool!r}: invalid JSON Schema at {where}.$ref: reference {ref!r} does not "
                "resolve (only local '#/...' pointers and declared anchors are allowed)"
            )
        if segments[: len(target)] == target and not _DESCENDING & set(segments[len(target) :]):
            raise ValueError(
                f"tool {tool!r}: invalid JSON Schema at {where}.$ref: reference {ref!r} refers "
                "to an enclosing schema without descending into the arguments (endless recursion)"
            )


def _pointer(schema: Any, ref: str) -> list[str] | None:
    """The segments of a local ``#``/``#/...`` reference if it resolves in ``schema``."""
    from urllib.parse import unquote

    if ref == "#":
        return []
    if not ref.startswith("#/"):
        return None
    segments = [unquote(raw).replace("~1", "/").replace("~0", "~") for raw in ref[2:].split("/")]
    if not _pointer_exists(schema, segments):
        return None
    return segments


def _pointer_exists(schema: Any, segments: list[str]) -> bool:
    node = schema
    for part in segments:
        if isinstance(node, dict) and part in node:
            node = node[part]  # pyright: ignore[reportUnknownVariableType]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):  # pyright: ignore[reportUnknownArgumentType]
            node = node[int(part)]  # pyright: ignore[reportUnknownVariableType]
        else:
            return False
    return True


class InvalidArguments(ValueError):
    """Tool arguments do not satisfy the tool's schema. ``problems`` name each field."""

    def __init__(self, tool: str, problems: list[str]) -> None:
        self.tool = tool
        self.problems = problems
        super().__init__(f"invalid arguments for tool {tool!r}: {'; '.join(problems)}")


def _path(root: str, parts: Any) -> str:
    out = root
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def validate_arguments(declaration: ToolDeclaration, arguments: Any) -> None:
    """Validate ``arguments`` against the declaration's schema.

    Every problem names its field: ``arguments.path.to.field: <reason>``; a missing required
    property is reported at its own path (``arguments.question: is required``).
    """
    problems: list[str] = []
    seen: set[str] = set()
    validator = declaration._validator  # pyright: ignore[reportPrivateUsage]
    errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.path])
    for error in errors:
        if error.validator == "required" and isinstance(error.instance, dict):
            required = error.validator_value if isinstance(error.validator_value, list) else []
            for name in required:
                if name not in error.instance:
                    line = f"{_path('arguments', [*error.path, name])}: is required"
                    if line not in seen:
                        seen.add(line)
                        problems.append(line)
            continue
        line = f"{_path('arguments', error.path)}: {error.message}"
        if line not in seen:
            seen.add(line)
            problems.append(line)
    if problems:
        raise InvalidArguments(declaration.name, problems)


def _check_declaration(declaration: ToolDeclaration) -> str:
    if not isinstance(declaration, ToolDeclaration):
        raise TypeError(f"expected a ToolDeclaration, got {type(declaration).__name__}")
    return declaration.name


class ToolRegistry(NamedRegistry[ToolDeclaration]):
    """The harness's tools: unique live names, exact idempotent removal, a revision."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("tool", _check_declaration)

    def register(self, item: ToolDeclaration) -> Registration:
        """Register a tool; returns its idempotent remover."""
        return super().register(item)

    def snapshot(self) -> RegistrySnapshot[ToolDeclaration]:
        """The tools at the current revision (preparation compares revisions)."""
        return super().snapshot()


# -- slots and memos -----------------------------------------------------------------------
class SlotCommit(Protocol):
    """Run ``fn(tx, slot)`` on a tool task's slot inside one commit, with that task's authority,
    and return its result. ``pi.tool`` provides it (over the task runtime's ``commit``)."""

    def __call__(
        self, fn: Callable[[Transaction, MutableMapping[str, Any]], Any], ctx: Context, /
    ) -> Awaitable[Any]: ...


def memo_key(*parts: str) -> str:
    """``tool:<name>`` / ``hook:<namespace>:<name>``; each part a non-empty str."""
    for part in parts:
        if not isinstance(part, str) or not part:
            raise ValueError(f"memo name parts must be non-empty str, got {part!r}")
    return ":".join(parts)


def slot_memo(slot: MutableMapping[str, Any], key: str, candidate: Any = MISSING) -> Any:
    """Inside a commit: read ``slot.memos[key]`` (:data:`MISSING` when absent), or with a
    ``candidate`` apply ``memo_once`` (first writer wins) and return the durable winner."""
    if candidate is not MISSING:
        try:
            candidate = copy_json(candidate, ("memos", key))
        except JsonError as exc:
            raise ValueError(f"memo {key!r}: {exc}") from None
        return memo_once(slot, key, candidate)
    memos = slot.get("memos")
    if memos is None or key not in memos:
        return MISSING
    value = memos[key]
    return value.to_plain() if hasattr(value, "to_plain") else copy_json(value)


def split_memo_args(args: tuple[Any, ...]) -> tuple[Any, Context]:
    """``(ctx,)`` -> a read (:data:`MISSING`, ctx); ``(candidate, ctx)`` -> a write. This is how
    the ``memo(name, ctx)`` / ``memo(name, candidate, ctx)`` overloads tell themselves apart
    (counting arguments, because ``None`` is a valid candidate)."""
    if len(args) == 1:
        return MISSING, args[0]
    if len(args) == 2:
        return args[0], args[1]
    raise TypeError("memo takes (name, ctx) to read or (name, candidate, ctx) to write")


class SlotRejected(ValueError):
    """A tool tried to change a protected slot field, or gave a free field a bad value."""


# -- the stream buffer ---------------------------------------------------------------------
class OutputBuffer:
    """A bounded buffer of streamed output (bytes and lines, head or tail retention).

    ``push`` never grows the buffer past its bounds: with ``head`` retention everything after
    the limit is dropped; with ``tail`` the oldest output is. A single chunk larger than the
    bounds is sliced on push. Dropped output is counted (``dropped_bytes``; ``dropped_lines`` =
    newlines in the dropped bytes). :meth:`text` decodes UTF-8 without splitting a character.
    """

    __slots__ = ("_data", "_lines", "bounds", "dropped_bytes", "dropped_lines", "pushed")

    def __init__(self, bounds: OutputBounds | None = None) -> None:
        self.bounds = bounds or OutputBounds()
        self._data = bytearray()
        self._lines = 0  # newlines currently held
        self.dropped_bytes = 0
        self.dropped_lines = 0
        self.pushed = False

    def push(self, chunk: str | bytes) -> None:
        """Append a chunk (``str`` is UTF-8 encoded)."""
        if isinstance(chunk, str):
            data = chunk.encode("utf-8")
        elif isinstance(chunk, (bytes, bytearray, memoryview)):
            data = bytes(chunk)
        else:
            raise TypeError(f"stream chunks are str or bytes, got {type(chunk).__name__}")
        self.pushed = True
        if self.bounds.retain == "head":
            self._push_head(data)
        else:
            self._push_tail(data)

    def _drop(self, data: bytes | bytearray) -> None:
        self.dropped_bytes += len(data)
        self.dropped_lines += data.count(b"\n")

    def _push_head(self, data: bytes) -> None:
        room = self.bounds.max_bytes - len(self._data)
        keep = data[: max(room, 0)]
        # Line bound: keep at most max_lines lines (a line ends at its newline).
        allowed = self.bounds.max_lines - self._lines
        cut = len(keep)
        if keep.count(b"\n") >= allowed:
            position = -1
            for _ in range(max(allowed, 0)):
                position = keep.index(b"\n", position + 1)
            cut = position + 1 if allowed > 0 else 0
        keep = keep[:cut]
        self._data += keep
        self._lines += keep.count(b"\n")
        self._drop(data[len(keep) :])

    def _push_tail(self, data: bytes) -> None:
        self._data += data
        self._lines += data.count(b"\n")
        excess = len(self._data) - self.bounds.max_bytes
        if excess > 0:
            self._drop(self._data[:excess])
            self._lines -= self._data[:excess].count(b"\n")
            del self._data[:excess]
        # Keep the last max_lines lines: drop through the newline that ends the oldest one.
        while self._lines > self.bounds.max_lines or (
            self._lines == self.bounds.max_lines and not self._data.endswith(b"\n")
        ):
            end = self._data.index(b"\n") + 1
            self._drop(self._data[:end])
            del self._data[:end]
            self._lines -= 1

    @property
    def truncated(self) -> bool:
        """True when anything was dropped."""
        return self.dropped_bytes > 0

    def text(self) -> str:
        """The retained output as text (never a split UTF-8 sequence at either edge)."""
        data = bytes(self._data)
        if self.bounds.retain == "tail":
            start = 0
            while start < len(data) and start < 3 and (data[start] & 0xC0) == 0x80:
                start += 1
            data = data[start:]
        return data.decode("utf-8", errors="ignore")


# -- the API a running tool gets -------------------------------------------------------------
class ToolRuntime(Protocol):
    """What :class:`ToolApi` needs from the tool task's runtime for task and subagent work."""

    async def create_task(
        self, kind: Any, input: Any, options: Mapping[str, Any], ctx: Context, /
    ) -> Any: ...
    async def get_task(self, task_id: int, ctx: Context, /) -> Any: ...
    async def wait_for_task(self, task_id: int, ctx: Context, /) -> Any: ...
    async def task_slot(self, task_id: int, ctx: Context, /) -> Any: ...
    async def create_owned_conversation(self, spec: Any, ctx: Context, /) -> Any: ...


class ToolApi:
    """What ``execute(args, api, ctx)`` receives (docs/design/harness.md#tool-api). Tools never get commit,
    entry append, write or admission helpers; everything durable goes through the slot."""

    def __init__(
        self,
        *,
        task_id: int,
        conversation_id: int,
        call_id: str,
        slot: SlotCommit,
        runtime: ToolRuntime | None = None,
        bounds: OutputBounds | None = None,
        flush_interval: float = 0.1,
    ) -> None:
        self.task_id = task_id
        self.conversation_id = conversation_id
        self.call_id = call_id
        self._slot = slot
        self._runtime = runtime
        self.buffer = OutputBuffer(bounds)
        self._flush_interval = flush_interval
        self._dirty = anyio.Event()
        self._flushed_text: str | None = None
        self._flush_error: BaseException | None = None

    # streaming ---------------------------------------------------------------------------
    def stream(self, chunk: str | bytes) -> None:
        """Push output (synchronous, bounded). It is flushed to ``slot.output`` by
        :meth:`streaming`, and becomes the result content if ``execute`` returns none."""
        self.buffer.push(chunk)
        self._dirty.set()

    @property
    def streamed(self) -> bool:
        """True when the tool pushed anything through :meth:`stream`."""
        return self.buffer.pushed

    async def flush(self, ctx: Context) -> None:
        """Write the retained output to ``slot.output`` now (skipped when unchanged)."""
        text = self.buffer.text()
        if text == self._flushed_text:
            return

        def build(_tx: Transaction, slot: MutableMapping[str, Any]) -> None:
            slot["output"] = text

        await self._slot(build, ctx)
        self._flushed_text = text

    @asynccontextmanager
    async def streaming(self, ctx: Context) -> AsyncIterator[ToolApi]:
        """Run the body (``execute``) while flushing streamed output at most every
        ``flush_interval`` seconds; flush once more at the end. The first flush failure is
        re-raised when the body finishes (a persistence failure is never hidden)."""
        failure: Exception | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(self._flusher, ctx)
            try:
                yield self
            except Exception as exc:  # re-raised as itself below, not inside an ExceptionGroup
                failure = exc
            finally:
                group.cancel_scope.cancel()
        if failure is not None:
            raise failure
        if self._flush_error is not None:
            raise self._flush_error
        if self.buffer.pushed:
            await self.flush(ctx)

    async def _flusher(self, ctx: Context) -> None:
        while True:
            await self._dirty.wait()
            self._dirty = anyio.Event()
            try:
                await self.flush(ctx)
            except Exception as exc:
                self._flush_error = exc
                return
            if self._flush_interval > 0:
                await anyio.sleep(self._flush_interval)

    # slot fields ---------------------------------------------------------------------------
    async def progress(self, update: Callable[[dict[str, Any]], object], ctx: Context) -> None:
        """Change the free slot fields in one commit. ``update`` gets a plain dict holding the
        present free fields (``progress``: str, ``details``: JSON, ``continuedBy``: task id)
        and mutates it; a key it deletes is deleted from the slot. Any other key rejects the
        whole update with :class:`SlotRejected` (identity fields are protected)."""

        def build(_tx: Transaction, slot: MutableMapping[str, Any]) -> None:
            free: dict[str, Any] = {}
            for key in FREE_SLOT_FIELDS:
                if key in slot:
                    value = slot[key]
                    free[key] = value.to_plain() if hasattr(value, "to_plain") else value
            returned = update(free)
            if inspect.iscoroutine(returned):
                returned.close()
                raise TypeError("progress(update): update must be a plain (non-async) function")
            stray = sorted(set(free) - FREE_SLOT_FIELDS)
            if stray:
                raise SlotRejected(
                    f"progress may change only {sorted(FREE_SLOT_FIELDS)}; "
                    f"protected or unknown slot field(s): {stray}"
                )
            _check_free(free)
            for key in sorted(FREE_SLOT_FIELDS):
                if key in free:
                    slot[key] = free[key]
                elif key in slot:
                    del slot[key]

        await self._slot(build, ctx)

    @overload
    async def memo(self, name: str, ctx: Context, /) -> Any: ...
    @overload
    async def memo(self, name: str, candidate: Any, ctx: Context, /) -> Any: ...
    async def memo(self, name: str, *args: Any) -> Any:
        """``memo(name, ctx)`` reads (:data:`MISSING` when absent); ``memo(name, candidate,
        ctx)`` stores ``candidate`` unless a value is already stored and returns the durable
        winner. One commit on this tool's slot, key ``tool:<name>``."""
        candidate, ctx = split_memo_args(args)
        key = memo_key("tool", name)
        return await self._slot(lambda _tx, slot: slot_memo(slot, key, candidate), ctx)

    # tasks and subagents ------------------------------------------------------------------
    def _rt(self, what: str) -> ToolRuntime:
        if self._runtime is None:
            raise RuntimeError(f"{what} needs a task runtime; this ToolApi was built without one")
        return self._runtime

    async def task(
        self, kind: Any, input: Any, options: Mapping[str, Any] | None, ctx: Context
    ) -> Any:
        """Create an ordinary task (``options``: ``background``, ``after``) in this tool's
        conversation; returns its reference."""
        return await self._rt("task").create_task(kind, input, dict(options or {}), ctx)

    async def conversation(self, spec: Any, ctx: Context) -> Any:
        """Create an owned conversation (a subagent) owned by this tool's task."""
        return await self._rt("conversation").create_owned_conversation(spec, ctx)

    async def get_task(self, ref: Any, ctx: Context) -> Any:
        """A point read of a task record (own conversation and owned subtree)."""
        return await self._rt("get_task").get_task(_task_id(ref), ctx)

    async def wait_for_task(self, ref: Any, ctx: Context) -> Any:
        """Wait until the task is terminal; returns its record."""
        return await self._rt("wait_for_task").wait_for_task(_task_id(ref), ctx)

    async def slot(self, ref: Any, ctx: Context) -> Any:
        """A read-only snapshot of another task's slot (memos removed), or ``None``."""
        value = await self._rt("slot").task_slot(_task_id(ref), ctx)
        if isinstance(value, dict) and "memos" in value:
            value = {k: v for k, v in value.items() if k != "memos"}  # pyright: ignore[reportUnknownVariableType]
        return value


def _task_id(ref: Any) -> int:
    value = ref if isinstance(ref, int) else getattr(ref, "id", None)
    if type(value) is not int:
        raise TypeError(f"expected a task id or a task reference, got {type(ref).__name__}")
    return value


def _check_free(free: dict[str, Any]) -> None:
    if "progress" in free and not isinstance(free["progress"], str):
        raise SlotRejected(f"slot.progress must be a str, got {type(free['progress']).__name__}")
    if "continuedBy" in free and (type(free["continuedBy"]) is not int or free["continuedBy"] < 1):
        raise SlotRejected(f"slot.continuedBy must be a task id, got {free['continuedBy']!r}")
    if "details" in free:
        try:
            free["details"] = copy_json(free["details"], ("slot", "details"))
        except JsonError as exc:
            raise SlotRejected(str(exc)) from None


# -- adapters over the task runtime ------------------------------------------------------------
_CORE_KIND_NAMES = frozenset({"pi.generation", "pi.tool", "pi.post_tools", "pi.collapse"})


def runtime_slot(rt: Any) -> SlotCommit:
    """The :data:`SlotCommit` of the task ``rt`` runs: ``fn(tx, tx.slot(current))`` inside
    ``rt.commit`` (for ``pi.tool`` the slot is ``sticky.turn.tools[input.index]``)."""

    async def commit(
        fn: Callable[[Transaction, MutableMapping[str, Any]], Any], ctx: Context
    ) -> Any:
        return await rt.commit(lambda tx, current, _ctx: fn(tx, tx.slot(current)), ctx)

    return commit


class RuntimeTools:
    """:class:`ToolRuntime` over a task runtime ``rt`` (what ``pi.tool`` hands to
    :class:`ToolApi`). Reads and waits stay inside the tool task's conversation and the
    conversations it owns; tools create ordinary tasks only (never the core turn kinds).
    ``owned(rt, spec, ctx)`` creates a subagent (the owned-conversations layer provides it)."""

    def __init__(
        self, rt: Any, owned: Callable[[Any, Any, Context], Awaitable[Any]] | None = None
    ) -> None:
        self._rt = rt
        self._owned = owned

    async def create_task(
        self, kind: Any, input: Any, options: Mapping[str, Any], ctx: Context
    ) -> Any:
        name = getattr(kind, "name", None)
        if not isinstance(name, str) or name in _CORE_KIND_NAMES or getattr(kind, "turn", False):
            raise Forbidden(f"tools may create ordinary tasks only, not {kind!r}")
        unknown = set(options) - {"after", "background"}
        if unknown:
            raise ValueError(f"task options: unknown {sorted(unknown)} (after, background)")
        after = list(options.get("after", ()))
        background = bool(options.get("background", False))
        return await self._rt.commit(
            lambda tx, _cur, _ctx: tx.create_task(kind, input, after=after, background=background),
            ctx,
        )

    async def _task_in_reach(self, tx: Any, task_id: int) -> Any:
        task = await tx.task(task_id)
        if task is None:
            return None
        if not tx.in_subtree(self._rt.task_id, task.conversation_id):
            raise Forbidden(f"task {task_id} is outside task {self._rt.task_id}'s subtree")
        return task

    async def get_task(self, task_id: int, ctx: Context) -> Any:
        return await self._rt.commit(lambda tx, _cur, _ctx: self._task_in_reach(tx, task_id), ctx)

    async def wait_for_task(self, task_id: int, ctx: Context) -> Any:
        await self.get_task(task_id, ctx)
        return await self._rt.wait_for_task(task_id, ctx)

    async def task_slot(self, task_id: int, ctx: Context) -> Any:
        async def read(tx: Any, _cur: Any, _ctx: Context) -> Any:
            task = await self._task_in_reach(tx, task_id)
            if task is None or task.status == "terminal":
                return None
            if task.kind == "pi.tool":
                slot = tx.slot(task)  # lives in turn.tools; reading it creates nothing
            else:
                # A read must not seed another task's slot (tx.slot creates it lazily).
                await tx.load(task.conversation_id)
                tasks = tx.document("sticky", task.conversation_id).get("tasks")
                slot = None if tasks is None else tasks.get(str(task.id))
                if slot is None:
                    return {}
            return slot.to_plain() if hasattr(slot, "to_plain") else copy_json(slot)

        return await self._rt.commit(read, ctx)

    async def create_owned_conversation(self, spec: Any, ctx: Context) -> Any:
        if self._owned is None:
            raise RuntimeError("owned conversations are not available to this tool runtime")
        return await self._owned(self._rt, spec, ctx)
