"""An export shows no secret and loads nothing remote (issue 36 item 7).

A real session (the binary, headless, the faux model) reads a ``.env`` holding the provider key
and answers with Markdown images and a key-shaped word; ``coding-agent export`` (the binary, the
key in its environment) writes HTML and JSONL: the key is ``[redacted ANTHROPIC_API_KEY]``, the
shape ``[redacted key]``, and the parsed page has no image, script, stylesheet link or remote
URL, only links, under a policy that forbids every fetch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

BINARY = Path(sys.executable).with_name("coding-agent")
KEY = "sk-ant-api03-export0123456789abcdefghijklmnop"
SHAPED = "sk-proj-Zx81bQ0123456789abcdefghijk"
ANSWER = (
    "Found it.\n\n![chart](https://tracker.example/pixel.png)\n\n"
    f'<img src="https://tracker.example/raw.png">\n\nAlso {SHAPED} in the logs.'
)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BINARY), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_an_export_redacts_the_key_and_turns_images_into_links(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    (project / ".env").write_text(f"ANTHROPIC_API_KEY={KEY}\n")
    script = tmp_path / "script.json"
    steps = [
        {"text": "Looking.", "toolCalls": [{"name": "read", "arguments": {"path": ".env"}}]},
        {"text": ANSWER},
    ]
    script.write_text(json.dumps(steps))
    made = _run(["-p", "find the key", "--faux-script", str(script)], agent_env, project)
    assert made.returncode == 0, made.stderr
    exporting = {**agent_env, "ANTHROPIC_API_KEY": KEY}
    listed = _run(["sessions", "--json"], exporting, project)
    (session,) = json.loads(listed.stdout)
    page, lines = tmp_path / "page.html", tmp_path / "page.jsonl"
    assert _run(["export", session["id"], "-o", str(page)], exporting, project).returncode == 0
    done = _run(
        ["export", session["id"], "--format", "jsonl", "-o", str(lines)], exporting, project
    )
    assert done.returncode == 0, done.stderr

    for text in (page.read_text(), lines.read_text()):
        assert KEY not in text and SHAPED not in text
        assert "[redacted ANTHROPIC_API_KEY]" in text and "[redacted key]" in text
    parsed = _Page()
    parsed.feed(page.read_text())
    tags = [tag for tag, _ in parsed.tags]
    for loading in ("img", "script", "link", "iframe", "object", "embed", "video", "audio"):
        assert loading not in tags
    assert not any("src" in attrs or "srcset" in attrs for _, attrs in parsed.tags)
    (policy,) = [
        attrs["content"] for tag, attrs in parsed.tags
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy"
    ]  # fmt: skip
    assert policy is not None and policy.startswith("default-src 'none'; ")
    assert "img-src 'none'" in policy and "font-src 'none'" in policy
    assert "url(" not in page.read_text() and "@import" not in page.read_text()
    (image,) = [attrs for tag, attrs in parsed.tags if tag == "a" and attrs.get("class") == "image"]
    assert image["href"] == "https://tracker.example/pixel.png"
    assert "[image: chart]" in "".join(parsed.text)
    assert '<img src="https://tracker.example/raw.png">' in "".join(parsed.text)  # shown, inert
