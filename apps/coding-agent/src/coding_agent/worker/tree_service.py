"""``coding-agent.session-tree``: the session tree, branching, labels and ``/rewind``, in the worker.

The TUI's ``/tree``, ``/label`` and ``/rewind`` (and every attached TUI alike) call this
remotable singleton; it works on the harness directly (:mod:`coding_agent.session_files.tree` is the
pure model it returns):

* ``outline()`` — every branch of the session and its user prompts (time, model, labels,
  summaries);
* ``branch(conversation, at)`` — continue from entry ``at`` of that branch: a fork at ``at``
  (nothing is lost: the branch left behind stays as it was), or the conversation itself when
  ``at`` is its newest entry. The branch left gets a summary entry (its first prompt) if it has
  none yet;
* ``visit(conversation)`` — the user switched to that branch (``/branch``, ``/tree``, Ctrl+B):
  recorded as the branch they are on (what ``coding-agent export`` exports by default);
* ``label(conversation, at, name)`` — a label entry on entry ``at`` (default: the newest);
* ``rewind_plan(conversation, prompt)`` — what rewinding the files to just before user prompt
  ``prompt`` would do, file by file, conflicts included (:mod:`.file_history`);
* ``rewind(conversation, prompt, mode, overwrite)`` — ``mode`` is ``"conversation"`` (a new
  branch that ends just before the prompt), ``"files"`` (restore the files, stay in the
  conversation) or ``"both"``. Conflicting files are restored only when listed in ``overwrite``;
  the result names the new branch, the files restored and the files kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import anyio
from msgspec import UNSET

from chord import Context, Facet, FacetEnvironment, define_facet
from coding_agent.contracts import SessionTreeService
from coding_agent.session_files.tree import (
    BRANCH_KIND,
    LABEL_KIND,
    SUMMARY_KIND,
    SUMMARY_WIDTH,
    OutlineFolder,
    build_outline,
    lineage,
)
from coding_agent.worker.file_history import FileHistory
from pico3 import HarnessService, HarnessServiceApi, conversation_json, entry_json

__all__ = ["TREE_FACET_ID", "session_tree_facet"]

TREE_FACET_ID = "coding-agent/session-tree"

_PAGE = 1024
_FIRST_PAGE = 64


class _Tree:
    def __init__(
        self,
        harness: HarnessServiceApi,
        history: FileHistory,
        on_visit: Callable[[int], None] | None = None,
    ) -> None:
        self._harness = harness
        self._on_visit = on_visit
        self._history = history
        self._lock = anyio.Lock()
        # The outline is kept and brought up to date on each call: entries never change, so
        # only a branch's entries newer than the last call are read (a cold call reads all).
        self._folder = OutlineFolder()
        self._seen: dict[int, int] = {}
        self._outline_lock = anyio.Lock()

    # -- reading -------------------------------------------------------------------------
    async def _own_entries(
        self, conversation: int, ctx: Context, *, after: int = 0
    ) -> list[dict[str, Any]]:
        """The conversation's own entries newer than ``after``, oldest first."""
        handle = await self._harness.conversation(conversation, ctx)
        if handle is None:
            return []
        out: list[dict[str, Any]] = []
        before: int | None = None
        limit = _FIRST_PAGE  # a scan runs on into the parent: small pages read little of it
        while True:
            page = await handle.entries(ctx, limit=limit, before=before)
            own = [e for e in page if e.conversation_id == conversation and e.id > after]
            out.extend(entry_json(e) for e in own)
            if len(own) < len(page) or len(page) < limit:
                break
            before = page[-1].id
            limit = min(limit * 4, _PAGE)
        out.reverse()
        return out

    async def outline(self, ctx: Context) -> dict[str, Any]:
        async with self._outline_lock:
            kernel = self._harness.harness.kernel
            folder = self._folder
            for record in kernel.conversations.values():
                if record.id in folder.convs or record.owner is not UNSET:
                    continue
                folder.add_conversation(conversation_json(record))
            for cid in list(folder.convs):
                seen = self._seen.get(cid, 0)
                handle = await self._harness.conversation(cid, ctx)
                if handle is None:
                    continue
                newest = await handle.entries(ctx, limit=1)
                if not newest or newest[0].id <= seen or newest[0].conversation_id != cid:
                    continue
                for entry in await self._own_entries(cid, ctx, after=seen):
                    folder.fold(entry)
                self._seen[cid] = newest[0].id
            return folder.outline()

    async def _newest(self, conversation: int, ctx: Context) -> int | None:
        handle = await self._harness.conversation(conversation, ctx)
        if handle is None:
            raise ValueError(f"there is no conversation {conversation}")
        page = await handle.entries(ctx, limit=1)
        return page[0].id if page else None

    # -- branching -----------------------------------------------------------------------
    async def _summarize(self, conversation: int, ctx: Context) -> None:
        """Give ``conversation`` a summary entry (its first own prompt) if it has none."""
        own = await self._own_entries(conversation, ctx)
        if any(e["kind"] == SUMMARY_KIND for e in own):
            return
        outline = build_outline([{"id": conversation}], own)
        if not outline["prompts"]:
            return
        text = outline["prompts"][0]["text"]
        summary = text if len(text) <= SUMMARY_WIDTH else text[: SUMMARY_WIDTH - 1] + "…"
        handle = await self._harness.conversation(conversation, ctx)
        if handle is not None:
            await handle.write(SUMMARY_KIND, ctx, data={"summary": summary})

    async def _fork_before(self, conversation: int, prompt: int, ctx: Context) -> int:
        """A new branch of ``conversation`` that ends just before entry ``prompt``."""
        handle = await self._harness.conversation(conversation, ctx)
        if handle is None:
            raise ValueError(f"there is no conversation {conversation}")
        previous = await handle.entries(ctx, limit=1, before=prompt)
        if previous:
            fork = await handle.fork(previous[0].id, ctx)
            return fork.id
        # Nothing before the prompt: a fresh conversation with the same settings, marked as a
        # branch of this one (a pico3 fork needs an entry to fork at).
        kernel = self._harness.harness.kernel
        config = await handle.config(ctx)
        seed = {
            name: value
            for name, value in config.items()
            if (key := kernel.config_keys.get(name)) is not None and key.doc == "rewindable"
        }
        fork = await handle.fork("start", ctx, rewindable=seed)
        # Marked as a branch of the conversation that holds the prompt: nothing comes before
        # it, so it is the first of the lineage's root (a fork of a fork rewound to the first
        # prompt starts where the session does, not after the prompt the fork was made at).
        origin = list(await self._lineage(conversation, ctx))[-1]
        await fork.write(BRANCH_KIND, ctx, data={"from": origin})
        return fork.id

    async def branch(self, conversation: int, at: int, ctx: Context) -> int:
        async with self._lock:
            newest = await self._newest(conversation, ctx)
            if at == newest:
                return conversation
            handle = await self._harness.conversation(conversation, ctx)
            assert handle is not None
            await self._summarize(conversation, ctx)
            fork = await handle.fork(at, ctx)
            return fork.id

    async def visit(self, conversation: int, ctx: Context) -> None:
        del ctx
        record = self._harness.harness.kernel.conversations.get(conversation)
        if record is None or record.owner is not UNSET:
            raise ValueError(f"there is no branch {conversation}")
        if self._on_visit is not None:
            self._on_visit(conversation)

    async def label(self, conversation: int, at: int, name: str, ctx: Context) -> int:
        handle = await self._harness.conversation(conversation, ctx)
        if handle is None:
            raise ValueError(f"there is no conversation {conversation}")
        target = at if at > 0 else await self._newest(conversation, ctx)
        if target is None:
            raise ValueError("there is nothing to label yet (send a prompt first)")
        await handle.write(LABEL_KIND, ctx, data={"target": target, "label": name.strip()})
        return target

    # -- rewind --------------------------------------------------------------------------
    async def _lineage(self, conversation: int, ctx: Context) -> dict[int, int | None]:
        del ctx
        kernel = self._harness.harness.kernel
        records = [conversation_json(c) for c in kernel.conversations.values()]
        return lineage({"conversations": build_outline(records, [])["conversations"]}, conversation)

    async def rewind_plan(self, conversation: int, prompt: int, ctx: Context) -> list[Any]:
        path = await self._lineage(conversation, ctx)
        plans = await anyio.to_thread.run_sync(lambda: self._history.plan(path, prompt))
        return [plan.json() for plan in plans]

    async def rewind(
        self, conversation: int, prompt: int, mode: str, overwrite: list[str], ctx: Context
    ) -> dict[str, Any]:
        if mode not in ("conversation", "files", "both"):
            raise ValueError(f"rewind mode {mode!r} is not conversation, files or both")
        async with self._lock:
            result: dict[str, Any] = {"conversation": conversation, "restored": [], "kept": []}
            target = conversation
            if mode in ("conversation", "both"):
                await self._summarize(conversation, ctx)
                target = await self._fork_before(conversation, prompt, ctx)
                result["conversation"] = target
            if mode in ("files", "both"):
                path = await self._lineage(conversation, ctx)
                anchor = (
                    (await self._newest(conversation, ctx) or 0) if target == conversation else 0
                )
                history = self._history

                def restore() -> tuple[list[str], list[str]]:
                    plans = history.plan(path, prompt)
                    return history.restore(
                        plans, conversation=target, anchor=anchor, overwrite=overwrite
                    )

                restored, kept = await anyio.to_thread.run_sync(restore)
                result["restored"], result["kept"] = restored, kept
            return result


def session_tree_facet(
    history: FileHistory, *, on_visit: Callable[[int], None] | None = None
) -> Facet:
    """The worker facet serving :data:`SessionTreeService` over ``pi.harness`` and ``history``
    (``on_visit(conversation)``: the user switched to that branch)."""

    def setup(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        env.provide(SessionTreeService, cast(Any, _Tree(harness, history, on_visit)))

    return define_facet(TREE_FACET_ID, setup)
