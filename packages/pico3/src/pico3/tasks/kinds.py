"""Task kinds: how durable, resumable work is declared (docs/design/harness.md#task-kinds).

A kind is a small state machine whose program counter is the task's **checkpoint**::

    indexer = define_task(
        "repo.indexer",
        initial=start,                          # runs when there is no checkpoint yet
        phases={"scanning": scan, "writing": write},
        inflight=("writing",),                  # written right before an effect
        abort=abort,
        describe=lambda task: {"files": task.slot["files"]},
    )

Every handler is ``async def handler(task: TaskInfo, rt: Runtime, ctx) -> Step``. A step says
what happens next:

* ``Next({"phase": "scanning", ...})``: commit that checkpoint, then run ``phases["scanning"]``;
* ``Next(builder)``: run ``builder(tx, current, ctx)`` on the line; it returns a checkpoint
  (advance), a :class:`Completion` (terminalize in that same commit) or :data:`RETRY` (the
  handler's snapshot went stale: discard and re-enter the handler for the current checkpoint);
* ``Done(closure)``: run ``closure(tx, current, ctx) -> Completion`` on the line; the task
  turns terminal in the same commit, and its slot is retired with it.

**In-flight phases** are checkpoints written by the handler itself (``rt.commit`` with
``tx.checkpoint(...)``) immediately before an external effect. The scheduler never *steps*
into one; it only enters an in-flight phase's handler when it finds the task there after a
reopen, which makes that handler the recovery program (typically: repeat the keyed effect).
A ``Next`` into an in-flight phase is a contract fault.

**Abort** is separate: ``abort(task, rt, ctx)`` may clean up (kill a process) and returns an
*abort closure* ``(tx, current, ctx) -> result JSON`` that terminalizes the task ``aborted``.

Anything else a handler returns, or raises (other than cancellation by the scheduler), is a
*contract fault*: the task ends ``{"status": "faulted", "error": ...}`` and the session goes on
(docs/design/decisions.md#d8-g6).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import msgspec
from msgspec import UNSET

from chord.context import Context
from chord.json import JsonError, copy_json
from pico3.kernel.errors import StaleDefinition
from pico3.kernel.tx import Transaction
from pico3.storage.records import Task

if TYPE_CHECKING:
    from pico3.tasks.runtime import Runtime

__all__ = [
    "RETRY",
    "AbortClosure",
    "Closure",
    "Completion",
    "Done",
    "Handler",
    "Next",
    "Step",
    "TaskInfo",
    "TaskKind",
    "TransitionBuilder",
    "define_task",
]

RETRY: Final = "retry"
"""What a ``Next(builder)`` returns when the handler's snapshot became stale."""


class Completion(msgspec.Struct, frozen=True):
    """How a task ends normally: ``completed`` with a result, or ``failed`` with a failure.

    Both values are strict JSON. Build with :meth:`completed` / :meth:`failed`.
    """

    status: Literal["completed", "failed"]
    value: Any = None

    @classmethod
    def completed(cls, result: Any = None) -> Completion:
        return cls("completed", result)

    @classmethod
    def failed(cls, failure: Any = None) -> Completion:
        return cls("failed", failure)

    def outcome(self) -> dict[str, Any]:
        """The stored outcome: ``{"status": "completed", "result": ...}`` or
        ``{"status": "failed", "failure": ...}``."""
        if self.status not in ("completed", "failed"):
            raise ValueError(f"Completion.status must be completed/failed, got {self.status!r}")
        key = "result" if self.status == "completed" else "failure"
        try:
            return {"status": self.status, key: copy_json(self.value, (key,))}
        except JsonError as exc:
            raise ValueError(f"completion {key}: {exc}") from None


class TaskInfo(msgspec.Struct, frozen=True):
    """A snapshot of a task handed to handlers and ``describe``.

    ``slot`` is a plain copy of the task's slot (``describe`` gets it without ``memos``);
    ``checkpoint`` is ``None`` before the first checkpoint.
    """

    id: int
    conversation_id: int
    kind: str
    input: Any
    status: str
    checkpoint: dict[str, Any] | None
    after: tuple[int, ...]
    owns: tuple[int, ...]
    background: bool
    marked: bool
    outcome: dict[str, Any] | None
    slot: dict[str, Any] | None

    @classmethod
    def of(cls, task: Task, slot: dict[str, Any] | None) -> TaskInfo:
        """Build from a stored record (copies payloads: handlers cannot alter records)."""
        return cls(
            id=task.id,
            conversation_id=task.conversation_id,
            kind=task.kind,
            input=copy_json(task.input),
            status=task.status,
            checkpoint=None if task.checkpoint is UNSET else copy_json(task.checkpoint),
            after=tuple(task.after),
            owns=tuple(task.owns),
            background=task.background is True,
            marked=task.abort is True,
            outcome=None if task.outcome is UNSET else copy_json(task.outcome),
            slot=None if slot is None else copy_json(slot),
        )

    @property
    def phase(self) -> str | None:
        """The checkpoint's phase, or ``None`` before the first checkpoint."""
        return None if self.checkpoint is None else self.checkpoint.get("phase")


TransitionBuilder: TypeAlias = Callable[
    [Transaction, Task, Context], "dict[str, Any] | Completion | str | Awaitable[Any]"
]
Closure: TypeAlias = Callable[[Transaction, Task, Context], "Completion | Awaitable[Completion]"]
AbortClosure: TypeAlias = Callable[[Transaction, Task, Context], Any]


class Next(msgspec.Struct, frozen=True):
    """Advance: to a checkpoint dict, or through a transition builder run on the line.

    ``durable=False`` lets the next phase start before the transition's commit is durable
    (with a backend's group commit; :meth:`pico3.kernel.commit.Kernel.commit`): that phase's
    first commit that waits writes both, in one write where the storage allows. Only for a
    transition whose next phase neither reports anything nor acts outside the session before
    a commit of its own (a crash in between loses the transition, and the task runs its
    current phase again, as if it had crashed just before the transition)."""

    target: dict[str, Any] | TransitionBuilder
    durable: bool = True


class Done(msgspec.Struct, frozen=True):
    """Finish: ``closure(tx, current, ctx) -> Completion`` runs on the line; the kernel adds the
    terminal record (and retires the slot) in the same commit."""

    closure: Closure


Step: TypeAlias = Next | Done
Handler: TypeAlias = Callable[["TaskInfo", "Runtime", Context], Awaitable[Step]]
AbortHandler: TypeAlias = Callable[["TaskInfo", "Runtime", Context], Awaitable[AbortClosure]]
FaultHook: TypeAlias = Callable[[Transaction, Task, str], Any]


@dataclass(frozen=True, eq=False)
class TaskKind:
    """A declared kind. Compare by identity: only the registered object creates tasks."""

    name: str
    initial: Handler
    phases: Mapping[str, Handler]
    abort: AbortHandler
    config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict[str, Mapping[str, Any]])
    slot: Callable[[Any], dict[str, Any]] | None = None
    describe: Callable[[TaskInfo], Any] | None = None
    inflight: frozenset[str] = frozenset()
    turn: bool = False
    core: bool = False
    fault: FaultHook | None = None
    builtin: bool = False

    def __repr__(self) -> str:
        return f"<TaskKind {self.name!r}>"


def define_task(
    name: str,
    *,
    initial: Handler,
    phases: Mapping[str, Handler],
    abort: AbortHandler,
    config: Mapping[str, Mapping[str, Any]] | None = None,
    slot: Callable[[Any], dict[str, Any]] | None = None,
    describe: Callable[[TaskInfo], Any] | None = None,
    inflight: Iterable[str] = (),
    turn: bool = False,
    core: bool = False,
    fault: FaultHook | None = None,
    builtin: bool = False,
) -> TaskKind:
    """Declare a task kind (see the module docstring). Registration is separate
    (``harness.register_task_kind(kind)``).

    ``config`` declares the kind's own keys per document (``{"rewindable": {key: default},
    "sticky": {...}}``); ``slot(input)`` initialises the slot; ``describe(task)`` renders
    ``tasks[id].status`` (default ``{"phase": ...}``). ``turn``, ``core`` and ``fault`` are for
    the built-in kinds only: ``fault(tx, current, error)`` adds writes to a faulted task's
    terminal commit (a turn task resolves its inputs there). ``builtin=True`` allows a ``pi.``
    name for a kind that runs with *ordinary* task authority (``pi.job``, ``pi.plugin``).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"task kind name must be a non-empty str, got {name!r}")
    if name.startswith("pi.") and not (core or builtin):
        raise ValueError(f"task kind {name!r} is reserved: the 'pi.' prefix belongs to core")
    if not callable(initial) or not callable(abort):
        raise TypeError(f"task kind {name!r}: initial and abort must be callables")
    checked_phases = dict(phases)
    for phase, handler in checked_phases.items():
        if not isinstance(phase, str) or not phase:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"task kind {name!r}: phase names must be non-empty str")
        if not callable(handler):
            raise TypeError(f"task kind {name!r}: phases[{phase!r}] is not callable")
    flight = frozenset(inflight)
    unknown = flight - set(checked_phases)
    if unknown:
        raise ValueError(f"task kind {name!r}: in-flight phases {sorted(unknown)} have no handler")
    checked_config: dict[str, dict[str, Any]] = {}
    for doc, keys in (config or {}).items():
        if doc not in ("rewindable", "sticky"):
            raise ValueError(f"task kind {name!r}: config document {doc!r} (rewindable|sticky)")
        try:
            checked_config[doc] = copy_json(dict(keys), ("config", doc))
        except JsonError as exc:
            raise ValueError(f"task kind {name!r}: {exc}") from None
    if (turn or fault is not None) and not core:
        raise ValueError(f"task kind {name!r}: turn and fault are for core kinds only")
    _check_authority(name, core=core, builtin=builtin)
    return TaskKind(
        name=name,
        initial=initial,
        phases=checked_phases,
        abort=abort,
        config=checked_config,
        slot=slot,
        describe=describe,
        inflight=flight,
        turn=turn,
        core=core,
        fault=fault,
        builtin=builtin,
    )


def _check_authority(name: str, *, core: bool, builtin: bool) -> None:
    """Core authority belongs to the kernel's own ``pi.*`` kinds: a ``core=True`` flag on any
    other name confers nothing and is refused, and a ``pi.*`` name needs ``core`` or ``builtin``
    (docs/design/harness.md#authority: "a user-supplied core: true or similar confers nothing")."""
    if core and not name.startswith("pi."):
        raise ValueError(
            f"task kind {name!r}: core authority is reserved for the kernel's 'pi.' kinds; "
            "an extension kind runs with ordinary task authority (drop core=True)"
        )
    if name.startswith("pi.") and not (core or builtin):
        raise ValueError(f"task kind {name!r} is reserved: the 'pi.' prefix belongs to core")


class KindRegistry:
    """The registered kinds of one session (the kernel's :class:`~pico3.kernel.core.KindLookup`).

    Registering adds the kind's config keys to the session (collisions reject); unregistering
    removes them. Pending tasks of an unregistered kind stay pending; they are dispatched again
    once a kind of that name is registered.
    """

    def __init__(self, config_keys: dict[str, Any], scheduler: Any = None) -> None:
        self._kinds: dict[str, TaskKind] = {}
        self._config_keys = config_keys
        self.scheduler = scheduler  # the owning scheduler (handles reach it through the kernel)

    def register(self, kind: TaskKind) -> Callable[[], None]:
        """Register ``kind``; returns an idempotent unregister for exactly this object."""
        from pico3.session_data.config import RESERVED_CONFIG_NAMES, custom_key

        if not isinstance(kind, TaskKind):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"expected a TaskKind from define_task, got {type(kind).__name__}")
        _check_authority(kind.name, core=kind.core, builtin=kind.builtin)
        if (kind.turn or kind.fault is not None) and not kind.core:
            raise ValueError(f"task kind {kind.name!r}: turn and fault are for core kinds only")
        if kind.name in self._kinds:
            raise ValueError(f"task kind {kind.name!r} is already registered")
        keys = [
            (doc, key, default)
            for doc, values in kind.config.items()
            for key, default in values.items()
        ]
        for _doc, key, _default in keys:
            if key in self._config_keys or key in RESERVED_CONFIG_NAMES:
                raise ValueError(
                    f"task kind {kind.name!r}: config key {key!r} collides with an existing key"
                )
        seen: set[str] = set()
        for _doc, key, _default in keys:
            if key in seen:
                raise ValueError(f"task kind {kind.name!r}: config key {key!r} declared twice")
            seen.add(key)
        for doc, key, default in keys:
            self._config_keys[key] = custom_key(key, doc, default)  # type: ignore[arg-type]
        self._kinds[kind.name] = kind

        def unregister() -> None:
            if self._kinds.get(kind.name) is kind:
                del self._kinds[kind.name]
                for _doc, key, _default in keys:
                    self._config_keys.pop(key, None)

        return unregister

    def get(self, name: str) -> TaskKind | None:
        """The registered kind of that name."""
        return self._kinds.get(name)

    def names(self) -> list[str]:
        """Registered kind names."""
        return list(self._kinds)

    # -- KindLookup ------------------------------------------------------------------------
    def starts_at_once(self, name: str) -> bool:
        scheduler = self.scheduler
        return scheduler is not None and name in self._kinds and scheduler.dispatches_at_once()

    def resolve(self, kind: object, *, core: bool) -> str:
        if isinstance(kind, TaskKind):
            if self._kinds.get(kind.name) is not kind:
                raise StaleDefinition(
                    f"task kind {kind.name!r} is stale (unregistered or replaced)"
                )
            return kind.name
        if core and isinstance(kind, str):
            if kind not in self._kinds:
                raise ValueError(f"task kind {kind!r} is not registered")
            return kind
        raise TypeError(f"create_task needs a registered kind object, got {kind!r}")

    def initial_slot(self, name: str, input: Any) -> dict[str, Any] | None:
        kind = self._kinds.get(name)
        if kind is None or kind.slot is None:
            return None
        value = kind.slot(copy_json(input))
        if type(value) is not dict:
            raise ValueError(f"task kind {name!r}: slot(input) must return a JSON object")
        return copy_json(value, ("slot",))
