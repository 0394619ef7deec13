"""The warm start's rendezvous: whether it is on, where its fork server listens, and the frames
the thin client, the server and ``coding-agent doctor`` / ``warm-start stop`` exchange.

The warm start (:mod:`coding_agent.warm`, docs/design/warm-start.md) is on by default: off when
``$CODING_AGENT_WARM_START`` is ``0`` (``1`` turns it on whatever the file says), else when the
user's own ``config.toml`` says ``warm_start = false`` (a project's file may not set it: it would
decide which code serves the user's other projects), else on a CI runner (``$CI`` set). A config file that cannot be read as TOML
turns it off: the command then runs in the process started, which reports the broken file.

Everything here is imported by the thin client before it knows whether a server is there, so it
imports the standard library's ``os`` and ``socket`` only: no ``pathlib``, no ``json`` (``re``
with it), no ``typing`` at run time, no ``tomllib`` unless the user's config file mentions the
key (the client's whole import cost is what ``python -c "import socket"`` pays). The folder rule matches
:func:`coding_agent.settings.xdg.state_home`, written with ``os.path`` for that reason.

The socket lives in a private folder of the user's (``$XDG_RUNTIME_DIR/coding-agent``, else
``state_home()/coding-agent/run``; made 0700, and a folder that is not the user's own or is open
to others is refused); its name carries a hash of the Python executable and of the installed
app's folder, so two installations (or two virtual environments) never share a server.

Frames: a request is a 4-byte big-endian length and NUL-separated fields (no argv word, folder
or environment entry can hold a NUL): the protocol's version, ``op`` (``run``, ``ping`` or ``stop``), then for ``run``
the kind (``cli`` or ``worker``), ``argv[0]``, the folder, the umask, the signals the client
ignores (comma-separated numbers), its resource limits (``RLIMIT:soft:hard``, comma-separated),
its nice value, its CPU affinity (comma-separated CPUs), the number of arguments,
the arguments, and the environment's names and values in turn; a ``run`` request carries the
client's stdin, stdout and stderr with ``SCM_RIGHTS``. The server answers with lines: ``P<pid>`` (the child runs), ``X<status>`` (it
exited), ``S<signal>`` (a signal ended it), ``R<reason>`` (refused: the client runs the command
itself) or, to a ping, ``O<json>``. The client sends ``K<signal>`` lines to relay a signal.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence

TYPE_CHECKING = False  # not `from typing import`: typing (with re) costs the thin client ~5 ms

if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ENV",
    "IDLE_ENV",
    "RUNTIME_ENV",
    "WarmStartError",
    "decode_request",
    "enabled",
    "encode_request",
    "install_key",
    "make_private_dir",
    "ping",
    "process_limits",
    "read_line",
    "recv_request",
    "runtime_dir",
    "send_request",
    "socket_path",
    "stop",
]

ENV = "CODING_AGENT_WARM_START"
"""``0``: never use (or start) the fork server; ``1``: always, whatever config.toml says."""

IDLE_ENV = "CODING_AGENT_WARM_START_IDLE"
"""Seconds without a request after which the server ends (default :data:`IDLE_DEFAULT`)."""

IDLE_DEFAULT = 600.0
"""Ten minutes, as the session worker's linger."""

RUNTIME_ENV = "XDG_RUNTIME_DIR"

_MAX_FRAME = 16 * 1024 * 1024
_VERSION = "coding-agent-warm/2"
"""The frames' first field: a client and a server of different releases refuse each other."""
_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


class WarmStartError(OSError):
    """The server could not be reached or answered what no server says."""


def enabled(env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """Whether the warm start is on, and where that came from (for ``coding-agent config``):
    ``$CODING_AGENT_WARM_START``, else ``warm_start`` in the user's config.toml, else off on a
    CI runner (``$CI`` set: a job's one run would pay for a server no later run uses, as Nx
    turns its daemon off there), else on."""
    environ = os.environ if env is None else env
    value = environ.get(ENV, "").strip().lower()
    if value in _ON:
        return True, f"environment ${ENV}"
    if value in _OFF:
        return False, f"environment ${ENV}"
    path = os.path.join(_config_home(environ), "coding-agent", "config.toml")
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except OSError:
        raw = b""
    if b"warm_start" in raw:  # the common case costs no TOML parser
        import tomllib  # only when the file names the key

        try:
            value = tomllib.loads(raw.decode("utf-8")).get("warm_start")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            return False, path  # run here: the normal path reports the broken file
        if value is not None:
            return value is not False, path
    if environ.get("CI", "").strip().lower() in _ON:
        return False, "default on a CI runner ($CI is set)"
    return True, "default"


def process_limits() -> tuple[list[tuple[int, int, int]], int, list[int]]:
    """This process's resource limits (``(RLIMIT_*, soft, hard)``), nice value and CPU
    affinity: what a process the client started would run under, and so the forked child."""
    import resource  # a C module: ~0.2 ms

    numbers = sorted(getattr(resource, n) for n in dir(resource) if n.startswith("RLIMIT_"))
    limits = [(number, *resource.getrlimit(number)) for number in numbers]
    return limits, os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0))


def _config_home(environ: Mapping[str, str]) -> str:
    value = environ.get("XDG_CONFIG_HOME", "")
    if value and os.path.isabs(value):
        return value
    return os.path.join(os.path.expanduser("~"), ".config")


def _state_home(environ: Mapping[str, str]) -> str:
    value = environ.get("XDG_STATE_HOME", "")
    if value and os.path.isabs(value):
        return value
    return os.path.join(os.path.expanduser("~"), ".local/state")


def runtime_dir(env: Mapping[str, str] | None = None) -> str:
    """The user's private folder for the server's socket (not created here)."""
    environ = os.environ if env is None else env
    value = environ.get(RUNTIME_ENV, "")
    if value and os.path.isabs(value):
        return os.path.join(value, "coding-agent")
    return os.path.join(_state_home(environ), "coding-agent", "run")


def install_key(executable: str, app_dir: str) -> str:
    """A short hash naming one installation: the interpreter and the app's package folder."""
    import zlib  # not hashlib: that loads OpenSSL (milliseconds) for a name, not a secret

    key = f"{executable}\0{app_dir}".encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(key):08x}{zlib.adler32(key):08x}"


def socket_path(env: Mapping[str, str] | None = None, *, executable: str | None = None) -> str:
    """Where this installation's server listens for this user."""
    import sys

    app_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    key = install_key(executable or sys.executable, app_dir)
    return os.path.join(runtime_dir(env), f"warm-{key}.sock")


def make_private_dir(path: str) -> None:
    """Create ``path`` (0700) if needed; refuse one that is not the user's or open to others."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    found = os.stat(path)
    if found.st_uid != os.getuid():
        raise WarmStartError(f"{path} belongs to another user: remove it or set $XDG_RUNTIME_DIR")
    if found.st_mode & 0o077:
        os.chmod(path, 0o700)


def encode_request(request: Mapping[str, Any]) -> bytes:
    """The frame body of ``request`` (``op``; for ``run``: ``kind``, ``argv0``, ``cwd``,
    ``umask``, ``ignored`` (the signals the client ignores), ``limits`` (its resource limits:
    ``(RLIMIT_*, soft, hard)``), ``nice``, ``cpus`` (its CPU affinity), ``argv``, ``env``)."""
    fields: list[str] = [_VERSION, str(request["op"])]
    if request["op"] == "run":
        argv: Sequence[str] = request["argv"]
        ignored = ",".join(str(int(n)) for n in request["ignored"])
        limits = ",".join(":".join(str(int(v)) for v in limit) for limit in request["limits"])
        cpus = ",".join(str(int(n)) for n in request["cpus"])
        fields += [str(request["kind"]), str(request["argv0"]), str(request["cwd"]),
                   str(int(request["umask"])), ignored, limits, str(int(request["nice"])), cpus,
                   str(len(argv)), *argv]  # fmt: skip
        for name, value in dict(request["env"]).items():
            fields += [name, value]
    if any("\0" in field for field in fields):
        raise ValueError("an argument or environment entry holds a NUL")
    return "\0".join(fields).encode("utf-8", "surrogateescape")


def decode_request(body: bytes) -> dict[str, Any]:
    """The request :func:`encode_request` made (raises ``ValueError`` on anything else)."""
    version, *fields = body.decode("utf-8", "surrogateescape").split("\0")
    if version != _VERSION:
        raise ValueError(f"a request of another protocol ({version[:40]!r}, not {_VERSION!r})")
    op = fields[0]
    if op != "run":
        return {"op": op}
    kind, argv0, cwd, umask, ignored, limits, nice, cpus, count = fields[1:10]
    end = 10 + int(count)
    argv, rest = fields[10:end], fields[end:]
    if len(argv) != int(count) or len(rest) % 2:
        raise ValueError("a run request's fields do not add up")
    env = dict(zip(rest[::2], rest[1::2], strict=True))
    return {"op": op, "kind": kind, "argv0": argv0, "cwd": cwd, "umask": int(umask),
            "ignored": [int(n) for n in ignored.split(",") if n],
            "limits": [tuple(int(v) for v in limit.split(":")) for limit in limits.split(",")
                       if limit],
            "nice": int(nice), "cpus": [int(n) for n in cpus.split(",") if n], "argv": argv,
            "env": env}  # fmt: skip


def send_request(sock: socket.socket, request: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
    """One request frame, with ``fds`` passed along (SCM_RIGHTS)."""
    body = encode_request(request)
    frame = len(body).to_bytes(4, "big") + body
    if fds:
        sent = socket.send_fds(sock, [frame], list(fds))
        if sent < len(frame):
            sock.sendall(frame[sent:])
    else:
        sock.sendall(frame)


def recv_request(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One request frame and the fds that came with it (raises :class:`WarmStartError`)."""
    data, fds, _flags, _address = socket.recv_fds(sock, 65536, 8)
    try:
        if not data:
            raise WarmStartError("the client left before its request")
        while len(data) < 4:
            more = sock.recv(65536)
            if not more:
                raise WarmStartError("the client left before its request was whole")
            data += more
        size = int.from_bytes(data[:4], "big")
        if size > _MAX_FRAME:
            raise WarmStartError(f"a request of {size} bytes is too large")
        while len(data) < 4 + size:
            more = sock.recv(65536)
            if not more:
                raise WarmStartError("the client left before its request was whole")
            data += more
        request = decode_request(data[4 : 4 + size])
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return request, fds


def read_line(sock: socket.socket, pending: bytearray) -> bytes | None:
    """The next ``\\n``-ended line from ``sock`` (``None`` at EOF); ``pending`` keeps the rest."""
    while b"\n" not in pending:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        pending += chunk
    line, _, rest = bytes(pending).partition(b"\n")
    pending[:] = rest
    return line


def _connect(path: str, timeout: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def _ask(op: str, env: Mapping[str, str] | None, timeout: float) -> dict[str, Any] | None:
    """Send the running server the request ``op``; its ``O`` answer, or ``None`` when none."""
    try:
        with _connect(socket_path(env), timeout) as sock:
            send_request(sock, {"op": op})
            line = read_line(sock, bytearray())
    except OSError:
        return None
    if not line or not line.startswith(b"O"):
        return None
    import json  # not on the thin client's path

    answer = json.loads(line[1:])
    return answer if isinstance(answer, dict) else None


def ping(env: Mapping[str, str] | None = None, *, timeout: float = 5.0) -> dict[str, Any] | None:
    """The running server's description (pid, preloaded modules, idle timeout), or ``None``."""
    return _ask("ping", env, timeout)


def stop(env: Mapping[str, str] | None = None, *, timeout: float = 5.0) -> int | None:
    """Ask the running server to end; its pid, or ``None`` when none answered. The server stops
    taking requests at once and exits when the commands it runs are done."""
    answer = _ask("stop", env, timeout)
    return int(answer["pid"]) if answer is not None and "pid" in answer else None
