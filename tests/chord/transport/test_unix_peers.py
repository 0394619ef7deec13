"""Only the socket owner's uid is served and dialled (issue 24 deliver 2).

Under ``umask 000`` the socket file is still ``0600``. A process of a second local user that
reaches the socket anyway (its mode opened up by hand) is disconnected before the server reads a
byte, and a client refuses a server that runs as another user (a squatter's socket).
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
from functools import partial
from pathlib import Path

import anyio
import pytest

from chord.transport import PeerRefused, peer_uid
from chord.transport.unix import UnixSocketStream, open_unix_stream, serve_unix_streams

pytestmark = pytest.mark.anyio

CONNECT = """
import socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(sys.argv[1])
sock.settimeout(30)
try:
    sock.sendall(b'{"type":"request","id":1,"call":{}}\\n')
    data = sock.recv(100)
except (BrokenPipeError, ConnectionResetError):
    data = b""
print("eof" if data == b"" else "data:" + data.decode())
"""

SERVE = """
import os, socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o666)
sock.listen(1)
print("ready", flush=True)
conn, _ = sock.accept()
conn.sendall(b"hello from the squatter\\n")
conn.recv(100)
"""


async def test_the_socket_is_private_whatever_the_umask(tmp_path: Path) -> None:
    path = str(tmp_path / "open.sock")
    served: list[int | None] = []

    async def handle(stream: UnixSocketStream) -> None:
        async with stream:
            served.append(peer_uid(stream.extra(anyio.abc.SocketAttribute.raw_socket)))
            await stream.send(b"ok")

    old = os.umask(0)
    try:
        async with anyio.create_task_group() as group:
            await group.start(partial(serve_unix_streams, path, handle))
            assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
            async with await open_unix_stream(path) as client:
                assert await client.receive() == b"ok"
            group.cancel_scope.cancel()
    finally:
        os.umask(old)
    assert served == [os.geteuid()], "the owner's own connections are served"


async def test_another_uid_is_disconnected_before_a_byte_is_read(
    other_user: pwd.struct_passwd,
    other_python: list[str],
    shared_tmp: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = str(shared_tmp / "victim.sock")
    handled = 0

    async def handle(stream: UnixSocketStream) -> None:
        nonlocal handled
        handled += 1
        async with stream:
            await stream.send(b"secret")

    async with anyio.create_task_group() as group:
        await group.start(partial(serve_unix_streams, path, handle))
        os.chmod(path, 0o666)  # the file modes no longer protect it: the credentials must
        done = await anyio.run_process(
            [*other_python, "-c", CONNECT, path],
            user=other_user.pw_uid,
            group=other_user.pw_gid,
            extra_groups=[],
            check=False,
        )
        group.cancel_scope.cancel()
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "eof", "the other user got nothing but a close"
    assert handled == 0, "the handler never saw the connection"
    assert f"refused a connection: the peer runs as uid {other_user.pw_uid}" in caplog.text


async def test_a_client_refuses_a_server_of_another_uid(
    other_user: pwd.struct_passwd, other_python: list[str], shared_tmp: Path
) -> None:
    path = str(shared_tmp / "squatter.sock")
    async with await anyio.open_process(
        [*other_python, "-c", SERVE, path],
        user=other_user.pw_uid,
        group=other_user.pw_gid,
        extra_groups=[],
        stdout=subprocess.PIPE,
    ) as squatter:
        assert squatter.stdout is not None
        assert await squatter.stdout.receive() == b"ready\n"
        with pytest.raises(PeerRefused, match="refusing the server: the peer runs as uid "):
            await open_unix_stream(path)
        squatter.kill()
