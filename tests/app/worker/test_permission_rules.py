"""Permission rules through the real worker process (issue 36 deliver 3).

A standing choice at session scope survives a SIGKILLed worker; one at project scope is
appended to the trusted project's ``.coding-agent/config.toml`` and ``/permissions`` (the
approval feature's TUI facet, over the wire) removes it again; a deny rule in a trusted
project's ``.claude/settings.json`` blocks a command with a reason naming the rule and the file,
and the same file is not read while the project is untrusted. A compound command's standing
choice keeps one rule per command, and nothing wider.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from permissions_support import CommandTui, presentation
from worker_support import Client, connected, deny, text_of, worker_process, write_script

from chord.context import BACKGROUND, Context
from coding_agent.session_files.folders import Session
from coding_agent.settings.trust import TrustStore, trust_path

pytestmark = pytest.mark.anyio


@pytest.fixture
def env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The worker's environment with a private home and configuration folder."""
    return {
        **agent_env,
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }


def bash(command: str) -> dict[str, Any]:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}


def keep_at(scope: str, offers: list[dict[str, Any]]) -> Any:
    """A policy answering "allow and keep the offered rule at ``scope``" (recording offers)."""

    async def policy(facade: Any, request: dict[str, Any], ctx: Context) -> None:
        offers.append(request)
        decision = {"decision": "allow", "by": "test", "rule": request["rule"], "scope": scope}
        await facade.decide(decision, BACKGROUND)

    return policy


def results(client: Client) -> list[str]:
    return [text_of(entry) for entry in client.entries("pi.tool_result")]


async def test_a_session_rule_is_durable_across_a_worker_restart(
    session: Session, env: dict[str, str], tmp_path: Path
) -> None:
    script = write_script(
        tmp_path / "script.json",
        [bash("echo one"), {"text": "one"}, bash("echo one two"), {"text": "two"}],
    )
    offers: list[dict[str, Any]] = []
    client = Client(approve=keep_at("session", offers))
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "first"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        assert [offer["rule"] for offer in offers] == [
            "Bash(echo:*)"
        ]  # echo has no subcommands: its name alone
        assert offers[0]["scopes"] == ["session", "user"]  # the project is not trusted
        await worker.kill()  # SIGKILL: only what was committed survives
        await client.wait_for(lambda: client.root_closed)

    client = Client(approve=deny)  # any dialog now would be denied
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "second"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        assert client.approvals == []  # the stored session rule allowed it
        assert results(client)[-1].strip() == "one two"


async def test_a_narrow_session_rule_does_not_allow_what_bash_expands_unseen(
    session: Session, env: dict[str, str], tmp_path: Path
) -> None:
    """``Bash(ls:*)`` kept for the session, then ``ls`` lines whose payload bash runs where
    tree-sitter-bash saw text: a backtick in an unquoted here-document, anything in a ``<<-``
    body, a nested backtick substitution, ``'$(…)'`` in a double-quoted ``${x:-…}``. Each
    line asks (denied here) and the payload never runs."""
    marker = tmp_path / "PWNED"
    lines = [
        f"ls >/dev/null <<E\nx `touch {marker}` y\nE",
        f"ls >/dev/null <<-E\n\t$(touch {marker})\n\tE",
        f"ls `ls \\`touch {marker}\\`` >/dev/null 2>&1",  # a nested backtick substitution
        f"ls \"${{x:-'$(touch {marker})'}}\" >/dev/null 2>&1",  # quotes in "…" are characters
        f"ls a\\\n#$(touch {marker}) 2>/dev/null",  # joined: `a#$(…)` is one word
    ]
    steps = [bash("ls"), *(bash(line) for line in lines), {"text": "done"}]
    script = write_script(tmp_path / "script.json", steps)
    offers: list[dict[str, Any]] = []

    async def first_kept_then_denied(facade: Any, request: dict[str, Any], ctx: Context) -> None:
        offers.append(request)
        if len(offers) == 1:
            kept = {"decision": "allow", "by": "test", "rule": "Bash(ls:*)", "scope": "session"}
            await facade.decide(kept, BACKGROUND)
        else:
            await deny(facade, request, ctx)

    client = Client(approve=first_kept_then_denied)
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "go"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    assert offers[0]["rule"] == "Bash(ls:*)"
    assert len(offers) == 1 + len(lines)  # each line asked, though the rule was kept
    assert not marker.exists()


async def test_a_project_rule_is_written_to_the_project_config_and_removed_by_permissions(
    session: Session, env: dict[str, str], tmp_path: Path
) -> None:
    TrustStore(trust_path(env)).set(session.cwd, True)
    config = session.cwd / ".coding-agent" / "config.toml"
    config.parent.mkdir()
    config.write_text("# the team's settings\n")
    claude = session.cwd / ".claude" / "settings.local.json"
    claude.parent.mkdir()
    claude.write_text('{"permissions": {"deny": ["Bash(git push --force"]}}')
    problem = (
        f"{claude}: deny rule 'Bash(git push --force' is invalid (expected Tool or "
        "Tool(specifier), e.g. Bash(npm run test:*) or Read(./.env)); it is ignored"
    )
    script = write_script(tmp_path / "script.json", [bash("echo hi there"), {"text": "one"}])
    offers: list[dict[str, Any]] = []
    client = Client(approve=keep_at("project", offers))
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "first"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        assert offers[0]["rule"] == "Bash(echo:*)"
        assert offers[0]["scopes"] == ["session", "project", "user"]
        assert (
            config.read_text()
            == '# the team\'s settings\n\n[permissions]\nallow = ["Bash(echo:*)"]\n'
        )

        tui = CommandTui()
        async with presentation(worker.socket, tui):
            async with anyio.create_task_group() as group:
                group.start_soon(tui.commands["permissions"], "", BACKGROUND)
                title, labels, respond = await tui.next_dialog()
                assert title == "Permission rules (1): Enter on a rule removes it"
                assert labels == [
                    "add=+ Add a rule… (allow, ask or deny)",
                    f"0=allow  Bash(echo:*)  — {config}",
                ]
                assert tui.bodies[0] == f"Problems (these rules do not apply):\n• {problem}"
                respond("0")
                title, labels, respond = await tui.next_dialog()
                assert title == "Remove the allow rule Bash(echo:*)?"
                respond("remove")
            assert tui.notices == [
                f"Permission rules: {problem}",  # once, when this presentation first saw it
                f"Removed the allow rule Bash(echo:*) from {config}",
            ]
    assert config.read_text() == "# the team's settings\n\n[permissions]\nallow = []\n"


async def test_claude_settings_not_read_are_one_notice_and_safety_notes_their_own(
    session: Session, env: dict[str, str], tmp_path: Path
) -> None:
    """A typical ~/.claude/settings.json: four settings this agent does not read are one
    notice (a count, the keys, where the reasons are); the sandbox note (bash is not sandboxed)
    and an invalid rule stay notices of their own; ``/permissions`` still lists every line."""
    settings = Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(
        '{"statusLine": {"type": "command", "command": "x"}, "env": {"A": "1"}, '
        '"model": "opus", "alwaysThinkingEnabled": true, "sandbox": {"enabled": true}, '
        '"permissions": {"deny": ["Bash(rm -rf"]}}'
    )
    async with worker_process(session, env) as worker:
        tui = CommandTui()
        async with presentation(worker.socket, tui):
            await tui.wait_notices(3)
            sandbox, folded, invalid = sorted(tui.notices, key=lambda n: ("sandbox" not in n, n))
            assert folded == (
                f"4 settings from {settings} are not used here: statusLine, env, model, "
                "alwaysThinkingEnabled — /permissions or `coding-agent config` lists why"
            )
            assert sandbox.startswith(f"Permission rules: {settings}: `sandbox.enabled`: ")
            assert "bash is NOT sandboxed" in sandbox
            assert invalid.startswith(f"Permission rules: {settings}: deny rule 'Bash(rm -rf'")
            async with anyio.create_task_group() as group:
                group.start_soon(tui.commands["permissions"], "", BACKGROUND)
                await tui.next_dialog()
                body = tui.bodies[0]
                problems, _, unread = body.partition("Settings not used here")
                assert problems.startswith("Problems (these rules do not apply):\n"), body
                assert "`sandbox.enabled`" in problems and "Bash(rm -rf" in problems
                for key in ("statusLine", "env", "model", "alwaysThinkingEnabled"):
                    assert f"• {settings}: `{key}`: " in unread  # every full line, not a rule's
                group.cancel_scope.cancel()  # Escape
            assert len(tui.notices) == 3


@pytest.mark.parametrize("trusted", [True, False])
async def test_a_claude_deny_rule_blocks_in_a_trusted_project_only(
    session: Session, env: dict[str, str], tmp_path: Path, trusted: bool
) -> None:
    settings = session.cwd / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"permissions": {"deny": ["Bash(rm:*)"], "allow": ["Bash(echo:*)"]}}')
    if trusted:
        TrustStore(trust_path(env)).set(session.cwd, True)
    (session.cwd / "keep.txt").write_text("x")
    script = write_script(
        tmp_path / "script.json", [bash("echo ok && rm keep.txt"), {"text": "done"}]
    )
    client = Client(approve=deny)
    args = ("--faux-script", str(script), "--permission-mode", "auto")
    async with worker_process(session, env, *args) as worker, connected(client, worker.socket):
        await client.root.send({"content": "go"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        (result,) = results(client)
    if trusted:
        assert f"the deny rule Bash(rm:*) in {settings} matches, so it is denied" in result
        assert (session.cwd / "keep.txt").exists()
    else:  # the project's settings are not read: auto mode runs it
        assert not (session.cwd / "keep.txt").exists()
    assert client.approvals == []


async def test_a_deny_rule_added_by_permissions_blocks_the_next_call_and_keeps_comments(
    session: Session, env: dict[str, str], tmp_path: Path
) -> None:
    config = Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    original = '# my settings\n[permissions]  # rules\nallow = ["Bash(ls:*)"]  # listing is fine\n'
    config.write_text(original)
    (session.cwd / "keep.txt").write_text("x")
    script = write_script(tmp_path / "script.json", [bash("rm keep.txt"), {"text": "done"}])
    client = Client(approve=deny)
    args = ("--faux-script", str(script), "--permission-mode", "auto")
    async with worker_process(session, env, *args) as worker, connected(client, worker.socket):
        tui = CommandTui()
        async with presentation(worker.socket, tui):
            await tui.commands["permissions"]("deny Bash(rm * x) --user", BACKGROUND)
            assert config.read_text() == original  # byte for byte: nothing was saved
            await tui.commands["permissions"]("deny Bash(rm:*) --user", BACKGROUND)
            await tui.commands["permissions"]("deny Bash(rm:*) --user", BACKGROUND)
        assert tui.notices == [
            "Not added: deny rule 'Bash(rm * x)' is invalid (a `*` (or another pattern or "
            "$expansion) is allowed only at the end, as a prefix: Bash(git log:*))",
            f"Added deny rule Bash(rm:*) to {config}",
            f"The deny rule Bash(rm:*) is already in {config}; nothing was added",
        ]
        assert config.read_text() == (
            '# my settings\n[permissions]  # rules\nallow = ["Bash(ls:*)"]  # listing is fine\n'
            'deny = ["Bash(rm:*)"]\n'
        )
        await client.root.send({"content": "go"}, BACKGROUND)  # auto mode: rm would run
        await client.wait_for(client.turn_ended)
        (result,) = results(client)
    assert f"the deny rule Bash(rm:*) in {config} matches, so it is denied" in result
    assert (session.cwd / "keep.txt").exists() and client.approvals == []


async def test_under_allow_bash_a_deny_rule_sees_what_bash_runs_unseen(
    session: Session, env: dict[str, str], tmp_path: Path
) -> None:
    """``allow = ["Bash"]`` with ``deny = ["Bash(touch:*)"]``: a line whose ``touch`` the
    parser cannot name (it does not parse; a ``>&`` target bash expands despite its quotes; a
    ``#`` after a carriage return) may be that ``touch``, so it asks (denied here) instead of
    running under the whole-tool allow."""
    marker = tmp_path / "PWNED"
    config = Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[permissions]\nallow = ["Bash"]\ndeny = ["Bash(touch:*)"]\n')
    lines = [
        f"ls >&'$(touch {marker})' 2>/dev/null",
        f"ls <<E\n'\"$'`touch {marker}`",
        f"ls x\r#; touch {marker}",
    ]
    steps = [*(bash(line) for line in lines), bash("echo allowed"), {"text": "done"}]
    script = write_script(tmp_path / "script.json", steps)
    client = Client(approve=deny)
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "go"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    assert len(client.approvals) == len(lines)  # each asked; `echo allowed` did not
    assert results(client)[-1].strip() == "allowed"
    assert not marker.exists()


async def test_a_compound_command_keeps_one_rule_per_command_and_nothing_wider(
    session: Session, env: dict[str, str], tmp_path: Path
) -> None:
    """The dialog for ``cd sub && echo one`` offers ``Bash(cd:*)`` and ``Bash(echo:*)``
    together; kept, they allow the same commands in another order without asking, and a line
    with one more command asks again (denied here: its marker file is never created)."""
    (session.cwd / "sub").mkdir()
    marker = tmp_path / "MARKER"
    steps = [
        bash("cd sub && echo one"),
        bash("echo two; cd sub"),  # the same commands, in another order
        bash(f"cd sub && echo three && touch {marker}"),  # one more command
        {"text": "done"},
    ]
    script = write_script(tmp_path / "script.json", steps)
    offers: list[dict[str, Any]] = []

    async def keep_then_deny(facade: Any, request: dict[str, Any], ctx: Context) -> None:
        offers.append(request)
        if len(offers) > 1:
            return await deny(facade, request, ctx)
        kept = {"decision": "allow", "by": "test", "rules": request["rules"], "scope": "session"}
        await facade.decide(kept, BACKGROUND)

    client = Client(approve=keep_then_deny)
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "go"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    assert offers[0]["rules"] == ["Bash(cd:*)", "Bash(echo:*)"]
    assert "rule" not in offers[0] and offers[0]["scopes"] == ["session", "user"]
    # the reordered line ran unasked; the longer one asked, offering only what is new
    assert [o["args"] for o in offers[1:]] == [steps[2]["toolCalls"][0]["arguments"]]
    assert offers[1]["rule"] == f"Bash(touch {marker})"
    assert [text.strip() for text in results(client)[:2]] == ["one", "two"]
    assert not marker.exists()
