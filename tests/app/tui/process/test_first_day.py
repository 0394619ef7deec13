"""A new user's first day, through the real binary in tmux (issue 38).

Each test reads the screen as a person would (:class:`~tests.app.tui.process.test_tmux.Terminal`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.tui.process.test_tmux import BINARY, Terminal, terminal  # noqa: F401 - the fixture


def _drawn_at(screen: str, size: tuple[int, int]) -> bool:
    lines = screen.splitlines()
    borders = [line.rstrip() for line in lines if line.rstrip().endswith("─╯")]
    return (
        len(lines) == size[1]
        and "faux/faux-1" in lines[-1]
        and any(len(border) == size[0] - 1 for border in borders)
    )


@pytest.mark.parametrize("size", [(160, 45), (100, 30)])
def test_f1_help_scrolls_to_its_last_line_with_the_keys_its_footer_names(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    project: Path,
    size: tuple[int, int],
) -> None:
    terminal.start("one", project, str(BINARY))
    terminal.tmux("resize-window", "-t", "main:one", "-x", str(size[0]), "-y", str(size[1]))
    # Drawn at the new size (not a frame from before the resize, which "faux/faux-1" alone can
    # be): the status line is the pane's last row and the editor's box spans the new width.
    # F1 before that would lay the help out for the old size.
    terminal.wait("one", lambda text: _drawn_at(text, size), f"the TUI drawn at {size}")
    terminal.press("one", "F1")
    first = terminal.wait_text("one", "↑↓ pgup pgdn scroll")
    last = "tab completes paths"  # the key list's last fixed line, past the screen's bottom
    assert last not in first, "the help is longer than the screen (else this tests nothing)"
    terminal.press("one", "PageDown", "PageDown", "PageDown", "PageDown")  # one burst: all count
    terminal.wait_text("one", last)
    terminal.press("one", "Home")
    terminal.wait(one := "one", lambda text: "/help" in text and last not in text, "the top")
    terminal.press(one, *["Down"] * 80)
    terminal.wait_text("one", last)
    terminal.press("one", "Escape")
    terminal.wait(one, lambda text: "↑↓ pgup pgdn scroll" not in text, "the help closed")


# {repo}: this checkout (a uv project); {project}: the test's project folder, where the shell is
@pytest.mark.parametrize(
    ("launch", "hint"),
    [
        ("env -u UV_RUN_RECURSION_DEPTH", "coding-agent --resume"),
        # `uv run coding-agent` inside the project (a clone)
        ("env UV_RUN_RECURSION_DEPTH=1 VIRTUAL_ENV={project}/.venv", "uv run coding-agent --resume"),
        # the README's `uv run --project "$PWD" --directory "$(mktemp -d)" coding-agent` and a
        # shell elsewhere: a bare `uv run` there finds no project
        ("env UV_RUN_RECURSION_DEPTH=1 VIRTUAL_ENV={repo}/.venv", "uv run --project {repo} coding-agent --resume"),
    ],
)  # fmt: skip
def test_the_faux_model_says_it_is_an_offline_demo_and_quit_names_the_command_the_user_ran(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    project: Path,
    launch: str,
    hint: str,
) -> None:
    repo = Path(__file__).resolve().parents[4]
    assert (repo / "pyproject.toml").is_file() and not project.is_relative_to(repo)
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n')
    launch, hint = (text.format(repo=repo, project=project) for text in (launch, hint))
    terminal.start("one", project, f"{launch} {BINARY}")
    demo = "faux is the offline demo model: no API key, nothing leaves this machine."
    terminal.wait(  # both lines, in one capture (a frame may show half drawn)
        "one",
        lambda text: "Type anything to start a short tour" in text and demo in text,
        "the first-run lines",
    )
    terminal.type("one", "/quit")
    terminal.press("one", "Enter")
    done = terminal.wait_text("one", "EXITED 0")
    line = next(text for text in done.splitlines() if "continue it with:" in text)
    assert line.split("continue it with: ")[1].startswith(hint + " ")
    # opened and left untouched: no activity recorded (it keeps its creation time, item 1)
    from coding_agent.session_files.folders import list_sessions

    [session] = list_sessions(env=terminal.env)
    assert not session.activity_path.exists()


def test_attach_starts_a_worker_when_the_session_has_none(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    project: Path,
    agent_env: dict[str, str],
    tmp_path: Path,
) -> None:
    """The TUI and the worker both died: ``attach`` starts a worker instead of refusing."""
    import json
    import subprocess

    from coding_agent.session_files.folders import list_sessions

    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Remembered."}]))
    done = subprocess.run(
        [str(BINARY), "--faux-script", str(script), "-p", "remember the milk"],
        cwd=project,
        env=agent_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    [session] = list_sessions(env=agent_env)
    assert not session.worker_running()
    terminal.start("one", project, f"{BINARY} attach {session.id}")
    screen = terminal.wait_text("one", "Remembered.")
    assert "remember the milk" in screen
    assert session.worker_running()
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    ended = terminal.wait_text("one", "EXITED 0")
    assert f"session {session.id} had no running worker: starting one" in ended
