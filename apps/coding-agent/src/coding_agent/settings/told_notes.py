"""Notes told once per distinct value, not at every start: what the agent remembers it said.

A Claude Code user's ``~/.claude/settings.json`` keeps ``"model": "opus"`` for Claude Code
itself. This agent does not read it (``--model`` and ``model`` in ``config.toml`` choose the
model: :mod:`coding_agent.settings.claude_settings`), and the first start says so in a notice.
Saying it again at every start teaches nothing and buries the notices that matter, while the
user cannot remove the key without changing Claude Code's model. So the note about a key of
:data:`TOLD_ONCE` is given the first time the session worker meets that key with that value in
that file, and again only when the value changes (``"opus"`` → ``"sonnet"``: the user is editing
it and may expect it to count). What was told is remembered in the agent's own state folder
(:func:`told_notes_path`: ``$XDG_STATE_HOME/coding-agent/told-notes.json``), as a digest of each
value, never the value itself.

Only notes that change nothing about safety are told once: a note about ``env``, ``sandbox``,
hooks, MCP servers or a permission setting is given at every start, as before. ``coding-agent
config`` lists every note every time (it reads the files without this memory), so a user who
wonders why the model is not Claude Code's finds the answer there.

A memory that cannot be read starts empty and one that cannot be written is not written: the
note is then told again, never lost.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from coding_agent.settings.xdg import state_home

__all__ = ["TOLD_ONCE", "ToldNotes", "told_notes_path"]

TOLD_ONCE = frozenset({"model"})
"""The Claude Code settings keys whose note is told once per distinct value (module docstring)."""


def told_notes_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/coding-agent/told-notes.json``: the notes told, by file and key."""
    return state_home(env) / "coding-agent" / "told-notes.json"


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class ToldNotes:
    """The memory of the notes told once (module docstring), kept in the JSON file ``path``.

    One instance serves one session worker: a note it decided to tell it keeps telling for its
    whole life (the permission files are read again whenever one changes, and the note must not
    vanish from ``/permissions`` half-way through the run that told it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._telling: dict[str, str] = {}  # this run's: the note of key `file: key` is told

    @classmethod
    def default(cls, env: Mapping[str, str] | None = None) -> ToldNotes:
        """The user's memory (:func:`told_notes_path`)."""
        return cls(told_notes_path(env))

    def quiet(self, source: Path, data: Mapping[str, object]) -> frozenset[str]:
        """The keys of :data:`TOLD_ONCE` in ``data`` (the settings file ``source``) whose note was
        told before with the value they have now: leave their notes out. Every other such key's
        note is told now, so it is remembered here (and on disk) as told with that value."""
        quiet: set[str] = set()
        for key in TOLD_ONCE & data.keys():
            name, digest = f"{source}: {key}", _digest(data[key])
            if self._telling.get(name) == digest:
                continue  # told in this run: keep telling it
            if self._read().get(name) == digest:
                quiet.add(key)
                continue
            self._telling[name] = digest
            self._remember(name, digest)
        return frozenset(quiet)

    def _read(self) -> dict[str, str]:
        try:
            found = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return {}
        if not isinstance(found, dict):
            return {}
        return {str(k): v for k, v in found.items() if isinstance(v, str)}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]

    def _remember(self, name: str, digest: str) -> None:
        told = {**self._read(), name: digest}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            partial.write_text(json.dumps(told, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(partial, self.path)
        except OSError:
            pass  # not remembered: told again next time (never lost)
