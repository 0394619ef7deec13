"""The TUI's session tree commands: ``/tree``, ``/label NAME`` and ``/rewind`` (Esc Esc).

They call the worker's :data:`~coding_agent.contracts.SessionTreeService` (so a second,
attached TUI sees and does exactly the same) and move the TUI to another branch with
:meth:`~coding_agent.tui.RemoteConversationClient.follow`:

* ``/tree`` — the session's branches and the user prompts on each, as a Textual ``Tree``
  (:class:`TreeScreen`): each prompt with its time, model and label, each branch with its
  summary. Enter on a prompt continues from the end of its turn (a new branch; nothing is
  lost), or switches to that branch when it is the branch's newest prompt; Enter on a branch
  switches to it. The branch you were on is marked and selected when the tree opens, and
  ``b`` in the tree (or Ctrl+B anywhere) goes back to the branch you left last;
* ``/export [FILE]`` — write this branch as a self-contained HTML page (``.jsonl``: the raw
  entries) to ``FILE`` (default ``<session id>.html`` in the project folder);
* ``/branch N`` — switch to branch ``N`` of this session (the numbers ``/tree`` shows; a
  ``/fork``'s parent is a branch like any other). ``/resume branch N`` (or ``/resume #N``) does
  the same through :attr:`TreeHost.switch_branch`;
* ``/label NAME`` — label the newest entry of this branch (shown on its node in ``/tree``);
* ``/rewind`` (and Esc twice on an empty editor) — pick an earlier prompt of this branch, then
  what to rewind: the conversation and the files, the conversation only, or the files only. A
  file changed outside the agent since it last wrote it is a conflict: each one is shown and you
  keep it or overwrite it. Rewinding the conversation continues in a new branch that ends just
  before the prompt, with the prompt's text back in the editor.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, cast

import anyio
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode as UiNode

from chord import Context, Facet, FacetEnvironment, define_facet
from chord.textual import (
    Arg,
    Arguments,
    Choice,
    Command,
    CommandError,
    CommandOutcome,
    Notice,
    Tui,
    TuiService,
    register_commands,
)
from coding_agent.contracts import SessionTreeService
from coding_agent.session_files.folders import Session, SessionError
from coding_agent.session_files.tree import (
    TreeNode,
    branch_number,
    branch_of_number,
    build_tree,
    path_prompts,
)

__all__ = [
    "TREE_COMMANDS",
    "TREE_COMMANDS_FACET_ID",
    "TreeChoice",
    "TreeScreen",
    "TreeTarget",
    "add_children",
    "back_to_branch",
    "branch",
    "export",
    "label",
    "node_label",
    "populate_tree",
    "rewind",
    "tree",
    "tree_commands_facet",
]

TREE_COMMANDS_FACET_ID = "@coding-agent/tree-commands"

_MODES = [
    Choice("both", "Conversation and files"),
    Choice("conversation", "Conversation only (files stay as they are)"),
    Choice("files", "Files only (stay in this conversation)"),
]
_NO_FILES = [Choice("conversation", "Conversation (no file to restore)")]
"""``Rewind what?`` when the agent changed no file since the prompt: the files choices would
restore nothing, so only the conversation is offered (Esc still cancels)."""
_WIDTH = 60


def _clock(stamp: float | None) -> str:
    if stamp is None:
        return "--:--"
    return datetime.fromtimestamp(stamp).strftime("%m-%d %H:%M")


def _cut(text: str, width: int = _WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def node_label(node: TreeNode, *, current: int | None) -> Text:
    """One node's line: a prompt's time, text, model and label; a branch's id and summary."""
    line = Text()
    if node.kind == "branch":
        here = node.conversation_id == current
        line.append("● " if here else "⎇ ", style="bold green" if here else "bold")
        line.append(f"branch {node.number}")
        if node.summary:
            line.append(f" — {_cut(node.summary)}", style="italic")
        if here:
            line.append("  (you are here)", style="green")
        return line
    line.append(f"{_clock(node.time)}  ", style="dim")
    line.append(_cut(node.text or "(empty prompt)"))
    if node.model:
        line.append(f"  {node.model}", style="cyan")
    if node.label:
        line.append(f"  [{node.label}]", style="bold magenta")
    return line


def _path_to(roots: Sequence[TreeNode], current: int | None) -> set[int]:
    """``id()`` of every node from a root down to the branch node of ``current``."""
    if current is None:
        return set()
    stack: list[tuple[TreeNode, tuple[TreeNode, ...]]] = [(r, ()) for r in roots]
    while stack:
        node, above = stack.pop()
        if node.kind == "branch" and node.conversation_id == current:
            return {id(n) for n in (*above, node)}
        stack.extend((child, (*above, node)) for child in node.children)
    return set()


def add_children(
    parent: UiNode[TreeNode],
    children: Sequence[TreeNode],
    *,
    current: int | None,
    expanded: set[int],
) -> UiNode[TreeNode] | None:
    """Add ``children`` under ``parent``: nodes in ``expanded`` (``id()``) open with their own
    children added, the others closed, their children added when opened (see
    :meth:`TreeScreen.on_tree_node_expanded`), so a big session costs only what is shown.
    Returns the UI node of the ``current`` branch if it was added."""
    found: UiNode[TreeNode] | None = None
    pending: list[tuple[UiNode[TreeNode], Sequence[TreeNode]]] = [(parent, children)]
    while pending:
        ui_parent, nodes = pending.pop()
        for child in nodes:
            label = node_label(child, current=current)
            if child.children:
                opened = id(child) in expanded
                ui = ui_parent.add(label, data=child, expand=opened, allow_expand=True)
                if opened:
                    pending.append((ui, child.children))
            else:
                ui = ui_parent.add_leaf(label, data=child)
            if child.kind == "branch" and child.conversation_id == current:
                found = ui
    return found


def populate_tree(
    widget: Tree[TreeNode], roots: Sequence[TreeNode], *, current: int | None
) -> UiNode[TreeNode] | None:
    """Fill ``widget`` with ``roots``: the way down to the ``current`` branch (and that branch)
    open, every other node closed until it is opened. Returns the current branch's node."""
    return add_children(widget.root, roots, current=current, expanded=_path_to(roots, current))


class TreeChoice:
    """What the tree screen returns: continue at a prompt, switch to a branch, or go back."""

    def __init__(self, action: str, node: TreeNode | None = None) -> None:
        self.action = action  # "continue" | "switch" | "back"
        self.node = node


class TreeScreen(ModalScreen[TreeChoice | None]):
    """The ``/tree`` view: a Textual ``Tree`` of the session's branches and prompts."""

    DEFAULT_CSS = """
    TreeScreen { align: center middle; }
    TreeScreen > #tree-box { width: 90%; height: 85%; border: round $accent; background: $surface; }
    TreeScreen #tree-help { height: 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Close"),
        Binding("b", "back", "Back to the branch you left"),
    ]

    def __init__(
        self,
        roots: Sequence[TreeNode],
        *,
        current: int | None,
        back: int | None,
        back_number: int | None = None,
    ):
        """``back`` is the conversation ``b`` returns to; ``back_number`` its number as users
        see it."""
        super().__init__()
        self.roots = list(roots)
        self.current = current
        self.back = back
        self.back_number = back_number if back_number is not None else back

    def compose(self) -> ComposeResult:
        tree: Tree[TreeNode] = Tree("session", id="tree-box")
        tree.show_root = False
        yield tree
        hint = "enter: continue here · esc: close"
        if self.back is not None:
            hint += f" · b: back to branch {self.back_number}"
        yield Static(hint, id="tree-help", markup=False)

    def on_mount(self) -> None:
        tree = self.query_one(Tree)
        here = populate_tree(cast(Tree[TreeNode], tree), self.roots, current=self.current)
        tree.focus()
        if here is not None:
            tree.move_cursor(here)

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[TreeNode]) -> None:
        node = event.node
        if node.data is not None and node.data.children and not node.children:
            add_children(node, node.data.children, current=self.current, expanded=set())

    def on_tree_node_selected(self, event: Tree.NodeSelected[TreeNode]) -> None:
        node = event.node.data
        if node is None:
            return
        event.stop()
        if node.kind == "branch" or node.tip:
            self.dismiss(TreeChoice("switch", node))
        else:
            self.dismiss(TreeChoice("continue", node))

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_back(self) -> None:
        if self.back is not None:
            self.dismiss(TreeChoice("back"))


class TreeHost:
    """What the tree commands need from the running TUI (the app, in practice)."""

    def __init__(
        self,
        *,
        conversation_id: Callable[[], int | None],
        follow: Callable[[int], None],
        busy: Callable[[], bool],
        restore_prompt: Callable[[str], None],
        show_screen: Callable[[ModalScreen[Any]], Any],
        session: Callable[[], Session] | None = None,
        on_follow: Callable[[Callable[[int | None, int | None], None]], Callable[[], None]]
        | None = None,
    ) -> None:
        """``on_follow(listener)`` calls ``listener(previous, new)`` on every switch of the
        followed conversation, whoever makes it (``/fork`` too); returns the remover."""
        self.session = session
        self.on_follow = on_follow
        self.conversation_id = conversation_id
        self.follow = follow
        self.busy = busy
        self.restore_prompt = restore_prompt
        self.show_screen = show_screen
        # Set when the facet is active: ``/branch``'s handler (args ``N`` or ``#N``), for
        # ``/resume branch N``; it returns whether it switched (else its toast said why).
        self.switch_branch: Callable[[str, Context], Awaitable[bool]] | None = None


def _plan_text(plan: Sequence[Mapping[str, Any]], cwd: Path | None) -> str:
    def shown(path: str) -> str:
        if cwd is not None:
            try:
                return str(Path(path).relative_to(cwd))
            except ValueError:
                pass
        return path

    restore = [shown(p["path"]) for p in plan if p["action"] in ("restore", "delete")]
    conflicts = [shown(p["path"]) for p in plan if p["action"] == "conflict"]
    lost = [shown(p["path"]) for p in plan if p["action"] == "lost"]
    if not restore and not conflicts and not lost:
        return "The agent changed no files since then."
    lines = []
    if restore:
        lines.append(f"Files to restore: {', '.join(restore)}")
    if conflicts:
        lines.append(f"Changed outside the agent since (you decide): {', '.join(conflicts)}")
    if lost:
        lines.append(f"Too large to have been kept, left as they are: {', '.join(lost)}")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class TreeTarget:
    """What the tree commands act on: the running TUI (:class:`TreeHost`), the TUI service,
    the worker's :data:`~coding_agent.worker.tree_service.SessionTreeService`, the project
    folder (``/export``'s default place) and the branches left, newest last (Ctrl+B)."""

    host: TreeHost
    tui: TuiService
    service: Any  # SessionTreeService: a remote service handle
    cwd: Path | None = None
    left: list[int] = field(default_factory=lambda: [])

    def followed(self, previous: int | None, branch: int | None) -> None:
        """Remember the branch left by a switch (``/tree``, ``/branch``, ``/fork``, a rewind),
        for Ctrl+B."""
        if previous is not None and branch is not None and previous != branch:
            self.left.append(previous)

    async def go(self, branch: int, ctx: Context) -> None:
        """Follow ``branch`` (the branch left is remembered for Ctrl+B) and tell the worker
        it is the one the user is on (what ``coding-agent export`` exports)."""
        if self.host.on_follow is None:  # a host that does not report its switches
            self.followed(self.host.conversation_id(), branch)
        self.host.follow(branch)
        await self.visited(branch, ctx)

    async def visited(self, branch: int, ctx: Context) -> None:
        try:
            await self.service.visit(branch, ctx)
        except Exception:  # an older worker, or it went away: export's default only
            pass

    async def number(self, conversation: int | None, ctx: Context) -> str:
        """The branch's number as users see it (1, 2, 3 in creation order)."""
        try:
            found = branch_number(await self.service.outline(ctx), conversation)
        except Exception:
            found = None
        return str(found if found is not None else conversation)


def _live_conversation(target: TreeTarget) -> int:
    current = target.host.conversation_id()
    if current is None:
        raise CommandError("The worker is unavailable")
    return current


def _not_busy(target: TreeTarget) -> None:
    if target.host.busy():
        raise CommandError("A turn is running: wait for it (or Esc) first")


async def tree(target: TreeTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/tree``: the session's branches and prompts; continue at a prompt or switch."""
    current = target.host.conversation_id()
    outline = await target.service.outline(ctx)
    roots = build_tree(outline)
    back = target.left[-1] if target.left else None
    screen = TreeScreen(roots, current=current, back=back, back_number=branch_number(outline, back))
    modal = await target.tui.acquire_modal(ctx)  # one dialog at a time (approvals wait)
    try:
        choice = await target.host.show_screen(screen)
    finally:
        modal.close()
    if not isinstance(choice, TreeChoice):
        return None
    if choice.action == "back":
        return await back_to_branch(target, ctx)
    node = choice.node
    assert node is not None
    if choice.action == "switch":
        if node.conversation_id == current:
            return f"Already on branch {node.number}"
        await target.go(node.conversation_id, ctx)
        return f"Switched to branch {node.number}"
    if target.host.busy():
        return Notice("A turn is running: wait for it (or Esc) first", "warning")
    branch_id = await target.service.branch(node.conversation_id, cast(int, node.end), ctx)
    await target.go(branch_id, ctx)
    shown = await target.number(branch_id, ctx)
    return f"Continuing after “{_cut(node.text, 40)}” in branch {shown}"


async def back_to_branch(target: TreeTarget, ctx: Context) -> CommandOutcome:
    """Ctrl+B (``b`` in ``/tree``): back to the branch left last (after ``/fork`` too: the
    branch forked from)."""
    if not target.left:
        return "No branch to go back to"
    branch_id = target.left.pop()
    current = target.host.conversation_id()
    target.host.follow(branch_id)  # the branch left is remembered (followed): b goes back
    if target.host.on_follow is None:
        target.followed(current, branch_id)
    await target.visited(branch_id, ctx)
    return f"Back on branch {await target.number(branch_id, ctx)}"


async def label(target: TreeTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/label NAME``: label the newest entry of this branch."""
    current = _live_conversation(target)
    await target.service.label(current, 0, args["name"], ctx)
    return f"Labelled: {args['name']}"


async def rewind(target: TreeTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/rewind``: pick a prompt of this branch, then rewind the conversation, the files or
    both (module docstring)."""
    current = _live_conversation(target)
    _not_busy(target)
    prompts = list(reversed(path_prompts(await target.service.outline(ctx), current)))
    if not prompts:
        return "Nothing to rewind yet"
    modal = await target.tui.acquire_modal(ctx)
    try:
        choices = [
            Choice(str(p["id"]), f"{_clock(p['time'])}  {_cut(p['text'] or '(empty)')}")
            for p in prompts
        ]
        picked = await modal.choose("Rewind to before which prompt?", choices)
        if picked is None:
            return None
        prompt = next(p for p in prompts if str(p["id"]) == picked)
        plan = await target.service.rewind_plan(current, prompt["id"], ctx)
        body = _plan_text(plan, target.cwd)
        modes = _NO_FILES if body == _plan_text([], None) else _MODES
        mode = await modal.choose("Rewind what?", modes, body=body)
        if mode is None:
            return None
        overwrite: list[str] = []
        if mode in ("files", "both"):
            for item in plan:
                if item["action"] != "conflict":
                    continue
                shown = _plan_text([{**item, "action": "restore"}], target.cwd).split(": ", 1)[1]
                body = (
                    f"{shown} was {item['detail'] or 'changed outside the agent'} after "
                    "the agent last wrote it. Overwrite it with its content from before "
                    "the prompt, or keep it as it is now?"
                )
                if await modal.confirm(f"Conflict: {shown}", body, yes="Overwrite", no="Keep"):
                    overwrite.append(item["path"])
    finally:
        modal.close()
    result = await target.service.rewind(current, prompt["id"], mode, overwrite, ctx)
    parts = [f"Rewound to before “{_cut(prompt['text'], 40)}”"]
    branch_id = result["conversation"]
    if branch_id != current:
        await target.go(branch_id, ctx)
        target.host.restore_prompt(prompt["text"])
        parts.append(f"now in branch {await target.number(branch_id, ctx)}")
    if mode != "conversation":
        parts.append(f"{len(result['restored'])} file(s) restored")
        if result["kept"]:
            parts.append(f"{len(result['kept'])} kept as they are")
    return " — ".join(parts)


async def export(target: TreeTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/export [FILE]``: write this branch as HTML (``.jsonl``: the raw entries)."""
    current = target.host.conversation_id()
    if target.host.session is None or current is None:
        raise CommandError("/export: the worker is unavailable")
    # lazy: start-up time (the exporter loads on the first /export)
    from coding_agent.session_files.export import write_export
    from coding_agent.session_files.index import session_name

    session = target.host.session()
    wanted = args["file"] or f"{session.id}.html"

    def write() -> Path:
        path = Path(wanted).expanduser()
        if not path.is_absolute():
            path = (target.cwd or Path.cwd()) / path
        form = "jsonl" if path.suffix == ".jsonl" else "html"
        return write_export(session, path, format=form, branch=current, name=session_name(session))

    try:
        written = await anyio.to_thread.run_sync(write)
    except (OSError, SessionError) as error:
        raise CommandError(f"/export: {error}") from error
    return f"Exported branch {await target.number(current, ctx)} to {written}"


async def branch(target: TreeTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/branch N``: switch to branch ``N`` (the numbers ``/tree`` shows; ``#N`` too)."""
    ref = args["number"].lstrip("#")
    if not ref.isdigit():
        raise CommandError("/branch needs a branch number: /branch N (see /tree)")
    outline = await target.service.outline(ctx)
    found = branch_of_number(outline, int(ref))  # the number users see, not the internal id
    if found is None:
        listed = ", ".join(str(c["number"]) for c in outline["conversations"])
        raise CommandError(f"There is no branch {ref} (branches: {listed})")
    await target.go(found, ctx)
    return f"Switched to branch {ref}"


BRANCH = Command(
    "branch", "Switch to a branch (see /tree)", branch, args=(Arg("number", hint="N"),)
)

TREE_COMMANDS: tuple[Command[TreeTarget], ...] = (
    Command("tree", "Navigate the session's branches", tree),
    Command("label", "Label this point", label, args=(Arg("name", rest=True, hint="NAME"),)),
    Command("rewind", "Rewind the conversation, the files or both (Esc Esc)", rewind),
    Command(
        "export",
        "Export this branch",
        export,
        args=(Arg("file", optional=True, rest=True, hint="[FILE.html|FILE.jsonl]"),),
    ),
    BRANCH,
)
"""The tree commands (module docstring), registered by :func:`tree_commands_facet`."""


def tree_commands_facet(host: TreeHost, *, cwd: Path | None = None) -> Facet:
    """The facet registering :data:`TREE_COMMANDS` and Ctrl+B for ``host``."""
    left: list[int] = []  # the branches left, newest last (kept across reloads)

    @define_facet(TREE_COMMANDS_FACET_ID)
    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)
        target = TreeTarget(host, tui, env.use(SessionTreeService), cwd, left)

        async def back_key(ctx: Context) -> None:
            outcome = await back_to_branch(target, ctx)
            if outcome:
                tui.notify(str(outcome))

        def activate() -> None:
            env.own(register_commands(tui, TREE_COMMANDS, target))
            env.own(tui.register_key("ctrl+b", "Back to the branch you left", back_key))
            host.switch_branch = BRANCH.bind(target, tui)
            if host.on_follow is not None:
                env.own(host.on_follow(target.followed))

        env.on_activate(activate)

    return setup
