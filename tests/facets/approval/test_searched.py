"""What a read-only call reads beyond its own path (facets_approval.searched): a grep over a
folder reads what ``.gitignore`` leaves in, so only those files count; credentials ask whatever
the rules say, and a listing (names only) does not."""

from __future__ import annotations

from pathlib import Path

from facets_approval.rules import RuleSet, SourcedRule, parse_rule
from facets_approval.searched import credentials_verdict, search_verdict


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
