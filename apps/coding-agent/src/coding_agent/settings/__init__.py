"""The user's settings, read by both processes: what the user configured and decided.

``config.py`` (config.toml), ``trust.py`` (trusted folders), ``permissions.py`` and
``permission_modes.py`` (permission rules and the Shift+Tab modes), ``pi_setup.py`` (what of a
pi user's ``~/.pi/agent/settings.json`` and ``models.json`` is used, and what is not),
``secret_env.py`` (which environment variables are secrets), ``guarded_paths.py`` (files that
run code), ``sandbox.py`` (the sandbox policy), ``safety.py`` (the packages the agent's safety
depends on), ``package_reload.py`` (rescanning the installed facet packages), ``changes.py``
(how a change of settings is described in the transcript) and ``run_options.py`` (Claude Code's
run-scoped flags: ``--allowedTools``, ``--append-system-prompt``, ``--mcp-config``…, for one run).
"""
