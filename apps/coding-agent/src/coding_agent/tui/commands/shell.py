"""The TUI side of ``!cmd`` / ``!!cmd``: send the command to the worker, show it streaming.

The app hands a submitted line starting with ``!`` to :class:`RemoteShellRunner` (``!!`` keeps the
output out of the model's context). The runner calls the worker's ``coding-agent.shell``
service (:mod:`coding_agent.worker.shell_service`), which runs it with the ``bash`` tool's
executor and writes the durable entry the transcript then shows. While the command runs, a
panel above the editor shows the live tail of its output (from the service's replicated state,
so a second attached TUI sees it too), and Esc stops it.
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Static

from chord import Context, Delivery, Facet, FacetEnvironment, define_facet
from chord.textual import Tui
from coding_agent.contracts import ShellService
from coding_agent.tui.conversation_client import RemoteConversationClient, WorkerUnavailable
from coding_agent.tui.shell import shell_text

__all__ = ["SHELL_PANEL_ID", "RemoteShellRunner"]

SHELL_PANEL_ID = "shell-live"


class RemoteShellRunner:
    """Runs ``!`` commands of the followed conversation through the worker (see module docs)."""

    def __init__(self, client: RemoteConversationClient) -> None:
        self._client = client
        self._service: Any = None
        self._running: dict[str, Any] | None = None

    @property
    def running(self) -> dict[str, Any] | None:
        """The command running now ``{"command", "include", "output"}``, or ``None``."""
        return self._running

    async def run(self, command: str, include: bool, ctx: Context) -> dict[str, Any]:
        """Run ``command``; returns the written entry's data once it finished."""
        service, conversation = self._service, self._client.conversation_id
        if service is None or conversation is None:
            raise WorkerUnavailable()
        return await service.run(conversation, command, include, ctx)

    async def abort(self, ctx: Context) -> bool:
        """Stop the running command (``False``: none was running)."""
        if self._service is None:
            return False
        return bool(await self._service.abort(ctx))

    def facet(self) -> Facet:
        """The presentation facet binding the runner to the worker's service and showing the
        live panel."""

        @define_facet("@coding-agent/shell")
        def setup(env: FacetEnvironment) -> None:
            service = env.use(ShellService)
            tui = env.use(Tui)
            panel: dict[str, Any] = {}

            def changed(value: Any, ctx: Context, delivery: Delivery) -> None:
                del ctx, delivery
                running = value.get("running") if isinstance(value, dict) else None
                self._running = running if isinstance(running, dict) else None
                if self._running is None:
                    remove = panel.pop("remove", None)
                    panel.pop("widget", None)
                    if remove is not None:
                        remove()
                    return
                text = shell_text(
                    str(self._running.get("command", "")),
                    str(self._running.get("output", "")),
                    excluded=not self._running.get("include", True),
                    status="running… esc stops it",
                )
                widget = panel.get("widget")
                if widget is None:
                    widget = panel["widget"] = Static(text, id=SHELL_PANEL_ID, classes="shell")
                    panel["remove"] = tui.mount_panel(SHELL_PANEL_ID, lambda: widget)
                else:
                    widget.update(text)

            def activate() -> None:
                self._service = service
                env.own(service.state.subscribe(changed))

            def deactivate() -> None:
                self._service = None
                self._running = None
                remove = panel.pop("remove", None)
                if remove is not None:
                    remove()

            env.on_activate(activate)
            env.own(deactivate)

        return setup
