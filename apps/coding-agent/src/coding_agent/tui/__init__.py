"""The TUI process: a Textual app that renders a pico3 ``ConversationView`` from a session worker.

Everything in this folder runs in the TUI process (``coding-agent`` with no ``-p``, or ``attach``):

* :class:`CodingAgentApp` — the app; give it a :class:`ConversationClient`.
* :func:`run_tui` — run it beside a chord facet host (presentation facets get ``Tui``).
* :class:`ConversationClient` / :class:`SessionInfo` — what the app needs from a conversation.
* :class:`ViewRelay` — the view a client hands the app: follows one replicated state at a time
  (worker restarts are hydrates; ``detach()`` shows the app as unavailable).
* :class:`RemoteConversationClient` — the ``ConversationClient`` over the worker's
  ``pi.conversation`` service (follows the root conversation; unavailable while reconnecting).
* :func:`run_client` — the TUI process: the app beside a facet host fed by the worker's socket.
* ``commands/`` — the app's slash commands, one module per group.

The worker it talks to is started and kept by :mod:`coding_agent.supervisor`.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # bound at first use (_LAZY below)
    from coding_agent.tui.app import CodingAgentApp, run_tui
    from coding_agent.tui.commands.core import commands_facet
    from coding_agent.tui.conversation import (
        ConversationClient,
        InputAbortResult,
        SendMode,
        SessionInfo,
        ViewRelay,
    )
    from coding_agent.tui.conversation_client import (
        RemoteConversationClient,
        WorkerUnavailable,
        conversation_client_facet,
    )
    from coding_agent.tui.main import ClientRun, load_tui_facets, run_client

__all__ = [
    "ClientRun",
    "CodingAgentApp",
    "ConversationClient",
    "InputAbortResult",
    "RemoteConversationClient",
    "SendMode",
    "SessionInfo",
    "ViewRelay",
    "WorkerUnavailable",
    "commands_facet",
    "conversation_client_facet",
    "load_tui_facets",
    "run_client",
    "run_tui",
]

_LAZY: dict[str, str] = {
    "ClientRun": "coding_agent.tui.main",
    "CodingAgentApp": "coding_agent.tui.app",
    "ConversationClient": "coding_agent.tui.conversation",
    "InputAbortResult": "coding_agent.tui.conversation",
    "RemoteConversationClient": "coding_agent.tui.conversation_client",
    "SendMode": "coding_agent.tui.conversation",
    "SessionInfo": "coding_agent.tui.conversation",
    "ViewRelay": "coding_agent.tui.conversation",
    "WorkerUnavailable": "coding_agent.tui.conversation_client",
    "commands_facet": "coding_agent.tui.commands.core",
    "conversation_client_facet": "coding_agent.tui.conversation_client",
    "load_tui_facets": "coding_agent.tui.main",
    "run_client": "coding_agent.tui.main",
    "run_tui": "coding_agent.tui.app",
}
"""Where each public name is defined. Start-up time: the command line imports
``coding_agent.tui.main``, and with it only what the first frame needs (the slash commands'
modules load after it); a name imported from this package is bound at its first use (PEP 562)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next use is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
