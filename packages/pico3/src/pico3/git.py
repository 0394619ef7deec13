"""Run git for the agent's own purposes without running anything a repository configured.

A repository is data an attacker can ship: its ``.git/config`` (and the files it includes),
``.git/info/attributes`` and the ``.gitattributes`` files of its tree all arrive with a clone
or an unpacked archive. Several of git's settings there name *programs* that git runs on its
own, so a plain ``git ls-files`` in a stranger's repository can run the stranger's code:

=========================  ====================================================================
setting                    what runs, and when
=========================  ====================================================================
``core.fsmonitor``         a hook script, whenever the index is read (``ls-files``, ``status``)
``core.hooksPath``,        hooks (``post-index-change``, ``pre-auto-gc``, ``post-checkout``...)
``.git/hooks/``
``filter.<d>.clean`` /     a filter driver selected by ``filter=<d>`` in an attributes file,
``smudge`` / ``process``   when a file's content is hashed or checked out (``status``, ``diff``)
``diff.<d>.textconv`` /    a diff driver selected by ``diff=<d>`` (or every diff, for
``diff.<d>.command``,      ``diff.external``), on ``diff``, ``log -p``, ``grep``, ``blame``
``diff.external``
``core.pager``             the pager (only on a terminal)
``core.sshCommand``,       transports and credential prompts (only for remote operations)
``core.askPass``,
``credential.helper``
``gc.auto``                ``git gc --auto`` in the background after commands that write
=========================  ====================================================================

:func:`run_git` runs one read-only git command with every one of these switched off, whoever
owns the repository: the agent's own background git (listing the files to index, anything
similar) has no use for any of them, so it does not depend on whether the project is trusted.

* The overrides are *command-line* configuration (``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_<n>``
  / ``GIT_CONFIG_VALUE_<n>``, git ≥ 2.31), which beats every configuration file:
  ``core.fsmonitor=false``, ``core.hooksPath=/dev/null`` (no hook is ever found there, so
  ``.git/hooks/`` is never looked at), ``core.pager=cat``, ``credential.helper=`` (the list
  emptied), ``gc.auto=0``, ``maintenance.auto=false``, and ``core.excludesFile=/dev/null``
  (the user's global excludes are not the project's).
* Filter drivers are neutralised by name: ``git config --get-regexp`` (which reads
  configuration and runs nothing) lists every ``filter.<d>.*`` key any configuration file
  defines, includes followed, and each such driver gets empty ``clean``, ``smudge`` and
  ``process`` commands (an empty command is "no filter" to git: the content passes unchanged)
  and ``required=false``. A driver that an attributes file selects but no configuration
  defines has no command at all, so this covers every ``.gitattributes`` and
  ``.git/info/attributes``.
* Diff drivers: ``diff``, ``log`` and ``show`` always get ``--no-ext-diff --no-textconv``
  (``diff.external``, ``diff.<d>.command`` and ``diff.<d>.textconv`` are then never run).
* Transports (``core.sshCommand``, ``core.gitProxy``, ``core.askPass``) need nothing: none of
  the accepted commands (``_COMMANDS``) talks to a remote.
* Aliases need nothing either: a built-in command always wins over an alias of the same name,
  and only the built-ins of ``_COMMANDS`` are accepted.
* The system configuration is not read (``GIT_CONFIG_NOSYSTEM=1``); inherited variables that
  would point git at another repository or add configuration (``GIT_DIR``, ``GIT_WORK_TREE``,
  ``GIT_CONFIG_PARAMETERS``, ...) are dropped, so ``cwd`` decides; git stays off the terminal
  (``--no-pager``, ``GIT_TERMINAL_PROMPT=0``, stdin from ``/dev/null``) and takes no optional
  locks (``GIT_OPTIONAL_LOCKS=0``: no refreshed index written behind the user's back).

``tests/pico3/test_git.py`` proves it on a real repository whose ``.git/config`` sets
``core.fsmonitor`` and a ``.gitattributes``-selected filter to scripts that leave a marker.

The same knowledge, turned around: :func:`repository_programs` says which programs a
repository's *own* configuration (its local and worktree configuration and the files they
include; not the user's global configuration, which the user owns) and its hooks folder would
make a ``git`` command run, for a caller that is about to let someone else's ``git`` run there
unchanged (the approval feature, before an allowed ``git status``). It reads configuration with
``git config --list`` (which runs nothing) and looks at the hooks folder; the settings it knows
are :data:`PROGRAM_SETTINGS`, the rows of the table above and the rarer ones besides.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from functools import cache

__all__ = [
    "PROGRAM_SETTINGS",
    "ConfiguredProgram",
    "RepositoryPrograms",
    "repository_programs",
    "run_git",
    "submodule_git_entries",
]

_COMMANDS = frozenset({"ls-files", "rev-parse", "status", "diff", "log", "show", "ls-tree"})
"""The git commands :func:`run_git` accepts: built-ins that only read, never an alias."""

_DIFFING = frozenset({"diff", "log", "show"})
"""Commands that may run diff drivers: they get ``--no-ext-diff --no-textconv``."""

_FIXED: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"), ("core.hooksPath", os.devnull), ("core.pager", "cat"),
    ("core.excludesFile", os.devnull), ("credential.helper", ""), ("gc.auto", "0"),
    ("maintenance.auto", "false"),
)  # fmt: skip
"""Overrides that do not depend on the repository (see the module docstring)."""

_FILTER_KEYS = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))
"""The keys blanked for every filter driver a configuration file defines (an empty command is
"no filter" to git)."""


_REPOSITORY_VARIABLES = frozenset(
    {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_CONFIG_PARAMETERS"}
)
"""Inherited variables that would point git at another repository or add configuration (set,
for instance, when the agent itself runs inside a git hook): dropped, so ``cwd`` decides."""


def _inherited_override(name: str) -> bool:
    return (
        name in _REPOSITORY_VARIABLES
        or name == "GIT_CONFIG_COUNT"
        or name.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
    )


def _environment(overrides: Sequence[tuple[str, str]], base: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not _inherited_override(k)}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    env["GIT_CONFIG_COUNT"] = str(len(overrides))
    for index, (key, value) in enumerate(overrides):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def _filters(git: str, cwd: str, base: Mapping[str, str]) -> list[tuple[str, str]]:
    """The blanking overrides for every filter driver any configuration file defines."""
    done = subprocess.run(
        [git, "--no-pager", "config", "--null", "--name-only", "--get-regexp", r"^filter\."],
        cwd=cwd,
        env=_environment(_FIXED, base),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    drivers: dict[str, None] = {}
    for raw in done.stdout.split(b"\0"):
        _section, _, rest = os.fsdecode(raw).partition(".")
        driver, dot, _key = rest.rpartition(".")
        if dot and driver:
            drivers[driver] = None
    return [(f"filter.{d}.{key}", value) for d in drivers for key, value in _FILTER_KEYS]


def run_git(
    cwd: str | os.PathLike[str],
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git <args>`` in ``cwd`` with no repository-configured program able to run.

    Switched off, as command-line configuration that beats every file: ``core.fsmonitor``,
    hooks (``core.hooksPath=/dev/null``), every filter driver any configuration defines (so no
    ``.gitattributes`` filter runs), external diff and textconv drivers (``--no-ext-diff
    --no-textconv``), the pager, credential helpers, automatic gc; the system configuration is
    not read. Use it for the agent's own git, trusted project or not.

    ``args[0]`` must be one of the read-only built-ins ``ls-files``, ``rev-parse``, ``status``,
    ``diff``, ``log``, ``show``, ``ls-tree`` (``ValueError`` otherwise); stdout
    and stderr are captured as bytes, stdin is ``/dev/null``, a non-zero exit is returned, not
    raised. ``env`` is the environment to start from (default: this process's). Raises
    ``FileNotFoundError`` when git is not installed, ``subprocess.TimeoutExpired`` past
    ``timeout``, ``OSError`` when it cannot be started.
    """
    if not args or args[0] not in _COMMANDS:
        allowed = ", ".join(sorted(_COMMANDS))
        raise ValueError(f"run_git runs only git's built-in {allowed}; got {list(args)!r}")
    git = shutil.which("git")
    if git is None:
        raise FileNotFoundError("git is not installed (not found on PATH)")
    folder = os.fspath(cwd)
    base = os.environ if env is None else env
    overrides = [*_FIXED, *_filters(git, folder, base)]
    command, *rest = args
    options = ["--no-ext-diff", "--no-textconv"] if command in _DIFFING else []
    return subprocess.run(
        [git, "--no-pager", command, *options, *rest],
        cwd=folder,
        env=_environment(overrides, base),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
        timeout=timeout,
    )


_GITLINKS: dict[tuple[str, int], tuple[tuple[int, int, int], list[str]]] = {}
""":func:`submodule_git_entries`' answers by ``(tree, depth)``, with the index's ``(device,
inode, mtime)`` they were read from: looked up again only when the index changed."""


def _index_of(tree: str) -> str | None:
    """The index file of the repository ``tree`` is in (git's own search: the first ``.git``
    folder with a ``HEAD``, or ``gitdir:`` file, at or above ``tree``), or ``None`` outside
    any. Like git, it passes over a ``.git`` folder that is no repository (the sandbox's empty
    placeholder in a session folder inside a repository)."""
    folder = tree
    while True:
        entry = os.path.join(folder, ".git")
        if os.path.isdir(entry) and os.path.lexists(os.path.join(entry, "HEAD")):
            return os.path.join(entry, "index")
        if os.path.isfile(entry):
            try:
                with open(entry, encoding="utf-8", errors="replace") as gitfile:
                    line = gitfile.readline().strip()
            except OSError:
                return None
            if not line.startswith("gitdir:"):
                return None
            return os.path.join(folder, line[len("gitdir:") :].strip(), "index")
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def submodule_git_entries(tree: str | os.PathLike[str], *, depth: int = 3) -> list[str]:
    """The ``.git`` (a ``gitdir:`` file, or an old-style folder) of every submodule that the
    index of ``tree``'s repository records at or below ``tree`` (its gitlinks), and of their
    submodules in turn, down to ``depth`` levels: the repositories git enters on its own (a
    ``git status`` in the superproject runs one in each submodule, with that submodule's
    configuration, ``core.fsmonitor`` included). A submodule not checked out (its folder
    empty, no ``.git``) is given as its folder: a ``.git`` made there would be entered too.
    Absolute paths; empty outside a repository or without git. Read with :func:`run_git`;
    cached until the index changes."""
    folder = os.path.realpath(tree)
    index = _index_of(folder)
    if depth <= 0 or index is None:
        return []
    try:
        info = os.stat(index)
    except OSError:
        return []
    stamp = (info.st_dev, info.st_ino, info.st_mtime_ns)
    cached = _GITLINKS.get((folder, depth))
    if cached is not None and cached[0] == stamp:
        return list(cached[1])
    try:
        done = run_git(folder, "ls-files", "--stage", "-z", timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    found: list[str] = []
    for record in done.stdout.split(b"\0") if done.returncode == 0 else ():
        mode, _, rest = record.partition(b" ")
        if mode != b"160000":
            continue
        path = os.path.join(folder, os.fsdecode(rest.partition(b"\t")[2]))
        entry = os.path.join(path, ".git")
        if os.path.lexists(entry):
            found.append(entry)
            found += submodule_git_entries(path, depth=depth - 1)
        elif os.path.isdir(path):
            found.append(path)
    _GITLINKS[(folder, depth)] = (stamp, found)
    return list(found)


PROGRAM_SETTINGS: Mapping[str, str] = {
    "core.fsmonitor": "unless a boolean (true: git's own daemon)",
    "core.hookspath": "the executable hooks in that folder",
    "core.editor": "always",
    "core.pager": "always",
    "core.sshcommand": "always",
    "core.askpass": "always",
    "core.gitproxy": "always",
    "core.alternaterefscommand": "always",
    "sequence.editor": "always",
    "diff.external": "always",
    "diff.*.textconv": "always",
    "diff.*.command": "always",
    "filter.*.clean": "unless git-lfs's own, as `git lfs install` writes it",
    "filter.*.smudge": "unless git-lfs's own, as `git lfs install` writes it",
    "filter.*.process": "unless git-lfs's own, as `git lfs install` writes it",
    "merge.*.driver": "always",
    "gpg.program": "always",
    "gpg.*.program": "always",
    "gpg.ssh.defaultkeycommand": "always",
    "credential.helper": "unless empty",
    "credential.*.helper": "unless empty",
    "pager.*": "unless a boolean",
    "alias.*": "when the command runs the alias: a `!` shell alias, or one that sets options",
    "remote.*.uploadpack": "always",
    "remote.*.receivepack": "always",
    "remote.*.url": "an ext:: address",
    "remote.*.pushurl": "an ext:: address",
    "url.*.insteadof": "an ext:: address",
    "url.*.pushinsteadof": "an ext:: address",
    "submodule.*.url": "an ext:: address",
    "submodule.*.update": "a `!` command",
    "difftool.*.cmd": "always",
    "difftool.*.path": "always",
    "mergetool.*.cmd": "always",
    "mergetool.*.path": "always",
    "man.*.cmd": "always",
    "man.*.path": "always",
    "browser.*.cmd": "always",
    "browser.*.path": "always",
    "sendemail.tocmd": "always",
    "sendemail.cccmd": "always",
    "sendemail.*.tocmd": "always",
    "sendemail.*.cccmd": "always",
    "sendemail.smtpserver": "an absolute path (a sendmail-like program)",
    "sendemail.*.smtpserver": "an absolute path (a sendmail-like program)",
}
"""The settings through which a repository's configuration makes git run a program (keys as
git lists them: section and name lower case; ``*`` any subsection or name), each with when its
value is one. ``include.path`` and ``includeIf.<cond>.path`` are followed (git lists what the
included file sets, naming that file), so they need no row of their own. Hooks in the default
folder (``.git/hooks``, not ``*.sample``) run too: :func:`repository_programs` looks."""

_BOOLEANS = frozenset({"", "true", "false", "yes", "no", "on", "off", "1", "0"})

_LFS = {
    "filter.lfs.clean": frozenset({"git-lfs clean -- %f"}),
    "filter.lfs.smudge": frozenset({"git-lfs smudge -- %f", "git-lfs smudge --skip -- %f"}),
    "filter.lfs.process": frozenset({"git-lfs filter-process", "git-lfs filter-process --skip"}),
}
"""The filter commands ``git lfs install`` (``--skip-smudge`` too) writes: git-lfs from the
user's ``PATH``, not a program the repository brings."""

_OWN_SCOPES = frozenset({"local", "worktree"})
"""The configuration a repository brings (the user's ``global`` one is the user's own)."""

_INDEX_ONLY = frozenset(
    {
        "status", "diff", "log", "show", "blame", "annotate", "grep", "ls-files", "ls-tree",
        "rev-parse", "rev-list", "describe", "shortlog", "cat-file", "show-ref",
        "for-each-ref", "whatchanged", "diff-files", "diff-index", "diff-tree", "name-rev",
        "count-objects", "check-ignore", "check-attr", "var", "help", "version",
    }
)  # fmt: skip
"""Commands that run no hook but ``post-index-change`` (``status`` refreshes and writes the
index); every other command may run any hook."""


@dataclass(frozen=True, slots=True)
class ConfiguredProgram:
    """One program a repository's own configuration or hooks folder makes git run."""

    setting: str
    """The setting that names it (``core.fsmonitor``, ``alias.st``, ``core.hooksPath``, or
    ``the pre-commit hook`` for the default hooks folder)."""
    origin: str
    """The file that says so, as git names it (``.git/config``; an included file's path), or
    the hooks folder."""
    program: str
    """The command as written (``./.hidden/run.sh``), or the hook's path."""
    digest: str = ""
    """The SHA-256 of its file (a hook; a setting whose value is a file's path, relative to the
    work tree or absolute), else empty: for a caller remembering what a person approved."""

    def __str__(self) -> str:
        return f"{self.program} ({self.setting} in {self.origin})"


@dataclass(frozen=True, slots=True)
class RepositoryPrograms:
    """What :func:`repository_programs` found for one command's repository."""

    folder: str
    """The repository's work tree (its git folder when it is bare), a real path."""
    programs: tuple[ConfiguredProgram, ...]
    """The programs its configuration (its submodules' included) makes git run; empty for an
    ordinary repository."""
    git_dir: str = ""
    """Its git folder (``--git-dir``), a real path; empty when git could not say."""


_Entry = tuple[str, str, str, str | None]
"""One listed setting: (scope, origin file, key, value or ``None`` for a bare key)."""


def _plain(
    git: str, cwd: str, args: Sequence[str], base: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[bytes]:
    """``git <args>`` with no configuration added and none inherited (reading commands only)."""
    return subprocess.run(
        [git, "--no-pager", *args],
        cwd=cwd,
        env=_environment((), base),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
        timeout=timeout,
    )


def _listing(raw: bytes) -> list[_Entry]:
    """``git config --list --null --show-scope --show-origin``'s records."""
    fields = raw.split(b"\0")
    entries: list[_Entry] = []
    for at in range(0, len(fields) - 2, 3):
        scope, origin, pair = (os.fsdecode(f) for f in fields[at : at + 3])
        key, newline, value = pair.partition("\n")
        entries.append((scope, origin.removeprefix("file:"), key, value if newline else None))
    return entries


def _setting_runs(key: str, value: str | None) -> bool:
    """Whether ``key = value`` in a repository's own configuration names a program."""
    rule = next((r for p, r in PROGRAM_SETTINGS.items() if fnmatchcase(key.lower(), p)), None)
    if rule is None or key.lower() in ("core.hookspath",) or key.lower().startswith("alias."):
        return False
    text = "" if value is None else value.strip()
    if rule.startswith("unless a boolean"):
        return text.lower() not in _BOOLEANS
    if rule == "unless empty":
        return bool(text)
    if rule.startswith("unless git-lfs"):
        return text not in _LFS.get(key.lower(), frozenset())
    if rule == "an ext:: address":
        return text.startswith("ext::")
    if rule == "a `!` command":
        return text.startswith("!")
    if rule.startswith("an absolute path"):
        return text.startswith("/")
    return bool(text)


@cache
def _builtins(git: str) -> frozenset[str]:
    """git's built-in commands (an alias of the same name never runs)."""
    try:
        done = subprocess.run(
            [git, "--list-cmds=builtins"], capture_output=True, check=False, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(os.fsdecode(done.stdout).split()) if done.returncode == 0 else frozenset()


def _alias(
    entries: list[_Entry], command: str, builtins: frozenset[str]
) -> Iterator[ConfiguredProgram]:
    """The alias ``command`` runs when the repository's configuration defines it (or one it
    expands to) as a shell command or with options (``-c core.fsmonitor=...``)."""
    name: str | None = command
    seen: set[str] = set()
    while name and name not in seen and name not in builtins:
        seen.add(name)
        found = [e for e in entries if e[2].lower() == f"alias.{name.lower()}"]
        if not found:
            return
        scope, origin, _key, value = found[-1]  # the last one wins
        text = (value or "").strip()
        if scope in _OWN_SCOPES and (text.startswith("!") or text.startswith("-")):
            yield ConfiguredProgram(f"alias.{name}", origin, text)
            return
        words = text.split()
        name = None if text.startswith("!") or not words else words[0]


def _digest(path: str) -> str:
    """The SHA-256 of the regular file at ``path``, or ``""`` (none, or unreadable)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a folder, a fifo (never opened)
            return ""
        with open(path, "rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    except OSError:
        return ""


def _valued(program: ConfiguredProgram, top: str) -> ConfiguredProgram:
    """``program`` with the digest of the file its value names (its first word, ``!`` off)."""
    word = (program.program.strip().removeprefix("!").split() or [""])[0]
    path = os.path.join(top, os.path.expanduser(word))
    return replace(program, digest=_digest(path)) if word else program


def _shown(path: str, top: str) -> str:
    """``path`` relative to the work tree when it is inside, else as it is."""
    relative = os.path.relpath(path, top)
    return path if relative.startswith(os.pardir) else relative


def _hooks(
    entries: list[_Entry], command: str, top: str, common: str
) -> Iterator[ConfiguredProgram]:
    """The executable hooks ``command`` may run: in ``core.hooksPath`` when the repository sets
    it (none when the user's own configuration does: those are the user's), else in the
    repository's ``hooks`` folder."""
    set_at = [e for e in entries if e[2].lower() == "core.hookspath" and e[3] is not None]
    if set_at and set_at[-1][0] not in _OWN_SCOPES:
        return
    if set_at:
        _scope, origin, _key, value = set_at[-1]
        folder = os.path.join(top, os.path.expanduser(value or ""))
        setting, where = "core.hooksPath", origin
    else:
        folder = os.path.join(common, "hooks")
        setting, where = "", _shown(folder, top)
    names = ["post-index-change"] if command in _INDEX_ONLY else None
    try:
        listed = sorted(os.listdir(folder)) if names is None else names
    except OSError:
        return
    for name in listed:
        path = os.path.join(folder, name)
        try:
            info = os.stat(path)
        except OSError:
            continue
        if name.endswith(".sample") or not stat.S_ISREG(info.st_mode):
            continue
        if os.access(path, os.X_OK):
            yield ConfiguredProgram(
                setting or f"the {name} hook", where, _shown(path, top), _digest(path)
            )


def _one(
    git: str,
    cwd: str,
    options: Sequence[str],
    command: str,
    base: Mapping[str, str],
    timeout: float,
) -> RepositoryPrograms | None:
    where = _plain(
        git,
        cwd,
        [*options, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir",
         "--is-bare-repository", "--show-toplevel"],
        base,
        timeout,
    )  # fmt: skip
    lines = os.fsdecode(where.stdout).splitlines()
    if len(lines) < 3:  # not a repository (or one git refuses to enter): git runs nothing there
        if _plain(git, cwd, [*options, "rev-parse", "--git-dir"], base, timeout).returncode:
            return None
        said = os.fsdecode(where.stderr).strip().splitlines()  # a repository all the same
        why = f"an unknown program ({said[-1] if said else 'git rev-parse failed'})"
        unknown = ConfiguredProgram("its configuration", cwd, why)
        return RepositoryPrograms(os.path.realpath(cwd), (unknown,))
    git_dir, common, bare = lines[:3]
    top = lines[3] if bare != "true" and len(lines) > 3 else git_dir
    listing = ["config", "--list", "--null", "--show-scope", "--show-origin", "--includes"]
    listed = _plain(git, cwd, [*options, *listing], base, timeout)
    if listed.returncode != 0:
        said = os.fsdecode(listed.stderr).strip().splitlines()
        why = said[-1] if said else f"git config exited with {listed.returncode}"
        unread = ConfiguredProgram("its configuration", git_dir, f"an unknown program ({why})")
        return RepositoryPrograms(os.path.realpath(top), (unread,), os.path.realpath(git_dir))
    entries = _listing(listed.stdout)
    found = [
        _valued(ConfiguredProgram(key, origin, value or ""), top)
        for scope, origin, key, value in entries
        if scope in _OWN_SCOPES and _setting_runs(key, value)
    ]
    found += (_valued(p, top) for p in _alias(entries, command, _builtins(git)))
    found += _hooks(entries, command, top, common)
    return RepositoryPrograms(os.path.realpath(top), tuple(found), os.path.realpath(git_dir))


def repository_programs(
    cwd: str | os.PathLike[str],
    command: str,
    *,
    options: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 30,
) -> RepositoryPrograms | None:
    """The programs ``git [options] <command> ...`` run in ``cwd`` would run because the
    repository there configured them, or ``None`` outside a repository.

    Only the repository's own configuration counts: its local (``.git/config``) and worktree
    (``config.worktree``) configuration and every file they include (:data:`PROGRAM_SETTINGS`;
    benign values pass: ``core.fsmonitor = true``, git-lfs's filters), the executable hooks
    ``command`` may run (``status`` and the other reading commands only ``post-index-change``),
    the alias ``command`` names when the repository defines it as a shell command; then the
    same for each submodule git may enter (:func:`submodule_git_entries`). ``options`` are git's
    options that pick the repository (``--git-dir=…``, ``--work-tree=…``, ``--bare``; ``-C``
    is ``cwd``). Nothing the repository configured runs: configuration is read with ``git
    config --list``. Raises ``FileNotFoundError`` without git, ``OSError`` and
    ``subprocess.TimeoutExpired`` as :func:`run_git` does."""
    for option in options:
        if not option.startswith(("--git-dir=", "--work-tree=")) and option != "--bare":
            raise ValueError(
                f"repository_programs takes --git-dir=, --work-tree=, --bare; got {option!r}"
            )
    git = shutil.which("git")
    if git is None:
        raise FileNotFoundError("git is not installed (not found on PATH)")
    base = os.environ if env is None else env
    found = _one(git, os.fspath(cwd), options, command, base, timeout)
    if found is None:
        return None
    programs = list(found.programs)
    for entry in submodule_git_entries(found.folder):
        if os.path.basename(entry) == ".git":
            inner = _one(git, os.path.dirname(entry), (), command, base, timeout)
            programs += inner.programs if inner is not None else ()
    return RepositoryPrograms(found.folder, tuple(programs), found.git_dir)
