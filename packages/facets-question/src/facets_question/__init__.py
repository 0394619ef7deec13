"""The question feature (docs/design/harness.md#tools, docs/design/chord.md#feature-layout): the model asks the user and waits.

* :mod:`.contract` — the JSON shapes and the ``pi.question-dialog`` service id (no host code);
* :mod:`.session` — the ``question`` tool (answer memo before and after asking) and the session
  facet that spawns one dialog per waiting call;
* :mod:`.tui` — the TUI facet: a modal with the options and a free-text field, or cancel;
* :mod:`.plugin` — the ``chord.facets`` entry point.

Nothing is imported here on purpose: the host imports the plugin module named by the entry point.
"""
