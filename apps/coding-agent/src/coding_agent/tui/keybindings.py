"""``keybindings.toml``: the user's own keys for the TUI's actions.

The file is ``$XDG_CONFIG_HOME/coding-agent/keybindings.toml`` (default
``~/.config/coding-agent/keybindings.toml``). Each line binds one action to a key, or to a list
of keys, by Textual key name (``ctrl+x``, ``alt+up``, ``f2``, ``shift+tab``, ``escape``)::

    abort = ["escape", "f4"]
    toggle_tools = ["ctrl+o", "f3"]
    model_picker = "f2"
    "key:ctrl+b" = "ctrl+r"     # a key a feature package registered, by its default key

The actions (:data:`ACTIONS`) and their default keys:

============== =================== ==============================================
``submit``      enter               send (steer while a turn runs)
``follow_up``   alt+enter           queue a follow-up
``newline``     shift+enter, ctrl+j a new line in the prompt
``abort``       escape              abort the turn or a running ``!`` command
``dequeue``     alt+up              take back the newest queued message
``toggle_tools`` ctrl+o             expand tool output and folded pastes
``toggle_thinking`` ctrl+t          expand thinking blocks
``external_editor`` ctrl+g          edit the prompt in ``$VISUAL``/``$EDITOR``
``page_up``     pageup              scroll the transcript up a page (leaves follow mode)
``page_down``   pagedown            scroll down a page (at the bottom: follow again)
``scroll_top``  home                the top of the transcript (while the editor is empty)
``scroll_bottom`` end               the bottom, following it again (editor empty)
``previous_message`` ctrl+up        scroll to the previous message
``next_message`` ctrl+down          scroll to the next message
``help``        f1                  the help screen (also ``/help``)
``model_picker`` ctrl+l             the model picker
``next_thinking`` ctrl+y            the next thinking level
``next_model``  ctrl+p              the next model of the ``--models`` scope
``cycle_mode``  shift+tab           the next permission mode
============== =================== ==============================================

A rebound action no longer answers to its default key. A line that is not valid TOML, names an
action that does not exist or gives something that is not a key name is reported with its line
number (:attr:`Keybindings.problems`) and ignored; the other lines still apply.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "ACTIONS",
    "KEYBINDINGS_FILE",
    "Action",
    "Keybindings",
    "keybindings_path",
    "load_keybindings",
    "parse_keybindings",
]

KEYBINDINGS_FILE = "keybindings.toml"


@dataclass(frozen=True, slots=True)
class Action:
    """One bindable action: where it lives and its default keys."""

    kind: Literal["app", "editor", "facet"]
    defaults: tuple[str, ...]
    description: str


ACTIONS: dict[str, Action] = {
    "submit": Action("editor", ("enter",), "send"),
    "follow_up": Action("editor", ("alt+enter",), "queue a follow-up"),
    "newline": Action("editor", ("shift+enter", "ctrl+j"), "new line"),
    "abort": Action("app", ("escape",), "abort"),
    "dequeue": Action("app", ("alt+up",), "take back the newest queued message"),
    "toggle_tools": Action("app", ("ctrl+o",), "expand tool output and pastes"),
    "toggle_thinking": Action("app", ("ctrl+t",), "expand thinking"),
    "external_editor": Action("app", ("ctrl+g",), "external editor"),
    "page_up": Action("app", ("pageup",), "scroll up a page"),
    "page_down": Action("app", ("pagedown",), "scroll down a page"),
    "scroll_top": Action("app", ("home",), "top of the transcript (editor empty)"),
    "scroll_bottom": Action("app", ("end",), "back to the bottom (editor empty)"),
    "previous_message": Action("app", ("ctrl+up",), "previous message"),
    "next_message": Action("app", ("ctrl+down",), "next message"),
    "help": Action("app", ("f1",), "help"),
    "model_picker": Action("facet", ("ctrl+l",), "model picker"),
    "next_thinking": Action("facet", ("ctrl+y",), "next thinking level"),
    "next_model": Action("facet", ("ctrl+p",), "next model"),
    "cycle_mode": Action("facet", ("shift+tab",), "next permission mode"),
}

_MODIFIERS = ("ctrl", "alt", "shift", "super", "meta", "hyper")
_KEY = re.compile(r"(?:(?:ctrl|alt|shift|super|meta|hyper)\+)*(?:[a-z0-9_]+|[^\sA-Z+])")


def keybindings_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/coding-agent/keybindings.toml`` (default ``~/.config``)."""
    environ = os.environ if env is None else env
    xdg = environ.get("XDG_CONFIG_HOME", "")
    if os.path.isabs(xdg):
        base = Path(xdg)
    else:
        home = environ.get("HOME", "")
        base = (Path(home) if os.path.isabs(home) else Path(os.path.expanduser("~"))) / ".config"
    return base / "coding-agent" / KEYBINDINGS_FILE


@dataclass
class Keybindings:
    """The keys of every rebound action, and what was wrong in the file."""

    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Action id (or ``key:DEFAULT`` for a facet key) → its keys, for rebound actions only."""
    problems: list[str] = field(default_factory=list)

    def keys_of(self, action: str) -> tuple[str, ...]:
        """The keys ``action`` answers to now."""
        if action in self.keys:
            return self.keys[action]
        known = ACTIONS.get(action)
        return known.defaults if known is not None else ()

    def editor_keys(self) -> dict[str, str]:
        """Key → editor action (``submit``, ``follow_up``, ``newline``)."""
        table: dict[str, str] = {}
        for name, action in ACTIONS.items():
            if action.kind == "editor":
                for key in self.keys_of(name):
                    table[key] = name
        return table

    def app_keymap(self) -> dict[str, str]:
        """Textual keymap (binding id → comma-joined keys) of the rebound app actions."""
        return {
            name: ",".join(keys)
            for name, keys in self.keys.items()
            if name in ACTIONS and ACTIONS[name].kind == "app"
        }

    def facet_keys(self) -> dict[str, str]:
        """New key → the default key a facet registered, for rebound facet keys."""
        table: dict[str, str] = {}
        for name, keys in self.keys.items():
            if name.startswith("key:"):
                default = name[4:]
            elif name in ACTIONS and ACTIONS[name].kind == "facet":
                default = ACTIONS[name].defaults[0]
            else:
                continue
            for key in keys:
                table[key] = default
        return table

    def freed_keys(self) -> set[str]:
        """Default facet keys whose action moved to other keys (they no longer trigger it)."""
        moved = set(self.facet_keys().values())
        return moved - set(self.facet_keys())


def _line(text: str, key: str) -> int | None:
    pattern = re.compile(rf"""^\s*(?:"{re.escape(key)}"|'{re.escape(key)}'|{re.escape(key)})\s*=""")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            return number
    return None


def _key_problem(key: Any) -> str | None:
    if not isinstance(key, str) or not key:
        return f"{key!r} is not a key name"
    parts = key.split("+")
    if key != key.strip() or not _KEY.fullmatch(key) or parts[-1] in _MODIFIERS:
        return f"{key!r} is not a key name (use Textual names such as ctrl+x, alt+up, f2)"
    return None


def parse_keybindings(text: str, source: str = KEYBINDINGS_FILE) -> Keybindings:
    """The bindings in ``text`` (a keybindings.toml); problems name ``source`` and the line."""
    result = Keybindings()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        found = re.search(r"\(at line (\d+)", str(error))
        where = f"{source}:{found.group(1)}" if found else source
        message = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(error))
        result.problems.append(f"{where}: invalid TOML ({message}); no key was rebound")
        return result
    taken: dict[str, str] = {}
    for name, value in data.items():
        line = _line(text, name)
        where = f"{source}:{line}" if line else source
        if name not in ACTIONS and not (name.startswith("key:") and not _key_problem(name[4:])):
            known = ", ".join(ACTIONS)
            result.problems.append(
                f"{where}: unknown action {name!r} (known: {known}, or key:DEFAULT-KEY)"
            )
            continue
        keys = value if isinstance(value, list) else [value]
        bad = next((problem for key in keys if (problem := _key_problem(key))), None)
        if not keys or bad is not None:
            result.problems.append(f"{where}: {name}: {bad or 'no key given'}")
            continue
        clash = next((key for key in keys if key in taken), None)
        if clash is not None:
            result.problems.append(f"{where}: {name}: {clash!r} is already bound to {taken[clash]}")
            continue
        for key in keys:
            taken[key] = name
        result.keys[name] = tuple(keys)
    return result


def load_keybindings(env: Mapping[str, str] | None = None) -> Keybindings:
    """Read :func:`keybindings_path` (a missing file binds nothing and is no problem)."""
    path = keybindings_path(env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Keybindings()
    except (OSError, UnicodeDecodeError) as error:
        return Keybindings(problems=[f"{path}: cannot read it: {error}"])
    return parse_keybindings(text, str(path))
