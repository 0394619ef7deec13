"""The session tree: a session's conversations (branches) and the user prompts on each.

A pico3 session holds conversations; a fork is a conversation whose ``parent`` names the entry
it continues from. That *is* a tree, and this module is its pure, JSON-only model, shared by
the worker (which builds it from storage), the TUI (``/tree``, ``/rewind``), the exporter and the
benchmark. An **outline** is::

    {"conversations": [{"id": 1, "number": 1,
                        "parent": null | {"conversationId": 1, "at": 12},
                        "newest": 40, "summary": "first prompt…" | null}],
     "prompts": [{"id": 3, "conversationId": 1, "text": "…", "time": 1796158278.1,
                  "model": "faux/faux-1" | null, "end": 9}],
     "labels": {"9": "before the refactor"}}

``number`` is what users see: branches are numbered 1, 2, 3 in the order they were made (a
conversation's id is internal: subagents' conversations and tasks take ids too, so they run
1, 20, 25); :func:`branch_number` and :func:`branch_of_number` turn one into the other. A
branch's ``summary`` is its summary entry (written when it is left), else its first own prompt,
else (a fork with no prompt yet) ``no prompt yet · after “the prompt it continues”``.
``prompts`` are each conversation's *own* user prompts, oldest first; ``end`` is the newest entry
of that prompt's turn (the entry before the next prompt, or the conversation's newest). Labels
(``/label``) and branch summaries are entries of the kinds :data:`LABEL_KIND` and
:data:`SUMMARY_KIND`; a branch made before a conversation's first prompt (rewinding to it) starts
with a :data:`BRANCH_KIND` entry naming where it came from, since a pico3 fork needs an entry
to fork at.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

__all__ = [
    "BRANCH_KIND",
    "LABEL_KIND",
    "SUMMARY_KIND",
    "OutlineFolder",
    "TreeNode",
    "branch_number",
    "branch_of_number",
    "build_outline",
    "build_tree",
    "lineage",
    "path_prompts",
    "prompt_text",
]

LABEL_KIND = "coding-agent.label"
"""``/label NAME``: ``data = {"target": entry id, "label": NAME}`` (never shown to the model)."""
SUMMARY_KIND = "coding-agent.branch_summary"
"""A branch's summary: ``data = {"summary": text}``, written when the branch is left."""
BRANCH_KIND = "coding-agent.branch"
"""First entry of a branch made before any entry: ``data = {"from": conversation id}``."""

SUMMARY_WIDTH = 72


def prompt_text(message: Any) -> str:
    """The text of a user message (``content`` a string or text blocks), on one line."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = " ".join(
            block.get("text", "")
            for block in cast(list[Any], content)
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
    else:
        text = ""
    return " ".join(text.split())


def _first_message(entry: Mapping[str, Any], role: str) -> dict[str, Any] | None:
    model = entry.get("model")
    if isinstance(model, list):
        for message in cast(list[Any], model):
            if isinstance(message, dict) and message.get("role") == role:
                return cast(dict[str, Any], message)
    return None


class OutlineFolder:
    """Builds an outline incrementally: add conversations, fold each one's own entries in
    order (entries are immutable, so what was folded never changes), read :meth:`outline`."""

    def __init__(self) -> None:
        self.convs: dict[int, dict[str, Any]] = {}
        self.prompts: dict[int, list[dict[str, Any]]] = {}
        self.labels: dict[str, str] = {}
        self._open: dict[int, dict[str, Any]] = {}

    def add_conversation(self, record: Mapping[str, Any]) -> None:
        """Add a conversation (view shape ``{id, parent?, owner?}``; owned ones are skipped)."""
        if "owner" in record or record["id"] in self.convs:
            return
        parent = record.get("parent")
        self.convs[record["id"]] = {
            "id": record["id"],
            "parent": dict(parent) if isinstance(parent, Mapping) else None,
            "newest": None,
            "summary": None,
        }
        self.prompts[record["id"]] = []

    def fold(self, entry: Mapping[str, Any]) -> None:
        """Fold one entry of a known conversation (its entries oldest first)."""
        cid = entry.get("conversationId")
        conv = self.convs.get(cid) if type(cid) is int else None
        if conv is None:
            return
        entry_id = entry["id"]
        conv["newest"] = entry_id
        kind = entry.get("kind")
        current = self._open.get(cid)  # type: ignore[arg-type]
        if current is not None and kind != "pi.user":
            current["end"] = entry_id
        if kind == "pi.user":
            message = _first_message(entry, "user") or {}
            stamp = message.get("timestamp")
            prompt = {
                "id": entry_id,
                "conversationId": cid,
                "text": prompt_text(message),
                "time": stamp / 1000 if isinstance(stamp, int | float) else None,
                "model": None,
                "end": entry_id,
            }
            self.prompts[cid].append(prompt)  # type: ignore[index]
            self._open[cid] = prompt  # type: ignore[index]
        elif kind == "pi.assistant" and current is not None and current["model"] is None:
            message = _first_message(entry, "assistant") or {}
            provider, model = message.get("provider"), message.get("model")
            if isinstance(provider, str) and isinstance(model, str):
                current["model"] = f"{provider}/{model}"
        elif kind == LABEL_KIND:
            data = entry.get("data") or {}
            target, name = data.get("target"), data.get("label")
            if type(target) is int and isinstance(name, str):
                if name:
                    self.labels[str(target)] = name
                else:
                    self.labels.pop(str(target), None)
        elif kind == SUMMARY_KIND:
            summary = (entry.get("data") or {}).get("summary")
            if isinstance(summary, str):
                conv["summary"] = summary
        elif kind == BRANCH_KIND and conv["parent"] is None:
            origin = (entry.get("data") or {}).get("from")
            if type(origin) is int:
                conv["parent"] = {"conversationId": origin, "at": 0}

    def outline(self) -> dict[str, Any]:
        """The outline so far (see the module docstring)."""
        conversations: list[dict[str, Any]] = []
        for number, cid in enumerate(sorted(self.convs), 1):
            conv = dict(self.convs[cid], number=number)
            own = self.prompts[cid]
            if conv["summary"] is None and own and own[0]["text"]:
                conv["summary"] = _cut(own[0]["text"], SUMMARY_WIDTH)
            elif conv["summary"] is None and not own and conv["parent"]:
                conv["summary"] = self._fork_note(conv["parent"])
            conversations.append(conv)
        return {
            "conversations": conversations,
            "prompts": [p for cid in self.convs for p in self.prompts[cid]],
            "labels": dict(self.labels),
        }

    def _fork_note(self, parent: Mapping[str, Any]) -> str:
        """What a branch with no prompt of its own continues from (a fork not used yet, a
        rewind to the start): the prompt whose turn it follows, so the pickers can tell it."""
        cid, at = parent["conversationId"], parent["at"]
        seen: set[int] = set()
        while cid in self.convs and cid not in seen:
            seen.add(cid)
            before = [p for p in self.prompts[cid] if p["id"] <= at]
            if before:
                return f"no prompt yet · after “{_cut(before[-1]['text'], SUMMARY_WIDTH // 2)}”"
            up = self.convs[cid]["parent"]
            if not up:
                break
            cid, at = up["conversationId"], min(at, up["at"])
        return "no prompt yet · from the start"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def build_outline(
    conversations: Iterable[Mapping[str, Any]], entries: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """The outline of ``conversations`` (view shapes ``{id, parent?, owner?}``) from their own
    ``entries`` (view shapes, any order of conversations, each conversation's oldest first).

    Owned conversations (subagents) are not branches and are left out."""
    folder = OutlineFolder()
    for record in conversations:
        folder.add_conversation(record)
    for entry in entries:
        folder.fold(entry)
    return folder.outline()


def branch_number(outline: Mapping[str, Any], conversation_id: int | None) -> int | None:
    """The number users see for branch ``conversation_id`` (``None``: not a branch)."""
    for conv in outline["conversations"]:
        if conv["id"] == conversation_id:
            return cast(int, conv["number"])
    return None


def branch_of_number(outline: Mapping[str, Any], number: int) -> int | None:
    """The conversation id of the branch users see as ``number`` (``None``: there is none)."""
    for conv in outline["conversations"]:
        if conv["number"] == number:
            return cast(int, conv["id"])
    return None


def lineage(outline: Mapping[str, Any], conversation_id: int) -> dict[int, int | None]:
    """The branch path of ``conversation_id``: each conversation on it -> the newest of its entry
    ids the branch sees (``None`` for the branch's own conversation)."""
    by_id = {c["id"]: c for c in outline["conversations"]}
    out: dict[int, int | None] = {}
    bound: int | None = None
    current = by_id.get(conversation_id)
    while current is not None and current["id"] not in out:
        out[current["id"]] = bound
        parent = current.get("parent")
        if not parent:
            break
        at = parent["at"]
        bound = at if bound is None else min(bound, at)
        current = by_id.get(parent["conversationId"])
    return out


def path_prompts(outline: Mapping[str, Any], conversation_id: int) -> list[dict[str, Any]]:
    """The user prompts on the branch of ``conversation_id``, oldest first."""
    path = lineage(outline, conversation_id)
    found = [
        p
        for p in outline["prompts"]
        if p["conversationId"] in path
        and (path[p["conversationId"]] is None or p["id"] <= cast(int, path[p["conversationId"]]))
    ]
    found.sort(key=lambda p: p["id"])
    return found


@dataclass(slots=True)
class TreeNode:
    """One node of :func:`build_tree`: a branch (conversation) or a user prompt on it."""

    kind: str  # "branch" | "prompt"
    conversation_id: int
    entry_id: int | None = None
    """The prompt's entry (``None`` for a branch)."""
    end: int | None = None
    """A prompt's newest turn entry; a branch's newest entry."""
    text: str = ""
    time: float | None = None
    model: str | None = None
    label: str | None = None
    summary: str | None = None
    number: int = 0
    """A branch's number as users see it (1, 2, 3 in creation order)."""
    tip: bool = False
    """True for a prompt that is the newest of its conversation (continuing it needs no fork)."""
    children: list[TreeNode] = field(default_factory=list["TreeNode"])


def build_tree(outline: Mapping[str, Any]) -> list[TreeNode]:
    """The outline as a forest: each root conversation is a branch node whose children are its
    prompts; a fork is a branch node under the prompt whose turn it continues from (under the
    branch node itself, before its prompts, when it forked before the first prompt)."""
    convs = {c["id"]: c for c in outline["conversations"]}
    labels: Mapping[str, str] = outline.get("labels") or {}
    own: dict[int, list[dict[str, Any]]] = {cid: [] for cid in convs}
    for prompt in outline["prompts"]:
        own.setdefault(prompt["conversationId"], []).append(prompt)
    branch_nodes: dict[int, TreeNode] = {}
    prompt_nodes: dict[int, list[TreeNode]] = {}
    for cid, conv in convs.items():
        node = TreeNode(
            "branch",
            cid,
            end=conv.get("newest"),
            summary=conv.get("summary"),
            number=conv.get("number", 0),
        )
        branch_nodes[cid] = node
        listed = own.get(cid, [])
        nodes: list[TreeNode] = []
        for index, prompt in enumerate(listed):
            label = None
            for target, name in labels.items():
                if prompt["id"] <= int(target) <= prompt["end"]:
                    label = name
            child = TreeNode(
                "prompt",
                cid,
                entry_id=prompt["id"],
                end=prompt["end"],
                text=prompt["text"],
                time=prompt["time"],
                model=prompt["model"],
                label=label,
                tip=index == len(listed) - 1,
            )
            nodes.append(child)
        node.children.extend(nodes)
        prompt_nodes[cid] = nodes
    roots: list[TreeNode] = []
    for cid, conv in convs.items():
        parent = conv.get("parent")
        home = _attach_point(parent, convs, prompt_nodes, branch_nodes) if parent else None
        if home is None:
            roots.append(branch_nodes[cid])
        elif home.kind == "branch":  # made before the first prompt: drawn at the start
            first_prompt = next(
                (i for i, child in enumerate(home.children) if child.kind == "prompt"),
                len(home.children),
            )
            home.children.insert(first_prompt, branch_nodes[cid])
        else:
            home.children.append(branch_nodes[cid])
    return roots


def _attach_point(
    parent: Mapping[str, Any],
    convs: Mapping[int, Mapping[str, Any]],
    prompt_nodes: Mapping[int, list[TreeNode]],
    branch_nodes: Mapping[int, TreeNode],
) -> TreeNode | None:
    """The prompt node (or branch node) a fork of ``parent`` hangs under."""
    origin = branch_nodes.get(parent["conversationId"])
    cid, at = parent["conversationId"], parent["at"]
    if at == 0:
        return origin
    seen: set[int] = set()
    while cid in convs and cid not in seen:
        seen.add(cid)
        best: TreeNode | None = None
        for node in prompt_nodes.get(cid, []):  # oldest first: the last one at or before ``at``
            if cast(int, node.entry_id) > at:
                break
            best = node
        if best is not None:
            return best
        up = convs[cid].get("parent")
        if not up:
            break
        cid, at = up["conversationId"], min(at, up["at"])
    return origin
