"""Permission rules: ``allow``, ``ask`` and ``deny`` lists in Claude Code's grammar.

A rule names a tool and, for some tools, which calls of it (:func:`parse_rule`)::

    Bash                    every bash command (also Bash(*))
    Bash(git diff)          exactly this command
    Bash(npm run test:*)    commands whose words start with these words (also `npm run test *`)
    Read(./.env)            read, grep, find, ls of a path (gitignore-style pattern)
    Edit(src/**)            edit and write of a path     Write(//tmp/out.txt)   write only
    WebFetch(domain:example.com)   a fetch tool's url on this host or a subdomain
    Task(code-reviewer)     a subagent call of that agent (also Agent(code-reviewer))
    mcp__github             every tool of the MCP server github (also mcp__github__*)
    mcp__github__get_issue  one MCP tool
    job_kill                any tool by its own name

Claude Code's tool names map to the agent's through ``pico3.CLAUDE_CODE_TOOLS`` (``Bash`` →
``bash``, ``Glob`` → ``find``, ``WebSearch`` → ``web_search``, ``TodoWrite`` → ``todo``,
``Task``/``Agent`` → ``agent``, ``BashOutput`` → ``job_output``, ``KillShell`` → ``job_kill``…),
and three cover more: ``Read`` → ``read``, ``grep``, ``find``, ``ls`` (as Claude Code's Read
rules govern its search tools); ``Edit``/``MultiEdit`` → ``edit`` and ``write`` (every
file-editing tool); ``WebFetch`` → ``web_fetch`` (the agent's) and a plugin's ``fetch`` tool.
Any other name is a tool name as the model sees it.

**Paths.** ``//x`` is the absolute path ``/x``; ``~/x`` is in the home folder; ``./x`` and ``/x``
are relative to the project root (the folder holding ``.git``, else the session's folder); a
pattern with no ``/`` but a trailing one matches that name at any depth below the project root
(``.env``, ``*.pem``), one with a ``/`` inside is anchored to the project root. ``*`` matches
within one path segment, ``**`` across segments, ``?`` one character, ``[abc]`` a class, ``\\``
escapes; a pattern that matches a folder covers everything inside it. A tool's path is resolved as
the tools do (relative to the session's folder, ``~`` expanded) and matched both as written and
with symlinks followed: a deny or ask rule applies when either matches, an allow rule only when
both do. A folder searched by ``grep``/``find``/``ls`` is matched by the folder's own path.

**Commands.** A bash command is analysed by :func:`~.shell.analyse_command` into the simple
commands it runs. A rule matches a part word by word (quotes removed); an allow rule matches only
literally, while a deny or ask rule also matches when a word it needs is known only at run time
(``git $SUB``: it *may* be ``git push``), a command given by path (``/bin/rm``), the command
behind a wrapper read with its options (``sudo -u root rm``, ``command``, ``exec``, ``setsid``,
``timeout -s KILL 5``, ``xargs``…: :attr:`~.shell.CommandPart.runs`), and the commands of a known
command string (``bash -c 'rm x'``, ``eval``, ``find -exec``); a line that runs a command no rule
can name (``eval "$X"``, ``source f``, ``bash script.sh``, ``find -delete``, ``${x@P}``:
:attr:`~.shell.CommandAnalysis.hidden`) *may* match every deny and ask rule. Then:

* any part a deny rule matches denies the whole line (a part that only *may* match asks);
* any part an ask rule matches (or may match) asks;
* allow rules allow the line only when *every* part is allowed — and the command behind a
  part's wrappers too: ``Bash(timeout:*)`` does not allow ``timeout 5 rm x`` unless a rule
  allows ``rm x`` (or names it, ``Bash(timeout 5 rm:*)``) — and the line hides nothing
  and writes no file (:attr:`~.shell.CommandAnalysis.allowable`); a line that does not parse,
  uses ``eval``/``$CMD``/``<( … )``, sets variables, redirects output to a file, makes bash
  evaluate a variable's text (``${x@P}``, ``${x:off}``, ``${x[i]}``, ``${!x}``, ``$((x))``,
  ``let``…) or passes an option that writes a file or runs a program (``--output``,
  ``sort -o``, ``git -c``, ``--ext-diff``, ``rg --pre``…) is never allowed by a command rule. A whole-tool ``Bash`` allow rule allows every command (what the
  user wrote; an old session's "always allow bash" is kept this way).

Deny beats ask beats allow, from whichever source (:class:`RuleSet`, :class:`Verdict`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal
from urllib.parse import urlsplit

from pico3 import CLAUDE_CODE_TOOLS, claude_agent_id

from .shell import CommandAnalysis, CommandPart, analyse_command

__all__ = [
    "RULE_KINDS",
    "Rule",
    "RuleError",
    "RuleKind",
    "RuleSet",
    "SourcedRule",
    "Verdict",
    "parse_rule",
    "tool_path",
]

RuleKind = Literal["allow", "ask", "deny"]
RULE_KINDS: tuple[RuleKind, ...] = ("allow", "ask", "deny")

_WIDER: dict[str, tuple[str, ...]] = {
    "Read": ("read", "grep", "find", "ls"),  # as Claude Code's Read governs its search tools
    "Edit": ("edit", "write"),  # every file-editing tool
    "MultiEdit": ("edit", "write"),
    "WebFetch": ("web_fetch", "fetch"),  # and a plugin's fetch tool
}
"""Claude Code names whose rules cover more than the one tool of ``pico3.CLAUDE_CODE_TOOLS``."""


def _governed(name: str) -> frozenset[str]:
    """The agent's tools a rule naming ``name`` governs: Claude Code's names through
    ``pico3.CLAUDE_CODE_TOOLS`` (:data:`_WIDER` where a rule covers more), any other name as
    the tool's own."""
    wider = _WIDER.get(name)
    if wider is not None:
        return frozenset(wider)
    return frozenset({CLAUDE_CODE_TOOLS.get(name, name)})


_GENERAL_PURPOSE = "general-purpose"
"""The subagent an ``agent`` call without ``subagent_type`` runs (Claude Code's default)."""
_PATH_TOOLS = frozenset({"read", "grep", "find", "ls", "edit", "write"})
_FETCH_TOOLS = frozenset({"web_fetch", "fetch"})
_FOLDER_TOOLS = frozenset({"grep", "find", "ls"})
"""Tools whose ``path`` defaults to the session's folder."""

_RULE = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*(?:__\*)?)(?:\((.*)\))?", re.DOTALL)
_HOST = re.compile(
    r"(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*"
)


class RuleError(ValueError):
    """A rule that does not follow the grammar; the message says why and shows a correct one."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One parsed rule (see the module docstring). ``text`` is the rule as written."""

    text: str
    tools: frozenset[str]
    """The agent's tool names it governs (empty for an MCP server rule)."""
    server: str | None = None
    """``mcp__server``: every tool whose name starts with ``mcp__server__``."""
    words: tuple[str, ...] | None = None
    """A bash rule's words (``None``: the whole tool)."""
    prefix: bool = False
    pattern: str | None = None
    """A path rule's pattern as written."""
    domain: str | None = None
    agent: str | None = None
    """A ``Task(name)``/``Agent(name)`` rule's subagent, as an id (:func:`pico3.claude_agent_id`:
    the call's ``subagent_type`` is compared as one too, as the subagents feature resolves it)."""

    def governs(self, tool: str) -> bool:
        """True when this rule is about calls of ``tool``."""
        if self.server is not None:
            return tool.startswith(f"mcp__{self.server}__")
        return tool in self.tools

    @property
    def whole_tool(self) -> bool:
        return (
            self.words is None
            and self.pattern is None
            and self.domain is None
            and self.agent is None
        )


def parse_rule(text: object) -> Rule:
    """Parse one rule; raises :class:`RuleError` saying what is wrong and how it should look
    (``text`` may come from a JSON file: anything but a string is an error too)."""
    if not isinstance(text, str):
        raise RuleError(f"a rule is a string, got {type(text).__name__} {text!r}")
    return _parse(text)


@lru_cache(maxsize=1024)
def _parse(text: str) -> Rule:
    stripped = text.strip()
    if not stripped:
        raise RuleError("a rule cannot be empty (e.g. Bash(npm run test:*))")
    found = _RULE.fullmatch(stripped)
    if found is None:
        raise RuleError(
            "expected Tool or Tool(specifier), e.g. Bash(npm run test:*) or Read(./.env)"
        )
    name, spec = found.group(1), found.group(2)
    if name.endswith("__*") and not name.startswith("mcp__"):
        raise RuleError("only an MCP server takes __* (mcp__server__*); write the tool's name")
    if name.startswith("mcp__"):
        return _mcp_rule(stripped, name, spec)
    tools = _governed(name)
    if spec is None or spec.strip() == "*":
        return Rule(stripped, tools)
    spec = spec.strip()
    if not spec:
        raise RuleError(f"empty parentheses: write {name} for the whole tool or {name}(specifier)")
    if tools == {"bash"}:
        return _bash_rule(stripped, spec)
    if tools <= _PATH_TOOLS:
        if spec.startswith("domain:"):
            raise RuleError(
                f"domain: is for WebFetch; {name} takes a path such as {name}(./src/**)"
            )
        _path_regex(spec, "/r", "/h")  # raises for a bad pattern
        return Rule(stripped, tools, pattern=spec)
    if tools == {"agent"}:
        # compared as an id, the spelling the subagents feature finds the definition by
        return Rule(stripped, tools, agent=claude_agent_id(spec))
    if tools <= _FETCH_TOOLS:
        host = spec.removeprefix("domain:").strip().lower()
        if not spec.startswith("domain:") or not _HOST.fullmatch(host):
            raise RuleError(f"{name} takes domain:HOST, e.g. {name}(domain:example.com)")
        return Rule(stripped, tools, domain=host)
    raise RuleError(
        f"{name} takes no specifier; only Bash, Read, Edit, Write, Grep, Glob, LS, WebFetch and "
        f"Task/Agent (a subagent's name) rules do (write {name} for every call of it)"
    )


def _mcp_rule(text: str, name: str, spec: str | None) -> Rule:
    if spec is not None:
        raise RuleError("an MCP rule takes no specifier: write mcp__server or mcp__server__tool")
    pieces = name.split("__")
    if len(pieces) == 2 and pieces[1]:
        return Rule(text, frozenset(), server=pieces[1])
    if len(pieces) >= 3 and pieces[1] and pieces[-1] == "*" and len(pieces) == 3:
        return Rule(text, frozenset(), server=pieces[1])
    if len(pieces) >= 3 and pieces[1] and all(pieces[2:]) and "*" not in name:
        return Rule(text, frozenset({name}))
    raise RuleError("expected mcp__server or mcp__server__tool")


def _bash_rule(text: str, spec: str) -> Rule:
    prefix = False
    body = spec
    for ending in (":*", " *"):
        if body.endswith(ending):
            body, prefix = body[: -len(ending)].rstrip(), True
            break
    if not body:
        raise RuleError("a prefix needs at least a command name, e.g. Bash(npm run test:*)")
    analysis = analyse_command(body)
    if len(analysis.parts) == 1 and any(word is None for word in analysis.parts[0].words):
        raise RuleError(
            "a `*` (or another pattern or $expansion) is allowed only at the end, as a prefix: "
            "Bash(git log:*)"
        )
    if len(analysis.parts) != 1 or analysis.unsafe or analysis.writes:
        why = (analysis.unsafe or analysis.writes or ("",))[0]
        if not analysis.unsafe and len(analysis.parts) > 1:
            why = f"it holds {len(analysis.parts)} commands; write one rule per command"
        elif not analysis.unsafe and analysis.writes:
            why = "it writes a file, which no rule allows"
        raise RuleError(f"not one plain command: {why}".rstrip(": ") + " (e.g. Bash(git diff:*))")
    words = analysis.parts[0].words
    return Rule(
        text, frozenset({"bash"}), words=tuple(w for w in words if w is not None), prefix=prefix
    )


def _glob(pattern: str, whole: str) -> str:
    """A path ``pattern`` (gitignore's syntax) as the text of a regular expression over a
    ``/``-separated path: ``**/`` is any number of folders, ``**`` anything, ``*`` anything but
    ``/``, ``?`` one character but ``/``, ``[abc]`` (``[!abc]``) a class, ``\\x`` the character
    ``x``. Raises :class:`RuleError` naming ``whole`` (the rule's pattern) for an unclosed ``[``
    or a lone trailing ``\\``: a deny rule that does not parse is refused, never read as less.

    The memory rules' ``paths`` globs (``coding_agent.context.memory_rules.glob_pattern``) are
    a twin on purpose: the same ``**``, ``*`` and ``?``, but Claude Code's ``{a,b}`` braces
    instead of classes and escapes (here a ``{`` is literal, as in gitignore), and no error.
    A feature package and the app share no module but pico3's and chord's public names, so
    each keeps its own; ``tests/app/context/test_memory_rules.py`` checks with generated
    patterns that the two agree wherever both syntaxes do."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "\\":
            if i + 1 >= n:
                raise RuleError("a pattern cannot end with a lone \\")
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end < 0 or end == i + 1:
                raise RuleError(f"unclosed [ in the path pattern {whole!r}")
            body = pattern[i + 1 : end]
            if body[0] in "!^":
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
            continue
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


@lru_cache(maxsize=1024)
def _path_regex(pattern: str, root: str, home: str) -> re.Pattern[str]:
    anywhere = False
    if pattern.startswith("//"):
        base, rest = "/", pattern[2:]
    elif pattern == "~" or pattern.startswith("~/"):
        base, rest = home, pattern[2:]
    elif pattern.startswith("./") or pattern == ".":
        base, rest = root, pattern[2:]
    elif pattern.startswith("/"):
        base, rest = root, pattern[1:]
    else:
        base, rest = root, pattern
        anywhere = "/" not in pattern.rstrip("/")
    rest = rest.rstrip("/")
    head = re.escape(base.rstrip("/"))
    if not rest:
        return re.compile(f"{head}(?:/.*)?", re.DOTALL)
    middle = "(?:.*/)?" if anywhere else ""
    return re.compile(f"{head}/{middle}{_glob(rest, pattern)}(?:/.*)?", re.DOTALL)


def tool_path(path: str, workspace: str, home: str | None = None) -> str:
    """A tool's ``path`` argument as the file tools spell it, before a symlink is followed:
    a leading ``@`` dropped (a mention copied from the prompt), ``~`` expanded (``~/x`` in
    ``home`` when given, else in the user's home; ``~user/x`` in that user's), relative to
    ``workspace``, normalised (``a/../b`` is ``b``, as the tool reads it). Its real path,
    ``os.path.realpath(tool_path(...))``, is the file the tool opens.

    The one resolution of the approval feature: the rules (:func:`_candidates`), the
    read-only checks (``searched.read_target``) and the edit checks (``session.edit_target``)
    all start here, so every check sees the path the tool then works on. It mirrors the app's
    ``coding_agent.worker.tools.spec.resolve_path``, which a feature may not import; the tool
    fails a call whose real path is not the one approved, and
    ``tests/facets/approval/test_searched.py`` checks the two agree."""
    if path.startswith("@"):
        path = path[1:]
    if home is not None and (path == "~" or path.startswith("~/")):
        path = home + path[1:]
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded):
        expanded = os.path.join(os.path.expanduser(workspace), expanded)
    return os.path.normpath(expanded)


def _candidates(path: str, workspace: str, real: str | None = None) -> tuple[str, str]:
    """A tool's path as written (:func:`tool_path`) and with symlinks followed (``real``,
    when the caller resolved it already)."""
    spelled = tool_path(path, workspace)
    return spelled, real if real is not None else os.path.realpath(spelled)


Match = Literal["yes", "no", "maybe"]


def _match_words(rule: Rule, words: tuple[str | None, ...], strict: bool) -> Match:
    assert rule.words is not None
    expected = rule.words
    for index, want in enumerate(expected):
        if index >= len(words):
            return "no"
        have = words[index]
        if have is None:
            return "no" if strict else "maybe"
        if have != want and (strict or index or os.path.basename(have) != want):
            return "no"
    if rule.prefix or len(words) == len(expected):
        return "yes"
    if not strict and any(word is None for word in words[len(expected) :]):
        return "maybe"  # `$EXTRA` may expand to nothing
    return "no"


def _allowing(allows: Sequence[SourcedRule], words: tuple[str | None, ...]) -> list[SourcedRule]:
    """The command allow rules that match ``words`` literally."""
    return [
        r for r in allows if r.rule.words is not None and _match_words(r.rule, words, True) == "yes"
    ]


def _reaches_inner(rule: Rule, part: CommandPart, allows: Sequence[SourcedRule]) -> bool:
    """Whether the command behind ``part``'s wrappers is allowed too: ``rule`` (which matched
    the whole part) names it (``Bash(sudo rm:*)``, the exact ``Bash(timeout 5 npm test)``), or
    another allow rule matches it. ``Bash(timeout:*)`` alone names only the wrapper, and would
    otherwise allow ``timeout 5 rm -rf ~``: every command a line runs must be allowed."""
    if not part.runs:
        return True
    inner = part.runs[-1]
    before = len(part.words) - len(inner)
    assert rule.words is not None
    if before >= 0 and part.words[before:] == inner and len(rule.words) > before:
        return True
    return bool(_allowing(allows, inner))


@dataclass(frozen=True, slots=True)
class SourcedRule:
    """A rule with its kind and where it came from (``"session"`` or a file's path)."""

    rule: Rule
    kind: RuleKind
    source: str

    def describe(self) -> str:
        where = "this session" if self.source == "session" else self.source
        return f"the {self.kind} rule {self.rule.text} in {where}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the rules say about a call: ``kind`` ``None`` leaves it to the mode; ``rule`` is the
    deciding rule; ``why`` says it in a sentence (a block reason or a dialog line)."""

    kind: RuleKind | None = None
    rule: SourcedRule | None = None
    why: str = ""


class RuleSet:
    """Rules from every source; :meth:`evaluate` applies deny > ask > allow to one call.

    ``root`` is the project root (``./`` patterns), ``workspace`` the folder tools resolve
    relative paths against; ``home`` defaults to ``~``."""

    def __init__(
        self,
        rules: Sequence[SourcedRule],
        *,
        root: str | None = None,
        workspace: str | None = None,
        home: str | None = None,
    ) -> None:
        self.rules = tuple(rules)
        self.workspace = workspace or os.getcwd()
        self.root = root or self.workspace
        self.home = home or os.path.expanduser("~")

    def evaluate(self, tool: str, args: object, *, real: str | None = None) -> Verdict:
        """The verdict of the rules for a call of ``tool`` with ``args``. A path rule matches
        the call's ``path`` as written and with symlinks followed; ``real`` is that second
        candidate when the caller resolved it already (resolved once: the path the tool is
        then held to, ``checked_targets``, is the one the rules saw)."""
        relevant = [r for r in self.rules if r.rule.governs(tool)]
        if not relevant:
            return Verdict()
        fields: dict[str, object] = args if isinstance(args, dict) else {}  # pyright: ignore[reportUnknownVariableType]
        analysis: CommandAnalysis | None = None
        if tool == "bash":
            command = fields.get("command")
            analysis = (
                analyse_command(command)
                if isinstance(command, str)
                else CommandAnalysis(unsafe=("no command",))
            )
        maybe_deny: SourcedRule | None = None
        for kind in ("deny", "ask"):
            for sourced in (r for r in relevant if r.kind == kind):
                match = self._match(sourced.rule, tool, fields, analysis, strict=False, real=real)
                if match == "yes":
                    return Verdict(kind, sourced, f"{sourced.describe()} matches")  # type: ignore[arg-type]
                if match == "maybe" and kind == "deny" and maybe_deny is None:
                    maybe_deny = sourced
                if match == "maybe" and kind == "ask":
                    return Verdict("ask", sourced, f"{sourced.describe()} may match")
        if maybe_deny is not None:
            return Verdict(
                "ask",
                maybe_deny,
                f"{maybe_deny.describe()} may match (a command or a word is known only when it "
                "runs)",
            )
        allows = [r for r in relevant if r.kind == "allow"]
        for sourced in allows:
            if sourced.rule.whole_tool:
                return Verdict("allow", sourced, f"{sourced.describe()} matches")
        if analysis is not None:
            if not analysis.allowable:
                return Verdict()
            chosen: list[SourcedRule] = []
            for part in analysis.parts:
                found = next(
                    (
                        r
                        for r in _allowing(allows, part.words)
                        if _reaches_inner(r.rule, part, allows)
                    ),
                    None,
                )
                if found is None:
                    return Verdict()
                chosen.append(found)
            named = list(dict.fromkeys(r.describe() for r in chosen))
            verb = "matches" if len(named) == 1 else "match"
            return Verdict("allow", chosen[0], f"{' and '.join(named)} {verb}")
        for sourced in allows:
            if self._match(sourced.rule, tool, fields, None, strict=True, real=real) == "yes":
                return Verdict("allow", sourced, f"{sourced.describe()} matches")
        return Verdict()

    def _match(
        self,
        rule: Rule,
        tool: str,
        fields: dict[str, object],
        analysis: CommandAnalysis | None,
        *,
        strict: bool,
        real: str | None = None,
    ) -> Match:
        if rule.whole_tool:
            return "yes"
        if rule.words is not None:
            if analysis is None:
                return "no"
            result: Match = "no"
            for part in analysis.parts:
                for words in (part.words, *part.runs):
                    match = _match_words(rule, words, strict)
                    if match == "yes":
                        return "yes"
                    if match == "maybe":
                        result = "maybe"
            if analysis.hidden and not strict:
                return "maybe"  # it runs a command no rule can name
            return result
        if rule.pattern is not None:
            path = fields.get("path")
            if (path is None or path == "") and tool in _FOLDER_TOOLS:
                path = "."
            if not isinstance(path, str) or not path:
                return "no" if strict else "maybe"
            regex = _path_regex(
                rule.pattern, os.path.normpath(self.root), os.path.normpath(self.home)
            )
            hits = [
                regex.fullmatch(candidate) is not None
                for candidate in _candidates(path, self.workspace, real)
            ]
            return "yes" if (all(hits) if strict else any(hits)) else "no"
        if rule.domain is not None:
            url = fields.get("url")
            host = (urlsplit(url).hostname or "") if isinstance(url, str) else ""
            if not host:
                return "no" if strict else "maybe"
            domain = rule.domain.removeprefix("*.")
            return "yes" if host == domain or host.endswith("." + domain) else "no"
        if rule.agent is not None:
            chosen = fields.get("subagent_type") or _GENERAL_PURPOSE
            if not isinstance(chosen, str):
                return "no" if strict else "maybe"
            # Intruder, intruder. and INTRUDER all run the agent intruder: one id for each
            return "yes" if claude_agent_id(chosen) == rule.agent else "no"
        return "no"
