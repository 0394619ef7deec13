"""coding-agent: the reference terminal coding agent built from chord, pico3 and feature facets.

A session worker process (:mod:`coding_agent.worker`: the pico3 harness, providers, built-in
tools) and a Textual TUI process (:mod:`coding_agent.tui`, :mod:`coding_agent.tui`) joined by
the chord wire; :mod:`coding_agent.cli.main` is the command line and :mod:`coding_agent.cli.headless`
the ``-p``/``--json`` modes. The package exports nothing itself: the console script runs
:func:`coding_agent.cli.main`.
"""
