"""A throwaway PostgreSQL cluster in a temporary folder, for tests, benchmarks and local trials.

:class:`TempCluster` runs ``initdb`` and ``pg_ctl start`` from the PostgreSQL server binaries
(found on ``PATH`` or under ``/usr/lib/postgresql/*/bin``), listening on loopback only
(``127.0.0.1`` on a free port, and a Unix socket inside the folder), and ``pg_ctl stop`` plus
removal of the folder at the end. Nothing outside the folder is touched. PostgreSQL refuses to
run as root; as root the cluster runs as the ``postgres`` system user (the one Debian's package
creates) and the folder is handed to it.

    with TempCluster() as cluster:
        storage = PostgresStorage(cluster.conninfo, session="s1")
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

__all__ = ["PostgresMissing", "TempCluster", "find_server_binaries"]


class PostgresMissing(RuntimeError):
    """The PostgreSQL server binaries (``initdb``, ``pg_ctl``) are not installed."""


def find_server_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or ``None`` when PostgreSQL is missing."""
    candidates: list[str] = []
    on_path = shutil.which("pg_ctl")
    if on_path is not None:
        candidates.append(str(Path(on_path).resolve().parent))
    candidates.extend(sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True))
    for folder in candidates:
        if os.access(os.path.join(folder, "initdb"), os.X_OK) and os.access(
            os.path.join(folder, "pg_ctl"), os.X_OK
        ):
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TempCluster:
    """A private PostgreSQL cluster; see the module doc. ``settings`` go to postgresql.conf."""

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        self.settings = {
            "max_connections": "300",
            "shared_buffers": "64MB",
            "fsync": "on",
            "synchronous_commit": "on",
            **(settings or {}),
        }
        self.folder: Path | None = None
        self.port = 0
        self._bin: Path | None = None
        self._user: pwd.struct_passwd | None = None
        self.user = "postgres"

    @property
    def conninfo(self) -> str:
        """A libpq connection string for the cluster's ``postgres`` database over loopback TCP."""
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres"

    @property
    def socket_dir(self) -> Path:
        assert self.folder is not None
        return self.folder / "socket"

    def _run(self, *args: str) -> None:
        kwargs: dict[str, object] = {}
        if self._user is not None:
            kwargs = {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}
        done = subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            timeout=120,
            cwd="/",
            check=False,
            **kwargs,  # type: ignore[arg-type]
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({done.returncode}): {done.stdout}{done.stderr}"
            )

    def start(self) -> TempCluster:
        binaries = find_server_binaries()
        if binaries is None:
            raise PostgresMissing(
                "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or under "
                "/usr/lib/postgresql/*/bin; install them (Debian: apt-get install postgresql)"
            )
        self._bin = binaries
        if os.geteuid() == 0:
            try:
                self._user = pwd.getpwnam("postgres")
            except KeyError:
                raise PostgresMissing(
                    "running as root, PostgreSQL needs the 'postgres' system user "
                    "(Debian's postgresql package creates it)"
                ) from None
        else:
            self.user = pwd.getpwuid(os.geteuid()).pw_name
        self.folder = Path(tempfile.mkdtemp(prefix="pico3-pg-"))
        data = self.folder / "data"
        self.socket_dir.mkdir()
        if self._user is not None:
            for path in (self.folder, self.socket_dir):
                os.chown(path, self._user.pw_uid, self._user.pw_gid)
        try:
            self._run(
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                self.user,
                "--auth=trust",
                "--no-sync",
                "--encoding=UTF8",
                "--locale=C",
            )
            self.port = _free_port()
            with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
                conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\n")
                conf.write(f"unix_socket_directories = '{self.socket_dir}'\n")
                for key, value in self.settings.items():
                    conf.write(f"{key} = {value}\n")
            self._run(
                str(binaries / "pg_ctl"),
                "start",
                "-D",
                str(data),
                "-w",
                "-t",
                "60",
                "-l",
                str(self.folder / "server.log"),
            )
        except BaseException:
            self.stop()
            raise
        return self

    def pause(self) -> None:
        """Stop the server (fast mode: every connection is ended) but keep its data, for
        :meth:`resume`: what a database outage looks like to its clients."""
        assert self.folder is not None and self._bin is not None, "the cluster is not started"
        self._run(str(self._bin / "pg_ctl"), "stop", "-D", str(self.folder / "data"), "-m", "fast")

    def resume(self) -> None:
        """Start the server :meth:`pause` stopped, on the same port; returns once it accepts
        connections."""
        assert self.folder is not None and self._bin is not None, "the cluster is not started"
        self._run(
            str(self._bin / "pg_ctl"),
            "start",
            "-D",
            str(self.folder / "data"),
            "-w",
            "-t",
            "60",
            "-l",
            str(self.folder / "server.log"),
        )

    def restart(self) -> None:
        """Restart the server (``pg_ctl restart``, fast mode: every connection is ended), on the
        same port; returns once it accepts connections again."""
        assert self.folder is not None and self._bin is not None, "the cluster is not started"
        data = self.folder / "data"
        self._run(
            str(self._bin / "pg_ctl"),
            "restart",
            "-D",
            str(data),
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            "-l",
            str(self.folder / "server.log"),
        )

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete the folder. Idempotent."""
        folder, self.folder = self.folder, None
        if folder is None:
            return
        data = folder / "data"
        try:
            if self._bin is not None and (data / "postmaster.pid").exists():
                self._run(str(self._bin / "pg_ctl"), "stop", "-D", str(data), "-m", "fast", "-w")
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def __enter__(self) -> TempCluster:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
