"""Text that cannot be stored: strings holding lone surrogates (issue 24 deliver 5).

JSON escapes (``"\\ud800"``) and ``surrogateescape`` decoding (a file name or a command line
argument that is not UTF-8) both give Python strings holding surrogate code points that no UTF-8
encoder accepts. Every storage record is UTF-8, so such a string is refused where it enters, with
the path of the field that holds it, instead of failing later inside a commit.
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_storable", "lone_surrogate"]


def _describe(text: str) -> str:
    for index, char in enumerate(text):
        if 0xD800 <= ord(char) <= 0xDFFF:
            return f"a lone surrogate (\\u{ord(char):04x}) at character {index}"
    return "text that is not valid Unicode"  # pragma: no cover - encode() said otherwise


def lone_surrogate(value: Any, path: str = "") -> str | None:
    """Where ``value`` (JSON-like: dicts, lists, strings, scalars) holds a string UTF-8 cannot
    encode, as ``"<path>: a lone surrogate (\\ud800) at character 3"``; ``None`` when it holds
    none. Keys are checked too."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        kind = type(item)
        if kind is str:
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return f"{where or 'the value'}: {_describe(item)}"
        elif kind is dict or isinstance(item, dict):
            for key, member in item.items():
                if isinstance(key, str) and not key.isascii():
                    try:
                        key.encode("utf-8")
                    except UnicodeEncodeError:
                        return f"{where or 'the value'}: a key holding {_describe(key)}"
                stack.append((member, f"{where}.{key}" if where else str(key)))
        elif kind is list or kind is tuple or isinstance(item, list | tuple):
            stack.extend((member, f"{where}[{index}]") for index, member in enumerate(item))
        elif isinstance(item, str):
            stack.append((str(item), where))
    return None


def check_storable(value: Any, path: str) -> None:
    """Raise ``ValueError`` naming the field when ``value`` holds text that cannot be stored."""
    problem = lone_surrogate(value, path)
    if problem is not None:
        raise ValueError(
            f"{problem}: not valid Unicode, so it cannot be stored; remove or replace it"
        )
