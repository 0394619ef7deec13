"""Images end to end in the real TUI over a real worker (issue 18 item 5).

``faux/faux-1`` accepts images, ``faux/faux-big`` (a faux model the script declares) does not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coding_agent.session_files.folders import Session
from coding_agent.supervisor import WorkerSupervisor

pytestmark = pytest.mark.anyio

READ_SHOT = [
    {"text": "Looking.", "toolCalls": [{"name": "read", "arguments": {"path": "shot.png"}}]},
    {"text": "A red square."},
]


@pytest.fixture
def shot(session: Session) -> Path:
    from PIL import Image

    path = session.cwd / "shot.png"
    Image.new("RGB", (2400, 1200), (200, 0, 0)).save(path)
    return path


def user_blocks(kit: Any, app: Any) -> list[Any]:
    users = [e for e in kit.entries(app) if e["kind"] == "pi.user"]
    return users[-1]["model"][0]["content"] if users else []


async def test_a_mentioned_image_is_attached_and_read_returns_an_image(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path, shot: Path
) -> None:
    keeper = WorkerSupervisor(
        session,
        model="faux/faux-1",
        exit_with_parent=True,
        env=agent_env,
        faux_script=kit.script(tmp_path, READ_SHOT),
    )
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app) and app.client.models, "the view")
        await pilot.press(*"what is in @shot.png ?", "enter")
        await kit.wait_for(pilot, lambda: "A red square." in kit.assistant_texts(app), "answer")
        seen["user"] = user_blocks(kit, app)
        seen["results"] = kit.tool_results(app)
        await app.wait_rendered()
        seen["shown"] = "\n".join(str(w.render()) for w in app.query(".user"))

    await kit.drive(session, keeper, test)
    text, mark, image = seen["user"]
    assert text == {"type": "text", "text": "what is in @shot.png ?"}
    # the image's mark (the transcript shows it) and its size, for the model
    assert mark["text"].startswith("[🖼 shot.png]\n[image/png, 2000x1000, scaled down")
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert "🖼 shot.png" in seen["shown"]
    (result,) = seen["results"]
    note, block = result["content"][:2]
    assert note["text"].startswith("Read image file shot.png [image/png, 2000x1000, scaled down")
    assert block["type"] == "image" and block["mimeType"] == "image/png"


async def test_a_model_without_images_refuses_them_clearly(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path, shot: Path
) -> None:
    keeper = WorkerSupervisor(
        session,
        model="faux/faux-big",
        exit_with_parent=True,
        env=agent_env,
        faux_script=kit.script(tmp_path, READ_SHOT, models=kit.FAUX_BIG),
    )
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app) and app.client.models, "the view")
        await pilot.press(*"what is in @shot.png ?", "enter")
        await kit.wait_for(
            pilot,
            lambda: any("does not accept images" in m for _, m in kit.toasts(app)),
            "the refusal toast",
        )
        seen["editor"] = app.editor.text
        seen["kinds"] = kit.kinds(app)
        app.editor.text = ""
        await pilot.press(*"read it", "enter")
        await kit.wait_for(pilot, lambda: "A red square." in kit.assistant_texts(app), "answer")
        seen["results"] = kit.tool_results(app)

    await kit.drive(session, keeper, test)
    assert seen["editor"] == "what is in @shot.png ?"  # nothing was lost
    assert "pi.user" not in seen["kinds"]
    (result,) = seen["results"]
    assert result["isError"] is True
    assert (
        "shot.png is an image (image/png), and the current model does not accept images"
        in (result["content"][0]["text"])
    )
