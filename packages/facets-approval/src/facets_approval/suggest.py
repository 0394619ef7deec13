"""The narrow rules an approval dialog offers as its standing choice (:func:`suggest_rules`).

Never all of a tool that can do anything: for ``bash`` the command (and its subcommand, for
commands that have subcommands) as a prefix, or the exact command when a prefix would be too
broad (:data:`_EXACT_ONLY`, :data:`_GIT_EXACT`); for a file edit this path; for
an MCP tool that tool. A compound bash line (``cd src && npm test``) is offered one such rule
per command no allow rule covers yet, as Claude Code does, and only when the shell analysis
sees the whole line (:attr:`~.shell.CommandAnalysis.allowable`). The offer is checked to allow
the very call it is offered for.
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
    _match_words,  # pyright: ignore[reportPrivateUsage] - one package
    _reaches_inner,  # pyright: ignore[reportPrivateUsage] - one package
    parse_rule,
    tool_path,
)
from .shell import analyse_command

__all__ = ["suggest_rules"]

_EXACT_ONLY = frozenset(
    [
        # delete, move, overwrite or change files
        *("rm", "rmdir", "mv", "cp", "dd", "install", "ln", "shred", "truncate", "touch"),
        *("chmod", "chown", "chgrp", "tee", "tar", "zip", "unzip", "patch", "split"),
        # run as another user, or with what a wrapper says
        *("sudo", "doas", "su", "env", "xargs", "nohup", "timeout", "nice", "ionice", "time"),
        *("stdbuf", "setsid", "chroot", "taskset", "flock", "watch", "strace", "unbuffer"),
        *("command", "builtin", "exec", "eval", "source", ".", "trap"),
        # their arguments are programs
        *("sed", "awk", "gawk", "mawk", "nawk", "perl", "ruby", "php", "lua", "tclsh", "jq"),
        *("python", "python3", "node", "deno", "bun", "bash", "sh", "zsh", "dash", "ksh"),
        *("fish", "busybox", "make", "gmake", "cmake", "ninja", "just", "npx", "uvx", "pipx"),
        *("find", "parallel", "git-filter-repo", "vim", "vi", "nvim", "emacs", "less", "man"),
        # write a file or run a program through an option
        *("sort", "curl", "wget", "ssh", "scp", "rsync", "docker", "podman", "kubectl"),
        # signals
        *("kill", "pkill", "killall"),
    ]
)
"""Commands whose standing choice is the exact command, never a prefix: a prefix of them is
close to "run anything", "write anything" or "delete anything" — their arguments are programs
(``sed '1e id'``, ``awk 'BEGIN{system(…)}'``, ``make`` runs any Makefile, ``find -exec``), they
write or delete files (``tee``, ``cp``, ``sort -o``, ``curl -o``), or they run the command
after them (``env``, ``xargs``, ``timeout``). Any ``python*``/``pip*``-style versioned name
counts as its base (``python3.12`` is ``python``)."""

_SUBCOMMANDS = frozenset(
    [
        *("git", "npm", "pnpm", "yarn", "cargo", "go", "uv", "pip", "pip3", "poetry", "pdm"),
        *("hatch", "gh", "helm", "terraform", "dotnet", "rustup", "brew", "apt", "conda"),
        *("pre-commit", "bundle", "gem", "composer", "mix", "rake", "mvn", "gradle", "swift"),
    ]
)
"""Commands whose second word is a subcommand (``git diff``, ``npm run test``): the offered
prefix keeps it. Any other command's second word is an argument (a search term, a path: ``rg
foo``), and the prefix is the command alone."""

_GIT_EXACT = frozenset(
    {
        "config",
        "format-patch",
        "filter-branch",
        "submodule",
        "bisect",
        "rebase",
        "difftool",
        "mergetool",
        "archive",
        "bundle",
        "clone",
        "push",
        "fetch",
        "pull",
        "ls-remote",
        "grep",
        "worktree",
        "hook",
        "daemon",
        "instaweb",
        "apply",
        "am",
        "checkout",
        "reset",
        "clean",
        "restore",
        "rm",
        "mv",
    }
)
"""git subcommands offered only exactly: they write ``.git/config`` (``git config user.name``
then allows ``core.fsmonitor``), write or delete files, or run programs and hooks. ``git diff``,
``git log`` and ``git show`` keep their prefix: the analysis refuses their options that write
(``--output``) or run a program (``--ext-diff``), and ``git -c`` before any subcommand."""

_SUBCOMMAND = re.compile(r"[A-Za-z][A-Za-z0-9_:-]*")
_VERSIONED = re.compile(r"([a-z]+?)[0-9.]*")


def _quoted(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)


def _command_rule(words: tuple[str | None, ...]) -> str | None:
    """The narrow rule for one simple command (``None``: its name is not a plain word, or an
    exact rule is needed and a word is known only at run time)."""
    if not words or words[0] is None:
        return None
    name = words[0]
    second = words[1] if len(words) > 1 else None
    base = os.path.basename(name)
    versioned = _VERSIONED.fullmatch(base)
    if (
        base in _EXACT_ONLY
        or (versioned is not None and versioned.group(1) in _EXACT_ONLY)
        or "/" in name
        or (base == "git" and (second is None or second.startswith("-") or second in _GIT_EXACT))
    ):
        literal = [w for w in words if w is not None]
        return f"Bash({_quoted(literal)})" if len(literal) == len(words) else None
    keep = [name]
    if base in _SUBCOMMANDS and second is not None and _SUBCOMMAND.fullmatch(second):
        keep.append(second)
        third = words[2] if len(words) > 2 else None
        if second in ("run", "exec", "x", "run-script") and third and _SUBCOMMAND.fullmatch(third):
            keep.append(third)
    return f"Bash({_quoted(keep)}:*)"


def suggest_rules(
    tool: str,
    args: object,
    *,
    root: str | None = None,
    workspace: str | None = None,
    rules: RuleSet | None = None,
) -> tuple[str, ...]:
    """The narrow allow rules a dialog offers as its standing choice for this call; empty: none.

    ``bash``: one rule per command of the line that the allow rules in ``rules`` do not cover
    yet, in the order the line runs them, each its command and subcommand as a prefix
    (``npm run test:*``, ``git diff:*``, ``ls:*``), or the exact command for commands whose
    prefix would be too broad (``rm``, interpreters, ``curl``, ``git push``, …): ``cd src &&
    npm test`` → ``Bash(cd:*)``, ``Bash(npm test:*)``; two commands one rule covers get it
    once. Nothing when the analysis cannot see the whole line
    (:attr:`~.shell.CommandAnalysis.allowable`: it does not parse, hides a command, sets
    variables, writes a file…) or when one uncovered command has no narrow rule (``rm -rf
    $DIR``): the offer is all of them or none. ``edit`` → ``Edit(./path)``, ``write`` →
    ``Write(./path)`` (``//abs`` outside the project), an MCP tool → its own name,
    ``web_fetch`` → ``WebFetch(domain:host)``, another tool its name. Never ``Bash`` or
    ``Bash(*)``. The rules are checked to allow this very call together with the allow rules
    already in ``rules``."""
    fields: dict[str, object] = args if isinstance(args, dict) else {}  # pyright: ignore[reportUnknownVariableType]
    allows = [r for r in (rules.rules if rules is not None else ()) if r.kind == "allow"]
    suggestions: list[str | None] = []
    if tool == "bash":
        command = fields.get("command")
        analysis = analyse_command(command) if isinstance(command, str) else None
        if analysis is None or not analysis.allowable:
            return ()
        suggestions = [
            _command_rule(part.words)
            for part in analysis.parts
            if not any(
                r.rule.governs("bash")
                and (
                    r.rule.words is None
                    or (
                        _match_words(r.rule, part.words, True) == "yes"
                        and _reaches_inner(r.rule, part, allows)
                    )
                )
                for r in allows
            )
        ]
    elif tool in ("web_fetch", "fetch"):
        url = fields.get("url")
        host = (urlsplit(url).hostname or "") if isinstance(url, str) else ""
        suggestions = [f"WebFetch(domain:{host})" if host else None]
    elif tool in ("edit", "write"):
        path = fields.get("path")
        if not isinstance(path, str) or not path:
            return ()
        here = workspace or os.getcwd()
        target = tool_path(path, here)
        base = os.path.normpath(root or here)
        escaped = re.sub(r"([*?\[\]\\])", r"\\\1", target)
        if target.startswith(base.rstrip("/") + "/"):
            escaped = "./" + re.sub(r"([*?\[\]\\])", r"\\\1", os.path.relpath(target, base))
        else:
            escaped = "/" + escaped
        suggestions = [f"{'Edit' if tool == 'edit' else 'Write'}({escaped})"]
    else:
        suggestions = [tool]
    if not suggestions or None in suggestions:
        return ()
    offered = tuple(dict.fromkeys(s for s in suggestions if s is not None))
    added: list[SourcedRule] = []
    for text in offered:
        try:
            rule = parse_rule(text)
        except RuleError:
            return ()
        if tool == "bash" and rule.whole_tool:
            return ()  # never all of bash (no command rule parses to it; said, not assumed)
        added.append(SourcedRule(rule, "allow", "session"))
    check = RuleSet([*allows, *added], root=root, workspace=workspace)
    return offered if check.evaluate(tool, args).kind == "allow" else ()
