"""The command line: what runs in the ``coding-agent`` process before it becomes something else.

``main.py`` parses the command line and hands over: to the TUI process (:mod:`coding_agent.tui`),
to ``-p``/``--json`` (``headless.py``, which runs the turn in this same process), to ``serve``
(:mod:`coding_agent.server`), or to one of the subcommands here: ``sessions.py`` (``sessions``,
``export``), ``facets.py`` (``facets add/remove/list``), ``db.py`` (``db migrate``) and
``doctor.py``. The console script is :func:`coding_agent.cli.main`.
"""
