"""Configuration keys: where each lives, its default, and what a valid value is.

Config is split by document. *Rewindable* keys (``model``, ``thinkingLevel``, ...) live in the
conversation's rewindable document, so a fork sees them as they were at the fork point;
*sticky* keys (``retry``, ``steeringMode``, ``followUpMode``) live in the present-only sticky
document.

Only explicit values are stored. A read resolves by key *presence*: a stored value wins (even
``None`` for a custom key), otherwise the declared default; ``model`` has no default and is
simply absent when unset. :func:`resolve_config` is that rule in one place.

Core values are validated exactly (:class:`ConfigRejected` names the key and the problem);
custom keys only need to be strict JSON.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec

from chord.json import JsonError, copy_json

__all__ = [
    "ABSENT",
    "CORE_CONFIG",
    "ConfigKey",
    "ConfigRejected",
    "DocKind",
    "resolve_config",
]

DocKind = Literal["rewindable", "sticky"]


class _Absent:
    """The marker for "no default": the key is absent from resolved config until set."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


class ConfigRejected(ValueError):
    """A config value or key was refused; nothing was written."""


class ConfigKey(msgspec.Struct, frozen=True):
    """One declared key: its document, its default (or :data:`ABSENT`) and its validator.

    ``validate`` receives a private copy and returns the value to store, or raises
    :class:`ConfigRejected`.
    """

    name: str
    doc: DocKind
    default: Any
    validate: Callable[[Any], Any]
    core: bool = False

    def default_copy(self) -> Any:
        """A fresh copy of the default (callers may mutate it)."""
        return copy_json(self.default) if self.default is not ABSENT else ABSENT


def _fail(key: str, problem: str) -> ConfigRejected:
    return ConfigRejected(f"config.{key}: {problem}")


def _non_empty_str(key: str, value: Any, field: str) -> None:
    if type(value) is not str or not value:
        raise _fail(key, f"{field} must be a non-empty string, got {value!r}")


def _model(value: Any) -> Any:
    if type(value) is not dict:
        raise _fail("model", f"must be an object {{provider, modelId}}, got {value!r}")
    extra = set(value) - {"provider", "modelId"}
    if extra:
        raise _fail("model", f"unknown fields {sorted(extra)}")
    _non_empty_str("model", value.get("provider"), "provider")
    _non_empty_str("model", value.get("modelId"), "modelId")
    return value


_THINKING = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
_MODES = ("all", "one-at-a-time")


def _one_of(key: str, choices: tuple[str, ...]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value not in choices or type(value) is not str:
            raise _fail(key, f"must be one of {list(choices)}, got {value!r}")
        return value

    return check


def _selected_tools(value: Any) -> Any:
    if type(value) is not list or any(type(item) is not str or not item for item in value):
        raise _fail("selectedTools", f"must be a list of tool names, got {value!r}")
    return value


def _profile(value: Any) -> Any:
    _non_empty_str("profile", value, "value")
    return value


def _tokens(key: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if type(value) is not int or value < 0:
            raise _fail(key, f"must be a non-negative integer token count, got {value!r}")
        return value

    return check


def _delay(key: str, value: Any) -> None:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise _fail("retry", f"{key} must be a finite number >= 0, got {value!r}")


def _retry(value: Any) -> Any:
    if type(value) is not dict:
        raise _fail("retry", f"must be an object, got {value!r}")
    required = {"enabled", "maxRetries", "baseDelayMs"}
    allowed = required | {"maxAgentDelayMs"}
    missing = required - set(value)
    if missing:
        raise _fail("retry", f"missing fields {sorted(missing)}")
    extra = set(value) - allowed
    if extra:
        raise _fail("retry", f"unknown fields {sorted(extra)}")
    if type(value["enabled"]) is not bool:
        raise _fail("retry", f"enabled must be a bool, got {value['enabled']!r}")
    if type(value["maxRetries"]) is not int or value["maxRetries"] < 0:
        raise _fail("retry", f"maxRetries must be an int >= 0, got {value['maxRetries']!r}")
    _delay("baseDelayMs", value["baseDelayMs"])
    if "maxAgentDelayMs" in value:
        _delay("maxAgentDelayMs", value["maxAgentDelayMs"])
    return value


def _strict_json(key: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        try:
            return copy_json(value, ("config", key))
        except JsonError as exc:
            raise ConfigRejected(str(exc)) from None

    return check


def custom_key(name: str, doc: DocKind, default: Any) -> ConfigKey:
    """A kind's own key: any strict JSON value, with a strict JSON default."""
    return ConfigKey(name, doc, _strict_json(name)(default), _strict_json(name))


CORE_CONFIG: Mapping[str, ConfigKey] = {
    key.name: key
    for key in (
        ConfigKey("model", "rewindable", ABSENT, _model, core=True),
        ConfigKey("thinkingLevel", "rewindable", "off", _one_of("thinkingLevel", _THINKING), True),
        ConfigKey("selectedTools", "rewindable", [], _selected_tools, core=True),
        ConfigKey("profile", "rewindable", "default", _profile, core=True),
        ConfigKey("threshold", "rewindable", 0, _tokens("threshold"), core=True),
        ConfigKey("keepRecent", "rewindable", 20000, _tokens("keepRecent"), core=True),
        ConfigKey(
            "retry",
            "sticky",
            {"enabled": True, "maxRetries": 3, "baseDelayMs": 2000, "maxAgentDelayMs": 60000},
            _retry,
            core=True,
        ),
        ConfigKey("steeringMode", "sticky", "one-at-a-time", _one_of("steeringMode", _MODES), True),
        ConfigKey("followUpMode", "sticky", "one-at-a-time", _one_of("followUpMode", _MODES), True),
    )
}
"""The core keys (docs/design/harness.md#configuration)."""

RESERVED_CONFIG_NAMES = frozenset({"set", "get", "reset", "plugins", "inbox", "turn", "tasks"})


def check_value(key: ConfigKey, value: Any) -> Any:
    """Validate ``value`` for ``key`` and return the private copy to store."""
    try:
        copied = copy_json(value, ("config", key.name))
    except JsonError as exc:
        raise ConfigRejected(str(exc)) from None
    return key.validate(copied)


def resolve_config(
    keys: Mapping[str, ConfigKey], rewindable: Mapping[str, Any], sticky: Mapping[str, Any]
) -> dict[str, Any]:
    """Resolved values of ``keys``: stored value by presence, else the default; unset ``model``
    (no default) is left out."""
    out: dict[str, Any] = {}
    for name, key in keys.items():
        doc = rewindable if key.doc == "rewindable" else sticky
        if name in doc:
            out[name] = doc[name]
        elif key.default is not ABSENT:
            out[name] = key.default_copy()
    return out
