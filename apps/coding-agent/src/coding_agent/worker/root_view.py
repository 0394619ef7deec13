"""Following the view of the branch the session is on from a facet beside the session's facets.

``-p``/``--json`` (:mod:`coding_agent.cli.headless`) and ``coding-agent acp``
(:mod:`coding_agent.acp.session`) run the worker's facets in their own process and follow one
conversation the same way: :class:`BranchView` observes every ``pi.conversation`` instance
offered and keeps each one's newest view; once the session is open the caller :meth:`selects
<BranchView.select>` the branch the session is on (the worker's status ``branch``: the one the
user last prompted in, made or switched to, see :mod:`coding_agent.following`), or ``None`` for
the lowest root conversation (one with no parent and no owner). From then on every revision of
that conversation's view is handed on, the first as a ``hydrate`` that says it was ``chosen``.
An instance of the same conversation offered again (a reopen) is taken again the same way.

In the session's own process the caller selects the branch the session folder's record names
before the session opens (so the first commits are seen), then the worker's word once it is
open (:attr:`~coding_agent.worker.status.WorkerStatus.branch`: the record checked against the
storage), which moves to another conversation only when the record was stale; across the wire (``-p --server``, ``--wait-for-approval``) :meth:`BranchView.status_facet`
selects what the worker's first status document names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, cast

from chord import Context, Delivery, Facet, FacetEnvironment, define_facet
from coding_agent.contracts import WorkerStatusService
from pico3 import ConversationService, ConversationServiceApi

__all__ = ["BranchView", "RootRevision"]

RootRevision = Callable[[ConversationServiceApi, Any, Literal["hydrate", "update"], bool], None]
"""``(instance, view value, "hydrate" or "update", chosen)``: ``chosen`` is true on the hydrate
that made ``instance`` the conversation followed. Called synchronously, in order."""


class BranchView:
    """Calls ``on_revision`` with every revision of the selected conversation's view (see the
    module docstring); :meth:`facet` goes in the session's host."""

    def __init__(self, facet_id: str, on_revision: RootRevision) -> None:
        self._facet_id = facet_id
        self._on_revision = on_revision
        # conversation id -> (instance, its newest view, a root?), for the hydrated instances
        self._seen: dict[int, tuple[ConversationServiceApi, Any, bool]] = {}
        # conversation id -> its newest view, kept once its instance is gone (a subagent's)
        self._latest: dict[int, Any] = {}
        self._selected = False
        self._wanted: int | None = None
        self._chosen: ConversationServiceApi | None = None

    def latest(self, conversation: int) -> Any:
        """The newest view seen of ``conversation`` (any offered: a subagent's too, kept after
        its instance is withdrawn), or ``None`` when none was seen."""
        return self._latest.get(conversation)

    def select(self, branch: int | None) -> None:
        """Follow conversation ``branch`` (``None``: the lowest root) as soon as it is seen;
        selecting what is followed already changes nothing."""
        if branch is not None and self._chosen is not None and branch == self._wanted:
            return
        if branch is None and self._chosen is not None and self._wanted is not None:
            found = self._seen.get(self._wanted)
            if found is not None and found[2]:
                return  # a root is followed already
        self._selected, self._wanted = True, branch
        self._choose()

    def _choose(self) -> None:
        if not self._selected:
            return
        if self._wanted is None:
            roots = [key for key, (_, _, root) in self._seen.items() if root]
            if not roots:
                return
            self._wanted = min(roots)  # taken again after a reopen
        found = self._seen.get(self._wanted)
        if found is None or found[0] is self._chosen:
            return
        instance, value, _ = found
        self._chosen = instance
        self._on_revision(instance, value, "hydrate", True)

    def facet(self) -> Facet:
        """The facet observing ``pi.conversation``."""

        def setup(env: FacetEnvironment) -> None:
            env.observe(ConversationService, self._observe)

        return define_facet(self._facet_id, setup)

    def status_facet(self) -> Facet:
        """A facet that :meth:`select`\\ s the branch the worker's first status document names
        (``branch``; ``None`` when it names none)."""

        def setup(env: FacetEnvironment) -> None:
            status = env.use(WorkerStatusService)

            def on_status(value: Any, ctx: Context, delivery: Delivery) -> None:
                del ctx, delivery
                if isinstance(value, dict) and not self._selected:
                    branch = cast(dict[str, Any], value).get("branch")
                    self.select(branch if type(branch) is int else None)

            def activate() -> None:
                env.own(status.state.subscribe(on_status))

            env.on_activate(activate)

        return define_facet(f"{self._facet_id}-branch", setup)

    async def _observe(self, instance: ConversationServiceApi, ctx: Context) -> None:
        key: list[int] = []

        def deliver(value: Any, _ctx: Context, delivery: Delivery) -> None:
            if instance is self._chosen:
                self._on_revision(instance, value, delivery.kind, False)
            conversation = value.get("conversation") if isinstance(value, dict) else None
            if not isinstance(conversation, dict) or type(conversation.get("id")) is not int:
                return
            root = "parent" not in conversation and "owner" not in conversation
            key[:] = [conversation["id"]]
            self._latest[conversation["id"]] = value
            self._seen[conversation["id"]] = (instance, value, root)
            if delivery.kind == "hydrate":
                self._choose()

        stop = instance.view.subscribe(deliver)
        try:
            await ctx.wait_cancelled()
        finally:
            stop()
            if key and self._seen.get(key[0], (None,))[0] is instance:
                del self._seen[key[0]]
            if self._chosen is instance:
                self._chosen = None
