"""pico3.unix_sockets: the sandbox's seccomp program, read by a small BPF interpreter here for
every architecture it knows (the real kernel runs the machine's own in
tests/app/worker/test_sandbox.py)."""

from __future__ import annotations

import os
import stat
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pico3 import Sandbox, SandboxPolicy
from pico3.unix_sockets import unix_socket_filter

ALLOW, EPERM = 0x7FFF0000, 0x00050001
X86_64, I386 = 0xC000003E, 0x40000003
AARCH64, ARM = 0xC00000B7, 0x40000028


def run(program: bytes, arch: int, nr: int, arg0: int = 0) -> int:
    """What the filter returns for one system call (the subset of classic BPF it uses)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    code = [struct.unpack_from("=HBBI", program, at) for at in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:  # ld [k]
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif op in (0x15, 0x35):  # jeq / jge
            holds = acc == k if op == 0x15 else acc >= k
            pc += 1 + (jt if holds else jf)
        elif op == 0x06:
            return k
        else:  # pragma: no cover - the program uses nothing else
            raise AssertionError(f"unexpected op {op:#x}")


@pytest.mark.parametrize(
    ("machine", "arch", "socket", "compat", "compat_socket"),
    [("x86_64", X86_64, 41, I386, 359), ("aarch64", AARCH64, 198, ARM, 281)],
)
def test_unix_sockets_and_io_uring_are_refused_and_the_rest_allowed(
    machine: str, arch: int, socket: int, compat: int, compat_socket: int
) -> None:
    program = unix_socket_filter(machine)
    assert program is not None and len(program) % 8 == 0
    for a, nr in ((arch, socket), (compat, compat_socket)):
        assert run(program, a, nr, 1) == EPERM  # socket(AF_UNIX, ...)
        assert run(program, a, nr, 0x1_0000_0001) == EPERM  # the kernel reads an int
        assert run(program, a, nr, 2) == ALLOW  # AF_INET
        assert run(program, a, nr, 10) == ALLOW  # AF_INET6
        assert run(program, a, 425) == EPERM  # io_uring_setup
        assert run(program, a, 0) == ALLOW
    assert run(program, 0x1234, socket, 1) == ALLOW  # no such architecture on this machine


def test_x86_64_refuses_the_x32_abi_and_i386s_socketcall() -> None:
    program = unix_socket_filter("x86_64")
    assert program is not None
    assert run(program, X86_64, 0x40000000 | 41, 1) == EPERM
    assert run(program, X86_64, 0x40000000 | 0, 0) == EPERM
    assert run(program, I386, 102, 1) == EPERM  # its arguments are in memory: refused whole
    assert run(program, AARCH64, 102, 1) == ALLOW


@given(nr=st.integers(0, 0x3FFFFFFF), arg0=st.integers(0, 2**64 - 1))
def test_on_x86_64_only_the_unix_socket_and_io_uring_calls_are_refused(nr: int, arg0: int) -> None:
    program = unix_socket_filter("x86_64")
    assert program is not None
    refused = nr == 425 or (nr == 41 and arg0 & 0xFFFFFFFF == 1)
    assert run(program, X86_64, nr, arg0) == (EPERM if refused else ALLOW)


def test_an_unknown_architecture_has_no_filter() -> None:
    assert unix_socket_filter("riscv64") is None


@pytest.mark.skipif(unix_socket_filter() is None, reason="no seccomp filter for this machine")
@pytest.mark.parametrize("planted", ["none", "open to others", "a link"])
def test_the_filters_file_lives_in_a_folder_of_the_users_alone(
    planted: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command must not be able to swap the filter the next command loads, nor another user
    plant one: the file's folder is the user's, 0700, never a link or one others may write."""
    import pico3.sandbox as sandbox_module
    import pico3.sandbox_placeholders as placeholders_module

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(sandbox_module, "_filter_path", [])
    monkeypatch.setattr(placeholders_module, "_private", [])
    expected = tmp_path / f"pico3-{os.getuid()}"
    if planted == "open to others":
        expected.mkdir(mode=0o777)
        expected.chmod(0o777)
        (expected / "unix-sockets-planted.bpf").write_bytes(b"\0" * 8)
    elif planted == "a link":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        expected.symlink_to(elsewhere)
    argv, _ = Sandbox(SandboxPolicy(project=str(tmp_path), temp_dir=str(tmp_path / "t"))).wrap(
        ["true"], cwd=str(tmp_path), env={}
    )
    used = Path(argv[3])
    assert used.read_bytes() == unix_socket_filter()
    assert stat.S_IMODE(used.parent.stat().st_mode) == 0o700
    if planted == "none":
        assert used.parent == expected
    else:
        assert used.parent != expected and not used.is_relative_to(tmp_path / "elsewhere")
    assert str(used.parent) in argv[argv.index("--tmpfs") + 1 :]  # hidden inside
