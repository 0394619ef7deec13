"""The coding agent's terminal UI: a Textual app that renders a pico3 ``ConversationView``.

* :class:`CodingAgentApp` — the app; give it a :class:`ConversationClient`.
* :func:`run_tui` — run it beside a chord facet host (presentation facets get ``Tui``).
* :class:`ConversationClient` / :class:`SessionInfo` — what the app needs from a conversation.
* :class:`ViewRelay` — the view a client hands the app: follows one replicated state at a time
  (worker restarts are hydrates; ``detach()`` shows the app as unavailable).
"""

from coding_agent.tui.app import CodingAgentApp, run_tui
from coding_agent.tui.conversation import (
    ConversationClient,
    InputAbortResult,
    SendMode,
    SessionInfo,
    ViewRelay,
)

__all__ = [
    "CodingAgentApp",
    "ConversationClient",
    "InputAbortResult",
    "SendMode",
    "SessionInfo",
    "ViewRelay",
    "run_tui",
]
