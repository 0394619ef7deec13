"""``coding-agent serve``: one server hosting many sessions, in host processes or a worker
process per active one.

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

import functools
import math
import os
import resource
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import psycopg
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.tls import TLSStream

from chord import FrameConnection, connect_unix, serve_unix
from coding_agent.server.addresses import prepare_socket_folder
from coding_agent.server.admission import Gate, Limits, Ticket, default_limits, serve_tcp
from coding_agent.server.args import DEFAULT_IDLE
from coding_agent.server.credentials import Credentials, ServerSetupError
from coding_agent.server.directory import SessionDirectory
from coding_agent.server.events import ServerLog
from coding_agent.server.preface import (
    ANSWER_TIMEOUT,
    MAX_PREFACE,
    PREFACE_TIMEOUT,
    PrefaceError,
    Request,
    check_token,
    encode_reply,
    parse_request,
    split_preface,
)
from coding_agent.server.session_host import DEFAULT_POOL_SIZE, HostedSession, HostProcess
from coding_agent.session_files.folders import (
    LaunchSettings,
    Session,
    SessionError,
    adopt_session,
    create_session,
    open_session,
    sessions_root,
)
from coding_agent.supervisor import READY_TIMEOUT, WorkerStartError, WorkerSupervisor

__all__ = ["DEFAULT_IDLE", "Limits", "ServerOptions", "SessionServer"]

_RELAY_CHUNK = 65536
SESSION_QUEUE_TIMEOUT = ANSWER_TIMEOUT - READY_TIMEOUT
"""Seconds a session's start waits for one of ``--max-sessions``' places, or for its turn to
start, before ``ERR busy``: what is left of the client's patience for the answer
(:data:`~.preface.ANSWER_TIMEOUT`) once the start itself had its own bound."""


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
    credentials: Credentials | None = None
    """The tokens TCP clients must present and the TLS certificate (reloaded on SIGHUP)."""
    limits: Limits | None = None
    """The connection caps (``None``: derived from the open-file limit)."""
    max_sessions: int | None = None
    """Sessions running at once (``None``: no bound). A worker process holds up to three
    database connections of its own, so with a worker per session this bounds the server's
    connections to PostgreSQL (``serve`` derives it from ``--db-connections``)."""
    max_starting: int = field(default_factory=lambda: max(2, os.cpu_count() or 2))
    """Workers starting at once; the other starts wait their turn."""
    wait_for_approval: float | None = None
    """``serve --wait-for-approval``: how long a ``-p`` run that does not say parks its approvals
    (``math.inf``: until answered; ``None``: it denies at once). Told to clients in the answer."""
    on_event: Callable[[str], None] | None = None
    """Where the log's lines go (:mod:`.events`: accepts, refusals, sessions, takeovers)."""
    host_sessions: int = 0
    """``serve --host-sessions [N]``: ``N`` host processes serve every session
    (:mod:`.session_host`, :mod:`coding_agent.worker.host`; a new session goes to the one
    hosting the fewest) instead of a worker process per session (0; ``serve``'s default on
    JSONL, one host per core on PostgreSQL)."""
    db_pool_size: int = DEFAULT_POOL_SIZE
    """``--db-pool-size``: with ``host_sessions`` on PostgreSQL, the connections each host's
    sessions commit on (plus one renewing every lease), whatever the number of sessions."""
    db_connections: int | None = None
    """The PostgreSQL connections the server holds at most (logged; ``--db-connections``)."""


@dataclass
class _Slot:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    supervisor: WorkerSupervisor | HostedSession | None = None
    counted: bool = False
    """Whether it holds one of ``--max-sessions``' places (from its start to its reaping)."""


class SessionServer:
    """The session table and the connection handler (see the module docstring)."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.credentials = options.credentials or Credentials()
        self.log = ServerLog(options.on_event)
        self.limits = options.limits or default_limits(
            resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        )
        self.gate = Gate(self.limits, self._shed_ticket)
        self._slots: dict[str, _Slot] = {}
        self._directory = SessionDirectory(options.storage) if options.storage else None
        self._group: anyio.abc.TaskGroup | None = None
        self._by_token: dict[str, set[anyio.CancelScope]] = {}
        self._starting = anyio.Semaphore(options.max_starting)
        self._sessions = anyio.Semaphore(options.max_sessions) if options.max_sessions else None
        self.hosts: list[HostProcess] = []
        """The session host processes (``host_sessions``), made when the server runs."""
        self._turn = 0
        self.connections = 0
        """Connections relayed to a worker so far."""
        self.refused = 0
        """Connections refused at the preface or the TLS handshake, or shed."""

    # -- running ---------------------------------------------------------------------------------
    async def run(
        self,
        *,
        socket_path: Path,
        tcp: tuple[str, int] | None = None,
        ready: Callable[[list[str]], None] | None = None,
    ) -> None:
        """Listen on ``socket_path`` (and ``tcp``, with TLS when the credentials have a
        certificate), call ``ready(addresses)``, and serve until cancelled; then stop every
        worker it started."""
        prepare_socket_folder(socket_path, self.options.env)
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                for number in range(self.options.host_sessions):
                    name = "session-host" if number == 0 else f"session-host-{number + 1}"
                    host = HostProcess(
                        env=self.options.env,
                        storage=self.options.storage,
                        pool_size=self.options.db_pool_size,
                        linger=self.options.idle,
                        lease=self.options.lease,
                        log_path=socket_path.parent / f"{name}.log",
                        cwd=self.options.cwd,
                        on_event=lambda line: self.log("host", line),
                    )
                    await group.start(host.run)
                    self.hosts.append(host)
                await group.start(serve_unix, socket_path, self._unix_client)
                addresses = [f"unix:{socket_path}"]
                if tcp is not None:
                    port = await group.start(
                        functools.partial(
                            serve_tcp, on_shed=self._shed_address, out_of_fds=self.gate.out_of_fds
                        ),
                        tcp[0], tcp[1], self._tcp_client,
                    )  # fmt: skip
                    host = f"[{tcp[0]}]" if ":" in tcp[0] else tcp[0]
                    addresses.append(f"tcp://{host}:{port}")
                for address in addresses:
                    self.log("listening", address=address)
                if ready is not None:
                    ready(addresses)
                await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await self.stop_workers()
                if self._directory is not None:
                    await self._directory.aclose()

    async def stop_workers(self) -> None:
        """SIGTERM every worker this server started and wait for them (a clean stop)."""
        for slot in list(self._slots.values()):
            if slot.supervisor is not None:
                await slot.supervisor.stop()

    def reload(self) -> None:
        """Read the token file and the certificate again (SIGHUP). Connections admitted with a
        token that is gone (or changed) are closed; a file that does not load changes nothing."""
        try:
            revoked = self.credentials.reload()
        except ServerSetupError as error:
            self.log("reload", f"kept the tokens and certificate in force: {error}", ok="no")
            return
        closed = 0
        for name in revoked:
            for scope in self._by_token.pop(name, set()):
                scope.cancel()
                closed += 1
        tokens = ",".join(sorted(self.credentials.tokens or ())) or None
        self.log(
            "reload", "read the token file and the certificate again", ok="yes",
            tokens=tokens, revoked=",".join(revoked) or None, closed=closed or None,
        )  # fmt: skip

    # -- connections -----------------------------------------------------------------------------
    async def _unix_client(self, conn: FrameConnection) -> None:
        # A Unix client was already checked to be of our uid; no token is asked of it.
        with Ticket(self.gate, "unix") as ticket:
            await self._guarded(
                self._client(conn.stream, ticket, tls=None, tokens=None, peer="unix"), "unix"
            )

    async def _guarded(self, connection: Awaitable[None], peer: str) -> None:
        """Run one client's connection; whatever goes wrong in it ends that connection only.

        The server's listeners run every connection in their own task group, so an error that
        escaped one (a client that vanished in the middle of the preface's reply, a stream
        error the relay did not expect) would stop the whole server and its workers.
        """
        try:
            await connection
        except Exception as error:
            self.log("error", f"{type(error).__name__}: {error}", peer=peer)

    async def _tcp_client(self, sock: socket.socket, address: str) -> None:
        ticket = self.gate.enter(address)
        if ticket is None:
            sock.close()
            self.refused += 1
            self.log(
                "shed", f"over {self.limits.max_per_address} pending connections from one address",
                peer=address, reason="per_address_cap",
            )  # fmt: skip
            return
        try:
            stream: anyio.abc.ByteStream = await anyio.abc.SocketStream.from_socket(sock)
        except OSError as error:
            sock.close()
            ticket.__exit__()
            self.log("error", f"cannot use the connection: {error}", peer=address)
            return
        try:
            port = stream.extra(anyio.abc.SocketAttribute.remote_port)
            peer = f"tcp:{address}:{port}" if ":" not in address else f"tcp:[{address}]:{port}"
        except Exception:
            peer = f"tcp:{address}"
        try:
            with ticket, ticket.scope:
                await self._guarded(
                    self._client(
                        stream, ticket, tls=self.credentials.tls,
                        tokens=self.credentials.tokens, peer=peer,
                    ),
                    peer,
                )  # fmt: skip
        finally:
            await anyio.aclose_forcefully(stream)

    async def _client(
        self,
        stream: anyio.abc.ByteStream,
        ticket: Ticket,
        *,
        tls: ssl.SSLContext | None,
        tokens: Mapping[str, bytes] | None,
        peer: str,
    ) -> None:
        name: str | None = None
        try:
            with anyio.fail_after(PREFACE_TIMEOUT):
                if tls is not None:
                    try:
                        stream = await TLSStream.wrap(
                            stream, server_side=True, ssl_context=tls, standard_compatible=False
                        )
                    except Exception as error:
                        self.refused += 1
                        self.log("tls_failed", f"TLS handshake failed: {_reason(error)}", peer=peer)
                        return
                buffered = BufferedByteReceiveStream(stream)
                line = await self._read_line(buffered)
        except TimeoutError:
            self.refused += 1
            what = "TLS handshake and preface" if tls is not None else "preface"
            self.log("refused", f"no {what} within {PREFACE_TIMEOUT:g} s", peer=peer,
                     reason="preface_timeout")  # fmt: skip
            return
        except PrefaceError as error:
            buffered, line, bad = BufferedByteReceiveStream(stream), b"", error
        else:
            bad = None
        try:
            if bad is not None:
                raise bad
            given, rest = split_preface(line)
            name = check_token(given, tokens)  # before anything else of the line is looked at
            if not ticket.admit():
                raise PrefaceError(
                    "busy",
                    f"the server has its {self.limits.max_connections} connections "
                    "(--max-connections): try another server of the list, or later",
                )
            request = parse_request(rest)
            session = await self._session_for(request)
            worker = await self._dial(session)
        except PrefaceError as error:
            self.refused += 1
            self.log("refused", error.message, peer=peer, reason=error.code, token=name)
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
        scope = ticket.scope
        if name is not None:
            self._by_token.setdefault(name, set()).add(scope)
        try:
            info: dict[str, Any] = {
                "session": session.id, "cwd": str(session.cwd), "model": session.model
            }  # fmt: skip
            wait = self.options.wait_for_approval
            if wait is not None:  # JSON has no infinity: "until-answered"
                info["waitForApproval"] = "until-answered" if math.isinf(wait) else wait
            await stream.send(encode_reply(info))
            self.connections += 1
            self.log("accepted", peer=peer, token=name, session=session.id)
            await _relay(buffered, stream, worker.stream)
        finally:
            if name is not None:
                self._by_token.get(name, set()).discard(scope)
            await worker.aclose()

    async def _read_line(self, buffered: BufferedByteReceiveStream) -> bytes:
        try:
            return await buffered.receive_until(b"\n", MAX_PREFACE)
        except anyio.DelimiterNotFound:
            raise PrefaceError(
                "bad_preface", f"no preface line within {MAX_PREFACE} bytes"
            ) from None
        except (
            anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError, ssl.SSLError,
            OSError,
        ):  # fmt: skip
            raise PrefaceError("bad_preface", "the connection ended before the preface") from None

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
                session = open_session(request.session, env=env)
            except SessionError:
                metadata = await directory.get(request.session) if directory is not None else None
                if metadata is None:
                    raise
                _check_folder(metadata.id, Path(metadata.cwd))  # before a folder is made
                self.log("takeover", "made by another server; adopting it", session=metadata.id)
                return adopt_session(metadata, env=env)
            _check_folder(session.id, session.cwd)
            return session
        except SessionError as error:  # told of this server, not of its folders
            said = str(error).replace(f" in {sessions_root(env)}", " on this server")
            raise PrefaceError("not_found" if not request.new else "start_failed", said) from None
        except psycopg.Error as error:
            raise PrefaceError("start_failed", f"the session directory failed: {error}") from None

    async def _dial(self, session: Session) -> FrameConnection:
        """A connection to the worker of ``session``, started first when none serves it.

        The start is not under this method's deadline (a start waits its turn in the queue,
        and the supervisor bounds the start itself): a start cut short would leave a worker
        running that nobody reaps."""
        deadline = anyio.current_time() + READY_TIMEOUT
        while True:
            await self._ensure_worker(session)
            try:
                return await connect_unix(session.socket_path)
            except (FileNotFoundError, ConnectionRefusedError):
                pass  # a worker starting (not listening yet) or just gone: look again
            if anyio.current_time() > deadline:
                raise PrefaceError(
                    "start_failed", f"the worker of session {session.id} did not answer"
                )
            await anyio.sleep(0.05)

    async def _ensure_worker(self, session: Session) -> None:
        slot = self._slots.setdefault(session.id, _Slot())
        async with slot.lock:
            if slot.supervisor is not None and session.worker_running():
                return  # ours, and serving
            if slot.supervisor is None and self.hosts:
                # the least loaded; in turn among equals (a storm's starts are not hosted yet)
                self._turn += 1
                order = self.hosts[self._turn % len(self.hosts) :] + self.hosts
                host = min(order, key=lambda h: h.hosted)
                slot.supervisor = host.session(session)
            elif slot.supervisor is None:
                slot.supervisor = WorkerSupervisor(
                    session,
                    exit_with_parent=True,  # the server's workers die with it
                    env=self.options.env,
                    storage=self.options.storage,
                    linger=self.options.idle,
                    lease=self.options.lease,
                    on_event=lambda line, sid=session.id: self.log("session", line, id=sid),
                )
            supervisor = slot.supervisor
            if not slot.counted:
                await self._take_session_place(session.id)
                slot.counted = True
            try:
                started = await self._start(session.id, supervisor)
            except WorkerStartError as error:
                self._forget(slot)
                raise PrefaceError("start_failed", error.reason()) from None
            except OSError as error:  # no process could be made (out of descriptors, memory)
                with anyio.CancelScope(shield=True):
                    await supervisor.stop()
                self._forget(slot)
                raise PrefaceError("start_failed", f"cannot start a worker: {error}") from None
            except BaseException:  # cancelled mid-start (the server stopping): no worker left
                with anyio.CancelScope(shield=True):
                    await supervisor.stop()
                self._forget(slot)
                raise
            if not started and supervisor.pid is None:
                self._forget(slot)  # someone else's worker serves it (a local TUI's)
            elif started:
                assert self._group is not None
                self._group.start_soon(self._reap, session.id, slot, supervisor)

    async def _take_session_place(self, session_id: str) -> None:
        """Wait (up to :data:`SESSION_QUEUE_TIMEOUT`) for one of ``--max-sessions``' places."""
        places = self._sessions
        if places is None:
            return
        if places.value == 0:
            self.log("session", "queued: the server runs its --max-sessions", id=session_id,
                     running=self.options.max_sessions)  # fmt: skip
        with anyio.move_on_after(SESSION_QUEUE_TIMEOUT):
            await places.acquire()
            return
        raise PrefaceError(
            "busy",
            f"the server runs its {self.options.max_sessions} sessions (--max-sessions) and none "
            f"ended within {SESSION_QUEUE_TIMEOUT:g} s: try another server of the list, or later",
        )

    async def _start(self, session_id: str, supervisor: WorkerSupervisor | HostedSession) -> bool:
        """``supervisor.ensure_started()`` in its turn: at most ``--max-starting`` at once, the
        others queued in order (a start-up storm is queued, not timed out); one that waited
        :data:`SESSION_QUEUE_TIMEOUT` is answered ``busy`` while its client still listens."""
        if self._starting.value == 0:
            self.log("session", "queued for a start", id=session_id,
                     starting=self.options.max_starting)  # fmt: skip
        with anyio.move_on_after(SESSION_QUEUE_TIMEOUT) as queued:
            await self._starting.acquire()
        if queued.cancelled_caught:
            raise PrefaceError(
                "busy",
                f"the server is starting {self.options.max_starting} sessions at a time and this "
                f"one waited {SESSION_QUEUE_TIMEOUT:g} s: try another server of the list, or later",
            )
        try:
            return await supervisor.ensure_started()
        finally:
            self._starting.release()

    def _forget(self, slot: _Slot) -> None:
        slot.supervisor = None
        if slot.counted:
            slot.counted = False
            if self._sessions is not None:
                self._sessions.release()

    async def _reap(
        self, session_id: str, slot: _Slot, supervisor: WorkerSupervisor | HostedSession
    ) -> None:
        status = await supervisor.wait()
        async with slot.lock:
            if slot.supervisor is supervisor:
                self._forget(slot)
        self.log("session", f"worker exited ({status}): reaped", id=session_id)

    def _shed_ticket(self, ticket: Ticket, reason: str) -> None:
        self.refused += 1
        message = (
            "out of file descriptors: closed the oldest pending connection"
            if reason == "no_file_descriptors"
            else f"{self.gate.limits.max_pending} pending connections: closed the oldest"
        )
        self.log("shed", message, peer=ticket.address, reason=reason)

    def _shed_address(self, address: str, reason: str) -> None:
        self.refused += 1
        self.log("shed", "out of file descriptors: closed a new connection", peer=address,
                 reason=reason)  # fmt: skip


def _check_folder(session_id: str, cwd: Path) -> None:
    """Refuse to serve a session whose working folder this server cannot see: its worker would
    run the conversation's commands somewhere else than the files they were about."""
    if not cwd.is_dir():
        raise PrefaceError(
            "folder_missing",
            f"session {session_id} works in {cwd}, which this server cannot see: the project "
            "folder must be on storage every server of the database mounts at the same path "
            "(docs/server.md#failover)",
        )


def _reason(error: BaseException) -> str:
    """A failed handshake's reason, never empty (anyio's wrappers carry it as their cause)."""
    seen: BaseException | None = error
    while seen is not None:
        text = str(seen).strip()
        if text:
            return f"{type(seen).__name__}: {text}"
        seen = seen.__cause__ or seen.__context__
    if isinstance(error, (anyio.EndOfStream, anyio.BrokenResourceError)):
        return "the client closed the connection during the handshake"
    return type(error).__name__


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
