"""What an allow rule for a whole tool that asks allows: all of bash, every edit, a whole MCP
server, any fetch. ``/permissions`` adds such a rule only after a second question that names
it (:func:`widens`); a dialog never offers one and a ``PermissionRequest`` hook never adds one
(:mod:`.permissions`, :mod:`.hook_answers`)."""

from __future__ import annotations

from .rules import Rule

__all__ = ["wide_allow", "widens"]

_STILL = "Deny and ask rules still apply"


def wide_allow(rule: Rule, kind: str) -> tuple[str, str, str] | None:
    """What an allow rule for a whole tool that asks allows, or ``None`` (any other rule):
    ``(what, runs, sentence)`` — ``what`` names it for the question's title ("all of bash",
    "every edit"), ``runs`` for its "Yes" answer ("every bash command runs") and ``sentence``
    says it whole (:func:`widens`). Bash, the edit tools (``Edit``, ``Write``), the fetch tools
    (``WebFetch`` without a domain), ``WebSearch``, an MCP server (``mcp__github``) and an MCP
    tool count; a read-only tool does not (it runs without asking already). So does an edit
    rule whose pattern matches every path (``Edit(**)``, ``Write(//**)``, ``Edit(./**/*)``):
    the whole tool spelled as a path."""
    if kind != "allow" or not (rule.whole_tool or _every_path(rule)):
        return None
    if rule.server is not None:
        server = rule.server
        return (
            f"every tool of the MCP server {server}",
            f"every call of the MCP server {server} runs",
            f"{rule.text} allows every tool of the MCP server {server} without asking, whatever "
            f"the tool does (changing data, sending it anywhere the server reaches). {_STILL}, "
            "and plan mode still blocks them",
        )
    tools = rule.tools
    if "bash" in tools:
        return (
            "all of bash",
            "every bash command runs",
            f"{rule.text} allows every bash command without asking: any program, deleting or "
            f"overwriting any file you can, the network. {_STILL}, and plan mode still blocks "
            "commands",
        )
    if tools & {"edit", "write"}:
        which = " and ".join(sorted(tools & {"edit", "write"}))
        return (
            f"every {which}",
            f"every {which} runs",
            f"{rule.text} allows every file {which} in the project without asking, any file and "
            f"any content. {_STILL}; an edit of .git/, of the agent's configuration or outside "
            "the project still asks, and plan mode still blocks edits",
        )
    if tools & {"web_fetch", "fetch"}:
        return (
            "every web fetch",
            "every fetch of any URL runs",
            f"{rule.text} allows fetching any URL without asking, on any site: what the agent "
            f"read can be sent along in the URL. {_STILL}, and plan mode still blocks it",
        )
    if "web_search" in tools:
        return (
            "every web search",
            "every web search runs",
            f"{rule.text} allows every web search without asking: what the agent read can be "
            f"sent along in a query. {_STILL}, and plan mode still blocks it",
        )
    mcp = sorted(t for t in tools if t.startswith("mcp__"))
    if mcp:
        return (
            f"every call of {mcp[0]}",
            f"every call of {mcp[0]} runs",
            f"{rule.text} allows every call of the MCP tool {mcp[0]} without asking, whatever "
            f"its arguments. {_STILL}, and plan mode still blocks it",
        )
    return None


_ANCHORS = ("//", "~/", "./", "/")


def _every_path(rule: Rule) -> bool:
    """Whether ``rule``'s path pattern matches every path below where it is anchored (only
    ``*``, ``**`` and ``/`` after ``//``, ``~/``, ``./`` or ``/``)."""
    pattern = rule.pattern
    if pattern is None:
        return False
    for anchor in _ANCHORS:
        if pattern.startswith(anchor):
            pattern = pattern[len(anchor) :]
            break
    return "**" in pattern and not pattern.strip("*/")


def widens(rule: Rule, kind: str) -> str:
    """What an allow rule for a whole tool that asks allows (:func:`wide_allow`), said to the
    person adding it (``""`` for any other rule). The dialog never offers one
    (:func:`~.suggest.suggest_rules`); a person may write it, in a file or in ``/permissions``
    after confirming, and a ``PermissionRequest`` hook's ``updatedPermissions`` never adds one.
    Deny and ask rules still win over it, and plan mode stays read-only."""
    wide = wide_allow(rule, kind)
    return "" if wide is None else wide[2]
