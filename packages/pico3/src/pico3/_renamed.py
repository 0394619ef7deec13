"""Public names renamed for "one meaning per name" (issue 37), kept one release as deprecated aliases.

============================================ ===============================================
old name (deprecated, removed next release)   new name and why
============================================ ===============================================
``pico3.GENERATION_KIND``                    ``pico3.MODEL_CALL_KIND``: the core task that
                                             makes one model call. "Generation" is chord's
                                             reload generation. The durable kind name stays
                                             ``"pi.generation"`` (stored in every session).
``pico3.models.Provider``                    ``pico3.models.ModelProvider``: a model backend.
                                             "Provider" alone is the facet that provides a
                                             chord service.
``pico3.models.DeferringProvider``           ``pico3.models.DeferringModelProvider``
``pico3.models.ProviderError``               ``pico3.models.ModelProviderError``
============================================ ===============================================

``pico3`` and ``pico3.models`` answer an old name through their module ``__getattr__`` with a
:class:`DeprecationWarning` that names the new one, so a package written against the last release
keeps working (and is told what to change). Nothing in this repository uses the old names: the
renames were made by a script that never rewrites this module or ``tests/test_renamed_names.py``.

The internal renames of the same change need no alias (no outside package may import them):
``pico3.chord`` → ``pico3.facets``, ``pico3.datamodel`` → ``pico3.session_data``,
``pico3.turn.generation`` → ``pico3.turn.model_call``, ``chord.packages`` →
``chord.facet_packages``, ``pico3.kernel.view.Delivery`` → ``PendingEnvelope``,
``pico3.storage._lines.Line`` → ``StoredCommit``.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

__all__ = ["RENAMED", "renamed_attribute"]

RENAMED: dict[str, dict[str, str]] = {
    "pico3": {"GENERATION_KIND": "MODEL_CALL_KIND"},
    "pico3.models": {
        "Provider": "ModelProvider",
        "DeferringProvider": "DeferringModelProvider",
        "ProviderError": "ModelProviderError",
    },
}
"""Per public module: old name → new name."""


def renamed_attribute(module: str, name: str) -> Any:
    """The value of ``module``'s old ``name`` (warning that it is deprecated), or AttributeError.

    Called from the module's ``__getattr__`` once its own names did not answer ``name``."""
    new = RENAMED.get(module, {}).get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is renamed {module}.{new} (one name, one meaning); the old name is "
        f"removed in the next release: import {new} from {module} instead",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(sys.modules[module], new)
