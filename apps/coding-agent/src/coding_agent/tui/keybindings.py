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

A pi user's ``~/.pi/agent/keybindings.json`` (``$PI_CODING_AGENT_DIR``) is read first: each of
pi's ids with an action here (:data:`PI_ACTIONS`: ``app.model.select`` is ``model_picker``,
``app.tools.expand`` is ``toggle_tools``…, and pi's older names such as ``expandTools``) binds
that action, with pi's key names made Textual's (``pageUp`` → ``pageup``, ``esc`` →
``escape``); ``keybindings.toml`` wins for an action or a key both bind. The ids with no action
here (the editor's cursor and kill-ring keys, the session tree's) are named in one problem, so
a pi binding never silently does nothing.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from coding_agent.settings.xdg import pi_home

__all__ = [
    "ACTIONS",
    "KEYBINDINGS_FILE",
    "PI_ACTIONS",
    "Action",
    "Keybindings",
    "keybindings_path",
    "load_keybindings",
    "parse_keybindings",
    "parse_pi_keybindings",
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

PI_ACTIONS: dict[str, str] = {
    "app.interrupt": "abort",
    "app.editor.external": "external_editor",
    "app.model.select": "model_picker",
    "app.model.cycleForward": "next_model",
    "app.thinking.cycle": "next_thinking",
    "app.thinking.toggle": "toggle_thinking",
    "app.tools.expand": "toggle_tools",
    "app.message.followUp": "follow_up",
    "app.message.dequeue": "dequeue",
    "tui.input.submit": "submit",
    "tui.input.newLine": "newline",
}
"""pi's keybinding ids (its ``keybindings.json``) → the action here that does the same."""

_PI_OLD_NAMES = {
    "interrupt": "app.interrupt",
    "externalEditor": "app.editor.external",
    "selectModel": "app.model.select",
    "cycleModelForward": "app.model.cycleForward",
    "cycleThinkingLevel": "app.thinking.cycle",
    "toggleThinking": "app.thinking.toggle",
    "expandTools": "app.tools.expand",
    "followUp": "app.message.followUp",
    "dequeue": "app.message.dequeue",
    "submit": "tui.input.submit",
    "newLine": "tui.input.newLine",
}
"""pi's ids before they were namespaced (pi still reads them)."""

_PI_KEY_NAMES = {"pageup": "pageup", "pagedown": "pagedown", "esc": "escape", "return": "enter"}

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
        _bind(result, name, value, where, taken)
    return result


def _bind(result: Keybindings, name: str, value: Any, where: str, taken: dict[str, str]) -> None:
    """Bind action ``name`` to ``value`` (a key or a list of keys) in ``result``, or add the
    problem (not a key, no key, a key ``taken`` by another action)."""
    keys: list[Any] = value if isinstance(value, list) else [value]  # pyright: ignore[reportUnknownVariableType]
    bad = next((problem for key in keys if (problem := _key_problem(key))), None)
    if not keys or bad is not None:
        result.problems.append(f"{where}: {name}: {bad or 'no key given'}")
        return
    clash = next((key for key in keys if key in taken), None)
    if clash is not None:
        result.problems.append(f"{where}: {name}: {clash!r} is already bound to {taken[clash]}")
        return
    for key in keys:
        taken[key] = name
    result.keys[name] = tuple(keys)


def _pi_key(key: Any) -> Any:
    """pi's key name as Textual's (``ctrl+pageUp`` → ``ctrl+pageup``); anything else as is."""
    if not isinstance(key, str):
        return key
    *mods, name = key.split("+")
    return "+".join([*mods, _PI_KEY_NAMES.get(name.lower(), name)])


def parse_pi_keybindings(text: str, source: str) -> Keybindings:
    """The bindings of pi's ``keybindings.json`` (``text``) translated to this TUI's actions
    (:data:`PI_ACTIONS`); its ids with no action here are one problem naming them."""
    import json

    result = Keybindings()
    try:
        data = json.loads(text)
    except ValueError as error:
        result.problems.append(f"{source}: not valid JSON ({error}); no key was rebound")
        return result
    if not isinstance(data, dict):
        result.problems.append(f"{source}: not a JSON object; no key was rebound")
        return result
    unused: list[str] = []
    taken: dict[str, str] = {}
    for raw_name, value in cast(dict[str, Any], data).items():
        action = PI_ACTIONS.get(_PI_OLD_NAMES.get(raw_name, raw_name))
        if action is None:
            unused.append(raw_name)
            continue
        keys: list[Any] = value if isinstance(value, list) else [value]  # pyright: ignore[reportUnknownVariableType]
        _bind(result, action, [_pi_key(key) for key in keys], f"{source}: {raw_name}", taken)
    if unused:
        result.problems.append(
            f"{source}: pi keybindings with no action here, not used: {', '.join(unused)} "
            f"(the actions here: {', '.join(ACTIONS)}; rebind them in {KEYBINDINGS_FILE})"
        )
    return result


def _read(path: Path, parse: Callable[[str, str], Keybindings]) -> Keybindings:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Keybindings()
    except (OSError, UnicodeDecodeError) as error:
        return Keybindings(problems=[f"{path}: cannot read it: {error}"])
    return parse(text, str(path))


def load_keybindings(env: Mapping[str, str] | None = None) -> Keybindings:
    """Read pi's ``keybindings.json`` and then :func:`keybindings_path` on top (module
    docstring); a missing file binds nothing and is no problem."""
    pi = _read(pi_home(env) / "keybindings.json", parse_pi_keybindings)
    own = _read(keybindings_path(env), parse_keybindings)
    taken = {key for keys in own.keys.values() for key in keys}
    merged = {
        action: keys
        for action, keys in pi.keys.items()
        if action not in own.keys and not taken.intersection(keys)
    }
    return Keybindings({**merged, **own.keys}, [*pi.problems, *own.problems])
