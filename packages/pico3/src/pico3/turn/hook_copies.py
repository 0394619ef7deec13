"""The copies of a conversation's messages that ``before_request`` hooks are given, kept between
requests so that a late turn costs what its new messages cost, not what the whole history does.

A long conversation's request re-sends every message, and the hooks may change what they get,
so they get deep copies: copying the whole history for every request, and then comparing it
with the shared messages to find what a hook changed, were the costs of a late turn that grew
with the session. Here every copy is made of containers that notice being changed
(:class:`TrackedDict`, :class:`TrackedList`: ``dict`` and ``list`` whose every mutating method
first marks the copy's message as changed), so :class:`HookCopies` knows without looking which
kept copies still equal their messages:

* a copy is given again while its message is the very same shared object (the transcript cache
  never changes one) and no hook has changed the copy, then or since; a changed copy is
  replaced by a fresh one, so the hooks always get copies equal to the shared messages and
  sharing nothing with them;
* after the chain, every message of the result that is such an unchanged copy, at its own
  place, is the shared message again; anything else (a changed copy, a message a hook made or
  moved) is compared with the shared message at its place by value, as before, and is the
  shared one when equal.

When nothing changed and the shared list grew at its end, both steps are two C-level list
compares (which take the very same object as equal without looking into it) plus the work for
the new messages: the hooks are given the memo's own list, extended (a copy of it was one more
pass over the whole history a request). A hook that keeps that list past its call copies it; a
change to the list itself (a hook reordering it, then or later) is noticed like a change to a
message, and the next call copies everything afresh.

The tracked containers behave as ``dict`` and ``list`` for everything a hook can do with a
message (``isinstance``, JSON and msgpack encoding, equality, ``copy``/``deepcopy`` and
pickling, which give plain containers); a change made behind their methods' backs (calling
``dict.__setitem__(copy, ...)`` directly, or C code that writes a list without its methods, such
as :mod:`heapq`) is not noticed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, SupportsIndex

import msgspec

from chord.json import copy_json
from pico3.models.provider import extend_prefix

__all__ = ["HookCopies", "TrackedDict", "TrackedList", "reshare"]


class _Flag:
    """Raised once any copy of one :class:`HookCopies` changed (the memo then looks at each)."""

    __slots__ = ("changed",)

    def __init__(self) -> None:
        self.changed = False


class _Mark:
    """Whether the copy of one message was changed; shared by all its containers."""

    __slots__ = ("changed", "flag")

    def __init__(self, flag: _Flag) -> None:
        self.changed = False
        self.flag = flag

    def touch(self) -> None:
        if not self.changed:
            self.changed = True
            self.flag.changed = True


class TrackedDict(dict[Any, Any]):
    """A ``dict`` of a hook's message copy that marks the copy changed before any change."""

    __slots__ = ("_mark",)
    _mark: _Mark

    def __setitem__(self, key: Any, value: Any) -> None:
        self._mark.touch()
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self._mark.touch()
        super().__delitem__(key)

    def __ior__(self, other: Any) -> TrackedDict:  # pyright: ignore[reportIncompatibleMethodOverride]
        self._mark.touch()
        return super().__ior__(other)

    def clear(self) -> None:
        self._mark.touch()
        super().clear()

    def pop(self, *args: Any) -> Any:
        self._mark.touch()
        return super().pop(*args)

    def popitem(self) -> tuple[Any, Any]:
        self._mark.touch()
        return super().popitem()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._mark.touch()
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._mark.touch()
        super().update(*args, **kwargs)

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return (dict, (dict(self),))  # copy, deepcopy and pickle give a plain dict


class TrackedList(list[Any]):
    """A ``list`` of a hook's message copy that marks the copy changed before any change."""

    __slots__ = ("_mark",)
    _mark: _Mark

    def __setitem__(self, index: Any, value: Any) -> None:
        self._mark.touch()
        super().__setitem__(index, value)

    def __delitem__(self, index: Any) -> None:
        self._mark.touch()
        super().__delitem__(index)

    def __iadd__(self, other: Iterable[Any]) -> TrackedList:  # pyright: ignore[reportIncompatibleMethodOverride]
        self._mark.touch()
        return super().__iadd__(other)

    def __imul__(self, count: SupportsIndex) -> TrackedList:
        self._mark.touch()
        return super().__imul__(count)

    def append(self, value: Any) -> None:
        self._mark.touch()
        super().append(value)

    def extend(self, values: Iterable[Any]) -> None:
        self._mark.touch()
        super().extend(values)

    def insert(self, index: SupportsIndex, value: Any) -> None:
        self._mark.touch()
        super().insert(index, value)

    def pop(self, index: SupportsIndex = -1) -> Any:
        self._mark.touch()
        return super().pop(index)

    def remove(self, value: Any) -> None:
        self._mark.touch()
        super().remove(value)

    def clear(self) -> None:
        self._mark.touch()
        super().clear()

    def reverse(self) -> None:
        self._mark.touch()
        super().reverse()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._mark.touch()
        super().sort(*args, **kwargs)

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return (list, (list(self),))  # copy, deepcopy and pickle give a plain list


def _track(value: Any, mark: _Mark) -> Any:
    """``value`` (a fresh deep copy) with its dicts and lists tracked by ``mark``."""
    kind = type(value)
    if kind is dict:
        out = TrackedDict({key: _track(item, mark) for key, item in value.items()})
        out._mark = mark
        return out
    if kind is list:
        out = TrackedList([_track(item, mark) for item in value])
        out._mark = mark
        return out
    return value


class HookCopies:
    """The tracked deep copies of one conversation's shared messages that its last
    ``before_request`` chain was given, kept to be given again (see the module doc). It holds
    one copy of the history per conversation."""

    __slots__ = ("_copies", "_flag", "_marks", "_order", "_originals")

    def __init__(self) -> None:
        self._originals: list[Any] = []
        self._flag = _Flag()
        self._order = _Mark(self._flag)
        self._copies: TrackedList = self._given([])
        self._marks: list[_Mark] = []

    def _given(self, copies: list[Any]) -> TrackedList:
        """``copies`` as the list the hooks are given: a change to the list itself (a hook
        reordering it, then or later) marks a new :attr:`_order`, after which no kept copy is
        given again by its place."""
        self._order = _Mark(self._flag)
        given = TrackedList(copies)
        given._mark = self._order
        return given

    def copies(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Deep copies of ``messages``, the kept ones where they still hold; they are kept for
        the next call. The list is the memo's own (a copy of it was, at turn 2,000, one more
        pass over the whole history a request): the next call gives it again, extended, so a
        hook that keeps it past its call copies it (a change a hook makes to it is noticed
        like a change to a message)."""
        originals, kept, marks = self._originals, self._copies, self._marks
        known = len(originals)
        if not self._flag.changed and extend_prefix(originals, messages):
            # the usual case: nothing changed, the history grew at its end (compared by
            # identity first, in C, without copying the history)
            # (a message equal to its original but another object keeps the original here:
            # its copy equals both, and the next call compares it by value again)
            try:
                fresh = self._fresh(originals[known:])
            except BaseException:
                del originals[known:]
                raise
            list.extend(kept, (copy for copy, _ in fresh))  # the memo's own change: untracked
            marks.extend(mark for _, mark in fresh)
            return kept
        in_place = not self._order.changed  # a list a hook changed lines up with nothing
        self._flag.changed = False  # the changed copies are dropped now (their marks stay set)
        out: list[Any] = []
        out_marks: list[_Mark | None] = []
        missing: list[int] = []
        for index, message in enumerate(messages):
            if (
                in_place
                and index < known
                and originals[index] is message
                and not marks[index].changed
            ):
                out.append(kept[index])
                out_marks.append(marks[index])
                continue
            out.append(None)
            out_marks.append(None)
            missing.append(index)
        fresh = self._fresh([messages[index] for index in missing])
        for index, (copy, mark) in zip(missing, fresh, strict=True):
            out[index] = copy
            out_marks[index] = mark
        self._originals = list(messages)
        self._copies = self._given(out)
        self._marks = out_marks  # pyright: ignore[reportAttributeAccessIssue]  (all filled)
        return self._copies

    def unchanged(self, copy: Any, index: int) -> bool:
        """Whether ``copy`` is the kept copy of the message at ``index`` and still equals it."""
        return (
            not self._order.changed
            and index < len(self._copies)
            and self._copies[index] is copy
            and not self._marks[index].changed
        )

    def all_unchanged(self, result: list[Any]) -> bool:
        """Whether no kept copy changed and ``result`` equals the kept copies, in order (so each
        of its messages equals the shared one at its place; one C-level list compare, by
        identity first)."""
        return not self._flag.changed and result == self._copies

    def _fresh(self, messages: list[Any]) -> list[tuple[Any, _Mark]]:
        flag = self._flag
        out: list[tuple[Any, _Mark]] = []
        for copy in _deep_copy(messages) if messages else []:
            mark = _Mark(flag)
            out.append((_track(copy, mark), mark))
        return out


def reshare(
    result: list[Any], shared: list[dict[str, Any]], memo: HookCopies
) -> list[dict[str, Any]]:
    """A copy of ``result`` (the chain's messages) with each message equal to the one at its
    place in ``shared`` replaced by that shared one: an unchanged kept copy at its own place
    without looking at it, anything else compared by value. When every message is an unchanged
    kept copy at its place, that is ``shared`` itself (read-only, as the caller's messages are
    without hooks), not a copy of it."""
    if memo.all_unchanged(result):
        return shared
    result = list(result)
    for index, (message, original) in enumerate(zip(result, shared, strict=False)):
        if message is original:
            continue
        if memo.unchanged(message, index) or message == original:
            result[index] = original
    return result


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder()


def _deep_copy(messages: list[Any]) -> list[Any]:
    """A deep copy of transcript messages, made in C (a msgpack round trip: several times
    faster than walking them in Python, and the messages were checked as strict JSON when they
    were committed); anything msgpack does not take goes through
    :func:`chord.json.copy_json`, which names the problem."""
    try:
        return _DECODER.decode(_ENCODER.encode(messages))
    except (TypeError, ValueError, OverflowError, msgspec.MsgspecError):
        return copy_json(messages)
