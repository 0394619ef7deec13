"""Fixtures for the approval feature: the contract's scripted provider and request, plus the
shared dialog helpers of :mod:`dialog_support` (the Textual app, the scripted ``Tui``, the
presentation host), handed to tests as ``kit``.

The session side is either the real session facet over a harness (``test_approval_session``)
or, for presentation-only tests, a small provider of the same contract (:class:`ScriptedDialogs`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import dialog_support
import pytest

from facets_approval.contract import ApprovalDecision, ApprovalDialogs, check_decision

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:  # the git tests share approval_git_support
    sys.path.insert(0, _HERE)


class ScriptedDialogs(dialog_support.ScriptedDialogs[ApprovalDecision]):
    """A stand-in session host of ``ApprovalDialogs`` (:mod:`dialog_support`): each dialog it opens
    records the decisions its ``decide`` receives, checked by ``check_decision``."""

    def __init__(self) -> None:
        super().__init__(
            ApprovalDialogs,
            "decide",
            lambda decision, _request: check_decision(decision),
            "approval",
        )


def bash_request(call_id: str = "call-1", command: str = "ls -la") -> dict[str, Any]:
    return {
        "conversationId": 1,
        "callId": call_id,
        "taskId": 7,
        "name": "bash",
        "args": {"command": command},
    }


class RuleSource:
    """An in-memory permission source (the harness service ``permission_rules``) with the
    app's interface: ``load``, ``add``, ``remove``; ``files`` maps a file name to its rules."""

    def __init__(
        self,
        rules: dict[str, list[tuple[str, str]]] | None = None,
        *,
        root: str | None = None,
        scopes: tuple[str, ...] = ("user",),
        problems: tuple[str, ...] = (),
        restrictions: dict[str, str] | None = None,
        trusted: bool | None = None,
    ) -> None:
        self.files: dict[str, list[tuple[str, str]]] = {
            k: list(v) for k, v in (rules or {}).items()
        }
        self.root = root
        self.scopes = scopes
        self.problems = problems
        self.restrictions = dict(restrictions or {})
        """Claude Code's restrictive switches, each with the file that turned it on."""
        self.trusted = trusted
        """Whether the user trusts the project at ``root`` (``None``: not said)."""

    def load(self) -> dict[str, Any]:
        rules = [
            {"rule": rule, "kind": kind, "source": source, "scope": source.split("/")[0]}
            for source, entries in self.files.items()
            for kind, rule in entries
        ]
        found: dict[str, Any] = {"rules": rules, "scopes": list(self.scopes)}
        found["problems"] = list(self.problems)
        if self.restrictions:
            found["restrictions"] = dict(self.restrictions)
        if self.root is not None:
            found["root"] = self.root
        if self.trusted is not None:
            found["trusted"] = self.trusted
        return found

    def add(self, rule: str, kind: str, scope: str) -> str:
        source = f"{scope}/config.toml"
        self.files.setdefault(source, []).append((kind, rule))
        return source

    def remove(self, rule: str, kind: str, source: str) -> None:
        entries = self.files.get(source, [])
        if (kind, rule) not in entries:
            raise ValueError(f"{source} has no {kind} rule {rule}")
        entries.remove((kind, rule))


class ScriptedTui(dialog_support.ScriptedTui):
    """The scripted ``Tui`` (:mod:`dialog_support`), naming the approval facet in its errors."""

    feature = "approval"


class Kit:
    """The helpers above, handed to tests through the ``kit`` fixture (importlib mode cannot
    import a conftest module by name)."""

    DialogApp = dialog_support.DialogApp
    RuleSource = RuleSource
    ScriptedDialogs = ScriptedDialogs
    ScriptedTui = ScriptedTui
    bash_request = staticmethod(bash_request)
    presentation = staticmethod(dialog_support.presentation)
    shown = staticmethod(dialog_support.shown)
    title = staticmethod(dialog_support.dialog_title)
    body = staticmethod(dialog_support.dialog_body)
    options = staticmethod(dialog_support.dialog_options)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
