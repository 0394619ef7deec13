"""One generation of each feature package for every session of a host process (issue 42).

A worker process loads its own generation of every feature package (:func:`coding_agent.worker.
main.load_features`: the packages' modules imported afresh, their dataclasses built, under
``__chord_gen_<n>__``). A host process of many sessions (:mod:`coding_agent.worker.host`) paid
that for each session it started, two thirds of a hosted start's CPU, so a start storm was
bound by it. :class:`SharedFeatures` loads a package's generation once and *lends* it to each
session it starts: every session's facet host gets the very same :class:`~chord.Facet` objects,
and sets each of them up itself (``setup(env)`` per host), so what a facet keeps is the
session's.

Why sharing is safe: a facet's state lives in what its ``setup`` makes (its services, its
replicated state, its registrations), never in its modules. The six feature packages were
audited for module-level state (``tests/facets/test_module_state.py`` keeps them so): no
``global`` statement, no module-level container any code changes, no class attribute written at
run time; their module-level caches are pure functions of their arguments (``rules._parse``,
``rules._path_regex``, keyed by the rule, the project root and the home folder; the shell
grammar and the MCP transport class, keyed by nothing and the same for everyone), and the shell
parser is one per thread, used synchronously. ``tests/app/worker/test_shared_features.py`` runs
two sessions on one lent generation and checks neither sees the other's mode, rules, hooks or
agents.

Hot reload (the choice, docs/design/reload.md): **per session**. ``/reload`` (or ``--dev``) in
a hosted session loads a fresh generation of the changed packages for that session alone, as a
worker process does, and gives the lent one back; the other sessions keep theirs. A session that
starts later gets the sources as they are then: a lend compares the package's source text (the
SHA-256 of every ``.py`` file under it, read, not trusted by mtime, as the compile cache does)
with the shared generation's, and loads a new shared generation when they differ. A generation
is purged once it is no longer the shared one and the last session it was lent to gave it back.

The warm start's fork server (:mod:`coding_agent.warm.server`) is a host of this kind too, whose
sessions are its forked children: :func:`preload_installed` loads a generation of every
installed package there, once, and the first :func:`~coding_agent.worker.main.load_features` of
each child adopts them (:func:`take_preloaded`): it lends them to its session, as above (a
changed source text loads a fresh generation instead), then lets the server's hold go, so each
generation is the session's alone from then on, purged when the session lets it go, as a
generation the child had loaded itself would be. The server's fingerprint covers their files
(:func:`preloaded_sources`): a changed, added or removed file makes it refuse.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from chord import (
    FacetDiscoveryError,
    FacetGeneration,
    FacetLoadError,
    FacetPackage,
    discover_facet_packages,
    installed_facet_packages,
    load_generation,
)

__all__ = [
    "SharedFeatures",
    "preload_installed",
    "preloaded_sources",
    "source_fingerprint",
    "take_preloaded",
]

HOST_KIND = "session"


RACY = 2.0
"""Seconds a source file's modification time must lie before the reading of its text for a
later unchanged ``stat`` to stand for that text (see :class:`_Sources`)."""

_Stamp = tuple[tuple[str, int, int, int], ...]


def _sources(package_dir: Path) -> list[tuple[str, str]]:
    """``(relative path, path)`` of every ``.py`` file below ``package_dir``, sorted."""
    files: list[tuple[str, str]] = []
    for folder, dirs, names in os.walk(package_dir):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                files.append((os.path.relpath(path, package_dir), path))
    files.sort()
    return files


def _stamp(files: list[tuple[str, str]]) -> _Stamp | None:
    stamp: list[tuple[str, int, int, int]] = []
    for relative, path in files:
        try:
            info = os.stat(path)
        except OSError:
            return None
        stamp.append((relative, info.st_mtime_ns, info.st_size, info.st_ino))
    return tuple(stamp)


def source_fingerprint(package_dir: Path) -> bytes:
    """The SHA-256 of every ``.py`` file's path (relative) and text below ``package_dir``: two
    loads of the same fingerprint import the very same source."""
    digest = hashlib.sha256()
    for relative, path in _sources(package_dir):
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError:
            data = b"\x00unreadable"
        encoded = relative.encode()
        digest.update(b"%d\x00%s%d\x00" % (len(encoded), encoded, len(data)))
        digest.update(data)
    return digest.digest()


class _Sources:
    """A package's :func:`source_fingerprint`, read again only when a ``stat`` of its files
    changed, or when it could not tell (the "racy" case, as git's index has it): a file
    modified less than :data:`RACY` seconds before its text was read may have changed again
    within the file system's timestamp granularity, keeping its size and time, so its text is
    read at every look until it is older than that."""

    def __init__(self, package_dir: Path) -> None:
        self._dir = package_dir
        self._stamp: _Stamp | None = None
        self._fingerprint = b""
        self._read_at = 0.0

    def fingerprint(self) -> bytes:
        files = _sources(self._dir)
        stamp = _stamp(files)
        if stamp is not None and stamp == self._stamp:
            newest = max((mtime for _, mtime, _, _ in stamp), default=0) / 1e9
            if newest < self._read_at - RACY:
                return self._fingerprint
        read_at = time.time()
        self._fingerprint = source_fingerprint(self._dir)
        self._stamp, self._read_at = stamp, read_at
        return self._fingerprint


class _Shared:
    """A generation and the count of its holders (the host while it is current, each session
    it is lent to); purged when the count reaches zero."""

    def __init__(self, generation: FacetGeneration, fingerprint: bytes) -> None:
        self.generation = generation
        self.fingerprint = fingerprint
        self.holders = 1  # the host's own, while it is the current one

    def release(self) -> None:
        self.holders -= 1
        if self.holders == 0:
            self.generation.purge()


class _Lent(FacetGeneration):
    """A session's view of a shared generation: the same modules and facets; disposing it gives
    the generation back instead of purging it."""

    def __init__(self, shared: _Shared) -> None:
        source = shared.generation
        super().__init__(
            number=source.number,
            package=source.package,
            host=source.host,
            root=source.root,
            modules=source.modules,
            facets=source.facets,
        )
        self._shared = shared
        shared.holders += 1

    def purge(self) -> None:
        if self._disposed:
            return
        self._disposed = True
        self._facets = ()
        self._shared.release()


class SharedFeatures:
    """The feature generations of a host process, lent to its sessions (see the module doc).

    :func:`coding_agent.worker.main.load_features` given one discovers the packages with
    :meth:`discover` and gets each one's generation with :meth:`lend`, which loads one only
    when no shared generation of the package's current source text exists. Not thread-safe:
    call it on the host's event loop thread (the generations' code runs there).
    """

    def __init__(
        self, load: Callable[[FacetPackage, str], FacetGeneration] = load_generation
    ) -> None:
        self._load = load
        self._current: dict[tuple[str, str, str, str | None], _Shared] = {}
        self._sources: dict[Path, _Sources] = {}
        self._installed: tuple[object, list[FacetPackage], list[FacetDiscoveryError]] | None = None
        self.loads = 0
        """Generations this host loaded (for tests and benchmarks)."""

    def discover(
        self,
        folders: Sequence[str | Path],
        *,
        installed: bool,
        on_error: Callable[[FacetDiscoveryError], None],
    ) -> list[FacetPackage]:
        """:func:`chord.discover_facet_packages`, with the installed packages' entry points
        scanned again only when a folder of ``sys.path`` changed (installing or removing a
        distribution adds or removes its ``.dist-info`` there: the folder's time changes); the
        errors of the scan are passed to every caller's ``on_error``."""
        found: list[FacetPackage] = []
        if installed:
            stamp = _path_stamp()
            if self._installed is None or self._installed[0] != stamp:
                errors: list[FacetDiscoveryError] = []
                self._installed = (stamp, installed_facet_packages(on_error=errors.append), errors)
            for error in self._installed[2]:
                on_error(error)
            found = self._installed[1]
        if not folders:
            return list(found)
        named = {package.name: package for package in found}
        for package in discover_facet_packages(folders, installed=False):
            named[package.name] = package  # a folder replaces an installed package
        return [named[name] for name in sorted(named)]

    def lend(self, package: FacetPackage) -> FacetGeneration:
        """The shared generation of ``package``'s current source text (loaded now if there is
        none), lent: disposing it gives it back. Raises :class:`~chord.FacetLoadError`."""
        return _Lent(self._current_for(package))

    def prepare(self, package: FacetPackage) -> None:
        """Load ``package``'s shared generation now, if there is none of its current source
        text, and lend it to nobody yet. Raises :class:`~chord.FacetLoadError`."""
        self._current_for(package)

    def _current_for(self, package: FacetPackage) -> _Shared:
        key = (package.name, str(package.package_dir), package.plugin_module, package.plugin_attr)
        sources = self._sources.get(package.package_dir)
        if sources is None:
            sources = self._sources[package.package_dir] = _Sources(package.package_dir)
        fingerprint = sources.fingerprint()
        shared = self._current.get(key)
        if shared is None or shared.fingerprint != fingerprint:
            generation = self._load(package, HOST_KIND)  # raises FacetLoadError: nothing changed
            self.loads += 1
            if shared is not None:
                shared.release()  # purged once the sessions that hold it gave it back
            shared = self._current[key] = _Shared(generation, fingerprint)
        return shared

    def sources(self) -> list[str]:
        """The folders and ``.py`` files of the packages of the shared generations: what their
        source texts are read from (a changed, added or removed file changes a ``stat`` of
        these)."""
        paths: list[str] = []
        for folder in sorted(
            {shared.generation.package.package_dir for shared in self._current.values()}
        ):
            for directory, dirs, names in os.walk(folder):
                dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
                paths.append(directory)
                paths.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith(".py"))
        return paths

    def close(self) -> None:
        """Give back the host's own hold of every shared generation (purged once no session
        holds it any more)."""
        current, self._current = self._current, {}
        for shared in current.values():
            shared.release()


_preloaded: list[SharedFeatures] = []
"""The warm start server's preloaded generations, until a forked child adopts them."""


def preload_installed() -> SharedFeatures:
    """In the warm start's fork server: load a generation of every installed feature package
    (as a session's :func:`~coding_agent.worker.main.load_features` would, in the same order,
    so the generations get the numbers a process of its own would give them), held for the
    children (:func:`take_preloaded`). A package that fails to discover or load is left out:
    the child that needs it loads it and reports the error as a process of its own would."""
    features = SharedFeatures()
    packages = features.discover((), installed=True, on_error=lambda _error: None)
    for package in packages:
        try:
            features.prepare(package)
        except FacetLoadError:
            pass
    # discover again: the scan is cached under sys.meta_path too, which the loads changed (the
    # generations' finder), and the child's discover must find the scan it can reuse
    features.discover((), installed=True, on_error=lambda _error: None)
    _preloaded[:] = [features]
    return features


def take_preloaded() -> SharedFeatures | None:
    """The generations :func:`preload_installed` loaded in this process (the fork server's, a
    forked child inherits them), once: a second call, or any call in a process without them,
    gets ``None``."""
    if not _preloaded:
        return None
    return _preloaded.pop()


def preloaded_sources() -> list[str]:
    """:meth:`SharedFeatures.sources` of the preloaded generations (none: an empty list)."""
    return _preloaded[0].sources() if _preloaded else []


def _path_stamp() -> object:
    """What the installed facet packages depend on: ``sys.path``, the finders, and the times
    of ``sys.path``'s folders (an install, a removal or a reinstall adds or removes a
    ``.dist-info`` folder there)."""
    times: list[tuple[str, int]] = []
    for root in sys.path:
        try:
            times.append((root, os.stat(root or ".").st_mtime_ns))
        except OSError:
            times.append((root, -1))
    return (tuple(times), tuple(id(finder) for finder in sys.meta_path))
