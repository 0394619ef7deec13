"""The core turn loop: the four core kinds and the operations that feed them.

* :mod:`~pico3.turn.model_call` — ``pi.generation``: preparation, streaming, retry, outcomes;
* :mod:`~pico3.turn.tool` — ``pi.tool``: checks, hooks, the ``started`` evidence, replay;
* :mod:`~pico3.turn.post_tools` — ``pi.post_tools``: controls and how the turn goes on;
* :mod:`~pico3.turn.collapse` — ``pi.collapse``: summaries and head moves;
* :mod:`~pico3.turn.placement` — admission and boundary placement of queued input;
* :mod:`~pico3.turn.conversation` — send, reset/handoff, collapse, input abort, entries;
* :mod:`~pico3.turn.message_mirror` — coalescing a model stream into ``turn.message``;
* :mod:`~pico3.turn.system` — the managed ``pi.system`` entries (sections, tool loadout);
* :mod:`~pico3.turn.sections` — system sections and the draft hooks edit.

:func:`install` registers the core kinds on a harness (before ``resume``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pico3.tasks.kinds import TaskKind
from pico3.turn.collapse import COLLAPSE_KIND
from pico3.turn.model_call import MODEL_CALL_KIND
from pico3.turn.post_tools import POST_TOOLS_KIND
from pico3.turn.tool import TOOL_KIND

__all__ = [
    "COLLAPSE_KIND",
    "CORE_KINDS",
    "MODEL_CALL_KIND",
    "POST_TOOLS_KIND",
    "TOOL_KIND",
    "install",
]


CORE_KINDS: tuple[TaskKind, ...] = (MODEL_CALL_KIND, TOOL_KIND, POST_TOOLS_KIND, COLLAPSE_KIND)
"""The core kinds (fixed, not replaceable by extensions). Their objects are the kind tokens
hooks are registered with: ``h.hooks(ns, TOOL_KIND, {"before_tool": ...})``."""


def install(harness: Any) -> Callable[[], None]:
    """Register the core kinds on ``harness``; returns a remover (idempotent)."""
    removers = [harness.register_task_kind(kind) for kind in CORE_KINDS]

    def remove() -> None:
        for remover in removers:
            remover()

    return remove
