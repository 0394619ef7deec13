"""The TUI says when the session's storage failed (issue 24 deliver 5).

The session lives on a small tmpfs (root only; failing in CI). The TUI runs against a real
worker; the disk is filled and a second client sends a prompt too big to store. The worker's
status carries the failure to every client: the TUI shows one error toast saying why, and the
supervisor starts a new worker.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.transport.frames import FrameDecoder, ResultFrame
from chord.transport.unix import open_unix_stream
from coding_agent.session_files.folders import create_session
from coding_agent.tui import CodingAgentApp

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def lasting_toasts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CodingAgentApp, "NOTIFICATION_TIMEOUT", 600)


async def _send_unstorable(socket: Path) -> None:
    """A second client: subscribe to the root conversation and send a 400 KB prompt."""
    async with await open_unix_stream(socket) as stream:
        decoder = FrameDecoder(1 << 26)

        async def call(number: int, text: str) -> ResultFrame:
            await stream.send(f'{{"type":"request","id":{number},"call":{text}}}\n'.encode())
            while True:
                for frame in decoder.feed(await stream.receive()):
                    if isinstance(frame, ResultFrame) and frame.id == number:
                        return frame

        subscribed = await call(
            1,
            '{"serviceId":"$chord.service","member":"subscribe",'
            '"args":["s0","pi.conversation","keyed"]}',
        )
        instance = json.dumps(subscribed.result["instances"][0]["instance"])  # type: ignore[index]
        prompt = json.dumps({"content": "x" * 400_000})
        await call(
            2,
            f'{{"serviceId":"pi.conversation","instance":{instance},"member":"send",'
            f'"args":[{prompt}]}}',
        )


async def test_the_tui_says_why_when_the_storage_failed(
    kit: Any,
    project: Path,
    agent_env: dict[str, str],
    small_disk: Path,
    fill_disk: Callable[[Path], Path],
    tmp_path: Path,
) -> None:
    env = {**agent_env, "XDG_STATE_HOME": str(small_disk / "state")}
    session = create_session(project, env=env)
    keeper = kit.supervisor(session, env, faux_script=kit.script(tmp_path, [{"text": "Hi."}]))
    seen: dict[str, Any] = {}

    def failures(app: Any) -> list[str]:
        return [m for s, m in kit.toasts(app) if s == "error" and "storage failed" in m]

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the view")
        await anyio.to_thread.run_sync(fill_disk, small_disk)
        await _send_unstorable(session.socket_path)
        await kit.wait_for(pilot, lambda: failures(app), "the storage failure toast")
        seen["toasts"] = failures(app)

    await kit.drive(session, keeper, test)
    [toast] = seen["toasts"]
    assert toast.startswith("the session's storage failed: ")
    assert "No space left on device" in toast
    assert "The session worker stops; it is started again" in toast
