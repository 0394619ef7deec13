"""What every side of the hooks feature agrees on: the events and the ``hooks.list`` service.

The session worker loads the hooks (:mod:`.settings`) and runs them; any presentation asks
:data:`HooksListing` (``hooks.list``) what was loaded, from which file, and which files or
entries were not loaded and why. The processes share nothing but this module, so it imports no
host code: only chord's service types.
"""

from __future__ import annotations

from typing import Protocol, TypedDict

from chord import Context, Service, define_service

__all__ = [
    "EVENTS",
    "HookInfo",
    "HooksListing",
    "HooksListingApi",
    "HooksSummary",
]

EVENTS: tuple[str, ...] = (
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    "Notification",
)
"""The Claude Code hook events a settings file may name (any other name is reported)."""


class HookInfo(TypedDict):
    event: str
    matcher: str
    """As written (``""`` when the entry has none: every tool)."""
    command: str
    timeout: float
    """Seconds (the entry's ``timeout``, else 60)."""
    source: str
    """The settings file it came from."""


class HooksSummary(TypedDict):
    hooks: list[HookInfo]
    problems: list[str]
    """Files and entries not loaded, each ``<file>: <problem>``."""
    waiting: list[str]
    """An untrusted project's settings files that hold hooks (loaded after ``/trust`` and a
    restart)."""


class HooksListingApi(Protocol):
    async def summary(self, ctx: Context) -> HooksSummary:
        """Every hook the session loaded, and what it did not load and why."""
        ...


HooksListing: Service[HooksListingApi] = define_service("hooks.list", HooksListingApi)
"""``hooks.list``: provided by the session facet (a remotable singleton)."""
