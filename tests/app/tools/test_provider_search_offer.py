"""With no search backend, ``web_search`` runs only through a model provider's own search: the
faux model (``--faux-script``, the tour) is not offered it, so the request, the ``pi.system``
entry and ``/context`` name only tools it can use; a configured backend's ``web_search`` stays.
Through the real binary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BINARY = Path(sys.executable).with_name("coding-agent")


def _offered(tmp_path: Path, env: dict[str, str]) -> list[str]:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "ok"}]))
    done = subprocess.run(
        [str(BINARY), "--faux-script", str(script), "--json", "hi"], cwd=project, env=env,
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    (system,) = [
        line["entry"] for line in lines
        if line["type"] == "entry.added" and line["entry"]["kind"] == "pi.system"
    ]  # fmt: skip
    return system["model"][0]["tools_added"]


def test_the_faux_model_is_not_offered_the_providers_search(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    offered = _offered(tmp_path, env)
    assert "web_fetch" in offered
    assert "web_search" not in offered


def test_a_backends_web_search_is_offered_to_the_faux_model(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    config = tmp_path / "config" / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[web_search]\nbackend = "searxng"\nurl = "http://127.0.0.1:9"\n')
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    assert "web_search" in _offered(tmp_path, env)
