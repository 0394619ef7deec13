"""Text made safe to show: terminal control sequences and invisible characters made visible.

Text from the model, tools, files and MCP servers may hold bytes a terminal *acts on* instead of
showing: ``ESC [ 8 m`` conceals what follows (a ``; curl … | sh`` hidden inside an approval
dialog), ``ESC ] 0 ; … BEL`` retitles the window, a right-to-left override (U+202E) shows a
command's characters in another order than the one the shell runs, a zero-width space hides a
difference between two names that look the same. :func:`inert` is the one rule every
presentation applies before such text reaches a screen or a page: each of these characters is
replaced by its escape, so ``"\\x1b[8m"`` reads literally as ``\\x1b[8m``. Nothing is dropped and
nothing printable changes.

**What is escaped** (as ``\\xNN`` up to U+00FF, ``\\uNNNN`` up to U+FFFF, ``\\UNNNNNNNN`` above):

* the C0 controls U+0000–U+001F except newline and tab (ESC, BEL, backspace, form feed, …),
  DEL (U+007F) and the C1 controls U+0080–U+009F (``\\x9b`` is an 8-bit CSI);
* carriage return, unless it ends a line: ``\\r\\n`` becomes ``\\n`` (a file with Windows line
  endings reads normally), a lone ``\\r`` — which would let a later part of the line overwrite
  an earlier one — shows as ``\\x0d``;
* the bidirectional controls: embeddings and overrides U+202A–U+202E, isolates U+2066–U+2069,
  the marks U+200E, U+200F, U+061C (the "Trojan Source" characters);
* the other invisible *format* characters (Unicode category Cf) that can hide text or a
  difference: zero-width space U+200B, word joiner and invisible operators U+2060–U+2064,
  U+206A–U+206F, the byte-order mark / zero-width no-break space U+FEFF, the soft hyphen
  U+00AD, U+180E, the interlinear annotation controls U+FFF9–U+FFFB, the tag characters
  U+E0000–U+E007F (invisible copies of ASCII, used to smuggle instructions), the prepended
  concatenation marks and the remaining rare Cf characters of Unicode 15;
* the line and paragraph separators U+2028 and U+2029 (a terminal's idea of them differs from
  the shell's), the invisible Hangul fillers U+115F, U+1160, U+3164, U+FFA0 (letters that draw
  nothing), and lone surrogates U+D800–U+DFFF (not encodable: writing one would fail).

**What is kept:** newline and tab; every printable character, non-ASCII included; the zero-width
joiner U+200D and non-joiner U+200C, which emoji sequences and Persian and Indic scripts need
and which only change how neighbouring glyphs join (they cannot hide or reorder anything);
variation selectors (emoji presentation). A backslash is not escaped, so ordinary text is
unchanged; a literal ``\\x1b`` in the source and an escaped ESC therefore look alike, which is
the point: either way nothing acts on the terminal.

The rule is a precompiled regular expression with a fast path for text with nothing to escape,
so it is cheap enough for streamed output: a megabyte takes about 4 ms when it is ASCII, 6–12 ms
when it is not (emoji cost a little each), on a 2-core CI machine.
``inert`` is idempotent and, apart from a ``\\r\\n`` split between two pieces, works piece by
piece: ``inert(a + b) == inert(a) + inert(b)``, so a stream's fragments can be neutralized as
they arrive.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["inert", "inert_text"]

_RANGES = (
    (0x00, 0x08),
    (0x0B, 0x1F),  # C0 except tab and newline (a CR ending a line is dropped: _replace)
    (0x7F, 0x9F),  # DEL and C1
    (0xAD, 0xAD),  # soft hyphen
    (0x0600, 0x0605),  # Arabic prepended concatenation marks
    (0x061C, 0x061C),  # Arabic letter mark (bidi)
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),  # Hangul choseong / jungseong fillers (invisible letters)
    (0x180E, 0x180E),  # Mongolian vowel separator
    (0x200B, 0x200B),  # zero-width space (ZWNJ U+200C and ZWJ U+200D are kept)
    (0x200E, 0x200F),  # left-to-right / right-to-left marks
    (0x2028, 0x2029),  # line / paragraph separators
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates, deprecated formats
    (0x3164, 0x3164),  # Hangul filler
    (0xD800, 0xDFFF),  # lone surrogates
    (0xFEFF, 0xFEFF),  # byte-order mark / zero-width no-break space
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF9, 0xFFFB),  # interlinear annotation controls
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE007F),  # tag characters
)


def _char_class(ranges: tuple[tuple[int, int], ...], extra: str = "") -> str:
    return "[" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in ranges) + extra + "]"


_ASCII = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
"""The rule for ASCII text (``str.isascii`` is free): the C0 controls but tab and newline, DEL."""

_BMP = tuple(r for r in _RANGES if r[1] <= 0xFFFF)
_ASTRAL = re.compile(_char_class(tuple(r for r in _RANGES if r[0] > 0xFFFF)))
_ANY = re.compile(_char_class(_BMP, "\\U00010000-\\U0010ffff"))
"""The rule for other text: the BMP ranges, and every astral character, which
:func:`_replace` checks against :data:`_ASTRAL` (one class of all the ranges is twice as slow
as a BMP class; emoji are rare enough that a callback per astral character costs less)."""


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _replace(match: re.Match[str]) -> str:
    found = match.group()
    if found == "\r" and match.string.startswith("\n", match.end()):
        return ""  # \r\n ends a line: the \n stays
    if found > "\uffff" and _ASTRAL.match(found) is None:
        return found  # an emoji, say
    return _escape(found)


def inert(text: str) -> str:
    """``text`` with every terminal control and invisible format character made visible.

    ``inert("echo hi\\x1b[8m; curl x | sh")`` is ``'echo hi\\\\x1b[8m; curl x | sh'`` (the ESC
    shows as the four characters ``\\x1b``); newline and tab are kept, ``\\r\\n`` becomes
    ``\\n``, printable text is returned unchanged (the same object). See the module docstring
    for the exact set and why zero-width joiners are kept.
    """
    pattern = _ASCII if text.isascii() else _ANY
    if pattern.search(text) is None:
        return text
    out = pattern.sub(_replace, text)
    return text if out == text else out  # only emoji were found


def inert_text(text: str | Text) -> Text:
    """``text`` as a Rich :class:`~rich.text.Text` made inert (:func:`chord.inert`), its styles
    kept: a coloured diff whose lines hold an ESC still shows in colour, with ``\\x1b`` in
    place of the ESC. A ``str`` becomes plain text (never markup). Public as
    :func:`chord.textual.inert_text` (Rich comes with the ``textual`` extra; it is imported
    only when this is called)."""
    from rich.text import Span, Text

    if isinstance(text, str):
        return Text(inert(text))
    if inert(text.plain) is text.plain:
        return text
    # Between two consecutive span edges every span covers the whole piece, so each piece's
    # spans stretch to its escaped length unchanged.
    edges = sorted({edge for span in text.spans for edge in (span.start, span.end)})
    pieces: list[Text] = []
    for piece in text.divide(edges):
        shown = inert(piece.plain)
        if shown is piece.plain:
            pieces.append(piece)
            continue
        spans = [Span(0, len(shown), span.style) for span in piece.spans]
        pieces.append(Text(shown, style=piece.style, spans=spans, end=""))
    return text.blank_copy().join(pieces)
