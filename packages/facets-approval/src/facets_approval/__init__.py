"""The approval feature (seed-plugins §4.2, §6.2): a tool call waits for a human's decision.

* :mod:`.contract` — the JSON shapes and the ``pi.approval-dialog`` service id (no host code);
* :mod:`.session` — ``install_approval`` (the ``before_tool`` hook, the sticky ``autoAllow``
  namespace, the decision memo) and the session facet that spawns one dialog per question;
* :mod:`.tui` — the TUI facet: a modal per open dialog (allow / always allow / deny);
* :mod:`.plugin` — the ``chord.facets`` entry point.

Nothing is imported here on purpose: the host imports the plugin module named by the entry point.
"""
