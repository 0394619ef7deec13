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
