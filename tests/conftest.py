"""Shared test configuration: anyio runs on asyncio unless a module opts into trio too."""

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The warm start is on by default (coding_agent.warm, docs/design/warm-start.md): a headless run
# or a TUI's worker would start a fork server in the background, one per test's private state
# folder, each lingering ten minutes. Every process a test starts runs its command itself, as
# with `warm_start = false`, unless the test turns the warm start on (tests/app/warm).
os.environ["CODING_AGENT_WARM_START"] = "0"

# pi's folder (~/.pi/agent: its settings.json, models.json, skills, prompts) is read as the lowest
# layer of the configuration (coding_agent.settings.pi_setup): a developer's own pi setup must not
# choose a test's model. Tests of it point the variable (or HOME) at a folder of their own.
os.environ["PI_CODING_AGENT_DIR"] = os.path.join(tempfile.gettempdir(), "coding-agent-tests-no-pi")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


_PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


@pytest.fixture
def agent_env(tmp_path: Path) -> dict[str, str]:
    """The coding agent's environment: a private ``XDG_STATE_HOME`` under ``tmp_path``, no
    provider keys (so the offline ``faux`` model answers), no ``CODING_AGENT_TOKEN``, and an
    empty Claude Code folder (``CLAUDE_CONFIG_DIR``: the developer's own permission rules in
    ``~/.claude/settings.json`` must not decide a test's tool calls)."""
    env = {key: value for key, value in os.environ.items() if key not in _PROVIDER_KEYS}
    env.pop("CODING_AGENT_TOKEN", None)
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["CLAUDE_CONFIG_DIR"] = str(tmp_path / "claude")
    return env


OTHER_USER = "coding-agent-other"
"""The second local user of the permission tests (issue 24): created with ``useradd``."""


@pytest.fixture(scope="session")
def other_user() -> pwd.struct_passwd:
    """A second local user, for tests of what another user can and cannot reach.

    Creating one needs root. Elsewhere the test is skipped, except in CI (``CI=true``, which runs
    as root), where it fails: a permission test that silently never runs proves nothing.
    """
    try:
        return pwd.getpwnam(OTHER_USER)
    except KeyError:
        pass
    if os.geteuid() != 0:
        reason = f"needs root to create the second user {OTHER_USER!r} (useradd)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI must run these tests as root")
        pytest.skip(reason)
    useradd = shutil.which("useradd")
    if useradd is None:
        pytest.fail("useradd is missing: the second-user tests cannot run")
    subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam(OTHER_USER)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A fresh folder every user may enter and write (``/tmp``-like, mode 1777), removed after."""
    folder = Path(tempfile.mkdtemp(prefix="coding-agent-shared-"))
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _runs_as(user: pwd.struct_passwd, python: str) -> bool:
    try:
        done = subprocess.run(
            [python, "-I", "-c", "pass"],
            user=user.pw_uid,
            group=user.pw_gid,
            extra_groups=[],
            capture_output=True,
            timeout=30,
            cwd="/",
        )
    except OSError:
        return False
    return done.returncode == 0


@pytest.fixture(scope="session")
def other_python(other_user: pwd.struct_passwd) -> list[str]:
    """The command start of a Python interpreter that :func:`other_user` can run (stdlib only:
    the test's own virtual environment may sit in a folder only its owner can enter); pass
    ``user=``, ``group=`` and ``extra_groups=[]`` to :mod:`subprocess` to run it as that user."""
    candidates = [os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"]
    for python in dict.fromkeys(candidates):
        if os.path.exists(python) and _runs_as(other_user, python):
            return [python, "-I"]
    pytest.fail(f"no Python interpreter that {other_user.pw_name} can run: tried {candidates}")


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster for the whole run (issue 23): ``initdb`` in a temporary
    folder, ``pg_ctl start`` on a free loopback port (and a Unix socket in the folder), stopped
    and deleted at the end. Without the server binaries the tests are skipped, except in CI
    (``CI=true``), where ``.ci/run`` installs them and their absence fails the tests."""
    from pico3.storage.pg_cluster import PostgresMissing, TempCluster

    # the tests commit with synchronous_commit=off and never pull the plug: no need to flush
    cluster = TempCluster({"fsync": "off", "full_page_writes": "off"})
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


class Processes:
    """Other processes, as a test waits for them: the ones holding a file open, and their
    ends (on pidfds, no polling)."""

    @staticmethod
    def holding(path: str) -> list[int]:
        """The live processes holding ``path`` open (a lock file's holders)."""
        found: list[int] = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    fds = os.listdir(f"/proc/{name}/fd")
                    if any(os.readlink(f"/proc/{name}/fd/{fd}") == path for fd in fds):
                        found.append(int(name))
                except OSError:
                    continue  # gone meanwhile, or not ours to look into
        return found

    @staticmethod
    async def ended(pids: list[int], within: float = 30.0) -> None:
        """Wait until each of ``pids`` has exited; fail after ``within`` seconds."""
        import anyio

        with anyio.fail_after(within):
            for pid in pids:
                try:
                    fd = os.pidfd_open(pid)
                except ProcessLookupError:
                    continue
                try:
                    await anyio.wait_readable(fd)  # a pidfd turns readable when it exits
                finally:
                    os.close(fd)


@pytest.fixture
def processes() -> Processes:
    """:class:`Processes`: whom a test waits for (the sandbox placeholders' watchers...)."""
    return Processes()


@contextlib.contextmanager
def sigint_as_in_a_terminal() -> Iterator[None]:
    """Start children with SIGINT at its default, as a terminal's foreground command has it.

    A suite run from a background job (``cmd &`` in a script, as a CI loop may be) inherits
    SIGINT ignored, and so would a child: it then rightly ignores the test's SIGINT, as a
    background job's command should. A handler set here is reset to the default by ``exec``.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
