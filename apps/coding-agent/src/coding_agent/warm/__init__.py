"""The warm start: a resident preloaded process that forks a ready ``coding-agent`` per command.

``client.py`` is the ``coding-agent`` console script: for a command the server serves (a headless
``-p``/``--print``/``--json`` run, a session worker) with the warm start on, it hands its argv,
folder, environment, umask and stdio to the user's fork server and relays signals and the exit
status; otherwise, and whenever the server is absent or refuses, it runs the command itself.
``server.py`` is the fork server (``python -m coding_agent.warm.server``): it imports what those
commands import once, then forks a child per request. ``fingerprint.py`` is its staleness check.
docs/design/warm-start.md explains the design; :mod:`coding_agent.settings.warm_start` holds the
rendezvous both sides (and ``coding-agent doctor``) share.
"""
