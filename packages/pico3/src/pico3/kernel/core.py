"""What a transaction and the view read of the kernel: the :class:`KernelCore` protocol, and
the :class:`KindLookup` the task layer installs on the kernel.

A leaf module (nothing of the kernel's line, commit or view is imported here), so
:mod:`pico3.kernel.tx` and :mod:`pico3.kernel.view` name the kernel they work for without
importing :mod:`pico3.kernel.commit`, which imports both. :class:`~pico3.kernel.commit.Kernel`
is the one implementation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from chord.context import Context

if TYPE_CHECKING:
    from pico3.kernel.documents import DocumentCache
    from pico3.kernel.namespaces import NamespaceRegistry
    from pico3.session_data.config import ConfigKey
    from pico3.session_data.context import DerivedContext
    from pico3.storage.base import Storage
    from pico3.storage.records import Conversation, Entry, Task

__all__ = ["Describe", "KernelCore", "KindLookup", "Reporter"]

T = TypeVar("T")

Reporter = Callable[[BaseException], None]
"""Where the kernel reports an error it does not raise."""

Describe = Callable[["Task", "dict[str, Any] | None"], Any]
"""The task layer's status projection: ``(task, slot without memos) -> JSON`` for the view."""


class KindLookup(Protocol):
    """What the kernel asks the task layer about kinds (installed by the scheduler)."""

    def resolve(self, kind: object, *, core: bool) -> str:
        """The kind name of ``kind``: the registered kind object (any authority) or, for core
        callers, a registered name. Raises ``StaleDefinition`` for a stale object."""
        ...

    def initial_slot(self, name: str, input: Any) -> dict[str, Any] | None:
        """The kind's initial slot for ``input`` (``None`` when it declares none)."""
        ...

    def starts_at_once(self, name: str) -> bool:
        """Whether a new task of ``name`` with nothing to wait for is dispatched as soon as its
        creating commit is durable (the kind registered, dispatch enabled and not held): then it
        is created ``running``, claimed in that commit rather than in one of its own."""
        ...


class KernelCore(Protocol):
    """The kernel's state and reads, as a transaction and the view use them."""

    @property
    def storage(self) -> Storage: ...
    @property
    def documents(self) -> DocumentCache: ...
    @property
    def namespaces(self) -> NamespaceRegistry: ...
    @property
    def config_keys(self) -> dict[str, ConfigKey]: ...
    @property
    def conversations(self) -> dict[int, Conversation]: ...
    @property
    def task_index(self) -> dict[int, Task]: ...
    @property
    def kinds(self) -> KindLookup | None: ...
    @property
    def describe(self) -> Describe | None: ...
    @property
    def report(self) -> Reporter: ...
    def mint_id(self) -> int: ...
    def task_exists(self, task_id: int) -> bool: ...
    def busy(self, tx: Any, conversation_id: int) -> bool: ...
    def live_tasks(self, conversation_id: int | None = None) -> list[Task]: ...
    async def on_line(self, fn: Callable[[], Awaitable[T]], ctx: Context) -> T: ...
    async def conversation_docs(self, conversation_id: int, ctx: Context) -> None: ...
    async def transcript(
        self, conversation_id: int, at: int | None, ctx: Context
    ) -> list[Entry]: ...
    async def shared_context(
        self, conversation_id: int, at: int | None, ctx: Context
    ) -> DerivedContext: ...
    async def rewindable_as_of(
        self, conversation_id: int, at: int, ctx: Context
    ) -> dict[str, Any]: ...
