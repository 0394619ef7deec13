"""Compiled facet modules, cached under the hash of their source text.

A facet generation compiles every module from its current source (see :mod:`.generation`): a
``.pyc`` is trusted by mtime and size, so an edit within the file system's mtime granularity
could bring old code back. This cache keeps that guarantee and skips the compiling: an entry's
key is the SHA-256 of everything the code object is made from (the interpreter's bytecode magic
number, the optimisation level, the file name the code reports, and the source bytes), so a
changed source can only ever miss. The source is still read at every load; only ``compile`` is
saved.

Entries live in memory (for reloads in one process) and, when a directory is set, on disk as
``<key>.code``: a header, the SHA-256 of the payload and the marshalled code. A file that does not
verify (truncated, corrupt, another format) is ignored and rewritten; a directory that cannot be
written just means compiling. Files are written to a temporary name and renamed, so a reader
never sees half a file. The directory is ``$CHORD_CODE_CACHE`` if set (``off`` disables the disk
cache), else ``$XDG_CACHE_HOME/chord/code`` (``~/.cache/chord/code``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CodeCache", "default_cache_dir", "shared_code_cache"]

_HEADER = b"chord-code\x00\x01"
_DIGEST = 32
_MEMORY_ENTRIES = 1024


def default_cache_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """Where compiled facet modules are kept (``None``: in memory only)."""
    env = os.environ if env is None else env
    chosen = env.get("CHORD_CODE_CACHE")
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "0", "off", "no", "false") else Path(chosen)
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "chord" / "code"


class CodeCache:
    """``compile(source, filename)`` with a cache no stale entry can satisfy."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._memory: OrderedDict[bytes, types.CodeType] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        """Compiles saved (memory or disk), for tests and benchmarks."""
        self.misses = 0

    @staticmethod
    def key(source: bytes, filename: str) -> bytes:
        """The SHA-256 of what ``compile(source, filename, "exec", dont_inherit=True)`` depends on."""
        digest = hashlib.sha256(importlib.util.MAGIC_NUMBER)
        digest.update(b"%d\x00" % sys.flags.optimize)
        encoded = os.fsencode(filename)
        digest.update(b"%d\x00" % len(encoded))
        digest.update(encoded)
        digest.update(source)
        return digest.digest()

    def compile(self, source: bytes, filename: str) -> types.CodeType:
        """The code of module ``source`` (as ``compile`` would make it); compile errors raise as
        ``compile`` raises them and are not cached."""
        key = self.key(source, filename)
        with self._lock:
            code = self._memory.get(key)
            if code is not None:
                self._memory.move_to_end(key)
                self.hits += 1
                return code
        code = self._read(key)
        if code is None:
            code = compile(source, filename, "exec", dont_inherit=True)
            self.misses += 1
            self._write(key, code)
        else:
            self.hits += 1
        with self._lock:
            self._memory[key] = code
            while len(self._memory) > _MEMORY_ENTRIES:
                self._memory.popitem(last=False)
        return code

    def check(self, source: bytes, filename: str) -> None:
        """Raise what ``compile`` raises for ``source`` (a syntax error), without loading its
        code: a cached entry (kept only for source that compiled) is enough, so a module that
        is checked but not run costs a hash and a ``stat``, not an unmarshal."""
        key = self.key(source, filename)
        with self._lock:
            if key in self._memory:
                return
        path = self._file(key)
        if path is not None and path.is_file():
            self.hits += 1
            return
        self.compile(source, filename)

    def _file(self, key: bytes) -> Path | None:
        return None if self.directory is None else self.directory / f"{key.hex()}.code"

    def _read(self, key: bytes) -> types.CodeType | None:
        path = self._file(key)
        if path is None:
            return None
        try:
            data = path.read_bytes()
        except OSError:
            return None
        head = len(_HEADER)
        payload = data[head + _DIGEST :]
        if (
            data[:head] != _HEADER
            or hashlib.sha256(payload).digest() != data[head : head + _DIGEST]
        ):
            return None  # not ours, truncated or corrupt: compile and rewrite
        try:
            code = marshal.loads(payload)
        except (EOFError, ValueError, TypeError):
            return None
        return code if isinstance(code, types.CodeType) else None

    def _write(self, key: bytes, code: types.CodeType) -> None:
        path = self._file(key)
        if path is None:
            return
        payload = marshal.dumps(code)
        data = _HEADER + hashlib.sha256(payload).digest() + payload
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            temporary.write_bytes(data)
            os.replace(temporary, path)
        except OSError:
            try:
                temporary.unlink(missing_ok=True)
            except OSError:
                pass


_shared: CodeCache | None = None
_shared_lock = threading.Lock()


def shared_code_cache() -> CodeCache:
    """The process's cache (directory from :func:`default_cache_dir` at first use)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = CodeCache(default_cache_dir())
        return _shared
