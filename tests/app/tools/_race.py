"""The race harness of test_read_race.py and test_write_race.py: a folder swapped for a symlink
once (:func:`swap_folder`), or again and again by another process (:func:`swapping`) while a
loop of checked calls runs (:func:`race`).

The loop is bounded by count and time, never by sleeping: the swapping process exchanges the two
names with ``renameat2(RENAME_EXCHANGE)`` as fast as it can, so each call meets the names in
whatever state they are at that instant.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

_SWAPPER = textwrap.dedent(
    """
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
    print("ready", flush=True)
    while True:
        if libc.renameat2(-100, a, -100, b, 2) != 0:  # RENAME_EXCHANGE
            sys.exit(ctypes.get_errno())
    """
)


def real_path(path: Path) -> str:
    """``path`` with every symlink followed: what the approval leaves as the checked target
    (a plain function, so an async test may call it without a blocking-call warning)."""
    return os.path.realpath(path)


def swap_folder(project: Path, target: Path) -> None:
    """Replace the folder ``project/d`` by a symlink to ``target`` (the old one is kept as
    ``d.away``): what an attacker does between a check and the tool's open."""
    os.rename(project / "d", project / "d.away")
    os.symlink(target, project / "d")


@contextmanager
def swapping(one: Path, other: Path) -> Iterator[None]:
    """A process exchanging ``one`` and ``other`` until the block ends (Linux only); the block
    starts once it runs, and fails if it stopped early (its swaps would not have been tried)."""
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(one), str(other)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        yield
        assert swapper.poll() is None, "the swapping process stopped early"
    finally:
        swapper.kill()
        swapper.wait()
        if swapper.stdout is not None:
            swapper.stdout.close()


async def race(attempt: Callable[[int], Awaitable[str | None]]) -> Counter[str]:
    """Call ``attempt(number)`` until 200 calls were checked and run, or for 20 s, and count
    their outcomes. ``attempt`` makes the approval's decision and, when it lets the call run,
    runs the tool and returns the outcome (``"ok"`` or the error's ``reason``); ``None`` when
    the decision stopped the call (not counted). Fails when no call got past the decision: the
    race then tested nothing."""
    outcomes: Counter[str] = Counter()
    checked = 0
    deadline = time.monotonic() + 20
    for number in itertools.count():
        if checked >= 200 or time.monotonic() > deadline:
            break
        outcome = await attempt(number)
        if outcome is not None:
            checked += 1
            outcomes[outcome] += 1
    assert checked > 0, "no call got past the approval's check"
    print(outcomes)
    return outcomes
