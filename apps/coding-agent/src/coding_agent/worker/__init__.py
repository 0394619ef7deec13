"""The session worker: the process that runs the harness, its facets and the built-in tools."""
