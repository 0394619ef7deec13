"""UTF-16 code units, the string unit of the wire.

A Python ``str`` is a sequence of code points; a JavaScript string is a sequence of UTF-16 code
units. The two agree except for *astral* characters (above U+FFFF, e.g. most emoji), which are
one code point but two code units (a surrogate pair). The ``t`` op counts code units on the wire,
so a Python peer converts at the edge:

>>> utf16_len("a😀")
3
>>> units_to_index("a😀b", 3)   # three units = "a" and the emoji = two code points
2
>>> units_to_index("a😀b", 2)   # would cut the emoji in half
Traceback (most recent call last):
...
ValueError: 2 UTF-16 units would split a surrogate pair at code point 1

Lone surrogates (``"\\ud800"``) are single code points and single code units on both sides, so
they need no special case.
"""

from __future__ import annotations

import re

__all__ = ["index_to_units", "units_to_index", "utf16_len"]

_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def utf16_len(text: str) -> int:
    """The length of ``text`` in UTF-16 code units (what JavaScript's ``.length`` reports)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def index_to_units(text: str, index: int) -> int:
    """The number of UTF-16 code units in ``text[:index]``."""
    return utf16_len(text[:index])


def units_to_index(text: str, units: int) -> int:
    """The code point index that is ``units`` UTF-16 code units into ``text``.

    Raises ``ValueError`` when ``units`` is negative, past the end of ``text``, or falls between
    the two halves of a surrogate pair. Costs O(units), independent of the rest of ``text``.
    """
    if units < 0:
        raise ValueError(f"negative UTF-16 count {units}")
    if text.isascii():
        if units > len(text):
            raise ValueError(f"{units} UTF-16 units is past the end of a {len(text)}-unit string")
        return units
    # Every code point is at least one unit, so the answer lies within text[:units].
    pairs = 0  # astral characters seen so far, each one unit wider than it is long
    for match in _ASTRAL.finditer(text, 0, units):
        start = match.start() + pairs  # unit offset where this astral character begins
        if start >= units:
            break
        if start + 1 == units:
            raise ValueError(
                f"{units} UTF-16 units would split a surrogate pair at code point {match.start()}"
            )
        pairs += 1
    index = units - pairs
    if index > len(text):
        raise ValueError(f"{units} UTF-16 units is past the end of a {utf16_len(text)}-unit string")
    return index
