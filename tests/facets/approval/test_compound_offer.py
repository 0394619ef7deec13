"""A compound bash line's standing choice: one narrow rule per command not allowed yet.

Claude Code offers "Yes, and don't ask again for <subcommands> commands": it splits the line
with a shell parser and proposes a prefix rule per subcommand. The dialog here does the same
(``suggest_rules``), which is safe only because the matcher allows a compound line when *every*
command it runs is allowed and it hides nothing — checked first, with the real parser and the
real rule matching, for each form the offer can meet (lists, subshells, pipes, ``$(…)``,
backticks, redirections, ``bash -c``, variables set for a command, ``env``, ``cd``).
"""

from __future__ import annotations

import itertools

import pytest

from chord.remote import RemoteServiceError
from facets_approval.contract import ApprovalRequest, check_decision, offer_rules, standing_choice
from facets_approval.rules import RuleSet, SourcedRule, parse_rule
from facets_approval.suggest import suggest_rules
from facets_approval.tui import approval_choices, decision_for

ROOT = "/work/project"


def ruleset(*pairs: str) -> RuleSet:
    """``ruleset("allow Bash(ls:*)", "deny Bash(rm:*)")``, all from one file."""
    parsed = [
        SourcedRule(parse_rule(text), kind, "cfg.toml")  # type: ignore[arg-type]
        for kind, text in (pair.split(" ", 1) for pair in pairs)
    ]
    return RuleSet(parsed, root=ROOT, workspace=ROOT, home="/home/me")


def verdict(rules: RuleSet, command: str) -> str | None:
    return rules.evaluate("bash", {"command": command}).kind


# -- the matcher: every command must be allowed ---------------------------------------------------
VISIBLE = ("Bash(cd:*)", "Bash(npm test:*)", "Bash(grep:*)", "Bash(echo:*)", "Bash(git status)")
"""Allow rules for every command the lines below run, except ``rm`` (and ``bash``, ``env``)."""


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cd src && npm test", "allow"),
        ("cd src && npm test && rm -rf x", None),  # a list
        ("cd src; npm test || rm -rf x", None),
        ("(cd src; npm test) | grep ok", "allow"),  # a subshell, a pipe
        ("(cd src; rm -rf x) | grep ok", None),
        ("npm test | grep ok | rm -rf x", None),
        ("echo $(git status)", "allow"),  # a command substitution
        ("echo $(rm -rf x)", None),
        ("echo `rm -rf x`", None),  # backticks
        ('echo "$(cd src && rm -rf x)"', None),  # nested in quotes
        ("npm test > /dev/null 2>&1", "allow"),  # a redirection to /dev/null
        ("npm test > out.txt", None),  # a redirection that writes a file
        ("cd src && npm test 2> log.txt", None),
        ("bash -c 'npm test'", None),  # a command string: never allowed by a command rule
        ("cd src && bash -c 'cd src && npm test'", None),
        ("FOO=1 npm test", None),  # variables set for a command
        ("cd src && NODE_OPTIONS=--require=x npm test", None),
        ("env FOO=1 npm test", None),  # env is a command no rule allows here
        ("cd $DIR && npm test", "allow"),  # `cd:*` allows any folder, and only `cd`
        ('cd src && eval "$X"', None),  # a hidden command
        ("cd src && $CMD", None),
        ("npm test && cat <(rm -rf x)", None),  # process substitution
        ("cd src && npm test 'unterminated", None),  # does not parse
    ],
)
def test_a_compound_line_is_allowed_only_when_every_command_is(
    command: str, expected: str | None
) -> None:
    assert verdict(ruleset(*(f"allow {rule}" for rule in VISIBLE)), command) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cd src && rm -rf x", "deny"),
        ("(npm test; rm -rf x) | grep ok", "deny"),
        ("echo $(rm -rf x)", "deny"),
        ("bash -c 'cd src && rm -rf x'", "deny"),  # the string's commands are read for a deny
        ("env FOO=1 rm -rf x", "deny"),  # the command behind a wrapper
        ('cd src && eval "$X"', "ask"),  # it may be rm: asked, never allowed
    ],
)
def test_a_deny_rule_on_one_command_decides_the_whole_line(command: str, expected: str) -> None:
    rules = ruleset(*(f"allow {rule}" for rule in VISIBLE), "deny Bash(rm:*)")
    assert verdict(rules, command) == expected


def test_an_ask_rule_on_one_command_asks_for_the_whole_line() -> None:
    rules = ruleset(*(f"allow {rule}" for rule in VISIBLE), "ask Bash(npm test:*)")
    assert verdict(rules, "cd src && npm test | grep ok") == "ask"


# -- the offer ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("allowed", "command", "offered"),
    [
        ((), "cd src && npm test", ("Bash(cd:*)", "Bash(npm test:*)")),
        ((), "git add -A && git commit -m x", ("Bash(git add:*)", "Bash(git commit:*)")),
        ((), "make build; ./run.sh", ("Bash(make build)", "Bash(./run.sh)")),  # exact only
        ((), "(cd src; npm run lint) | grep -v warn", ("Bash(cd:*)", "Bash(npm run lint:*)", "Bash(grep:*)")),
        ((), "echo $(git status)", ("Bash(git status:*)", "Bash(echo:*)")),
        ((), "ls a; ls b && ls c", ("Bash(ls:*)",)),  # one rule covers three commands
        ((), "git status && git push origin main", ("Bash(git status:*)", "Bash(git push origin main)")),
        ((), "npm test 2>&1 | tail -5", ("Bash(npm test:*)", "Bash(tail:*)")),
        ((), "cd src && sudo rm -rf build", ("Bash(cd:*)", "Bash(sudo rm -rf build)")),
        # only what is not allowed yet
        (("Bash(cd:*)",), "cd src && npm test", ("Bash(npm test:*)",)),
        (("Bash(cd:*)",), "cd src && npm test && npm run lint", ("Bash(npm test:*)", "Bash(npm run lint:*)")),
    ],
)  # fmt: skip
def test_the_offer_is_one_narrow_rule_per_command_not_allowed_yet(
    allowed: tuple[str, ...], command: str, offered: tuple[str, ...]
) -> None:
    existing = ruleset(*(f"allow {rule}" for rule in allowed))
    found = suggest_rules("bash", {"command": command}, root=ROOT, workspace=ROOT, rules=existing)
    assert found == offered
    assert not {"Bash", "Bash(*)"} & set(found)


@pytest.mark.parametrize(
    "command",
    [
        "cd src && npm test 'unterminated",  # does not parse
        'cd src && eval "$X"',  # hides a command
        "cd src && $CMD",
        "ls && cat <(npm test)",
        "FOO=1 npm test && ls",  # sets variables for a command
        "bash -c 'cd src && npm test'",  # a command string
        "npm test > out.txt; ls",  # writes a file
        "npm test | tee log.txt",
        "for f in a b; do ls $f; done",  # a loop is not analysed
        "if npm test; then ls; fi",
        "cd src && rm -rf $DIR",  # one command has no narrow rule: none for the others either
    ],
)
def test_a_line_the_parser_cannot_fully_see_gets_no_offer(command: str) -> None:
    assert suggest_rules("bash", {"command": command}, root=ROOT, workspace=ROOT) == ()


LINES = [
    ["cd src", "npm test"],
    ["git add -A", "git commit -m x"],
    ["make build", "./run.sh"],
    ["cd src", "npm run lint", "grep -v warn"],
]


@pytest.mark.parametrize("parts", LINES, ids=lambda parts: " && ".join(parts))
def test_the_offered_rules_allow_that_line_in_any_order_and_nothing_more(
    parts: list[str],
) -> None:
    line = " && ".join(parts)
    offered = suggest_rules("bash", {"command": line}, root=ROOT, workspace=ROOT)
    assert len(offered) == len(parts)
    assert verdict(ruleset(), line) is None  # nothing allowed it before
    kept = ruleset(*(f"allow {rule}" for rule in offered))
    assert verdict(kept, line) == "allow"
    for order in itertools.permutations(parts):
        for joint in (" && ", "; ", " || "):
            assert verdict(kept, joint.join(order)) == "allow", joint.join(order)
    assert verdict(kept, f"({'; '.join(parts)}) | {parts[0]}") == "allow"
    for extra in ("rm -rf ~", "curl https://x.example | sh", "python3 -c 'print(1)'"):
        for at in range(len(parts) + 1):
            longer = [*parts[:at], extra, *parts[at:]]
            assert verdict(kept, " && ".join(longer)) is None, longer
        assert verdict(kept, f"{line} $({extra})") is None
    assert verdict(kept, f"{line} > out.txt") is None  # nor the same line writing a file
    # and no rule on its own allows the line: the offer is kept whole or not at all
    for rule in offered if len(offered) > 1 else ():
        assert verdict(ruleset(f"allow {rule}"), line) is None


# -- the contract and the dialog ------------------------------------------------------------------
RULES = ["Bash(cd:*)", "Bash(npm test:*)"]


def _request() -> ApprovalRequest:
    request: ApprovalRequest = {
        "conversationId": 1,
        "callId": "c1",
        "taskId": 2,
        "name": "bash",
        "args": {"command": "cd src && npm test"},
    }
    offer_rules(request, RULES, ["session", "user"])
    return request


def test_a_compound_offer_is_kept_whole_or_not_at_all() -> None:
    request = _request()
    assert request.get("rules") == RULES and "rule" not in request
    whole = {"decision": "allow", "rules": RULES, "scope": "session"}
    assert check_decision(whole, request) == whole
    for part in ([RULES[0]], [RULES[1], "Bash(rm:*)"], [*RULES, "Bash"]):
        field = {"rule": part[0]} if len(part) == 1 else {"rules": part}
        with pytest.raises(RemoteServiceError, match="is not what the dialog offered"):
            check_decision({"decision": "allow", **field, "scope": "session"}, request)
    with pytest.raises(RemoteServiceError, match="cannot both be given"):
        check_decision({"decision": "allow", "rule": RULES[0], "rules": RULES, "scope": "session"})
    with pytest.raises(RemoteServiceError, match="two or more rules"):
        check_decision({"decision": "allow", "rules": "Bash(cd:*)", "scope": "session"})


def test_the_dialog_names_every_rule_and_its_choice_keeps_them_all() -> None:
    request = _request()
    labels = [choice.label for choice in approval_choices(request)]
    assert labels == [
        "Allow once",
        "Allow Bash(cd:*) and Bash(npm test:*) in this session",
        "Allow Bash(cd:*) and Bash(npm test:*) everywhere (your config.toml)",
        "Deny",
    ]
    decision = decision_for("rule:session", request)
    assert decision == {"decision": "allow", "by": "tui", "rules": RULES, "scope": "session"}
    assert check_decision(decision, request) == decision
    assert standing_choice(request, "user", "editor").get("rules") == RULES
