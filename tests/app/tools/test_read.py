"""The read tool (docs/design/agent.md#read): windows, continuation hints, images, binaries, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_agent.worker.tools import READ_TOOL, ToolContext


@pytest.fixture
def tools(tmp_path: Path) -> ToolContext:
    return ToolContext(cwd=tmp_path)


def write_lines(path: Path, count: int, width: int = 0) -> None:
    path.write_text("".join(f"{'line':<{width}}{n}\n" for n in range(1, count + 1)))


@pytest.mark.anyio
async def test_small_file_comes_back_verbatim_without_footer(
    tmp_path: Path, tools: ToolContext
) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    result = await READ_TOOL.execute({"path": "a.txt"}, tools)
    assert not result.is_error
    assert result.plain_text == "one\ntwo"
    assert "truncation" not in result.details


@pytest.mark.anyio
async def test_line_cap_footer_names_the_next_offset(tmp_path: Path, tools: ToolContext) -> None:
    write_lines(tmp_path / "big.txt", 2500)
    first = await READ_TOOL.execute({"path": "big.txt"}, tools)
    body, footer = first.plain_text.rsplit("\n\n", 1)
    assert body.split("\n")[-1] == "line2000"
    assert footer == "[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]"
    assert first.details["truncation"]["truncated_by"] == "lines"

    rest = await READ_TOOL.execute({"path": "big.txt", "offset": 2001}, tools)
    assert rest.plain_text.split("\n") == [f"line{n}" for n in range(2001, 2501)]


@pytest.mark.anyio
async def test_byte_cap_footer_mentions_the_50kb_limit(tmp_path: Path, tools: ToolContext) -> None:
    write_lines(tmp_path / "wide.txt", 1000, width=96)  # ~100 bytes a line
    result = await READ_TOOL.execute({"path": "wide.txt"}, tools)
    body, footer = result.plain_text.rsplit("\n\n", 1)
    shown = len(body.split("\n"))
    assert len(body.encode()) <= 50 * 1024
    assert footer == (
        f"[Showing lines 1-{shown} of 1000 (50.0KB limit). Use offset={shown + 1} to continue.]"
    )


@pytest.mark.anyio
async def test_caller_limit_reports_remaining_lines(tmp_path: Path, tools: ToolContext) -> None:
    write_lines(tmp_path / "f.txt", 10)
    result = await READ_TOOL.execute({"path": "f.txt", "offset": 3, "limit": 4}, tools)
    assert (
        result.plain_text
        == "line3\nline4\nline5\nline6\n\n[4 more lines in file. Use offset=7 to continue.]"
    )


@pytest.mark.anyio
async def test_offset_past_the_end_is_an_error_naming_the_length(
    tmp_path: Path, tools: ToolContext
) -> None:
    write_lines(tmp_path / "f.txt", 3)
    result = await READ_TOOL.execute({"path": "f.txt", "offset": 9}, tools)
    assert result.is_error
    assert result.plain_text == "Offset 9 is beyond end of file f.txt (3 lines total)"


@pytest.mark.anyio
async def test_an_oversized_line_points_to_sed(tmp_path: Path, tools: ToolContext) -> None:
    (tmp_path / "min.js").write_text("a" * 60_000 + "\nb\n")
    result = await READ_TOOL.execute({"path": "min.js"}, tools)
    assert result.plain_text == (
        "[Line 1 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '1p' min.js | head -c 51200]"
    )


@pytest.mark.anyio
async def test_missing_file_and_directory_are_clear_errors(
    tmp_path: Path, tools: ToolContext
) -> None:
    (tmp_path / "dir").mkdir()
    missing = await READ_TOOL.execute({"path": "nope.txt"}, tools)
    assert missing.is_error and missing.plain_text == "File not found: nope.txt"
    folder = await READ_TOOL.execute({"path": "dir"}, tools)
    assert (
        folder.is_error
        and folder.plain_text == "dir is a directory, not a file. Use ls to list it."
    )


def picture(path: Path, size: tuple[int, int], form: str) -> bytes:
    from PIL import Image

    Image.new("RGB", size, (200, 30, 60)).save(path, form)
    return path.read_bytes()


def decoded(block: dict[str, object]) -> tuple[str | None, tuple[int, int]]:
    import base64
    import io

    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(str(block["data"])))) as image:
        return image.format, image.size


@pytest.mark.anyio
async def test_a_small_image_comes_back_as_an_image_block(
    tmp_path: Path, tools: ToolContext
) -> None:
    import base64

    raw = picture(tmp_path / "pic.png", (10, 5), "PNG")
    result = await READ_TOOL.execute({"path": "pic.png"}, tools)
    assert not result.is_error
    note, block = result.content
    assert note == {"type": "text", "text": "Read image file pic.png [image/png, 10x5]"}
    assert block["type"] == "image" and block["mimeType"] == "image/png"
    assert base64.b64decode(block["data"]) == raw  # small enough: sent as it is
    assert result.details["image"]["bytes"] == len(raw)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "form", "size", "mime", "fitted"),
    [
        ("wide.jpg", "JPEG", (4000, 1000), "image/jpeg", (2000, 500)),
        ("tall.webp", "WEBP", (1000, 3000), "image/webp", (667, 2000)),
        ("big.gif", "GIF", (2500, 2500), "image/png", (2000, 2000)),
    ],
)
async def test_a_large_image_is_scaled_to_fit_2000_by_2000(
    tmp_path: Path,
    tools: ToolContext,
    name: str,
    form: str,
    size: tuple[int, int],
    mime: str,
    fitted: tuple[int, int],
) -> None:
    picture(tmp_path / name, size, form)
    result = await READ_TOOL.execute({"path": name}, tools)
    note, block = result.content
    assert block["mimeType"] == mime
    assert decoded(block)[1] == fitted
    assert f"scaled down from {size[0]}x{size[1]}" in note["text"]
    image = result.details["image"]
    assert (image["width"], image["height"]) == fitted
    assert (image["original_width"], image["original_height"]) == size


@pytest.mark.anyio
async def test_an_image_is_refused_for_a_model_without_images(tmp_path: Path) -> None:
    picture(tmp_path / "pic.png", (10, 10), "PNG")

    async def no() -> bool:
        return False

    tools = ToolContext(cwd=tmp_path, accepts_images=no)
    result = await READ_TOOL.execute({"path": "pic.png"}, tools)
    assert result.is_error
    assert result.plain_text.startswith(
        "pic.png is an image (image/png), and the current model does not accept images."
    )
    assert "/model" in result.plain_text


@pytest.mark.anyio
async def test_a_broken_image_is_a_clear_error(tmp_path: Path, tools: ToolContext) -> None:
    (tmp_path / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    result = await READ_TOOL.execute({"path": "pic.png"}, tools)
    assert result.is_error
    assert result.plain_text.startswith("pic.png could not be decoded as an image")


@pytest.mark.anyio
async def test_binary_file_is_reported_not_dumped(tmp_path: Path, tools: ToolContext) -> None:
    (tmp_path / "blob.bin").write_bytes(b"abc\x00\x01\x02" * 10)
    result = await READ_TOOL.execute({"path": "blob.bin"}, tools)
    assert "binary file" in result.plain_text
    assert "\x00" not in result.plain_text
    assert result.details["binary"] is True


@pytest.mark.anyio
async def test_crlf_and_bom_are_shown_as_plain_lines(tmp_path: Path, tools: ToolContext) -> None:
    (tmp_path / "w.txt").write_bytes(b"\xef\xbb\xbfa\r\nb\r\n")
    result = await READ_TOOL.execute({"path": "w.txt"}, tools)
    assert result.plain_text == "a\nb"


@pytest.mark.anyio
async def test_absolute_home_and_at_prefixed_paths_resolve(
    tmp_path: Path, tools: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "h.txt").write_text("home file\n")
    monkeypatch.setenv("HOME", str(home))
    assert (await READ_TOOL.execute({"path": "~/h.txt"}, tools)).plain_text == "home file"
    assert (await READ_TOOL.execute({"path": str(home / "h.txt")}, tools)).plain_text == "home file"
    assert (await READ_TOOL.execute({"path": "@home/h.txt"}, tools)).plain_text == "home file"


@pytest.mark.anyio
async def test_empty_file_says_so(tmp_path: Path, tools: ToolContext) -> None:
    (tmp_path / "e.txt").write_text("")
    result = await READ_TOOL.execute({"path": "e.txt"}, tools)
    assert not result.is_error
    assert result.plain_text == "(empty file)"
