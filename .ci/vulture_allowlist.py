"""Names vulture reports as unused that a protocol requires (run by .ci/run through
``uv run vulture``; configured in pyproject.toml's ``[tool.vulture]``).

Each line "uses" one name. Keep it short: a name goes here only when the signature is fixed by
Python or a library (context managers' ``__exit__``/``__aexit__``, Textual and pluggy
callbacks), never to hide code that is really dead.
"""

# __exit__ / __aexit__ parameters (the context-manager protocol fixes the signature)
exc_type  # type: ignore[name-defined]  # noqa: B018, F821
traceback  # type: ignore[name-defined]  # noqa: B018, F821
