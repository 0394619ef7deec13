"""The macOS sandbox (issue 41 deliver 4): the Seatbelt profile ``sandbox-exec`` gets for a
policy, and the argv :meth:`pico3.Sandbox.wrap` builds with it. Linux machines cannot run it, so
these check the text: every rule there, every path quoted, denials after the allowances they
narrow (Seatbelt applies the last matching rule)."""

from __future__ import annotations

from pathlib import Path

from pico3 import Sandbox, SandboxPolicy, SandboxStatus
from pico3.seatbelt import seatbelt_profile


def test_the_profile_reads_everything_but_the_hidden_and_writes_only_the_writable(
    tmp_path: Path,
) -> None:
    project, temp = tmp_path / "project", tmp_path / "tmp"
    hooks = project / ".git" / "hooks"
    ssh, netrc = tmp_path / ".ssh", tmp_path / '.net"rc'
    for folder in (hooks, temp, ssh):
        folder.mkdir(parents=True)
    netrc.write_text("machine x\n")
    profile = seatbelt_profile(
        writable=[str(project), str(temp)],
        read_only=[str(hooks)],
        hidden=[str(ssh), str(netrc)],
        network=False,
        proxy_socket=None,
    )
    lines = profile.splitlines()
    assert lines[:2] == ["(version 1)", "(deny default)"]
    assert "(allow file-read*)" in lines
    quoted_netrc = str(netrc).replace('"', '\\"')
    assert f'(deny file-read* (subpath "{ssh}"))' in lines
    assert f'(deny file-read* (literal "{quoted_netrc}"))' in lines
    (write,) = [line for line in lines if line.startswith("(allow file-write*")]
    assert f'(subpath "{project}")' in write and f'(subpath "{temp}")' in write
    assert '(literal "/dev/null")' in write
    assert lines.index(write) < lines.index(f'(deny file-write* (subpath "{hooks}"))')
    assert not any("network" in line for line in lines)  # no network rule: none at all


def test_network_is_the_hosts_or_only_the_proxy_and_its_forwarder(tmp_path: Path) -> None:
    common = {"writable": [], "read_only": [], "hidden": []}
    assert "(allow network*)" in seatbelt_profile(**common, network=True, proxy_socket=None)
    socket = tmp_path / "proxy.sock"
    proxied = seatbelt_profile(**common, network=False, proxy_socket=str(socket), proxy_port=3128)
    assert f'(allow network-outbound (remote unix-socket (path-literal "{socket}")))' in proxied
    assert '(allow network-outbound (remote ip "localhost:3128"))' in proxied
    assert "(allow network*)" not in proxied


def test_wrap_on_macos_runs_sandbox_exec_with_the_profile_in_the_folder(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    policy = SandboxPolicy(project=str(project), temp_dir=str(tmp_path / "tmp"), home=str(tmp_path))
    status = SandboxStatus(True, "sandbox-exec", seatbelt="/usr/bin/sandbox-exec")
    argv, env = Sandbox(policy, status).wrap(["bash", "-c", "make"], cwd=project, env={"A": "1"})
    assert argv[:2] == ["/usr/bin/sandbox-exec", "-p"]
    assert f'(subpath "{project.resolve()}")' in argv[2]
    assert argv[3:] == [
        "/bin/sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", str(project), "bash", "-c", "make"
    ]  # fmt: skip
    assert env == {"A": "1", "TMPDIR": str((tmp_path / "tmp").resolve())}
