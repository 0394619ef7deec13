"""Which objects are chord replicated states: an identity registry, never duck typing.

The remote provider classifies a service member as a state member only if it was created by
chord (``is_replicated_state``). A weak set keeps the registry from holding states alive.
"""

from __future__ import annotations

import weakref

__all__ = ["is_replicated_state", "register"]

_STATES: weakref.WeakSet[object] = weakref.WeakSet()


def register(state: object) -> None:
    """Record ``state`` as a chord replicated state (called by the state constructors)."""
    _STATES.add(state)


def is_replicated_state(obj: object) -> bool:
    """True for states created by chord (mutable, replica or attached), false for look-alikes."""
    try:
        return obj in _STATES
    except TypeError:  # unhashable objects are never states
        return False
