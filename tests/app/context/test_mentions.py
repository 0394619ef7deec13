"""``@file`` in a prompt (issue 38 item 7): one attachment block per mention, with its mark."""

from __future__ import annotations

from pathlib import Path

from coding_agent.context.mentions import (
    MAX_INCLUDED_CHARS,
    attachment_mark,
    image_mark,
    mention_blocks,
)


def _texts(text: str, cwd: Path) -> list[str]:
    return [block["text"] for block in mention_blocks(text, cwd)]


def test_each_mention_is_one_block_whose_first_line_is_its_mark(tmp_path: Path) -> None:
    (tmp_path / "my notes.md").write_text("one\ntwo")
    (tmp_path / "big.txt").write_text("x" * (MAX_INCLUDED_CHARS + 10))
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "shot.png").write_bytes(b"\x89PNG")
    prompt = 'see @"my notes.md", @big.txt and @blob.bin; ask @alice about @shot.png, @big.txt.'
    first, big, blob = _texts(prompt, tmp_path)  # @alice is no path; the image goes apart
    assert first == "[📎 my notes.md (2 lines)]\nmy notes.md:\n```\none\ntwo\n```\n"
    assert attachment_mark(first) == "📎 my notes.md (2 lines)"
    assert big.endswith(f"[big.txt cut at {MAX_INCLUDED_CHARS} characters]\n```\n")
    assert len(big) < MAX_INCLUDED_CHARS + 200  # cut: never the whole of a huge file
    assert blob == "[📎 blob.bin: a binary file, not attached]"


def test_what_is_not_attached_says_why_and_prose_is_no_attachment(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "secret.txt").write_text("SECRET")
    code = "@pytest.fixture and @app.route('/') then"  # pasted code: decorators, no files
    missing, outside = _texts(f"{code} @nope.txt and @../secret.txt", project)
    assert missing == "[📎 nope.txt: no such file or folder, not attached]"
    assert outside.startswith(f"[📎 ../secret.txt: outside the project ({project}), not attached]")
    assert "SECRET" not in outside
    assert attachment_mark("plain prompt text") is None
    assert attachment_mark(image_mark("shot.png", "[image/png, 10x10]")["text"]) == "🖼 shot.png"
