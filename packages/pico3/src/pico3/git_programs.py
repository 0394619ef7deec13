"""Which programs a repository's own git configuration would make a ``git`` command run.

:mod:`pico3.git` runs the agent's own git with every repository-configured program switched
off. This is the same knowledge turned around, for a caller about to let someone else's
``git`` run there unchanged (the approval feature, before an allowed ``git status``):
:func:`repository_programs` says which programs a repository's *own* configuration (its local
and worktree configuration and the files they include; not the user's global configuration,
which the user owns), its hooks folder and its submodules' would make a ``git`` command run.
It reads configuration with ``git config --list`` (which runs nothing) and looks at the hooks
folder; the settings it knows are :data:`PROGRAM_SETTINGS`, the rows of :mod:`pico3.git`'s
table and the rarer ones besides. What it cannot read (a configuration git refuses, submodules
nested deeper than it follows, an include that is no regular file: a FIFO is found with
``stat`` before any git opens it, so the answer comes at once) is reported as an unknown
program: the caller asks.

Why one module: reading one repository is one sequence whose order is the safety argument —
the files git would open to find the repository and its includes are looked at with ``stat``
before any git runs there, then the configuration is listed, then hooks and submodules are
read with git's programs off — and every step reports in the same :class:`ConfiguredProgram`
and reads through the same listing helpers (``_plain``, ``_listing``); split by step, each
piece would need the others' helpers and the order would live nowhere.
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
from io import BufferedReader

from pico3.git import (  # pyright: ignore[reportPrivateUsage]
    _FIXED,
    _environment,
)

__all__ = ["PROGRAM_SETTINGS", "ConfiguredProgram", "RepositoryPrograms", "repository_programs"]

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
    "interactive.difffilter": "always",
    "trailer.*.cmd": "always",
    "trailer.*.command": "always",
    "hook.*.command": "always",
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
    "url.*.insteadof": "an ext:: address as its subsection (the address it rewrites to)",
    "url.*.pushinsteadof": "an ext:: address as its subsection (the address it rewrites to)",
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
    "sendemail.sendmailcmd": "always",
    "sendemail.*.sendmailcmd": "always",
    "imap.tunnel": "always",
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
    work tree or absolute), else empty: for a caller remembering what a person approved.
    ``"-"`` when it names a file whose content cannot be pinned: one that is not a regular file,
    or a symlink leading into ``/dev`` or ``/proc`` (``-> /dev/stdin``: what the command's
    ``< x`` opened)."""

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
    """``git <args>`` with no configuration added and none inherited (reading commands only),
    reading the system configuration as the command checked will (:func:`_reading`)."""
    return subprocess.run(
        [git, "--no-pager", *args],
        cwd=cwd,
        env=_reading(base),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
        timeout=timeout,
    )


def _reading(base: Mapping[str, str]) -> dict[str, str]:
    """The environment that reads a repository as the user's own ``git`` will: the system
    configuration too (unless ``base`` turns it off), as it may trust a repository another user
    owns (``safe.directory = *``, common in containers) that git refuses otherwise. Reading runs
    nothing; the system configuration's settings are not the repository's (scope ``system``)."""
    env = _environment((), base)
    if "GIT_CONFIG_NOSYSTEM" in base:
        env["GIT_CONFIG_NOSYSTEM"] = base["GIT_CONFIG_NOSYSTEM"]
    else:
        del env["GIT_CONFIG_NOSYSTEM"]
    return env


def _gitlinks(
    git: str, folder: str, base: Mapping[str, str], timeout: float
) -> list[str] | ConfiguredProgram:
    """The work trees of the repositories inside the one at ``folder`` that git may enter:
    its index's gitlinks that are checked out (``git status`` enters each), and the untracked
    repositories git lists (``git add -A && git status``: the add makes one a gitlink, the
    status enters it), or why they cannot be listed. Read with every program switched off
    (:data:`pico3.git._FIXED`) and ``safe.directory=*``: :func:`_one` found git enters this
    repository, so its owner is no reason to skip them."""
    found: list[str] = []
    for args in (("--stage",), ("--others", "--exclude-standard")):
        done = _switched_off(git, folder, ["ls-files", *args, "-z"], base, timeout)
        if isinstance(done, ConfiguredProgram):
            return done
        for record in done.split(b"\0"):
            if args == ("--stage",):
                mode, _, rest = record.partition(b" ")
                name = rest.partition(b"\t")[2] if mode == b"160000" else b""
            else:
                name = record if record.endswith(b"/") else b""  # a repository, not a file
            path = os.path.join(folder, os.fsdecode(name).rstrip("/"))
            if name and os.path.lexists(os.path.join(path, ".git")):
                found.append(path)
    return found


def _switched_off(
    git: str, folder: str, args: Sequence[str], base: Mapping[str, str], timeout: float
) -> bytes | ConfiguredProgram:
    """The output of ``git <args>`` run with every program switched off, or why it failed."""
    overrides = [*_FIXED, ("safe.directory", "*")]
    try:
        done = subprocess.run(
            [git, "--no-pager", *args],
            cwd=folder,
            env=_environment(overrides, base),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return ConfiguredProgram("its submodules", folder, f"an unknown program ({error})")
    if done.returncode != 0:
        said = os.fsdecode(done.stderr).strip().splitlines()
        why = said[-1] if said else f"git {args[0]} exited with {done.returncode}"
        return ConfiguredProgram("its submodules", folder, f"an unknown program ({why})")
    return done.stdout


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
    if rule.startswith("an ext:: address as its subsection"):  # url.<ext::…>.insteadOf
        return key[len("url.") : key.rfind(".")].strip().lower().startswith("ext::")
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
    """The SHA-256 of the regular file at ``path``; ``""`` when there is none; ``"-"`` when
    its content cannot be pinned (:attr:`ConfiguredProgram.digest`)."""
    if not os.path.lexists(path):
        return ""
    if _per_process(path):
        return "-"
    try:
        with _open_regular(path) as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    except OSError:  # a folder, a FIFO (opened without waiting, then refused)
        return "-"


def _open_regular(path: str) -> BufferedReader:
    """``path`` opened for reading when it is a regular file. Opened without waiting
    (``O_NONBLOCK``: a FIFO swapped in after a ``stat`` opens at once instead of waiting for a
    writer) and checked on the open file (``fstat``); raises ``OSError`` naming the path when
    it is anything else."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file (a folder, a FIFO or a device)")
    os.set_blocking(fd, True)
    return open(fd, "rb")


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
    if _per_process(folder):  # `/proc/self/...`: another folder for git than for this reading
        yield ConfiguredProgram(setting or "its hooks folder", where, folder)
        return
    try:
        listed = sorted(os.listdir(folder)) if names is None else names
    except OSError:
        return
    for name in listed:
        path = os.path.join(folder, name)
        if name.endswith(".sample"):
            continue
        if os.path.islink(path):  # `pre-commit -> /dev/fd/3`: git runs what `3< x` opened
            shown = _shown(path, top)
            yield ConfiguredProgram(setting or f"the {name} hook", where, shown, _digest(path))
            continue
        try:
            info = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and os.access(path, os.X_OK):
            yield ConfiguredProgram(
                setting or f"the {name} hook", where, _shown(path, top), _digest(path)
            )


def _per_process(path: str) -> bool:
    """Whether ``path``, or any symlink on the way from it (at most 40), leads into ``/dev`` or
    ``/proc`` (a file there is another one for each process: ``/dev/fd/3``,
    ``/proc/self/cwd``)."""
    current = os.path.normpath(path)
    for _ in range(40):
        if current.startswith(("/dev/", "/proc/")):
            return True
        if not os.path.islink(current):
            return False
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    return True


def _one(
    git: str,
    cwd: str,
    options: Sequence[str],
    command: str,
    base: Mapping[str, str],
    timeout: float,
) -> RepositoryPrograms | None:
    unseen = _unseen_discovery(cwd, options)
    if unseen is not None:  # what git reads to find the repository may be the command's input
        why = "an unknown program (git finds its repository through a file this check cannot read)"
        return RepositoryPrograms(
            os.path.realpath(cwd), (ConfiguredProgram("its repository", unseen, why),)
        )
    blocked = list(_unreadable_includes(git, cwd, options, base, timeout))
    if blocked:  # git would wait on it (a FIFO) or read what this reading cannot see
        return RepositoryPrograms(os.path.realpath(cwd), tuple(blocked))
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
        return RepositoryPrograms(
            os.path.realpath(cwd), (ConfiguredProgram("its configuration", cwd, why),)
        )
    git_dir, common, bare = lines[:3]
    top = lines[3] if bare != "true" and len(lines) > 3 else git_dir
    listed = _plain(
        git,
        cwd,
        [*options, "config", "--list", "--null", "--show-scope", "--show-origin", "--includes"],
        base,
        timeout,
    )
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
    for own in (os.path.join(common, "config"), os.path.join(git_dir, "config.worktree")):
        if _unseen(own):  # `.git/config` a symlink to /dev/stdin
            why = "an unknown program (its configuration is not a file this check can read)"
            found.append(ConfiguredProgram("its configuration", own, why))
    return RepositoryPrograms(os.path.realpath(top), tuple(found), os.path.realpath(git_dir))


def _unseen(path: str) -> bool:
    """Whether the configuration file ``path`` is one whose text this reading cannot see as the
    checked ``git`` will: anything but a regular file (``/dev/stdin``: ``git status <
    payload.cfg`` feeds git a configuration this reading, its input ``/dev/null``, never sees;
    a FIFO; ``/dev/fd/3``) and anything under ``/proc`` (``/proc/self`` is another process for
    each reader). A missing file is no such file: git reads nothing there either."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return False  # missing (a dangling symlink too): git includes nothing
    except OSError:
        return True
    return not regular or os.path.realpath(path).startswith(("/proc/", "/dev/"))


def _unseen_discovery(cwd: str, options: Sequence[str]) -> str | None:
    """The first file git may read to find the repository of ``cwd`` that is no regular file
    (:func:`_unseen`): a ``.git`` file, or a ``commondir``, ``config`` or ``config.worktree`` of
    a git folder, in ``cwd`` and each folder above it, and of a ``--git-dir``. A ``.git``
    symlinked to ``/dev/stdin`` makes ``git status < g.txt`` read ``gitdir: /elsewhere`` from
    the command's input, where this reading sees nothing."""
    folders: list[str] = []
    folder = os.path.abspath(cwd)
    while True:
        folders.append(os.path.join(folder, ".git"))
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    folders += [o.partition("=")[2] for o in options if o.startswith("--git-dir=")]
    for entry in folders:
        if not os.path.lexists(entry):
            continue
        if not os.path.isdir(entry):
            if _unseen(entry):
                return entry
            try:
                with _open_regular(entry) as gitfile:
                    line = gitfile.readline().decode("utf-8", "replace").strip()
            except OSError:
                return entry
            if not line.startswith("gitdir:"):
                continue
            entry = os.path.join(os.path.dirname(entry), line[len("gitdir:") :].strip())
        for name in ("commondir", "config", "config.worktree"):
            if _unseen(os.path.join(entry, name)):
                return os.path.join(entry, name)
    return None


_INCLUDE_DEPTH = 10
"""How deep git follows includes inside included files (its own limit: deeper is an error)."""


def _include_paths(entries: list[_Entry], cwd: str) -> Iterator[tuple[_Entry, str]]:
    """Every ``include.path`` and ``includeIf.<condition>.path`` of ``entries`` (every
    condition, met or not: it may be met when the command runs), with the path it names made
    absolute (``~`` expanded, relative to the including file's folder)."""
    for entry in entries:
        _scope, origin, key, value = entry
        lowered = key.lower()
        is_include = lowered == "include.path" or (
            lowered.startswith("includeif.") and lowered.endswith(".path")
        )
        if not is_include or not value:
            continue
        path = os.path.expanduser(value)
        if not os.path.isabs(path):  # relative to the file that includes it
            path = os.path.join(cwd, os.path.dirname(origin), path)
        yield entry, path


def _unreadable_includes(
    git: str, cwd: str, options: Sequence[str], base: Mapping[str, str], timeout: float
) -> Iterator[ConfiguredProgram]:
    """The includes this reading must not hand to git, found *before* any git reads them.

    git opens an included file whatever it is: an include naming a FIFO makes every git in
    the repository (``rev-parse`` and ``config --list`` too) wait for a writer, so reading
    the configuration through git would hang until the timeout. So the includes are listed
    first with ``--no-includes`` (which opens no included file), and each included file is
    looked at with ``stat`` before it is read (``git config --file <it> --no-includes``, for
    its own includes: at most :data:`_INCLUDE_DEPTH` deep, each file once). An include of the
    repository's own configuration that is no regular file this reading can see as the
    checked ``git`` will (:func:`_unseen`: a FIFO, ``/dev/stdin``, ``/proc/self/...``) is an
    unknown program, at once; one of the user's own (global, system) configuration is only
    when opening it may wait (:func:`_waits`: a FIFO, a socket): git would wait there too,
    but what else the user's own files include is the user's."""
    listing = ["config", "--list", "--null", "--show-scope", "--show-origin", "--no-includes"]
    listed = _plain(git, cwd, [*options, *listing], base, timeout)
    if listed.returncode != 0:
        return  # not a repository, or one git refuses: the reading after says which
    pending = [(found, 1) for found in _include_paths(_listing(listed.stdout), cwd)]
    seen: set[str] = set()
    while pending:
        ((scope, origin, key, value), path), depth = pending.pop(0)
        if _unseen(path) if scope in _OWN_SCOPES else _waits(path):
            why = f"an unknown program (it includes {value}, not a file this check can read)"
            yield ConfiguredProgram(key, origin, why)
            continue
        real = os.path.realpath(path)
        if real in seen or depth >= _INCLUDE_DEPTH or not os.path.isfile(real):
            continue  # read already, past git's own limit (git refuses it), or missing
        seen.add(real)
        nested = _plain(git, cwd, [*listing, "--file", real], base, timeout)
        inner = [(scope, real, k, v) for _s, _o, k, v in _listing(nested.stdout)]
        pending += ((found, depth + 1) for found in _include_paths(inner, cwd))


def _waits(path: str) -> bool:
    """Whether opening ``path`` for reading may wait for another process (a FIFO, a socket:
    anything but a regular file, a folder or a character device such as ``/dev/null``)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # missing: git includes nothing
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISCHR(mode))


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
    same for each submodule git may enter (the index's gitlinks, recursively). ``options`` are git's
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
    if _unread(found):
        return found  # its submodules cannot be listed either
    programs = [*found.programs, *_submodules(git, found.folder, command, base, timeout)]
    return RepositoryPrograms(found.folder, tuple(programs), found.git_dir)


_SUBMODULE_DEPTH = 8
"""How deep :func:`repository_programs` follows submodules inside submodules. git itself
has no limit (``git status`` runs a ``git status`` in each submodule, which does the same in
its own), so a submodule deeper than this is reported as an unknown program: it asks."""


def _submodules(
    git: str, folder: str, command: str, base: Mapping[str, str], timeout: float, depth: int = 1
) -> Iterator[ConfiguredProgram]:
    """The programs of every submodule git may enter from the repository at ``folder``, and of
    theirs in turn (:data:`_SUBMODULE_DEPTH`)."""
    trees = _gitlinks(git, folder, base, timeout)
    if isinstance(trees, ConfiguredProgram):
        yield trees
        return
    for tree in trees:
        if depth > _SUBMODULE_DEPTH:
            why = f"an unknown program (submodules nested deeper than {_SUBMODULE_DEPTH})"
            yield ConfiguredProgram("its configuration", tree, why)
            return
        inner = _one(git, tree, (), command, base, timeout)
        if inner is not None:  # its files named from here: `.git/config` is the submodule's
            for program in inner.programs:
                yield replace(program, origin=os.path.join(inner.folder, program.origin))
            if not _unread(inner):
                yield from _submodules(git, inner.folder, command, base, timeout, depth + 1)


def _unread(found: RepositoryPrograms) -> bool:
    """Whether ``found`` is a repository whose configuration was not read (git could not say
    where it is, or this reading must not let git read it: an include git would wait on), so
    no git may be run there to list its submodules either."""
    return not found.git_dir or any(
        p.setting in ("its repository", "its configuration") for p in found.programs
    )
