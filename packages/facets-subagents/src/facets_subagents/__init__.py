"""The subagents feature: an ``agent`` tool running durable owned conversations.

* :mod:`.contract` — the kind name, the status shape the views show, and the
  ``subagents.definitions`` service (what loaded, what was skipped, what waits for trust);
* :mod:`.definitions` — agent definitions (Markdown with YAML frontmatter) and their folders;
* :mod:`.claude_code` — Claude Code's dialect: lenient frontmatter, tool names, model aliases;
* :mod:`.fields` — the other frontmatter fields (permissionMode, maxTurns, skills, effort,
  hooks, mcpServers), each read with the warnings it may need;
* :mod:`.kind` — the ``subagents.run`` task kind (owned conversation, resumable);
* :mod:`.session` — the ``agent`` tool and the session facet;
* :mod:`.tui` — ``/agents``: a subagent's transcript; ``/agents definitions``;
* :mod:`.plugin` — the ``chord.facets`` entry point.
"""
