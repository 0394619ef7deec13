"""Which edits make the machine run code: the matcher of the harness service ``guarded_paths``.

The list itself is not here: the application owns it (the coding agent's
``coding_agent/settings/guarded_paths.py``, one entry per file or folder with the reason a dialog shows)
and hands it to the approval feature as the harness service :data:`GUARDED_PATHS_SERVICE`, a list
of ``{"pattern": ..., "reason": ...}``. A pattern is *relative* (``.git/``, ``.mcp.json``:
matched at any depth of the target's absolute path, a trailing ``/`` meaning the folder and
everything in it)
or *absolute* (that file or folder and everything in it). :func:`guarded_reason` answers "why
does writing this target need a person's yes?"; :func:`facets_approval.session.confinement` calls
it as the last step of every edit's decision, after the mode, the ``autoAllow`` list and any
rule, so it can only turn "run" into "ask".
"""

from __future__ import annotations

import os
import stat
import unicodedata
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import Any, cast

__all__ = [
    "CHECKED_TARGETS_SERVICE",
    "GUARDED_PATHS_SERVICE",
    "guarded_reason",
    "leave_checked",
    "path_within",
]

GUARDED_PATHS_SERVICE = "guarded_paths"
"""The harness service listing the files whose change makes the machine run code (the app
provides it: ``[{"pattern": ".git/", "reason": "git runs ..."}, ...]``)."""


CHECKED_TARGETS_SERVICE = "checked_targets"
"""The harness service (a mutable mapping the host provides) where the approval hook leaves the
real path it checked an edit's target (or a read-only call's ``path``) as, under
``"<conversationId>:<callId>"``: the host's file tools take it and write or read exactly there
or fail, so a symlink swapped in on the way after the decision cannot redirect the call
(:func:`leave_checked`). Absent: nothing is left."""


def leave_checked(services: Mapping[str, Any], key: str, real: str | None) -> Callable[[], None]:
    """Leave ``real`` (``None``: nothing known) under ``key`` in the host's
    :data:`CHECKED_TARGETS_SERVICE` mapping, when it serves one; returns how to take it back
    (the call was blocked after all)."""
    found = services.get(CHECKED_TARGETS_SERVICE)
    if not isinstance(found, MutableMapping):
        return lambda: None
    targets = cast("MutableMapping[str, str]", found)
    if real is None:
        targets.pop(key, None)
        return lambda: None
    targets[key] = real

    def take_back() -> None:
        if targets.get(key) == real:
            del targets[key]

    return take_back


def path_within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or inside it (both absolute, spelled alike)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _fold(name: str) -> str:
    """A path component as a case-insensitive file system (macOS, Windows) compares it:
    Unicode-normalised, case-folded, without the trailing dots and blanks NTFS ignores."""
    return unicodedata.normalize("NFC", name).casefold().rstrip(" .") or name


def _parts(path: str) -> list[str]:
    return [_fold(part) for part in path.replace(os.sep, "/").split("/") if part]


def _pattern_hit(parts: Sequence[str], pattern: str) -> bool:
    """Whether a relative ``pattern`` (``.mcp.json``, ``.git/``: a folder and what is in it)
    occurs in ``parts``, a path's folded components, at any depth."""
    folder = pattern.endswith("/")
    want = _parts(pattern)
    size = len(want)
    if not size:
        return False
    return any(
        list(parts[start : start + size]) == want and (folder or start + size == len(parts))
        for start in range(len(parts) - size + 1)
    )


def _entries(guarded: Iterable[object]) -> list[tuple[str, str]]:
    """``(pattern, reason)`` of every usable entry: ``{"pattern", "reason"}`` mappings (the
    harness service ``guarded_paths``) or bare absolute paths (the agent's own files)."""
    found: list[tuple[str, str]] = []
    for entry in guarded:
        if isinstance(entry, str | os.PathLike):
            found.append((os.fspath(entry), _OWN_FILES))  # pyright: ignore[reportUnknownArgumentType]
        elif isinstance(entry, Mapping):
            pattern, reason = entry.get("pattern"), entry.get("reason")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if isinstance(pattern, str) and pattern:
                found.append(
                    (pattern, reason if isinstance(reason, str) and reason else _OWN_FILES)
                )
    return found


_OWN_FILES = "it changes the agent's own configuration, trust or state"


def _hard_linked(path: str) -> bool:
    try:
        info = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_nlink > 1


def guarded_reason(
    target: str, workspace: str, guarded: Iterable[object], *, real: str | None = None
) -> str | None:
    """Why writing ``target`` makes the machine run code (it must ask), or ``None``.

    ``guarded`` is the harness service ``guarded_paths`` (the app owns the list and each
    reason); ``target`` is resolved against ``workspace``. A relative pattern is matched at any
    depth of the absolute path (a project that itself lives in a ``.git`` or ``.claude`` folder
    is inside one too); an absolute one covers that file or folder. Both the path as written
    (normalised: a symlinked ``.git`` still reads ``.git/config``) and its real path (``hooks ->
    .git/hooks``) are checked, case-insensitively; a regular file with other hard links asks
    too, since a write changes every name of it. ``real`` is the target's real path when the
    caller resolved it already (it is then the one checked: a resolution done once)."""
    base = os.path.abspath(os.path.expanduser(workspace))
    spelled = os.path.normpath(os.path.join(base, target))  # an absolute target stays itself
    if real is None:
        real = os.path.realpath(spelled)
    for pattern, reason in _entries(guarded):
        place = os.path.expanduser(pattern)
        for path in (spelled, real):
            if os.path.isabs(place):
                hit = any(
                    path_within("/".join(_parts(path)), "/".join(_parts(where)))
                    for where in {os.path.normpath(place), os.path.realpath(place)}
                )
            else:
                hit = _pattern_hit(_parts(path), pattern)
            if hit:
                return f"{reason} ({real})"
    if _hard_linked(real):
        return f"the file has other hard links, and a write changes every one of them ({real})"
    return None
