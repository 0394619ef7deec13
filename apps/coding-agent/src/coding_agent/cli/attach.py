"""``coding-agent attach tcp://HOST:PORT/SESSION`` and ``-p``/``--json --server URL``.

Both dial the server once up front (:func:`~coding_agent.server.remote.connect_server`): a
refusal (wrong token, unknown session, a worker that cannot start) or a TLS failure is one
``coding-agent: error:`` line before anything else runs. Then a reconnecting wire source keeps
the session's connection: a dropped connection (a worker restarted, the network) is dialled
again and every facade rehydrates, as over a local socket.

A refused token on a reconnect (revoked or changed on the server, ``serve``'s SIGHUP) is
final, as on the first dial: one line, exit 2, no dialling again.

Exit codes as for local runs; in addition 1 when the server cannot be reached or its
certificate is not trusted, 2 when it refuses the token or does not know the session.
"""

from __future__ import annotations

import argparse
import math
import ssl
import sys
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import anyio

from chord import (
    BACKGROUND,
    FrameConnection,
    RemoteServiceError,
    WireServiceSource,
    connect_service_source,
    connect_unix,
    create_facet_host,
)
from coding_agent.cli.headless import (
    Event,
    HeadlessMode,
    TurnOutcome,
    _describe,
    _mode_now,
    _presentation,
    _responders,
    _Root,
    _service_user,
    follow_turn,
    headless_mode,
    interrupted_reporter,
    report_failure,
    report_turn,
)
from coding_agent.cli.interrupt import Interrupt, until_interrupted
from coding_agent.context.mentions import mention_blocks, names_paths
from coding_agent.contracts import (
    APPROVAL_DIALOGS,
    APPROVAL_MODE,
    QUESTION_DIALOGS,
    TurnLimitService,
    WorkerStatusService,
)
from coding_agent.server.preface import Request
from coding_agent.server.remote import (
    NoServerReachable,
    ServerAddress,
    ServerRefused,
    client_tls_context,
    connect_any,
    parse_server_urls,
    resolve_token,
)
from coding_agent.session_files.folders import METADATA_VERSION, Session, SessionMetadata
from coding_agent.settings.run_options import RunFlags

__all__ = ["remote_session", "run_headless_on_server", "run_remote_attach", "run_remote_headless"]

EXIT_FAILED = 1
EXIT_USAGE = 2

_FEATURES = {APPROVAL_DIALOGS.id: "facets-approval", QUESTION_DIALOGS.id: "facets-question"}


class _Dial:
    """The address and credentials of a server, from the command line."""

    def __init__(self, url: str, args: argparse.Namespace) -> None:
        self.addresses, self.session = parse_server_urls(url)
        self.address = self.addresses[0]
        self.index = 0
        """The address of the list that answered last: a reconnect tries it first."""
        self.token = resolve_token(getattr(args, "token_file", None))
        self.insecure = bool(getattr(args, "insecure", False))
        ca = getattr(args, "tls_ca", None)
        self.tls: ssl.SSLContext | None = None
        if any(address.path is None for address in self.addresses) and not self.insecure:
            self.tls = client_tls_context(ca)

    async def first(self, request: Request) -> tuple[FrameConnection, dict[str, Any]]:
        conn, info, self.index = await connect_any(
            self.addresses, request, token=self.token, tls=self.tls, insecure=self.insecure,
            on_failover=_say_failover,
        )  # fmt: skip
        self.address = self.addresses[self.index]
        return conn, info

    def again(self, session_id: str, *, say: bool = True) -> Any:
        """Connect to the session again: the server that answered last first, then the next
        ones of the list (failover), each failover one line on stderr unless ``say`` is false
        (the TUI's screen is the terminal)."""

        async def connect() -> FrameConnection:
            conn, _info, self.index = await connect_any(
                self.addresses, Request(session=session_id), start=self.index,
                token=self.token, tls=self.tls, insecure=self.insecure,
                on_failover=_say_failover if say else None,
            )  # fmt: skip
            self.address = self.addresses[self.index]
            return conn

        return connect


def _revoked(error: BaseException, how: str) -> str | None:
    """The line for a token refused on a reconnect (``how``: what to do again), else ``None``."""
    if not isinstance(error, ServerRefused) or error.code != "unauthorized":
        return None
    return (
        f"{error.address}: the server refused this token: it was revoked or changed; "
        f"{how} again with a valid token"
    )


def _say_failover(line: str) -> None:
    print(f"coding-agent: {line}", file=sys.stderr, flush=True)


def _fail(message: str, code: int, mode: HeadlessMode = "print") -> int:
    """One ``coding-agent: error:`` line (and, for ``-p --output-format json|stream-json``,
    Claude Code's error result on stdout); returns ``code``."""
    print(f"coding-agent: error: {message}", file=sys.stderr)
    report_failure(mode, sys.stdout, message)
    return code


def _dial_error(
    address: ServerAddress, error: BaseException, mode: HeadlessMode = "print"
) -> int | None:
    """The exit code (after its one line; ``mode``: the headless run's, see :func:`_fail`) of
    a failure to reach the server, else ``None``."""
    if isinstance(error, NoServerReachable):
        return _fail(str(error), EXIT_FAILED, mode)
    if isinstance(error, ServerRefused):
        usage = error.code in ("unauthorized", "not_found", "bad_preface")
        return _fail(str(error), EXIT_USAGE if usage else EXIT_FAILED, mode)
    if isinstance(error, ssl.SSLCertVerificationError):
        return _fail(
            f"{address}: the server's TLS certificate is not trusted ({error.verify_message}): "
            "give its CA (or its self-signed certificate) with --tls-ca FILE",
            EXIT_FAILED,
            mode,
        )
    if isinstance(error, ssl.SSLError):
        return _fail(f"{address}: TLS failed: {error} (is it a TLS port?)", EXIT_FAILED, mode)
    if isinstance(error, OSError):
        reason = error.strerror or str(error)
        if reason.startswith(f"{address}: "):  # it names the server already
            reason = reason.removeprefix(f"{address}: ")
        return _fail(f"cannot reach the server at {address}: {reason}", EXIT_FAILED, mode)
    return None


def remote_session(info: dict[str, Any], address: ServerAddress) -> Session:
    """A stand-in :class:`Session` for a session that lives on a server (its id, folder and
    model as the server said; no local folder)."""
    metadata = SessionMetadata(
        version=METADATA_VERSION,
        id=str(info["session"]),
        cwd=str(info.get("cwd") or "/"),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        model=info.get("model"),
    )
    return Session(Path("/nonexistent") / f"{address}".replace("/", "_") / metadata.id, metadata)


def run_remote_attach(args: argparse.Namespace) -> int:
    """``attach tcp://HOST:PORT/SESSION``: the TUI on a session hosted by a server."""
    try:
        dial = _Dial(args.session, args)
    except ValueError as error:
        return _fail(str(error), EXIT_USAGE)
    if dial.session is None:
        return _fail(
            f"attach {args.session}: name the session: tcp://HOST:PORT/SESSION", EXIT_USAGE
        )
    return int(anyio.run(_attach, dial, backend="asyncio"))


async def _attach(dial: _Dial) -> int:
    # lazy: start-up time (-p --server never loads the TUI)
    from coding_agent.tui.main import ConnectRefused, run_client

    assert dial.session is not None
    try:
        conn, info = await dial.first(Request(session=dial.session))
    except Exception as error:
        code = _dial_error(dial.address, error)
        if code is None:
            raise
        return code
    pending = [conn]
    again = dial.again(str(info["session"]), say=False)

    async def connect() -> FrameConnection:
        if pending:
            return pending.pop()
        try:
            return await again()
        except ServerRefused as error:
            line = _revoked(error, "attach")
            if line is None:
                raise
            raise ConnectRefused(line) from error  # final: the TUI ends

    session = remote_session(info, dial.address)
    try:
        await run_client(session, supervisor=None, connect=connect)
    except ConnectRefused as refused:
        return _fail(str(refused), EXIT_USAGE)
    finally:
        for left in pending:
            await left.aclose()
    print(f"Detached from session {session.id} on {dial.address} (it keeps running there)")
    return 0


def run_remote_headless(args: argparse.Namespace, prompt: str) -> int:
    """``-p``/``--json PROMPT --server URL``: one turn in a session hosted by a server."""
    mode: HeadlessMode = headless_mode(args.json is not None, args.output_format)
    try:
        dial = _Dial(args.server, args)
    except ValueError as error:
        return _fail(str(error), EXIT_USAGE, mode)
    if names_paths(prompt):  # the working folder is the server's: no local file is read
        print(
            "coding-agent: warning: @file mentions are not attached for server sessions (the "
            "files are on the server); the prompt is sent as typed",
            file=sys.stderr,
        )
        sys.stderr.flush()
    interrupt = Interrupt()  # Ctrl+C aborts the server's turn, as a local run's
    interrupt.report = interrupted_reporter(mode, sys.stdout, sys.stderr)
    run = (_headless_main, dial, prompt, mode, args.approve, args.verbose, args.model)
    wait, turns = args.wait_for_approval, args.max_turns
    return int(
        anyio.run(until_interrupted, interrupt, *run, wait, interrupt, turns, backend="asyncio")
    )


async def _headless_main(
    dial: _Dial,
    prompt: str,
    mode: HeadlessMode,
    approve: Any,
    verbose: bool,
    model: str | None,
    wait: float | None,
    interrupt: Interrupt | None = None,
    max_turns: int | None = None,
) -> int:
    request = Request(session=dial.session) if dial.session else Request(new=True, model=model)
    try:
        conn, info = await dial.first(request)
    except Exception as error:
        code = _dial_error(dial.address, error, mode)
        if code is None:
            raise
        return code
    if wait is None:  # the server's default (serve --wait-for-approval), if it has one
        announced = info.get("waitForApproval")
        if announced == "until-answered":
            wait = math.inf
        elif isinstance(announced, (int, float)) and announced >= 0:
            wait = float(announced)
    return await run_headless_on_server(
        prompt, conn, info, dial.again(str(info["session"])), mode=mode, out=sys.stdout,
        approve=approve, verbose=verbose, wait=wait, interrupt=interrupt, max_turns=max_turns,
    )  # fmt: skip


async def run_headless_on_server(
    prompt: str | list[dict[str, Any]],
    first: FrameConnection,
    info: dict[str, Any],
    again: Any,
    *,
    mode: HeadlessMode = "print",
    out: TextIO,
    approve: Any = "deny",
    err: TextIO | None = None,
    verbose: bool = False,
    wait: float | None = None,
    watch: Callable[[WireServiceSource], Coroutine[Any, Any, None]] | None = None,
    interrupt: Interrupt | None = None,
    left_out: frozenset[str] = frozenset(),
    max_turns: int | None = None,
) -> int:
    """Run one turn of ``prompt`` in the server's session ``info`` over ``first`` (and
    ``again()`` after a drop), reporting as the local headless modes do. ``wait`` parks each
    approval that long for another client to answer (``--wait-for-approval``); ``watch`` runs
    beside the turn with the connection's source (a local worker's supervisor restarts it);
    ``interrupt``'s first signal aborts the turn in the session (:mod:`coding_agent.cli.
    interrupt`). ``left_out``: the tools the worker's ``--tools`` leaves out (not listed as
    offered). ``max_turns`` (``--max-turns``): the prompt is sent through the worker's
    :data:`~coding_agent.contracts.TurnLimitService`, so the worker that runs the turn stops
    it after that many model calls (:mod:`coding_agent.worker.max_turns`); a worker that does
    not offer it (an older version) refuses the run, exit 2, before anything is sent."""
    errors = err if err is not None else sys.stderr
    pending = [first]
    refused: list[str] = []
    turning = anyio.CancelScope()  # cancelled when the server refuses the token: final

    async def connect() -> FrameConnection:
        if pending:
            return pending.pop()
        try:
            return await again()
        except ServerRefused as error:
            line = _revoked(error, "run")
            if line is None:
                raise
            refused.append(line)
            turning.cancel()
            await anyio.sleep_forever()  # until the source closes
            raise

    send_events, receive_events = anyio.create_memory_object_stream[Event](math.inf)
    root = _Root()
    blocked: list[dict[str, Any]] = []
    turn: TurnOutcome | None = None
    async with anyio.create_task_group() as group, send_events, receive_events:

        def dropped(error: BaseException) -> None:  # a restart or a failover: one line, no trace
            del error
            print("coding-agent: the connection to the session dropped; reconnecting", file=errors)

        source = connect_service_source(connect, task_group=group, on_error=dropped)
        with turning:  # the whole turn: a refused token ends it
            try:
                offered = {entry.service_id for entry in await source.catalogue(BACKGROUND)}
                features = {name for sid, name in _FEATURES.items() if sid in offered}
                session_id = info.get("session")
                if max_turns is not None and TurnLimitService.id not in offered:
                    refused.append(
                        "--max-turns: the session's worker does not enforce it (an older "
                        "coding-agent serves it): upgrade the server, or leave --max-turns out"
                    )
                    turning.cancel()
                    await anyio.sleep_forever()  # (cancelled) nothing is sent

                def waiting(request: dict[str, Any]) -> None:
                    how_long = "until then" if wait is None or math.isinf(wait) else f"{wait:g} s"
                    print(
                        f"coding-agent: waiting for approval of the {_describe(request, ' call')}: "
                        f"answer it from coding-agent attach {session_id} (or an editor); "
                        f"waiting {how_long}",
                        file=errors,
                    )
                    errors.flush()

                presentation = _presentation(send_events, root, rehydrate=True)
                facets = [
                    presentation.facet(),
                    *_responders(features, approve, blocked, wait=wait, waiting=waiting),
                ]
                limits: list[Any] = []  # the worker's TurnLimitService, for --max-turns
                if max_turns is not None:
                    facets.append(_service_user(TurnLimitService, limits, "turn-limit"))
                modes: list[Any] = []  # the permission mode Claude Code's init line names
                if APPROVAL_MODE.id in offered:
                    facets.append(_service_user(APPROVAL_MODE, modes, "mode"))
                if WorkerStatusService.id in offered:  # it names the branch the session is on
                    facets.append(presentation.status_facet())
                else:
                    presentation.select(None)  # the root
                if watch is not None:
                    group.start_soon(watch, source)
                async with create_facet_host(facets, service_sources=[source]):
                    await root.chosen.wait()
                    line = {"session": session_id, "cwd": info.get("cwd"), "mode": _mode_now(modes)}

                    async def limited(send: Any) -> int:  # the worker counts and stops the turn
                        assert max_turns is not None
                        conversation = root.found[-1].view.value["conversation"]["id"]
                        try:
                            sent = await limits[-1].send(conversation, send, max_turns, BACKGROUND)
                        except RemoteServiceError as error:  # refused: nothing was sent
                            refused.append(f"--max-turns: {error.message}")
                            turning.cancel()
                            await anyio.sleep_forever()  # (cancelled)
                            raise
                        return int(sent)

                    turn = await follow_turn(
                        prompt,
                        root.found[-1],
                        receive_events,
                        session_line=line,
                        default_model=info.get("model"),
                        mode=mode,
                        out=out,
                        err=errors,
                        verbose=verbose,
                        latest=lambda: root.found[-1],
                        interrupt=interrupt,
                        left_out=left_out,
                        views=presentation.latest,
                        sender=limited if max_turns is not None else None,
                        max_turns=max_turns,
                    )
            finally:
                with anyio.CancelScope(shield=True):
                    await source.aclose()
                group.cancel_scope.cancel()
    if refused:
        print(f"coding-agent: error: {refused[0]}", file=errors)
        report_failure(mode, out, refused[0], str(info.get("session") or ""))  # no result yet
        return EXIT_USAGE
    assert turn is not None
    return report_turn(turn, blocked, mode=mode, out=out, err=errors)


async def run_parked_headless(
    prompt: str,
    session: Session,
    *,
    wait: float,
    mode: HeadlessMode,
    approve: Any,
    out: TextIO,
    verbose: bool = False,
    model: str | None = None,
    thinking: str | None = None,
    permission_mode: str | None = None,
    interrupt: Interrupt | None = None,
    run: RunFlags | None = None,
    max_turns: int | None = None,
) -> int:
    """``-p``/``--json --wait-for-approval``: the turn runs in the session's own worker process
    (started, or reused, by a :class:`~coding_agent.supervisor.WorkerSupervisor`, which restarts
    it if it dies) and this process is one client of it, so a dialog can wait for another:
    ``coding-agent attach SESSION`` or an editor answers it. The worker is left to linger
    afterwards, like a TUI's at ``/quit``; ``run``: Claude Code's run-scoped flags, for the
    worker started here (:mod:`coding_agent.settings.run_options`)."""
    # lazy: start-up time (the command line imports only what the chosen command runs)
    from coding_agent.supervisor import WorkerSupervisor

    keeper = WorkerSupervisor(
        session, model=model, thinking=thinking, permission_mode=permission_mode, run=run
    )
    await keeper.ensure_started()
    try:
        first = await connect_unix(session.socket_path)

        async def again() -> FrameConnection:
            return await connect_unix(session.socket_path)

        info = {"session": session.id, "cwd": str(session.cwd), "model": model or session.model}
        # a local session: @file mentions are attached here, as -p without a worker does
        attached = await anyio.to_thread.run_sync(mention_blocks, prompt, session.cwd)
        content = [{"type": "text", "text": prompt}, *attached] if attached else prompt
        return await run_headless_on_server(
            content, first, info, again, mode=mode, out=out, approve=approve, verbose=verbose,
            wait=wait, watch=keeper.watch, interrupt=interrupt,
            left_out=run.resolve().left_out() if run is not None else frozenset(),
            max_turns=max_turns,
        )  # fmt: skip
    finally:
        with anyio.CancelScope(shield=True):
            await keeper.release()
