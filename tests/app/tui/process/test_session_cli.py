"""``coding-agent sessions [--json]``, ``--name``, ``coding-agent export`` (HTML and JSONL), and the
exported page opened in headless Chromium (Debian's ``chromium``; .ci/run installs it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from coding_agent.cli.main import main
from coding_agent.session_files.folders import list_sessions

SCRIPT = [
    {
        "text": "I will **edit** the file.",
        "toolCalls": [
            {"name": "read", "arguments": {"path": "main.py"}},
        ],
    },
    {
        "text": "Now the edit.",
        "toolCalls": [
            {
                "name": "edit",
                "arguments": {
                    "path": "main.py",
                    "edits": [{"oldText": "hello", "newText": "goodbye"}],
                },
            }
        ],
    },
    {"text": "Done: `main.py` now says *goodbye*.\n\n| a | b |\n|---|---|\n| 1 | 2 |"},
]


@pytest.fixture
def made(
    project: Path, agent_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """A session of ``project`` with one headless turn (read, edit, Markdown answer)."""
    monkeypatch.setenv("XDG_STATE_HOME", agent_env["XDG_STATE_HOME"])
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(project)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    code = main(
        [
            "-p",
            "Please change the greeting",
            "--name",
            "greeting change",
            "--faux-script",
            str(script),
            "--permission-mode",
            "auto",
        ]
    )
    assert code == 0
    (session,) = list_sessions(project)
    return {"session": session, "project": project}


def test_sessions_lists_name_activity_prompt_model_and_size(
    made: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["sessions", "--json"]) == 0
    (info,) = json.loads(capsys.readouterr().out)
    assert info["id"] == made["session"].id
    assert info["name"] == "greeting change"
    assert info["firstPrompt"] == "Please change the greeting"
    assert info["model"] == "faux/faux-1"
    assert info["size"] > 0 and info["running"] is False
    created = datetime.fromisoformat(info["created"]).replace(microsecond=0)
    assert datetime.fromisoformat(info["lastActivity"]) >= created
    assert main(["sessions"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(made["session"].id) and "greeting change" in line


def test_export_jsonl_and_html(made: dict[str, Any], tmp_path: Path, capsys: Any) -> None:
    session = made["session"]
    out = tmp_path / "out.jsonl"
    assert main(["export", session.id[:15], "--format", "jsonl", "-o", str(out)]) == 0
    header, *entries = [json.loads(line) for line in out.read_text().splitlines()]
    assert header == {
        "type": "session",
        "id": session.id,
        "cwd": str(session.cwd),
        "branch": 1,  # the number users see
        "conversation": 1,  # the internal id
    }
    assert [e["kind"] for e in entries].count("pi.user") == 1
    page = tmp_path / "page.html"
    assert main(["export", session.id, "-o", str(page)]) == 0
    text = page.read_text()
    assert "<title>greeting change</title>" in text
    assert "<strong>edit</strong>" in text and "<table>" in text  # Markdown rendered
    assert "<details><summary>⚙ edit main.py</summary>" in text  # tool calls collapsible
    assert '<span class="del">' in text and '<span class="add">' in text  # diff coloured
    for remote in ("<script", "src=", "href=", "url(", "@import", "<link"):
        assert remote not in text  # self-contained: nothing is fetched when it is opened


def test_export_without_o_writes_the_page_here_and_prints_where(
    made: dict[str, Any], tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``-o``: ``<id>.html`` in the current folder, its absolute path printed (pi's
    ``--export``); ``-o FILE.jsonl`` without ``--format`` writes JSONL, as ``/export`` does."""
    session = made["session"]
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    capsys.readouterr()
    assert main(["export", session.id]) == 0
    page = here / f"{session.id}.html"
    assert capsys.readouterr().out == f"Exported branch 1 of {session.id} as HTML to {page}\n"
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert main(["export", session.id, "-o", "raw.jsonl"]) == 0
    raw = here / "raw.jsonl"
    assert capsys.readouterr().out == f"Exported branch 1 of {session.id} as JSONL to {raw}\n"
    assert json.loads(raw.read_text().splitlines()[0])["type"] == "session"


def test_export_without_a_session_exports_the_one_prompted_last_here(
    made: dict[str, Any], tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``coding-agent export`` alone (pi's and Claude Code's export take the current session)
    was a usage error, "the following arguments are required: SESSION"; it now exports the
    session ``--continue`` would open, and in a folder without one names the way out."""
    session = made["session"]
    capsys.readouterr()
    assert main(["export"]) == 0
    page = made["project"] / f"{session.id}.html"
    assert capsys.readouterr().out == f"Exported branch 1 of {session.id} as HTML to {page}\n"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["export"]) == 2
    error = capsys.readouterr().err
    assert f"no session of {elsewhere} to export: name one (coding-agent export SESSION" in error


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_the_exported_page_renders_in_headless_chromium(
    made: dict[str, Any], tmp_path: Path
) -> None:
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI") == "true" or os.environ.get("CODING_AGENT_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is missing: .ci/run installs it with apt-get")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    page = tmp_path / "page.html"
    assert main(["export", made["session"].id, "-o", str(page)]) == 0
    flags = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Please change the greeting" in dom.stdout
    assert "now says <em>goodbye</em>" in dom.stdout
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1000,800", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    with Image.open(shot) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20) or []
    # The page painted: the user's blue box, the assistant's grey one and text, not a blank page.
    assert len(colours) > 50
    assert any(
        abs(r - 0xDD) < 4 and abs(g - 0xF4) < 4 and abs(b - 0xFF) < 4 for _, (r, g, b) in colours
    )
