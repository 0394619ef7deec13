"""Valid messages of the service grammar (docs/design/chord.md#snapshots-and-updates), one of each
shape: ``tests/chord/remote/test_grammar.py`` parses them exactly, and
``tests/reliability/test_fuzz_grammar.py`` mutates them at random depths."""

from __future__ import annotations

from typing import Any

ADDRESS = {"key": "k", "generation": 2}
"""An instance address (a keyed instance's key and generation)."""
SNAPSHOT: dict[str, Any] = {
    "serviceId": "test.dialog",
    "mode": "keyed",
    "instances": [
        {
            "instance": ADDRESS,
            "members": [
                {"name": "request", "kind": "state", "sequence": 3, "ops": [["r", {"q": "?"}]]},
                {"name": "submit", "kind": "method"},
            ],
        }
    ],
}
UPDATES: list[dict[str, Any]] = [
    {"type": "state", "member": "state", "sequence": 1, "ops": [["s", ["a", 0], 1]]},
    {
        "type": "state",
        "instance": ADDRESS,
        "member": "request",
        "sequence": 4,
        "ops": [["p", ["items"], 0, 1, [{"x": 1}]], ["d", ["gone"]]],
    },
    {"type": "reset", "snapshot": SNAPSHOT},
    {"type": "unavailable"},
    {
        "type": "replaced",
        "snapshot": {
            "members": [{"name": "state", "kind": "state", "sequence": 0, "ops": [["r", []]]}]
        },
    },
    {"type": "spawned", "instance": SNAPSHOT["instances"][0]},
    {"type": "closed", "instance": ADDRESS},
]
