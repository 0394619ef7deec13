"""The TUI's slash commands, one module per group.

``core.py`` (/help, /model, /quit …), ``sessions.py`` (/new, /resume, /reload …), ``tree.py``
(/tree, /fork, /rewind, /export), ``prompts.py`` (skills and prompt templates as commands),
``shell.py`` (``!cmd``) and ``trust.py`` (/trust).
"""
