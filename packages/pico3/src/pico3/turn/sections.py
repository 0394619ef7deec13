"""System sections: named parts of the system prompt, and the draft hooks edit.

A section is a stable ``key`` plus a pure ``render(value) -> str``. Only keys, values and
rendered text are ever stored (in managed ``pi.system`` entries); renderers are code, registered
on the harness with ``h.register_section(section)`` (unique while live, exact idempotent removal,
a revision that model call preparation compares; see :mod:`pico3.registry`).

During preparation the turn loop seeds a :class:`SectionDraft` from the conversation's canonical
sections and hands it to every ``system_instructions`` hook. Handlers ``get``/``set``/``delete``
section values and ``wrap`` a section's rendered text (preparation-local). The hook runner takes
a :meth:`~SectionDraft.snapshot` before each handler and :meth:`~SectionDraft.restore` s it when
the handler raises, so a failing handler leaves no half-applied edits. :func:`freeze` then
renders what was touched (wrappers in order) and keeps the stored text of what was not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from chord.json import JsonError, copy_json, equal_json
from pico3.registry import NamedRegistry, Registration, RegistrySnapshot
from pico3.session_data.section_seed import section_key_problem

__all__ = [
    "SectionDraft",
    "SectionRegistry",
    "SectionState",
    "SystemSection",
    "define_section",
    "freeze",
]


@dataclass(frozen=True, slots=True)
class SystemSection:
    """A section: ``key`` and a pure renderer from its JSON value to prompt text."""

    key: str
    render: Callable[[Any], str]

    def __post_init__(self) -> None:
        problem = section_key_problem(self.key)
        if problem is not None:
            raise ValueError(problem)
        if not callable(self.render):
            raise TypeError(f"section {self.key!r}: render must be callable")


def define_section(key: str, render: Callable[[Any], str]) -> SystemSection:
    """Build a :class:`SystemSection` (validated)."""
    return SystemSection(key, render)


def _check_section(section: SystemSection) -> str:
    if not isinstance(section, SystemSection):
        raise TypeError(f"expected a SystemSection, got {type(section).__name__}")
    return section.key


class SectionRegistry(NamedRegistry[SystemSection]):
    """The harness's sections by key."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("section", _check_section)

    def register(self, item: SystemSection) -> Registration:
        """Register a section; returns its idempotent remover."""
        return super().register(item)

    def snapshot(self) -> RegistrySnapshot[SystemSection]:
        """The sections at the current revision."""
        return super().snapshot()


class SectionState(msgspec.Struct, frozen=True):
    """A section as stored: its value and the text it rendered to."""

    value: Any
    rendered: str


@dataclass(slots=True)
class _DraftState:
    values: dict[str, Any] = field(default_factory=dict)
    wrappers: dict[str, list[Callable[[str], str]]] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)

    def copy(self) -> _DraftState:
        return _DraftState(
            dict(self.values),
            {key: list(value) for key, value in self.wrappers.items()},
            set(self.touched),
        )


def _key(section: SystemSection | str) -> str:
    key = section.key if isinstance(section, SystemSection) else section
    if not isinstance(key, str) or not key:
        raise TypeError(f"expected a SystemSection or a section key, got {section!r}")
    return key


class SectionDraft:
    """The mutable set of section values a preparation builds. Keys keep their first position;
    a new key appends. Values are JSON; ``get`` returns an owned copy."""

    __slots__ = ("_state",)

    def __init__(self, seed: Mapping[str, SectionState] | None = None) -> None:
        self._state = _DraftState()
        for key, state in (seed or {}).items():
            self._state.values[key] = copy_json(state.value)

    def get(self, section: SystemSection | str) -> Any:
        """A copy of the section's value, or ``None`` when absent."""
        value = self._state.values.get(_key(section))
        return None if value is None else copy_json(value)

    def __contains__(self, section: object) -> bool:
        return isinstance(section, (SystemSection, str)) and _key(section) in self._state.values

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._state.values))

    def set(self, section: SystemSection | str, value: Any) -> None:
        """Set a section's value (a validated deep copy)."""
        key = _key(section)
        try:
            stored = copy_json(value, ("sections", key))
        except JsonError as exc:
            raise ValueError(str(exc)) from None
        self._state.values[key] = stored
        self._state.touched.add(key)

    def delete(self, section: SystemSection | str) -> None:
        """Remove a section (and its wrappers)."""
        key = _key(section)
        self._state.values.pop(key, None)
        self._state.wrappers.pop(key, None)
        self._state.touched.add(key)

    def wrap(self, section: SystemSection | str, transform: Callable[[str], str]) -> None:
        """Transform the section's rendered text in this preparation only (in call order)."""
        if not callable(transform):
            raise TypeError("wrap needs a callable transform")
        key = _key(section)
        self._state.wrappers.setdefault(key, []).append(transform)
        self._state.touched.add(key)

    @property
    def touched(self) -> frozenset[str]:
        """Keys changed in this preparation."""
        return frozenset(self._state.touched)

    def snapshot(self) -> object:
        """An opaque copy of the draft, for :meth:`restore`."""
        return self._state.copy()

    def restore(self, saved: object) -> None:
        """Return to a :meth:`snapshot` (a raising handler's edits are undone)."""
        if not isinstance(saved, _DraftState):
            raise TypeError("restore takes a value returned by snapshot()")
        self._state = saved.copy()

    def values(self) -> dict[str, Any]:
        """A plain copy of every section value, in order."""
        return copy_json(self._state.values)


def freeze(
    draft: SectionDraft,
    canonical: Mapping[str, SectionState],
    registry: Mapping[str, SystemSection] | RegistrySnapshot[SystemSection],
) -> dict[str, SectionState]:
    """The desired sections: touched keys are rendered with their registered renderer (then
    wrapped); untouched keys keep their stored state. A touched key whose section is not
    registered cannot be rendered and is left out (it reads as removed)."""
    state = draft._state  # pyright: ignore[reportPrivateUsage]
    desired: dict[str, SectionState] = {}
    for key, value in state.values.items():
        if key not in state.touched:
            previous = canonical.get(key)
            if previous is not None and equal_json(previous.value, value):
                desired[key] = previous
                continue
        section = registry.get(key)
        if section is None:
            continue
        rendered = section.render(copy_json(value))
        if not isinstance(rendered, str):
            raise TypeError(f"section {key!r}: render returned {type(rendered).__name__}, not str")
        for transform in state.wrappers.get(key, ()):
            rendered = transform(rendered)
            if not isinstance(rendered, str):
                raise TypeError(f"section {key!r}: a wrapper returned a non-str")
        desired[key] = SectionState(copy_json(value), rendered)
    return desired
