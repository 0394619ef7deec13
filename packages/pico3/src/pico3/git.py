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

The same knowledge, turned around, is :mod:`pico3.git_programs`: which programs a
repository's own configuration would make an unchanged ``git`` command run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence

__all__ = ["SUBMODULE_LIMIT", "run_git", "submodule_git_entries"]

_COMMANDS = frozenset({"ls-files", "rev-parse", "status", "diff", "log", "show", "ls-tree"})
"""The git commands :func:`run_git` accepts: built-ins that only read, never an alias."""

_DIFFING = frozenset({"diff", "log", "show"})
"""Commands that may run diff drivers: they get ``--no-ext-diff --no-textconv``."""

_FIXED: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("core.pager", "cat"),
    ("core.excludesFile", os.devnull),
    ("credential.helper", ""),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
)
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
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_CONFIG_COUNT=str(len(overrides)),
    )
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


_GITLINKS: dict[str, tuple[tuple[int, int, int], list[tuple[str, bool]]]] = {}
""":func:`_gitlinks`' answers by tree, with the index's ``(device, inode, mtime)`` they were
read from: looked up again only when that index changed."""

SUBMODULE_LIMIT = 256
"""The most repositories :func:`submodule_git_entries` reads the index of in one look (the
tree's own and its submodules', nearest first). Past it, a submodule whose index is not read
is given as its whole folder (every repository inside it, however deep, kept with it)."""


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


def _gitlinks(tree: str) -> list[tuple[str, bool]]:
    """The gitlinks the index of ``tree``'s repository records at or below ``tree``: each
    submodule's folder, and whether it has a ``.git`` (checked out). Read with :func:`run_git`,
    kept until that index changes; empty outside a repository or without git."""
    index = _index_of(tree)
    if index is None:
        return []
    try:
        info = os.stat(index)
    except OSError:
        return []
    stamp = (info.st_dev, info.st_ino, info.st_mtime_ns)
    cached = _GITLINKS.get(tree)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        done = run_git(tree, "ls-files", "--stage", "-z", timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    found: list[tuple[str, bool]] = []
    for record in done.stdout.split(b"\0") if done.returncode == 0 else ():
        mode, _, rest = record.partition(b" ")
        if mode == b"160000":
            path = os.path.join(tree, os.fsdecode(rest.partition(b"\t")[2]))
            found.append((path, os.path.lexists(os.path.join(path, ".git"))))
    _GITLINKS[tree] = (stamp, found)
    return found


def submodule_git_entries(
    tree: str | os.PathLike[str], *, limit: int = SUBMODULE_LIMIT
) -> list[str]:
    """The ``.git`` (a ``gitdir:`` file, or an old-style folder) of every submodule that the
    index of ``tree``'s repository records at or below ``tree`` (its gitlinks), and of their
    submodules in turn, at any depth: the repositories git enters on its own (a ``git status``
    in the superproject runs one in each submodule, with that submodule's configuration,
    ``core.fsmonitor`` included; git has no depth limit, so neither has this). A submodule not
    checked out (its folder empty, no ``.git``) is given as its folder: a ``.git`` made there
    would be entered too. Absolute paths; empty outside a repository or without git.

    Safe on any tree: each repository is read once (a submodule folder that is a link back to
    one read already, a cycle, is not read again), nearest first, and at most ``limit`` of them
    (:data:`SUBMODULE_LIMIT`); a checked-out submodule past that is given as its whole folder
    too, so what it holds stays covered however deep it goes (the caller keeps it read-only
    whole). Read with :func:`run_git`; each index's gitlinks kept until it changes."""
    top = os.path.realpath(tree)
    found: list[str] = []
    seen = {top}
    pending = [top]
    read = 0
    while pending:
        folder = pending.pop(0)
        if read >= limit:  # unread: the whole folder, whatever is inside
            found.append(folder)
            continue
        read += 1
        for path, checked_out in _gitlinks(folder):
            if not checked_out:
                if os.path.isdir(path):
                    found.append(path)
                continue
            found.append(os.path.join(path, ".git"))
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                pending.append(path)
    return found
