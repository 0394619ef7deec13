"""The headless prompt anywhere on the command line (``-p --model X "prompt"``, as Claude Code
takes it): the real parser over a table of command lines, the warm start's ``served`` agreeing
with it, and the real binary running the README's forms."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from coding_agent.cli.argv import is_headless
from coding_agent.cli.main import SUBCOMMANDS, build_parser, parse_command_line
from coding_agent.warm.client import served

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120

# argv -> (prompt, json, wait): args.prompt (-p), args.json (--json), args.wait_for_approval
HEADLESS = [
    (["-p", "prompt"], ("prompt", None, None)),
    (["-pPROMPT"], ("PROMPT", None, None)),
    (["--print=what is up"], ("what is up", None, None)),
    (["--print", "what is up"], ("what is up", None, None)),
    (["--json", "prompt"], (None, "prompt", None)),
    (["--json=prompt"], (None, "prompt", None)),
    (["-p"], ("", None, None)),
    (["-p", ""], ("", None, None)),
    (["--json"], (None, "", None)),
    # the README's "Running it"
    (["-p", "--wait-for-approval", "prompt"], ("prompt", None, math.inf)),
    (["-p", "--wait-for-approval", "5", "prompt"], ("prompt", None, 5.0)),
    (["-p", "--wait-for-approval=5", "prompt"], ("prompt", None, 5.0)),
    (["-p", "--wait-for-approval", "0.5", "prompt"], ("prompt", None, 0.5)),
    (["-p", "--wait-for-approval", "inf", "prompt"], ("prompt", None, math.inf)),
    (["-p", "prompt", "--wait-for-approval"], ("prompt", None, math.inf)),
    (["-p", "--wait", "prompt"], ("prompt", None, math.inf)),
    (["-p", "--wait-for-approval"], ("", None, math.inf)),
    # the prompt after other options (the probes' command lines)
    (["-p", "--model", "faux/faux-1", "what is up"], ("what is up", None, None)),
    (["-p", "--verbose", "hello"], ("hello", None, None)),
    (["--json", "--faux-script", "s.json", "go"], (None, "go", None)),
    (["-p", "--approve", "allow", "go"], ("go", None, None)),
    (["--json", "--permission-mode", "auto", "--thinking", "high", "go"], (None, "go", None)),
    (["what is up", "-p"], ("what is up", None, None)),
    (["--model", "faux/faux-1", "what is up", "--json"], (None, "what is up", None)),
    (["-p", "q", "--server", "tcp://127.0.0.1:1/s"], ("q", None, None)),
    (["-c", "-p", "hi"], ("hi", None, None)),
    (["-cp", "hi"], ("hi", None, None)),
    (["--resume", "abc", "-p", "--verbose", "q"], ("q", None, None)),
    (["-p", "--json", "x"], ("x", "x", None)),
    (["-p", "--", "-x means what?"], ("-x means what?", None, None)),
    # a prompt word that names a subcommand is the prompt once -p/--json is given
    (["-p", "config is broken, fix it"], ("config is broken, fix it", None, None)),
    (["-p", "config"], ("config", None, None)),
    (["--json", "sessions"], (None, "sessions", None)),
    (["--name", "config", "-p", "--verbose", "q"], ("q", None, None)),
    # pi's spellings: --mode json/text, --provider NAME --model ID
    (["--mode", "json", "go"], (None, "go", None)),
    (["--mode=text", "go"], ("go", None, None)),
    (["go", "--mode", "text"], ("go", None, None)),
    (["-p", "--provider", "faux", "--model", "faux-1", "go"], ("go", None, None)),
    # pi's file arguments: each @file word joins the one message
    (["-p", "@a.py", "@b.py", "review these"], ("@a.py @b.py review these", None, None)),
    (["@shot.png", "--json", "what is in it?"], (None, "@shot.png what is in it?", None)),
]


@pytest.mark.parametrize(("argv", "expected"), HEADLESS)
def test_a_headless_prompt_may_stand_anywhere(
    argv: list[str], expected: tuple[str | None, str | None, float | None]
) -> None:
    args = parse_command_line(argv)
    assert (args.prompt, args.json, args.wait_for_approval) == expected
    assert args.command is None
    assert served(argv), "the warm start serves every headless command line"


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["sessions", "--json"], "sessions"),  # the subcommand's own --json
        (["config"], "config"),
        (["--trust", "doctor"], "doctor"),
        (["attach"], "attach"),
        ([], None),
    ],
)
def test_a_subcommand_comes_first(argv: list[str], command: str | None) -> None:
    args = parse_command_line(argv)
    assert (args.command, args.prompt, args.json) == (command, None, None)
    assert not is_headless(argv, subcommands=SUBCOMMANDS)
    assert not served(["--", "-p"]) and not is_headless(["--", "-p"])


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["-p", "a", "b"], "one prompt, given 2 ('a', 'b'): quote it as one word"),
        (["-p", "@a.py", "b", "c"], "one prompt, given 3 ('@a.py', 'b', 'c')"),
        (["-p", "x", "attach"], "attach does not take -p or --json"),
        (["--json", "x", "-p", "y"], "one prompt, given 2 ('y', 'x')"),
        (["-p", "--wait-for-approval", "-5", "x"], "'-5' is not a number of seconds >= 0"),
        (["-p", "--wait-for-approval=soon", "x"], "'soon' is not a number of seconds >= 0"),
        (["-p", "--thinking", "hot", "x"], "argument --thinking: invalid choice: 'hot'"),
        (["--mode", "rpc"], "--mode rpc is pi's RPC protocol, which this agent does not speak"),
        (["--mode", "tui", "x"], "--mode takes json or text (pi's), got 'tui'"),
        (["--provider", "faux", "-p", "x"], "--provider faux needs the model too: --model faux/ID"),
    ],
)
def test_a_bad_headless_command_line_is_one_usage_line(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_command_line(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("coding-agent: error: ") and line in err and err.count("\n") == 1


def test_pis_provider_and_model_flags_name_one_model() -> None:
    for argv in (
        ["-p", "--provider", "local", "--model", "qwen3", "x"],
        ["-p", "--model=qwen3", "--provider=local", "x"],
        ["-p", "--provider", "local", "--model", "local/qwen3", "x"],
    ):
        assert parse_command_line(argv).model == "local/qwen3"


def test_the_subcommands_are_the_parsers() -> None:
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) == set(SUBCOMMANDS)


# -- the real binary ----------------------------------------------------------------------------
def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BINARY), *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (tmp_path / "script.json").write_text(json.dumps([{"text": "Nothing is up."}]))
    return folder


def test_the_readme_forms_run(project: Path, agent_env: dict[str, str]) -> None:
    script = str(project.parent / "script.json")
    env = {**agent_env, "XDG_CONFIG_HOME": str(project.parent / "config")}
    # `coding-agent -p --wait-for-approval "prompt"`: the turn runs in the session's worker
    done = _run(["--faux-script", script, "--linger", "0.1", "-p", "--wait-for-approval",
                 "what is up"], project, env)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "Nothing is up.\n", "")
    done = _run(["-p", "--model", "faux/faux-1", "--faux-script", script, "what is up"],
                project, env)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "Nothing is up.\n", "")
    done = _run(["--json", "--faux-script", script, "config"], project, env)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["type"] == "session" and lines[-1]["text"] == "Nothing is up."
    user = [e["entry"] for e in lines if e["type"] == "entry.added"
            and e["entry"]["kind"] == "pi.user"]  # fmt: skip
    assert user[0]["model"][0]["content"] == "config", "a subcommand's name is the prompt"


def test_continue_with_no_session_says_it_starts_a_new_one(
    project: Path, agent_env: dict[str, str]
) -> None:
    """``-c -p`` in a folder with no session: the run goes on in a new session, and says so
    in one line (a user who meant another folder learns it)."""
    script = str(project.parent / "script.json")
    done = _run(["-c", "-p", "what is up", "--faux-script", script], project, agent_env)
    assert (done.returncode, done.stdout) == (0, "Nothing is up.\n")
    assert done.stderr == (
        f"coding-agent: no session of {project} to continue: starting a new one\n"
    )
    again = _run(["-c", "-p", "and now", "--faux-script", script], project, agent_env)
    assert again.stderr == ""  # the one it started is continued
