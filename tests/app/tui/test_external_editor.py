"""Ctrl+G edits the prompt in ``$VISUAL``/``$EDITOR`` (docs/design/agent.md#features).

The editors here are real programs (a Python script, ``sh``) run as real child processes. Pilot
apps are headless, so there the editor runs without suspending the app; one test runs the app
in a real pseudo-terminal to cover the suspend path.
"""

from __future__ import annotations

import os
import pty
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from textual.pilot import Pilot

from coding_agent.tui import CodingAgentApp
from coding_agent.tui.widgets.external_editor import ExternalEditorError, editor_command

pytestmark = pytest.mark.anyio

_SCRIPT = """\
import sys
from pathlib import Path

path = Path(sys.argv[1])
text = path.read_text(encoding="utf-8")
path.write_text(text.upper() + " (edited)\\nsecond line\\n", encoding="utf-8")
"""


@pytest.fixture
def script_editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "edit.py"
    script.write_text(_SCRIPT)
    monkeypatch.setenv("VISUAL", f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")


async def _ctrl_g(app: CodingAgentApp, pilot: Pilot[None]) -> None:
    await pilot.press("ctrl+g")
    for worker in [w for w in app.workers if w.group == "external-editor"]:
        await worker.wait()


async def test_ctrl_g_round_trips_the_text_through_the_editor(
    conversation, docs, script_editor
) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"fix the bug")
        await _ctrl_g(app, pilot)
        assert app.editor.text == "FIX THE BUG (edited)\nsecond line"
        assert app.editor.cursor_location == app.editor.document.end
        await pilot.press("enter")
        await docs.until(pilot, lambda: conversation.sent)
        assert conversation.sent == [("FIX THE BUG (edited)\nsecond line", "prompt")]


async def test_a_failing_editor_leaves_the_text_and_says_why(
    conversation, docs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VISUAL", "sh -c 'echo cannot edit >&2; exit 3'")
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40), notifications=True) as pilot:
        await app.wait_rendered()
        await pilot.press(*"keep me")
        await _ctrl_g(app, pilot)
        assert app.editor.text == "keep me"
        messages = [note.message for note in app._notifications]
        assert any("status 3" in m and "cannot edit" in m for m in messages), messages


async def test_a_missing_editor_program_is_reported(
    conversation, docs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VISUAL", str(tmp_path / "no-such-editor"))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40), notifications=True) as pilot:
        await app.wait_rendered()
        await pilot.press(*"draft")
        await _ctrl_g(app, pilot)
        assert app.editor.text == "draft"
        assert any("could not start" in note.message for note in app._notifications)


async def test_editor_falls_back_from_visual_to_editor(
    conversation, docs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", "sh -c 'printf replaced > \"$0\"'")
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"old")
        await _ctrl_g(app, pilot)
        assert app.editor.text == "replaced"


def test_editor_command_prefers_visual_then_editor_then_vi() -> None:
    assert editor_command({"VISUAL": "code --wait", "EDITOR": "nano"}) == ["code", "--wait"]
    assert editor_command({"VISUAL": "  ", "EDITOR": "nano -w"}) == ["nano", "-w"]
    assert editor_command({}) == ["vi"]
    with pytest.raises(ExternalEditorError, match=r"\$EDITOR is not a valid command"):
        editor_command({"EDITOR": "vim 'unclosed"})


_IN_TERMINAL = """\
import sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])
from conftest import FakeConversation  # the TUI tests' conversation
from coding_agent.tui import CodingAgentApp


async def drive(pilot):
    app = pilot.app
    await app.wait_rendered()
    await pilot.press(*"hello")
    await pilot.press("ctrl+g")
    for worker in [w for w in app.workers if w.group == "external-editor"]:
        await worker.wait()
    Path(sys.argv[2]).write_text(app.editor.text)
    app.exit()


CodingAgentApp(FakeConversation()).run(auto_pilot=drive)
"""

_TTY_EDITOR = """\
import os
import sys
from pathlib import Path

path = Path(sys.argv[1])
path.write_text(path.read_text() + f" (stdin is a tty: {os.isatty(0)})\\n")
"""


def test_in_a_terminal_the_app_suspends_and_hands_the_editor_the_tty(tmp_path: Path) -> None:
    runner, editor, result = tmp_path / "run.py", tmp_path / "ed.py", tmp_path / "result.txt"
    runner.write_text(_IN_TERMINAL)
    editor.write_text(_TTY_EDITOR)
    env = dict(
        os.environ,
        TERM="xterm-256color",
        COLUMNS="100",
        LINES="30",
        VISUAL=f"{shlex.quote(sys.executable)} {shlex.quote(str(editor))}",
    )
    main, child = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, str(runner), str(Path(__file__).parent), str(result)],
        stdin=child,
        stdout=child,
        stderr=child,
        env=env,
        start_new_session=True,
    )
    os.close(child)
    output: list[bytes] = []

    def drain() -> None:  # the app blocks if nobody reads the terminal
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:
                return
            if not data:
                return
            output.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        status = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(timeout=5)
        os.close(main)
    assert status == 0, b"".join(output)[-2000:]
    assert result.read_text() == "hello (stdin is a tty: True)"
