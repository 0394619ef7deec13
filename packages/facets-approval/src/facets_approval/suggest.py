"""The narrow rule an approval dialog offers as its standing choice (:func:`suggest_rule`).

Never all of a tool that can do anything: for ``bash`` the command and its subcommand as a
prefix, or the exact command when a prefix would be too broad; for a file edit this path; for
an MCP tool that tool. The offer is checked to allow the very call it is offered for.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from urllib.parse import urlsplit

from .rules import (
    RuleError,
    RuleSet,
    SourcedRule,
    _candidates,  # pyright: ignore[reportPrivateUsage] - one package
    _match_words,  # pyright: ignore[reportPrivateUsage]
    parse_rule,
)
from .shell import analyse_command

__all__ = ["suggest_rule"]

_EXACT_ONLY = frozenset(
    [
        "rm",
        "rmdir",
        "mv",
        "cp",
        "dd",
        "chmod",
        "chown",
        "chgrp",
        "ln",
        "sudo",
        "doas",
        "su",
        "curl",
        "wget",
        "kill",
        "pkill",
        "killall",
        "shred",
        "truncate",
        "python",
        "python3",
        "node",
        "deno",
        "bun",
        "perl",
        "ruby",
        "php",
        "bash",
        "sh",
        "zsh",
        "npx",
        "uvx",
        "pipx",
        "env",
        "xargs",
        "find",
        "ssh",
        "scp",
        "rsync",
        "docker",
        "eval",
        "exec",
    ]
)
"""Commands whose standing choice is the exact command, never a prefix (a prefix of them is
close to "run anything" or "delete anything")."""

_SUBCOMMAND = re.compile(r"[A-Za-z][A-Za-z0-9_:-]*")


def _quoted(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)


def _command_rule(words: tuple[str | None, ...]) -> str | None:
    """The narrow rule for one simple command (``None``: its name is not a plain word, or an
    exact rule is needed and a word is known only at run time)."""
    if not words or words[0] is None:
        return None
    name = words[0]
    if os.path.basename(name) in _EXACT_ONLY or "/" in name:
        literal = [w for w in words if w is not None]
        return f"Bash({_quoted(literal)})" if len(literal) == len(words) else None
    keep = [name]
    second = words[1] if len(words) > 1 else None
    if second is not None and _SUBCOMMAND.fullmatch(second):
        keep.append(second)
        third = words[2] if len(words) > 2 else None
        if second in ("run", "exec", "x", "run-script") and third and _SUBCOMMAND.fullmatch(third):
            keep.append(third)
    return f"Bash({_quoted(keep)}:*)"


def suggest_rule(
    tool: str,
    args: object,
    *,
    root: str | None = None,
    workspace: str | None = None,
    rules: RuleSet | None = None,
) -> str | None:
    """The narrow allow rule a dialog offers as its standing choice for this call, or ``None``.

    ``bash``: the one command of the line that the allow rules in ``rules`` do not cover yet
    (all of a one-command line) → its command and subcommand as a prefix (``npm run test:*``,
    ``git diff:*``, ``ls:*``), or the exact command for commands whose prefix would be too broad
    (``rm``, interpreters, ``curl``, …); a line with two uncovered commands, or one no command
    rule can allow (:attr:`~.shell.CommandAnalysis.allowable`), gets none. ``edit`` →
    ``Edit(./path)``, ``write`` → ``Write(./path)`` (``//abs`` outside the project), an MCP tool
    → its own name, ``web_fetch`` → ``WebFetch(domain:host)``, another tool its name. Never ``Bash`` or ``Bash(*)``. The rule is checked
    to allow this very call together with the allow rules already in ``rules``."""
    fields: dict[str, object] = args if isinstance(args, dict) else {}  # pyright: ignore[reportUnknownVariableType]
    allows = [r for r in (rules.rules if rules is not None else ()) if r.kind == "allow"]
    suggestion: str | None = None
    if tool == "bash":
        command = fields.get("command")
        analysis = analyse_command(command) if isinstance(command, str) else None
        if analysis is None or not analysis.allowable:
            return None
        uncovered = [
            part
            for part in analysis.parts
            if not any(
                r.rule.governs("bash")
                and (r.rule.words is None or _match_words(r.rule, part.words, True) == "yes")
                for r in allows
            )
        ]
        if len(uncovered) != 1:
            return None
        suggestion = _command_rule(uncovered[0].words)
    elif tool in ("web_fetch", "fetch"):
        url = fields.get("url")
        host = (urlsplit(url).hostname or "") if isinstance(url, str) else ""
        if not host:
            return None
        suggestion = f"WebFetch(domain:{host})"
    elif tool in ("edit", "write"):
        path = fields.get("path")
        if not isinstance(path, str) or not path:
            return None
        here = workspace or os.getcwd()
        target = _candidates(path, here)[0]
        base = os.path.normpath(root or here)
        escaped = re.sub(r"([*?\[\]\\])", r"\\\1", target)
        if target.startswith(base.rstrip("/") + "/"):
            escaped = "./" + re.sub(r"([*?\[\]\\])", r"\\\1", os.path.relpath(target, base))
        else:
            escaped = "/" + escaped
        suggestion = f"{'Edit' if tool == 'edit' else 'Write'}({escaped})"
    else:
        suggestion = tool
    if suggestion is None:
        return None
    try:
        rule = parse_rule(suggestion)
    except RuleError:
        return None
    check = RuleSet(
        [*allows, SourcedRule(rule, "allow", "session")], root=root, workspace=workspace
    )
    return suggestion if check.evaluate(tool, args).kind == "allow" else None
