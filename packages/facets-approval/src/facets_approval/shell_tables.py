"""The tables the shell analysis (:mod:`.shell`) consults about one simple command: which
commands run another behind their own options (:data:`WRAPPERS`, read by :func:`behind`: ``sudo
-u root rm`` is ``rm``), and which options write a file or run a program (:data:`OPTIONS`,
:data:`GIT_OPTIONS`, :data:`GENERIC_OUTPUT`: ``sort -o``, ``git log --output``, ``rg --pre``),
so no prefix allow rule allows them. Adding a command is adding a row here, with a test row in
tests/facets/approval/test_permission_rules.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "DIFFS",
    "GENERIC_OUTPUT",
    "GIT_ALWAYS_WRITES",
    "GIT_CONFIG_READS",
    "GIT_GLOBAL",
    "GIT_GLOBAL_VALUES",
    "GIT_OPTIONS",
    "OPTIONS",
    "WRAPPERS",
    "Flags",
    "Wrapper",
    "behind",
    "git_config_writes",
]


@dataclass(frozen=True, slots=True)
class Wrapper:
    """How a wrapper reads its words before the command it runs."""

    values: str = ""
    """Short options that take a value (``sudo -u root``)."""
    long_values: frozenset[str] = frozenset()
    """Long options that take the next word as their value when written without ``=``."""
    operands: int = 0
    """Words before the command (``timeout 5``, ``chroot /new``, ``flock /lock``)."""
    assignments: bool = False
    """``NAME=value`` words before the command (``env``, ``sudo``)."""
    strings: str = ""
    """Short options whose value is a command line (``env -S``, ``flock -c``)."""
    long_strings: frozenset[str] = frozenset()
    never: str = ""
    """Short options with which it runs no command (``command -v``)."""


WRAPPERS: dict[str, Wrapper] = {
    "sudo": Wrapper(
        "ugpCDrtUTR",
        frozenset(
            {
                "user",
                "group",
                "prompt",
                "close-from",
                "chdir",
                "role",
                "type",
                "other-user",
                "command-timeout",
                "chroot",
                "host",
            }
        ),
        assignments=True,
    ),
    "doas": Wrapper("uC"),
    "env": Wrapper(
        "uC",
        frozenset({"unset", "chdir", "default-signal", "ignore-signal", "block-signal"}),
        assignments=True,
        strings="S",
        long_strings=frozenset({"split-string"}),
    ),
    "nohup": Wrapper(),
    "time": Wrapper("fo", frozenset({"format", "output"})),
    "timeout": Wrapper("sk", frozenset({"signal", "kill-after"}), operands=1),
    "nice": Wrapper("n", frozenset({"adjustment"})),
    "stdbuf": Wrapper("ioe", frozenset({"input", "output", "error"})),
    "xargs": Wrapper(
        "IELndPsa",
        frozenset(
            {"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"}
        ),
    ),
    "ionice": Wrapper("cnpP", frozenset({"class", "classdata", "pid", "pgid", "uid"})),
    "command": Wrapper(never="vV"),
    "builtin": Wrapper(),
    "exec": Wrapper("a"),
    "setsid": Wrapper(),
    "chroot": Wrapper("", frozenset({"userspec", "groups"}), operands=1),
    "taskset": Wrapper(operands=1, never="p"),
    "flock": Wrapper(
        "wE",
        frozenset({"timeout", "conflict-exit-code"}),
        operands=1,
        strings="c",
        long_strings=frozenset({"command"}),
    ),
    "watch": Wrapper("nqd", frozenset({"interval", "equexit"})),
    "strace": Wrapper("oepsuEPIbaXOSU", frozenset({"output", "expr", "pid", "user"})),
    "ltrace": Wrapper("oepsuEaAnDlL", frozenset({"output"})),
    "unbuffer": Wrapper(),
    "chrt": Wrapper("TPD", operands=1, never="p"),
    "caffeinate": Wrapper("tw"),
    "coproc": Wrapper(),
}
"""Commands that run the command after their own options: deny and ask rules see through them
(``CommandPart.runs``), option by option, so ``sudo -u root rm`` is ``rm``."""


def behind(
    words: tuple[str | None, ...],
) -> tuple[tuple[str | None, ...], list[str | None]] | None:
    """The command a wrapper runs (empty: none) and the command lines it takes as strings, or
    ``None`` when ``words`` is not a wrapper. A word known only at run time ends the options:
    the command is taken from there (its name then *may* be anything)."""
    if not words or words[0] is None:
        return None
    spec = WRAPPERS.get(words[0].rsplit("/", 1)[-1])
    if spec is None:
        return None
    strings: list[str | None] = []
    operands = spec.operands
    index = 1
    while index < len(words):
        word = words[index]
        if word is None:
            return words[index:], strings
        if word == "--":
            index += 1
            break
        if word.startswith("--"):
            key, equals, value = word[2:].partition("=")
            takes = key in spec.long_values or key in spec.long_strings
            given: str | None = value
            if takes and not equals:
                index += 1
                given = words[index] if index < len(words) else ""
            if key in spec.long_strings:
                strings.append(given)
            index += 1
            continue
        if word.startswith("-") and len(word) > 1 and not re.fullmatch(r"-\d+", word):
            for at, letter in enumerate(word[1:], start=2):
                if letter in spec.never:
                    return (), strings
                if letter in spec.values or letter in spec.strings:
                    given = word[at:]
                    if not given:
                        index += 1
                        given = words[index] if index < len(words) else ""
                    if letter in spec.strings:
                        strings.append(given)
                    break
            index += 1
            continue
        if re.fullmatch(r"-\d+", word):  # nice -10
            index += 1
            continue
        if spec.assignments and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word, re.DOTALL):
            index += 1
            continue
        if operands:
            operands -= 1
            index += 1
            continue
        break
    while operands and index < len(words):
        operands -= 1
        index += 1
    return words[index:], strings


@dataclass(frozen=True, slots=True)
class Flags:
    """A command's options that write a file or run a program: long names (matched as written,
    with ``=value``, or abbreviated, as GNU ``getopt_long`` accepts) and short letters
    (matched anywhere in a ``-xyz`` cluster, where the value may follow attached)."""

    writes_long: frozenset[str] = frozenset()
    writes_short: str = ""
    runs_long: frozenset[str] = frozenset()
    runs_short: str = ""

    def match(self, word: str) -> tuple[str, bool] | None:
        """``("writes"|"runs", value in the next word)`` for an option of ours, else ``None``."""
        if word.startswith("--") and len(word) > 2:
            key, equals, _ = word[2:].partition("=")
            for kind, names in (("runs", self.runs_long), ("writes", self.writes_long)):
                if any(name.startswith(key) for name in names):
                    return kind, not equals
            return None
        if word.startswith("-") and len(word) > 1:
            for at, letter in enumerate(word[1:], start=2):
                for kind, letters in (("runs", self.runs_short), ("writes", self.writes_short)):
                    if letter in letters:
                        return kind, at == len(word)
        return None


OPTIONS: dict[str, Flags] = {
    "sort": Flags(frozenset({"output"}), "o", frozenset({"compress-program"})),
    "curl": Flags(
        frozenset(
            {
                "output",
                "remote-name",
                "remote-name-all",
                "output-dir",
                "dump-header",
                "cookie-jar",
                "trace",
                "trace-ascii",
                "stderr",
                "libcurl",
                "etag-save",
                "config",
                "hsts",
                "alt-svc",
            }
        ),
        "oODcK",
    ),
    "wget": Flags(
        frozenset(
            {
                "output-document",
                "output-file",
                "append-output",
                "directory-prefix",
                "execute",
                "save-cookies",
                "warc-file",
                "input-file",
                "config",
            }
        ),
        "OoaPei",
    ),
    "rg": Flags(runs_long=frozenset({"pre"})),
    "tar": Flags(
        runs_long=frozenset(
            {
                "to-command",
                "use-compress-program",
                "checkpoint-action",
                "info-script",
                "new-volume-script",
                "rsh-command",
            }
        ),
        runs_short="IF",
    ),
    "tee": Flags(),
}
"""Commands with options that write a file (``sort -o``, ``curl -o``/``-O``) or run a program
(``sort --compress-program``, ``rg --pre``, ``tar --to-command``). A word of theirs known only
at run time may be such an option, so it is refused too. ``tee`` writes the files it names."""

GENERIC_OUTPUT = re.compile(
    r"--(?:output|output-file|output-document|outfile|out-file)(?:=.*)?", re.DOTALL
)
"""Long options that name an output file, in any command."""

GIT_GLOBAL = Flags(runs_long=frozenset({"config-env", "exec-path"}), runs_short="c")
"""git's own options that change what it runs: ``-c core.fsmonitor=…`` (any ``-c``: many
settings name programs), ``--config-env``, ``--exec-path``."""
GIT_GLOBAL_VALUES = frozenset(
    {
        "-C",
        "-c",
        "--git-dir",
        "--work-tree",
        "--namespace",
        "--super-prefix",
        "--config-env",
        "--list-cmds",
    }
)

DIFFS = Flags(frozenset({"output"}), "", frozenset({"ext-diff"}))
GIT_OPTIONS: dict[str, Flags] = {
    **{
        sub: DIFFS
        for sub in (
            "log",
            "show",
            "diff",
            "whatchanged",
            "diff-tree",
            "diff-files",
            "diff-index",
            "range-diff",
            "format-patch",
            "stash",
        )
    },
    "archive": Flags(frozenset({"output"}), "o", frozenset({"exec", "remote"})),
    "rebase": Flags(runs_long=frozenset({"exec", "interactive"}), runs_short="xi"),
    "grep": Flags(runs_long=frozenset({"open-files-in-pager"}), runs_short="O"),
    "difftool": Flags(runs_long=frozenset({"extcmd", "tool"}), runs_short="xt"),
    "mergetool": Flags(runs_long=frozenset({"tool"}), runs_short="t"),
    "push": Flags(runs_long=frozenset({"receive-pack", "exec"})),
    "fetch": Flags(runs_long=frozenset({"upload-pack"})),
    "pull": Flags(runs_long=frozenset({"upload-pack"})),
    "ls-remote": Flags(runs_long=frozenset({"upload-pack", "exec"}), runs_short="u"),
    "clone": Flags(runs_long=frozenset({"upload-pack", "config", "template"}), runs_short="uc"),
}
"""git subcommands' options that write a file (``--output``) or run a program (``--ext-diff``,
``--upload-pack``, ``rebase --exec``, ``grep -O``, ``clone -c``)."""
GIT_ALWAYS_WRITES = frozenset({"format-patch", "bundle"})

GIT_CONFIG_READS = frozenset(
    {
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--list",
        "-l",
        "get",
        "list",
        "--get-color",
        "--get-colorbool",
    }
)


def git_config_writes(args: Sequence[str | None]) -> bool:
    """True unless ``git config …`` only reads: ``--get``/``--list``/``get``, or one key."""
    if not args or any(word in GIT_CONFIG_READS for word in args):
        return False
    plain = [w for w in args if w is None or not w.startswith("-")]
    flags = [w for w in args if w is not None and w.startswith("-")]
    return len(plain) != 1 or any(
        w
        in (
            "--add",
            "--unset",
            "--unset-all",
            "--replace-all",
            "--rename-section",
            "--remove-section",
            "-e",
            "--edit",
        )
        for w in flags
    )
