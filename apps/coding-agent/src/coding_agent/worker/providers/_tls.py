"""The TLS context of a provider's SDK client: loaded beside the SDK's import, or preloaded.

:class:`TlsContext` makes ``httpx2.create_ssl_context()`` (the context ``httpx2`` makes by
default) for :func:`~._sdk_import.sdk_client`: most of it is OpenSSL reading the certificate
authorities (~20-30 ms of CPU) with the GIL released, so a thread does it beside the SDK's
import, and the SDK's default ``httpx2`` client gets it through its ``http_client`` option.

In a child of the warm start's fork server the SDK is imported already, so nothing ran beside
that thread: the child waited for it, ~20 ms before its first request. The server makes the
context once instead (:func:`preload_tls_context`) and a child's first SDK client takes it
(:func:`take_preloaded_tls`, once per process: every later client makes its own, as before),
when what it was made from is unchanged: the variables that choose the authorities
(``SSL_CERT_FILE``, ``SSL_CERT_DIR``) and the key log (``SSLKEYLOGFILE``) have the values they
had, and the files and folders it could have read (those variables' paths, OpenSSL's
compiled-in file and folder) the same ``stat``. Otherwise the child loads its own, as any
process does. The server's fingerprint covers the same files
(:func:`preloaded_tls_sources`): a changed one makes it refuse. A context is preloaded only
when the authorities come from one of those places (a system whose OpenSSL has no
authorities file of its own, and no variable naming one, loads from a list of candidates, which
each process reads itself).
"""

from __future__ import annotations

import os
import threading
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

__all__ = ["TlsContext", "preload_tls_context", "preloaded_tls_sources", "take_preloaded_tls"]

_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "SSLKEYLOGFILE")

_Stamp = tuple[int, int] | None


def _stamp(path: str) -> _Stamp:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size


class _Preloaded:
    """A context made in the warm start's server, and what it was made from."""

    def __init__(self, context: ssl.SSLContext, variables: dict[str, str | None]) -> None:
        self.context = context
        self.variables = variables
        import ssl

        paths = ssl.get_default_verify_paths()
        named = [variables["SSL_CERT_FILE"], variables["SSL_CERT_DIR"]]
        self.sources = [p for p in (*named, paths.openssl_cafile, paths.openssl_capath) if p]
        self.stamps = [_stamp(path) for path in self.sources]

    def unchanged(self) -> bool:
        return (
            all(os.environ.get(name) == self.variables[name] for name in _VARIABLES)
            and [_stamp(path) for path in self.sources] == self.stamps
        )


_preloaded: list[_Preloaded] = []


def preload_tls_context() -> ssl.SSLContext | None:
    """In the warm start's fork server: make the context the first SDK client of each forked
    child takes (see the module doc); the context, or ``None`` when none was made (the
    authorities come from elsewhere, or making it failed: each child then makes its own)."""
    import ssl

    variables = {name: os.environ.get(name) for name in _VARIABLES}
    if not (variables["SSL_CERT_FILE"] or variables["SSL_CERT_DIR"]) and not os.path.isfile(
        ssl.get_default_verify_paths().openssl_cafile
    ):
        return None
    try:
        import httpx2

        context = httpx2.create_ssl_context()
    except Exception:  # a child makes its own, and meets the same error itself
        return None
    _preloaded[:] = [_Preloaded(context, variables)]
    return context


def preloaded_tls_sources() -> list[str]:
    """The files and folders the preloaded context could have read (none made: empty)."""
    return list(_preloaded[0].sources) if _preloaded else []


def take_preloaded_tls() -> ssl.SSLContext | None:
    """The preloaded context, once per process, if what it was made from is unchanged (see
    the module doc); else ``None``."""
    if not _preloaded:
        return None
    preloaded = _preloaded.pop()
    return preloaded.context if preloaded.unchanged() else None


class TlsContext:
    """``httpx2.create_ssl_context()``: the preloaded one (:func:`take_preloaded_tls`), or one
    made in a thread. Any failure there leaves the SDK to make its own (and meet the same
    error itself)."""

    def __init__(self) -> None:
        self._context: Any = None
        self._thread: threading.Thread | None = None

    @classmethod
    def start(cls) -> TlsContext | None:
        """Start loading (``None`` if ``httpx2`` cannot be imported: the SDK will say why)."""
        try:
            import httpx2  # here, before the thread: one import of it at a time
        except Exception:
            return None
        del httpx2
        tls = cls()
        tls._context = take_preloaded_tls()
        if tls._context is None:
            tls._thread = threading.Thread(target=tls._load, name="sdk-tls", daemon=True)
            tls._thread.start()
        return tls

    def _load(self) -> None:
        try:
            import httpx2

            self._context = httpx2.create_ssl_context()
        except Exception:  # the SDK makes its own and reports what is wrong
            self._context = None

    def http_client(self, module: types.ModuleType, options: dict[str, Any]) -> Any:
        """The SDK's default ``httpx2`` client with the loaded context (``None``, so the SDK
        makes its own as usual, if the context failed or the SDK has no such class)."""
        if self._thread is not None:
            self._thread.join()
        default = getattr(module, "DefaultAsyncHttpxClient", None)
        if self._context is None or default is None or "http_client" in options:
            return None
        keywords: dict[str, Any] = {"verify": self._context}
        if "timeout" in options:  # as the SDK gives its own client
            keywords["timeout"] = options["timeout"]
        try:
            return default(**keywords)
        except Exception:  # a release whose class takes other arguments: the SDK's own then
            return None
