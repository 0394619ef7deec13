"""grep, find and ls (docs/design/agent.md#grep-find-ls), each with ripgrep and with the pure-Python fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_agent.worker.tools import FIND_TOOL, GREP_TOOL, LS_TOOL, ToolContext
from coding_agent.worker.tools.search import ripgrep_path

BACKENDS = [
    pytest.param(
        "ripgrep",
        marks=pytest.mark.skipif(ripgrep_path() is None, reason="rg is not installed"),
    ),
    "python",
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small project: root and nested .gitignore (with a negation), hidden files, .git."""
    root = tmp_path / "repo"
    files = {
        ".gitignore": "build/\n*.log\n!keep.log\n",
        ".env": "TOKEN=needle\n",
        "README.md": "A needle in the readme\n",
        "src/app.py": "import os\n\ndef needle():\n    return 'Needle'\n",
        "src/util.py": "x = 1\n",
        "src/gen/.gitignore": "*.gen.py\n",
        "src/gen/a.gen.py": "needle = 'generated'\n",
        "src/gen/b.py": "needle = 'kept'\n",
        "build/out.py": "needle = 'built'\n",
        "debug.log": "needle in a log\n",
        "keep.log": "needle in a kept log\n",
        "node_modules/pkg/index.js": "needle();\n",
        ".git/config": "needle in git internals\n",
        "docs/Guide.md": "guide\n",
        "docs/api.md": "api\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def context(root: Path, backend: str) -> ToolContext:
    return ToolContext(cwd=root, search_backend=backend)  # type: ignore[arg-type]


# -- grep ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_grep_respects_gitignore_and_searches_hidden_files(repo: Path, backend: str) -> None:
    result = await GREP_TOOL.execute({"pattern": "needle"}, context(repo, backend))
    assert not result.is_error
    assert result.details["backend"] == backend
    assert result.plain_text.split("\n") == [
        ".env:1: TOKEN=needle",
        "README.md:1: A needle in the readme",
        "keep.log:1: needle in a kept log",
        "node_modules/pkg/index.js:1: needle();",
        "src/app.py:3: def needle():",
        "src/gen/b.py:1: needle = 'kept'",
    ]


@pytest.mark.anyio
async def test_grep_context_lines_use_dashes(repo: Path, backend: str) -> None:
    result = await GREP_TOOL.execute(
        {"pattern": "def needle", "path": "src", "context": 1}, context(repo, backend)
    )
    assert result.plain_text.split("\n") == [
        "app.py-2- ",
        "app.py:3: def needle():",
        "app.py-4-     return 'Needle'",
    ]


@pytest.mark.anyio
async def test_grep_ignore_case_literal_and_glob(repo: Path, backend: str) -> None:
    tools = context(repo, backend)
    folded = await GREP_TOOL.execute(
        {"pattern": "NEEDLE", "ignoreCase": True, "glob": "*.py"}, tools
    )
    assert folded.plain_text.split("\n") == [
        "src/app.py:3: def needle():",
        "src/app.py:4:     return 'Needle'",
        "src/gen/b.py:1: needle = 'kept'",
    ]
    literal = await GREP_TOOL.execute({"pattern": "needle();", "literal": True}, tools)
    assert literal.plain_text == "node_modules/pkg/index.js:1: needle();"


@pytest.mark.anyio
async def test_grep_limit_notice_suggests_a_bigger_limit(repo: Path, backend: str) -> None:
    result = await GREP_TOOL.execute({"pattern": "needle", "limit": 2}, context(repo, backend))
    body, notice = result.plain_text.rsplit("\n\n", 1)
    assert body.split("\n") == [".env:1: TOKEN=needle", "README.md:1: A needle in the readme"]
    assert notice == "[2 matches limit reached. Use limit=4 for more, or refine pattern]"
    assert result.details["match_limit_reached"] == 2


@pytest.mark.anyio
async def test_grep_cuts_long_lines_and_says_so(tmp_path: Path, backend: str) -> None:
    (tmp_path / "wide.txt").write_text("needle" + "x" * 1000 + "\n")
    result = await GREP_TOOL.execute({"pattern": "needle"}, context(tmp_path, backend))
    line, notice = result.plain_text.split("\n\n")
    assert line == "wide.txt:1: needle" + "x" * 494 + "... [truncated]"
    assert notice == "[Some lines truncated to 500 chars. Use read tool to see full lines]"


@pytest.mark.anyio
async def test_grep_output_is_capped_at_50kb(tmp_path: Path, backend: str) -> None:
    (tmp_path / "many.txt").write_text(("needle " + "y" * 400 + "\n") * 300)
    result = await GREP_TOOL.execute(
        {"pattern": "needle", "limit": 1000}, context(tmp_path, backend)
    )
    body, notice = result.plain_text.split("\n\n")
    assert len(body.encode()) <= 50 * 1024
    assert notice == "[50.0KB limit reached]"


@pytest.mark.anyio
async def test_grep_over_a_folder_does_not_follow_a_link_to_a_file_outside(
    tmp_path: Path, backend: str
) -> None:
    """A cloned repository links a file to your keys: a search of the project (which asks
    nobody) must not read through the link, with either backend (ripgrep follows none)."""
    keys = tmp_path / "home" / ".config" / "coding-agent" / "config.toml"
    keys.parent.mkdir(parents=True)
    keys.write_text('api_key = "sk-needle"\n')
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.md").write_text("a needle here\n")
    (project / "leak.txt").symlink_to(keys)
    result = await GREP_TOOL.execute({"pattern": "needle"}, context(project, backend))
    assert result.plain_text == "notes.md:1: a needle here"
    one = await GREP_TOOL.execute(
        {"pattern": "needle", "path": "notes.md"}, context(project, backend)
    )
    assert one.plain_text == "notes.md:1: a needle here"


@pytest.mark.anyio
async def test_grep_single_file_no_match_and_bad_regex(repo: Path, backend: str) -> None:
    tools = context(repo, backend)
    one = await GREP_TOOL.execute({"pattern": "needle", "path": "build/out.py"}, tools)
    assert (
        one.plain_text == "out.py:1: needle = 'built'"
    )  # an explicit path is searched even if ignored
    none = await GREP_TOOL.execute({"pattern": "haystack"}, tools)
    assert none.plain_text == "No matches found" and not none.is_error
    bad = await GREP_TOOL.execute({"pattern": "(unclosed"}, tools)
    assert bad.is_error and bad.plain_text.startswith("grep failed:")
    missing = await GREP_TOOL.execute({"pattern": "x", "path": "nowhere"}, tools)
    assert missing.is_error and missing.plain_text == "Path not found: nowhere"


# -- find ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_find_respects_gitignore_and_skips_node_modules(repo: Path, backend: str) -> None:
    result = await FIND_TOOL.execute({"pattern": "*.py"}, context(repo, backend))
    assert result.plain_text.split("\n") == ["src/app.py", "src/gen/b.py", "src/util.py"]
    logs = await FIND_TOOL.execute({"pattern": "*.log"}, context(repo, backend))
    assert logs.plain_text == "keep.log"
    js = await FIND_TOOL.execute({"pattern": "*.js"}, context(repo, backend))
    assert js.plain_text == "No files found matching pattern"


@pytest.mark.anyio
async def test_find_anchored_glob_hidden_files_and_sub_path(repo: Path, backend: str) -> None:
    tools = context(repo, backend)
    anchored = await FIND_TOOL.execute({"pattern": "src/gen/*"}, tools)
    assert anchored.plain_text.split("\n") == ["src/gen/.gitignore", "src/gen/b.py"]
    hidden = await FIND_TOOL.execute({"pattern": ".env"}, tools)
    assert hidden.plain_text == ".env"
    sub = await FIND_TOOL.execute({"pattern": "*.md", "path": "docs"}, tools)
    assert sub.plain_text.split("\n") == ["Guide.md", "api.md"]


@pytest.mark.anyio
async def test_find_limit_notice(repo: Path, backend: str) -> None:
    result = await FIND_TOOL.execute({"pattern": "*", "limit": 3}, context(repo, backend))
    body, notice = result.plain_text.split("\n\n")
    assert len(body.split("\n")) == 3
    assert notice == "[3 results limit reached. Use limit=6 for more, or refine pattern]"


@pytest.mark.anyio
async def test_find_on_a_file_is_an_error(repo: Path, backend: str) -> None:
    result = await FIND_TOOL.execute({"pattern": "*", "path": "README.md"}, context(repo, backend))
    assert result.is_error and result.plain_text == "Not a directory: README.md"


def test_both_backends_agree_on_the_fixture(repo: Path) -> None:
    if ripgrep_path() is None:
        pytest.skip("rg is not installed")
    import anyio

    async def both(spec_args: dict[str, object], spec: object) -> list[str]:
        texts = []
        for backend in ("ripgrep", "python"):
            result = await spec.execute(spec_args, context(repo, backend))  # type: ignore[attr-defined]
            texts.append(result.plain_text)
        return texts

    for spec, args in [
        (GREP_TOOL, {"pattern": "e", "context": 2}),
        (FIND_TOOL, {"pattern": "*"}),
        (FIND_TOOL, {"pattern": "**/*.md"}),
    ]:
        rg_text, py_text = anyio.run(both, args, spec)
        assert rg_text == py_text


# -- ls --------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_ls_sorts_case_insensitively_marks_folders_and_counts_ignored(
    repo: Path, backend: str
) -> None:
    result = await LS_TOOL.execute({}, context(repo, backend))
    assert result.plain_text == (
        ".env\n.gitignore\ndocs/\nkeep.log\nnode_modules/\nREADME.md\nsrc/\n\n"
        "[3 ignored entries not shown (.gitignore)]"  # .git, build/, debug.log
    )
    docs = await LS_TOOL.execute({"path": "docs"}, context(repo, backend))
    assert docs.plain_text == "api.md\nGuide.md"


@pytest.mark.anyio
async def test_ls_nested_gitignore_empty_folder_and_limit(repo: Path, backend: str) -> None:
    tools = context(repo, backend)
    gen = await LS_TOOL.execute({"path": "src/gen"}, tools)
    assert gen.plain_text == ".gitignore\nb.py\n\n[1 ignored entry not shown (.gitignore)]"
    (repo / "empty").mkdir()
    empty = await LS_TOOL.execute({"path": "empty"}, tools)
    assert empty.plain_text == "(empty directory)"
    limited = await LS_TOOL.execute({"path": "docs", "limit": 1}, tools)
    assert limited.plain_text == "api.md\n\n[1 entries limit reached. Use limit=2 for more]"


@pytest.mark.anyio
async def test_ls_errors_name_the_path(repo: Path, backend: str) -> None:
    tools = context(repo, backend)
    missing = await LS_TOOL.execute({"path": "nope"}, tools)
    assert missing.is_error and missing.plain_text == "Path not found: nope"
    a_file = await LS_TOOL.execute({"path": "README.md"}, tools)
    assert a_file.is_error and a_file.plain_text == "Not a directory: README.md"


@pytest.mark.anyio
async def test_gitignore_files_of_parent_folders_apply(tmp_path: Path, backend: str) -> None:
    outer = tmp_path / "outer"
    (outer / "proj" / "sub").mkdir(parents=True)
    (outer / ".gitignore").write_text("*.txt\n")
    (outer / "proj" / ".git").mkdir()
    (outer / "proj" / ".gitignore").write_text("*.tmp\n!keep.tmp\n")
    for name in ("a.txt", "b.tmp", "keep.tmp", "c.py"):
        (outer / "proj" / "sub" / name).write_text("x\n")
    tools = context(outer / "proj" / "sub", backend)
    found = await FIND_TOOL.execute({"pattern": "*"}, tools)
    assert found.plain_text.split("\n") == ["c.py", "keep.tmp"]
    listed = await LS_TOOL.execute({}, tools)
    assert listed.plain_text == "c.py\nkeep.tmp\n\n[2 ignored entries not shown (.gitignore)]"
