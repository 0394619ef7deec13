"""``read`` streams (issue 24 deliver 6): memory bounded by its output, special files refused,
a hanging open bounded by a timeout."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

from coding_agent.worker.tools import GREP_TOOL, READ_TOOL, ToolContext
from coding_agent.worker.tools import files as files_module
from coding_agent.worker.tools.files import open_regular

pytestmark = pytest.mark.anyio

GIB = 1024 * 1024 * 1024

_MEASURE = """
import resource, sys, anyio
from coding_agent.worker.tools import GREP_TOOL, READ_TOOL, ToolContext
async def main():
    args = {"path": sys.argv[1], "limit": 10}
    result = await READ_TOOL.execute(args, ToolContext(cwd="."))
    print(result.plain_text.splitlines()[-1])
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
anyio.run(main)
"""

_BASELINE = """
import resource, anyio
from coding_agent.worker.tools import GREP_TOOL, READ_TOOL, ToolContext
print("baseline")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_kib(code: str, *args: str) -> tuple[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, check=True
    )
    last, peak = done.stdout.strip().splitlines()[-2:]
    return last, int(peak)


def test_a_1_gib_sparse_file_read_with_limit_10_stays_small(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    with big.open("wb") as file:
        file.write(b"".join(b"log line %d\n" % n for n in range(1, 2001)))
        file.truncate(GIB)  # the rest is a hole: one long line of NUL bytes
    footer, peak = _peak_kib(_MEASURE, str(big))
    _, baseline = _peak_kib(_BASELINE)
    assert footer == "[1991 more lines in file. Use offset=11 to continue.]"
    # The whole process (interpreter and imports included) grows by a few MiB at most, not by
    # the file: reading it whole would cost 1 GiB.
    assert peak - baseline < 64 * 1024, (peak, baseline)


async def test_a_huge_single_line_is_reported_without_loading_it(tmp_path: Path) -> None:
    wide = tmp_path / "wide.txt"
    wide.write_bytes(b"x" * (3 * 1024 * 1024) + b"\nnext\n")
    result = await READ_TOOL.execute({"path": "wide.txt"}, ToolContext(cwd=tmp_path))
    assert result.plain_text == (
        "[Line 1 is 3.0MB, exceeds 50.0KB limit. Use bash: sed -n '1p' wide.txt | head -c 51200]"
    )
    second = await READ_TOOL.execute({"path": "wide.txt", "offset": 2}, ToolContext(cwd=tmp_path))
    assert second.plain_text == "next"


async def test_a_fifo_is_refused_at_once_and_never_blocks(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with anyio.fail_after(5):
        result = await READ_TOOL.execute({"path": "pipe"}, ToolContext(cwd=tmp_path))
    assert result.is_error
    assert result.plain_text.startswith(
        "Cannot read pipe: it is a FIFO (named pipe), not a regular file"
    )
    assert "head -c 1000 pipe" in result.plain_text


async def test_devices_and_sockets_are_refused(tmp_path: Path) -> None:
    tools = ToolContext(cwd=tmp_path)
    zero = await READ_TOOL.execute({"path": "/dev/zero"}, tools)
    assert zero.is_error
    assert zero.plain_text.startswith("Cannot read /dev/zero: it is a character device")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(tmp_path / "s.sock"))
        sock = await READ_TOOL.execute({"path": "s.sock"}, tools)
    finally:
        server.close()
    assert sock.is_error and sock.plain_text.startswith("Cannot read s.sock: it is a socket")


async def test_a_symlink_to_a_device_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "z").symlink_to("/dev/zero")
    result = await READ_TOOL.execute({"path": "z"}, ToolContext(cwd=tmp_path))
    assert result.is_error and "it is a character device" in result.plain_text


async def test_an_open_that_hangs_gives_up_after_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hung network mount cannot be made in a test; a stat that blocks until released stands
    # in for it (the open runs in a thread, bounded by the timeout).
    (tmp_path / "slow.txt").write_text("x\n")
    release = threading.Event()
    real_stat = os.stat

    def hanging_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path).endswith("slow.txt"):
            release.wait(30)
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(files_module.os, "stat", hanging_stat)
    try:
        with anyio.fail_after(10), pytest.raises(Exception) as raised:
            await open_regular(tmp_path / "slow.txt", "slow.txt", open_timeout=0.2)
        assert str(raised.value) == (
            "Cannot read slow.txt: opening it did not finish within 0.2 seconds "
            "(a hung network mount or a special file?)"
        )
    finally:
        release.set()


@pytest.mark.parametrize("backend", ["python", "auto"])
async def test_grep_skips_a_fifo_in_the_tree_and_refuses_one_named(
    tmp_path: Path, backend: str
) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.txt").write_text("hello\n")
    tools = ToolContext(cwd=tmp_path, search_backend=backend)  # type: ignore[arg-type]
    with anyio.fail_after(20):
        found = await GREP_TOOL.execute({"pattern": "hello"}, tools)
        named = await GREP_TOOL.execute({"pattern": "hello", "path": "pipe"}, tools)
    assert found.plain_text == "a.txt:1: hello"
    assert named.is_error
    assert (
        named.plain_text == "Cannot search pipe: it is a FIFO (named pipe), not a file or a folder"
    )
