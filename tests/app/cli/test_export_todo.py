"""The todo list in exports (issue 44 deliver 5): a session whose model kept a todo list exports
each ``todo`` call as a checklist, open, not as its JSON; through the real binary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from coding_agent.session_files.folders import list_sessions

BINARY = Path(sys.executable).with_name("coding-agent")


def test_a_todo_call_exports_as_a_checklist(tmp_path: Path, agent_env: dict[str, str]) -> None:
    project = tmp_path / "project"
    project.mkdir()
    todos = [
        {"content": "Read the <code>", "status": "completed", "activeForm": "Reading"},
        {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing"},
        {"content": "Run the tests", "status": "pending", "activeForm": "Running"},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"text": "Planning.", "toolCalls": [{"name": "todo", "arguments": {"todos": todos}}]},
        {"text": "Planned."},
    ]))  # fmt: skip
    run = [str(BINARY), "--faux-script", str(script), "-p", "plan it"]
    done = subprocess.run(run, cwd=project, env=agent_env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (session,) = list_sessions(project, env=agent_env)
    page = subprocess.run([str(BINARY), "export", session.id, "-o", "-"], cwd=project,
                          env=agent_env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert page.returncode == 0, page.stderr
    assert "<details open><summary>⚙ todo (1/3 done)</summary>" in page.stdout
    assert (
        '<ul class="todo"><li>☑ Read the &lt;code&gt;</li><li>▶ Fix the bug</li>'
        "<li>☐ Run the tests</li></ul>"
    ) in page.stdout
    assert '"activeForm"' not in page.stdout  # the list, not its JSON
