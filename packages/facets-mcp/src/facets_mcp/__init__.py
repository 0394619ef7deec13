"""The MCP feature: MCP servers' tools for the model, and the ``/mcp`` panel.

* :mod:`.contract` — the ``mcp.servers`` service id, its JSON state and :func:`tool_name`;
* :mod:`.config` — the user's ``mcp.json`` and a trusted project's ``.mcp.json``;
* :mod:`.client` — one server's connection (stdio, streamable HTTP or HTTP+SSE);
* :mod:`.auth` — OAuth for remote servers: token files, ``/mcp login``'s callback;
* :mod:`.session` — the session facet: servers in the background, tools on the harness;
* :mod:`.tui` — the TUI facet: ``/mcp``;
* :mod:`.plugin` — the ``chord.facets`` entry point.

Nothing is imported here on purpose: the host imports the plugin module named by the entry point.
"""
