"""``coding-agent db migrate URL`` (issue 42): the explicit migration step, run as the real
binary against a fresh database of the test cluster; one line for success and for failure."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pico3.storage.postgres import SCHEMA_VERSION


@pytest.fixture
def fresh_url(postgres_cluster: Any) -> Iterator[str]:
    name = f"db_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"postgresql://{postgres_cluster.user}@127.0.0.1:{postgres_cluster.port}/{name}"
    finally:
        with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coding_agent.cli.main", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_db_migrate_brings_a_fresh_database_to_this_version_once(
    fresh_url: str, agent_env: dict[str, str], tmp_path: Path
) -> None:
    done = cli(agent_env, tmp_path, "db", "migrate", fresh_url)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        f"coding-agent db migrate: migrated the pico3 schema from version 0 to {SCHEMA_VERSION}\n"
    )
    again = cli(agent_env, tmp_path, "db", "migrate", fresh_url)
    assert again.returncode == 0
    assert again.stdout == (
        f"coding-agent db migrate: the pico3 schema is at version {SCHEMA_VERSION}; nothing to do\n"
    )
    with psycopg.connect(fresh_url) as conn:
        assert conn.execute("SELECT version FROM pico3_schema").fetchall() == [(SCHEMA_VERSION,)]


def test_db_migrate_of_an_unreachable_database_is_one_line_and_exit_5(
    agent_env: dict[str, str], tmp_path: Path
) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = cli(agent_env, tmp_path, "db", "migrate", f"postgresql://a:s3cret@127.0.0.1:{port}/x")
    assert done.returncode == 5 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(
        f"coding-agent db migrate: cannot reach PostgreSQL at 127.0.0.1:{port}/x"
    )
    assert "s3cret" not in line
