"""The pico3 schema on PostgreSQL as an operator meets it (issue 42): many first users of a fresh
database at once, the explicit migration step (``migrate_database``, ``migrate=False``), a
migration bounded by its lock timeout, and a rolling upgrade between two schema versions."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import psycopg
import pytest
from psycopg import sql

from chord.context import BACKGROUND
from pico3.storage import (
    Conversation,
    ConversationWrite,
    PostgresStorage,
    SchemaNotMigrated,
    SchemaTooNew,
    StorageError,
    migrate_database,
    postgres,
)
from pico3.storage.pg_cluster import PostgresMissing, TempCluster
from pico3.storage.postgres import SCHEMA_VERSION

pytestmark = pytest.mark.anyio
ctx = BACKGROUND
FIRST_OPENS = 200


@pytest.fixture(scope="module")
def roomy_cluster() -> Iterator[TempCluster]:
    """A cluster of this module's own with room for every first opener's two connections."""
    cluster = TempCluster(
        {"fsync": "off", "full_page_writes": "off", "max_connections": str(2 * FIRST_OPENS + 50)}
    )
    try:
        cluster.start()
    except PostgresMissing as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{exc}; CI must run the PostgreSQL tests")
        pytest.skip(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def fresh_db(roomy_cluster: TempCluster) -> Iterator[str]:
    name = f"db_{uuid.uuid4().hex}"
    with psycopg.connect(roomy_cluster.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield roomy_cluster.conninfo.replace("dbname=postgres", f"dbname={name}")
    finally:
        with psycopg.connect(roomy_cluster.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def query(conninfo: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        cursor = conn.execute(sql, args)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


async def test_simultaneous_first_opens_on_a_fresh_database_all_succeed(fresh_db: str) -> None:
    failures: list[BaseException] = []
    opened: list[PostgresStorage] = []
    everyone_open = anyio.Event()

    async def first_session(n: int) -> None:
        storage = PostgresStorage(fresh_db, f"first-{n}", fsync=False, lease_seconds=60.0)
        try:
            await storage.open(ctx)
        except Exception as exc:
            failures.append(exc)
        else:
            opened.append(storage)
        if len(opened) + len(failures) == FIRST_OPENS:
            everyone_open.set()
        if storage not in opened:
            return
        await everyone_open.wait()  # all open at once: the schema was made exactly once
        await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
        await storage.close(ctx)

    with anyio.fail_after(180):
        async with anyio.create_task_group() as group:
            for n in range(FIRST_OPENS):
                group.start_soon(first_session, n)
    assert failures == []
    assert len(opened) == FIRST_OPENS
    assert query(fresh_db, "SELECT version, compatible FROM pico3_schema") == [
        (SCHEMA_VERSION, postgres.COMPATIBLE[SCHEMA_VERSION - 1])
    ]
    assert query(fresh_db, "SELECT count(*) FROM pico3_commits") == [(FIRST_OPENS,)]


async def test_without_implicit_migration_an_old_schema_is_refused_until_migrated(
    fresh_db: str,
) -> None:
    for found in (0, 2):
        if found:  # a database as schema 2 left it
            with psycopg.connect(fresh_db, autocommit=True) as conn:
                conn.execute("CREATE TABLE pico3_schema (version integer NOT NULL)")
                for migration in postgres.MIGRATIONS[:2]:
                    conn.execute(migration)  # type: ignore[arg-type]
                conn.execute("INSERT INTO pico3_schema VALUES (2)")
        storage = PostgresStorage(fresh_db, "s", fsync=False, migrate=False)
        with pytest.raises(SchemaNotMigrated) as info:
            await storage.open(ctx)
        assert str(info.value) == (
            f"the database's pico3 schema is at version {found}, this pico3 needs version "
            f"{SCHEMA_VERSION}; run `coding-agent db migrate URL` (or "
            "pico3.migrate_database(url)) with a role that may change the schema, then start "
            "again"
        )
        assert await migrate_database(fresh_db) == (found, SCHEMA_VERSION)
        assert await migrate_database(fresh_db) == (SCHEMA_VERSION, SCHEMA_VERSION)  # a no-op
        await storage.open(ctx)
        await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
        await storage.close(ctx)
        with psycopg.connect(fresh_db, autocommit=True) as conn:
            conn.execute(
                "DROP TABLE pico3_schema, pico3_sessions, pico3_commits, pico3_sticky, "
                "pico3_task_patches, pico3_blobs; DROP FUNCTION pico3_commit, "
                "pico3_truncate_sticky"
            )


async def test_a_migration_waits_for_a_lock_no_longer_than_its_lock_timeout(
    fresh_db: str,
) -> None:
    with psycopg.connect(fresh_db, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (postgres._MIGRATION_LOCK,))  # pyright: ignore[reportPrivateUsage]
        with anyio.fail_after(60), pytest.raises(StorageError) as info:
            await migrate_database(fresh_db, lock_timeout=0.5)
    assert str(info.value) == (
        f"migrating the pico3 schema from version 0 to {SCHEMA_VERSION} waited more than 0.5 s "
        "for a lock (another migration, or a long transaction on a pico3 table, holds it); "
        "nothing was changed: retry, or end that transaction"
    )
    assert query(fresh_db, "SELECT to_regclass('pico3_schema') IS NULL") == [(True,)]


async def test_a_rolling_upgrade_shares_the_database_between_two_schema_versions(
    fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = PostgresStorage(fresh_db, "on-old", fsync=False)  # server B, this release
    await old.open(ctx)
    await old.commit([ConversationWrite(Conversation(id=old.mint_id()))], ctx)
    compatible = SCHEMA_VERSION
    with monkeypatch.context() as newer:  # server A, the next release: one additive migration
        additive = "CREATE TABLE pico3_next (session text PRIMARY KEY)"
        newer.setattr(postgres, "MIGRATIONS", (*postgres.MIGRATIONS, additive))
        newer.setattr(postgres, "COMPATIBLE", (*postgres.COMPATIBLE, compatible))
        newer.setattr(postgres, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
        assert await migrate_database(fresh_db) == (SCHEMA_VERSION, SCHEMA_VERSION + 1)
        upgraded = PostgresStorage(fresh_db, "on-new", fsync=False, migrate=False)
        await upgraded.open(ctx)
        await upgraded.commit([ConversationWrite(Conversation(id=upgraded.mint_id()))], ctx)
        await upgraded.close(ctx)
    # server B, still on this release, keeps committing and opens sessions on the newer schema
    await old.commit([], ctx)
    await old.close(ctx)
    again = PostgresStorage(fresh_db, "on-new", fsync=False)
    await again.open(ctx)
    assert again.seq == 1
    await again.commit([], ctx)
    await again.close(ctx)
    assert query(fresh_db, "SELECT version, compatible FROM pico3_schema") == [
        (SCHEMA_VERSION + 1, compatible)
    ]
    # a release after that whose migration this code cannot work with: refused, in one line
    query(
        fresh_db,
        "UPDATE pico3_schema SET version = %s, compatible = %s",
        SCHEMA_VERSION + 2,
        SCHEMA_VERSION + 2,
    )
    refused = PostgresStorage(fresh_db, "on-old", fsync=False)
    with pytest.raises(SchemaTooNew) as info:
        await refused.open(ctx)
    assert str(info.value) == (
        f"the database's pico3 schema is version {SCHEMA_VERSION + 2}, newer than this pico3 "
        f"(it knows versions up to {SCHEMA_VERSION}; the database needs version "
        f"{SCHEMA_VERSION + 2} or newer); nothing was changed. Upgrade pico3 (coding-agent) on this "
        "machine, or point it at another database"
    )
    with pytest.raises(SchemaTooNew):
        await migrate_database(fresh_db)
