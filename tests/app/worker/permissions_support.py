"""``/permissions`` against a real worker: the approval feature's TUI facet over the wire, with
a TUI service that has no screen (:class:`CommandTui`: its dialogs are answered by the test).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from worker_support import TIMEOUT

from chord.context import Context, cancel_scope
from chord.facets import create_facet_host
from chord.textual import tui_facet
from chord.transport import connect_unix
from chord.wire import connect_service_source
from facets_approval.permissions_tui import permissions_tui_facet

__all__ = ["CommandTui", "presentation"]


class CommandTui:
    """The TUI service without a screen, for ``/permissions``: commands, notices, and dialogs
    a test answers (``next_dialog``)."""

    def __init__(self) -> None:
        self.commands: dict[str, Any] = {}
        self.registered = anyio.Event()
        self.notices: list[str] = []
        self.bodies: list[str] = []
        self.dialogs: list[tuple[str, list[str], anyio.Event, list[str | None]]] = []
        self._changed = anyio.Event()
        self._taken = 0

    def register_command(self, name: str, description: str, handler: Any) -> Callable[[], None]:
        self.commands[name] = handler
        self.registered.set()
        return lambda: self.commands.pop(name, None)

    def notify(self, message: str, *, severity: str = "information") -> None:
        self.notices.append(message)
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def wait_notices(self, count: int) -> None:
        with anyio.fail_after(TIMEOUT):
            while len(self.notices) < count:
                await self._changed.wait()

    async def acquire_modal(self, ctx: Context) -> Any:
        tui = self

        class Modal:
            async def choose(
                self, title: str, choices: Any, *, body: Any = "", **_: Any
            ) -> str | None:
                answered, answer = anyio.Event(), list[str | None]([None])
                labels = [f"{c.value}={c.label}" for c in choices]
                tui.bodies.append(str(body))
                tui.dialogs.append((title, labels, answered, answer))
                changed, tui._changed = tui._changed, anyio.Event()
                changed.set()
                with cancel_scope(ctx):
                    await answered.wait()
                return answer[0]

            def close(self) -> None:
                return None

        return Modal()

    async def next_dialog(self) -> tuple[str, list[str], Callable[[str], None]]:
        with anyio.fail_after(TIMEOUT):
            while len(self.dialogs) <= self._taken:
                await self._changed.wait()
        title, labels, answered, answer = self.dialogs[self._taken]
        self._taken += 1

        def respond(value: str) -> None:
            answer[0] = value
            answered.set()

        return title, labels, respond


@asynccontextmanager
async def presentation(socket: Path, tui: CommandTui) -> AsyncIterator[None]:
    """The ``/permissions`` facet reaching the worker on ``socket`` over the wire."""
    async with anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(socket), task_group=group)
        try:
            async with create_facet_host(
                [tui_facet(tui), permissions_tui_facet],  # type: ignore[arg-type] - the part it uses
                service_sources=[source],
            ):
                with anyio.fail_after(TIMEOUT):
                    await tui.registered.wait()  # the facet activated
                yield
        finally:
            await source.aclose()
