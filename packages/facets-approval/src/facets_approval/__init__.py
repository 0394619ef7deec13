"""The approval feature (docs/design/harness.md#before-tool, docs/design/chord.md#feature-layout): a tool call waits for a human's decision.

* :mod:`.contract` — the JSON shapes, the ``pi.approval-dialog`` and ``approval.mode`` service
  ids and the permission modes (ask, accept-edits, plan, auto); no host code;
* :mod:`.session` — ``install_approval`` (the ``before_tool`` hook deciding by rules and mode, the
  sticky ``autoAllow`` list, the session's durable mode, the decision memo) and the session
  facet that spawns one dialog per question and provides the mode;
* :mod:`.tui` — the TUI facets: a modal per open dialog (allow / always allow / deny), and the
  mode label with Shift+Tab and ``/mode``;
* :mod:`.plugin` — the ``chord.facets`` entry point.

Nothing is imported here on purpose: the host imports the plugin module named by the entry point.
"""
