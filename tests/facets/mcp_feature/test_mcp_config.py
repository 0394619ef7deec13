"""Where MCP servers come from: the user's mcp.json, a trusted project's .mcp.json, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from facets_mcp.config import load_config, user_config_path, with_client_servers
from facets_mcp.contract import tool_name


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def test_user_path_respects_xdg_config_home(tmp_path: Path) -> None:
    assert user_config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == (
        tmp_path / "coding-agent" / "mcp.json"
    )
    assert user_config_path({"XDG_CONFIG_HOME": ""}) == (
        Path.home() / ".config" / "coding-agent" / "mcp.json"
    )


def test_project_servers_load_only_when_trusted_and_replace_user_ones(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "KEY": "k1"}
    write(
        tmp_path / "cfg" / "coding-agent" / "mcp.json",
        {"mcpServers": {"a": {"command": "a-cmd", "env": {"K": "${KEY}"}}, "b": {"command": "b"}}},
    )
    project = tmp_path / "proj"
    write(
        project / ".mcp.json",
        {
            "mcpServers": {
                "b": {
                    "type": "http",
                    "url": "http://127.0.0.1:1/mcp",
                    "headers": {"Authorization": "Bearer ${NOPE:-none}"},
                }
            }
        },
    )
    untrusted = load_config(project=project, project_trusted=False, env=env)
    assert [(s.name, s.transport) for s in untrusted.servers] == [("a", "stdio"), ("b", "stdio")]
    assert untrusted.servers[0].env == {"K": "k1"}
    (warning,) = untrusted.errors
    assert "not loaded because the project is not trusted" in warning and "--trust" in warning
    trusted = load_config(project=project, project_trusted=True, env=env)
    assert [(s.name, s.transport) for s in trusted.servers] == [("a", "stdio"), ("b", "http")]
    assert trusted.servers[1].headers == {"Authorization": "Bearer none"}
    assert trusted.errors == ()


def test_only_the_approved_project_servers_load_as_approved(tmp_path: Path) -> None:
    """``project_approved``: the entries the user approved, as written; a server of the project
    file that is not among them, or whose entry differs, is one line and is not loaded; a user
    server of the same name as a waiting one stays."""
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    write(
        tmp_path / "cfg" / "coding-agent" / "mcp.json", {"mcpServers": {"b": {"command": "mine"}}}
    )
    project = tmp_path / "proj"
    a, b = {"command": "a", "args": ["1"]}, {"command": "b-new"}
    write(project / ".mcp.json", {"mcpServers": {"a": a, "b": b, "c": {"command": "c"}}})
    config = load_config(
        project=project,
        project_trusted=True,
        project_approved={"a": a, "b": {"command": "b-old"}},
        env=env,
    )
    assert [(s.name, s.command) for s in config.servers] == [("b", "mine"), ("a", "a")]
    assert config.errors == tuple(
        f"{project / '.mcp.json'}: server {name!r} is new or changed since you approved this "
        "project's servers: not started (/trust shows it and asks; coding-agent --trust "
        "approves it)"
        for name in ("b", "c")
    )
    everything = load_config(project=project, project_trusted=True, env=env)
    assert [s.command for s in everything.servers] == ["b-new", "a", "c"], "None: all of them"


def test_bad_files_and_entries_are_named_and_skipped(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    path = tmp_path / "coding-agent" / "mcp.json"
    write(path, "{not json")
    config = load_config(env=env)
    assert config.servers == ()
    assert config.errors[0].startswith(f"{path}: not valid JSON")
    write(
        path,
        {
            "mcpServers": {
                "ok": {"command": "x"},
                "nocmd": {"args": []},
                "sse": {"type": "sse", "url": "http://h/sse", "headers": {"K": "${K:-k}"}},
                "ws": {"type": "websocket", "url": "ws://h/ws"},
                "typo": {"command": "x", "arg": []},
                "bad name!": {"command": "x"},
                "off": {"command": "x", "disabled": True},
            }
        },
    )
    config = load_config(env=env)
    assert [(s.name, s.transport) for s in config.servers] == [("ok", "stdio"), ("sse", "sse")]
    assert config.servers[1].url == "http://h/sse" and config.servers[1].headers == {"K": "k"}
    text = "\n".join(config.errors)
    assert "server 'nocmd': a stdio server needs \"command\"" in text
    assert 'server \'ws\': type must be "stdio", "http" or "sse", got \'websocket\'' in text
    assert "unknown key(s) arg" in text
    assert "server 'bad name!'" in text
    assert all(e.endswith("it is skipped") for e in config.errors)


def test_tool_names_are_provider_safe() -> None:
    assert tool_name("files", "read_file") == "mcp__files__read_file"
    assert tool_name("my.server", "do it") == "mcp__my_server__do_it"
    assert len(tool_name("s", "x" * 100)) == 64


def test_startup_timeout_and_max_message_bytes_next_to_mcp_servers(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    path = tmp_path / "cfg" / "coding-agent" / "mcp.json"
    write(path, {"mcpServers": {}})
    config = load_config(env=env)
    assert (config.startup_timeout, config.max_message_bytes) == (30.0, 32 * 1024 * 1024)
    write(path, {"mcpServers": {}, "startup_timeout": 5, "max_message_bytes": 4096})
    config = load_config(env=env)
    assert (config.startup_timeout, config.max_message_bytes) == (5.0, 4096)
    write(path, {"mcpServers": {}, "startup_timeout": "soon", "max_message_bytes": 10})
    config = load_config(env=env)
    assert (config.startup_timeout, config.max_message_bytes) == (30.0, 32 * 1024 * 1024)
    assert [e.split(": ", 1)[1].split(" must")[0] for e in config.errors] == [
        "startup_timeout",
        "max_message_bytes",
    ]


def test_a_clients_servers_come_last_replace_a_configured_namesake_and_report_bad_entries(
    tmp_path: Path,
) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)}
    write(
        user_config_path(env),
        {"mcpServers": {"files": {"command": "configured"}, "web": {"url": "http://x/mcp"}}},
    )
    config = load_config(env=env)
    assert with_client_servers(config, None, env) is config
    brought = {
        "source": "the editor",
        "mcpServers": {"files": {"command": "editor-files"}, "bad": {"type": "ftp"}},
    }
    merged = with_client_servers(config, brought, env)
    by_name = {spec.name: spec for spec in merged.servers}
    assert sorted(by_name) == ["files", "web"]
    assert by_name["files"].command == "editor-files" and by_name["files"].source == "the editor"
    assert len(merged.errors) == 1 and merged.errors[0].startswith("the editor: server 'bad'")
    strict = with_client_servers(config, {**brought, "strict": True}, env)  # --strict-mcp-config
    assert [spec.name for spec in strict.servers] == ["files"]  # the configured web is left out
    assert strict.errors == merged.errors


REAL_PLUGIN = Path(__file__).parents[2] / "app/fixtures/claude_plugins/example-plugin"
"""A real published plugin (anthropics/claude-plugins-official, Apache-2.0): its ``.mcp.json``
is the servers object itself, without ``mcpServers``."""


def test_a_plugins_servers_load_first_with_their_plugin_root(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    # the shape a published plugin (discord) writes: ${CLAUDE_PLUGIN_ROOT} in its args
    inline = {"mcpServers": {"bot": {"command": "bun", "args": ["--cwd", "${CLAUDE_PLUGIN_ROOT}"]}}}
    plugins = [
        {"root": str(REAL_PLUGIN), "mcpServers": [str(REAL_PLUGIN / ".mcp.json")]},
        {"root": str(tmp_path), "mcpServers": [inline, str(broken)]},
    ]
    config = load_config(env=env, plugins=plugins)
    example, bot = config.servers
    assert (example.name, example.transport, example.url) == (
        "example-server", "http", "https://mcp.example.com/api"
    )  # fmt: skip
    assert example.source == str(REAL_PLUGIN / ".mcp.json")
    assert (bot.command, bot.args) == ("bun", ("--cwd", str(tmp_path)))
    assert bot.env == {"CLAUDE_PLUGIN_ROOT": str(tmp_path)}
    assert bot.source == str(tmp_path / ".claude-plugin/plugin.json")
    (error,) = config.errors
    assert error.startswith(f"{broken}: not valid JSON (")
    # any configured server of that name replaces a plugin's
    write(user_config_path(env), {"mcpServers": {"bot": {"command": "mine"}}})
    mine = {s.name: s for s in load_config(env=env, plugins=plugins).servers}["bot"]
    assert mine.command == "mine"
