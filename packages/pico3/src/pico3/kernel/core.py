"""What a transaction and the view read of the kernel: the :class:`KernelCore` protocol.

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
    from pico3.datamodel.config import ConfigKey
    from pico3.datamodel.context import DerivedContext
    from pico3.kernel.documents import DocumentCache
    from pico3.kernel.namespaces import NamespaceRegistry
    from pico3.kernel.tx.authority import KindLookup
    from pico3.storage.base import Storage
    from pico3.storage.records import Conversation, Entry, Task

__all__ = ["Describe", "KernelCore", "Reporter"]

T = TypeVar("T")

Reporter = Callable[[BaseException], None]
"""Where the kernel reports an error it does not raise."""

Describe = Callable[["Task", "dict[str, Any] | None"], Any]
"""The task layer's status projection: ``(task, slot without memos) -> JSON`` for the view."""


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
