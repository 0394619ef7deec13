"""The macOS side of the OS sandbox: a Seatbelt profile for ``sandbox-exec``.

:class:`pico3.Sandbox` runs a command through ``/usr/bin/sandbox-exec -p PROFILE`` on macOS,
with the profile this module writes from the same policy bubblewrap enforces on Linux
(:class:`pico3.SandboxPolicy`), as Codex CLI and Claude Code do on macOS:

* everything may be read, except the unreadable paths (``deny file-read*``, a folder as a
  ``subpath``, a file as a ``literal``);
* only the writable paths (the project, the session's temporary folder, ``allow_write``) and
  ``/dev/null``, ``/dev/tty`` may be written, except the read-only paths inside them;
* no network, except the host's network (``network=True``), or, with the domain proxy, the
  proxy's unix socket and the port on localhost where the forwarder inside listens (then
  ``HTTPS_PROXY`` leads there, as on Linux);
* processes may start and signal only their own sandbox.

**Untested here.** This project's CI and development machines run Linux: the profile is checked
for its text (every path quoted, the rules in the order Seatbelt needs: the last matching rule
wins), never run. A macOS user who finds a command it refuses wrongly should report it with the
output of ``log show --predicate 'sender == "Sandbox"' --last 1m``.

Standard library only (a leaf of pico3's layers).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["SANDBOX_EXEC", "seatbelt_profile"]

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
"""Where macOS keeps ``sandbox-exec``."""

_BASE = """\
(version 1)
(deny default)
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow sysctl-read)
(allow mach-lookup)
(allow ipc-posix-shm)
(allow ipc-posix-sem)
(allow iokit-open)
(allow pseudo-tty)
(allow file-ioctl)
(allow file-read*)
"""


def _quote(path: str) -> str:
    """``path`` as a Seatbelt string literal (backslashes and quotes escaped)."""
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _filter(path: str) -> str:
    kind = "subpath" if os.path.isdir(path) else "literal"
    return f"({kind} {_quote(path)})"


def seatbelt_profile(
    *,
    writable: Iterable[str],
    read_only: Iterable[str],
    hidden: Iterable[str],
    network: bool,
    proxy_socket: str | None,
    proxy_port: int = 0,
) -> str:
    """The profile for a policy given as resolved paths (see the module docstring)."""
    lines = [_BASE.rstrip("\n")]
    for path in hidden:
        lines.append(f"(deny file-read* {_filter(path)})")
    targets = [_filter(path) for path in writable]
    targets += ['(literal "/dev/null")', '(literal "/dev/tty")', '(regex #"^/dev/fd/")']
    lines.append("(allow file-write* " + " ".join(targets) + ")")
    for path in [*read_only, *hidden]:  # last: a denied path inside a writable one stays denied
        lines.append(f"(deny file-write* {_filter(path)})")
    if network:
        lines.append("(allow network*)")
    elif proxy_socket is not None:  # the forwarder inside listens on localhost:port
        socket = _quote(os.path.realpath(proxy_socket))
        local = _quote(f"localhost:{proxy_port}")
        lines.append(f"(allow network-outbound (remote unix-socket (path-literal {socket})))")
        lines.append(f"(allow network-bind (local ip {local}))")
        lines.append(f"(allow network-inbound (local ip {local}))")
        lines.append(f"(allow network-outbound (remote ip {local}))")
    return "\n".join(lines) + "\n"
