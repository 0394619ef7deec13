"""Section seeds: the system sections a conversation starts from (docs/design/harness.md#section-seeds).

A conversation's system prompt is made of *sections* (see :mod:`pico3.turn.sections`): each a
``key``, a JSON ``value`` and the ``rendered`` text the model is shown. Preparation folds them
from the newest managed ``pi.system`` entry in context (the *canonical section fold*). A new
conversation (a fork, a subagent) may need different sections from the very first request, say a
reviewer persona for a forked critique, without code running in between: that is what the
optional, private ``sections`` field of its record is for. It is a list of
:class:`~pico3.storage.records.SectionSeed` ``{key, value, rendered}``, exactly what the fold
holds per key, and it stands in for the fold until the conversation writes a managed
``pi.system`` entry of its own.

:func:`check_section_seed` is the gate every creation surface passes: it accepts
:class:`SectionSeed` records or plain ``{"key", "value", "rendered"}`` mappings, checks every
field and returns private deep copies, or raises :class:`SectionSeedRejected` naming the field
at fault (``sections[1].value: ...``) before anything is written.

Keys follow the rule of registered sections (:data:`SECTION_KEY`, no ``pi.`` prefix) but need
not be registered: the seed carries its rendered text, so an unregistered key is shown as
seeded and simply cannot be re-rendered by a hook.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from chord.json import JsonError, copy_json
from pico3.storage.records import SectionSeed

__all__ = [
    "SECTION_KEY",
    "SectionSeed",
    "SectionSeedRejected",
    "check_section_seed",
    "section_key_problem",
]

SECTION_KEY = re.compile(r"^[a-z][a-z0-9_.-]*$", re.IGNORECASE)
"""The shape of a section key: a letter, then letters, digits, ``_``, ``.`` or ``-``."""

_FIELDS = ("key", "value", "rendered")


class SectionSeedRejected(ValueError):
    """A section seed was refused; the message names the field. Nothing was created."""


def section_key_problem(key: object) -> str | None:
    """Why ``key`` cannot name a section (``None`` when it can)."""
    if not isinstance(key, str) or not SECTION_KEY.match(key):
        return f"section key {key!r} must match {SECTION_KEY.pattern}"
    if key.lower().startswith("pi."):
        return f"section key {key!r} is reserved: 'pi.' belongs to core"
    return None


def _fields(item: object, where: str) -> tuple[object, object, object]:
    if isinstance(item, SectionSeed):
        return item.key, item.value, item.rendered
    if not isinstance(item, Mapping):
        raise SectionSeedRejected(
            f"{where}: must be a SectionSeed or an object {{key, value, rendered}}, "
            f"got {type(item).__name__}"
        )
    fields: Mapping[Any, Any] = item  # pyright: ignore[reportUnknownVariableType]
    unknown = sorted(repr(name) for name in fields if name not in _FIELDS)
    if unknown:
        raise SectionSeedRejected(f"{where}: unknown fields {', '.join(unknown)}")
    for name in _FIELDS:
        if name not in fields:  # presence, not truthiness: a null value is a value
            raise SectionSeedRejected(f"{where}.{name}: missing")
    return fields["key"], fields["value"], fields["rendered"]


def check_section_seed(sections: object) -> list[SectionSeed]:
    """Validate a section seed and return a private deep copy of it, in order.

    ``sections`` is a list (or tuple) of :class:`SectionSeed` or ``{key, value, rendered}``
    mappings. Keys must be section-shaped (:func:`section_key_problem`) and unique, values
    strict JSON, rendered texts ``str``. Raises :class:`SectionSeedRejected` naming the field.
    """
    if not isinstance(sections, (list, tuple)):
        raise SectionSeedRejected(
            f"sections: must be a list of {{key, value, rendered}}, got {type(sections).__name__}"
        )
    out: list[SectionSeed] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(sections):  # pyright: ignore[reportUnknownArgumentType]
        where = f"sections[{index}]"
        key, value, rendered = _fields(item, where)
        problem = section_key_problem(key)
        if problem is not None:
            raise SectionSeedRejected(f"{where}.key: {problem}")
        assert isinstance(key, str)
        if key in seen:
            raise SectionSeedRejected(
                f"{where}.key: {key!r} repeats sections[{seen[key]}] (one seed per key)"
            )
        seen[key] = index
        try:
            copied = copy_json(value, ("sections", index, "value"))
        except JsonError as exc:
            raise SectionSeedRejected(f"{where}.value: {exc}") from None
        except RecursionError:
            raise SectionSeedRejected(f"{where}.value: nests too deeply") from None
        if type(rendered) is not str:
            raise SectionSeedRejected(
                f"{where}.rendered: must be a str, got {type(rendered).__name__}"
            )
        out.append(SectionSeed(key=key, value=copied, rendered=rendered))
    return out
