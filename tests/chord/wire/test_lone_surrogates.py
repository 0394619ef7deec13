"""What the wire server refuses as text no UTF-8 encoder takes (issue 24 deliver 5): the path of
the first lone surrogate in a request's arguments. The refusal itself (``service_invalid_value``,
the method never runs, the connection stays up) is tested against a real worker in
``tests/app/worker/test_refusals.py``."""

from __future__ import annotations

from chord.json import lone_surrogate


def test_lone_surrogate_names_the_path_and_passes_valid_text() -> None:
    assert lone_surrogate({"a": ["ok", "caf\u00e9", {"b": "x\ud800y"}]}, "args") == (
        "args.a[2].b: a lone surrogate (\\ud800) at character 1"
    )
    assert (
        lone_surrogate({"\udcff": 1})
        == "the value: a key holding a lone surrogate (\\udcff) at character 0"
    )
    assert lone_surrogate(["\U0001f600", "plain", 1, None, 2.5, {"k": [True]}]) is None
