"""An MCP server never gets a secret it was not given on purpose (issue 36 item 7).

The real FastMCP fixture server writes its environment to a file when it starts. Its ``env``
block asks for the provider key, the key of another name (``${ANTHROPIC_API_KEY}`` under a name
of its own) and a variable the user passed through; only the last arrives.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_support import SDK_LEAKS, session, stdio_server, write_config

from pico3 import CHILD_ENVIRONMENT_SERVICE, ChildEnvironment

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]

KEY = "sk-ant-api03-mcp0123456789abcdefghijklmnop"
PASSED = "passed-through-0123456789"


async def test_a_stdio_servers_env_block_cannot_carry_a_secret(tmp_path: Path) -> None:
    dump = tmp_path / "server.env.json"
    env = {
        "ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY}",
        "SMUGGLED": "Bearer ${ANTHROPIC_API_KEY}",
        "PASSED_SECRET": "${PASSED_SECRET}",
        "PLAIN": "plain-value",
    }
    write_config(tmp_path / "config", {"echo": stdio_server("--env-dump", str(dump), env=env)})
    source = {"ANTHROPIC_API_KEY": KEY, "PASSED_SECRET": PASSED}
    environment = ChildEnvironment(
        ["ANTHROPIC_API_KEY", "PASSED_SECRET"], passthrough=["PASSED_SECRET"], source=source
    )
    services = {CHILD_ENVIRONMENT_SERVICE: environment, "mcp_env": source}
    async with session(tmp_path, services=services) as s:
        await s.server("echo", "ready")
    found = json.loads(dump.read_text())
    assert "ANTHROPIC_API_KEY" not in found and "SMUGGLED" not in found
    assert KEY not in json.dumps(found)
    assert found["PASSED_SECRET"] == PASSED  # named in the passthrough list
    assert found["PLAIN"] == "plain-value"


async def test_without_a_session_policy_the_well_known_keys_stay_out(tmp_path: Path) -> None:
    dump = tmp_path / "server.env.json"
    env = {"OPENAI_API_KEY": "${OPENAI_API_KEY}", "PLAIN": "plain-value"}
    write_config(tmp_path / "config", {"echo": stdio_server("--env-dump", str(dump), env=env)})
    services = {"mcp_env": {"OPENAI_API_KEY": "sk-proj-0123456789abcdefghij"}}
    async with session(tmp_path, services=services) as s:
        await s.server("echo", "ready")
    found = json.loads(dump.read_text())
    assert "OPENAI_API_KEY" not in found and found["PLAIN"] == "plain-value"


async def test_a_stdio_server_inherits_the_users_environment_without_the_secrets(
    tmp_path: Path,
) -> None:
    # issue 40 item 2: a certificate file or a made-up variable the user exported reaches the
    # server as with Claude Code; the agent's own keys do not, nor a variable holding one
    dump = tmp_path / "server.env.json"
    env = {"FROM_BLOCK": "${MADE_UP_VAR}-block", "DEFAULTED": "${UNSET_VAR:-fallback}"}
    write_config(tmp_path / "config", {"echo": stdio_server("--env-dump", str(dump), env=env)})
    source = {
        "SSL_CERT_FILE": str(tmp_path / "ca.pem"),
        "MADE_UP_VAR": "made-up-value",
        "ANTHROPIC_API_KEY": KEY,
        "COPY_OF_KEY": KEY,
    }
    environment = ChildEnvironment(["ANTHROPIC_API_KEY"], source=source)
    services = {CHILD_ENVIRONMENT_SERVICE: environment, "mcp_env": source}
    async with session(tmp_path, services=services) as s:
        await s.server("echo", "ready")
    found = json.loads(dump.read_text())
    assert found["SSL_CERT_FILE"] == str(tmp_path / "ca.pem")
    assert found["MADE_UP_VAR"] == "made-up-value"
    assert found["FROM_BLOCK"] == "made-up-value-block" and found["DEFAULTED"] == "fallback"
    assert "ANTHROPIC_API_KEY" not in found and "COPY_OF_KEY" not in found
    assert KEY not in json.dumps(found)
