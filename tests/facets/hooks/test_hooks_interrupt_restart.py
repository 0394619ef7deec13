"""A ``PermissionRequest`` hook's interrupt survives a worker killed with SIGKILL after the
refusal: the restarted worker ends the turn as stopped by that hook, exactly as without the
restart, and never calls the model again; and the stored interrupt of that ended turn stops
nothing of the next one, even across another restart.

The real worker process, a scripted faux model and a real hook script. The model's first message
holds two ``bash`` calls: one the hook allows, which holds the turn (it runs until the test
releases it), and ``rm keep.txt``, which the hook refuses with ``"interrupt": true`` once the
other runs. While the first call runs, the turn cannot reach its next model call, so the worker
is killed between the refusal and that call — the window in which an interrupt kept only in
memory was lost. The tests wait on the conversation's view, never on time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from coding_agent.session_files.folders import create_session
from coding_agent.worker.main import WorkerConfig, open_session_host

sys.path.insert(0, str(Path(__file__).parent))  # the hooks worker tests' helpers
sys.path.insert(0, str(Path(__file__).parents[2] / "app" / "worker"))  # worker_support
from test_hooks_worker import command, home_env, settings, write  # pyright: ignore[reportMissingImports]
from worker_support import (  # pyright: ignore[reportMissingImports]
    TIMEOUT,
    Client,
    allow,
    connected,
    text_of,
    worker_process,
)

pytestmark = pytest.mark.anyio

PYTHON = sys.executable

HOOK = """import json, os, sys, time
event = json.load(sys.stdin)
command = event["tool_input"]["command"]
def answer(decision):
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PermissionRequest", "decision": decision}}))
def wait_for(path):
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
if command.startswith("touch running") or command.startswith("touch held"):
    answer({"behavior": "allow"})
elif command.startswith("rm"):
    wait_for(sys.argv[1])  # refuses once the other call runs
    answer({"behavior": "deny", "message": "deleting is off limits", "interrupt": True})
elif command.startswith("touch asked"):
    wait_for(os.path.join(os.path.dirname(sys.argv[1]), "held"))  # no decision: the dialog asks
"""


def hold(marker: str) -> dict[str, Any]:
    """A call that holds its turn: it touches ``marker``, then runs until ``release`` exists."""
    shell = f"touch {marker}; while [ ! -e release ]; do sleep 0.1; done"
    return {"name": "bash", "arguments": {"command": shell}}


STEPS: list[dict[str, Any]] = [
    {"toolCalls": [hold("running"), {"name": "bash", "arguments": {"command": "rm keep.txt"}}]},
    {"toolCalls": [hold("held"), {"name": "bash", "arguments": {"command": "touch asked"}}]},
    {"text": "the answer to the second prompt"},
]
"""The first prompt's message (refused with an interrupt), then the second prompt's: a held
call and one whose dialog opens, then the answer."""


def _refused(client: Client) -> bool:
    return any(
        "off limits" in text_of(entry)
        for entry in client.view["entries"]
        if entry["kind"] == "pi.tool_result"
    )


def _ended(client: Client) -> bool:
    return client.view.get("turn") is None


def _answers(client: Client) -> list[dict[str, Any]]:
    """The model's answers (an interrupted answer is display-only: it has no model message)."""
    return [e for e in client.entries("pi.assistant") if e.get("model")]


def _input_id(sent: Any) -> int:
    """The input id ``send`` answered over the wire (its ``id``, or the id itself)."""
    if isinstance(sent, dict):
        return int(sent["id"])  # pyright: ignore[reportUnknownArgumentType]
    return int(sent)


async def test_a_hooks_interrupt_stops_the_turn_after_a_worker_restart(
    tmp_path: Path, agent_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    project = tmp_path / "project"
    keep = write(project / "keep.txt", "kept\n")
    hook_script = write(tmp_path / "hooks" / "interrupt.py", HOOK)
    hook = f"{PYTHON} {hook_script} {project / 'running'}"
    settings(tmp_path, {"PermissionRequest": [{"matcher": "Bash", "hooks": [command(hook)]}]})
    by = f"PermissionRequest hook `{hook}`"
    faux = write(tmp_path / "script.json", json.dumps(STEPS))
    session = create_session(project, env=env)
    args = ("--faux-script", str(faux), "--permission-mode", "ask")
    try:
        client = Client()
        async with (
            worker_process(session, env, *args) as worker,
            connected(client, worker.socket),
        ):
            first = await client.root.send({"content": "clean up"}, BACKGROUND)
            await client.wait_for(lambda: _refused(client))  # the refusal is committed...
            assert client.view["turn"] is not None  # ...and the held call keeps the turn going
            await worker.kill()

        client = Client()  # leaves the second prompt's dialog open
        async with (
            worker_process(session, env, *args) as worker,
            connected(client, worker.socket),
        ):
            # ended, or (the interrupt lost) the model asked again: its second message
            await client.wait_for(lambda: _ended(client) or len(_answers(client)) > 1)
            assert keep.exists()
            kinds = [e["kind"] for e in client.view["entries"]]
            assert len(_answers(client)) == 1  # the model was not called after the refusal
            assistants = client.entries("pi.assistant")
            assert len(assistants) == 2  # the calls, then the interrupted answer
            stopped = assistants[-1]  # what the TUI's last line reads ("■ Stopped by <by>")
            assert stopped["data"].get("reason") == "aborted"
            assert stopped["data"].get("stoppedBy") == by
            assert text_of(stopped) == "" and kinds[-1] == "pi.assistant"

            # the next prompt: killed while one call runs and another's dialog is open
            second = await client.root.send({"content": "now touch it"}, BACKGROUND)
            await client.wait_for(lambda: bool(client.approvals))  # once the other runs
            await worker.kill()

        client = Client(approve=allow)  # the restarted worker asks again: allowed
        async with (
            worker_process(session, env, *args) as worker,
            connected(client, worker.socket),
        ):
            await client.wait_for(lambda: _ended(client))
    finally:
        (project / "release").write_text("")  # the orphaned held calls end

    (dialog,) = client.approvals  # the stored interrupt of the first turn blocks nothing
    assert dialog.request["args"]["command"] == "touch asked"
    assert (project / "asked").exists()
    assert text_of(client.entries("pi.assistant")[-1]) == "the answer to the second prompt"
    # the inputs' ends are what -p reads for its exit code and error line
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "CLAUDE_CONFIG_DIR"):
        monkeypatch.setenv(name, env[name])
    config = WorkerConfig(session, faux_script=faux, permission_mode="ask", fsync=False)
    async with open_session_host(config) as runtime:
        harness = runtime.harness.harness
        with anyio.fail_after(TIMEOUT):
            stopped_input = await harness.wait_for_input(_input_id(first), BACKGROUND)
            answered = await harness.wait_for_input(_input_id(second), BACKGROUND)
    assert (stopped_input.status, stopped_input.reason) == ("unanswered", "aborted")
    assert stopped_input.detail == f"stopped by {by}"
    assert answered.status == "done"
