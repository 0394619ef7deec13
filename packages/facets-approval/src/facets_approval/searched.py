"""What a read-only call reads beyond its own path: the credentials and the files a search opens.

``read``, ``grep``, ``find`` and ``ls`` run in every mode; the rules decide on the path a call
names (:class:`~.rules.RuleSet`). Two things that path does not show ask here, in every mode:

* **credentials** (:func:`credentials_verdict`): a call whose path is in, or a ``grep`` whose
  folder holds, one of ``pico3.DEFAULT_DENY_READ`` (``~/.ssh``, ``~/.aws``, ``~/.gnupg``...),
  the folders no sandboxed command may read. A private key read into the conversation is sent
  to the model provider, whatever the mode.
* **what a search reads** (:func:`search_verdict`): a ``grep`` over a folder reads every file
  in it that ``.gitignore`` leaves in, so a deny or ask rule on one of them (``deny
  Read(./.env)``) covers the search as it covers a ``read`` of the file. The files are those
  ``pico3.walk_files`` yields (what the tool searches); past :data:`SEARCH_LIMIT` files the
  search asks, since the rest cannot be looked at in time. ``find`` and ``ls`` show names only,
  which no Read rule hides from a listing, as in Claude Code.

The path is resolved once (:func:`read_target`): the rules, both checks and the tool see the
same real path, which the hook leaves for the tool in the host's ``checked_targets`` mapping
(:func:`~.guarded.leave_checked`), so a folder on the way swapped for a symlink after the
decision makes the call fail rather than read what nobody checked.

Both ask rather than block, as Claude Code does for a search over a denied file: the dialog, or
a headless run's refusal, names the file and the rule, and a narrower ``path`` avoids it.
"""

from __future__ import annotations

import os
from pathlib import Path

from pico3 import DEFAULT_DENY_READ, walk_files

from .guarded import path_within
from .rules import RuleSet, SourcedRule, Verdict, tool_path

__all__ = [
    "PATH_TOOLS",
    "SEARCH_LIMIT",
    "credentials_verdict",
    "read_target",
    "search_verdict",
    "searches",
]

SEARCH_LIMIT = 20_000
"""The most files of a searched folder checked against the rules (a larger one asks)."""

PATH_TOOLS = frozenset({"read", "grep", "find", "ls"})
"""The read-only tools whose ``path`` names what they read (:func:`read_target`)."""


def read_target(tool: str, arguments: object, workspace: str, home: str) -> str | None:
    """The real path a call of one of :data:`PATH_TOOLS` reads (see :func:`_target`), or
    ``None`` for another tool or a ``path`` that is not text."""
    return _target(arguments, workspace, home) if tool in PATH_TOOLS else None


def _target(arguments: object, workspace: str, home: str) -> str | None:
    """The call's path resolved as the tools resolve it (:func:`~.rules.tool_path`: ``~``
    expanded, relative to the workspace), symlinks followed; a folder tool without one
    searches the workspace."""
    fields: dict[str, object] = arguments if isinstance(arguments, dict) else {}  # pyright: ignore[reportUnknownVariableType]
    path = fields.get("path")
    if path is None or path == "":
        path = "."
    if not isinstance(path, str):
        return None
    return os.path.realpath(tool_path(path, workspace, home))


def credentials_verdict(
    tool: str, arguments: object, workspace: str, home: str, *, real: str | None = None
) -> Verdict:
    """Ask when a read-only call reads credentials (module doc); else no verdict. ``real`` is
    :func:`read_target`'s answer when the caller has it."""
    if tool not in PATH_TOOLS:
        return Verdict()
    target = real if real is not None else _target(arguments, workspace, home)
    if target is None:
        return Verdict()
    for spelled in DEFAULT_DENY_READ:
        folder = os.path.realpath(home + spelled[1:] if spelled.startswith("~") else spelled)
        shown = spelled
        if path_within(target, folder):
            return Verdict(
                "ask",
                None,
                f"{tool} reads {shown}, where credentials are kept (no sandboxed command may "
                "read it; what is read is sent to the model provider)",
            )
        if tool == "grep" and path_within(folder, target) and os.path.exists(folder):
            return Verdict(
                "ask",
                None,
                f"grep searches {target}, which holds {shown}, where credentials are kept "
                "(search a narrower path to leave it out)",
            )
    return Verdict()


def _covering(ruleset: RuleSet, tool: str) -> list[SourcedRule]:
    if tool != "grep":
        return []
    return [
        r
        for r in ruleset.rules
        if r.kind in ("deny", "ask") and r.rule.pattern is not None and r.rule.governs("grep")
    ]


def searches(ruleset: RuleSet, tool: str) -> bool:
    """Whether :func:`search_verdict` has files to look at for a call of ``tool``: a ``grep``
    with a deny or ask path rule in force (cheap: the caller skips the worker thread else)."""
    return bool(_covering(ruleset, tool))


def search_verdict(
    ruleset: RuleSet, tool: str, arguments: object, real: str | None = None
) -> Verdict:
    """Ask when a ``grep`` over a folder would read a file a deny or ask rule covers (module
    doc); else no verdict. ``real`` is :func:`read_target`'s answer when the caller has it.
    Blocking: call it in a worker thread (when :func:`searches`)."""
    covering = _covering(ruleset, tool)
    if not covering:
        return Verdict()
    folder = real if real is not None else _target(arguments, ruleset.workspace, ruleset.home)
    if folder is None or not os.path.isdir(folder):
        return Verdict()  # a file: the rules matched it as the call's own path
    narrow = RuleSet(covering, root=ruleset.root, workspace=ruleset.workspace, home=ruleset.home)
    for count, relative in enumerate(walk_files(Path(folder))):
        if count >= SEARCH_LIMIT:
            return Verdict(
                "ask",
                covering[0],
                f"grep searches {folder}, more than {SEARCH_LIMIT:,} files, too many to check "
                f"against {covering[0].describe()} (search a narrower path)",
            )
        found = narrow.evaluate("grep", {"path": os.path.join(folder, relative)})
        if found.kind is not None and found.rule is not None:
            return Verdict(
                "ask",
                found.rule,
                f"grep over {folder} would read {relative}, which {found.rule.describe()} "
                "covers (search a narrower path to leave it out)",
            )
    return Verdict()
