"""facets_indexer.scan: git's view of a working tree, binary/size filters, stable batches.

The ignore rules themselves are pico3's walker's (``pico3.walk_files``), checked against git on
random trees in tests/pico3/test_ignore.py with the scope the scan uses; here the scan's own
choices are checked (no ancestors, no nested repositories, git's fast path equal to the walk)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from facets_indexer.scan import (
    SNIFF_BYTES,
    Batch,
    ScannedFile,
    batches_after,
    list_files,
    make_batches,
    read_batch,
    scan,
    scan_batches,
)

HAS_GIT = shutil.which("git") is not None
needs_git = pytest.mark.skipif(not HAS_GIT, reason="git is not installed")


def make_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)


# A tree exercising every rule the walk implements; EXPECTED is what `git ls-files -co
# --exclude-standard` prints for it (checked against git in test_git_fast_path_equals_walk).
TRICKY: dict[str, str | bytes] = {
    ".gitignore": (
        "# comments and blank lines are not patterns\n\n"
        "*.log\n!important.log\nbuild/\n/rootonly.txt\ndocs/*.md\n"
        "keep/**\n!keep/sub/\n!keep/sub/ok.txt\nnode_modules\n\\#hash\n"
    ),
    "a/.gitignore": "deep/\n!x.log\n",
    "wl/.gitignore": "*\n!*/\n!*.py\n",
    "a.log": "x",
    "important.log": "x",
    "a/x.log": "x",
    "a/y.log": "x",
    "a/deep/z.txt": "x",
    "a/b/z.txt": "x",
    "a/b/deep": "a file called deep is not a directory",
    "build/out.txt": "x",
    "src/build": "a file named build: build/ only matches directories",
    "rootonly.txt": "x",
    "a/rootonly.txt": "x",
    "docs/r.md": "x",
    "docs/x/r.md": "x",
    "keep/k.txt": "x",
    "keep/sub/ok.txt": "x",
    "keep/sub/no.txt": "x",
    "wl/a.py": "x",
    "wl/a.txt": "x",
    "wl/x/b.py": "x",
    "wl/y/c.txt": "x",
    "#hash": "x",
    "node_modules/pkg/index.js": "x",
    "secret": "x",
    "a/secret": "x",
    "plain.txt": "x",
}
EXPECTED = [
    ".gitignore",
    "a/.gitignore",
    "a/b/deep",
    "a/b/z.txt",
    "a/rootonly.txt",
    "a/x.log",
    "docs/x/r.md",
    "important.log",
    "keep/sub/ok.txt",
    "plain.txt",
    "src/build",
    "wl/a.py",
    "wl/x/b.py",
]


def make_tricky(root: Path) -> None:
    make_tree(root, TRICKY)
    info = root / ".git" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "exclude").write_text("secret\n")


def test_walk_applies_nested_gitignores_negation_directory_patterns_and_info_exclude(
    tmp_path: Path,
) -> None:
    make_tricky(tmp_path)
    assert list_files(tmp_path, use_git=False) == EXPECTED


def test_walk_never_lists_dot_git(tmp_path: Path) -> None:
    make_tree(
        tmp_path, {".git/HEAD": "ref", ".git/objects/ab": "x", "sub/.git": "gitdir: x", "f": "x"}
    )
    # sub/ holds a .git entry, so it is a nested repository and is not part of this tree
    assert list_files(tmp_path, use_git=False) == ["f"]


def test_excluded_directory_cannot_be_reincluded(tmp_path: Path) -> None:
    make_tree(tmp_path, {".gitignore": "out/\n!out/keep.txt\n", "out/keep.txt": "x", "k": "x"})
    assert list_files(tmp_path, use_git=False) == [".gitignore", "k"]


def test_deeper_gitignore_overrides_shallower(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {".gitignore": "*.gen\n", "lib/.gitignore": "!*.gen\n", "lib/a.gen": "x", "b.gen": "x"},
    )
    assert list_files(tmp_path, use_git=False) == [".gitignore", "lib/.gitignore", "lib/a.gen"]


def test_list_files_rejects_a_missing_root(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError, match="not a directory"):
        list_files(tmp_path / "missing")


def test_use_git_true_without_a_repository_is_an_error(tmp_path: Path) -> None:
    make_tree(tmp_path, {"f": "x"})
    with pytest.raises(RuntimeError, match="git cannot list"):
        list_files(tmp_path, use_git=True)


@needs_git
def test_git_fast_path_equals_walk(tmp_path: Path) -> None:
    git_init(tmp_path)
    make_tricky(tmp_path)
    assert list_files(tmp_path, use_git=True) == EXPECTED
    assert list_files(tmp_path, use_git=False) == EXPECTED
    assert scan(tmp_path, use_git=True) == scan(tmp_path, use_git=False)


# --- filters ----------------------------------------------------------------------------------


def test_scan_skips_binary_large_and_symlinked_files(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            "text.py": "print('hi')\n",
            "nul_early.bin": b"abc\0def",
            "nul_late.txt": b"a" * (SNIFF_BYTES + 10) + b"\0",  # past the sniff window: kept
            "exact.txt": "x" * 100,
            "big.txt": "x" * 101,
        },
    )
    os.symlink(tmp_path / "text.py", tmp_path / "link.py")
    got = scan(tmp_path, max_file_bytes=SNIFF_BYTES + 100, use_git=False)
    assert [f.path for f in got] == ["big.txt", "exact.txt", "nul_late.txt", "text.py"]
    small = scan(tmp_path, max_file_bytes=100, use_git=False)
    assert [f.path for f in small] == ["exact.txt", "text.py"]


def test_scan_records_size_and_mtime(tmp_path: Path) -> None:
    make_tree(tmp_path, {"f.txt": "hello"})
    os.utime(tmp_path / "f.txt", ns=(1_000_000_000, 2_000_000_123))
    assert scan(tmp_path, use_git=False) == [ScannedFile("f.txt", 5, 2_000_000_123)]


def test_scan_rejects_negative_size_limit(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_file_bytes"):
        scan(tmp_path, max_file_bytes=-1)


def test_default_limit_is_one_mebibyte(tmp_path: Path) -> None:
    make_tree(tmp_path, {"ok.txt": "x" * (1 << 20), "too_big.txt": "x" * ((1 << 20) + 1)})
    assert [f.path for f in scan(tmp_path, use_git=False)] == ["ok.txt"]


# --- batches ------------------------------------------------------------------------------------


def tree_of(n: int, root: Path) -> None:
    make_tree(root, {f"src/m{i:03d}.py": f"value = {i}\n" for i in range(n)})
    for i in range(n):
        os.utime(root / f"src/m{i:03d}.py", ns=(10**18, 10**18 + i))


def test_batches_have_fixed_size_ordinals_and_sorted_files(tmp_path: Path) -> None:
    tree_of(10, tmp_path)
    batches = scan_batches(tmp_path, batch_size=4, use_git=False)
    assert [b.ordinal for b in batches] == [0, 1, 2]
    assert [len(b.files) for b in batches] == [4, 4, 2]
    flat = [f.path for b in batches for f in b.files]
    assert flat == sorted(flat) == [f"src/m{i:03d}.py" for i in range(10)]
    assert all(b.key.startswith(f"{b.ordinal:06d}-") for b in batches)
    assert len({b.key for b in batches}) == 3


def test_unchanged_tree_gives_the_same_batch_keys(tmp_path: Path) -> None:
    tree_of(10, tmp_path)
    first = scan_batches(tmp_path, batch_size=4, use_git=False)
    again = scan_batches(tmp_path, batch_size=4, use_git=False)
    assert first == again


def test_changing_a_file_changes_only_its_batch_key(tmp_path: Path) -> None:
    tree_of(10, tmp_path)
    before = [b.key for b in scan_batches(tmp_path, batch_size=4, use_git=False)]
    (tmp_path / "src/m005.py").write_text("value = 'changed and longer'\n")
    after = [b.key for b in scan_batches(tmp_path, batch_size=4, use_git=False)]
    assert after[0] == before[0] and after[2] == before[2]
    assert after[1] != before[1]


def test_touching_a_file_changes_its_batch_key(tmp_path: Path) -> None:
    tree_of(4, tmp_path)
    before = scan_batches(tmp_path, batch_size=4, use_git=False)[0].key
    os.utime(tmp_path / "src/m002.py", ns=(10**18, 10**18 + 999))
    assert scan_batches(tmp_path, batch_size=4, use_git=False)[0].key != before


def test_make_batches_rejects_a_zero_batch_size() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        make_batches([], batch_size=0)


def test_empty_tree_has_no_batches(tmp_path: Path) -> None:
    assert scan_batches(tmp_path, use_git=False) == []


def test_batches_after_resumes_after_the_cursor(tmp_path: Path) -> None:
    tree_of(10, tmp_path)
    batches = scan_batches(tmp_path, batch_size=4, use_git=False)
    assert batches_after(batches, None) == batches
    assert batches_after(batches, batches[0].key) == batches[1:]
    assert batches_after(batches, batches[2].key) == []


def test_batches_after_an_unknown_cursor_starts_over(tmp_path: Path) -> None:
    tree_of(10, tmp_path)
    batches = scan_batches(tmp_path, batch_size=4, use_git=False)
    stale = Batch(1, "000001-0000", ()).key
    assert batches_after(batches, stale) == batches


def test_read_batch_decodes_text_and_skips_vanished_files(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a.txt": "héllo\n", "b.txt": b"bad \xff byte", "c.txt": "gone"})
    (batch,) = scan_batches(tmp_path, use_git=False)
    (tmp_path / "c.txt").unlink()
    assert read_batch(tmp_path, batch) == [("a.txt", "héllo\n"), ("b.txt", "bad \ufffd byte")]


@needs_git
def test_a_subfolder_of_a_repository_is_walked_not_listed_by_git(tmp_path: Path) -> None:
    git_init(tmp_path)
    make_tree(tmp_path, {".gitignore": "*.tmp\n", "sub/a.tmp": "x", "sub/b.txt": "x"})
    # the walk starts at sub/ and does not read the repository's root .gitignore
    assert list_files(tmp_path / "sub") == ["a.tmp", "b.txt"]
    with pytest.raises(RuntimeError, match="git cannot list"):
        list_files(tmp_path / "sub", use_git=True)


@needs_git
def test_git_fast_path_keeps_tracked_files_that_a_pattern_matches(tmp_path: Path) -> None:
    git_init(tmp_path)
    make_tree(tmp_path, {"tracked.log": "x", "new.log": "x"})
    subprocess.run(["git", "-C", str(tmp_path), "add", "tracked.log"], check=True)
    (tmp_path / ".gitignore").write_text("*.log\n")
    assert list_files(tmp_path, use_git=True) == [".gitignore", "tracked.log"]
    assert list_files(tmp_path, use_git=False) == [".gitignore"]
