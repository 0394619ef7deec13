"""Where ``coding-agent serve`` listens: the ``--listen`` URL, loopback checks, and its Unix
socket's path and private folder (docs/server.md#listeners-and-what-is-refused)."""

from __future__ import annotations

import hashlib
import ipaddress
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from coding_agent.server.credentials import ServerSetupError
from coding_agent.session_files.folders import SOCKET_PATH_LIMIT
from coding_agent.session_files.private import PrivacyError, private_tree, socket_folder
from coding_agent.settings.xdg import state_home

__all__ = ["default_socket_path", "is_loopback", "parse_listen", "prepare_socket_folder"]


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
