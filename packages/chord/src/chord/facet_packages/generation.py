"""Per-generation import: a fresh, private copy of a facet package for every load.

Reloading code in place (``importlib.reload``) keeps the old module namespace, skips submodules
and leaves old ``from x import y`` bindings pointing at old code. Instead every load of a facet
package is a new *generation*: the package and all of its submodules are imported again under
generation-unique module names::

    greeter              ->  __chord_gen_7__.greeter
    greeter.session      ->  __chord_gen_7__.greeter.session

so two generations live side by side until the host has cut over, and the retired one can be
dropped as a whole. What makes this work:

* **Source, never stale bytecode.** Every module's code comes from the current source text; no
  ``.pyc`` is read or written. A ``.pyc`` cache (trusted by mtime and size) could resurrect old
  code after an edit within the file system's mtime granularity; instead the compiled code is
  cached under the SHA-256 of the source bytes and the file name (:mod:`.codecache`), so a load
  reads every source and only an identical text can reuse a compile.
* **Imports stay inside the generation.** Relative imports (``from .contract import Greeter``)
  resolve against the generation's package. Absolute imports of the package's own name
  (``import greeter.contract``) are mapped to the generation too: each generation module gets its
  own ``__builtins__`` whose ``__import__`` rewrites ``greeter[.x]`` to
  ``__chord_gen_7__.greeter[.x]``, so this holds for imports run later inside functions as well.
  Other modules (chord, msgspec, the installed copy of the package itself) are shared and never
  touched, so framework types stay identical across generations.
* **Everything is imported up front, in the session host.** A syntax or import error anywhere in
  the package fails the load, not a call an hour later; a failed load removes whatever it had
  imported. One exception keeps a host from paying for another host's code (a session worker
  importing Textual): a top-level module named after *another* host kind (``greeter/tui.py`` in
  a ``"session"`` host, ``greeter/session.py`` in a ``"tui"`` host; see :data:`HOST_MODULES`) is
  only compiled (a syntax error still fails the load), and imported when the package's own code
  imports it (a plugin imports it inside ``chord_facets`` for that host).
* **Any other host imports only what its facets use.** A ``"tui"`` host (any host kind but those
  of :data:`IMPORT_ALL_HOSTS`) imports the package, its plugin module and its own host module
  (``greeter/tui.py``), then collects its facets (the plugin imports whatever else they need);
  every other module is compiled only, so a syntax error anywhere still fails the load. A UI
  process thus never runs the session side's modules (the harness, tools, sandboxes they
  import), and their import errors fail the load in the session host, where they run.
* **Disposal purges.** :meth:`FacetGeneration.dispose` removes the generation's modules from
  ``sys.modules``; once the host has dropped its facets, the generation's objects are garbage.

Rules this places on facet code (the template and ``docs/authoring-facets.md`` repeat them):
prefer relative imports (``importlib.import_module("greeter.x")`` is *not* mapped); keep no
process-global side effects at import time; keep state in replicated state or durable storage,
never in module globals; never pickle facet classes (their ``__module__`` is a generation name).
"""

from __future__ import annotations

import builtins
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import sys
import types
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec
import pluggy

from chord.facet_packages import hookspecs
from chord.facet_packages.codecache import CodeCache, shared_code_cache
from chord.facet_packages.discovery import FacetPackage
from chord.facets.facet import Facet
from chord.facets.loaders import FacetLoader, LoadedFacets

__all__ = [
    "GENERATION_PREFIX",
    "FacetGeneration",
    "FacetLoadError",
    "load_facet_packages",
    "load_generation",
    "package_facet_loader",
]

GENERATION_PREFIX = "__chord_gen_"
"""Every generation's modules live under a root module named ``__chord_gen_<n>__``."""

_counter = itertools.count(1)
_real_import = builtins.__import__


class FacetLoadError(Exception):
    """A generation could not be loaded. ``stage`` says where; ``__cause__`` holds the error.

    * ``"import"``: a module failed to compile or to execute (syntax error, import error, an
      exception at import time).
    * ``"plugin"``: the plugin module has no usable ``chord_facets`` hook implementation, the hook
      raised, or it returned something that is not a list of facets.
    """

    def __init__(self, message: str, *, package: str, stage: Literal["import", "plugin"]) -> None:
        super().__init__(message)
        self.package = package
        self.stage: Literal["import", "plugin"] = stage


class _Live(msgspec.Struct, frozen=True):
    """What the finder needs to know about a generation while its modules may be imported."""

    package: str
    package_dir: Path
    builtins: Mapping[str, Any]
    code_cache: CodeCache


_live: dict[str, _Live] = {}


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles the current source text (or reuses the compile of the very same text), and runs
    the module with generation builtins."""

    def __init__(self, fullname: str, path: str, live: _Live) -> None:
        super().__init__(fullname, path)
        self._builtins = live.builtins
        self._code_cache = live.code_cache

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        return self._code_cache.compile(self.get_data(path), path)

    def exec_module(self, module: types.ModuleType) -> None:
        # exec() keeps a __builtins__ that is already present: the generation's import mapping.
        module.__dict__["__builtins__"] = self._builtins
        module.__dict__["__cached__"] = None  # no bytecode file exists, nor ever will
        super().exec_module(module)


class _GenerationFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of live generations; ignores every other name."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(GENERATION_PREFIX):
            return None
        root, _, rest = fullname.partition(".")
        live = _live.get(root)
        if live is None or not rest:
            return None  # a disposed generation stays disposed
        if rest == live.package:
            return _spec(fullname, live.package_dir / "__init__.py", live, package=True)
        leaf = rest.rpartition(".")[2]
        for base in path or ():
            init = Path(base, leaf, "__init__.py")
            if init.is_file():
                return _spec(fullname, init, live, package=True)
            module = Path(base, leaf + ".py")
            if module.is_file():
                return _spec(fullname, module, live, package=False)
        return None


def _spec(
    fullname: str, file: Path, live: _Live, *, package: bool
) -> importlib.machinery.ModuleSpec | None:
    spec = importlib.util.spec_from_file_location(
        fullname,
        file,
        loader=_SourceLoader(fullname, str(file), live),
        submodule_search_locations=[str(file.parent)] if package else None,
    )
    return spec


def _install_finder() -> None:
    if not any(isinstance(finder, _GenerationFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _GenerationFinder())


def _generation_builtins(root: str, package: str) -> dict[str, Any]:
    """A builtins namespace whose ``__import__`` maps ``package[.x]`` into the generation."""
    own = package + "."
    generation_package = f"{root}.{package}"

    def __import__(
        name: str,
        globals: Mapping[str, object] | None = None,
        locals: Mapping[str, object] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> types.ModuleType:
        if level == 0 and (name == package or name.startswith(own)):
            module = _real_import(f"{root}.{name}", globals, locals, fromlist, 0)
            # `import pkg.x` binds the top-level package: the generation's, not the root.
            return module if fromlist else sys.modules[generation_package]
        return _real_import(name, globals, locals, fromlist, level)

    namespace = dict(builtins.__dict__)
    namespace["__import__"] = __import__
    return namespace


class FacetGeneration:
    """One loaded generation of a facet package: its facets, and :meth:`dispose` to let go.

    Shaped like :class:`~chord.facets.loaders.LoadedFacets` (``facets`` plus an awaitable
    ``dispose()``), so the coordinator and the loader protocol treat both alike.
    """

    def __init__(
        self,
        *,
        number: int,
        package: FacetPackage,
        host: str,
        root: str,
        modules: tuple[str, ...],
        facets: tuple[Facet, ...],
    ) -> None:
        self._number = number
        self._package = package
        self._host = host
        self._root = root
        self._modules = modules
        self._facets = facets
        self._disposed = False

    @property
    def number(self) -> int:
        """Process-wide unique generation number (grows with every load of any package)."""
        return self._number

    @property
    def package(self) -> FacetPackage:
        return self._package

    @property
    def host(self) -> str:
        """The host kind the facets were collected for."""
        return self._host

    @property
    def root(self) -> str:
        """Name of the generation's root module, ``__chord_gen_<n>__``."""
        return self._root

    @property
    def modules(self) -> tuple[str, ...]:
        """The package's dotted module names loaded in this generation (without the root)."""
        return self._modules

    @property
    def facets(self) -> tuple[Facet, ...]:
        """The facets the package returned; empty once disposed."""
        return self._facets

    @property
    def disposed(self) -> bool:
        return self._disposed

    def module(self, name: str) -> types.ModuleType:
        """This generation's copy of module ``name`` (``"greeter.session"``)."""
        if self._disposed:
            raise RuntimeError(
                f"facet generation {self._number} of {self._package.name!r} is disposed"
            )
        if name not in self._modules:
            raise KeyError(f"{name!r} is not a module of facet package {self._package.name!r}")
        return sys.modules[f"{self._root}.{name}"]

    def purge(self) -> None:
        """Synchronous :meth:`dispose`: forget the facets and remove the modules. Idempotent."""
        if self._disposed:
            return
        self._disposed = True
        self._facets = ()
        _purge(self._root)

    async def dispose(self) -> None:
        """Release the generation (never checkpoints, so it cannot be interrupted half-way)."""
        self.purge()

    def as_loaded(self) -> LoadedFacets:
        """This generation as a plain :class:`~chord.facets.loaders.LoadedFacets`."""
        return LoadedFacets(self._facets, self.dispose)

    def __repr__(self) -> str:
        state = "disposed" if self._disposed else f"{len(self._facets)} facets"
        return f"<FacetGeneration {self._package.name}#{self._number} {self._host}: {state}>"


def _purge(root: str) -> None:
    _live.pop(root, None)
    doomed = [name for name in sys.modules if name == root or name.startswith(root + ".")]
    for name in doomed:
        del sys.modules[name]


def load_generation(
    package: FacetPackage, host: str, *, code_cache: CodeCache | None = None
) -> FacetGeneration:
    """Import a fresh generation of ``package`` and collect its facets for host kind ``host``.

    Raises :class:`FacetLoadError` (``stage`` ``"import"`` or ``"plugin"``); a failed load leaves
    no module behind. Runs module code, so call it on the thread that owns the facets' objects.
    ``code_cache`` holds compiled modules (default: the process's, see :mod:`.codecache`).
    """
    _install_finder()
    number = next(_counter)
    root = f"{GENERATION_PREFIX}{number}__"
    cache = code_cache if code_cache is not None else shared_code_cache()
    _live[root] = _Live(
        package.package, package.package_dir, _generation_builtins(root, package.package), cache
    )
    try:
        container = types.ModuleType(
            root, f"Generation {number} of facet package {package.name!r}."
        )
        container.__path__ = []  # a package that holds only what the loader puts in it
        container.__package__ = root
        sys.modules[root] = container
        names = _import_all(package, root, host, cache)
        plugin = sys.modules[f"{root}.{package.plugin_module}"]
        facets = _collect_facets(package, plugin, host, number)
        names += _imported_since(root, names)  # what collecting the facets imported
    except BaseException:
        _purge(root)
        raise
    return FacetGeneration(
        number=number, package=package, host=host, root=root, modules=names, facets=facets
    )


HOST_MODULES = frozenset({"session", "tui"})
"""Host kinds whose same-named top-level module a load for another host compiles but does not
import (see the module docstring)."""

IMPORT_ALL_HOSTS = frozenset({"session"})
"""Host kinds whose load imports every module of the package up front; a load for any other
host imports only the package, its plugin and its own host module, and compiles the rest (see
the module docstring)."""


def _import_all(package: FacetPackage, root: str, host: str, cache: CodeCache) -> tuple[str, ...]:
    """Import the package, its plugin module, then every other submodule but another host's
    (compiled only); for a host not in :data:`IMPORT_ALL_HOSTS`, only the package, the plugin
    and the host's own module (the rest compiled only). Return the names imported."""
    order = [package.package, package.plugin_module]
    order += sorted(_submodules(package.package_dir, package.package))
    others = {f"{package.package}.{kind}" for kind in HOST_MODULES if kind != host}
    if host not in IMPORT_ALL_HOSTS:
        wanted = {package.package, package.plugin_module, f"{package.package}.{host}"}
        others = {name for name in order if name not in wanted}
    seen: dict[str, None] = {}
    for name in order:
        if name in seen:
            continue
        try:
            if name in others:
                _compile_only(_module_path(package, name), cache)
                continue
            importlib.import_module(f"{root}.{name}")
        except Exception as error:
            raise FacetLoadError(
                f"facet package {package.name!r}: cannot import {name}: "
                f"{type(error).__name__}: {_describe(error, root)}",
                package=package.name,
                stage="import",
            ) from error
        seen[name] = None
    return tuple(seen)


def _compile_only(path: Path, cache: CodeCache) -> None:
    """Compile ``path`` (a module this host does not import up front) to fail the load on a
    syntax error."""
    if path.is_file():
        cache.check(path.read_bytes(), str(path))


def _module_path(package: FacetPackage, name: str) -> Path:
    """The source file of ``name``, a module or subpackage of ``package``."""
    path = package.package_dir.joinpath(*name.split(".")[1:])
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _imported_since(root: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """The generation's modules in ``sys.modules`` not in ``names`` (imported by the plugin as
    it made its facets), in import order."""
    prefix = root + "."
    known = set(names)
    return tuple(
        name[len(prefix) :]
        for name in list(sys.modules)
        if name.startswith(prefix) and name[len(prefix) :] not in known
    )


def _describe(error: BaseException, root: str) -> str:
    # Error texts mention generation module names; show the package's own names instead.
    return str(error).replace(root + ".", "")


def _submodules(directory: Path, dotted: str) -> Iterable[str]:
    """Dotted names of the ``.py`` modules and regular subpackages below ``directory``."""
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_dir():
            if entry.name.isidentifier() and (entry / "__init__.py").is_file():
                yield f"{dotted}.{entry.name}"
                yield from _submodules(entry, f"{dotted}.{entry.name}")
        elif (
            entry.suffix == ".py"
            and entry.stem.isidentifier()
            and entry.stem not in ("__init__", "__main__")
        ):
            yield f"{dotted}.{entry.stem}"


def _collect_facets(
    package: FacetPackage, plugin: types.ModuleType, host: str, number: int
) -> tuple[Facet, ...]:
    where = f"facet package {package.name!r} ({package.plugin_module})"

    def fail(message: str) -> FacetLoadError:
        return FacetLoadError(f"{where}: {message}", package=package.name, stage="plugin")

    target: object = plugin
    if package.plugin_attr is not None:
        for part in package.plugin_attr.split("."):
            try:
                target = getattr(target, part)
            except AttributeError:
                raise fail(f"has no attribute {package.plugin_attr!r}") from None
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    try:
        manager.register(target, name=f"{package.name}#{number}")
        manager.check_pending()
    except pluggy.PluginValidationError as error:
        raise fail(f"invalid hook implementation: {error}") from error
    if not manager.hook.chord_facets.get_hookimpls():
        raise fail("has no @hookimpl chord_facets(host) (from chord import hookimpl)")
    try:
        results: list[object] = manager.hook.chord_facets(host=host)
    except Exception as error:
        raise fail(f"chord_facets(host={host!r}) raised {type(error).__name__}: {error}") from error
    facets: list[Facet] = []
    for result in results:
        if result is None:
            continue
        if not isinstance(result, (list, tuple)):
            raise fail(f"chord_facets must return a list of facets, got {type(result).__name__}")
        for index, item in enumerate(result):  # pyright: ignore[reportUnknownVariableType]
            if not isinstance(item, Facet):
                raise fail(
                    f"chord_facets item {index} is not a Facet: {type(item).__name__}"  # pyright: ignore[reportUnknownArgumentType]
                )
            facets.append(item)
    return tuple(facets)


def load_facet_packages(packages: Iterable[FacetPackage], host: str) -> list[FacetGeneration]:
    """Load one generation of each package; if one fails, dispose those loaded and re-raise."""
    loaded: list[FacetGeneration] = []
    try:
        for package in packages:
            loaded.append(load_generation(package, host))
    except BaseException:
        for generation in reversed(loaded):
            generation.purge()
        raise
    return loaded


class _PackageLoader:
    __slots__ = ("_host", "_package")

    def __init__(self, package: FacetPackage, host: str) -> None:
        self._package = package
        self._host = host

    async def load(self) -> LoadedFacets:
        return load_generation(self._package, self._host).as_loaded()

    def __repr__(self) -> str:
        return f"package_facet_loader({self._package.name!r}, {self._host!r})"


def package_facet_loader(package: FacetPackage, host: str) -> FacetLoader:
    """A :class:`~chord.facets.loaders.FacetLoader` loading a fresh generation per ``load()``."""
    return _PackageLoader(package, host)
