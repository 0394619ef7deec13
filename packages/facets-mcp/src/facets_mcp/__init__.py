"""The MCP feature: MCP servers' tools, resources, prompts and instructions for the model, and
``/mcp``.

* :mod:`.contract` — the service ids (``mcp.servers``, ``mcp.elicitation``, ``mcp.sampling``),
  their JSON shapes and :func:`tool_name`;
* :mod:`.config` — the user's ``mcp.json``, a trusted project's ``.mcp.json`` and Claude
  Code's ``~/.claude.json`` (user and local scope);
* :mod:`.client` — one server's connection (stdio, streamable HTTP or HTTP+SSE) on the worker's
  loop, with :mod:`.stdio` / :mod:`.http_bound` (the size cap), :mod:`.listing`, :mod:`.results`
  and :mod:`.callbacks` (roots, elicitation, sampling);
* :mod:`.auth` — OAuth for remote servers: token files, ``/mcp login``'s callback;
* :mod:`.session` — the session facet: servers in the background, tools on the harness, with
  :mod:`.offers` (instructions, resource tools, progress, elicitation) and :mod:`.sampling`;
* :mod:`.scoped` — a subagent's own servers (its definition's ``mcpServers``), for it alone;
* :mod:`.tui` — the TUI facet: ``/mcp``, the prompt commands, the dialogs;
* :mod:`.plugin` — the ``chord.facets`` entry point.

Nothing is imported here on purpose: the host imports the plugin module named by the entry point.
"""
