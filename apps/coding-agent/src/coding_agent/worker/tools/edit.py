"""The ``edit`` tool: exact text replacements, all matched against the original file.

Arguments: ``path`` and ``edits: [{oldText, newText}, ...]``. The older single form
(``oldText``/``newText`` beside ``path``) is accepted too, and so is ``edits`` sent as a JSON
string, because some models do that.

How a call is applied (pi's pipeline, with better mismatch errors):

1. The file is read as UTF-8. A byte order mark is set aside, the line ending is detected
   (CRLF if the first line ends in ``\\r\\n``) and the text is normalised to ``\\n``; the edits'
   texts are normalised the same way.
2. Every ``oldText`` is looked up in the *original* text and must occur exactly once. When the
   exact text is absent, a normalised comparison is tried (:func:`normalize_for_match`: NFKC,
   trailing whitespace dropped per line, curly quotes, Unicode dashes and special spaces made
   ASCII). A fuzzy match rewrites only the lines it touches, in their normalised form; every other
   line keeps its bytes.
3. Matched regions must not overlap. No edit may leave the file unchanged.
4. Only then is the file written, once, with the BOM and the original line ending restored. Any
   error leaves the file untouched.

Read before edit: with a :class:`~.files.ReadLedger` in the context, a file that was not read
in this conversation (or written by the agent), or that changed on disk since, is refused with
a message telling the model to read it first (:func:`~.files.check_fresh`); the edited file
counts as read afterwards.

Where the bytes go: the path is resolved once to its real path, which must still be the one the
approval checked (``ToolContext.checked_target``), and the file is replaced there without
following a symlink on the way (:mod:`.exact`); a folder swapped for a symlink meanwhile fails
the call and nothing is written.

Errors keep pi's wording, which models know, and name the edit (``edits[1]``). When an
``oldText`` is not found the error shows the closest region of the file with line numbers, so
the model can correct itself instead of looping. The result's ``details`` carry a unified
``patch``, a numbered display ``diff`` and ``first_changed_line``.

With an editor's buffers in the context (``ToolContext.editor``, ``coding-agent acp``), the
edits apply to the editor's text (unsaved changes included), freshness is checked against it, and
the result goes back to the editor (to the disk when the editor reads but does not write).
"""

from __future__ import annotations

import itertools
import json
import unicodedata
from typing import Any

import msgspec

from .exact import TargetChanged
from .files import (
    changed_error,
    check_fresh,
    check_fresh_text,
    editor_read,
    put_content,
    read_whole,
    real_target,
)
from .spec import (
    OnUpdate,
    ToolArgumentError,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
    resolve_path,
    text_result,
    validate_args,
)
from .truncate import split_lines

__all__ = [
    "EDIT_TOOL",
    "Edit",
    "apply_edits",
    "display_diff",
    "normalize_for_match",
    "unified_patch",
]

_EDIT_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "oldText": {
            "type": "string",
            "description": "Exact text to replace; must occur exactly once in the original file",
        },
        "newText": {"type": "string", "description": "Replacement text"},
    },
    "required": ["oldText", "newText"],
    "additionalProperties": False,
}

EDIT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "Path to the file to edit (relative or absolute)",
        },
        "edits": {
            "type": ["array", "string"],
            "items": _EDIT_ITEM,
            "minItems": 1,
            "description": (
                "Replacements, each matched against the original file (not after earlier edits). "
                "Regions must not overlap."
            ),
        },
        "oldText": {"type": "string", "description": "Legacy single-edit form: text to replace"},
        "newText": {"type": "string", "description": "Legacy single-edit form: replacement"},
    },
    "required": ["path"],
    "additionalProperties": False,
}


class Edit(msgspec.Struct, frozen=True):
    """One replacement: ``old_text`` (must occur once) becomes ``new_text``."""

    old_text: str
    new_text: str


class _Span(msgspec.Struct, frozen=True):
    index: int
    start: int
    end: int
    replacement: str


_QUOTES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u00a0": " ",
        "\u202f": " ",
        "\u205f": " ",
        "\u3000": " ",
        **{chr(code): " " for code in range(0x2002, 0x200B)},
    }
)


def _normalize_line(line: str) -> str:
    return unicodedata.normalize("NFKC", line).rstrip().translate(_QUOTES)


def normalize_for_match(text: str) -> str:
    """The forgiving form used when an exact match fails; keeps the number of lines."""
    return "\n".join(_normalize_line(line) for line in text.split("\n"))


def _occurrences(haystack: str, needle: str) -> list[int]:
    found: list[int] = []
    at = haystack.find(needle)
    while at != -1:
        found.append(at)
        at = haystack.find(needle, at + 1)
    return found


def _line_starts(text: str) -> list[int]:
    starts = [0]
    at = text.find("\n")
    while at != -1:
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts


def _line_of(starts: list[int], offset: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _closest_region(content: str, old_text: str) -> str:
    import difflib  # lazy: start-up time (only an edit's diff or a failed match needs it)

    lines = content.split("\n")
    old_lines = old_text.split("\n")
    probe = next((line.strip() for line in old_lines if line.strip()), "")
    best, best_score = -1, 0.0
    if probe:
        matcher = difflib.SequenceMatcher(autojunk=False)
        matcher.set_seq2(probe)
        for number, line in enumerate(lines[:20000]):
            candidate = line.strip()
            if not candidate:
                continue
            matcher.set_seq1(candidate)
            if matcher.real_quick_ratio() <= best_score or matcher.quick_ratio() <= best_score:
                continue
            score = matcher.ratio()
            if score > best_score:
                best, best_score = number, score
    if best < 0 or best_score < 0.5:
        if not content:
            return "The file is empty."
        preview = "\n".join(f"  {n + 1}: {line}" for n, line in enumerate(lines[:5]))
        return f"File starts with:\n{preview}"
    first = max(0, best - 2)
    last = min(len(lines), best + len(old_lines) + 2)
    window = "\n".join(f"  {n + 1}: {lines[n]}" for n in range(first, last))
    return f"Closest match is around line {best + 1}:\n{window}"


def _label(index: int, total: int, single: str, many: str) -> str:
    return single if total == 1 else many.format(index=index)


def _match(
    content: str, fuzzy: str | None, edit: Edit, index: int, total: int, shown: str
) -> _Span:
    exact = _occurrences(content, edit.old_text)
    if len(exact) == 1:
        return _Span(index, exact[0], exact[0] + len(edit.old_text), edit.new_text)
    if len(exact) > 1:
        raise _ambiguous(len(exact), index, total, shown)
    fuzzy_content = fuzzy if fuzzy is not None else normalize_for_match(content)
    needle = normalize_for_match(edit.old_text)
    found = _occurrences(fuzzy_content, needle) if needle.strip() else []
    if len(found) > 1:
        raise _ambiguous(len(found), index, total, shown)
    if not found:
        what = _label(index, total, "the exact text", "edits[{index}]")
        raise ToolError(
            f"Could not find {what} in {shown}. The old text must match exactly including all "
            f"whitespace and newlines.\n{_closest_region(content, edit.old_text)}",
            {"edit": index},
        )
    # A fuzzy hit: rewrite the touched lines in their normalised form, keep all others.
    start, end = found[0], found[0] + len(needle)
    fuzzy_starts = _line_starts(fuzzy_content)
    original_starts = _line_starts(content)
    first = _line_of(fuzzy_starts, start)
    last = _line_of(fuzzy_starts, max(start, end - 1))
    # Whole lines, newline included: both texts have the same lines, so the indices agree.
    fuzzy_end = fuzzy_starts[last + 1] if last + 1 < len(fuzzy_starts) else len(fuzzy_content)
    original_end = original_starts[last + 1] if last + 1 < len(original_starts) else len(content)
    replacement = (
        fuzzy_content[fuzzy_starts[first] : start] + edit.new_text + fuzzy_content[end:fuzzy_end]
    )
    return _Span(index, original_starts[first], original_end, replacement)


def _ambiguous(count: int, index: int, total: int, shown: str) -> ToolError:
    if total == 1:
        return ToolError(
            f"Found {count} occurrences of the text in {shown}. The text must be unique. "
            "Please provide more context to make it unique.",
            {"edit": index, "occurrences": count},
        )
    return ToolError(
        f"Found {count} occurrences of edits[{index}] in {shown}. Each oldText must be unique. "
        "Please provide more context to make it unique.",
        {"edit": index, "occurrences": count},
    )


def apply_edits(content: str, edits: list[Edit], shown: str) -> str:
    """Apply ``edits`` to LF-normalised ``content`` or raise :class:`ToolError`; pure function."""
    total = len(edits)
    edits = [
        Edit(e.old_text.replace("\r\n", "\n"), e.new_text.replace("\r\n", "\n")) for e in edits
    ]
    for index, edit in enumerate(edits):
        if not edit.old_text:
            what = _label(index, total, "oldText", "edits[{index}].oldText")
            raise ToolError(f"{what} must not be empty in {shown}.", {"edit": index})
    fuzzy: str | None = None
    spans: list[_Span] = []
    for index, edit in enumerate(edits):
        if fuzzy is None and edit.old_text not in content:
            fuzzy = normalize_for_match(content)
        spans.append(_match(content, fuzzy, edit, index, total, shown))
    spans.sort(key=lambda span: (span.start, span.end))
    for before, after in itertools.pairwise(spans):
        if before.end > after.start:
            raise ToolError(
                f"edits[{before.index}] and edits[{after.index}] overlap in {shown}. "
                "Merge them into one edit or target disjoint regions.",
                {"edits": [before.index, after.index]},
            )
    pieces: list[str] = []
    cursor = 0
    for span in spans:
        pieces.append(content[cursor : span.start])
        pieces.append(span.replacement)
        cursor = span.end
    pieces.append(content[cursor:])
    result = "".join(pieces)
    if result == content:
        if total == 1:
            raise ToolError(
                f"No changes made to {shown}. The replacement produced identical content. This "
                "might indicate an issue with special characters or the text not existing as expected."
            )
        raise ToolError(f"No changes made to {shown}. The replacements produced identical content.")
    return result


def unified_patch(shown: str, before: str, after: str, context: int = 4) -> str:
    """A standard unified diff of two LF texts (``a/`` and ``b/`` headers)."""
    import difflib  # lazy: start-up time (only an edit's diff or a failed match needs it)

    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{shown}",
            tofile=f"b/{shown}",
            n=context,
        )
    )


def display_diff(before: str, after: str, context: int = 4) -> tuple[str, int | None]:
    """A numbered diff for people (``-12 old``, ``+12 new``, `` 13 same``) and the first changed
    line of the new text."""
    import difflib  # lazy: start-up time (only an edit's diff or a failed match needs it)

    old_lines, new_lines = split_lines(before), split_lines(after)
    width = len(str(max(len(old_lines), len(new_lines))))
    out: list[str] = []
    first_changed: int | None = None
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for number, group in enumerate(matcher.get_grouped_opcodes(context)):
        if number:
            out.append(f" {'':>{width}} ...")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(f" {i + 1:>{width}} {old_lines[i]}" for i in range(i1, i2))
                continue
            if first_changed is None:
                first_changed = j1 + 1
            out.extend(f"-{i + 1:>{width}} {old_lines[i]}" for i in range(i1, i2))
            out.extend(f"+{j + 1:>{width}} {new_lines[j]}" for j in range(j1, j2))
    return "\n".join(out), first_changed


_EDITS_ONLY: ToolSpec  # set below, once the handler exists


def _edits_from(args: dict[str, Any]) -> list[Edit]:
    raw = args.get("edits")
    legacy = "oldText" in args or "newText" in args
    if raw is not None and legacy:
        raise ToolArgumentError(
            "edit", ["arguments: give either edits or oldText/newText, not both"]
        )
    if raw is None:
        if "oldText" not in args or "newText" not in args:
            missing = "oldText" if "oldText" not in args else "newText"
            if not legacy:
                raise ToolArgumentError("edit", ["arguments.edits: is required"])
            raise ToolArgumentError("edit", [f"arguments.{missing}: is required"])
        return [Edit(args["oldText"], args["newText"])]
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as error:
            raise ToolArgumentError(
                "edit", [f"arguments.edits: not a JSON array of edits: {error}"]
            ) from None
        validate_args(_EDITS_ONLY, {"edits": raw})
    return [Edit(item["oldText"], item["newText"]) for item in raw]


async def _edit(args: dict[str, Any], tools: ToolContext, on_update: OnUpdate | None) -> ToolResult:
    shown: str = args["path"]
    edits = _edits_from(args)
    spelled = resolve_path(shown, tools.cwd)
    path = real_target(spelled, shown, tools.checked_target)  # resolved once, used throughout
    async with tools.lock_for(path):
        data, info = await read_whole(path, shown, verb="write")
        buffer = await editor_read(tools.editor, path)
        if buffer is not None:  # the editor's text, unsaved changes included
            data = buffer
            await check_fresh_text(tools.reads, path, shown, data)
        else:
            await check_fresh(tools.reads, path, shown, info, data=data)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"Cannot edit {shown}: it is not valid UTF-8 text") from None
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        text = text[len(bom) :]
        first_lf = text.find("\n")
        crlf = first_lf > 0 and text[first_lf - 1] == "\r"
        before = text.replace("\r\n", "\n")
        after = apply_edits(before, edits, shown)
        written = after.replace("\n", "\r\n") if crlf else after
        new_data = (bom + written).encode("utf-8", errors="replace")
        await tools.about_to_write(path, new_data, shown)
        try:
            await put_content(tools.editor, tools.reads, path, new_data)
        except TargetChanged as error:
            raise changed_error(shown, error) from None
        except OSError as error:
            raise ToolError(f"Cannot write {shown}: {error.strerror or error}") from None
    diff, first_changed = display_diff(before, after)
    count = len(edits)
    return text_result(
        f"Successfully replaced {count} block{'s' if count != 1 else ''} in {shown}.",
        {
            "path": str(spelled),
            "diff": diff,
            "patch": unified_patch(shown, before, after),
            "first_changed_line": first_changed,
            "line_ending": "crlf" if crlf else "lf",
            "bom": bool(bom),
        },
    )


EDIT_TOOL = ToolSpec(
    name="edit",
    description=(
        "Edit a file with exact text replacements. Each edits[i].oldText must match a unique, "
        "non-overlapping region of the original file exactly, including whitespace and newlines; "
        "all edits are matched against the file as it was before this call. Use several edits in "
        "one call for separate changes in the same file."
    ),
    parameters=EDIT_PARAMETERS,
    handler=_edit,
)

_EDITS_ONLY = ToolSpec(
    name="edit",
    description="The edit tool's edits argument alone (checks edits sent as a JSON string).",
    parameters={
        "type": "object",
        "properties": {"edits": {"type": "array", "items": _EDIT_ITEM, "minItems": 1}},
    },
    handler=_edit,
)
