"""Fuzzing the service grammar parsers of :mod:`chord.remote.grammar` with adversarial JSON.

Issue 9 item 2 ("the wire frame decoder and endpoint (random and adversarial frames)"). The frame
decoder and the wire server loop are fuzzed in ``tests/chord/transport/test_frames.py`` and
``tests/chord/wire/test_server_fuzz.py``; this module fuzzes the layer between them: the parsers
that turn a decoded frame's JSON into service calls, catalogues, subscription snapshots and
provider updates.

Two kinds of input, for every parser:

* **random JSON** (deep nesting, reserved path segments such as ``__proto__``, huge and
  negative integers, NaN and infinities, op-like arrays);
* **mutations of valid messages**: one valid example with a random edit at a random depth (a
  value replaced by random JSON, a key dropped, an unexpected key added, an item dropped or
  appended).

The properties: a parser either returns a record or raises :class:`ServiceGrammarError` whose
message starts with ``Invalid <what> at $...`` (no other exception type ever escapes); it never
mutates its input; and an accepted strict-JSON message round-trips (``parse(to_json(r)) == r``).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chord.remote import (
    ServiceGrammarError,
    decode_service_control_call,
    parse_service_call,
    parse_service_catalogue,
    parse_service_provider_update,
    parse_service_subscription_snapshot,
    parse_wire_service_provider_update,
    parse_wire_service_subscription_snapshot,
)
from chord.remote.grammar import address_to_json, parse_address
from tests.chord.remote.grammar_examples import ADDRESS, SNAPSHOT, UPDATES

CALLS: list[dict[str, Any]] = [
    {"serviceId": "pi.conversation", "instance": ADDRESS, "member": "write", "args": [{"k": 1}]},
    {"serviceId": "$chord.service", "member": "catalogue", "args": []},
    {"serviceId": "$chord.service", "member": "subscribe", "args": ["s1", "a.b", "keyed"]},
    {"serviceId": "$chord.service", "member": "unsubscribe", "args": ["s1"]},
]
CATALOGUES: list[Any] = [
    [{"serviceId": "a", "mode": "keyed"}, {"serviceId": "b", "mode": "singleton"}],
    [],
]


def _to_json(record: Any) -> Any:
    return record.to_json()


Parser = tuple[Callable[[Any], Any], Callable[[Any], Any], list[Any]]
PARSERS: dict[str, Parser] = {
    "service call": (parse_service_call, _to_json, CALLS),
    "catalogue": (parse_service_catalogue, lambda es: [e.to_json() for e in es], CATALOGUES),
    "address": (parse_address, address_to_json, [ADDRESS]),
    "snapshot": (parse_service_subscription_snapshot, _to_json, [SNAPSHOT]),
    "wire snapshot": (parse_wire_service_subscription_snapshot, _to_json, [SNAPSHOT]),
    "update": (parse_service_provider_update, _to_json, UPDATES),
    "wire update": (parse_wire_service_provider_update, _to_json, UPDATES),
}

NASTY_STRINGS = [
    "",
    "r",
    "s",
    "d",
    "p",
    "a",
    "t",
    "m",
    "#1",
    "__proto__",
    "constructor",
    "prototype",
    "state",
    "method",
    "keyed",
    "singleton",
    "type",
    "ops",
    "\ud800",
    "\x00",
    "$chord.service",
]
NASTY_INTS = [0, -1, 1, 2**53 - 1, 2**53, 2**63, -(2**63), 10**30]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.sampled_from(NASTY_INTS),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.sampled_from(NASTY_STRINGS),
)
keys = st.text(max_size=6) | st.sampled_from(NASTY_STRINGS)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=16,
)


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with one random edit somewhere (a fresh structure; ``value`` is untouched)."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        return {**value, key: draw(mutated(value[key]))}
    if isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], draw(mutated(value[index])), *value[index + 1 :]]
    edit = draw(st.sampled_from(["replace", "drop", "add"]))
    if edit == "drop" and isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        return {k: v for k, v in value.items() if k != key}
    if edit == "drop" and isinstance(value, list) and value:
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], *value[index + 1 :]]
    if edit == "add" and isinstance(value, dict):
        return {**value, draw(keys): draw(json_values)}
    if edit == "add" and isinstance(value, list):
        return [*value, draw(json_values)]
    return draw(json_values)


def _fingerprint(value: Any) -> str:
    """A comparable rendering of a JSON-ish value (NaN-safe; for "was it mutated?")."""
    return json.dumps(value, sort_keys=False, allow_nan=True, default=repr)


def _strict(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return not _has_lone_surrogate(value)


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())  # pyright: ignore[reportUnknownVariableType]
    return False


def _check(name: str, value: Any) -> None:
    parse, to_json, _examples = PARSERS[name]
    before = _fingerprint(value)
    try:
        record = parse(value)
    except ServiceGrammarError as error:
        assert str(error).startswith("Invalid "), error
        assert " at $" in str(error), error
        assert _fingerprint(value) == before, "the parser mutated a refused input"
        return
    assert _fingerprint(value) == before, "the parser mutated its input"
    if name == "service call":
        control = decode_service_control_call(record)  # never raises on a parsed call
        assert control is None or record.service_id == "$chord.service"
    if _strict(value) and not _contains_nan(to_json(record)):
        assert parse(copy.deepcopy(to_json(record))) == record


def _contains_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, (list, tuple)):
        return any(_contains_nan(v) for v in value)  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, dict):
        return any(_contains_nan(v) for v in value.values())  # pyright: ignore[reportUnknownVariableType]
    return False


@settings(max_examples=250, deadline=None)
@given(name=st.sampled_from(sorted(PARSERS)), value=json_values)
def test_random_json_parses_or_fails_with_a_grammar_error(name: str, value: Any) -> None:
    _check(name, value)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(PARSERS)), data=st.data())
def test_mutated_valid_messages_parse_or_fail_with_a_grammar_error(
    name: str, data: st.DataObject
) -> None:
    example = data.draw(st.sampled_from(PARSERS[name][2]))
    _check(name, data.draw(mutated(copy.deepcopy(example))))


def test_the_valid_examples_are_accepted_and_round_trip() -> None:
    for name, (parse, to_json, examples) in PARSERS.items():
        for example in examples:
            record = parse(copy.deepcopy(example))
            assert parse(to_json(record)) == record, name


def test_deep_nesting_is_a_grammar_error_or_a_record_never_a_crash() -> None:
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    for name in PARSERS:
        _check(name, {"type": "state", "member": "s", "sequence": 1, "ops": [["s", ["a"], deep]]})
        _check(name, {"serviceId": "x", "member": "m", "args": [deep]})
