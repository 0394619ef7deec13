"""The store of git configurations allowed "while they stay as they are"
(``coding_agent.settings.git_approvals``): beside the trust file, atomic, never reset."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from coding_agent.settings.git_approvals import GitApprovalStore


def test_it_lives_beside_the_trust_file_and_keeps_one_approval_per_git_folder(
    tmp_path: Path,
) -> None:
    store = GitApprovalStore.default({"XDG_CONFIG_HOME": str(tmp_path)})
    assert store.path == tmp_path / "coding-agent" / "git-approvals.json"
    assert store.fingerprint("/r/.git") is None  # no file: nothing approved
    store.approve("/r/.git", "one", ["./a.sh (core.fsmonitor in .git/config)"])
    store.approve("/r/.git", "two", [])  # replaces
    store.approve("/s/.git", "three", [])
    assert store.fingerprint("/r/.git") == "two"
    assert [a["gitDir"] for a in store.listed()] == ["/r/.git", "/s/.git"]
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    store.forget("/r/.git")
    assert store.fingerprint("/r/.git") is None
    with pytest.raises(ValueError, match=re.escape("no approval of /r/.git's git configuration")):
        store.forget("/r/.git")
    with pytest.raises(ValueError, match="is not an absolute path"):
        store.approve("r/.git", "f", [])


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{oops", "the git approvals file is corrupt"),
        ('{"version": 9, "repositories": {}}', "unsupported git approvals file version 9"),
        ('{"version": 1, "repositories": {"r/.git": {"fingerprint": "f", "programs": [], '
         '"at": "2026-12-07T11:00:00Z"}}}', "git folder 'r/.git' is not an absolute path"),
    ],
)  # fmt: skip
def test_a_bad_file_is_an_error_naming_it_and_is_never_rewritten(
    tmp_path: Path, text: str, said: str
) -> None:
    store = GitApprovalStore(tmp_path / "git-approvals.json")
    store.path.write_text(text)
    for attempt in (
        lambda: store.fingerprint("/r/.git"),
        lambda: store.approve("/r/.git", "f", []),
        lambda: store.forget("/r/.git"),
    ):
        with pytest.raises(ValueError, match=f"^{re.escape(str(store.path))}: .*{re.escape(said)}"):
            attempt()
    assert store.path.read_text() == text
