"""The TLS context the warm start's server preloads (``coding_agent.worker.providers._tls``): the
first SDK client of a forked child (here, a fresh interpreter) takes the context the server
made, with the trust a context of its own would have; every later client makes its own; and a
changed authorities file or a changed variable makes the first one load its own too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import certifi
import pytest

_PROBE = """
import anyio, json, os, sys
from coding_agent.worker.providers import preload_tls_context, preloaded_tls_sources
from coding_agent.worker.providers._sdk_import import sdk_client, sdk_client_options

made = preload_tls_context()
sources = preloaded_tls_sources()
change = sys.argv[1]
if change == "file":
    stat = os.stat(os.environ["SSL_CERT_FILE"])
    os.utime(os.environ["SSL_CERT_FILE"], ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
elif change == "variable":
    os.environ["SSLKEYLOGFILE"] = os.devnull

def context(client):
    return client._client._transport._pool._ssl_context

async def main():
    options = sdk_client_options("k", "http://127.0.0.1:9/v1", 30.0)
    first = sdk_client("openai", "AsyncOpenAI", options)
    second = sdk_client("openai", "AsyncOpenAI", options)
    print(json.dumps({
        "made": made is not None, "sources": sources,
        "first": context(first) is made, "second": context(second) is made,
        "trust": [context(c).cert_store_stats() for c in (first, second)],
        "verify": [int(context(c).verify_mode) for c in (first, second)],
    }))

anyio.run(main)
"""


def _probe(tmp_path: Path, change: str) -> dict[str, Any]:
    bundle = tmp_path / "authorities.pem"
    shutil.copy(certifi.where(), bundle)
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_DIR", "SSLKEYLOGFILE")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_PROBE), change],
        env={**env, "SSL_CERT_FILE": str(bundle)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    got: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["made"] and str(bundle) in got["sources"]
    assert got["trust"][0] == got["trust"][1] and got["trust"][0]["x509_ca"] > 0
    assert got["verify"][0] == got["verify"][1]
    assert got["second"] is False  # taken once: every later client makes its own
    return got


def test_the_first_client_takes_the_preloaded_context(tmp_path: Path) -> None:
    assert _probe(tmp_path, "none")["first"] is True


@pytest.mark.parametrize("change", ["file", "variable"])
def test_a_changed_authorities_file_or_variable_makes_the_client_load_its_own(
    tmp_path: Path, change: str
) -> None:
    assert _probe(tmp_path, change)["first"] is False
