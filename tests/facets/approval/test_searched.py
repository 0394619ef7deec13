"""What a read-only call reads beyond its own path (facets_approval.searched): a grep over a
folder reads what ``.gitignore`` leaves in, so only those files count; credentials ask whatever
the rules say, and a listing (names only) does not."""

from __future__ import annotations

import os
from pathlib import Path

from facets_approval.rules import RuleSet, SourcedRule, parse_rule
from facets_approval.searched import credentials_verdict, read_target, search_verdict


def ruleset(project: Path, *pairs: tuple[str, str]) -> RuleSet:
    rules = [SourcedRule(parse_rule(text), kind, "cfg.toml") for kind, text in pairs]  # type: ignore[arg-type]
    return RuleSet(rules, root=str(project), workspace=str(project), home=str(project / "home"))


def test_a_grep_asks_only_when_a_covered_file_is_among_those_it_reads(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("x")
    (tmp_path / ".env").write_text("SECRET=1")
    rules = ruleset(tmp_path, ("deny", "Read(./.env)"), ("ask", "Read(./keys/**)"))
    assert search_verdict(rules, "grep", {"pattern": "x"}).kind == "ask"
    assert search_verdict(rules, "grep", {"pattern": "x", "path": "src"}).kind is None
    assert search_verdict(rules, "find", {"pattern": "*"}).kind is None  # names only
    (tmp_path / ".gitignore").write_text(".env\n")  # grep leaves it out: nothing to ask
    assert search_verdict(rules, "grep", {"pattern": "x"}).kind is None
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "k.pem").write_text("k")
    found = search_verdict(rules, "grep", {"pattern": "x", "path": "."})
    assert found.kind == "ask" and "would read keys/k.pem" in found.why


def test_credentials_ask_for_a_read_or_a_grep_over_them_not_for_a_listing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / "notes.txt").write_text("n")
    work = str(tmp_path)
    assert (
        credentials_verdict("read", {"path": "~/.aws/credentials"}, work, str(home)).kind == "ask"
    )
    assert credentials_verdict("read", {"path": "home/.aws/x"}, work, str(home)).kind == "ask"
    assert credentials_verdict("grep", {"path": str(home)}, work, str(home)).kind == "ask"
    assert credentials_verdict("ls", {"path": str(home)}, work, str(home)).kind is None
    assert credentials_verdict("read", {"path": "~/notes.txt"}, work, str(home)).kind is None
    assert credentials_verdict("grep", {"path": "~/.ssh"}, work, str(home)).kind == "ask"
    for login in ("~/.git-credentials", "~/.claude/.credentials.json", "~/.pi/agent/auth.json",
                  "~/.pi/agent/models.json"):  # fmt: skip
        assert credentials_verdict("read", {"path": login}, work, str(home)).kind == "ask", login


def test_the_path_is_resolved_once_and_every_check_sees_that_real_path(tmp_path: Path) -> None:
    # read_target is what the hook leaves for the tool (checked_targets); the rules and the
    # credentials check take the same answer, so what was checked is what the tool must read
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to("d")
    home = tmp_path / "home"
    work = str(tmp_path)
    assert read_target("read", {"path": "link/notes.txt"}, work, str(home)) == str(
        tmp_path / "d" / "notes.txt"
    )
    assert read_target("ls", {}, work, str(home)) == work  # a folder tool's default: "."
    assert read_target("write", {"path": "x"}, work, str(home)) is None  # not a read
    rules = ruleset(tmp_path, ("deny", "Read(./.env)"))
    env = str(tmp_path / ".env")  # as if d/notes.txt resolved there when it was checked
    assert rules.evaluate("read", {"path": "d/notes.txt"}).kind is None
    assert rules.evaluate("read", {"path": "d/notes.txt"}, real=env).kind == "deny"
    secret = str(home / ".ssh" / "id_rsa")
    assert credentials_verdict("read", {"path": "d/x"}, work, str(home), real=secret).kind == (
        "ask"
    )


def test_every_check_resolves_a_path_as_the_file_tools_do(tmp_path: Path) -> None:
    """The rules, the read-only checks and the edit checks resolve a path with one function
    (``rules.tool_path``), the twin of the tools' ``resolve_path``: the real path approved is
    the one the tool opens. ``link/../x`` is ``x`` (the tool normalises before following a
    link; the checks followed ``link`` first and approved ``elsewhere/x``, so the tool then
    failed the call as "path changed"), and ``~user/x`` is in that user's home (the read
    checks took ``~user`` for a folder of the workspace)."""
    import getpass

    from coding_agent.worker.tools.spec import resolve_path
    from facets_approval.rules import tool_path
    from facets_approval.session import edit_target

    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (tmp_path / "elsewhere" / "deep").mkdir(parents=True)
    (work / "link").symlink_to(tmp_path / "elsewhere" / "deep")
    home = os.path.expanduser("~")
    user = getpass.getuser()
    for spelled in ("link/../notes.txt", "@sub/x.py", "sub/../../y", "~/z", f"~{user}/z", "/abs/q"):
        tool = os.path.realpath(resolve_path(spelled, work))
        assert os.path.realpath(tool_path(spelled, str(work), home)) == tool, spelled
        assert read_target("read", {"path": spelled}, str(work), home) == tool, spelled
        assert edit_target({"path": spelled}, str(work)) == tool, spelled
