"""Text that cannot be stored: strings holding lone surrogates (issue 24 deliver 5).

JSON escapes (``"\\ud800"``) and ``surrogateescape`` decoding (a file name or a command line
argument that is not UTF-8) both give Python strings holding surrogate code points that no UTF-8
encoder accepts. Every storage record is UTF-8, so such a string is refused where it enters, with
the path of the field that holds it, instead of failing later inside a commit.
"""

from __future__ import annotations

from typing import Any

from chord.json import lone_surrogate

__all__ = ["check_storable", "lone_surrogate"]


def check_storable(value: Any, path: str) -> None:
    """Raise ``ValueError`` naming the field when ``value`` holds text that cannot be stored."""
    problem = lone_surrogate(value, path)
    if problem is not None:
        raise ValueError(
            f"{problem}: not valid Unicode, so it cannot be stored; remove or replace it"
        )
