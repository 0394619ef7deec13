"""The compile cache of facet modules (docs/design/reload.md#generations): a load reuses a compile
only for the very same source text, from memory or from disk, and never serves stale code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from chord.facet_packages import (
    CodeCache,
    default_cache_dir,
    facet_package_from_folder,
    load_generation,
)
from chord.facet_packages.discovery import FacetPackage


def the_package(echo_package: Any) -> FacetPackage:
    (package,) = facet_package_from_folder(echo_package.project)
    return package


def answer(generation: Any, text: str = "x") -> str:
    return generation.module("echo_pkg.session")._Echo().answer(text)


def _entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.code"))


def test_an_unchanged_package_loads_from_the_cache_and_an_edit_misses(echo_package, tmp_path):
    cache = CodeCache(tmp_path / "code")
    package = the_package(echo_package)
    path = echo_package.set_behaviour("v1")
    first = load_generation(package, "session", code_cache=cache)
    compiled = cache.misses
    assert compiled >= 4 and cache.hits == 0  # __init__, plugin, session, behaviour, contract
    assert len(_entries(tmp_path / "code")) == compiled
    second = load_generation(package, "session", code_cache=cache)
    assert (cache.misses, cache.hits) == (compiled, compiled)
    # Same size and mtime, other bytes: a .pyc would be trusted; the hash is not fooled.
    stat = os.stat(path)
    echo_package.set_behaviour("v2")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    third = load_generation(package, "session", code_cache=cache)
    try:
        assert answer(first) == "v1:x" and answer(second) == "v1:x"
        assert answer(third) == "v2:x"
        assert cache.misses == compiled + 1  # behaviour.py alone
        assert not list(echo_package.source.rglob("__pycache__"))
    finally:
        for generation in (first, second, third):
            generation.purge()


def test_a_new_process_reuses_the_disk_entries(echo_package, tmp_path):
    # A fresh CodeCache on the same folder is a restarted worker: it compiles nothing.
    package = the_package(echo_package)
    echo_package.set_behaviour("v1")
    warm = CodeCache(tmp_path / "code")
    load_generation(package, "session", code_cache=warm).purge()
    restarted = CodeCache(tmp_path / "code")
    generation = load_generation(package, "session", code_cache=restarted)
    try:
        assert restarted.misses == 0 and restarted.hits == warm.misses
        assert answer(generation) == "v1:x"
    finally:
        generation.purge()


def test_a_corrupt_or_truncated_entry_is_recompiled_and_rewritten(tmp_path):
    directory = tmp_path / "code"
    source = b"VALUE = 'right'\n"
    CodeCache(directory).compile(source, "/pkg/mod.py")
    (entry,) = _entries(directory)
    good = entry.read_bytes()
    for damaged in (good[: len(good) // 2], good[:-1] + bytes([good[-1] ^ 1]), b"", b"x" * 80):
        entry.write_bytes(damaged)
        cache = CodeCache(directory)
        namespace: dict[str, Any] = {}
        exec(cache.compile(source, "/pkg/mod.py"), namespace)
        assert namespace["VALUE"] == "right"
        assert (cache.misses, cache.hits) == (1, 0)
        assert entry.read_bytes() == good


def test_the_key_covers_the_file_name_and_every_source_byte():
    key = CodeCache.key
    assert key(b"a = 1\n", "/p/m.py") != key(b"a = 2\n", "/p/m.py")
    assert key(b"a = 1\n", "/p/m.py") != key(b"a = 1\n", "/p/n.py")
    assert key(b"a = 1\n", "/p/m.py") != key(b"a = 1\n ", "/p/m.py")
    assert key(b"a = 1\n", "/p/m.py") == key(b"a = 1\n", "/p/m.py")
    cache = CodeCache(None)
    code = cache.compile(b"a = 1\n", "/p/m.py")
    assert code.co_filename == "/p/m.py"
    assert cache.compile(b"a = 1\n", "/p/n.py").co_filename == "/p/n.py"


def test_a_syntax_error_raises_and_is_not_cached(tmp_path):
    cache = CodeCache(tmp_path / "code")
    for _ in range(2):
        with pytest.raises(SyntaxError):
            cache.compile(b"def broken(:\n", "/p/m.py")
    assert cache.misses == 0 and _entries(tmp_path / "code") == []


def test_an_unwritable_folder_only_means_compiling(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = CodeCache(blocker / "code")
    namespace: dict[str, Any] = {}
    exec(cache.compile(b"VALUE = 3\n", "/p/m.py"), namespace)
    assert namespace["VALUE"] == 3 and cache.misses == 1


def test_the_folder_comes_from_the_environment(tmp_path):
    assert default_cache_dir({"CHORD_CODE_CACHE": str(tmp_path)}) == tmp_path
    assert default_cache_dir({"CHORD_CODE_CACHE": "off"}) is None
    assert default_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "chord" / "code"


def test_the_default_loader_uses_the_folder_the_environment_names(echo_package, tmp_path):
    # Two processes loading the same package: the second compiles nothing.
    script = textwrap.dedent(
        f"""
        import json
        from chord.facet_packages import facet_package_from_folder, load_generation
        from chord.facet_packages.codecache import shared_code_cache
        (package,) = facet_package_from_folder({str(echo_package.project)!r})
        load_generation(package, "session").purge()
        cache = shared_code_cache()
        print(json.dumps([cache.misses, cache.hits]))
        """
    )
    env = {**os.environ, "CHORD_CODE_CACHE": str(tmp_path / "code")}
    echo_package.set_behaviour("v1")
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    ]
    first, second = (json.loads(run) for run in runs)
    assert first[0] > 0 and first[1] == 0
    assert second == [0, first[0]]


def test_check_finds_a_syntax_error_and_loads_no_cached_code(tmp_path):
    """A module a host only checks (another host runs it) costs a hash and a lookup once it is
    cached: ``check`` never unmarshals it, and still raises a syntax error as ``compile`` does."""
    directory = tmp_path / "code"
    source, name = b"VALUE = 1\n", str(tmp_path / "checked.py")
    CodeCache(directory).check(source, name)  # compiled and written
    (entry,) = _entries(directory)
    entry.write_bytes(b"not marshal data")  # a load would see this and compile again
    fresh = CodeCache(directory)
    fresh.check(source, name)
    assert (fresh.hits, fresh.misses) == (1, 0)
    assert entry.read_bytes() == b"not marshal data"  # found, not read
    with pytest.raises(SyntaxError):
        fresh.check(b"def broken(:\n", name)
    assert fresh.misses == 0  # a failed compile is not counted or cached
    assert len(_entries(directory)) == 1
