"""Image paths in a prompt (issue 18 item 5): which ones are found."""

from __future__ import annotations

from pathlib import Path

from coding_agent.tui.attachments import image_paths


def test_mentions_and_pasted_paths_of_existing_images_are_found(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "shots").mkdir(parents=True)
    for name in ("shots/a.png", "shots/my b.jpg", "c.gif", "notes.txt", "d.WEBP"):
        (project / name).write_bytes(b"x")
    outside = tmp_path / "drop zone"
    outside.mkdir()
    (outside / "e.jpeg").write_bytes(b"x")
    text = (
        'look at @shots/a.png and @"shots/my b.jpg", also @notes.txt and @missing.png; '
        f"pasted '{outside}/e.jpeg' and {project}/c.gif, again file://{project}/c.gif "
        f"and {outside}/e.jpeg. Then ./d.WEBP, but not /nowhere/x.png"
    )
    assert image_paths(text, project) == [
        project / "shots/a.png",
        project / "shots/my b.jpg",
        outside / "e.jpeg",
        project / "c.gif",
        project / "d.WEBP",
    ]
    escaped = str(outside / "e.jpeg").replace(" ", "\\ ")
    assert image_paths(f"see {escaped}", project) == [outside / "e.jpeg"]
    assert image_paths("no images here: a.png is just a word", project) == []
