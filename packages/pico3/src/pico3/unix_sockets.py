"""The sandbox's seccomp filter: no new unix sockets, no io_uring (Linux, x86-64 and ARM64).

Hiding the well-known sockets (the session bus, Docker's, the X server's: the host's
``deny_read``) leaves every other unix socket the user can reach: a ``tmux`` or ``screen``
server (``tmux -S /tmp/tmux-1000/default send-keys ...`` types into the user's shell, outside),
an ``emacs --daemon`` (``emacsclient --eval``), an ``ssh-agent`` in ``/tmp/ssh-*`` (the user's
keys, signing for the command), an editor's IPC socket. A path socket is reached whatever the
network namespace. So inside the sandbox ``socket(AF_UNIX, ...)`` fails with ``EPERM``, as in
Claude Code's sandbox on Linux. ``socketpair`` still works (Node's and Python's child pipes use
it): a pair is connected to itself, never to a socket outside. ``io_uring_setup`` fails too:
io_uring creates sockets without the ``socket`` system call (``IORING_OP_SOCKET``), and
programs fall back to plain calls when it is missing (Docker's default profile refuses it too).

:func:`unix_socket_filter` is the classic-BPF program (``struct sock_filter`` records, native
byte order) that bubblewrap loads with ``--seccomp FD`` just before it runs the command; the
forwarder of the sandbox's proxy loads it itself, through ``prctl``, after it forked its loop
(:data:`LOAD_FILTER`). It is written here by hand: the program is fifteen instructions, and
libseccomp's Python binding is not on PyPI (it builds from libseccomp's own sources). What it
checks, in ``struct seccomp_data`` (``nr`` at byte 0, ``arch`` at 4, ``args[0]`` at 16):

* the architecture: the machine's own, or its 32-bit compatibility mode (i386 on x86-64, whose
  ``socketcall`` multiplexer is refused whole: its arguments are in memory a filter cannot
  read; ARM on ARM64). On x86-64 the x32 ABI (system call numbers with bit 30 set) is refused;
* ``socket`` whose first argument (the domain, an ``int``: the low 32 bits) is ``AF_UNIX``;
* ``io_uring_setup``.

Anything else is allowed. On another architecture there is no filter (``None``): the hidden
paths are then the only guard, and :func:`unix_socket_filter`'s caller says so.
"""

from __future__ import annotations

import platform
import struct

__all__ = ["LOAD_FILTER", "unix_socket_filter"]

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K

_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_AF_UNIX = 1
_IO_URING_SETUP = 425  # one number on every architecture since Linux 5.1
_X32_BIT = 0x40000000

# machine -> ((audit arch, socket), compat: (audit arch, socket, refused whole), x32 refused)
_ARCHES: dict[str, tuple[tuple[int, int], tuple[int, int, tuple[int, ...]], bool]] = {
    "x86_64": ((0xC000003E, 41), (0x40000003, 359, (102,)), True),
    "aarch64": ((0xC00000B7, 198), (0x40000028, 281, ()), False),
}
_ARCHES["amd64"] = _ARCHES["x86_64"]
_ARCHES["arm64"] = _ARCHES["aarch64"]


class _Program:
    """Instructions with symbolic jump targets, resolved to BPF's forward offsets."""

    def __init__(self) -> None:
        self.code: list[tuple[int, str | int, str | int, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def load(self, offset: int) -> None:
        self.code.append((_LD_ABS, 0, 0, offset))

    def jump(self, op: int, value: int, true: str, false: str = "") -> None:
        """Go to ``true`` if the test holds, else to ``false`` (the next instruction when empty)."""
        self.code.append((op, true, false, value))

    def ret(self, value: int) -> None:
        self.code.append((_RET, 0, 0, value))

    def assemble(self) -> bytes:
        out = bytearray()
        for at, (op, true, false, value) in enumerate(self.code):
            jt = self._offset(at, true)
            jf = self._offset(at, false)
            out += struct.pack("=HBBI", op, jt, jf, value)
        return bytes(out)

    def _offset(self, at: int, target: str | int) -> int:
        if not isinstance(target, str) or not target:
            return 0
        offset = self.labels[target] - at - 1
        assert 0 <= offset < 256, (target, offset)
        return offset


def _checks(program: _Program, prefix: str, socket_nr: int, refused: tuple[int, ...]) -> None:
    """One architecture's checks on ``nr`` and ``args[0]`` (``nr`` already loaded)."""
    for nr in refused:
        program.jump(_JEQ, nr, "deny")
    program.jump(_JEQ, _IO_URING_SETUP, "deny")
    program.jump(_JEQ, socket_nr, f"{prefix}-socket", "allow")
    program.label(f"{prefix}-socket")
    program.load(_ARG0)
    program.jump(_JEQ, _AF_UNIX, "deny", "allow")


def unix_socket_filter(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default this one: :func:`platform.machine`), or ``None``
    on an architecture it does not know."""
    known = _ARCHES.get((machine or platform.machine()).lower())
    if known is None:
        return None
    (arch, socket_nr), (compat_arch, compat_socket, compat_refused), x32 = known
    program = _Program()
    program.load(_ARCH)
    program.jump(_JEQ, arch, "native")
    program.jump(_JEQ, compat_arch, "compat", "allow")
    program.label("native")
    program.load(_NR)
    if x32:
        program.jump(_JGE, _X32_BIT, "deny")
    _checks(program, "native", socket_nr, ())
    program.label("compat")
    program.load(_NR)
    _checks(program, "compat", compat_socket, compat_refused)
    program.label("allow")
    program.ret(_ALLOW)
    program.label("deny")
    program.ret(_EPERM)
    return program.assemble()


LOAD_FILTER = r"""
def load_filter(program):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    code = ctypes.create_string_buffer(program, len(program))
    fprog = Program(len(program) // 8, ctypes.cast(code, ctypes.c_void_p))
    # PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP with SECCOMP_MODE_FILTER
    if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0):
        raise OSError(ctypes.get_errno(), "the sandbox's seccomp filter could not be loaded")
"""
"""Python source defining ``load_filter(program: bytes)``, which loads a filter on the calling
thread (and what it ``exec``s), for the proxy's forwarder (standard library only)."""
