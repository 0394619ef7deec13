"""The system prompt as a session facet: every section rebuilt before each generation.

:mod:`coding_agent.context.system_prompt` says what the sections are and reads their sources (the base
prompt or ``SYSTEM.md``, ``APPEND_SYSTEM.md``, the ``AGENTS.md`` / ``CLAUDE.md`` files of
:mod:`coding_agent.context.context_files`, the skills); this facet registers them on the harness
and fills them from a ``system_instructions`` hook, so an edited file applies from the next turn.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chord import Context, Facet, FacetEnvironment, define_facet
from coding_agent.context.context_files import touched_paths
from coding_agent.context.system_prompt import SECTION_ORDER, build_sections, prompt_sections
from pico3 import MODEL_CALL_KIND, Harness, HarnessService

__all__ = ["SYSTEM_PROMPT_FACET_ID", "system_prompt_facet"]

SYSTEM_PROMPT_FACET_ID = "coding-agent/context-files"
"""The id the facet has always had (a reload replaces facets by id)."""

_log = logging.getLogger("coding_agent.worker")


def system_prompt_facet(
    cwd: str | os.PathLike[str], *, system: str | None = None, append: str | None = None
) -> Facet:
    """A session facet building the system prompt's sections before every generation.

    It owns every section of :mod:`coding_agent.context.system_prompt`: the base prompt (or
    ``SYSTEM.md``), ``APPEND_SYSTEM.md``, ``context-files`` and the skills list. Every source is read afresh each time; a section
    with nothing in it is left out (or removed, when its file disappears). Problems (a skill
    whose frontmatter does not parse) are logged once each, never raised. ``system`` and
    ``append``: this run's ``--system-prompt`` and ``--append-system-prompt`` texts
    (:func:`~coding_agent.context.system_prompt.build_sections`)."""
    folder = Path(cwd)
    sections = prompt_sections()
    reported: set[str] = set()
    worked_in: dict[int, tuple[int, set[str]]] = {}  # conversation -> (newest entry seen, folders)
    harness_box: list[Harness] = []

    async def touched(conversation_id: int, ctx: Context) -> set[str]:
        """The files and folders the conversation's tool calls read, edited or listed: its entries
        newer than the last look, paged newest first in growing pages (a turn adds a few
        entries: a first page of 200 decoded ~200 entries a turn to find them; all of them
        once per worker start)."""
        seen, folders = worked_in.get(conversation_id, (0, set()))
        handle = await harness_box[0].conversation(conversation_id, ctx) if harness_box else None
        if handle is None:
            return folders
        newest, before = seen, None
        limit = 8 if seen else 200
        while True:
            page = await handle.entries(ctx, limit=limit, before=before)
            fresh = [entry for entry in page if entry.id > seen]
            messages: list[Any] = []
            for entry in fresh:
                newest = max(newest, entry.id)
                if isinstance(entry.model, list):
                    messages.extend(entry.model)
            if messages:  # one call a page: it resolves the project folder once per call
                folders |= touched_paths(messages, folder)
            if len(fresh) < len(page) or len(page) < limit:
                break
            before = page[-1].id
            limit = min(limit * 4, 200)
        worked_in[conversation_id] = (newest, folders)
        return folders

    async def instruct(payload: dict[str, Any], api: Any, ctx: Context) -> None:
        built = build_sections(
            folder, touched=await touched(api.conversation_id, ctx), system=system, append=append
        )
        for warning in built.warnings:
            if warning not in reported:
                reported.add(warning)
                _log.warning("%s", warning)
        draft = payload["sections"]
        for key in SECTION_ORDER:
            value = built.values.get(key)
            if value is not None:
                draft.set(sections[key], value)
            elif sections[key] in draft:
                draft.delete(sections[key])

    def install(harness: Harness) -> Callable[[], None]:
        harness_box[:] = [harness]
        removers: list[Callable[[], None]] = []

        def uninstall() -> None:
            for remove in reversed(removers):
                remove()
            removers.clear()

        try:
            for key in SECTION_ORDER:
                removers.append(harness.register_section(sections[key]))
            ns = harness.namespace("context-files")
            removers.append(ns.unregister)
            removers.append(harness.hooks(ns, MODEL_CALL_KIND, {"system_instructions": instruct}))
        except BaseException:
            uninstall()
            raise
        return uninstall

    def setup(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        env.on_activate(lambda: env.own(harness.add_registration(install)))

    return define_facet(SYSTEM_PROMPT_FACET_ID, setup)
