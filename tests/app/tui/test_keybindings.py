"""keybindings.toml (issue 18 item 6): what a file binds and how its mistakes are reported."""

from __future__ import annotations

from pathlib import Path

from coding_agent.tui.keybindings import keybindings_path, load_keybindings, parse_keybindings

FILE = """\
# my keys
abort = "ctrl+c"
toggle_tools = ["ctrl+o", "f3"]
model_picker = "f2"
"key:ctrl+b" = "ctrl+r"
submit = "ctrl+s"
abrt = "ctrl+x"
dequeue = "ctrl+"
next_model = 5
newline = "f3"
"""


def test_bindings_apply_and_each_bad_line_is_named() -> None:
    bindings = parse_keybindings(FILE, "keys.toml")
    assert bindings.keys == {
        "abort": ("ctrl+c",),
        "toggle_tools": ("ctrl+o", "f3"),
        "model_picker": ("f2",),
        "key:ctrl+b": ("ctrl+r",),
        "submit": ("ctrl+s",),
    }
    assert bindings.app_keymap() == {"abort": "ctrl+c", "toggle_tools": "ctrl+o,f3"}
    assert bindings.facet_keys() == {"f2": "ctrl+l", "ctrl+r": "ctrl+b"}
    assert bindings.freed_keys() == {"ctrl+l", "ctrl+b"}
    assert bindings.editor_keys() == {
        "ctrl+s": "submit",
        "alt+enter": "follow_up",
        "shift+enter": "newline",
        "ctrl+j": "newline",
    }
    problems = bindings.problems
    assert problems[0].startswith("keys.toml:7: unknown action 'abrt' (known: submit,")
    assert problems[1].startswith("keys.toml:8: dequeue: 'ctrl+' is not a key name")
    assert problems[2] == "keys.toml:9: next_model: 5 is not a key name"
    assert problems[3] == "keys.toml:10: newline: 'f3' is already bound to toggle_tools"
    assert len(problems) == 4


def test_invalid_toml_names_its_line_and_binds_nothing(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path / "home")}
    path = keybindings_path(env)
    assert path == tmp_path / "coding-agent" / "keybindings.toml"
    assert load_keybindings(env).keys == {} and load_keybindings(env).problems == []
    path.parent.mkdir()
    path.write_text('abort = "ctrl+c"\ntoggle_tools = [\n')
    bindings = load_keybindings(env)
    assert bindings.keys == {}
    (problem,) = bindings.problems
    assert problem.startswith(f"{path}:")
    assert "invalid TOML" in problem and "no key was rebound" in problem
