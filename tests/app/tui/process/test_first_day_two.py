"""A new user's first day, round two (issue 38, items 7 and 8), through the real binary in tmux.

Each test reads the screen as a person would (:class:`~tests.app.tui.process.test_tmux.Terminal`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.app.tui.process.test_tmux import BINARY, Terminal, terminal  # noqa: F401 - the fixture


def _slow_script(folder: Path, text: str) -> Path:
    """A faux script whose answer waits ten minutes before its first word (a slow model)."""
    path = folder / "slow.json"
    path.write_text(json.dumps({"steps": [{"text": text}], "latency": 600}))
    return path


def test_an_answer_aborted_before_its_first_word_is_marked_interrupted_after_a_restart_too(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    project: Path,
    tmp_path: Path,
) -> None:
    script = _slow_script(tmp_path, "Too late.")
    terminal.start("one", project, f"{BINARY} --faux-script {script}")
    terminal.wait_text("one", "faux/faux-1")
    terminal.type("one", "explain the build")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "to interrupt")  # the turn runs; nothing streamed yet
    terminal.press("one", "Escape")
    screen = terminal.wait_text("one", "■ Interrupted by user")
    assert "Too late." not in screen
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")
    # The mark is in the session, not in that terminal's memory: a new start shows it.
    terminal.start("two", project, f"{BINARY} --continue")
    again = terminal.wait_text("two", "■ Interrupted by user")
    assert "explain the build" in again
    terminal.type("two", "/stop")
    terminal.press("two", "Enter")
    terminal.wait_text("two", "EXITED 0")


def test_an_unknown_model_is_refused_on_the_command_line_and_in_the_config_with_exit_2(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    """``--model faux/nope`` (and ``model =`` in config.toml) names the model, lists what the
    provider serves, and exits 2 before any session work, headless and TUI alike; a model the
    faux script declares is known."""
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BINARY), *args], cwd=project, env=env, capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=120,
        )  # fmt: skip

    for args in (("--model", "faux/nope", "-p", "hi"), ("--model", "faux/nope")):
        done = run(*args)
        assert done.returncode == 2, done.stderr
        assert "unknown model faux/nope; available from faux: faux/faux-1." in done.stderr
        assert "--faux-script" in done.stderr  # how to add one
    config = tmp_path / "config" / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('model = "faux/nope"\n')
    done = run("-p", "hi")
    assert done.returncode == 2 and "unknown model faux/nope" in done.stderr, done.stderr
    config.unlink()
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"models": [{"id": "nope"}], "steps": [{"text": "Known."}]}))
    done = run("--model", "faux/nope", "--faux-script", str(script), "-p", "hi")
    assert done.returncode == 0 and done.stdout.strip() == "Known.", done.stderr


def test_context_shows_the_whole_budget_system_prompt_memory_tools_messages_and_free_space(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    project: Path,
    tmp_path: Path,
) -> None:
    (project / "AGENTS.md").write_text("Answer in one sentence.\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Done here."}]))
    terminal.start("one", project, f"{BINARY} --faux-script {script}")
    terminal.wait_text("one", "faux/faux-1")
    terminal.type("one", "hello there")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "Done here.")
    terminal.type("one", "/context")
    terminal.press("one", "Enter")
    screen = terminal.wait_dialog("one", "Context: ~")  # armed: it takes keys
    title = next(line for line in screen.splitlines() if "Context: ~" in line)
    assert "of 200,000 tokens (" in title and "%)" in title and "█" in title  # faux-1's window
    lines = screen.splitlines()
    assert any("1. System prompt  ~" in line and "1 memory file" in line for line in lines), screen
    assert "AGENTS.md" in screen  # the memory file's row (with its size and why it was read)
    assert any("2. Tools  ~" in line and "tools, sent beside" in line for line in lines), screen
    assert any("3. Messages  ~" in line and "1 prompt, 1 answer" in line for line in lines)
    assert any("4. Free space  ~" in line and "200,000-token window" in line for line in lines)
    terminal.press("one", "7", "Enter")  # its row: the file's text, and why it was read
    # The text's own dialog (two buttons), armed: its own whole box, not the budget's key line
    # under a frame half redrawn (wait_dialog waits for the arming line written since the key).
    shown = terminal.wait_dialog("one", "Answer in one sentence.", "←→ or 1-2 select")
    assert "AGENTS.md" in shown
    terminal.press("one", "Escape")
    terminal.wait("one", lambda text: "Answer in one sentence." not in text, "the text closed")
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")


def test_at_file_inlines_the_file_for_the_model_and_the_transcript_shows_a_mark(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    project: Path,
    agent_env: dict[str, str],
    tmp_path: Path,
) -> None:
    from coding_agent.session_files.folders import list_sessions

    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("import os\nSECRET_LINE_42 = 1\nprint(os.name)\n")
    (project / "docs").mkdir()
    (project / "docs" / "a.md").write_text("a\n")
    (project / "docs" / "b.md").write_text("b\n")
    (tmp_path / "outside.txt").write_text("OUTSIDE_TEXT\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Seen them."}]))
    terminal.start("one", project, f"{BINARY} --faux-script {script}")
    terminal.wait_text("one", "faux/faux-1")
    terminal.type("one", "explain @src/app.py with @docs/ and @nope.txt and @../outside.txt")
    terminal.press("one", "Enter")
    screen = terminal.wait_text("one", "Seen them.")
    assert "📎 src/app.py (3 lines)" in screen
    assert "📎 docs/ (2 entries)" in screen
    assert "📎 nope.txt: no such file or folder, not attached" in screen
    assert "📎 ../outside.txt: outside the project" in screen
    assert "SECRET_LINE_42" not in screen  # the transcript shows the mark, not the text
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")
    # what the model was sent: the prompt as typed, then the file's text, fenced with its path
    [session] = list_sessions(env=agent_env)
    stored = "\n".join(
        path.read_text(errors="replace") for path in session.path.rglob("*") if path.is_file()
    )
    assert "explain @src/app.py with @docs/" in stored
    assert "src/app.py:\\n```\\nimport os\\nSECRET_LINE_42 = 1\\nprint(os.name)\\n```" in stored
    assert "a.md\\nb.md" in stored
    assert "OUTSIDE_TEXT" not in stored
    # a restart shows the same marks (they are the stored blocks' first lines)
    terminal.start("two", project, f"{BINARY} --continue")
    again = terminal.wait_text("two", "📎 src/app.py (3 lines)")
    assert "SECRET_LINE_42" not in again
    terminal.type("two", "/stop")
    terminal.press("two", "Enter")
    terminal.wait_text("two", "EXITED 0")
