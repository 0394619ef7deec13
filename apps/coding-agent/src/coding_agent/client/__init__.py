"""The TUI side of the coding agent: a supervised session worker and a client over the wire.

* :class:`WorkerSupervisor` — start or reuse the session worker, restart it when it dies.
* :class:`RemoteConversationClient` — the TUI's ``ConversationClient`` over the worker's
  ``pi.conversation`` service (follows the root conversation; unavailable while reconnecting).
* :func:`run_client` — the TUI process: the app beside a facet host fed by the worker's socket.
"""

from coding_agent.client.app_main import ClientRun, load_tui_facets, run_client
from coding_agent.client.commands import commands_facet
from coding_agent.client.conversation_client import (
    RemoteConversationClient,
    WorkerUnavailable,
    conversation_client_facet,
)
from coding_agent.client.supervisor import WorkerStartError, WorkerSupervisor, worker_command

__all__ = [
    "ClientRun",
    "RemoteConversationClient",
    "WorkerStartError",
    "WorkerSupervisor",
    "WorkerUnavailable",
    "commands_facet",
    "conversation_client_facet",
    "load_tui_facets",
    "run_client",
    "worker_command",
]
