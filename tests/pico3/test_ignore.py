"""pico3's one ``.gitignore`` walker (``pico3.walk_files``): git's rules, checked against git.

The same walker lists files for the coding agent's grep, find, ls and ``@file`` completion and for
the indexer's scan, so these tests pin the rules themselves: nested ``.gitignore`` files,
negation, folder patterns, the scope options, and agreement with ``git ls-files`` on random trees.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from pico3 import IgnoreRules, walk_files

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def make_tree(root: Path, files: dict[str, str]) -> None:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def listed(root: Path, **options: bool) -> list[str]:
    return sorted(walk_files(root, **options))


def git_listed(root: Path) -> list[str]:
    command = ["git", "-c", "core.excludesFile=/dev/null", "-C", str(root)]
    done = subprocess.run(
        [*command, "ls-files", "-co", "-z", "--exclude-standard"], capture_output=True, check=True
    )
    return sorted(p.decode() for p in done.stdout.split(b"\0") if p and not p.endswith(b"/"))


def test_a_deeper_gitignore_overrides_a_shallower_one_in_both_directions(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            ".gitignore": "*.gen\n",
            "lib/.gitignore": "!*.gen\nlocal.txt\n",
            "lib/a.gen": "",
            "lib/local.txt": "",
            "local.txt": "",
            "b.gen": "",
        },
    )
    assert listed(tmp_path) == [".gitignore", "lib/.gitignore", "lib/a.gen", "local.txt"]


def test_negation_re_includes_and_the_last_matching_pattern_wins(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {".gitignore": "*.log\n!keep.log\nkeep2.log\n!keep2.log\n*.tmp\n!*.tmp\nx.tmp\n"}
        | {name: "" for name in ("a.log", "keep.log", "keep2.log", "a.tmp", "x.tmp")},
    )
    assert listed(tmp_path) == [".gitignore", "a.tmp", "keep.log", "keep2.log"]


def test_folder_patterns_match_folders_only_and_an_ignored_folder_is_not_entered(
    tmp_path: Path,
) -> None:
    make_tree(
        tmp_path,
        {
            ".gitignore": "build/\nout/\n!out/keep.txt\n",
            "build/x": "",
            "src/build": "a file named build: build/ only matches folders",
            "out/keep.txt": "",
        },
    )
    assert listed(tmp_path) == [".gitignore", "src/build"]


def test_a_negated_folder_inside_an_ignored_tree_is_entered_and_its_files_decided(
    tmp_path: Path,
) -> None:
    make_tree(
        tmp_path,
        {
            ".gitignore": "keep/**\n!keep/sub/\n!keep/sub/ok.txt\n",
            "keep/k.txt": "",
            "keep/sub/ok.txt": "",
            "keep/sub/no.txt": "",
        },
    )
    assert listed(tmp_path) == [".gitignore", "keep/sub/ok.txt"]


def test_a_pattern_on_the_path_itself_beats_one_on_a_folder_above_it(tmp_path: Path) -> None:
    """``*`` + ``!*/``: every folder is entered, every file stays ignored; and a deeper file's
    re-inclusion of a *folder* does not re-include the files a shallower rule ignores."""
    make_tree(
        tmp_path,
        {
            "wl/.gitignore": "*\n!*/\n!*.py\n",
            "wl/a.py": "",
            "wl/a.txt": "",
            "wl/x/b.py": "",
            "wl/y/c.txt": "",
            ".gitignore": "*.txt\n",
            "x/.gitignore": "!sub/\n",
            "x/sub/f.txt": "",
            "x/sub/f.py": "",
        },
    )
    assert listed(tmp_path) == [
        ".gitignore",
        "wl/a.py",
        "wl/x/b.py",
        "x/.gitignore",
        "x/sub/f.py",
    ]


def test_double_star_slash_means_every_folder_below_not_the_folder_itself(tmp_path: Path) -> None:
    make_tree(tmp_path, {".gitignore": "a/**/\n", "a/f": "", "a/b/g": "", "c/.gitignore": "**/\n"})
    make_tree(tmp_path, {"c/f": "", "c/d/g": ""})
    assert listed(tmp_path) == [".gitignore", "a/f", "c/.gitignore", "c/f"]


def test_dot_git_is_never_listed_and_nested_repositories_are_a_choice(tmp_path: Path) -> None:
    make_tree(tmp_path, {".git/HEAD": "ref", "sub/.git": "gitdir: x", "sub/f": "", "f": ""})
    assert listed(tmp_path) == ["f", "sub/f"]
    assert listed(tmp_path, nested_repositories=False) == ["f"]


def test_the_ancestors_gitignore_files_apply_only_when_asked(tmp_path: Path) -> None:
    make_tree(tmp_path, {".gitignore": "*.log\n", "project/a.log": "", "project/b.txt": ""})
    project = tmp_path / "project"
    assert listed(project) == ["b.txt"]  # ripgrep's --no-require-git
    assert listed(project, ancestors=False) == ["a.log", "b.txt"]  # git ls-files from the top


def test_info_exclude_applies_below_every_gitignore(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {".git/info/exclude": "secret\n*.bak\n", ".gitignore": "!keep.bak\n"}
        | {name: "" for name in ("secret", "a.bak", "keep.bak", "plain")},
    )
    assert listed(tmp_path) == [".gitignore", "keep.bak", "plain"]
    assert IgnoreRules(tmp_path).ignored(tmp_path / "secret", is_dir=False)


def test_an_empty_dot_git_below_a_repository_leaves_its_info_exclude_in_force(
    tmp_path: Path,
) -> None:
    """An empty ``.git`` folder (the sandbox's placeholder in a session folder inside a
    repository, while a command runs) is no repository: the outer one's exclude still applies,
    as git still finds the outer repository."""
    make_tree(tmp_path, {".git/info/exclude": "*.bak\n", "sub/a.bak": "", "sub/f": ""})
    (tmp_path / "sub" / ".git").mkdir()
    assert listed(tmp_path / "sub") == ["f"]
    (tmp_path / "sub" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert listed(tmp_path / "sub") == ["a.bak", "f"]  # a repository of its own: its rules


def test_folder_names_with_glob_characters_are_taken_literally(tmp_path: Path) -> None:
    make_tree(tmp_path, {"[x]/.gitignore": "*.o\n", "[x]/a.o": "", "[x]/a.c": "", "x/a.o": ""})
    assert listed(tmp_path) == ["[x]/.gitignore", "[x]/a.c", "x/a.o"]


def test_a_pattern_pathspec_cannot_compile_is_skipped_like_git_skips_it(tmp_path: Path) -> None:
    make_tree(tmp_path, {".gitignore": "[z-a]\n*.log\n", "a.log": "", "z": ""})
    assert listed(tmp_path) == [".gitignore", "z"]


_PATTERNS = [
    "*", "!*/", "*.txt", "!*.txt", "a", "a/", "/a", "a/**", "**/b", "!b", "b/", "a/b", "!a/b/",
    "*/", "**/", "c*", "!c1", "a/*/c1", "?", "[ab]", "!/a", "x/**/c1", "**/a/**", "a/**/",
    "[!a]*", "b/**/", "\\!x", "c1 ", "a/b/**", "!a/", "!**/c1/", "x/", "!x/*", "*/b/", "/x/a",
]  # fmt: skip
_NAMES = ["a", "b", "c1", "x"]


@needs_git
@pytest.mark.parametrize("seed", range(40))
def test_the_walk_lists_what_git_lists_on_random_trees(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for _ in range(18):
        parts = [rnd.choice(_NAMES) for _ in range(rnd.randint(0, 3))]
        path = tmp_path.joinpath(*parts, rnd.choice(_NAMES) + rnd.choice(["", ".txt"]))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x")
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            pass  # the name is already taken by a file/folder of the other sort
    folders = [
        tmp_path,
        *sorted(p for p in tmp_path.rglob("*") if p.is_dir() and ".git" not in p.parts),
    ]
    for folder in rnd.sample(folders, min(3, len(folders))):
        lines = [rnd.choice(_PATTERNS) for _ in range(rnd.randint(1, 5))]
        (folder / ".gitignore").write_text("\n".join(lines) + "\n")
    expected = git_listed(tmp_path)
    assert listed(tmp_path, ancestors=False, nested_repositories=False) == expected
    assert listed(tmp_path) == expected  # no ignore file above tmp_path, no nested repository
