"""What goes into the model's context, built in the worker and previewed by the TUI.

``system_prompt.py`` (the system prompt's sections), ``context_files.py`` (AGENTS.md and
CLAUDE.md), ``skills.py``, ``prompt_templates.py``, ``resources.py`` (where skills and templates
are found), ``folders.py`` (the one walker of command and skill folders), ``waiting.py`` (what an
untrusted project holds that ``/trust`` would load, counted with that walker) and ``images.py``
(images read from files or pasted).
"""
