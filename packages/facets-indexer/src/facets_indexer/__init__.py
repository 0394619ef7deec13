"""The indexer feature (docs/design/harness.md#task-kinds, docs/design/chord.md#feature-layout): a searchable index of the working tree.

* :mod:`.contract` — the ``repo.indexer`` status shape and the ``pi.indexer`` service id;
* :mod:`.scan` — the working tree as git sees it, cut into batches with stable keys;
* :mod:`.store` — the SQLite FTS5 index, written in idempotent, atomic batches;
* :mod:`.kind` — the resumable ``repo.indexer`` task kind;
* :mod:`.session` — the session facet: the kind, the ``code_search`` tool, ``pi.indexer``;
* :mod:`.tui` — the TUI facet: a progress panel and ``/index``;
* :mod:`.plugin` — the ``chord.facets`` entry point.

Nothing is imported here on purpose: the host imports the plugin module named by the entry point.
"""
