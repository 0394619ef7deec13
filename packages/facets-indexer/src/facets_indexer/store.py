"""The code index: one SQLite file with an FTS5 table, written in idempotent, atomic batches.

Layout (``SCHEMA_VERSION`` 1)::

    files(id, path UNIQUE, batch_key)      one row per indexed file
    lines(id, file_id, line, text)         one row per non-blank line (line numbers are 1-based)
    lines_fts USING fts5(text)             external-content index over ``lines.text``
    batches(key PRIMARY KEY, files)        every batch key that has been committed

Indexing a line per row makes the hit's line number exact and the snippet the line itself; the
price is that a phrase never matches across a line break.

**Idempotence and atomicity.** :meth:`IndexStore.write_batch` runs in one ``BEGIN IMMEDIATE``
transaction: if the key is already in ``batches`` it does nothing and returns ``False``; otherwise
it replaces the batch's files and records the key, and commits both together. A process killed
mid-batch therefore leaves the batch either wholly present (key and all rows) or wholly absent,
which is what lets the indexer repeat a checkpointed write after a crash (docs/design/harness.md#task-kinds).

**Removal.** Files that left the tree are dropped by :meth:`IndexStore.prune`, given the paths of
a complete scan; batch keys no file refers to any more are dropped with them.

**Queries.** :meth:`IndexStore.search` never hands user text to FTS5 as syntax. The query is split
into bare words and ``"quoted phrases"``; each becomes an FTS5 string (so ``NEAR``, ``*``, ``-``,
``(``, ``:`` and friends are just text) and all must match. Results are ranked by bm25.

**Threads.** :class:`IndexStore` is blocking. :class:`AsyncIndexStore` runs every call in a worker
thread through ``anyio.to_thread.run_sync`` with a ``CapacityLimiter(1)``, so one connection is
used by one thread at a time; a cancelled caller waits for the running statement to finish, so a
transaction is never torn by cancellation either.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ParamSpec, TypeVar

import anyio
import anyio.to_thread

__all__ = [
    "HIGHLIGHT_CLOSE",
    "HIGHLIGHT_OPEN",
    "SCHEMA_VERSION",
    "AsyncIndexStore",
    "Fts5UnavailableError",
    "IndexStats",
    "IndexStore",
    "QueryError",
    "SearchHit",
    "fts_query",
]

SCHEMA_VERSION = 1
HIGHLIGHT_OPEN = "«"
"""Marks the start of a matched token in :attr:`SearchHit.snippet`."""
HIGHLIGHT_CLOSE = "»"
"""Marks the end of a matched token in :attr:`SearchHit.snippet`."""

_MAX_LIMIT = 1000
_SNIPPET_TOKENS = 24

P = ParamSpec("P")
R = TypeVar("R")


class Fts5UnavailableError(RuntimeError):
    """The Python ``sqlite3`` module is linked against an SQLite built without FTS5."""


class QueryError(ValueError):
    """A search query that cannot be run (empty, nothing searchable, bad limit)."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One matching line: where it is, the line with matches marked, and its bm25 score.

    Lower scores are better (SQLite's bm25 is negative, more negative for better matches).
    """

    path: str
    line: int
    snippet: str
    score: float


@dataclass(frozen=True, slots=True)
class IndexStats:
    """How much is indexed."""

    files: int
    batches: int
    lines: int


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS files(
        id INTEGER PRIMARY KEY,
        path TEXT NOT NULL UNIQUE,
        batch_key TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS files_batch ON files(batch_key)",
    """CREATE TABLE IF NOT EXISTS lines(
        id INTEGER PRIMARY KEY,
        file_id INTEGER NOT NULL,
        line INTEGER NOT NULL,
        text TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS lines_file ON lines(file_id)",
    """CREATE VIRTUAL TABLE IF NOT EXISTS lines_fts USING fts5(
        text, content='lines', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
    )""",
    """CREATE TRIGGER IF NOT EXISTS lines_ai AFTER INSERT ON lines BEGIN
        INSERT INTO lines_fts(rowid, text) VALUES (new.id, new.text);
    END""",
    """CREATE TRIGGER IF NOT EXISTS lines_ad AFTER DELETE ON lines BEGIN
        INSERT INTO lines_fts(lines_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END""",
    "CREATE TABLE IF NOT EXISTS batches(key TEXT PRIMARY KEY, files INTEGER NOT NULL)",
)


def _require_fts5(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)")
        conn.execute("DROP TABLE temp.fts5_probe")
    except sqlite3.OperationalError as exc:
        raise Fts5UnavailableError(
            f"SQLite {sqlite3.sqlite_version} has no FTS5 ({exc}); the code index needs a Python "
            "whose sqlite3 module is built with FTS5 (the python.org and uv-managed builds are)"
        ) from exc


def _split_query(query: str) -> list[str]:
    """Split into bare words and quoted phrases; an unclosed quote runs to the end."""
    terms: list[str] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch.isspace():
            i += 1
        elif ch == '"':
            end = query.find('"', i + 1)
            end = n if end < 0 else end
            terms.append(query[i + 1 : end])
            i = end + 1
        else:
            j = i
            while j < n and not query[j].isspace() and query[j] != '"':
                j += 1
            terms.append(query[i:j])
            i = j
    return [t for t in terms if any(c.isalnum() for c in t)]


def fts_query(query: str) -> str:
    """Translate user text into an FTS5 MATCH expression that is only string literals.

    ``foo "bar baz"`` becomes ``"foo" "bar baz"`` (both must match). Raises :class:`QueryError`
    when nothing searchable is left (the tokenizer indexes letters and digits only).
    """
    if not isinstance(query, str):
        raise QueryError(f"query must be a string, got {type(query).__name__}")
    if "\0" in query:
        raise QueryError("query contains a NUL character")
    terms = _split_query(query)
    if not terms:
        raise QueryError(f"query {query!r} has no letters or digits to search for")
    return " ".join('"' + t.replace('"', '""') + '"' for t in terms)


class IndexStore:
    """A code index in one SQLite file. Blocking; see :class:`AsyncIndexStore` for async code."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self._conn = conn
        self.path = path

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> IndexStore:
        """Open (creating file and schema if needed) the index at *path*."""
        file = Path(path)
        if not file.parent.is_dir():
            raise FileNotFoundError(f"cannot open index {str(file)!r}: parent folder is missing")
        conn = sqlite3.connect(file, isolation_level=None, check_same_thread=False)
        try:
            _require_fts5(conn)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("BEGIN IMMEDIATE")
            # Statement by statement rather than executescript(), which would commit on its own.
            for statement in _SCHEMA:
                conn.execute(statement)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
                )
            elif row[0] != str(SCHEMA_VERSION):
                raise ValueError(
                    f"index {str(file)!r} has schema version {row[0]}, expected {SCHEMA_VERSION}"
                )
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            conn.close()
            if isinstance(exc, sqlite3.DatabaseError):
                raise sqlite3.DatabaseError(f"cannot open index {str(file)!r}: {exc}") from exc
            raise
        return cls(conn, str(file))

    # -- writing ---------------------------------------------------------------------------------

    def has_batch(self, batch_key: str) -> bool:
        """Whether a batch with this key has been committed."""
        row = self._conn.execute("SELECT 1 FROM batches WHERE key = ?", (batch_key,)).fetchone()
        return row is not None

    def write_batch(self, batch_key: str, files: Iterable[tuple[str, str]]) -> bool:
        """Index *files* (``(path, text)`` pairs) as batch *batch_key*, atomically.

        Returns ``False`` without touching anything if the key was already written. A path that
        is already indexed (from an older batch) is replaced. All rows and the key are committed
        in one transaction.
        """
        if not isinstance(batch_key, str) or not batch_key:
            raise ValueError(f"batch_key must be a non-empty string, got {batch_key!r}")
        items = list(files)
        seen: set[str] = set()
        for index, item in enumerate(items):
            if (
                not isinstance(item, tuple)
                or len(item) != 2
                or not isinstance(item[0], str)
                or not isinstance(item[1], str)
            ):
                raise ValueError(f"files[{index}] must be a (path, text) pair of strings")
            if not item[0]:
                raise ValueError(f"files[{index}] has an empty path")
            if item[0] in seen:
                raise ValueError(f"files[{index}] repeats path {item[0]!r}")
            seen.add(item[0])
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if self.has_batch(batch_key):
                conn.execute("ROLLBACK")
                return False
            for path, text in items:
                self._replace_file(path, text, batch_key)
            conn.execute("INSERT INTO batches(key, files) VALUES (?, ?)", (batch_key, len(items)))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return True

    def _replace_file(self, path: str, text: str, batch_key: str) -> None:
        conn = self._conn
        row = conn.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
        if row is None:
            cursor = conn.execute(
                "INSERT INTO files(path, batch_key) VALUES (?, ?)", (path, batch_key)
            )
            file_id = cursor.lastrowid
        else:
            file_id = row[0]
            conn.execute("DELETE FROM lines WHERE file_id = ?", (file_id,))
            conn.execute("UPDATE files SET batch_key = ? WHERE id = ?", (batch_key, file_id))
        conn.executemany(
            "INSERT INTO lines(file_id, line, text) VALUES (?, ?, ?)",
            (
                (file_id, number, line)
                for number, line in enumerate(text.split("\n"), start=1)
                if line.strip()
            ),
        )

    def prune(self, keep_paths: Iterable[str]) -> int:
        """Remove every file not in *keep_paths* (and batch keys left without files).

        Call it with the paths of a complete scan. Returns the number of files removed.
        """
        keep = sorted(set(keep_paths))
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS keep_paths(path TEXT PRIMARY KEY)")
            conn.execute("DELETE FROM temp.keep_paths")
            conn.executemany("INSERT INTO temp.keep_paths(path) VALUES (?)", ((p,) for p in keep))
            doomed = "SELECT id FROM files WHERE path NOT IN (SELECT path FROM temp.keep_paths)"
            conn.execute(f"DELETE FROM lines WHERE file_id IN ({doomed})")
            removed = conn.execute(
                "DELETE FROM files WHERE path NOT IN (SELECT path FROM temp.keep_paths)"
            ).rowcount
            conn.execute(
                "DELETE FROM batches WHERE key NOT IN (SELECT DISTINCT batch_key FROM files)"
            )
            conn.execute("DELETE FROM temp.keep_paths")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return removed

    # -- reading ---------------------------------------------------------------------------------

    def search(self, query: str, limit: int = 20) -> list[SearchHit]:
        """The best *limit* lines matching every word and phrase of *query*, best first.

        Raises :class:`QueryError` for a query with nothing to search for or a bad *limit*;
        never a :class:`sqlite3.Error` caused by the query text.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIMIT:
            raise QueryError(f"limit must be an integer from 1 to {_MAX_LIMIT}, got {limit!r}")
        match = fts_query(query)
        rows = self._conn.execute(
            """
            SELECT files.path, lines.line,
                   snippet(lines_fts, 0, ?, ?, '…', ?), bm25(lines_fts) AS score
            FROM lines_fts
            JOIN lines ON lines.id = lines_fts.rowid
            JOIN files ON files.id = lines.file_id
            WHERE lines_fts MATCH ?
            ORDER BY score, files.path, lines.line
            LIMIT ?
            """,
            (HIGHLIGHT_OPEN, HIGHLIGHT_CLOSE, _SNIPPET_TOKENS, match, limit),
        ).fetchall()
        return [SearchHit(path, line, snippet, score) for path, line, snippet, score in rows]

    def stats(self) -> IndexStats:
        """Counts of indexed files, committed batches and indexed lines."""
        files, batches, lines = self._conn.execute(
            "SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM batches),"
            " (SELECT count(*) FROM lines)"
        ).fetchone()
        return IndexStats(files, batches, lines)

    def indexed_paths(self) -> list[str]:
        """Every indexed path, sorted."""
        return [r[0] for r in self._conn.execute("SELECT path FROM files ORDER BY path")]

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> IndexStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncIndexStore:
    """:class:`IndexStore` for async code: every call runs in a worker thread, one at a time."""

    def __init__(self, store: IndexStore) -> None:
        self.sync = store
        self._limiter = anyio.CapacityLimiter(1)

    @classmethod
    async def open(cls, path: str | os.PathLike[str]) -> AsyncIndexStore:
        """Open (creating if needed) the index at *path* in a worker thread."""
        store = await anyio.to_thread.run_sync(IndexStore.open, path)
        return cls(store)

    async def _run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs), limiter=self._limiter)

    async def has_batch(self, batch_key: str) -> bool:
        """See :meth:`IndexStore.has_batch`."""
        return await self._run(self.sync.has_batch, batch_key)

    async def write_batch(self, batch_key: str, files: Sequence[tuple[str, str]]) -> bool:
        """See :meth:`IndexStore.write_batch`."""
        return await self._run(self.sync.write_batch, batch_key, files)

    async def prune(self, keep_paths: Iterable[str]) -> int:
        """See :meth:`IndexStore.prune`."""
        return await self._run(self.sync.prune, list(keep_paths))

    async def search(self, query: str, limit: int = 20) -> list[SearchHit]:
        """See :meth:`IndexStore.search`."""
        return await self._run(self.sync.search, query, limit)

    async def stats(self) -> IndexStats:
        """See :meth:`IndexStore.stats`."""
        return await self._run(self.sync.stats)

    async def aclose(self) -> None:
        """Close the store once running calls finish."""
        await self._run(self.sync.close)

    async def __aenter__(self) -> AsyncIndexStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
