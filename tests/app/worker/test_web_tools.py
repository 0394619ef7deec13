"""``web_fetch`` through a real session host and the approval package: it needs approval like
``bash`` (a headless run, which asks nobody, blocks it), and a ``WebFetch(domain:…)`` allow rule
in config.toml lets it run against a local HTTP server (allowed by ``web_fetch.allow_private``)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import msgspec
import pytest
from worker_support import write_script

from coding_agent.cli.headless import EXIT_BLOCKED, run_headless
from coding_agent.session_files.folders import Session
from coding_agent.worker.main import session_worker_config

sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
from web_server import serve

pytestmark = pytest.mark.anyio

PAGE = (
    "<html><head><title>Local docs</title></head><body><h1>Install</h1><p>Run it.</p></body></html>"
)


def _env(agent_env: dict[str, str], tmp_path: Path, config: str) -> dict[str, str]:
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    path = tmp_path / "config" / "coding-agent" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config)
    return env


async def test_web_fetch_asks_and_a_domain_rule_allows_it(
    session: Session, tmp_path: Path, agent_env: dict[str, str]
) -> None:
    routes = {"/docs": lambda h: h.reply(200, PAGE, {"Content-Type": "text/html"})}
    with serve(routes) as server:
        url = server.url("/docs")
        fetch = {"toolCalls": [{"name": "web_fetch", "arguments": {"url": url}}]}
        script = write_script(
            tmp_path / "s.json",
            [fetch, {"text": "blocked"}, fetch, {"text": "done"}],
        )
        # no rule: the call needs approval, and a headless run asks nobody
        env = _env(agent_env, tmp_path, '[web_fetch]\nallow_private = ["127.0.0.1"]\n')
        config = msgspec.structs.replace(
            session_worker_config(session, env=env), faux_script=script
        )
        out, err = io.StringIO(), io.StringIO()
        assert await run_headless("x", config, mode="json", out=out, err=err) == EXIT_BLOCKED
        assert "blocked the web_fetch call" in err.getvalue()
        assert server.seen == []

        # an allow rule for the host: it runs, and the page comes back as Markdown
        env = _env(
            agent_env,
            tmp_path,
            '[permissions]\nallow = ["WebFetch(domain:127.0.0.1)"]\n\n'
            '[web_fetch]\nallow_private = ["127.0.0.1"]\n',
        )
        config = msgspec.structs.replace(
            session_worker_config(session, env=env), faux_script=script
        )
        out = io.StringIO()
        assert await run_headless("y", config, mode="json", out=out) == 0
        assert [seen.path for seen in server.seen] == ["/docs"]
        results = [
            line["entry"]
            for line in map(json.loads, out.getvalue().splitlines())
            if line["type"] == "entry.added" and line["entry"]["kind"] == "pi.tool_result"
        ]
        text = results[-1]["model"][0]["content"][0]["text"]
        assert "Title: Local docs" in text and "# Install\n\nRun it." in text
