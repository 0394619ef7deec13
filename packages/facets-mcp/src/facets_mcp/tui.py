"""The MCP TUI facet: the ``/mcp`` panel and command.

``/mcp`` shows (or hides) a panel that follows :data:`~.contract.McpServers`' replicated state:
each server with its transport, its state (``starting``, ``ready``, ``failed`` with the reason,
the tail of its stderr and when it is tried again), its tool count and tools, and the resources
and prompts it offers; configuration problems come first. ``/mcp restart NAME`` starts a server
again at once. ``/mcp login NAME`` logs in to a remote server with OAuth: it prints the
authorization URL (a notification, and the panel while the login waits) and opens it
(:func:`open_in_browser`: ``$BROWSER``, macOS, or ``xdg-open`` on a desktop); the worker's
loopback callback gets the redirect. The facet holds no authority and no state of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import webbrowser
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
from textual.message import Message
from textual.widgets import Static

from chord import (
    Context,
    Delivery,
    FacetEnvironment,
    RemoteServiceError,
    ReplicatedState,
    define_facet,
    inert,
)
from chord.textual import Tui

from .contract import McpServers

__all__ = ["PANEL_ID", "McpPanel", "open_in_browser", "panel_text", "tui_facet"]

PANEL_ID = "mcp"
_ICONS = {"starting": "◐", "ready": "●", "failed": "✗", "stopped": "○"}


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def panel_text(state: Any) -> str:
    """The panel's text for an :class:`~.contract.McpState` value, made inert
    (:func:`chord.inert`): a server's names, errors and stderr are the server's to choose."""
    if not isinstance(state, dict):
        return "MCP: not available"
    lines = ["MCP servers"]
    for error in state.get("errors") or []:
        lines.append(f"  ! {error}")
    servers = state.get("servers") or []
    if not servers:
        lines.append(
            "  (none configured: add mcpServers to ~/.config/coding-agent/mcp.json "
            "or a trusted project's .mcp.json)"
        )
    for server in servers:
        tools = server.get("tools") or []
        head = (
            f"{_ICONS.get(server.get('state'), '?')} {server.get('name')} "
            f"({server.get('transport')}) {server.get('state')} · {_count(len(tools), 'tool')}"
        )
        if server.get("restarts"):
            head += f" · {_count(server['restarts'], 'restart')}"
        lines.append(head)
        if server.get("error"):
            lines.append(f"    error: {server['error']}")
        if server.get("state") == "failed" and "retryInSeconds" in server:
            lines.append(
                f"    retrying in {server['retryInSeconds']:g} s (/mcp restart {server.get('name')})"
            )
        if server.get("loginUrl"):
            lines.append(f"    log in: open {server['loginUrl']}")
        for line in (server.get("stderr") or "").splitlines()[-8:]:
            lines.append(f"    stderr| {line}")
        if tools:
            lines.append("    tools: " + ", ".join(t.get("tool", "?") for t in tools))
        for resource in server.get("resources") or []:
            lines.append(f"    resource: {resource.get('name')} <{resource.get('uri')}>")
        for prompt in server.get("prompts") or []:
            args = ", ".join(prompt.get("arguments") or [])
            lines.append(f"    prompt: {prompt.get('name')}({args})")
    return inert("\n".join(lines))


class McpPanel(Static):
    """The ``/mcp`` panel: follows a state, hidden until toggled."""

    DEFAULT_CSS = """
    McpPanel { height: auto; max-height: 20; padding: 0 1; overflow-y: auto; }
    """

    class Changed(Message):
        def __init__(self, value: Any) -> None:
            super().__init__()
            self.value = value

    def __init__(self, state: ReplicatedState) -> None:
        super().__init__("", markup=False, id="mcp-panel")
        self._state = state
        self._unsubscribe: Any = None
        self.text = panel_text(state.value)
        self.display = False
        self._listeners: list[Callable[[], None]] = []

    def listen(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener()`` after every change of :attr:`text`; returns the remover."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def on_mount(self) -> None:
        self._unsubscribe = self._state.subscribe(self._on_state)
        self.update(self.text)

    def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _on_state(self, value: Any, ctx: Context, delivery: Delivery) -> None:
        del ctx, delivery
        self.post_message(McpPanel.Changed(value))

    def on_mcp_panel_changed(self, message: McpPanel.Changed) -> None:
        message.stop()
        self.text = panel_text(message.value)
        self.update(self.text)
        for listener in list(self._listeners):
            listener()


def open_in_browser(url: str) -> bool:
    """Open ``url`` in a graphical browser; ``False`` when there is none to use.

    ``$BROWSER`` (the user's choice) and macOS go through :mod:`webbrowser`; elsewhere only
    ``xdg-open`` on a desktop (``DISPLAY`` or ``WAYLAND_DISPLAY``): :mod:`webbrowser` would fall
    back to a console browser (``lynx``, ``w3m``) that fights the TUI for the terminal."""
    if os.environ.get("BROWSER") or sys.platform == "darwin":
        return webbrowser.open(url)
    opener = shutil.which("xdg-open")
    if opener is None or not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False
    try:  # called in a thread: xdg-open hands the URL over and exits
        done = subprocess.run(
            [opener, url],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@define_facet("@pi/mcp")
def tui_facet(env: FacetEnvironment) -> None:
    """Offer ``/mcp`` (toggle the panel), ``/mcp restart NAME`` and ``/mcp login NAME``."""
    tui = env.use(Tui)
    servers = env.use(McpServers)
    panels: list[McpPanel] = []

    def make() -> McpPanel:
        panel = McpPanel(servers.state)
        panels.append(panel)
        return panel

    async def command(args: str, ctx: Context) -> None:
        words = args.split()
        if words[:1] == ["restart"]:
            if len(words) != 2:
                tui.notify("Usage: /mcp restart NAME", severity="warning")
                return
            await servers.restart(words[1], ctx)
            tui.notify(f"Restarting MCP server {words[1]}")
            return
        if words[:1] == ["login"]:
            if len(words) != 2:
                tui.notify("Usage: /mcp login NAME", severity="warning")
                return
            await _login(words[1], ctx)
            return
        if words:
            tui.notify(
                "Usage: /mcp (show or hide the panel), /mcp restart NAME or /mcp login NAME",
                severity="warning",
            )
            return
        for panel in panels:
            panel.display = not panel.display

    async def _login(name: str, ctx: Context) -> None:
        try:
            url = await servers.login(name, ctx)
        except RemoteServiceError as exc:
            tui.notify(f"MCP login {name}: {exc.message}", severity="error")
            return
        if url is None:
            tui.notify(f"MCP server {name} connected without asking for a login")
            return
        tui.notify(inert(f"Log in to MCP server {name}: open {url}"))
        for panel in panels:
            panel.display = True  # the URL stays there until the browser comes back
        try:
            await anyio.to_thread.run_sync(open_in_browser, url)
        except Exception:  # no browser here: the URL is shown
            pass

    def activate() -> None:
        env.own(tui.mount_panel(PANEL_ID, make))
        env.own(
            tui.register_command(
                "mcp", "Show the MCP servers, their tools, resources and prompts", command
            )
        )

    env.on_activate(activate)
