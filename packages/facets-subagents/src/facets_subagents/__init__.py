"""The subagents feature: an ``agent`` tool running durable owned conversations.

* :mod:`.contract` — the kind name and the status shape the views show;
* :mod:`.definitions` — agent definitions (Markdown with YAML frontmatter);
* :mod:`.kind` — the ``subagents.run`` task kind (owned conversation, resumable);
* :mod:`.session` — the ``agent`` tool and the session facet;
* :mod:`.tui` — ``/agents``: a subagent's transcript;
* :mod:`.plugin` — the ``chord.facets`` entry point.
"""
