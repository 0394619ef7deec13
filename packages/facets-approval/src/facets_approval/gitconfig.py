"""A ``git`` command that runs without asking must not run what the repository configured.

A folder's ``.git`` can come from anyone: an unpacked archive, a shared folder, a repository
someone prepared. Its ``.git/config`` may say ``core.fsmonitor = ./.hidden/run.sh``, and then
the most harmless-looking allow rule, ``Bash(git status)``, runs that script: git runs the
fsmonitor whenever it reads the index. Many settings do the same (filter, diff and merge
drivers, ``gpg.program``, ``core.sshCommand``, a ``!`` alias, hooks...): pico3 knows them all
(:data:`pico3.git_programs.PROGRAM_SETTINGS`, :func:`pico3.repository_programs`), the same knowledge
with which it runs the agent's own git with every one of them switched off.

:func:`git_check` reads a ``bash`` command (:func:`~.shell.analyse_command`) for every ``git``
it runs, its wrappers' (``timeout 5 git status``) included, and the repository each one acts
on: the session's folder, moved by ``-C DIR`` (cumulative, as git does), ``--git-dir``,
``--work-tree``, and a ``cd DIR`` (or ``pushd``) earlier on the line. Where the line moves is
only approximated (a ``cd`` in a subshell does not last), so every folder the line may be in
is checked: the session's and each one a ``cd`` before that ``git`` named. A folder known only
when the line runs (``cd "$X"``, ``git -C "$X"``), or one that does not exist yet (the line may
make it, and copy a ``.git`` there), cannot be checked, so it asks.

**The environment** a ``git`` runs with counts: ``GIT_DIR`` and ``GIT_WORK_TREE`` (set for it
on the line, ``GIT_DIR=x git``, ``env GIT_DIR=x git``, ``export GIT_DIR=x;`` before it, or
inherited from the agent's own environment) are read as the ``--git-dir``/``--work-tree``
they stand for: that repository is the one checked. Any other variable the line sets for it
(``GIT_CONFIG_COUNT``/``_KEY_n``/``_VALUE_n``, ``GIT_CONFIG_PARAMETERS``, ``GIT_CONFIG_GLOBAL``,
``GIT_EXEC_PATH``, ``GIT_SSH_COMMAND``, ``GIT_EXTERNAL_DIFF``, ``GIT_ASKPASS``, ``PATH``,
``HOME``...) asks, but for the routine ones (:data:`_ROUTINE`: an author's name, ``LC_ALL``;
``GIT_PAGER=cat``, ``GIT_EDITOR=true``), and so does one whose name or value is known only
when it runs (``read X``, ``source f``, ``env -u``), or a wrapper that moves the command
(``env -C``, ``sudo -D``, ``chroot``). A command run from a string or by ``find -exec``
inherits the variables and folder of the command that runs it (``GIT_DIR=x bash -c 'git
status'``, ``env -C DIR find . -exec git status \\;``: :attr:`~.shell.CommandPart.assignments`);
a plain assignment counts once the line exports that name however it spells it (``builtin
export``, ``builtin set -a``, ``bash -a -c``; ``set -k`` puts an ``A=1`` among a command's
words in its environment: unknown); a name set twice with different values is known only
when it runs; ``CDPATH`` makes a ``cd`` to a plain relative name unknown; a line that
defines an ``alias`` and turns on ``shopt -s expand_aliases`` (``bash -c`` expands none without
it) asks whatever it runs. What the agent inherited otherwise (an inherited
``GIT_SSH_COMMAND``, ``GIT_CONFIG_PARAMETERS``) is the user's own, as the global configuration
is; an inherited ``GIT_COMMON_DIR``, which moves the configuration read, asks.

**Git front-ends** (:data:`GIT_FRONT_ENDS`: ``gh``, ``hub``, ``tig``, ``lazygit``, ``gitui``,
``git-lfs``, ``pre-commit``, ``lefthook``, ``husky``, ``scalar``; directly or through a package
runner, ``npx``, ``npm exec``..., :func:`_unrun`, as git itself is) run git
in the repository of their folder on the user's behalf (``gh pr checkout`` fetches and checks
out: the ``post-checkout`` hook, the fsmonitor and the filters run), so each is checked as a
``git`` running any command there (every hook counts); an option that moves it to another
repository (``tig -C``, ``lazygit -p``) asks. Beyond them nothing is followed: any program an
allow rule lets run may run anything, git included (``Bash(make:*)`` allows what the Makefile
runs; ``npm test``'s scripts; a ``pre-commit`` hook's own command) — what such a rule allows is
the program's whole doing.

The answer, when the repository's own configuration (local, worktree, the files they include;
never the user's global configuration) or its hooks make git run a program, is one sentence
naming the setting, its file and the program: ``this repository's git configuration runs
./.hidden/run.sh (core.fsmonitor in .git/config)``. The approval hook then asks instead of
running (:mod:`.session`); no allow rule and no ``PermissionRequest`` hook can make it run,
only a person. The dialog offers no standing rule; it offers to remember the approval while
the repository's configuration stays as it is (:func:`git_check`, :mod:`.git_approvals`). Benign
values pass: ``core.fsmonitor = true``, git-lfs's filters as ``git lfs install`` writes them,
``.sample`` hooks.

**A trusted project trusts its git configuration** ("code that comes with a repository runs
only in folders the user trusts"): a repository inside the project root the permission source
reports as trusted (``load()["trusted"]``, :class:`~.permissions.PermissionSource`) is not
checked; one elsewhere (``git -C /tmp/other status``) still is.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pico3 import ConfiguredProgram, repository_programs

from .git_approvals import RememberedGit
from .guarded import path_within
from .shell import CommandAnalysis, Variable, analyse_command, wrapper_environment

__all__ = [
    "GIT_FRONT_ENDS",
    "GitCheck",
    "GitTarget",
    "fingerprint",
    "git_check",
    "git_targets",
    "trusted_root",
]

_VALUED = frozenset({"--namespace", "--super-prefix", "--list-cmds", "--config-env", "-c"})
"""git's own options that take the next word as their value (and choose no repository)."""

_SHOWN = 3
"""How many programs a reason names before it says how many more."""


_ROUTINE = frozenset(
    {
        "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS",
        "GIT_FLUSH", "GIT_PROGRESS_DELAY", "GIT_MERGE_VERBOSITY", "GIT_LITERAL_PATHSPECS",
        "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS", "GIT_ADVICE",
        "GIT_NO_REPLACE_OBJECTS", "GIT_REFLOG_ACTION", "GIT_DEFAULT_HASH", "LANG", "LANGUAGE",
        "TZ", "NO_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "TERM", "COLUMNS", "LINES",
    }
)  # fmt: skip
"""Variables a line may set for ``git`` that make it run nothing and read no other
configuration or repository (and every ``LC_*``)."""

_QUIET = frozenset({"", "cat", "true", ":"})
"""The values with which a pager or editor variable runs nothing of note (``GIT_PAGER=cat``,
``GIT_EDITOR=true git rebase --continue``)."""

_PROGRAM_VARIABLES = frozenset(
    {"GIT_PAGER", "PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "EDITOR", "VISUAL"}
)

_CHOOSING = {"GIT_DIR": "--git-dir", "GIT_WORK_TREE": "--work-tree"}
"""Variables that choose the repository, read as the options they stand for."""

_INHERITED_UNREAD = ("GIT_COMMON_DIR",)
"""Variables of the agent's own environment that move where git reads the repository's
configuration in a way this check does not follow: a git run with one asks."""


@dataclass(frozen=True, slots=True)
class GitTarget:
    """One ``git`` a command line runs: where (``None``: a folder known only when it runs),
    with which repository-choosing options, and its subcommand (``None``: none, or unknown)."""

    folder: str | None
    options: tuple[str, ...]
    command: str | None
    unread: tuple[str, ...] = ()
    """The variables its environment has that can make it run a program or read another
    configuration, which this check does not read (``GIT_CONFIG_COUNT``, ``GIT_SSH_COMMAND``
    set on the line; ``GIT_COMMON_DIR`` inherited): it asks. ``GIT_DIR`` and
    ``GIT_WORK_TREE``, set on the line or inherited, are read instead, as ``--git-dir`` and
    ``--work-tree`` (the options win, as for git)."""


def _path(folder: str, given: str, expanded: bool) -> str | None:
    """``given`` made absolute against ``folder``; ``expanded``: bash expands a leading ``~``
    there (a word of its own, unquoted). A ``~`` word whose literal folder exists (a folder
    named ``~`` in the session's: bash leaves a quoted ``"~/x"`` as it is) is ambiguous:
    ``None``, known only when it runs."""
    if given.startswith("~"):
        if os.path.lexists(os.path.join(folder, given.split("/", 1)[0])):
            return None
        if expanded:
            given = os.path.expanduser(given)
    return os.path.normpath(os.path.join(folder, given))


def _cd(words: tuple[str | None, ...], folder: str | None, cdpath: bool = False) -> str | None:
    """The folder after ``cd``/``pushd`` with ``words`` (``None``: known only when it runs).
    ``cdpath``: ``CDPATH`` may be set (inherited, or assigned on the line: the shell's own
    variable is what ``cd`` reads), so a relative folder not starting with ``.`` may be found
    in one of its folders first (``CDPATH=/tmp; cd evil`` goes to ``/tmp/evil``)."""
    args = [w for w in words[1:] if w is None or not w.startswith("-") or w == "-"]
    if folder is None:
        return None
    if not args:
        return os.path.expanduser("~")
    target = args[0]
    if target is None or target == "-":
        return None
    if cdpath and not target.startswith(("/", ".", "~")):
        return None
    return _path(folder, target, expanded=True)


def _git(
    args: tuple[str | None, ...],
    folder: str | None,
    variables: Sequence[Variable] = (),
    inherited: Mapping[str, str] | None = None,
) -> GitTarget:
    """The :class:`GitTarget` of ``git <args>`` started in ``folder``, with ``variables`` set
    by the line for it over the ``inherited`` environment (:func:`_environment`). git applies
    each ``-C`` as it reads it, but a relative ``--git-dir``/``--work-tree`` only once all are
    read (it sets ``GIT_DIR``), so against the last folder: ``git --git-dir=.git -C sub`` is
    ``sub/.git``; a relative ``GIT_DIR`` too."""
    options: list[tuple[str, str, bool]] = []
    index = 0
    command: str | None = None
    while index < len(args):
        word = args[index]
        if word is None:
            return GitTarget(None, (), None)
        if not word.startswith("-"):
            command = word
            break
        name, equals, value = word.partition("=")
        if name in ("--git-dir", "--work-tree") or word == "-C":
            given: str | None = value
            if not equals:
                index += 1
                given = args[index] if index < len(args) else None
            if given is None or folder is None:
                return GitTarget(None, (), None)
            if word == "-C":
                folder = _path(folder, given, expanded=True)
            else:
                options.append((name, given, not equals))  # `--git-dir=~/x`: bash leaves the ~
        elif word == "--bare":
            options.append((word, "", False))
        elif word in _VALUED:
            index += 1
        index += 1
    chosen, unread = _environment(variables, os.environ if inherited is None else inherited)
    named = {option for option, _value, _expanded in options}
    for variable, value in chosen.items():
        if value is None:
            return GitTarget(None, (), None)  # `GIT_DIR=$X`, `unset GIT_DIR`
        if _CHOOSING[variable] not in named:
            options.append((_CHOOSING[variable], *value))
    resolved: list[str] = []
    for name, given, expanded in options:
        path = _path(folder, given, expanded) if folder is not None and given else None
        if name != "--bare" and path is None:
            return GitTarget(None, (), None)
        resolved.append(name if name == "--bare" else f"{name}={path}")
    return GitTarget(folder, tuple(resolved), command, unread)


def _environment(
    variables: Sequence[Variable], inherited: Mapping[str, str]
) -> tuple[dict[str, tuple[str, bool] | None], tuple[str, ...]]:
    """What the environment of a ``git`` changes for this check: the repository-choosing
    variables (:data:`_CHOOSING`) with their value and whether bash expanded a ``~`` in it (set
    on the line) or not (inherited), ``None`` when known only when it runs; and the names of
    the variables this check does not read (:attr:`GitTarget.unread`). The agent's own
    environment is the user's, like the global git configuration: only what it makes git
    read as the repository counts; what the line sets counts whole."""
    chosen: dict[str, tuple[str, bool] | None] = {
        name: (inherited[name], False) for name in _CHOOSING if inherited.get(name)
    }
    unread = [name for name in _INHERITED_UNREAD if inherited.get(name)]
    for variable in variables:
        name, value = variable.name, variable.value
        if name in _CHOOSING:
            chosen[name] = (value, True) if value else None  # empty: git refuses it
        elif not name:
            unread.append("variables known only when it runs")
        elif name in _PROGRAM_VARIABLES:
            if value is None or value.strip() not in _QUIET:
                unread.append(name)
        elif name not in _ROUTINE and not name.startswith("LC_"):
            unread.append(name)
    return chosen, tuple(dict.fromkeys(unread))


GIT_FRONT_ENDS: dict[str, tuple[str, ...]] = {
    "gh": (),
    "hub": ("-C",),
    "tig": ("-C",),
    "lazygit": ("-p", "--path", "-g", "--git-dir", "-w", "--work-tree"),
    "gitui": ("-d", "--directory", "--workdir"),
    "git-lfs": (),
    "pre-commit": (),
    "lefthook": (),
    "husky": (),
    "scalar": ("-C",),
}
"""Programs that run git in the repository of their folder on the user's behalf, each with the
options (prefixes) that point it at another repository: checked as a ``git`` there (module
docstring)."""

_RUNNERS = frozenset({"npx", "bunx", "pnpx"})
"""Package runners whose first word that is no option is the program they run (``npx husky``)."""

_RUNNER_COMMANDS = frozenset(
    {("npm", "exec"), ("npm", "x"), ("pnpm", "exec"), ("pnpm", "dlx"), ("yarn", "exec"),
     ("yarn", "dlx"), ("bun", "x")}
)  # fmt: skip
"""Package managers' commands that run a program the same way (``npm exec -- husky``)."""


def _unrun(words: tuple[str | None, ...]) -> tuple[str | None, ...]:
    """The command a package runner (:data:`_RUNNERS`, :data:`_RUNNER_COMMANDS`) runs, its
    words as written from its name on (``npx -y git -C x status`` → ``git -C x status``);
    ``words`` itself when it is no runner, ``()`` when it names no program."""
    name = (words[0] or "").rsplit("/", 1)[-1] if words else ""
    if name in _RUNNERS:
        start = 1
    elif len(words) > 1 and (name, words[1]) in _RUNNER_COMMANDS:
        start = 2
    else:
        return words
    for index in range(start, len(words)):
        word = words[index]
        if word is None or not word.startswith("-"):
            return _unrun(words[index:])
    return ()


def _front_end(words: tuple[str | None, ...]) -> tuple[str, bool] | None:
    """The git front-end ``words`` runs (:data:`GIT_FRONT_ENDS`), and whether an option of it
    points it elsewhere (or a word is known only when it runs), or ``None``."""
    name = (words[0] or "").rsplit("/", 1)[-1] if words else ""
    moving = GIT_FRONT_ENDS.get(name)
    if moving is None:
        return None
    elsewhere = bool(moving) and any(w is None or w.startswith(moving) for w in words[1:])
    return name, elsewhere


def _commands(
    analysis: CommandAnalysis, environ: Mapping[str, str] | None = None
) -> Iterator[tuple[tuple[str | None, ...], list[Variable], bool, bool]]:
    """Each command the line runs (a part, and the command behind each of its wrappers), with
    the variables set for it (every one the line sets, its own ``A=1`` prefix, a wrapper's
    ``env A=1``), whether a wrapper runs it in another folder (``env -C``, ``sudo -D``,
    ``sudo -i``, ``chroot``) and whether ``xargs`` adds words to it (``echo status | xargs
    git``: its subcommand is known only when it runs)."""
    exported = _exported(analysis, environ)
    for part in analysis.parts:
        variables = [*exported, *part.assignments]
        elsewhere = part.elsewhere
        outer = part.words
        yield outer, list(variables), elsewhere, False
        for inner in part.runs:
            wrapper = outer[: len(outer) - len(inner)]
            found, moves = wrapper_environment(wrapper)
            variables += found
            elsewhere = elsewhere or moves
            appended = (wrapper[0] or "").rsplit("/", 1)[-1] == "xargs"
            yield inner, list(variables), elsewhere, appended
            outer = inner


def _exported(
    analysis: CommandAnalysis, inherited: Mapping[str, str] | None = None
) -> list[Variable]:
    """The variables the line sets that may reach a command's environment: every exported or
    unset one, and a shell variable it only assigns (``msg=x; git commit -m "$msg"``) when
    the environment holds that name already (``PATH=x;``, ``HOME=x;``), the line exports it
    anywhere (a loop may come back to it), or the line turns on
    ``set -a``/``set -o allexport`` (it exports every assignment), however it runs ``set``
    (``builtin set -a``, ``command set -a``). ``set -k``/``set -o keyword`` makes an ``A=1``
    anywhere among a command's words part of its environment (``git status GIT_DIR=x``): the
    variables are then known only when it runs."""
    environment = os.environ if inherited is None else inherited
    sets = [
        words[1:]
        for part in analysis.parts
        for words in (part.words, *part.runs)
        if words[:1] == ("set",)
    ]
    allexport = any(_set_option(args, "a", "allexport") for args in sets)
    keyword = any(_set_option(args, "k", "keyword") for args in sets)
    exported = {variable.name for variable in analysis.variables if variable.exported}
    found = [
        variable
        for variable in analysis.variables
        if variable.exported
        or allexport
        or not variable.name
        or variable.name in environment
        or variable.name in exported  # `export A=1; A=2;`: still exported
    ]
    values: dict[str, set[str | None]] = {}
    for variable in found:
        values.setdefault(variable.name, set()).add(variable.value)
    # set twice with different values (`export A=x; git status; export A=y`): which one a
    # command sees depends on where it is, which this check does not follow
    found = [
        variable if len(values[variable.name]) == 1 else Variable(variable.name, None)
        for variable in found
    ]
    return [*found, Variable("", None)] if keyword else found


def _set_option(args: Sequence[str | None], letter: str, name: str) -> bool:
    """Whether ``set`` with ``args`` may turn on the option ``-letter``/``-o name`` (a word
    known only when it runs may)."""
    return any(
        word is None or word == name or (word[:1] in "-+" and letter in word[1:]) for word in args
    )


def _expands_aliases(analysis: CommandAnalysis) -> bool:
    """Whether the line may turn on ``shopt -s expand_aliases`` (however it spells ``shopt``:
    ``builtin shopt``), without which ``bash -c`` expands no alias it defines."""
    return any(
        words[:1] == ("shopt",) and any(w is None or w == "expand_aliases" for w in words[1:])
        for part in analysis.parts
        for words in (part.words, *part.runs)
    )


def git_targets(
    command: str, workspace: str, environ: Mapping[str, str] | None = None
) -> list[GitTarget]:
    """Every ``git`` ``command`` runs, once for each folder it may run in (see the module
    docstring), in order; ``environ`` is the environment the line starts with (this
    process's by default)."""
    return _targets(analyse_command(command), workspace, environ)


def _targets(
    analysis: CommandAnalysis, workspace: str, environ: Mapping[str, str] | None = None
) -> list[GitTarget]:
    """:func:`git_targets` of a line already analysed."""
    folders: list[str | None] = [workspace]
    found: dict[GitTarget, None] = {}
    cdpath = "CDPATH" in (os.environ if environ is None else environ) or any(
        variable.name in ("CDPATH", "") for variable in analysis.variables
    )
    for written, variables, elsewhere, appended in _commands(analysis, environ):
        words = _unrun(written)
        if not words:
            continue
        name = words[0].rsplit("/", 1)[-1] if words[0] is not None else None
        if name is None:
            # `"$PYTHON" -m pytest`: no rule allows a command named only when it runs, so it
            # asks in every mode but auto, where the model may run any program by name anyway;
            # not counted as a git (a deliberate `$'git' status` is such a program)
            continue
        if name in ("cd", "pushd"):
            cdpath = cdpath or any(v.name in ("CDPATH", "") for v in variables)
            moved = _cd(words, folders[-1], cdpath)
            folders.append(moved)
        elif name == "git" or (name.startswith("git-") and name not in GIT_FRONT_ENDS):
            # `git-status`, git's own programs (`/usr/lib/git-core/git-status`), are `git status`
            args = words[1:] if name == "git" else (name.removeprefix("git-"), *words[1:])
            for folder in [None] if elsewhere else dict.fromkeys(folders):
                target = _git(args, folder, variables, environ)
                if appended and target.command is None and target.folder is not None:
                    target = replace(target, command="xargs")  # any subcommand: every hook
                found[target] = None
        elif (front := _front_end(words)) is not None:  # `gh pr checkout`: any git there
            program, moved = front
            for folder in [None] if elsewhere or moved else dict.fromkeys(folders):
                found[_git((program,), folder, variables, environ)] = None
    return list(found)


def _located(program: ConfiguredProgram, folder: str) -> ConfiguredProgram:
    """``program`` with its file and path made absolute (relative ones are to ``folder``)."""
    origin, path = (os.path.join(folder, p) for p in (program.origin, program.program))
    shown = path if os.path.lexists(path) else program.program  # a command, not a file
    return replace(program, origin=origin, program=shown)


def trusted_root(source: Any) -> str | None:
    """The project root when the permission source (:class:`~.permissions.PermissionSource`)
    says the user trusts that project (``trusted``), else ``None``: without a source, or one
    that cannot be read, nothing is trusted."""
    try:
        loaded = source.load() if source is not None else {}
    except Exception:  # a source must never stop a decision; the rules report it
        return None
    root = loaded.get("root")
    return root if loaded.get("trusted") is True and isinstance(root, str) else None


def _names(programs: list[ConfiguredProgram]) -> str:
    shown = [str(p) for p in programs[:_SHOWN]]
    more = len(programs) - _SHOWN
    if more > 0:
        shown.append(f"{more} more")
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


@dataclass(frozen=True, slots=True)
class GitCheck:
    """What :func:`git_check` found: why the command asks, and the repositories whose
    configuration a person may approve "while it stays as it is" (empty: not offered)."""

    reason: str
    repositories: tuple[RememberedGit, ...] = ()


def _unpinned(program: ConfiguredProgram) -> bool:
    """Whether a :func:`fingerprint` cannot pin ``program`` down: what it runs is unknown (a
    configuration, repository or include this check could not read), it names a file whose
    content cannot be pinned (``digest`` ``"-"``: ``pre-commit -> /dev/fd/3``, ``fsmonitor =
    ./x`` with ``x -> /dev/stdin``), or it is a hook with no content hash (a hooks folder under
    ``/proc``): its program can change while the fingerprint stays the same."""
    if program.program.startswith("an unknown program") or program.digest == "-":
        return True
    hook = program.setting.endswith(" hook") or program.setting in (
        "core.hooksPath",
        "its hooks folder",
    )
    return hook and not program.digest


def fingerprint(programs: Iterable[ConfiguredProgram], folder: str) -> str:
    """A digest of exactly ``programs`` (each setting, its file made absolute against
    ``folder``, the repository's work tree, from which git names them; its value and its file's content hash): any new, removed or changed one, an
    edited hook file included, changes it; their order does not."""
    rows = sorted(
        (p.setting, os.path.normpath(os.path.join(folder, p.origin)), p.program, p.digest)
        for p in programs
    )
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()


def git_check(
    command: object,
    workspace: str | None,
    trusted_root: str | None,
    remembered: Callable[[str], str | None] | None = None,
) -> GitCheck | None:
    """Why the ``bash`` ``command`` must ask although it would run without asking: the
    programs the repository its ``git`` acts on configured (``None``: nothing, or no ``git``).
    ``workspace`` is the session's folder (the command's starting folder); a repository inside
    ``trusted_root`` (the trusted project's root, else ``None``) is not checked, nor one whose
    git folder ``remembered`` answers with the :func:`fingerprint` its programs have now (a
    person approved them as they are: :mod:`.git_approvals`). Blocking (it runs ``git
    config``): call it in a worker thread."""
    if not isinstance(command, str):
        return None
    start = workspace if workspace is not None else os.getcwd()
    analysis = analyse_command(command)
    if analysis.aliases and _expands_aliases(analysis):
        return GitCheck(
            f"it defines an alias ({analysis.aliases[0]}), with which a later word may run git "
            "in another repository or environment this check cannot follow; run it without "
            "the alias"
        )
    programs: list[ConfiguredProgram] = []
    repositories: dict[str, RememberedGit] = {}
    unknown = False  # something a fingerprint cannot pin down: no "always" offered
    for target in _targets(analysis, start):
        if target.command is None and target.folder is not None:
            continue  # `git --version`, `git -C x`: runs no subcommand, nothing configured
        if target.unread:
            return GitCheck(
                f"it runs git with {', '.join(target.unread)} set, which can make git run a "
                "program or read a configuration this check does not read"
            )
        if target.folder is None or target.command is None:
            return GitCheck(
                "it runs git in a folder known only when it runs, so that repository's "
                "configuration (which can make git run programs) cannot be checked"
            )
        if not os.path.isdir(target.folder):  # made by the line itself (`mkdir d && cd d`)?
            if trusted_root is not None and path_within(
                os.path.realpath(target.folder), os.path.realpath(trusted_root)
            ):
                continue  # whatever repository is there then is inside the trusted project
            return GitCheck(
                f"it runs git in {target.folder}, which does not exist yet, so that "
                "repository's configuration (which can make git run programs) cannot be checked"
            )
        try:
            found = repository_programs(target.folder, target.command, options=target.options)
        except (OSError, subprocess.TimeoutExpired) as error:
            if isinstance(error, FileNotFoundError) and shutil.which("git") is None:
                return None  # no git here: nothing runs
            return GitCheck(f"the git configuration of {target.folder} could not be read ({error})")
        if found is None or not found.programs:
            continue
        if trusted_root is not None and path_within(found.folder, os.path.realpath(trusted_root)):
            continue  # a trusted project's repository: its configuration is trusted with it
        now = fingerprint(found.programs, found.folder)  # git names files from the top
        if found.git_dir and remembered is not None and remembered(found.git_dir) == now:
            continue  # approved by a person while its configuration stays as it is
        if found.folder != os.path.realpath(start):  # another repository: say which
            named = [_located(p, found.folder) for p in found.programs]
        else:
            named = list(found.programs)
        programs += [p for p in named if p not in programs]
        unknown = unknown or not found.git_dir
        unknown = unknown or any(_unpinned(p) for p in found.programs)
        shown = tuple(str(p) for p in named)
        repositories[found.git_dir] = RememberedGit(found.git_dir, now, shown)
    if not programs:
        return None
    reason = f"this repository's git configuration runs {_names(programs)}"
    return GitCheck(reason, () if unknown else tuple(repositories.values()))
