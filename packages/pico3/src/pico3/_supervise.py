"""The supervisor of one :class:`~pico3.process_host.LocalProcessHost` record.

This file is run as a script (``python -I _supervise.py RECORD_DIR [CLAIM_FD]``), never imported by pico3:
it uses the standard library only, so it starts fast and does not depend on the harness.

Why a supervisor? A process started by the harness must outlive the harness (suspend/reopen,
or the harness process dying) and its exit code must still be known afterwards. Only a
process's parent can learn its exit code, so the parent must be something that survives:
this script. The host launches it in a new session; it forks once more and the intermediate
exits at once (the classic double fork), so the harness has nothing left to reap and the
supervisor is reparented away from it. It is handed the record's ``claim`` file, locked by the
host, as an inherited descriptor (``RECORD_DIR CLAIM_FD``) and keeps it open, never passing it
to the command, so the lock says "this record's supervisor lives" until it exits. Then the
supervisor:

1. writes ``supervisor.json`` ``{pid, start}`` so the host can tell whether it is alive;
2. spawns the command of ``spec.json`` in a session (and group) of its own, appending stdout and
   stderr to the record's ``stdout``/``stderr`` files (stdin is ``/dev/null``);
3. writes ``child.json`` ``{pid, start}`` (the child leads a session of its own, so its pid is
   its process group id and its session id);
4. applies a kill request (``kill.json``) that the host wrote before the group was known;
5. reports one JSON line on its stdout, a pipe the host reads to end-of-file: ``{"ok": true,
   "pid": …}``, or ``{"ok": false, "errno": …, "error": …}`` when the OS refused to start the
   command (missing executable, permission, bad cwd); when the host died meanwhile (nobody
   reads the pipe), the line is dropped and the supervisor goes on;
6. waits for the child and writes ``exit.json`` ``{exitCode}`` atomically (negative: killed by
   that signal, as in :attr:`subprocess.Popen.returncode`), then exits.

TERM, INT and HUP sent to the supervisor itself are forwarded to the child's group; the
supervisor keeps waiting, so the exit code is always recorded unless it is SIGKILLed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from pico3.files import write_atomic


def proc_start_time(pid: int) -> int | None:
    """The kernel start time of ``pid`` (``/proc/PID/stat`` field 22), or ``None``."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    return int(fields[19])


def write_json_atomic(path: Path, value: Any) -> None:
    """Write ``value`` to ``path`` as JSON (:func:`pico3.files.write_atomic`: fsynced)."""
    write_atomic(path, json.dumps(value))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _report(value: Any) -> None:
    # The host may be gone: its process died while it waited for this line. Nobody reads it
    # then, and the supervisor must carry on (the record, not this line, is what a later host
    # reads), so a broken pipe is not an error; dying here would leave the key "lost".
    try:
        sys.stdout.write(json.dumps(value) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def main(record: Path, claim: int | None = None) -> int:
    if claim is not None:
        os.set_inheritable(claim, False)  # held until this process exits; never the command's
    if os.fork() > 0:
        os._exit(0)  # the intermediate: the host reaps it at once
    me = os.getpid()
    write_json_atomic(record / "supervisor.json", {"pid": me, "start": proc_start_time(me)})
    spec = json.loads((record / "spec.json").read_text(encoding="utf-8"))
    env = dict(os.environ)
    env.update(spec.get("env") or {})
    with (
        open(record / "stdout", "ab") as out,
        open(record / "stderr", "ab") as err,
    ):
        try:
            child = subprocess.Popen(
                [spec["command"], *spec["args"]],
                cwd=spec["cwd"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own session and group: a kill finds every member
            )
        except OSError as exc:
            _report({"ok": False, "errno": exc.errno, "error": str(exc)})
            return 1
    write_json_atomic(
        record / "child.json", {"pid": child.pid, "start": proc_start_time(child.pid)}
    )

    def forward(signum: int, _frame: object) -> None:
        try:
            os.killpg(child.pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    request = _read_json(record / "kill.json")
    if isinstance(request, dict) and request.get("signal") in ("SIGTERM", "SIGKILL"):
        forward(int(getattr(signal, request["signal"])), None)
    _report({"ok": True, "pid": child.pid})
    code = child.wait()
    write_json_atomic(record / "exit.json", {"exitCode": code})
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None))
