"""A package's public names bound at their first use (PEP 562).

A package ``__init__`` lists each public name with the module that defines it and hands the
list to :func:`lazy_exports`; the module ``__getattr__`` it gets back imports that module when
the name is first used and binds the name in the package, so the next use is a plain
attribute. ``__all__`` and what each name is stay as they were; a process imports only the
parts it touches. Used by chord, ``chord.transport``, ``chord.wire``, pico3 and
``pico3.storage``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    namespace: dict[str, Any],
    lazy: Mapping[str, str],
    *,
    missing: Callable[[str], object] | None = None,
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``(__getattr__, __dir__)`` of the package whose ``globals()`` is ``namespace``:
    a name of ``lazy`` (public name -> defining module) is imported at its first use; any
    other name goes to ``missing(name)`` (a deprecated old name, say), or raises the usual
    :class:`AttributeError`."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> object:
        module = lazy.get(name)
        if module is None:
            if missing is not None:
                return missing(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next use is a plain module attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace["__all__"]))

    return __getattr__, __dir__
