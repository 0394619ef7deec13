"""``coding-agent serve``: one server hosting many sessions, one worker process per active one.

The server owns no harness itself. For every connection it reads the preface
(:mod:`.preface`: the token first, then which session), makes sure a session worker serves that
session (the same worker process and supervisor the TUI uses, :mod:`coding_agent.tui.
supervisor`, started on demand), dials the worker's own Unix socket and from then on relays
bytes both ways. The chord wire between the client and the worker is untouched: the server
never decodes a frame, so whatever speaks the wire to a worker (our client, Chord 0.87.1) speaks
it through the server.

A worker runs with ``--linger IDLE``: once no client has been connected and nothing has been
running for ``IDLE`` seconds it stops by itself (:mod:`coding_agent.worker.linger`), and the
server reaps it (waits for its exit, forgets it); the next connection for that session starts a
new one, which resumes from storage. Every worker the server starts is tied to it (its stdin is
the server's pipe): a server that dies takes its workers with it, and one that stops (SIGTERM)
stops them cleanly first.

Listeners (docs/server.md):

* a Unix socket, always: ``<state>/coding-agent/server/serve.sock`` by default, in a ``0700``
  folder, the socket ``0600``, and only the server's own uid is served (``SO_PEERCRED``);
* ``--listen tcp://HOST:PORT`` (optional): TLS with ``--tls-cert``/``--tls-key`` and a bearer
  token from ``--token-file``, both required; plain TCP only with ``--insecure`` on a loopback
  address.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import os
import ssl
import stat
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import psycopg
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.tls import TLSListener

from chord import FrameConnection, connect_unix, serve_unix
from coding_agent.server.args import DEFAULT_IDLE
from coding_agent.server.directory import SessionDirectory
from coding_agent.server.preface import (
    MAX_PREFACE,
    PREFACE_TIMEOUT,
    PrefaceError,
    Request,
    check_token,
    encode_reply,
    parse_request,
    split_preface,
)
from coding_agent.session_files.folders import (
    SOCKET_PATH_LIMIT,
    LaunchSettings,
    Session,
    SessionError,
    adopt_session,
    create_session,
    open_session,
)
from coding_agent.session_files.private import PrivacyError, private_tree, socket_folder
from coding_agent.settings.xdg import state_home
from coding_agent.supervisor import READY_TIMEOUT, WorkerStartError, WorkerSupervisor

__all__ = [
    "DEFAULT_IDLE",
    "ServerOptions",
    "ServerSetupError",
    "SessionServer",
    "default_socket_path",
    "parse_listen",
    "read_token_file",
    "server_tls_context",
]

_RELAY_CHUNK = 65536
_log = logging.getLogger("coding_agent.server")


class ServerSetupError(Exception):
    """The server cannot start as configured; the message names the flag and the fix."""


@dataclass
class ServerOptions:
    """How the server runs its sessions."""

    cwd: Path
    """The project folder new sessions work in."""
    env: Mapping[str, str]
    """The workers' environment (its ``XDG_STATE_HOME`` says where session folders live)."""
    storage: str | None = None
    """A PostgreSQL URL for the sessions' commits (``None``: JSONL in each session folder)."""
    idle: float = DEFAULT_IDLE
    lease: float | None = None
    """The PostgreSQL lease's expiry (seconds; ``None``: 2): how soon another server may take
    over a session whose worker died."""
    faux_script: Path | None = None
    """New sessions' faux script (demos, tests)."""
    token: bytes | None = None
    """The bearer token TCP clients must present."""
    on_event: Callable[[str], None] | None = None
    """One line per lifecycle event (worker started, reaped; a refused connection)."""


def read_token_file(path: str | os.PathLike[str]) -> bytes:
    """The token in ``path`` (its first line, stripped). The file must be the user's own and
    readable by nobody else (``0600``), and hold a token of at least 16 characters."""
    file = Path(path)
    try:
        info = file.stat()
        text = file.read_bytes()
    except OSError as error:
        raise ServerSetupError(f"--token-file {file}: cannot read it: {error.strerror}") from None
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise ServerSetupError(
            f"--token-file {file}: other users may read it (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): chmod 600 {file}"
        )
    lines = text.splitlines()
    token = lines[0].strip() if lines else b""
    if len(token) < 16 or any(byte <= 32 or byte >= 127 for byte in token):
        raise ServerSetupError(
            f"--token-file {file}: the first line must be a token of at least 16 printable "
            "characters without spaces (make one: python3 -c 'import secrets; "
            f"print(secrets.token_urlsafe(32))' > {file}; chmod 600 {file})"
        )
    return token


def parse_listen(url: str) -> tuple[str, int]:
    """``tcp://HOST:PORT`` → ``(host, port)`` (IPv6 as ``tcp://[::1]:PORT``)."""
    if not url.startswith("tcp://"):
        raise ServerSetupError(f"--listen {url!r}: give tcp://HOST:PORT (e.g. tcp://0.0.0.0:7433)")
    rest = url.removeprefix("tcp://").rstrip("/")
    host, sep, port = rest.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ServerSetupError(f"--listen {url!r}: give tcp://HOST:PORT (e.g. tcp://0.0.0.0:7433)")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost`` counts)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_tls_context(cert: str | os.PathLike[str], key: str | os.PathLike[str]) -> ssl.SSLContext:
    """A TLS 1.2+ server context with the certificate chain in ``cert`` and its key in ``key``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(os.fspath(cert), os.fspath(key))
    except (OSError, ssl.SSLError) as error:
        raise ServerSetupError(
            f"--tls-cert {cert} / --tls-key {key}: cannot load them: {error}"
        ) from None
    return context


def default_socket_path(env: Mapping[str, str] | None = None) -> Path:
    """The server's Unix socket: ``<state>/coding-agent/server/serve.sock``, or a short
    stand-in in ``$TMPDIR/coding-agent-<uid>/`` when that path is too long for a socket."""
    folder = state_home(env) / "coding-agent" / "server"
    preferred = folder / "serve.sock"
    if len(os.fsencode(preferred)) <= SOCKET_PATH_LIMIT:
        return preferred
    digest = hashlib.sha256(os.fsencode(folder.absolute())).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"coding-agent-{os.getuid()}" / f"serve-{digest}.sock"


def prepare_socket_folder(path: Path, env: Mapping[str, str] | None = None) -> None:
    """Make the socket's folder ``0700`` (ours, not a link) before the socket is bound."""
    try:
        base = state_home(env)
        if path.parent.is_relative_to(base):
            private_tree(base, path.parent)
        else:
            socket_folder(path.parent)
    except PrivacyError as error:
        raise ServerSetupError(
            f"{error} (or give --socket a path in a folder only you can use: mode 0700)"
        ) from None


class _QuietTLSListener(TLSListener):
    """A TLS listener whose failed handshakes (plain TCP, a wrong certificate) are one event
    line (``on_refused``), not a logged traceback."""

    on_refused: Callable[[str], None] | None = None

    async def handle_handshake_error(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, exc: BaseException, stream: anyio.abc.AnyByteStream
    ) -> None:
        if self.on_refused is not None:
            self.on_refused(f"refused a connection: TLS handshake failed: {exc}")
        with anyio.CancelScope(shield=True):
            await anyio.aclose_forcefully(stream)
        if not isinstance(exc, Exception):
            raise exc


@dataclass
class _Slot:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    supervisor: WorkerSupervisor | None = None


class SessionServer:
    """The session table and the connection handler (see the module docstring)."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self._slots: dict[str, _Slot] = {}
        self._directory = SessionDirectory(options.storage) if options.storage else None
        self._group: anyio.abc.TaskGroup | None = None
        self.connections = 0
        """Connections relayed to a worker so far."""
        self.refused = 0
        """Connections refused at the preface or the TLS handshake."""

    # -- running ---------------------------------------------------------------------------------
    async def run(
        self,
        *,
        socket_path: Path,
        tcp: tuple[str, int] | None = None,
        tls: ssl.SSLContext | None = None,
        ready: Callable[[list[str]], None] | None = None,
    ) -> None:
        """Listen on ``socket_path`` (and ``tcp``, with ``tls`` unless it is ``None``), call
        ``ready(addresses)``, and serve until cancelled; then stop every worker it started."""
        prepare_socket_folder(socket_path, self.options.env)
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                await group.start(serve_unix, socket_path, self._unix_client)
                addresses = [f"unix:{socket_path}"]
                if tcp is not None:
                    listener: Any = await anyio.create_tcp_listener(
                        local_host=tcp[0], local_port=tcp[1]
                    )
                    port = listener.extra(anyio.abc.SocketAttribute.local_port)
                    if tls is not None:
                        listener = _QuietTLSListener(
                            listener, tls, standard_compatible=False,
                            handshake_timeout=PREFACE_TIMEOUT,
                        )  # fmt: skip
                        listener.on_refused = self._refused
                    host = f"[{tcp[0]}]" if ":" in tcp[0] else tcp[0]
                    addresses.append(f"tcp://{host}:{port}")
                    group.start_soon(listener.serve, self._tcp_client)
                if ready is not None:
                    ready(addresses)
                await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await self.stop_workers()

    async def stop_workers(self) -> None:
        """SIGTERM every worker this server started and wait for them (a clean stop)."""
        for slot in list(self._slots.values()):
            if slot.supervisor is not None:
                await slot.supervisor.stop()

    # -- connections -----------------------------------------------------------------------------
    async def _unix_client(self, conn: FrameConnection) -> None:
        # A Unix client was already checked to be of our uid; no token is asked of it.
        await self._guarded(self._client(conn.stream, token=None, peer="unix"), "unix")

    async def _guarded(self, connection: Awaitable[None], peer: str) -> None:
        """Run one client's connection; whatever goes wrong in it ends that connection only.

        The server's listeners run every connection in their own task group, so an error that
        escaped one (a client that vanished in the middle of the preface's reply, a stream
        error the relay did not expect) would stop the whole server and its workers.
        """
        try:
            await connection
        except Exception as error:
            self._event(f"a connection ({peer}) failed: {type(error).__name__}: {error}")

    async def _tcp_client(self, stream: anyio.abc.ByteStream) -> None:
        try:
            peer = stream.extra(anyio.abc.SocketAttribute.remote_address)
        except Exception:
            peer = "?"
        try:
            await self._guarded(
                self._client(stream, token=self.options.token, peer=f"tcp {peer}"), f"tcp {peer}"
            )
        finally:
            await anyio.aclose_forcefully(stream)

    async def _client(
        self, stream: anyio.abc.ByteStream, *, token: bytes | None, peer: Any
    ) -> None:
        buffered = BufferedByteReceiveStream(stream)
        try:
            request = await self._read_request(buffered, token)
            session = await self._session_for(request)
            worker = await self._dial(session)
        except PrefaceError as error:
            self.refused += 1
            self._event(f"refused a connection ({peer}): {error}")
            with anyio.move_on_after(1, shield=True):
                try:
                    await stream.send(encode_reply(error=error))
                except (
                    anyio.EndOfStream,  # a TLS client that closed (e.g. it did not trust us)
                    anyio.BrokenResourceError,
                    anyio.ClosedResourceError,
                    OSError,
                ):
                    pass
            return
        try:
            info = {"session": session.id, "cwd": str(session.cwd), "model": session.model}
            await stream.send(encode_reply(info))
            self.connections += 1
            await _relay(buffered, stream, worker.stream)
        finally:
            await worker.aclose()

    async def _read_request(
        self, buffered: BufferedByteReceiveStream, token: bytes | None
    ) -> Request:
        line = b""
        with anyio.move_on_after(PREFACE_TIMEOUT):
            try:
                line = await buffered.receive_until(b"\n", MAX_PREFACE)
            except anyio.DelimiterNotFound:
                raise PrefaceError(
                    "bad_preface", f"no preface line within {MAX_PREFACE} bytes"
                ) from None
            except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
                raise PrefaceError(
                    "bad_preface", "the connection ended before the preface"
                ) from None
        if not line:
            raise PrefaceError("bad_preface", f"no preface within {PREFACE_TIMEOUT:g} s")
        given, rest = split_preface(line)
        check_token(given, token)  # before anything else of the line is looked at
        return parse_request(rest)

    async def _session_for(self, request: Request) -> Session:
        env = self.options.env
        directory = self._directory
        try:
            if request.new:
                settings = LaunchSettings(
                    model=request.model,
                    faux_script=str(self.options.faux_script) if self.options.faux_script else None,
                )
                session = create_session(self.options.cwd, settings=settings, env=env)
                if directory is not None:
                    await directory.put(session.metadata)  # any server of the database may serve it
                return session
            assert request.session is not None
            try:
                return open_session(request.session, env=env)
            except SessionError:
                metadata = await directory.get(request.session) if directory is not None else None
                if metadata is None:
                    raise
                self._event(f"session {metadata.id}: made by another server; adopting it")
                return adopt_session(metadata, env=env)
        except SessionError as error:
            raise PrefaceError(
                "not_found" if not request.new else "start_failed", str(error)
            ) from None
        except psycopg.Error as error:
            raise PrefaceError("start_failed", f"the session directory failed: {error}") from None

    async def _dial(self, session: Session) -> FrameConnection:
        """A connection to the worker of ``session``, started first when none serves it."""
        with anyio.move_on_after(READY_TIMEOUT):
            while True:
                await self._ensure_worker(session)
                try:
                    return await connect_unix(session.socket_path)
                except (FileNotFoundError, ConnectionRefusedError):
                    pass  # a worker starting (not listening yet) or just gone: look again
                await anyio.sleep(0.05)
        raise PrefaceError("start_failed", f"the worker of session {session.id} did not answer")

    async def _ensure_worker(self, session: Session) -> None:
        slot = self._slots.setdefault(session.id, _Slot())
        async with slot.lock:
            if slot.supervisor is None:
                slot.supervisor = WorkerSupervisor(
                    session,
                    exit_with_parent=True,  # the server's workers die with it
                    env=self.options.env,
                    storage=self.options.storage,
                    linger=self.options.idle,
                    lease=self.options.lease,
                    on_event=lambda line, sid=session.id: self._event(f"session {sid}: {line}"),
                )
            supervisor = slot.supervisor
            try:
                started = await supervisor.ensure_started()
            except WorkerStartError as error:
                slot.supervisor = None
                raise PrefaceError("start_failed", error.reason()) from None
            if not started and supervisor.pid is None:
                slot.supervisor = None  # someone else's worker serves it (a local TUI's)
            elif started:
                assert self._group is not None
                self._group.start_soon(self._reap, session.id, slot, supervisor)

    async def _reap(self, session_id: str, slot: _Slot, supervisor: WorkerSupervisor) -> None:
        status = await supervisor.wait()
        async with slot.lock:
            if slot.supervisor is supervisor:
                slot.supervisor = None
        self._event(f"session {session_id}: worker exited ({status}): reaped")

    def _refused(self, line: str) -> None:
        self.refused += 1
        self._event(line)

    def _event(self, line: str) -> None:
        _log.info("%s", line)
        if self.options.on_event is not None:
            self.options.on_event(line)


async def _relay(
    client_in: BufferedByteReceiveStream,
    client_out: anyio.abc.ByteStream,
    worker: anyio.abc.ByteStream,
) -> None:
    """Copy bytes both ways until either side ends; then both are done."""

    async with anyio.create_task_group() as group:

        async def pump(source: Any, sink: anyio.abc.ByteSendStream) -> None:
            try:
                while True:
                    data = await source.receive(_RELAY_CHUNK)
                    await sink.send(data)
            except (
                anyio.EndOfStream,
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
                anyio.IncompleteRead,
                ssl.SSLError,
                OSError,
            ):
                pass
            group.cancel_scope.cancel()

        group.start_soon(pump, client_in, worker)
        group.start_soon(pump, worker, client_out)
