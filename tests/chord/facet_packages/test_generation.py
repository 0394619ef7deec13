"""Per-generation import of facet packages (docs/design/reload.md#generations, docs/design/decisions.md#d7)."""

from __future__ import annotations

import gc
import importlib
import os
import sys
import weakref
from typing import Any

import pytest

from chord.facet_packages import (
    FacetLoadError,
    facet_package_from_folder,
    load_facet_packages,
    load_generation,
    package_facet_loader,
)
from chord.facet_packages.discovery import FacetPackage
from chord.facet_packages.generation import GENERATION_PREFIX
from chord.facets import Facet


def the_package(echo_package: Any) -> FacetPackage:
    (package,) = facet_package_from_folder(echo_package.project)
    return package


def generation_modules() -> list[str]:
    return [name for name in sys.modules if name.startswith(GENERATION_PREFIX)]


def answer(generation: Any, text: str = "x") -> str:
    return generation.module("echo_pkg.session")._Echo().answer(text)


@pytest.fixture(autouse=True)
def no_generation_left_behind() -> Any:
    before = set(generation_modules())
    yield
    leaked = set(generation_modules()) - before
    assert not leaked, f"generation modules left in sys.modules: {sorted(leaked)}"


def test_the_package_and_every_submodule_load_under_generation_unique_names(echo_package):
    echo_package.write("extra/__init__.py", "")
    echo_package.write("extra/unused.py", "LOADED = True\n")
    generation = load_generation(the_package(echo_package), "session")
    try:
        assert generation.root.startswith(GENERATION_PREFIX)
        assert set(generation.modules) == {
            "echo_pkg",
            "echo_pkg.plugin",
            "echo_pkg.behaviour",
            "echo_pkg.contract",
            "echo_pkg.session",
            "echo_pkg.extra",
            "echo_pkg.extra.unused",
        }
        module = generation.module("echo_pkg.extra.unused")
        assert module.__name__ == f"{generation.root}.echo_pkg.extra.unused"
        assert module.LOADED is True
        assert [facet.id for facet in generation.facets] == ["test/echo"]
        assert all(isinstance(facet, Facet) for facet in generation.facets)
        assert answer(generation) == "v1:x"
    finally:
        generation.purge()


def test_facets_are_collected_for_the_requested_host_kind_only(echo_package):
    generation = load_generation(the_package(echo_package), "tui")
    try:
        assert generation.facets == ()
        assert generation.host == "tui"
    finally:
        generation.purge()


def test_two_generations_live_side_by_side_and_each_keeps_its_own_code(echo_package):
    package = the_package(echo_package)
    first = load_generation(package, "session")
    echo_package.set_behaviour("v2")
    second = load_generation(package, "session")
    try:
        assert first.number != second.number
        assert (answer(first), answer(second)) == ("v1:x", "v2:x")
        first.purge()
        assert answer(second) == "v2:x"
    finally:
        first.purge()
        second.purge()


def test_the_installed_copy_of_the_package_is_never_touched(echo_package, monkeypatch):
    monkeypatch.syspath_prepend(str(echo_package.project / "src"))
    installed = importlib.import_module("echo_pkg.session")
    try:
        echo_package.set_behaviour("v2")
        generation = load_generation(the_package(echo_package), "session")
        try:
            assert sys.modules["echo_pkg.session"] is installed
            assert installed._Echo().answer("x") == "v1:x"
            assert answer(generation) == "v2:x"
            assert generation.module("echo_pkg.session") is not installed
        finally:
            generation.purge()
        assert sys.modules["echo_pkg.session"] is installed
    finally:
        for name in [n for n in sys.modules if n == "echo_pkg" or n.startswith("echo_pkg.")]:
            del sys.modules[name]


def test_absolute_imports_of_the_own_package_resolve_inside_the_generation(echo_package):
    # Top-level absolute imports, and one run lazily inside a function after loading.
    echo_package.write(
        "absolute.py",
        """\
        import echo_pkg.behaviour
        from echo_pkg import behaviour as aliased
        from echo_pkg.contract import Echo


        def lazy():
            import echo_pkg.behaviour as late
            from echo_pkg.behaviour import answer

            return late, answer
        """,
    )
    generation = load_generation(the_package(echo_package), "session")
    try:
        module = generation.module("echo_pkg.absolute")
        own = generation.module("echo_pkg.behaviour")
        assert module.echo_pkg is generation.module("echo_pkg")
        assert module.echo_pkg.behaviour is own
        assert module.aliased is own
        assert module.Echo is generation.module("echo_pkg.contract").Echo
        late, function = module.lazy()
        assert late is own
        assert function is own.answer
        assert "echo_pkg" not in sys.modules
    finally:
        generation.purge()


def test_sources_are_compiled_fresh_even_when_size_and_mtime_are_unchanged(echo_package):
    # A bytecode cache would hand back v1: same size, same mtime (docs/design/reload.md#generations).
    package = the_package(echo_package)
    path = echo_package.set_behaviour("v1")
    first = load_generation(package, "session")
    stat = os.stat(path)
    echo_package.set_behaviour("v2")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second = load_generation(package, "session")
    try:
        assert answer(second) == "v2:x"
        assert not list(echo_package.source.rglob("__pycache__"))
        assert second.module("echo_pkg.behaviour").__cached__ is None
    finally:
        first.purge()
        second.purge()


def test_a_syntax_error_in_any_submodule_fails_the_load_and_leaves_no_module(echo_package):
    echo_package.write("unused_by_anyone.py", "def broken(:\n")
    with pytest.raises(FacetLoadError) as caught:
        load_generation(the_package(echo_package), "session")
    assert caught.value.stage == "import"
    assert caught.value.package == "echo"
    assert "echo_pkg.unused_by_anyone" in str(caught.value)
    assert "SyntaxError" in str(caught.value)
    assert isinstance(caught.value.__cause__, SyntaxError)
    assert generation_modules() == []


def test_an_import_time_exception_fails_the_load_with_the_module_named(echo_package):
    echo_package.write("behaviour.py", "raise LookupError('no such thing')\n")
    with pytest.raises(FacetLoadError, match=r"cannot import echo_pkg\.\w+: LookupError"):
        load_generation(the_package(echo_package), "session")
    assert generation_modules() == []


def test_another_hosts_module_is_compiled_but_not_imported(echo_package):
    """A session host does not run ``tui.py`` (a worker would import Textual for nothing) but
    still fails the load on its syntax error; the TUI host imports it."""
    echo_package.write("tui.py", "raise LookupError('imported by the session host')\n")
    generation = load_generation(the_package(echo_package), "session")
    try:
        assert "echo_pkg.tui" not in generation.modules
        assert f"{generation.root}.echo_pkg.tui" not in sys.modules
    finally:
        generation.purge()
    with pytest.raises(FacetLoadError, match=r"cannot import echo_pkg\.tui: LookupError"):
        load_generation(the_package(echo_package), "tui")
    echo_package.write("tui.py", "def broken(:\n")
    with pytest.raises(FacetLoadError) as caught:
        load_generation(the_package(echo_package), "session")
    assert isinstance(caught.value.__cause__, SyntaxError)
    assert generation_modules() == []


def test_a_tui_host_imports_only_what_its_facets_use_and_compiles_the_rest(echo_package):
    """A UI host pays only for its own facets: a module neither its plugin nor its host module
    imports (the session side's tools, say) is compiled, not run, so a syntax error there still
    fails the load; the session host imports it, and fails on its import error."""
    echo_package.write("tui.py", "from .contract import Echo\nTUI = True\n")
    echo_package.write("tools/__init__.py", "")
    echo_package.write("tools/heavy.py", "raise LookupError('run by the tui host')\n")
    generation = load_generation(the_package(echo_package), "tui")
    try:
        assert set(generation.modules) == {
            "echo_pkg",
            "echo_pkg.plugin",
            "echo_pkg.session",  # the plugin imports it
            "echo_pkg.behaviour",
            "echo_pkg.contract",
            "echo_pkg.tui",
        }
        assert generation.module("echo_pkg.tui").TUI is True
        assert f"{generation.root}.echo_pkg.tools" not in sys.modules
        assert f"{generation.root}.echo_pkg.tools.heavy" not in sys.modules
    finally:
        generation.purge()
    with pytest.raises(FacetLoadError, match=r"cannot import echo_pkg\.tools\.heavy: LookupError"):
        load_generation(the_package(echo_package), "session")
    echo_package.write("tools/heavy.py", "def broken(:\n")
    with pytest.raises(FacetLoadError) as caught:
        load_generation(the_package(echo_package), "tui")
    assert isinstance(caught.value.__cause__, SyntaxError)
    assert generation_modules() == []


def test_a_plugin_module_without_the_hook_is_a_plugin_error(echo_package):
    echo_package.write("plugin.py", "from .session import session_facet\n")
    with pytest.raises(FacetLoadError, match="has no @hookimpl chord_facets") as caught:
        load_generation(the_package(echo_package), "session")
    assert caught.value.stage == "plugin"
    assert generation_modules() == []


def test_a_misspelt_hook_is_a_plugin_error(echo_package):
    echo_package.write(
        "plugin.py",
        """\
        from chord import hookimpl

        @hookimpl
        def chord_facet(host):
            return []
        """,
    )
    with pytest.raises(FacetLoadError, match="unknown hook 'chord_facet'"):
        load_generation(the_package(echo_package), "session")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("return 'test/echo'", "must return a list of facets, got str"),
        ("return [object()]", "item 0 is not a Facet: object"),
        ("raise RuntimeError('boom')", "raised RuntimeError: boom"),
    ],
)
def test_a_bad_hook_result_is_a_plugin_error(echo_package, body, message):
    echo_package.write(
        "plugin.py",
        f"from chord import hookimpl\n\n@hookimpl\ndef chord_facets(host):\n    {body}\n",
    )
    with pytest.raises(FacetLoadError, match=message) as caught:
        load_generation(the_package(echo_package), "session")
    assert caught.value.stage == "plugin"
    assert generation_modules() == []


def test_a_disposed_generation_is_collected_and_its_late_imports_fail(echo_package):
    echo_package.write("lazy.py", "def later():\n    from . import not_yet\n    return not_yet\n")
    generation = load_generation(the_package(echo_package), "session")
    later = generation.module("echo_pkg.lazy").later
    module = weakref.ref(generation.module("echo_pkg.behaviour"))
    setup = weakref.ref(generation.facets[0].setup)
    generation.purge()
    assert generation.disposed and generation.facets == ()
    echo_package.write("not_yet.py", "")
    with pytest.raises(ModuleNotFoundError):
        later()  # a retired generation never re-imports anything
    del later
    del generation
    gc.collect()
    assert module() is None
    assert setup() is None


def test_module_lookup_names_the_problem(echo_package):
    generation = load_generation(the_package(echo_package), "session")
    with pytest.raises(KeyError, match=r"'echo_pkg\.nope' is not a module of facet package 'echo'"):
        generation.module("echo_pkg.nope")
    generation.purge()
    with pytest.raises(RuntimeError, match="is disposed"):
        generation.module("echo_pkg")


def test_an_entry_point_attribute_names_the_object_carrying_the_hooks(echo_package):
    echo_package.write(
        "plugin.py",
        """\
        from chord import hookimpl

        from .session import session_facet


        class _Plugin:
            @hookimpl
            def chord_facets(self, host):
                return [session_facet]


        plugin = _Plugin()
        """,
    )
    package = the_package(echo_package)
    with_attr = FacetPackage(
        name=package.name,
        plugin_module=package.plugin_module,
        plugin_attr="plugin",
        package=package.package,
        package_dir=package.package_dir,
    )
    generation = load_generation(with_attr, "session")
    try:
        assert [facet.id for facet in generation.facets] == ["test/echo"]
    finally:
        generation.purge()
    missing = FacetPackage(
        name=package.name,
        plugin_module=package.plugin_module,
        plugin_attr="nope",
        package=package.package,
        package_dir=package.package_dir,
    )
    with pytest.raises(FacetLoadError, match="has no attribute 'nope'"):
        load_generation(missing, "session")


def test_loading_several_packages_is_all_or_nothing(make_echo_package):
    good = make_echo_package("good")
    bad = make_echo_package("bad")
    bad.write("behaviour.py", "def broken(:\n")
    (good_package,) = facet_package_from_folder(good.project)
    (bad_package,) = facet_package_from_folder(bad.project)
    with pytest.raises(FacetLoadError):
        load_facet_packages([good_package, bad_package], "session")
    assert generation_modules() == []
    (loaded,) = load_facet_packages([good_package], "session")
    loaded.purge()


@pytest.mark.anyio
async def test_the_facet_loader_protocol_yields_fresh_generations(echo_package):
    loader = package_facet_loader(the_package(echo_package), "session")
    first = await loader.load()
    echo_package.set_behaviour("v2")
    second = await loader.load()
    assert first.facets[0] is not second.facets[0]
    assert [f.id for f in first.facets] == [f.id for f in second.facets] == ["test/echo"]
    await first.dispose()
    await second.dispose()
    await second.dispose()  # idempotent
