"""coding-agent: the reference terminal coding agent built from chord, pico3 and feature facets.

A session worker process and a Textual TUI process joined by the chord wire. The application
arrives with its issue; this module is the package's public surface.
"""
