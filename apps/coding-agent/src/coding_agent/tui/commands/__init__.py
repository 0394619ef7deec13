"""The TUI's slash commands, one module per group, each a table of
:class:`chord.textual.Command` values whose handlers are top-level functions
``handler(target, args, ctx)`` (a test calls them directly; see :mod:`chord.textual_commands`).

``builtin.py`` (/help, /quit, /stop: the app's own), ``core.py`` (/model, /thinking, /compact,
/new, /fork, /sandbox), ``sessions.py`` (/sessions, /resume, /reload, /name), ``tree.py``
(/tree, /branch, /label, /rewind, /export), ``prompts.py`` (/skills, and skills and prompt
templates as commands, registered with /context by its facet; what they act on in
``prompt_target.py``, a template's ``!`cmd``` lines in ``template_shell.py``),
``context_window.py`` (/context, its budget in ``context_budget.py``), ``trust.py`` (/trust)
and ``shell.py`` (``!cmd``). A new group is a module here with its table, registered by its
facet with :func:`chord.textual.register_commands`.
"""
