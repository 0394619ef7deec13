"""What a worker imports before it serves: no provider SDK (the client is made at the first
request), no MCP SDK or httpx without an MCP server, no Textual."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from coding_agent.session_files.folders import create_session

_UNWANTED = (
    "openai",
    "anthropic",
    "httpx",
    "httpcore",
    "mcp",
    "pydantic",
    "textual",
    "bs4",
    "markdownify",
)


def _unwanted_at_ready(
    tmp_path: Path, env: dict[str, str], model: str | None, unwanted: tuple[str, ...]
) -> list[str]:
    """Start a worker of a new session; which of ``unwanted`` it imported before ``READY``."""
    env.update(XDG_STATE_HOME=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    project = tmp_path / "project"
    project.mkdir()
    session = create_session(project, env=env)
    flags = ["--model", model] if model is not None else []
    probe = textwrap.dedent(
        f"""
        import json, os, sys
        from coding_agent.worker import main as worker

        real = sys.stdout.write

        def write(text):
            if text.startswith("READY"):  # serving: report what is imported, and stop
                unwanted = sorted(m for m in {unwanted!r} if m in sys.modules)
                real(json.dumps(unwanted) + "\\n")
                sys.stdout.flush()
                os._exit(0)
            return real(text)

        sys.stdout.write = write
        worker.main([{str(session.path)!r}, *{flags!r}, "--linger", "0"])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4-6", "openai/gpt-4.1"])
def test_a_serving_worker_has_imported_no_sdk(tmp_path: Path, model: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env.update(OPENAI_API_KEY="sk-test", ANTHROPIC_API_KEY="sk-ant-test")
    assert _unwanted_at_ready(tmp_path, env, model, _UNWANTED) == []


_ADAPTERS = (
    "coding_agent.worker.providers.openai_responses",
    "coding_agent.worker.providers.google",
    "coding_agent.worker.providers.cloud",
)


def test_a_worker_imports_no_adapter_of_a_provider_it_has_no_settings_for(tmp_path: Path) -> None:
    # every worker asks each provider why it cannot be used (/model lists the reasons): a
    # provider without its settings answers that without its adapter module being imported
    prefixes = ("OPENAI_", "ANTHROPIC_", "GOOGLE_", "GEMINI_", "AWS_", "CLOUD_ML_", "VERTEX")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    assert _unwanted_at_ready(tmp_path, env, None, _ADAPTERS) == []
