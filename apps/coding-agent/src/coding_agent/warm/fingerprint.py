"""What a fork server's preloaded code depends on, so it is never served stale.

:class:`Fingerprint` is taken once, right after the preload: the Python executable, ``sys.path``
(and each entry's mtime: installing or removing a distribution changes its folder), the mtime
and size of the file of every module in ``sys.modules`` and of the other files and folders the
preload read code from (the folders and sources of the preloaded feature packages: a module
only compiled, a file added or removed), and the values of the environment
variables the preload read (:func:`recording_environ_reads`) together with those the interpreter
itself reads at start (``PYTHON*``, the locale: they decide the standard streams' encoding) and
OpenSSL's (``OPENSSL_*``, read when the ``ssl`` module loads).
:meth:`Fingerprint.stale` says what changed, if anything: the server checks it before every
fork, against the files on disk now and the client's environment.

Cost, measured after the preload of ``coding_agent.warm.server`` (about 920 modules, 885 files,
on one loaded 2-core machine): taking it ~23 ms (once), checking it 1.2-4.4 ms (one ``stat`` per
module file), on every request.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Fingerprint", "interpreter_variable", "recording_environ_reads"]

_LOCALE = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE")
_READ_AGAIN_AT_USE = frozenset({"COLUMNS", "LINES"})
"""Read during the preload only by code that reads them again each time it runs: argparse makes
a help formatter (``shutil.get_terminal_size``) to check each argument as the parser is built,
and a new one for every help or error it prints, in the child under the client's environment.
Not what the preload depends on: a client that exports its terminal's size is served."""


def interpreter_variable(name: str) -> bool:
    """Whether the interpreter reads ``name`` at its own start (before any module of ours), or
    OpenSSL when the ``ssl`` module loads (``OPENSSL_CONF``...: the preload's TLS context is
    made under them)."""
    return name.startswith(("PYTHON", "OPENSSL_")) or name in _LOCALE


@contextlib.contextmanager
def recording_environ_reads() -> Iterator[set[str]]:
    """Within: every key read through ``os.environ`` (``[]``, ``get``, ``in``, ``os.getenv``)
    is added to the set yielded. How the server audits which variables its preloaded modules
    read at import time (the SDKs' ``OPENAI_LOG``/``ANTHROPIC_LOG``, say)."""
    environ = os.environ
    original = type(environ)
    read: set[str] = set()

    class _Recording(original):  # type: ignore[misc, valid-type]
        def __getitem__(self, key: str) -> str:
            read.add(key)
            return super().__getitem__(key)

    environ.__class__ = _Recording
    try:
        yield read
    finally:
        environ.__class__ = original


def _stat(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size


def _module_files() -> list[str]:
    files: set[str] = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.isabs(path):
            files.add(path)
    return sorted(files)


@dataclass(frozen=True)
class Fingerprint:
    """The code and environment a server holds (see the module docs)."""

    executable: tuple[str, tuple[int, int] | None]
    path: tuple[tuple[str, tuple[int, int] | None], ...]
    files: tuple[tuple[str, tuple[int, int] | None], ...]
    variables: tuple[tuple[str, str | None], ...]
    read_at_import: frozenset[str] = field(default_factory=frozenset)
    sources: tuple[tuple[str, tuple[int, int] | None], ...] = ()

    @classmethod
    def take(
        cls,
        read_at_import: set[str],
        env: Mapping[str, str] | None = None,
        sources: Sequence[str] = (),
    ) -> Fingerprint:
        """The fingerprint of this process now (``env``: the environment it was started with;
        ``sources``: more files and folders the preload read, beside the modules' files)."""
        environ = os.environ if env is None else env
        names = (set(read_at_import) - _READ_AGAIN_AT_USE) | {
            n for n in environ if interpreter_variable(n)
        }
        names |= set(_LOCALE)
        modules = _module_files()
        imported = set(modules)  # a source that is also an imported module's file: once
        return cls(
            executable=(sys.executable, _stat(sys.executable)),
            path=tuple((entry, _stat(entry)) for entry in sys.path),
            files=tuple((file, _stat(file)) for file in modules),
            variables=tuple(sorted((name, environ.get(name)) for name in names)),
            read_at_import=frozenset(read_at_import),
            sources=tuple((path, _stat(path)) for path in sources if path not in imported),
        )

    def stale(self, env: Mapping[str, str]) -> str | None:
        """What differs now (a file changed on disk, or the client's ``env`` sets a variable
        the preload depends on otherwise), or ``None`` when the server may serve ``env``."""
        recorded = dict(self.variables)
        for name, value in self.variables:
            if env.get(name) != value:
                return f"${name} differs from the server's"
        for name in env:
            if interpreter_variable(name) and name not in recorded:
                return f"${name} is set (the server started without it)"
        return self.stale_files()

    def stale_files(self) -> str | None:
        """Which file of the fingerprint changed on disk, if any."""
        if _stat(self.executable[0]) != self.executable[1]:
            return f"{self.executable[0]} changed"
        for entry, was in self.path:
            if _stat(entry) != was:
                return f"{entry} changed (a package was installed or removed)"
        for file, was in self.files + self.sources:
            if _stat(file) != was:
                return f"{file} changed"
        return None
