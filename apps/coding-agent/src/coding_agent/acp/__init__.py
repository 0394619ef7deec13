"""``coding-agent acp``: the agent in any editor that speaks the Agent Client Protocol.

Everything in this folder runs in the process an editor starts (Zed, JetBrains, Neovim's
CodeCompanion, …) and talks to over stdio with JSON-RPC, built on the protocol's maintained SDK
(``agent-client-protocol``). Like ``-p``, the process runs each session's worker facets itself
(:func:`~coding_agent.worker.main.open_session_host`): the sessions are our durable sessions, so
``session/load`` resumes one after a crash and replays its transcript.

* :mod:`.agent` — the ACP ``Agent``: ``initialize``, ``session/new``, ``session/load``,
  ``session/prompt``, ``session/cancel``, modes (the permission modes) and the model as a
  session config option; :func:`~coding_agent.acp.agent.run_acp` serves stdio.
* :mod:`.session` — one open session: its host, the root conversation's view followed, the
  approval and question dialogs answered through ``session/request_permission``.
* :mod:`.editor` — what the editor brings: its buffers for the tools (``fs/*``) and its MCP
  servers; :mod:`.terminal` — a ``bash`` call's output live in an editor terminal;
* :mod:`.turns` — the bounded records of the prompts waiting for their turns;
* :mod:`.translate` — the pure mapping from the view's entries and live message to ACP
  ``session/update`` notifications (message and thought chunks, tool calls with their kind,
  locations and diffs) and from ACP prompt blocks to our message content.
"""
