"""Claude Code hooks through the real session worker (issue 39, item 4).

Each test writes a temporary HOME whose ``~/.claude/settings.json`` holds hooks in Claude Code's
shape (real shell commands and Python scripts), runs ``coding_agent.worker.main`` with a scripted
faux model in ``auto`` mode (so the session's approval lets every call through and what is
blocked is blocked by a hook), and checks what the model read and what happened on disk.
Nothing sleeps to synchronise: the tests wait on the conversation's view, on lines of the
worker's stderr and, for the crash, on a marker file a hook writes (polled with a deadline).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, define_facet
from chord.textual import Choice, tui_facet
from coding_agent.session_files.folders import create_session
from coding_agent.settings.trust import TrustStore
from facets_hooks.contract import HooksListing
from facets_hooks.tui import tui_facet as hooks_tui_facet

sys.path.insert(0, str(Path(__file__).parents[2] / "app" / "worker"))  # worker_support
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

BLOCK_RM = """import json, sys
call = json.load(sys.stdin)
assert call["hook_event_name"] == "PreToolUse" and call["tool_name"] == "Bash", call
if "rm -rf" in call["tool_input"]["command"]:
    print("rm -rf is not allowed in this project; delete files one by one", file=sys.stderr)
    sys.exit(2)
"""

DENY_SECRETS = """import json, sys
call = json.load(sys.stdin)
if call["tool_input"]["file_path"].endswith("secrets.env"):
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "secrets.env is off limits",
    }}))
"""

FORMATTER = """import json, os, pathlib, sys
call = json.load(sys.stdin)
assert os.environ["CLAUDE_PROJECT_DIR"] == os.getcwd() == call["cwd"], call
with open(sys.argv[1], "a") as log:
    log.write(call["tool_name"] + "\\n")
path = pathlib.Path(call["tool_input"]["file_path"])
path.write_text(path.read_text().upper())
"""

ADD_CONTEXT = """import json, sys
call = json.load(sys.stdin)
assert call["hook_event_name"] == "UserPromptSubmit" and call["prompt"] == "what is the code?"
print(json.dumps({"hookSpecificOutput": {
    "hookEventName": "UserPromptSubmit",
    "additionalContext": "The deploy code is PELICAN-7.",
}}))
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def home_env(tmp: Path) -> dict[str, str]:
    home = tmp / "home"
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(tmp / "config"),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
    }


def settings(tmp: Path, hooks: dict[str, Any]) -> Path:
    return write(tmp / "home" / ".claude" / "settings.json", json.dumps({"hooks": hooks}))


def command(command: str, timeout: float | None = None) -> dict[str, Any]:
    hook: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        hook["timeout"] = timeout
    return hook


def script(tmp: Path, steps: Any) -> Path:
    return write(tmp / "script.json", json.dumps(steps))


async def run_turn(
    tmp: Path,
    env: dict[str, str],
    steps: Any,
    prompt: str = "go",
    stderr: list[str] | None = None,
    listing: list[Any] | None = None,
    tui: ScriptedTui | None = None,
    mode: str = "auto",
    approve: Any = None,
) -> Client:
    """One turn in a fresh worker; returns the client once the turn ended."""
    project = tmp / "project"
    project.mkdir(exist_ok=True)
    session = create_session(project, env=env)
    client = Client(approve=approve)
    lines: list[str] = [] if stderr is None else stderr

    def on_stderr(line: str) -> None:
        lines.append(line)
        client.notify()

    def observer(fenv: FacetEnvironment) -> None:
        if listing is not None:
            listing.append(fenv.use(HooksListing))

    async with (
        worker_process(
            session,
            env,
            "--faux-script",
            str(script(tmp, steps)),
            "--permission-mode",
            mode,
            on_stderr=on_stderr,
        ) as worker,
        connected(
            client,
            worker.socket,
            define_facet("test/hooks", observer),
            *(() if tui is None else (tui_facet(tui), hooks_tui_facet)),  # pyright: ignore[reportArgumentType]
        ),
    ):
        await client.root.send({"content": prompt}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        if tui is not None:
            with anyio.fail_after(TIMEOUT):
                await tui.commands["hooks"]("", BACKGROUND)
        if listing is not None:
            with anyio.fail_after(TIMEOUT):
                listing[:] = [await listing[0].summary(BACKGROUND)]
    return client


class ScriptedTui:
    """The ``Tui`` service without a screen: commands by name, modals recorded."""

    def __init__(self) -> None:
        self.commands: dict[str, Any] = {}
        self.shown: list[tuple[str, list[str], str]] = []

    async def acquire_modal(self, ctx: Context) -> Any:
        return self

    async def choose(self, title: str, choices: list[Choice], *, body: Any = "") -> str | None:
        self.shown.append((title, [c.value for c in choices], str(body)))
        return choices[0].value

    def close(self) -> None:
        pass

    def notify(self, message: str, *, severity: str = "information") -> None:
        raise AssertionError(f"unexpected notice: {message}")

    def register_command(self, name: str, description: str, handler: Any) -> Any:
        self.commands[name] = handler
        return lambda: self.commands.pop(name, None)


def results(client: Client) -> list[dict[str, Any]]:
    return [entry["model"][0] for entry in client.entries("pi.tool_result")]


async def test_a_pre_tool_use_hook_blocks_rm_rf_with_its_stderr_reaching_the_model(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    hook = write(tmp_path / "hooks" / "block_rm.py", BLOCK_RM)
    source = settings(
        tmp_path, {"PreToolUse": [{"matcher": "Bash", "hooks": [command(f"{PYTHON} {hook}")]}]}
    )
    write(tmp_path / "config" / "coding-agent" / "hooks.json", "{not json")
    build = tmp_path / "project" / "build"
    write(build / "keep.txt", "kept\n")
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "rm -rf build"}}]},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo hello"}}]},
        {"text": "done"},
    ]
    listing: list[Any] = []
    tui = ScriptedTui()
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, listing=listing, tui=tui, stderr=stderr)
    blocked, allowed = results(client)
    assert blocked["isError"] is True
    assert blocked["content"][0]["text"] == (
        "Tool call blocked: PreToolUse hook: rm -rf is not allowed in this project; delete "
        "files one by one"
    )
    assert (build / "keep.txt").read_text() == "kept\n"
    assert allowed["isError"] is False and "hello" in allowed["content"][0]["text"]
    # /hooks's source: the hook with its file, and the broken file named with its problem
    (summary,) = listing
    assert [(h["event"], h["matcher"], h["source"]) for h in summary["hooks"]] == [
        ("PreToolUse", "Bash", str(source))
    ]
    bad = tmp_path / "config" / "coding-agent" / "hooks.json"
    problem = (
        f"{bad}:1:2: not valid JSON (Expecting property name enclosed in double quotes); its "
        "hooks are not loaded"
    )
    assert summary["problems"] == [problem]
    assert sum(problem in line for line in stderr) == 1, stderr  # said once on the worker's log
    # /hooks, in the TUI process, over the wire
    assert tui.shown == [
        (
            "Hooks",
            ["close"],
            f"PreToolUse [Bash]: {PYTHON} {hook}\n"
            f"    timeout 60 s · {source}\n"
            "\n"
            "Not loaded:\n"
            f"  {problem}",
        )
    ]


async def test_a_pre_tool_use_hook_whose_json_denies_keeps_the_file_unwritten(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    hook = write(tmp_path / "hooks" / "deny.py", DENY_SECRETS)
    settings(
        tmp_path,
        {"PreToolUse": [{"matcher": "Edit|Write", "hooks": [command(f"{PYTHON} {hook}")]}]},
    )
    steps = [
        {"toolCalls": [{"name": "write", "arguments": {"path": "secrets.env", "content": "K=1"}}]},
        {"toolCalls": [{"name": "write", "arguments": {"path": "notes.md", "content": "hi\n"}}]},
        {"text": "done"},
    ]
    client = await run_turn(tmp_path, env, steps)
    denied, written = results(client)
    assert denied["isError"] is True
    assert denied["content"][0]["text"] == (
        "Tool call blocked: PreToolUse hook denied it: secrets.env is off limits"
    )
    assert not (tmp_path / "project" / "secrets.env").exists()
    assert written["isError"] is False
    assert (tmp_path / "project" / "notes.md").read_text() == "hi\n"


REWRITE_TO_DRY_RUN = """import json, sys
call = json.load(sys.stdin)
command = call["tool_input"]["command"]
if "--dry-run" not in command:
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "updatedInput": {**call["tool_input"], "command": command + " --dry-run"},
    }}))
else:  # an input the hook leaves as it is (the same updatedInput) goes on
    print(json.dumps({"hookSpecificOutput": {"updatedInput": call["tool_input"]}}))
"""


async def test_a_pre_tool_use_hook_that_rewrites_the_input_blocks_the_original_call(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """Claude Code runs a hook's ``updatedInput`` instead of the model's input; this agent does
    not rewrite calls, so running the original would undo the hook: the call is blocked."""
    env = {**agent_env, **home_env(tmp_path)}
    hook = write(tmp_path / "hooks" / "dry.py", REWRITE_TO_DRY_RUN)
    settings(
        tmp_path, {"PreToolUse": [{"matcher": "Bash", "hooks": [command(f"{PYTHON} {hook}")]}]}
    )
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "touch deployed"}}]},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo ok --dry-run"}}]},
        {"text": "done"},
    ]
    client = await run_turn(tmp_path, env, steps)
    rewritten, same = results(client)
    assert rewritten["isError"] is True
    text = rewritten["content"][0]["text"]
    assert "rewrote this call's input (updatedInput)" in text
    assert '"command": "touch deployed --dry-run"' in text
    assert not (tmp_path / "project" / "deployed").exists()
    assert same["isError"] is False and "ok --dry-run" in same["content"][0]["text"]


class PolicyServer:
    """A real HTTP server on loopback answering PreToolUse events as a policy service does:
    it denies any Bash command with ``rm -rf``, and records each event and its headers."""

    def __init__(self) -> None:
        import http.server
        import threading

        seen: list[tuple[dict[str, Any], str | None]] = []
        self.seen = seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen.append((event, self.headers.get("Authorization")))
                verdict = {}
                if "rm -rf" in event["tool_input"].get("command", ""):
                    verdict = {"hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": "deny",
                        "permissionDecisionReason": "policy: no rm -rf",
                    }}  # fmt: skip
                body = json.dumps(verdict).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/pre"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def test_an_http_pre_tool_use_hook_that_denies_blocks_the_call(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """``"type": "http"``: the event is POSTed, the answer's JSON decides; a header's ``$VAR``
    is filled only for the names ``allowedEnvVars`` lists."""
    env = {**agent_env, **home_env(tmp_path), "POLICY_USER": "alice", "OTHER": "secret"}
    server = PolicyServer()
    try:
        hook = {
            "type": "http",
            "url": server.url,
            "headers": {"Authorization": "User $POLICY_USER ${OTHER}"},
            "allowedEnvVars": ["POLICY_USER"],
        }
        settings(tmp_path, {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]})
        write(tmp_path / "project" / "keep" / "file.txt", "kept\n")
        steps = [
            {"toolCalls": [{"name": "bash", "arguments": {"command": "rm -rf keep"}}]},
            {"toolCalls": [{"name": "bash", "arguments": {"command": "echo fine"}}]},
            {"text": "done"},
        ]
        client = await run_turn(tmp_path, env, steps)
    finally:
        server.close()
    denied, ran = results(client)
    assert denied["isError"] is True
    assert denied["content"][0]["text"] == (
        "Tool call blocked: PreToolUse hook denied it: policy: no rm -rf"
    )
    assert (tmp_path / "project" / "keep" / "file.txt").exists()
    assert ran["isError"] is False
    assert [(event["tool_input"]["command"], auth) for event, auth in server.seen] == [
        ("rm -rf keep", "User alice "),
        ("echo fine", "User alice "),
    ]


async def test_a_user_prompt_submit_hook_adds_context_the_model_reads(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    hook = write(tmp_path / "hooks" / "context.py", ADD_CONTEXT)
    settings(tmp_path, {"UserPromptSubmit": [{"hooks": [command(f"{PYTHON} {hook}")]}]})
    steps = {
        "steps": [{"text": "I was not told the code"}],
        "conversations": [{"when": "PELICAN-7", "steps": [{"text": "the code is PELICAN-7"}]}],
    }
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, prompt="what is the code?", stderr=stderr)
    answers = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.assistant"]
    assert answers == ["the code is PELICAN-7"], stderr


async def test_a_user_prompt_submit_hook_that_exits_2_keeps_the_prompt_from_the_model(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    guard = command("grep -q password && { echo 'no passwords in prompts' >&2; exit 2; }; exit 0")
    settings(tmp_path, {"UserPromptSubmit": [{"hooks": [guard]}]})
    steps = {
        "steps": [{"text": "I read the prompt"}],
        "conversations": [
            {"when": "blocked by a UserPromptSubmit hook", "steps": [{"text": "blocked"}]}
        ],
    }
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, prompt="my password is hunter2", stderr=stderr)
    answers = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.assistant"]
    assert answers == ["blocked"]
    assert any("blocked a prompt: no passwords in prompts" in line for line in stderr), stderr


async def test_session_start_stdout_is_context_before_the_first_prompt_and_session_end_runs(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    started = command(
        f"""{PYTHON} -c 'import json,sys; e=json.load(sys.stdin); print("Branch: main; source", e["source"])'"""
    )
    ended = tmp_path / "ended.json"
    settings(
        tmp_path,
        {
            "SessionStart": [
                {"matcher": "resume", "hooks": [command("echo UNWANTED")]},
                {"matcher": "startup", "hooks": [started]},
            ],
            "SessionEnd": [{"hooks": [command(f"cat > {ended}.tmp; mv {ended}.tmp {ended}")]}],
        },
    )
    steps = {
        "steps": [{"text": "no branch known"}],
        "conversations": [
            {"when": "UNWANTED", "steps": [{"text": "the resume hook ran"}]},
            {"when": "Branch: main; source startup", "steps": [{"text": "main"}]},
        ],
    }
    client = await run_turn(tmp_path, env, steps)
    answers = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.assistant"]
    assert answers == ["main"]
    # the worker has stopped: its SessionEnd hook was started on the way out
    await _until_file(ended)
    assert json.loads(ended.read_text())["hook_event_name"] == "SessionEnd"


EXPLAIN_FAILURE = """import json, sys
call = json.load(sys.stdin)
assert call["hook_event_name"] == "PostToolUseFailure" and call["tool_name"] == "Read", call
assert call["is_interrupt"] is False and "tool_response" not in call, call
print(json.dumps({"hookSpecificOutput": {
    "hookEventName": "PostToolUseFailure",
    "additionalContext": "Files live under src/; failed: " + call["error"][:40],
}}))
"""


async def test_a_post_tool_use_failure_hook_adds_context_to_a_failed_call_only(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    hook = write(tmp_path / "hooks" / "explain.py", EXPLAIN_FAILURE)
    settings(
        tmp_path,
        {"PostToolUseFailure": [{"matcher": "Read", "hooks": [command(f"{PYTHON} {hook}")]}]},
    )
    write(tmp_path / "project" / "here.txt", "here\n")
    steps = [
        {"toolCalls": [{"name": "read", "arguments": {"path": "missing.txt"}}]},
        {"toolCalls": [{"name": "read", "arguments": {"path": "here.txt"}}]},
        {"text": "done"},
    ]
    client = await run_turn(tmp_path, env, steps)
    failed, read = results(client)
    assert failed["isError"] is True
    texts = [block["text"] for block in failed["content"]]
    assert any(
        text.strip().startswith("PostToolUseFailure hook additional context: Files live under")
        for text in texts
    ), texts
    assert read["isError"] is False
    assert not any("PostToolUseFailure" in block["text"] for block in read["content"])


REDACT = """import json, sys
call = json.load(sys.stdin)
text = call["tool_response"]["content"]
if "sk-live-" in text:
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PostToolUse",
        "updatedMCPToolOutput": [{"type": "text", "text": text.replace("sk-live-42", "[REDACTED]")}],
        "additionalContext": "A key was redacted from this output.",
    }}))
"""


async def test_a_post_tool_use_hook_that_replaces_the_output_keeps_the_original_from_the_model(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """``updatedMCPToolOutput`` (and ``updatedToolOutput``): the model reads the hook's text in
    place of the tool's, so a hook that redacts a secret keeps it out of the conversation."""
    env = {**agent_env, **home_env(tmp_path)}
    hook = write(tmp_path / "hooks" / "redact.py", REDACT)
    settings(
        tmp_path, {"PostToolUse": [{"matcher": "Bash", "hooks": [command(f"{PYTHON} {hook}")]}]}
    )
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo key=sk-live-42"}}]},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo plain"}}]},
        {"text": "done"},
    ]
    client = await run_turn(tmp_path, env, steps)
    redacted, plain = results(client)
    text = "".join(block["text"] for block in redacted["content"])
    assert "sk-live-42" not in text
    assert text.startswith("key=[REDACTED]")
    assert text.endswith(
        "PostToolUse hook additional context: A key was redacted from this output."
    )
    assert "plain" in plain["content"][0]["text"]


async def test_a_post_tool_use_formatter_runs_after_every_edit_and_changes_the_file(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    log = tmp_path / "formatted.log"
    hook = write(tmp_path / "hooks" / "format.py", FORMATTER)
    settings(
        tmp_path,
        {"PostToolUse": [{"matcher": "Edit|Write", "hooks": [command(f"{PYTHON} {hook} {log}")]}]},
    )
    edit = {"path": "a.txt", "edits": [{"oldText": "HELLO", "newText": "bye"}]}
    failing = {"oldText": "not in the file", "newText": "x"}
    steps = [
        {"toolCalls": [{"name": "write", "arguments": {"path": "a.txt", "content": "hello\n"}}]},
        # the formatter changed the file after the write: read it again (the edit tool refuses
        # a file changed since it was last read), then the edit finds HELLO, not hello
        {"toolCalls": [{"name": "read", "arguments": {"path": "a.txt"}}]},
        # an edit that fails: PostToolUse runs after a call that succeeded only
        {"toolCalls": [{"name": "edit", "arguments": {**edit, "edits": [failing]}}]},
        {"toolCalls": [{"name": "edit", "arguments": edit}]},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo not an edit"}}]},
        {"text": "done"},
    ]
    client = await run_turn(tmp_path, env, steps)
    assert [r["isError"] for r in results(client)] == [False, False, True, False, False]
    assert "HELLO" in results(client)[1]["content"][0]["text"]
    assert (tmp_path / "project" / "a.txt").read_text() == "BYE\n"
    assert log.read_text().splitlines() == ["Write", "Edit"]


async def test_a_hook_that_outlives_its_timeout_is_stopped_and_the_call_goes_on(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    started = tmp_path / "started"
    slow = command(f"echo started > {started}; sleep 120; exit 2", timeout=1)
    settings(tmp_path, {"PreToolUse": [{"matcher": "*", "hooks": [slow]}]})
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran > ran.txt"}}]},
        {"text": "done"},
    ]
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, stderr=stderr)
    assert started.exists()
    (result,) = results(client)
    assert result["isError"] is False
    assert (tmp_path / "project" / "ran.txt").read_text() == "ran\n"
    assert any("timed out after 1 s; it was stopped" in line for line in stderr), stderr


async def test_an_untrusted_projects_settings_hooks_are_not_run(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    block_all = {"PreToolUse": [{"matcher": "*", "hooks": [command("exit 2")]}]}
    project_settings = write(
        tmp_path / "project" / ".claude" / "settings.json", json.dumps({"hooks": block_all})
    )
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran > ran.txt"}}]},
        {"text": "done"},
    ]
    listing: list[Any] = []
    client = await run_turn(tmp_path, env, steps, listing=listing)
    (result,) = results(client)
    assert result["isError"] is False
    assert (tmp_path / "project" / "ran.txt").exists()
    (summary,) = listing
    assert summary["hooks"] == [] and summary["waiting"] == [str(project_settings)]


STOP_ONCE = """import json, sys
event = json.load(sys.stdin)
assert event["hook_event_name"] == "Stop", event
if not event["stop_hook_active"]:
    print("run the tests before you stop", file=sys.stderr)
    sys.exit(2)
"""


async def test_a_stop_hook_makes_the_model_go_on_once_with_its_reason(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    prompts = tmp_path / "prompts.log"
    hook = write(tmp_path / "hooks" / "stop.py", STOP_ONCE)
    settings(
        tmp_path,
        {
            "Stop": [{"hooks": [command(f"{PYTHON} {hook}")]}],
            # the continuation is not a prompt of the user: this runs once
            "UserPromptSubmit": [{"hooks": [command(f"cat >> {prompts}; echo >> {prompts}")]}],
        },
    )
    steps = [{"text": "all done"}, {"text": "the tests pass"}]
    client = await run_turn(tmp_path, env, steps)
    answers = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.assistant"]
    assert answers == ["all done", "the tests pass"]
    users = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.user"]
    assert users[-1] == "run the tests before you stop"
    (logged,) = prompts.read_text().splitlines()
    assert json.loads(logged)["prompt"] == "go"


UNTIL_TESTED = """import json, sys
event = json.load(sys.stdin)
if "tests pass" not in event["last_assistant_message"]:
    print(json.dumps({"decision": "block", "reason": "say whether the tests pass"}))
"""


async def test_a_stop_hook_reads_the_last_assistant_message(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """Claude Code's ``last_assistant_message``: a Stop hook that checks the answer (not the
    ``stop_hook_active`` flag) lets the turn end once the answer says what it wants."""
    env = {**agent_env, **home_env(tmp_path)}
    hook = write(tmp_path / "hooks" / "until.py", UNTIL_TESTED)
    settings(tmp_path, {"Stop": [{"hooks": [command(f"{PYTHON} {hook}")]}]})
    steps = [{"text": "all done"}, {"text": "the tests pass"}]
    client = await run_turn(tmp_path, env, steps)
    answers = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.assistant"]
    assert answers == ["all done", "the tests pass"]
    users = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.user"]
    assert users[-1] == "say whether the tests pass"


async def test_a_notification_hook_runs_while_a_call_waits_for_approval(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    told = tmp_path / "told.json"
    settings(
        tmp_path,
        {"Notification": [{"hooks": [command(f"cat > {told}.tmp; mv {told}.tmp {told}")]}]},
    )
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran > ran.txt"}}]},
        {"text": "done"},
    ]
    project = tmp_path / "project"
    project.mkdir()
    session = create_session(project, env=env)
    faux = str(script(tmp_path, steps))
    client = Client()  # the default mode asks: the call waits on the approval dialog
    async with (
        worker_process(session, env, "--faux-script", faux, "--permission-mode", "ask") as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "go"}, BACKGROUND)
        await client.wait_for(lambda: bool(client.approvals))
        await _until_file(told)  # told while the dialog is open
        assert not (project / "ran.txt").exists()
        await client.approvals[0].facade.decide({"decision": "allow", "by": "test"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    event = json.loads(told.read_text())
    assert event["hook_event_name"] == "Notification"
    assert event["message"] == "Claude needs your permission to use Bash"
    assert (project / "ran.txt").read_text() == "ran\n"


async def test_a_pre_compact_hook_runs_before_a_manual_compaction(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    told = tmp_path / "compact.json"
    hook = command(f"cat > {told}.tmp; mv {told}.tmp {told}")
    never = tmp_path / "auto.json"
    settings(
        tmp_path,
        {
            "PreCompact": [
                {"matcher": "auto", "hooks": [command(f"cat > {never}")]},
                {"matcher": "manual", "hooks": [hook]},
            ]
        },
    )
    steps = [{"text": "first"}, {"text": "second"}, {"text": "a summary"}]
    project = tmp_path / "project"
    project.mkdir()
    session = create_session(project, env=env)
    faux = str(script(tmp_path, steps))
    client = Client()
    async with (
        worker_process(session, env, "--faux-script", faux) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "one"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        await client.root.send({"content": "two"}, BACKGROUND)
        await client.wait_for(lambda: client.turn_ended(2))
        await client.root.config_set({"keepRecent": 1}, BACKGROUND)  # keep only the last turn
        await client.root.collapse(None, BACKGROUND)
        await _until_file(told)
    event = json.loads(told.read_text())
    assert event["hook_event_name"] == "PreCompact" and event["trigger"] == "manual"
    assert not never.exists()  # its matcher names the other trigger (run first, in file order)


async def test_a_trusted_projects_settings_and_local_settings_hooks_run(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    project = tmp_path / "project"
    said = command("echo 'the project says no' >&2; exit 2")
    write(
        project / ".claude" / "settings.json",
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [said]}]}}),
    )
    log = tmp_path / "local.log"
    local = command(f'echo "$CLAUDE_PROJECT_DIR" >> {log}')
    write(
        project / ".claude" / "settings.local.json",
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [local]}]}}),
    )
    TrustStore.default(env).set(project, True)
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran > ran.txt"}}]},
        {"toolCalls": [{"name": "write", "arguments": {"path": "w.txt", "content": "w"}}]},
        {"text": "done"},
    ]
    client = await run_turn(tmp_path, env, steps)
    blocked, written = results(client)
    assert (
        blocked["content"][0]["text"] == "Tool call blocked: PreToolUse hook: the project says no"
    )
    assert not (project / "ran.txt").exists()
    assert written["isError"] is False
    assert log.read_text() == f"{project.resolve()}\n"


async def test_a_hooks_allow_never_lets_through_a_call_the_sessions_approval_blocks(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    allow = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
    settings(
        tmp_path,
        {"PreToolUse": [{"matcher": "*", "hooks": [command(f"echo '{json.dumps(allow)}'")]}]},
    )
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran > ran.txt"}}]},
        {"text": "done"},
    ]
    client = await run_turn(tmp_path, env, steps, mode="plan")
    (result,) = results(client)
    assert result["isError"] is True and "plan mode" in result["content"][0]["text"]
    assert not (tmp_path / "project" / "ran.txt").exists()


async def test_a_hooks_allow_does_not_skip_the_approval_dialog(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    marker = tmp_path / "hook.ran"
    allow_json = json.dumps(
        {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
    )
    hook = command(f"touch {marker}; echo '{allow_json}'")
    settings(tmp_path, {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]})
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran > ran.txt"}}]},
        {"text": "done"},
    ]
    client = await run_turn(tmp_path, env, steps, mode="ask", approve=allow)
    assert [d.request["name"] for d in client.approvals] == ["bash"]  # asked all the same
    assert marker.exists() and (tmp_path / "project" / "ran.txt").read_text() == "ran\n"


async def _until_file(path: Path) -> None:
    """Poll for ``path`` within the deadline: a hook process in another process group writes
    it, and nothing in this process can be told when (no event to wait on)."""
    with anyio.fail_after(TIMEOUT):
        while not await anyio.to_thread.run_sync(path.exists):  # noqa: ASYNC110
            await anyio.sleep(0.05)


async def test_a_pre_tool_use_verdict_survives_a_sigkill_before_the_tool_starts(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    # Two hooks on Bash. The first records each run and allows; the second records each run,
    # then waits for `go`. The worker is killed while the second runs: the first's verdict is
    # already a memo on the tool's slot. After the restart the first is not run again, the
    # second (running when the worker died) runs again, and the command runs once.
    env = {**agent_env, **home_env(tmp_path)}
    first, second, go = tmp_path / "first.marker", tmp_path / "second.marker", tmp_path / "go"
    hooks = [
        command(f"echo run >> {first}"),
        command(f"echo run >> {second}; while [ ! -f {go} ]; do sleep 0.05; done"),
    ]
    settings(tmp_path, {"PreToolUse": [{"matcher": "Bash", "hooks": hooks}]})
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran >> ran.txt"}}]},
        {"text": "done"},
    ]
    project = tmp_path / "project"
    project.mkdir()
    session = create_session(project, env=env)
    faux = str(script(tmp_path, steps))
    args = ("--faux-script", faux, "--permission-mode", "auto")
    client = Client()
    async with (
        worker_process(session, env, *args) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "go"}, BACKGROUND)
        await _until_file(second)
        await worker.kill()
    assert first.read_text() == "run\n"
    assert not (project / "ran.txt").exists()
    go.write_text("")
    client = Client()
    async with (
        worker_process(session, env, *args) as worker,
        connected(client, worker.socket),
    ):
        await client.wait_for(lambda: any(text_of(e) == "done" for e in client.view["entries"]))
    assert first.read_text() == "run\n"  # decided before the crash: not run again
    assert second.read_text() == "run\nrun\n"  # running when the worker died: run again
    assert (project / "ran.txt").read_text() == "ran\n"
