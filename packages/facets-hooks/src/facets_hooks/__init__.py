"""The hooks feature: Claude Code's hooks, in its settings format and protocol, on pico3's hook
points (docs/design/harness.md#hooks).

* :mod:`.contract` — the events, the ``hooks.list`` service id and its JSON shapes; no host code;
* :mod:`.settings` — reading hooks from Claude Code's settings files and our own;
* :mod:`.protocol` — the tool names and inputs as Claude Code spells them, running one hook
  command (stdin JSON, timeout, exit code, JSON output);
* :mod:`.permission` — ``PermissionRequest``: hooks that answer the approval dialog (pico3's
  ``permission_request`` point, run by the approval feature right before it asks);
* :mod:`.prompt_hooks` — ``"type": "prompt"`` hooks, answered by the hook's ``model``, else the
  provider's fast model (the ``haiku`` alias's) or the session's;
* :mod:`.hook_agents` — ``"type": "agent"`` hooks, answered by a read-only subagent;
* :mod:`.mcp_hooks` — ``"type": "mcp_tool"`` hooks: a tool of one of the session's MCP servers,
  called through the MCP feature's ``mcp.hook-tools`` (observed optionally);
* :mod:`.session` — the session facet: each event on its hook point, ``PreToolUse`` decisions
  memoized on the tool task's slot;
* :mod:`.agent_hooks` — a subagent's own hooks (its agent definition's), for it alone;
* :mod:`.observer` — each conversation's view followed: ``Notification``, the hooks' models;
* :mod:`.tui` — ``/hooks``;
* :mod:`.plugin` — the ``chord.facets`` entry point.

Nothing is imported here on purpose: the host imports the plugin module named by the entry point.
"""
