"""Notifications from committed state (issue 43 deliver 4): the real binary's worker tells a
fake ``notify-send`` (first on ``PATH``, recording its arguments), a local HTTP server (the
webhook) and a command (its stdin appended to a file) that an approval waits, each once; a
worker SIGKILLed after it sent one does not send it again, and one killed while it was due but
not yet sent sends it when it is started again.

The session is a ``-p --wait-for-approval`` run (a parked approval: the dialog waits for
another client, through worker restarts), answered by a chord wire client of the worker as
``coding-agent attach`` would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_agent.session_files.folders import Session, list_sessions
from tests.app.cli._parked import BINARY, STEPS, TIMEOUT, Run, answer, start

pytestmark = pytest.mark.anyio


PARKED = ("--linger", "60", "--wait-for-approval")
"""A parked approval; the worker lingers long enough to deliver the turn's notification after
the run ends."""


class Channels:
    """The three worker channels' receivers and what each received, one JSON or line each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.desktop = root / "notify-send.log"
        self.webhook = root / "webhook.log"
        self.command = root / "command.log"
        self.block = root / "block"  # while it exists, the command waits (before writing)
        self.started = root / "command.pid"  # the waiting command's pid

    def lines(self, path: Path) -> list[str]:
        return path.read_text().splitlines() if path.exists() else []

    def events(self, path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines(path)]


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[str]:
    """A local HTTP server appending each POSTed body, one line each, to webhook.log."""
    log = tmp_path / "webhook.log"

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            with log.open("ab") as out:
                out.write(body + b"\n")
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            del format, args

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # shutdown() waits for serve_forever's next poll (0.5 s at the default)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def setup(
    tmp_path: Path, agent_env: dict[str, str], webhook: str
) -> tuple[Path, dict[str, str], Channels]:
    channels = Channels(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "script.json").write_text(json.dumps(STEPS))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "notify-send"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{channels.desktop}'\n")
    command = tmp_path / "notify.sh"
    command.write_text(
        "#!/bin/sh\n"
        f"if [ -e '{channels.block}' ]; then\n"
        f"  echo $$ > '{channels.started}'\n"
        f"  while [ -e '{channels.block}' ]; do sleep 0.05; done\n"
        "fi\n"
        f"cat >> '{channels.command}'\n"
        f"echo >> '{channels.command}'\n"
    )
    for script in (fake, command):
        script.chmod(0o755)
    config = tmp_path / "config" / "coding-agent"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(
        "[notifications]\n"
        'desktop = ["attention"]\n'  # desktop_when: no TUI attached (a -p run is no TUI)
        f'webhook = "{webhook}"\n'
        'webhook_events = ["attention"]\n'
        f'command = "{command}"\n'
        'command_events = ["attention", "turn"]\n'
    )
    env = {
        **agent_env,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PATH": f"{bin_dir}{os.pathsep}{agent_env.get('PATH', os.defpath)}",
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path / 'bus'}",  # a desktop (the fake's)
    }
    return project, env, channels


async def _until(condition: Callable[[], object], what: str) -> None:
    """Poll ``condition`` (files another process writes) until it holds."""
    with anyio.fail_after(TIMEOUT):
        while not condition():  # noqa: ASYNC110 - other processes' files: polled with a deadline
            await anyio.sleep(0.05)
    assert condition(), what


def _sent(session: Session, key: str) -> bool:
    """Whether the session's storage holds ``key`` among the notifications sent (the commit
    after the delivery): a stored op ``["p", ["plugins", NAMESPACE, "sent"], …, [key]]``."""
    path = ["plugins", "coding-agent.notifications", "sent"]
    for log in session.storage_dir.glob("*.jsonl"):
        for line in log.read_text().splitlines():
            if key not in line or "coding-agent.notifications" not in line:
                continue
            if any(op[:2] == ["p", path] and key in op[-1] for op in _ops(json.loads(line))):
                return True
    return False


def _ops(value: Any) -> Iterator[list[Any]]:
    """Every list in a stored record that looks like a document op (``[kind, path, …]``)."""
    if isinstance(value, list):
        if len(value) >= 3 and isinstance(value[0], str) and isinstance(value[1], list):
            yield value
        for item in value:
            yield from _ops(item)


def _worker_pid(session: Session) -> int:
    return int(session.lock_path.read_text().split()[0])


async def _finish(run: Run, session: Session) -> dict[str, Any]:
    await answer(session, "allow")
    return await run.result()


def _stop_worker(session: Session) -> None:
    try:
        os.kill(_worker_pid(session), signal.SIGTERM)
    except (OSError, ValueError, IndexError):
        pass  # gone already


async def test_each_channel_is_told_once_and_not_again_after_the_worker_is_killed(
    setup: tuple[Path, dict[str, str], Channels],
) -> None:
    project, env, channels = setup
    with anyio.fail_after(TIMEOUT):
        run = await start(project, env, *PARKED)
        async with run.process:
            await run.line_with("waiting for approval of the bash call (touch parked.txt)")
            (session,) = list_sessions(project, env=env)
            try:
                await _until(lambda: channels.lines(channels.command), "the command ran")
                (told,) = channels.events(channels.command)
                key = told["key"]
                await _until(lambda: _sent(session, key), "the key recorded as sent")
                # Sent and recorded: a worker killed now does not send it again.
                os.kill(_worker_pid(session), signal.SIGKILL)
                await run.line_with("waiting for approval of the bash call", count=2)
                result = await _finish(run, session)
                # The restarted worker told of the turn's end: it went through what was due.
                await _until(lambda: len(channels.lines(channels.command)) == 2, "the turn")
            finally:
                _stop_worker(session)
    assert result["ok"] is True and result["text"] == "Touched."
    assert told == {
        "session_id": session.id,
        "transcript_path": "",
        "cwd": str(project),
        "hook_event_name": "Notification",
        "message": "Needs your permission to use bash",
        "title": f"coding-agent: {project.name}",
        "notification_type": "permission_prompt",
        "event": "attention",
        "key": key,
    }
    turn = channels.events(channels.command)[1]
    assert (turn["event"], turn["message"]) == ("turn", "Finished its turn")
    assert channels.events(channels.webhook) == [told]  # attention only, once
    assert channels.lines(channels.desktop) == [
        f"--app-name=coding-agent coding-agent: {project.name} Needs your permission to use bash"
    ]


async def test_a_notification_due_when_the_worker_is_killed_is_sent_by_the_next_one(
    setup: tuple[Path, dict[str, str], Channels],
) -> None:
    project, env, channels = setup
    channels.block.touch()
    with anyio.fail_after(TIMEOUT):
        run = await start(project, env, *PARKED)
        async with run.process:
            await run.line_with("waiting for approval of the bash call (touch parked.txt)")
            (session,) = list_sessions(project, env=env)
            try:
                # The command runs (and waits): due, being delivered, not yet sent.
                await _until(lambda: channels.started.exists(), "the command started")
                (key,) = [e["key"] for e in channels.events(channels.webhook)]
                assert not _sent(session, key)
                os.kill(_worker_pid(session), signal.SIGKILL)
                os.kill(int(channels.started.read_text()), signal.SIGKILL)
                channels.block.unlink()
                await run.line_with("waiting for approval of the bash call", count=2)
                await _until(lambda: channels.lines(channels.command), "sent after the restart")
                await _until(lambda: _sent(session, key), "recorded as sent")
                result = await _finish(run, session)
                await _until(lambda: len(channels.lines(channels.command)) == 2, "the turn")
            finally:
                _stop_worker(session)
    assert result["ok"] is True
    attention, turn = channels.events(channels.command)
    assert (attention["key"], attention["event"]) == (key, "attention")
    assert turn["event"] == "turn"
    # At least once: the channels the killed worker had told already are told again.
    assert [e["key"] for e in channels.events(channels.webhook)] == [key, key]


async def test_a_background_job_that_exits_is_told_after_the_run_ended(
    setup: tuple[Path, dict[str, str], Channels],
) -> None:
    project, env, channels = setup
    config = Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml"
    config.write_text(f'[notifications]\ncommand = "{channels.root / "notify.sh"}"\n'
                      'command_events = ["job"]\n')  # fmt: skip
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "exit 3", "background": True}}]},
        {"text": "Started."},
    ]
    (project.parent / "script.json").write_text(json.dumps(steps))
    with anyio.fail_after(TIMEOUT):
        process = await anyio.open_process(
            [str(BINARY), "--faux-script", str(project.parent / "script.json"), "--linger", "60",
             "--wait-for-approval", "--permission-mode", "auto", "--json", "start it"],
            cwd=project, env=env, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        async with process:
            await process.wait()
        (session,) = list_sessions(project, env=env)
        try:
            await _until(lambda: channels.lines(channels.command), "the job's notification")
        finally:
            _stop_worker(session)
    assert process.returncode == 0
    (told,) = channels.events(channels.command)
    assert (told["event"], told["notification_type"]) == ("job", "job_exited")
    assert told["message"] == "Job `exit 3` exited with code 3"


def test_a_print_run_sends_its_turns_notification_before_it_exits(
    setup: tuple[Path, dict[str, str], Channels],
) -> None:
    project, env, channels = setup
    (project.parent / "script.json").write_text(json.dumps([{"text": "Hello."}]))
    done = subprocess.run(
        [str(BINARY), "--faux-script", str(project.parent / "script.json"), "-p", "hi"],
        cwd=project, env=env, capture_output=True, text=True, timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello.\n"
    # The session host settled its notifications before the process ended.
    (told,) = channels.events(channels.command)
    assert (told["event"], told["message"]) == ("turn", "Finished its turn")
    assert channels.lines(channels.desktop) == channels.lines(channels.webhook) == []


def test_with_the_defaults_a_turns_end_costs_the_session_no_commit(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """By default no channel takes ``turn``: nothing is recorded for it (two commits a turn,
    each with its fsync, for nobody)."""
    project = tmp_path / "project"
    project.mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Hello."}, {"text": "Again."}]))
    for resume, prompt in (((), "hi"), (("-c",), "again")):
        done = subprocess.run(
            [str(BINARY), "--faux-script", str(script), *resume, "-p", prompt],
            cwd=project, env=agent_env, capture_output=True, text=True, timeout=TIMEOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    (session,) = list_sessions(env=agent_env)
    stored = "".join(log.read_text() for log in session.storage_dir.glob("*.jsonl"))
    assert "Again." in stored
    assert "coding-agent.notifications" not in stored
