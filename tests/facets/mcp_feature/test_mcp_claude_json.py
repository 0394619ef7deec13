"""Claude Code's ``~/.claude.json`` as an MCP source: its user scope (top-level ``mcpServers``)
and the local scope of this project (``projects[<path>].mcpServers``), in their place among our
sources; the file's other keys ignored; a malformed file is one error naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_support import SDK_LEAKS, session, stdio_server, write_config

from facets_mcp.config import claude_json_path, load_config
from facets_mcp.tui import server_lines

CLUTTER: dict[str, Any] = {
    "numStartups": 42,
    "tipsHistory": {"new-user-warmup": 1},
    "history": [{"display": "hi"}],
    "oauthAccount": None,
    "hasCompletedOnboarding": True,
}
"""Unrelated keys a real ``~/.claude.json`` holds, in shapes we never read."""


def write_claude(
    path: Path, user: dict[str, Any] | None = None, local: dict[str, dict[str, Any]] | None = None
) -> Path:
    data: dict[str, Any] = dict(CLUTTER)
    if user is not None:
        data["mcpServers"] = user
    data["projects"] = {
        folder: {"allowedTools": [], "history": [], "mcpServers": servers}
        for folder, servers in (local or {}).items()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_the_path_follows_claude_config_dir_else_home(tmp_path: Path) -> None:
    assert claude_json_path({"HOME": str(tmp_path)}) == tmp_path / ".claude.json"
    assert claude_json_path({"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "c")}) == (
        tmp_path / "c" / ".claude.json"
    )
    assert claude_json_path({"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": ""}) == (
        tmp_path / ".claude.json"
    )


def test_a_clash_is_won_by_local_then_project_then_ours_then_claude_user(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    project = tmp_path / "proj"
    claude = write_claude(
        tmp_path / ".claude.json",
        user={n: {"command": "claude-user"} for n in ("all", "cu", "cu_ours", "cu_proj")},
        local={
            str(project): {n: {"command": "claude-local"} for n in ("all", "local", "cu_proj")},
            str(tmp_path / "elsewhere"): {"other": {"command": "not-this-project"}},
        },
    )
    ours = write_config(
        tmp_path / "cfg", {n: {"command": "ours"} for n in ("all", "cu_ours", "ours_proj")}
    )
    mcp_json = write_config(
        tmp_path / "cfg",
        {n: {"command": "project"} for n in ("all", "cu_proj", "ours_proj")},
        project=project,
    )

    trusted = load_config(project=project, project_trusted=True, env=env)
    assert trusted.errors == ()
    got = {s.name: (s.command, s.source) for s in trusted.servers}
    user_source = f"{claude} (user scope)"
    local_source = f"{claude} (local scope of {project})"
    assert got == {
        "all": ("claude-local", local_source),
        "cu": ("claude-user", user_source),
        "cu_ours": ("ours", str(ours)),
        "cu_proj": ("claude-local", local_source),
        "ours_proj": ("project", str(mcp_json)),
        "local": ("claude-local", local_source),
    }

    # the local scope is the user's own: it loads in an untrusted project, the .mcp.json does not
    untrusted = load_config(project=project, project_trusted=False, env=env)
    got = {s.name: s.command for s in untrusted.servers}
    assert got == {
        "all": "claude-local",
        "cu": "claude-user",
        "cu_ours": "ours",
        "cu_proj": "claude-local",
        "ours_proj": "ours",
        "local": "claude-local",
    }
    (warning,) = untrusted.errors
    assert warning.startswith(f"{mcp_json}: not loaded because the project is not trusted")


def test_the_session_folder_entry_is_read_and_wins_over_the_project_root(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    project = tmp_path / "proj"
    sub = project / "sub"
    sub.mkdir(parents=True)
    write_claude(
        tmp_path / ".claude.json",
        local={
            str(project): {"a": {"command": "root"}, "b": {"command": "root"}},
            str(sub) + "/": {"b": {"command": "sub"}},
        },
    )
    config = load_config(project=project, cwd=sub, env=env)
    assert {s.name: s.command for s in config.servers} == {"a": "root", "b": "sub"}


def test_claude_config_dir_moves_the_file(tmp_path: Path) -> None:
    moved = tmp_path / "claude-home"
    env = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "CLAUDE_CONFIG_DIR": str(moved),
    }
    write_claude(tmp_path / ".claude.json", user={"home": {"command": "x"}})
    write_claude(moved / ".claude.json", user={"moved": {"command": "x"}})
    assert [s.name for s in load_config(env=env).servers] == ["moved"]


def test_a_malformed_claude_json_is_one_error_and_the_rest_loads(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    project = tmp_path / "proj"
    write_config(tmp_path / "cfg", {"ours": {"command": "x"}})
    write_config(tmp_path / "cfg", {"shared": {"command": "y"}}, project=project)
    claude = tmp_path / ".claude.json"
    claude.write_text('{"numStartups": 3, "mcpServers": {"cut": ')
    config = load_config(project=project, project_trusted=True, env=env)
    assert [s.name for s in config.servers] == ["ours", "shared"]
    (error,) = config.errors
    assert error.startswith(f"{claude}: not valid JSON") and "fix the file" in error

    # the right JSON in the wrong shape: named, never a crash; the other keys never matter
    claude.write_text(json.dumps([1, 2]))
    (error,) = load_config(project=project, project_trusted=True, env=env).errors
    assert error.startswith(f"{claude}: expected a JSON object")
    claude.write_text(json.dumps({**CLUTTER, "mcpServers": [1], "projects": "nope"}))
    errors = load_config(project=project, project_trusted=True, env=env).errors
    assert errors == (
        f'{claude} (user scope): expected an object with "mcpServers": {{name: server}}',
        f'{claude}: "projects" is not an object; its local-scope MCP servers are skipped',
    )
    write_claude(
        claude,
        user={"good": {"command": "x"}, "bad": {"command": "x", "transport": "stdio"}},
        local={str(project): {"fine": {"type": "http", "url": "ftp://h"}}},
    )
    config = load_config(project=project, project_trusted=True, env=env)
    assert [s.name for s in config.servers] == ["good", "ours", "shared"]
    assert config.errors == (
        f"{claude} (user scope): server 'bad': unknown key(s) transport for a stdio server "
        "(allowed: args, command, cwd, disabled, env, sandbox, timeout, type); it is skipped",
        f"{claude} (local scope of {project}): server 'fine': an http server needs \"url\" "
        "(http:// or https://); it is skipped",
    )


@pytest.mark.anyio
@SDK_LEAKS[0]
async def test_servers_from_claude_json_run_and_show_their_source(tmp_path: Path) -> None:
    """A real server from each scope of ``~/.claude.json`` runs in an untrusted project; on a
    clash our ``mcp.json`` beats Claude Code's user scope (its entry, a missing binary, never
    runs); ``/mcp``'s details name each server's file."""
    claude = write_claude(
        tmp_path / ".claude.json",
        user={"cuser": stdio_server(), "clash": {"command": str(tmp_path / "missing")}},
        local={str(tmp_path): {"clocal": stdio_server()}},
    )
    ours = write_config(tmp_path / "config", {"clash": stdio_server()})
    async with session(tmp_path) as s:
        found = {n: await s.server(n, "ready") for n in ("cuser", "clocal", "clash")}
        assert found["cuser"]["source"] == f"{claude} (user scope)"
        assert found["clocal"]["source"] == f"{claude} (local scope of {tmp_path})"
        assert found["clash"]["source"] == str(ours) and found["clash"]["restarts"] == 0
        assert "mcp__clocal__echo" in {t["name"] for t in found["clocal"]["tools"]}
        assert f"    source: {claude} (local scope of {tmp_path})" in server_lines(found["clocal"])
        assert s.state().value["errors"] == []
