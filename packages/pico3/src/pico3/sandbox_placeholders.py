"""Placeholders: the folders a sandboxed command may not create, kept absent only as long as one
runs (:class:`Placeholders`, used by :meth:`pico3.Sandbox.wrap`).

A mount can only lie over a path that exists. Some names must not be created from inside even
where they are missing (a project's ``.vscode/`` makes VS Code run programs, a new ``.git``
makes git run its configuration, ``.coding-agent/`` holds code this agent imports), so the
sandbox lays an empty read-only folder over each of them, and bubblewrap makes the mount point:
an empty folder the user can see on the host. It stays only while a sandboxed command runs.

How it is removed, and why never too early:

* every wrapped command starts as ``bash``, which takes a **shared lock** on the folder's lock
  file (``flock``), starts a **watcher** that holds that lock, and then becomes bubblewrap
  (``exec``: bubblewrap's parent is still the caller, so ``--die-with-parent`` works as
  before). Bubblewrap never gets the lock's descriptor, so nothing inside can release it;
* the watcher reads a pipe whose only writers are bubblewrap and what runs inside: end of file
  means the sandbox is gone. It then asks for the lock **exclusively, without waiting**. If it
  gets it, no other sandbox of that folder runs (each holds the shared lock from before its
  mounts are made until its end), so no mount lies over the placeholders anywhere, and it
  removes each one that is still an empty folder, with its marker. If not, the last sandbox
  to end does;
* a removal while another sandbox had the folder mounted would undo that sandbox's mount (the
  kernel detaches mounts over a folder removed in another mount namespace), and its command
  could then create the folder: the lock is what rules that out;
* a command killed with its process group takes its watcher along: the placeholder stays, and
  its **marker** (a file in the user's private folder, hidden inside the sandbox) says it is
  one of ours, so the next sandbox uses it as its own placeholder and removes it at its end.
  The wrapper writes the marker (under the shared lock, before bubblewrap makes the folder).
  A placeholder someone put files in is not removed (``rmdir`` fails); it is then the user's.

Without ``bash`` or ``flock`` (util-linux) on the host, or where the private folder's file
system takes no locks, placeholders are made before the command and left in place, empty.

Standard library only (a leaf of pico3's layers).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Placeholders", "lock_file", "private_folder"]

_WRAPPER = r"""
lock=$1 filter=$2 n=$3
shift 3
places=("${@:1:2*n}")
shift $((2 * n))
exec 9>>"$lock" && flock -s 9 || {
    echo "sandbox: cannot lock $lock (flock): the command did not run" >&2
    exit 125
}
set -- "${places[@]}" -- "$@"
while [ "$1" != -- ]; do
    : >>"$2" || exit 125
    shift 2
done
shift
exec 8> >(
    cd / || exit 0
    exec >/dev/null 2>&1
    while read -r _; do :; done
    flock -xn 9 || exit 0
    folders=() markers=()
    for ((i = 0; i < ${#places[@]}; i += 2)); do
        folders+=("${places[i]}")
    done
    rmdir -- "${folders[@]}"
    for ((i = 0; i < ${#places[@]}; i += 2)); do
        [ -e "${places[i]}" ] || markers+=("${places[i + 1]}")
    done
    [ "${#markers[@]}" -eq 0 ] || rm -f -- "${markers[@]}"
)
if [ -n "$filter" ]; then
    exec "$@" 9>&- 3<"$filter"
fi
exec "$@" 9>&-
"""
"""The ``bash`` script every wrapped command with placeholders starts as (module doc): its
arguments are the lock file, the filter file (or empty), the number of placeholders, each
placeholder with its marker, then bubblewrap's argv."""

_private: list[str] = []


def private_folder() -> str:
    """A folder of the user's own (``<tmp>/pico3-<uid>``, ``0700``) for what the sandbox keeps
    outside every command's reach (it is hidden inside): the seccomp filter's file, the
    placeholders' markers and locks. A folder of that name that is not the user's alone
    (another user's, a link) is not used: a private folder of this process's instead, removed
    at its exit."""
    if _private and os.path.isdir(_private[0]):
        return _private[0]
    folder = os.path.join(tempfile.gettempdir(), f"pico3-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    if not _owned(folder):
        folder = tempfile.mkdtemp(prefix="pico3-private-")
        atexit.register(shutil.rmtree, folder, True)
    _private[:] = [folder]
    return folder


def lock_file(parent: str) -> str:
    """The lock file of the placeholders in folder ``parent`` (resolved): held shared by every
    sandbox that lays them, exclusively by the one that removes them (module doc)."""
    return os.path.join(private_folder(), "placeholders", _key(parent) + ".lock")


_lockable: dict[str, bool] = {}


def _can_lock(folder: str) -> bool:
    """Whether files in ``folder`` take ``flock`` locks (checked once per folder)."""
    if folder not in _lockable:
        try:
            with open(os.path.join(folder, "probe.lock"), "ab") as probe:
                fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(probe, fcntl.LOCK_UN)
            _lockable[folder] = True
        except OSError:
            _lockable[folder] = False
    return _lockable[folder]


def _owned(folder: str) -> bool:
    """Whether ``folder`` is a folder (not a link) of this user's that nobody else may use."""
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def _key(path: str) -> str:
    return hashlib.sha256(os.fsencode(path)).hexdigest()[:24]


def _empty_folder(path: str) -> bool:
    try:
        info = os.lstat(path)
        return stat.S_ISDIR(info.st_mode) and not os.listdir(path)
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class Placeholders:
    """The placeholders of one wrapped command: ``paths`` (resolved folders, each laid over
    with an empty read-only folder), and whether they are removed after it (``transient``,
    through :meth:`command`) or made now and left (``paths`` already exist then)."""

    paths: tuple[str, ...]
    transient: bool
    lock: str = ""
    markers: tuple[str, ...] = ()
    shell: str = ""
    """The ``bash`` that runs the wrapper (when ``transient``)."""

    @classmethod
    def find(cls, wanted: Iterable[str], writable: Sequence[str]) -> Placeholders:
        """The placeholders for ``wanted`` (resolved folder paths that must not be created):
        each one that is missing, or an empty folder a marker says is one of ours. Only where
        the parent is a folder inside a ``writable`` path (elsewhere nothing inside can create
        it anyway). One lock per parent folder: those under another parent than the first's
        are made now and left."""
        places: list[str] = []
        for path in dict.fromkeys(wanted):
            parent = os.path.dirname(path)
            inside = any(parent == w or parent.startswith(w.rstrip("/") + "/") for w in writable)
            if inside and os.path.isdir(parent):
                places.append(path)
        if not places:
            return cls((), False)
        folder = os.path.join(private_folder(), "placeholders")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        bash, flock = shutil.which("bash"), shutil.which("flock")
        if flock is not None and not _can_lock(folder):
            flock = None  # a file system without locks: made now and left, as without flock
        parent = os.path.dirname(places[0])
        ours: list[str] = []
        markers: list[str] = []
        left: list[str] = []
        for path in places:
            marker = os.path.join(folder, _key(path))  # made by the wrapper (module doc)
            if os.path.lexists(path) and not (os.path.exists(marker) and _empty_folder(path)):
                with contextlib.suppress(OSError):
                    os.unlink(marker)  # someone's folder now (it has files): not ours
                continue
            if bash is None or flock is None or os.path.dirname(path) != parent:
                left.append(path)
                continue
            ours.append(path)
            markers.append(marker)
        for path in left:  # made now and left, empty (no bash or flock here to remove them)
            with contextlib.suppress(OSError):
                os.mkdir(path)
        return cls((*ours, *left), bool(ours), lock_file(parent), tuple(markers), bash or "")

    def mounts(self) -> list[str]:
        """Bubblewrap's options laying an empty read-only folder over each placeholder (it
        makes a missing one)."""
        options: list[str] = []
        for path in self.paths:
            options += ["--tmpfs", path, "--remount-ro", path]
        return options

    def command(self, bwrap_argv: Sequence[str], seccomp: str | None) -> list[str]:
        """``bwrap_argv`` started through the wrapper (module doc) when the placeholders are
        transient, else as it is; ``seccomp``: the filter file bubblewrap reads as descriptor
        3 (its argv says ``--seccomp 3``)."""
        if not self.transient:
            return list(bwrap_argv)
        pairs = [item for pair in zip(self.paths, self.markers, strict=False) for item in pair]
        count = str(len(self.markers))
        wrapper = [self.shell, "-c", _WRAPPER, "bash", self.lock, seccomp or "", count]
        return [*wrapper, *pairs, *bwrap_argv]
