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


def test_a_pi_users_keybindings_json_binds_the_same_actions(tmp_path: Path) -> None:
    """pi's ids with an action here bind it (pi's key names made Textual's, its older names
    too); keybindings.toml wins for an action or key both bind; pi's ids with no action here
    are named in one problem, not silently dropped."""
    home = tmp_path / "home"
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(home)}
    pi = home / ".pi" / "agent" / "keybindings.json"
    pi.parent.mkdir(parents=True)
    pi.write_text(
        '{"app.model.select": "f2", "app.tools.expand": ["ctrl+o", "f3"],\n'
        ' "app.interrupt": "esc", "tui.input.newLine": ["shift+enter", "ctrl+j"],\n'
        ' "expandThinking": "f9", "toggleThinking": "ctrl+pageDown",\n'
        ' "tui.editor.cursorUp": ["up", "ctrl+p"], "app.tree.foldOrUp": "ctrl+left",\n'
        ' "app.message.dequeue": "f3"}'
    )
    bindings = load_keybindings(env)
    assert bindings.keys == {
        "model_picker": ("f2",),
        "toggle_tools": ("ctrl+o", "f3"),
        "abort": ("escape",),
        "newline": ("shift+enter", "ctrl+j"),
        "toggle_thinking": ("ctrl+pagedown",),
    }
    clash, unused = sorted(bindings.problems)
    assert clash == f"{pi}: app.message.dequeue: dequeue: 'f3' is already bound to toggle_tools"
    assert unused.startswith(
        f"{pi}: pi keybindings with no action here, not used: expandThinking, "
        "tui.editor.cursorUp, app.tree.foldOrUp (the actions here: submit, "
    )
    # keybindings.toml on top: its action wins, and a key it binds leaves pi's action.
    own = keybindings_path(env)
    own.parent.mkdir(parents=True)
    own.write_text('model_picker = "f4"\nnext_model = "f3"\n')
    assert load_keybindings(env).keys == {
        "abort": ("escape",),
        "newline": ("shift+enter", "ctrl+j"),
        "toggle_thinking": ("ctrl+pagedown",),
        "model_picker": ("f4",),
        "next_model": ("f3",),
    }
    # $PI_CODING_AGENT_DIR moves pi's folder, as in pi.
    assert load_keybindings({**env, "PI_CODING_AGENT_DIR": str(tmp_path / "none")}).keys == {
        "model_picker": ("f4",),
        "next_model": ("f3",),
    }
