"""The indexer TUI facet: a progress panel and the ``/index`` command.

The facet holds no authority and no state of its own. Progress is read from where the design puts
it (docs/design/harness.md#task-kinds, docs/design/view.md#shape): every ``pi.conversation`` instance's ``view.tasks[id]`` of kind ``repo.indexer``,
whose ``status`` is the kind's ``describe()`` output (an :class:`~.contract.IndexerStatus`).
The facet observes the conversation service (instances that existed before it connected arrive
hydrated), keeps the latest rows per conversation in an :class:`IndexProgress`, and a panel
mounted through chord's ``Tui`` renders them; the panel hides itself when nothing is indexing.

``/index [path]`` calls :data:`~.contract.IndexerService` ``start`` (the path, if given, is
resolved by the session worker against its workspace) and reports the outcome as a toast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from textual.widgets import Static

from chord import Context, Delivery, FacetEnvironment, define_facet, inert
from chord.textual import (
    Arg,
    Arguments,
    Command,
    CommandOutcome,
    Notice,
    Tui,
    TuiService,
    register_commands,
)
from pico3 import ConversationService

from .contract import INDEXER_KIND, IndexerService, IndexRequest

__all__ = [
    "COMMANDS",
    "PANEL_ID",
    "IndexProgress",
    "IndexRow",
    "IndexTarget",
    "IndexerPanel",
    "index",
    "progress_text",
    "tui_facet",
]

PANEL_ID = "indexer"
"""The id of the panel the facet mounts."""


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One live indexer run as the view shows it."""

    conversation_id: int
    task_id: int
    status: Mapping[str, Any]


def _int(status: Mapping[str, Any], key: str) -> int:
    value = status.get(key, 0)
    return value if type(value) is int else 0


def progress_text(row: IndexRow) -> str:
    """One line for a run, e.g. ``Indexing #7: writing 64/120 files, 1 batch``."""
    status = row.status
    stage = status.get("stage") if isinstance(status.get("stage"), str) else "starting"
    total, done = _int(status, "files_total"), _int(status, "files_indexed")
    batches = _int(status, "batches_done")
    files = f"{done}/{total} files" if total else f"{done} files"
    plural = "batch" if batches == 1 else "batches"
    return f"Indexing #{row.task_id}: {stage} {files}, {batches} {plural}"


def _rows(conversation_id: int, tasks: object) -> list[IndexRow]:
    if not isinstance(tasks, dict):
        return []
    rows: list[IndexRow] = []
    for key, task in tasks.items():  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(task, dict) or task.get("kind") != INDEXER_KIND:  # pyright: ignore[reportUnknownMemberType]
            continue
        status = task.get("status")  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
        if not isinstance(key, str) or not key.isdigit() or not isinstance(status, dict):
            continue
        rows.append(IndexRow(conversation_id, int(key), status))  # pyright: ignore[reportUnknownArgumentType]
    return sorted(rows, key=lambda row: row.task_id)


class IndexProgress:
    """The latest indexer rows of every observed conversation, with change listeners.

    Each conversation's rows belong to the instance that delivered them (``owner``): when an
    instance is respawned the new one may deliver before the old one finished closing, and the
    old one's :meth:`drop` must not erase the new rows.
    """

    def __init__(self) -> None:
        self._by_conversation: dict[int, tuple[object, list[IndexRow]]] = {}
        self._listeners: list[Callable[[], None]] = []

    def rows(self) -> list[IndexRow]:
        """Every live run, by conversation then task id."""
        return [
            row for cid in sorted(self._by_conversation) for row in self._by_conversation[cid][1]
        ]

    def update(self, owner: object, conversation_id: int, tasks: object) -> None:
        """Replace a conversation's rows from its ``view.tasks``."""
        self._by_conversation[conversation_id] = (owner, _rows(conversation_id, tasks))
        self._changed()

    def drop(self, owner: object, conversation_id: int) -> None:
        """Forget a conversation whose instance ``owner`` closed."""
        current = self._by_conversation.get(conversation_id)
        if current is not None and current[0] is owner:
            del self._by_conversation[conversation_id]
            self._changed()

    def listen(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener()`` after every change; returns the remover."""
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()


class IndexerPanel(Static):
    """Shows :func:`progress_text` for every run of an :class:`IndexProgress`; hidden when none."""

    DEFAULT_CSS = """
    IndexerPanel { height: auto; padding: 0 1; }
    """

    def __init__(self, progress: IndexProgress) -> None:
        super().__init__("", markup=False, id="indexer-panel")
        self.progress = progress
        self._stop: Callable[[], None] | None = None
        self.display = False

    @property
    def text(self) -> str:
        """What the panel shows now (inert: file names are the repository's to choose)."""
        return inert("\n".join(progress_text(row) for row in self.progress.rows()))

    def on_mount(self) -> None:
        self._stop = self.progress.listen(self._render_rows)
        self._render_rows()

    def on_unmount(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None

    def _render_rows(self) -> None:
        text = self.text
        self.display = bool(text)
        self.update(text)


@dataclass(frozen=True, slots=True)
class IndexTarget:
    """What ``/index`` acts on: the TUI and the session's :data:`~.contract.IndexerService`."""

    tui: TuiService
    indexer: Any  # IndexerService: a remote service handle


async def index(target: IndexTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/index [FOLDER]``: start indexing the working tree (or ``FOLDER``) for code_search."""
    request: IndexRequest = {"root": args["folder"]} if args["folder"] else {}
    result = await target.indexer.start(request, ctx)
    if result["started"]:
        return f"Indexing started (task #{result['taskId']})"
    return Notice(f"Already indexing (task #{result['taskId']})", "warning")


COMMANDS = (
    Command(
        "index",
        "Index the working tree for code_search",
        index,
        args=(Arg("folder", optional=True, rest=True),),
    ),
)


@define_facet("@pi/indexer")
def tui_facet(env: FacetEnvironment) -> None:
    """Mount the progress panel, follow the views of the conversations no subagent owns (an
    index task runs in the root unless a caller names another conversation; a subagent's view
    is lazy across the wire and left unsubscribed, docs/wire.md#lazy-state), offer ``/index``."""
    tui = env.use(Tui)
    indexer = env.use(IndexerService)
    progress = IndexProgress()

    async def follow(conversation: Any, ctx: Context) -> None:
        if "owner" in conversation.conversation.value:
            return  # a subagent's conversation
        owner = object()
        seen: list[int] = []

        def deliver(value: Any, _ctx: Context, _delivery: Delivery) -> None:
            cid = value["conversation"]["id"]
            if not seen:
                seen.append(cid)
            progress.update(owner, cid, value.get("tasks"))

        stop = conversation.view.subscribe(deliver)
        try:
            await ctx.wait_cancelled()
        finally:
            stop()
            if seen:
                progress.drop(owner, seen[0])

    def activate() -> None:
        env.own(tui.mount_panel(PANEL_ID, lambda: IndexerPanel(progress)))
        env.own(register_commands(tui, COMMANDS, IndexTarget(tui, indexer)))

    env.observe(ConversationService, follow)
    env.on_activate(activate)
