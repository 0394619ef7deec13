"""facets_indexer.store: idempotent atomic batches, pruning, safe FTS5 search, async wrapper."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from facets_indexer.store import (
    HIGHLIGHT_CLOSE,
    HIGHLIGHT_OPEN,
    AsyncIndexStore,
    IndexStats,
    IndexStore,
    QueryError,
    fts_query,
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[IndexStore]:
    with IndexStore.open(tmp_path / "index.sqlite3") as s:
        yield s


# --- writing ------------------------------------------------------------------------------------


def test_open_creates_the_schema_and_reopen_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    with IndexStore.open(path) as s:
        assert s.stats() == IndexStats(files=0, batches=0, lines=0)
        assert s.write_batch("b0", [("a.py", "x = 1\n")])
    with IndexStore.open(path) as s:
        assert s.stats() == IndexStats(files=1, batches=1, lines=1)
        assert s.has_batch("b0")


def test_open_refuses_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="parent folder is missing"):
        IndexStore.open(tmp_path / "nope" / "index.sqlite3")


def test_open_refuses_another_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    IndexStore.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    conn.close()
    with pytest.raises(ValueError, match="schema version 99"):
        IndexStore.open(path)


def test_open_names_the_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(sqlite3.DatabaseError, match=r"cannot open index .*index\.sqlite3"):
        IndexStore.open(path)


def test_write_batch_twice_with_the_same_key_is_a_no_op(store: IndexStore) -> None:
    assert store.write_batch("k", [("a.py", "alpha\n"), ("b.py", "beta\n")]) is True
    before = store.stats()
    assert store.write_batch("k", [("c.py", "gamma\n")]) is False
    assert store.stats() == before == IndexStats(files=2, batches=1, lines=2)
    assert store.indexed_paths() == ["a.py", "b.py"]
    with pytest.raises(QueryError):
        store.search("")
    assert store.search("gamma") == []


def test_rewriting_a_path_in_a_new_batch_replaces_its_lines(store: IndexStore) -> None:
    store.write_batch("k1", [("a.py", "old words\n")])
    store.write_batch("k2", [("a.py", "new words\n")])
    assert store.search("old") == []
    assert [h.path for h in store.search("new")] == ["a.py"]
    assert store.stats() == IndexStats(files=1, batches=2, lines=1)


def test_blank_lines_are_not_indexed_but_line_numbers_count_them(store: IndexStore) -> None:
    store.write_batch("k", [("a.py", "\n\nfirst\n   \nsecond")])
    assert store.stats().lines == 2
    assert [(h.line, h.snippet) for h in store.search("second")] == [
        (5, f"{HIGHLIGHT_OPEN}second{HIGHLIGHT_CLOSE}")
    ]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ([("a.py", 3)], r"files\[0\] must be a \(path, text\) pair"),
        ([("a.py", "x"), ("", "y")], r"files\[1\] has an empty path"),
        ([("a.py", "x"), ("a.py", "y")], r"files\[1\] repeats path 'a.py'"),
        (["a.py"], r"files\[0\] must be"),
    ],
)
def test_write_batch_rejects_bad_files_and_writes_nothing(
    store: IndexStore, files: list[object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        store.write_batch("k", files)  # type: ignore[arg-type]
    assert store.stats() == IndexStats(0, 0, 0)
    assert not store.has_batch("k")


def test_write_batch_rejects_an_empty_key(store: IndexStore) -> None:
    with pytest.raises(ValueError, match="batch_key"):
        store.write_batch("", [])


def test_prune_drops_missing_files_and_orphaned_batches(store: IndexStore) -> None:
    store.write_batch("k1", [("a.py", "alpha\n"), ("b.py", "beta\n")])
    store.write_batch("k2", [("c.py", "gamma\n")])
    assert store.prune(["a.py"]) == 2
    assert store.indexed_paths() == ["a.py"]
    assert store.stats() == IndexStats(files=1, batches=1, lines=1)
    assert not store.has_batch("k2")
    assert store.search("beta") == [] and store.search("gamma") == []
    assert store.prune(["a.py", "never-indexed.py"]) == 0


# --- searching ----------------------------------------------------------------------------------


@pytest.fixture
def corpus(store: IndexStore) -> IndexStore:
    store.write_batch(
        "k1",
        [
            ("src/app.py", "import os\n\ndef load_config(path):\n    return open(path).read()\n"),
            ("src/util.py", "# helpers\ndef config_value(key):\n    pass\nconfig config config\n"),
            ("README.md", "Load the config before you start.\nNothing else here.\n"),
        ],
    )
    store.write_batch(
        "k2", [(f"noise/n{i}.txt", f"filler text number {i}\nmore filler\n") for i in range(20)]
    )
    return store


def test_search_reports_path_line_and_highlighted_snippet(corpus: IndexStore) -> None:
    hits = corpus.search("open")
    assert [(h.path, h.line) for h in hits] == [("src/app.py", 4)]
    assert hits[0].snippet == f"    return {HIGHLIGHT_OPEN}open{HIGHLIGHT_CLOSE}(path).read()"


def test_search_ranks_denser_matches_first(corpus: IndexStore) -> None:
    hits = corpus.search("config")
    assert hits[0] == corpus.search("config", limit=1)[0]
    assert (hits[0].path, hits[0].line) == ("src/util.py", 4)  # "config config config"
    assert [h.score for h in hits] == sorted(h.score for h in hits)
    assert {(h.path, h.line) for h in hits} == {
        ("src/util.py", 4),
        ("src/util.py", 2),
        ("src/app.py", 3),
        ("README.md", 1),
    }


def test_all_words_must_match(corpus: IndexStore) -> None:
    hits = corpus.search("load config")
    assert {(h.path, h.line) for h in hits} == {("README.md", 1), ("src/app.py", 3)}


def test_quoted_phrase_requires_adjacent_words_in_order(corpus: IndexStore) -> None:
    assert [(h.path, h.line) for h in corpus.search('"load the config"')] == [("README.md", 1)]
    assert corpus.search('"config the load"') == []
    # identifiers split on punctuation, so a phrase finds load_config as well
    assert [(h.path, h.line) for h in corpus.search('"load config"')] == [("src/app.py", 3)]


def test_search_is_case_and_accent_insensitive(corpus: IndexStore) -> None:
    assert [h.path for h in corpus.search("NÓTHING")] == ["README.md"]


def test_limit_caps_results_and_is_validated(corpus: IndexStore) -> None:
    assert len(corpus.search("filler", limit=5)) == 5
    for bad in (0, -1, 1001, True, 2.5):
        with pytest.raises(QueryError, match="limit"):
            corpus.search("filler", limit=bad)  # type: ignore[arg-type]


HOSTILE = [
    '"',
    '""',
    '"unclosed phrase',
    "a\"b'c",
    "(",
    ")",
    "(config OR",
    "config)",
    "NEAR(config load, 2)",
    "NEAR",
    "config NEAR/2 load",
    "conf*",
    "*",
    "-config",
    "config -load",
    "text:config",
    "{text}: config",
    "^config",
    "config AND NOT",
    "OR",
    "'; DROP TABLE files; --",
    "\\",
    "ünïcödé 設定 ✓",
    "🙂 config",
    "+",
    "col:umn",
    "config\x01",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise_sqlite_errors(corpus: IndexStore, query: str) -> None:
    try:
        hits = corpus.search(query)
    except QueryError as exc:
        assert str(exc)
    else:
        assert isinstance(hits, list)
    assert corpus.stats().files == 23  # and nothing was dropped


def test_operators_are_searched_as_words(corpus: IndexStore) -> None:
    # "NEAR(config load, 2)" means the words near, config, load and 2, all required
    corpus.write_batch("k3", [("near.txt", "near config load 2")])
    assert [h.path for h in corpus.search("NEAR(config load, 2)")] == ["near.txt"]
    # "-" is not negation: "config -load" finds lines with both words
    hits = corpus.search("config -load")
    assert {h.path for h in hits} == {"near.txt", "src/app.py", "README.md"}


@pytest.mark.parametrize("query", ["", "   ", '""', "*", "()", "- + ^", "\0config"])
def test_queries_with_nothing_to_search_are_clear_errors(corpus: IndexStore, query: str) -> None:
    with pytest.raises(QueryError):
        corpus.search(query)


def test_fts_query_quotes_every_term() -> None:
    assert fts_query('foo "bar baz" qu"x') == '"foo" "bar baz" "qu" "x"'
    assert fts_query('say "a ""quoted"" word"') == '"say" "a " "quoted" " word"'
    assert fts_query('"unclosed phrase') == '"unclosed phrase"'


@pytest.fixture(scope="module")
def shared_corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexStore]:
    path = tmp_path_factory.mktemp("idx") / "index.sqlite3"
    with IndexStore.open(path) as s:
        s.write_batch("k", [("a.py", 'alpha beta\ngamma (delta) NEAR "quoted" * - ü\n')])
        yield s


_hostile_alphabet = st.sampled_from(list("\"()*-+^:{}\\'NEARORANDNOT 0a ü設🙂\t\n,./"))


@settings(max_examples=300, deadline=None)
@given(query=st.one_of(st.text(max_size=40), st.text(_hostile_alphabet, max_size=40)))
def test_random_queries_never_raise_sqlite_errors(shared_corpus: IndexStore, query: str) -> None:
    try:
        hits = shared_corpus.search(query)
    except QueryError:
        return
    for hit in hits:
        assert hit.path == "a.py" and hit.line in (1, 2)


# --- crash safety ---------------------------------------------------------------------------------

FILES_PER_BATCH = 20
LINES_PER_FILE = 150

# The writer commits batches b0, b1, ... (skipping keys already present, as a resumed indexer
# does) and prints each new key's number. With "stall", once two new batches are committed it
# freezes inside the third: the sqlite trace hook fires when the batch's second file row is
# inserted (so the first file is fully written but uncommitted), prints "stalled" and blocks on
# stdin until the test kills it. Without "stall" it never pauses and the kill lands wherever the
# writer happens to be.
_WRITER = textwrap.dedent(
    """
    import sys
    from facets_indexer.store import IndexStore

    path, n_files, n_lines, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    store = IndexStore.open(path)
    committed = 0
    file_inserts = 0

    def trace(statement):
        global file_inserts
        if mode == "stall" and committed >= 2 and statement.startswith("INSERT INTO files"):
            file_inserts += 1
            if file_inserts == 2:
                print("stalled", flush=True)
                sys.stdin.readline()

    store._conn.set_trace_callback(trace)  # white-box: only to pause mid-transaction
    i = 0
    while True:
        files = [
            (f"b{i}/f{j}.txt", "\\n".join(f"word{i} line {k}" for k in range(n_lines)))
            for j in range(n_files)
        ]
        if store.write_batch(f"b{i}", files):
            committed += 1
            print(i, flush=True)
        i += 1
    """
)


def assert_every_batch_whole(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        (check,) = conn.execute("PRAGMA integrity_check").fetchone()
        assert check == "ok"
        conn.execute("INSERT INTO lines_fts(lines_fts) VALUES ('integrity-check')")
        keys = {k for (k,) in conn.execute("SELECT key FROM batches")}
        per_batch = dict(
            conn.execute(
                "SELECT files.batch_key, count(DISTINCT files.id) FROM files GROUP BY batch_key"
            ).fetchall()
        )
        assert set(per_batch) == keys  # no file without its batch key, no key without files
        assert all(n == FILES_PER_BATCH for n in per_batch.values())
        line_counts = {n for (n,) in conn.execute("SELECT count(*) FROM lines GROUP BY file_id")}
        assert line_counts <= {LINES_PER_FILE}
        return keys
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["stall", "free"])
def test_a_killed_writer_leaves_each_batch_whole_or_absent(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "index.sqlite3"
    IndexStore.open(path).close()
    seen: set[str] = set()
    for _ in range(4):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER,
                str(path),
                str(FILES_PER_BATCH),
                str(LINES_PER_FILE),
                mode,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        for _ in range(2):  # two new batches committed
            assert proc.stdout.readline().strip().isdigit()
        if mode == "stall":
            assert proc.stdout.readline().strip() == "stalled"  # frozen inside the third batch
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL
        keys = assert_every_batch_whole(path)
        assert seen < keys  # committed batches survive and every run added some
        seen = keys
    with IndexStore.open(path) as s:
        assert s.stats().batches == len(seen)
        assert s.search("word0")[0].path.startswith("b0/")


# --- async ----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_store_serialises_concurrent_calls(tmp_path: Path) -> None:
    async with await AsyncIndexStore.open(tmp_path / "index.sqlite3") as store:
        results: dict[int, bool] = {}

        async def write(i: int) -> None:
            results[i] = await store.write_batch(f"k{i % 5}", [(f"f{i % 5}.py", f"token{i % 5}")])

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(write, i)
        assert sorted(results.values()).count(True) == 5  # each key written exactly once
        assert await store.stats() == IndexStats(files=5, batches=5, lines=5)
        assert [h.path for h in await store.search("token3")] == ["f3.py"]
        assert await store.has_batch("k4")
        assert await store.prune(["f0.py"]) == 4
        with pytest.raises(QueryError):
            await store.search("()")
