"""Import the provider SDKs without running their package initialisers up front.

``import openai`` costs about 0.4 s of CPU and ``import anthropic`` about 1 s, nearly all of it
in package ``__init__`` modules: the root package re-exports everything (the client, every
exception, Azure/Bedrock/Vertex helpers) and each ``types`` package imports every one of its
hundreds of pydantic models, although a streamed request built from a ready JSON body (see
:mod:`._sse`) needs a client class, a few exceptions and a handful of models. Python offers no
partial package import, so :func:`defer_sdk_inits` adds a meta-path finder that defers the
``__init__`` of the two SDKs' root packages and of their ``types`` packages:

* the package module is created (``__path__``, ``__spec__``, ...) but its ``__init__`` does not
  run; submodules import as usual, so ``openai._client`` costs only what it imports;
* a name the ``__init__`` would bind with ``from .x import name [as alias]`` (before its first
  statement that is not an import) is resolved on first access by importing ``.x`` alone and
  taking ``name`` from it: the very object the ``__init__`` binds (read from the ``__init__``'s
  own source, so a new SDK release needs no list here), then kept in the package; a name the
  rest of a root ``__init__`` binds again is taken from its last top-level
  ``from .y import name``, or else left to the ``__init__`` itself;
* a submodule name imports that submodule, as ``hasattr(package, "x")`` then ``import`` would;
* any other name runs the real ``__init__`` (in the package's own namespace, as a normal import
  would have, once): ``import openai; openai.api_key`` still works, it merely pays then. A
  ``types`` package whose ``__init__`` does anything but ``from .x import ...`` runs it at once.

What the root ``__init__`` does besides re-exporting happens then too, except the SDK's log set
up (``OPENAI_LOG`` / ``ANTHROPIC_LOG``), which runs when the root package is created, and the
cosmetic renaming of exported classes' ``__module__`` to the root name. An SDK already imported
is left alone. The SDK is still the whole request path (client, auth, base URL, headers,
timeouts, status errors); only the import order changes.

Never a broken import (an SDK upgrade may change any ``__init__``): a package ``__init__`` the
hook does not understand runs as usual: no source at hand, no ``from .x import name``
re-exports (say, a release that loads lazily by itself), a non-root one that does anything
else, or any error while reading it. A name that fails to resolve alone (its module needs what
the ``__init__`` does first) runs the real ``__init__``. The call-only forwarders stand only for
functions their module defines with ``def``. And if a deferred import still fails,
:func:`sdk_client` forgets that SDK's modules and imports it plainly from then on.
``tests/app/providers/test_sdk_import_fallback.py`` proves each case on stand-in SDK packages.

Why it is worth it, measured (``benchmarks/startup.py --quick``, 2 shared loaded cores, with
the hook and with ``defer_sdk_inits`` left out of :func:`sdk_client`): start -> first provider
request, openai 0.81 s (CPU 0.32 s) with it against 0.98 s (CPU 0.51 s) without; anthropic
0.84 s (CPU 0.31 s) against 2.86 s (CPU 1.07 s). Importing the client alone in a fresh
process: openai 0.39 s CPU and 661 modules against 0.65 s and 1,085; anthropic 0.38 s and 630
modules against 1.53 s and 3,744. Without it the first request's CPU time alone exceeds its
0.5 s target on both paths. The alternative, dropping the SDKs for plain ``httpx2`` requests, would lose what
they are kept for (auth, headers, base URLs, timeouts, status errors, and the Bedrock and
Vertex clients of the Anthropic SDK) and change the requests on the wire.

Why one module: it is one import hook. The reader of the ``__init__`` sources (scan, parse,
later bindings) decides what the loaders may defer, and the loaders, forwarders and fallbacks
act on exactly what it read; apart, each half would encode the other's assumptions.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from coding_agent.worker.gc_policy import start_up_done
from coding_agent.worker.providers._tls import TlsContext

__all__ = [
    "SDK_ROOTS",
    "defer_sdk_inits",
    "deferred_exports",
    "preload_sdk_clients",
    "sdk_client",
    "sdk_client_options",
    "trio_hidden_from_httpcore",
]

SDK_ROOTS = frozenset({"openai", "anthropic"})
"""The packages whose ``__init__`` (and ``types`` packages' ``__init__``) are deferred."""

DEFERRED_PACKAGES = frozenset({"anthropic.lib._tracing"})
"""Further packages whose ``__init__`` is deferred: anthropic's tracing helpers, which
``anthropic._base_client`` imports (and, through them, ``message_create_params`` and the beta
params: ~500 type modules) although they only run when OpenTelemetry tracing is on."""

CALLED_ONLY: dict[str, frozenset[str]] = {
    "anthropic.lib._tracing": frozenset(
        {
            "finish_api_call_span",
            "messages_create_request_attributes",
            "sessions_create_request_attributes",
        }
    ),
}
"""Exports of a deferred package that importers only call (never inspect): ``from package
import name`` binds a forwarding function that imports the defining module at its first call,
so binding the name costs nothing (``_base_client`` binds ``finish_api_call_span`` at import;
it is called only when a tracing span exists)."""

DEFERRED_MODULES: dict[str, frozenset[str]] = {
    "anthropic._error_classes": frozenset({"make_status_error"}),
}
"""Modules whose code runs at the first use of anything but the listed call-only functions
(bound as forwarders, as for :data:`CALLED_ONLY`): ``anthropic._base_client`` imports
``make_status_error``, called only for an error status, whose module imports ~40 error
models (~30 ms)."""

_lock = threading.Lock()
_PREFIXES = tuple(sorted(SDK_ROOTS))


def defer_sdk_inits() -> None:
    """Install the deferring finder (idempotent). An SDK imported before keeps its full import."""
    with _lock:
        if not any(isinstance(finder, _DeferringFinder) for finder in sys.meta_path):
            sys.meta_path.insert(0, _DeferringFinder())


@contextlib.contextmanager
def trio_hidden_from_httpcore() -> Iterator[None]:
    """Within: ``httpcore2``, if imported now (the SDK client's transport imports it), is
    imported as if trio were not installed, when this runs under asyncio.

    ``httpcore2`` imports trio (~30 ms of CPU) whenever it is installed, only to use it when it
    runs under trio; without it, it uses anyio (asyncio) and refuses to run under trio with its
    own error. The worker runs under asyncio only, so it hides trio from that one import.
    Nothing changes when trio or ``httpcore2`` is imported already, or outside asyncio."""
    hide = "trio" not in sys.modules and "httpcore2" not in sys.modules and _under_asyncio()
    finder = _HiddenModule("trio")
    if hide:
        sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        if hide:
            sys.meta_path.remove(finder)


_TRANSPORT = ("httpcore2", "h11", "truststore", "anyio.streams.tls", "anyio.abc")
"""What making an SDK client imports besides the SDK (its HTTP transport)."""


def preload_sdk_clients() -> None:
    """Import the OpenAI and Anthropic client classes and their HTTP transport as
    :func:`sdk_client` would (deferred ``__init__`` s, trio hidden), without making a client (a
    client reads the environment at creation: that is its process's own). The warm start's
    fork server (:mod:`coding_agent.warm.server`) preloads them so; an SDK that fails to import
    is left for the process that uses it to fail on."""
    defer_sdk_inits()
    hidden = _HiddenModule("trio")
    sys.meta_path.insert(0, hidden)
    try:
        for package, client in (("openai", "AsyncOpenAI"), ("anthropic", "AsyncAnthropic")):
            with contextlib.suppress(Exception):
                getattr(importlib.import_module(package), client)
        for module in _TRANSPORT:
            with contextlib.suppress(Exception):
                importlib.import_module(module)
    finally:
        sys.meta_path.remove(hidden)


def sdk_client_options(api_key: str, base_url: str | None, timeout: float) -> dict[str, Any]:
    """The keyword arguments a provider makes its SDK client with: no SDK retries (the
    provider's :class:`RetryPolicy` retries)."""
    return {"api_key": api_key, "base_url": base_url, "max_retries": 0, "timeout": timeout}


def sdk_client(package: str, client: str, options: dict[str, Any]) -> Any:
    """``package.client(**options)``, the SDK ``package`` imported now if it is not yet: a
    worker serves before its provider's SDK is imported, and a session that never asks the
    model never pays. The SDK's package ``__init__`` s run only if needed
    (:func:`defer_sdk_inits`), and trio stays out of the import (the worker runs under asyncio:
    :func:`trio_hidden_from_httpcore`). A process's start-up pause of the cycle collector ends
    here, once the client is made (the first request is next: see
    :func:`~coding_agent.worker.gc_policy.pause_for_start_up`).

    The client's TLS context is loaded meanwhile, in a thread (:class:`._tls.TlsContext`): loading
    the certificate authorities (~20 ms of CPU) is OpenSSL's work, which runs beside the
    import on the other core; the SDK gets it through its ``http_client`` option, an
    ``httpx2`` client with the SDK's own defaults (``DefaultAsyncHttpxClient``) and the context
    ``httpx2`` makes by default (``httpx2.create_ssl_context()``), so requests are the same. (A
    warm start's child takes the one its server made, when what it was made from is
    unchanged: :func:`~._tls.take_preloaded_tls`.)"""
    defer_sdk_inits()
    try:
        with trio_hidden_from_httpcore():
            tls = TlsContext.start() if package in SDK_ROOTS else None
            try:
                module = importlib.import_module(package)
                made = getattr(module, client)
            except Exception:
                if not _plain_again(package):
                    raise  # a plain import fails as well: the SDK's own error
                module = importlib.import_module(package)
                made = getattr(module, client)
            http_client = tls.http_client(module, options) if tls is not None else None
            if http_client is not None:
                options = {**options, "http_client": http_client}
            return made(**options)  # which imports the transport: trio stays hidden
    finally:
        start_up_done()


_PLAIN: set[str] = set()
"""SDK roots imported plainly from now on (their deferred import failed)."""


def _plain_again(root: str) -> bool:
    """After a deferred import of ``root`` failed in a way nothing foresaw: forget every
    module of it and import it plainly from now on (``False`` if it was plain already)."""
    with _lock:
        if root in _PLAIN:
            return False
        _PLAIN.add(root)
        for name in [n for n in sys.modules if n == root or n.startswith(f"{root}.")]:
            del sys.modules[name]
    return True


def _under_asyncio() -> bool:
    import sniffio

    try:
        return sniffio.current_async_library() == "asyncio"
    except sniffio.AsyncLibraryNotFoundError:
        return False


class _HiddenModule(importlib.abc.MetaPathFinder):
    """Makes ``import <name>`` (and its submodules) fail as for a package not installed."""

    def __init__(self, name: str) -> None:
        self._name = name

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == self._name or fullname.startswith(f"{self._name}."):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def _deferred(fullname: str) -> bool:
    root, _, rest = fullname.partition(".")
    if root in _PLAIN:
        return False
    if fullname in DEFERRED_PACKAGES:
        return True
    return root in SDK_ROOTS and (not rest or rest == "types" or rest.startswith("types."))


class _DeferringFinder(importlib.abc.MetaPathFinder):
    """Finds the deferred packages through the normal path finder and swaps their loader."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_PREFIXES):
            return None
        try:
            return self._find(fullname, path)
        except Exception:  # anything unforeseen: the usual finders import it as ever
            return None

    def _find(
        self, fullname: str, path: Sequence[str] | None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in DEFERRED_MODULES and fullname.partition(".")[0] not in _PLAIN:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if (
                spec is not None
                and isinstance(spec.loader, importlib.machinery.SourceFileLoader)
                and _defines_functions(spec.loader, fullname, DEFERRED_MODULES[fullname])
            ):
                spec.loader = _DeferredModule(spec.loader, DEFERRED_MODULES[fullname])
            return spec
        if not _deferred(fullname):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if (
            spec is None
            or spec.submodule_search_locations is None
            or not isinstance(spec.loader, importlib.machinery.SourceFileLoader)
        ):
            return spec
        spec.loader = _DeferredInit(spec.loader)
        return spec


class _Exports:
    """What a package ``__init__`` binds with ``from .x import y`` (and whether that is all)."""

    __slots__ = ("all", "names", "only_imports")

    def __init__(self) -> None:
        self.names: dict[str, tuple[str, str | None]] = {}
        """name -> (absolute module, attribute or ``None`` for the module itself)."""
        self.only_imports = True
        self.all: list[str] | None = None

    @classmethod
    def of(cls, source: str, package: str) -> _Exports:
        """The exports of ``package``'s ``__init__`` source: scanned with a regular expression
        (the SDKs' generated ``__init__``s are large: :mod:`ast` takes ~100 ms for anthropic's),
        by :mod:`ast` when the scan meets anything it does not know for sure."""
        try:
            return _scan(source, package)
        except _Unsure:
            return _parse(source, package)

    def bind(
        self, package: str, level: int, module: str | None, names: list[tuple[str, str]]
    ) -> None:
        """Record ``from <level dots><module> import name [as bound], ...``."""
        base = package.rsplit(".", level - 1)[0]
        absolute = f"{base}.{module}" if module else base
        for name, bound in names:
            if name == "*":
                self.only_imports = False
            elif module:
                self.names.setdefault(bound, (absolute, name))
            else:  # from . import sub
                self.names.setdefault(bound, (f"{absolute}.{name}", None))


def _parse(source: str, package: str) -> _Exports:
    """:class:`_Exports` read with :mod:`ast` (the reference the scan is tested against)."""
    exports = _Exports()
    for statement in ast.parse(source).body:
        if isinstance(statement, ast.ImportFrom) and statement.level == 0:
            exports.only_imports &= statement.module == "__future__"
            continue  # an absolute import binds no re-export
        if isinstance(statement, ast.ImportFrom):
            names = [(a.name, a.asname or a.name) for a in statement.names]
            exports.bind(package, statement.level, statement.module, names)
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # the docstring
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and statement.targets[0].id == "__all__"
        ):
            try:
                exports.all = list(ast.literal_eval(statement.value))
                continue
            except ValueError:
                pass
        if isinstance(statement, ast.Import):
            continue  # binds no re-export (``import typing as _t``)
        # Anything else may define what a later import relies on (``openai._module_client``
        # reads a function the root __init__ defines first): names past here are resolved by
        # running the __init__.
        exports.only_imports = False
        break
    return exports


class _Unsure(Exception):
    """The scan met a form it does not handle: use :func:`_parse`."""


_STATEMENT = re.compile(
    r"""
      (?P<from>from[ \t]+(?P<dots>\.*)(?P<module>[\w.]*)[ \t]+import[ \t]+
        (?:\((?P<group>[^)]*)\)|(?P<line>[^\n#()]*?))[ \t]*(?:\#[^\n]*)?\n)
    | (?P<blank>[ \t]*(?:\#[^\n]*)?\n)
    | (?P<string>[rRuUbB]{0,2}(?:\"\"\"[\s\S]*?\"\"\"|'\'\'[\s\S]*?'\'\'|"[^"\\\n]*"|'[^'\\\n]*')[ \t]*(?:\#[^\n]*)?\n)
    | (?P<import>import[ \t]+[\w. \t,]+(?:\#[^\n]*)?\n)
    | (?P<all>__all__[ \t]*=[ \t]*(?P<value>\[[^\]]*\]|\([^)]*\))[ \t]*(?:\#[^\n]*)?\n)
    """,
    re.VERBOSE,
)


def _scan(source: str, package: str) -> _Exports:
    """:func:`_parse`'s result, read with :data:`_STATEMENT`, one top-level statement at a
    time; :class:`_Unsure` for anything it cannot be sure of (it then stops at the first
    statement that is none of these, as the parse does)."""
    if "\\\n" in source or ";" in source.split("__all__", 1)[0]:
        raise _Unsure  # line continuations, several statements on a line
    exports = _Exports()
    text = source if source.endswith("\n") else source + "\n"
    position, end = 0, len(text)
    while position < end:
        found = _STATEMENT.match(text, position)
        if found is None:
            exports.only_imports = False  # anything else: a later import may rely on it
            return exports
        position = found.end()
        kind = next(k for k in ("blank", "string", "from", "import", "all") if found.group(k))
        if kind in ("blank", "string", "import"):
            continue
        if kind == "all":
            try:
                exports.all = list(ast.literal_eval(found.group("value")))
            except (ValueError, SyntaxError):
                raise _Unsure from None
            continue
        dots, module = found.group("dots"), found.group("module")
        listed = found.group("group")
        listed = found.group("line") if listed is None else listed
        if not dots:
            exports.only_imports &= module == "__future__"
            continue
        names: list[tuple[str, str]] = []
        for item in re.sub(r"\#[^\n]*", "", listed).split(","):
            words = item.split()
            if not words:
                continue
            if len(words) == 1 and (words[0].isidentifier() or words[0] == "*"):
                names.append((words[0], words[0]))
            elif len(words) == 3 and words[1] == "as" and words[0].isidentifier():
                if not words[2].isidentifier():
                    raise _Unsure
                names.append((words[0], words[2]))
            else:
                raise _Unsure
        if not names:
            raise _Unsure
        exports.bind(package, len(dots), module or None, names)
    return exports


class _DeferredInit(importlib.abc.Loader):
    """Creates the package without running its ``__init__``; resolves names as they are used."""

    def __init__(self, real: importlib.machinery.SourceFileLoader) -> None:
        self._real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        root = "." not in name
        try:
            exports = _understood(self._real, name, root=root)
        except Exception:  # anything unforeseen in reading it: not understood
            exports = None
        if exports is None:
            self._real.exec_module(module)  # not an __init__ it understands: run it as usual
            return
        namespace = module.__dict__
        namespace["__deferred_exports__"] = exports
        if exports.all is not None and exports.only_imports:
            namespace["__all__"] = exports.all
        real = self._real

        resolved: set[str] = set()
        created = set(namespace)
        called_only = CALLED_ONLY.get(name, frozenset())

        def run_init() -> None:
            namespace.pop("__getattr__", None)
            namespace.pop("__dir__", None)
            namespace.pop("__deferred_exports__", None)
            # What someone set on the package meanwhile (``openai.api_key = ...``) would have
            # been set after the __init__: it stays.
            assigned = {
                key: value
                for key, value in namespace.items()
                if key not in created
                and key not in resolved
                and not isinstance(value, types.ModuleType)
            }
            real.exec_module(module)
            namespace.update(assigned)

        def __getattr__(attr: str) -> Any:
            target = exports.names.get(attr)
            if (
                target is not None
                and attr in called_only
                and target[0] not in sys.modules
                and _defines_functions(None, target[0], frozenset({attr}))
            ):
                return _forwarder(namespace, attr, target[0], lambda: _import_from(*target))
            if target is not None:
                try:
                    value = _import_from(*target)
                except Exception:  # it needs what the __init__ does before: run it
                    run_init()
                    return getattr(module, attr)
                namespace[attr] = value
                resolved.add(attr)
                return value
            if not attr.startswith("__"):
                child = f"{name}.{attr}"
                if importlib.machinery.PathFinder.find_spec(child, module.__path__) is not None:
                    return importlib.import_module(child)
            if root:
                run_init()
                return getattr(module, attr)
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")

        def __dir__() -> list[str]:
            return sorted(set(namespace) | set(exports.names))

        namespace["__getattr__"] = __getattr__
        namespace["__dir__"] = __dir__
        if root:
            _setup_logging(name)


def _understood(
    real: importlib.machinery.SourceFileLoader, name: str, *, root: bool
) -> _Exports | None:
    """The exports of package ``name``'s ``__init__`` when deferring it is sound, else ``None``
    (run it as usual): its source must be at hand and bind names with ``from .x import y``;
    a non-root one must do nothing else. A root one's names that its later statements bind
    again are resolved as those bind them (a later ``from .x import y``) or by running it."""
    source = real.get_source(name)
    if source is None:
        return None  # compiled only: nothing to read
    exports = _Exports.of(source, name)
    if not exports.names or (not root and not exports.only_imports):
        return None
    if not exports.only_imports:
        _rebound(source, name, exports)
    return exports


def _rebound(source: str, package: str, exports: _Exports) -> None:
    """Update ``exports`` for the names a root ``__init__`` binds again after its leading
    imports (``DEFAULT_TIMEOUT`` imported from ``_constants``, then from ``_base_client``): a
    top-level ``from .x import y`` moves the name there, any other binding (an assignment,
    ``def``, ``class``, an import in a block) leaves it to the ``__init__`` itself. Names a later
    ``import *`` binds are not known here (the test comparing every name with a full import
    guards them)."""
    leading = True
    for statement in ast.parse(source).body:
        if leading and _leading_statement(statement):
            continue
        leading = False
        if isinstance(statement, ast.ImportFrom) and statement.level:
            moved = _Exports()
            names = [(a.name, a.asname or a.name) for a in statement.names]
            moved.bind(package, statement.level, statement.module, names)
            for bound, target in moved.names.items():
                if bound in exports.names:
                    exports.names[bound] = target
            continue
        for bound in _bindings(statement):
            exports.names.pop(bound, None)


def _leading_statement(statement: ast.stmt) -> bool:
    """A statement :func:`_parse` reads past (an import, the docstring, ``__all__ = [...]``)."""
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return True
    return (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and statement.targets[0].id == "__all__"
    )


def _bindings(statement: ast.stmt) -> Iterator[str]:
    """The module-level names ``statement`` may bind (not those inside a function or class)."""
    pending: list[ast.AST] = [statement]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            yield node.id
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                yield (alias.asname or alias.name).partition(".")[0]
        pending.extend(ast.iter_child_nodes(node))


_DEF = r"^(?:async[ \t]+)?def[ \t]+{}[ \t]*\("


def _defines_functions(
    loader: importlib.machinery.SourceFileLoader | None, module: str, names: frozenset[str]
) -> bool:
    """Whether ``module``'s source defines each of ``names`` with a top-level ``def`` (so a
    forwarder can stand for it until its first call). ``loader`` or the path finder finds it."""
    if loader is None:
        parent, _, _ = module.rpartition(".")
        path = getattr(sys.modules.get(parent), "__path__", None)
        spec = importlib.machinery.PathFinder.find_spec(module, path)
        found = spec.loader if spec is not None else None
        if not isinstance(found, importlib.machinery.SourceFileLoader):
            return False
        loader = found
    source = loader.get_source(module) or ""
    return all(re.search(_DEF.format(re.escape(name)), source, re.MULTILINE) for name in names)


def _forwarder(
    namespace: dict[str, Any], attr: str, module: str, resolve: Callable[[], Any]
) -> Any:
    """A function standing for ``attr`` (defined in ``module``): at its first call it takes the
    real function from ``resolve()``, binds it in ``namespace`` and calls it (then every call)."""
    real: list[Any] = []

    def forward(*args: Any, **kwargs: Any) -> Any:
        if not real:
            real.append(resolve())
            namespace[attr] = real[0]
        return real[0](*args, **kwargs)

    forward.__name__ = forward.__qualname__ = attr
    forward.__module__ = module
    return forward


class _DeferredModule(importlib.abc.Loader):
    """Creates a module without running its code; runs it (once, in the module's namespace) at
    the first use of a name other than the call-only ``names``, or the first call of one."""

    def __init__(self, real: importlib.machinery.SourceFileLoader, names: frozenset[str]) -> None:
        self._real = real
        self._names = names

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        namespace = module.__dict__
        real, names, lock = self._real, self._names, threading.Lock()
        ran: list[bool] = []

        def run() -> None:
            with lock:
                if not ran:
                    namespace.pop("__getattr__", None)
                    real.exec_module(module)
                    ran.append(True)

        def resolver(attr: str) -> Callable[[], Any]:
            def resolve() -> Any:
                run()
                return namespace[attr]

            return resolve

        def __getattr__(attr: str) -> Any:
            if attr in names and not ran:
                return _forwarder(namespace, attr, module.__name__, resolver(attr))
            if attr == "__path__":  # the import system asking whether it is a package: no
                raise AttributeError(attr)
            run()
            try:
                return namespace[attr]
            except KeyError:
                raise AttributeError(
                    f"module {module.__name__!r} has no attribute {attr!r}"
                ) from None

        namespace["__getattr__"] = __getattr__


def _import_from(module: str, attr: str | None) -> Any:
    """``from module import attr`` (``import module`` when ``attr`` is ``None``)."""
    imported = importlib.import_module(module)
    if attr is None:
        return imported
    try:
        return getattr(imported, attr)
    except AttributeError:  # a submodule not imported yet, as the import statement tries
        return importlib.import_module(f"{module}.{attr}")


def _setup_logging(root: str) -> None:
    """The SDK's ``<ROOT>_LOG`` logging set-up, which its root ``__init__`` runs on import."""
    try:
        logs = importlib.import_module(f"{root}._utils._logs")
    except ImportError:
        return
    setup = getattr(logs, "setup_logging", None)
    if callable(setup):
        setup()


def deferred_exports(package: types.ModuleType) -> dict[str, tuple[str, str | None]] | None:
    """The names a deferred package resolves lazily (``None`` once its ``__init__`` ran or if it
    was never deferred): for tests comparing them with what the real ``__init__`` binds."""
    exports = package.__dict__.get("__deferred_exports__")
    return dict(exports.names) if isinstance(exports, _Exports) else None
