"""Fuzzing tool argument validation: random schemas with random arguments.

Issue 9 item 2 ("tool argument validation"). The app's built-in tool specs are fuzzed in
``tests/app/tools/test_validate.py`` and the pico3 validator's messages are pinned by
``tests/pico3/extension/test_tool_schema.py``; this module fuzzes
:class:`pico3.tools.ToolDeclaration` with *random schemas*:

* a constructive strategy draws a JSON Schema (nested objects, arrays, strings, numbers, enums,
  ``required``, ``additionalProperties``) together with a strategy for values it accepts: such a
  value always validates;
* a random edit of that value (a leaf replaced by random JSON, a required key dropped, an extra
  key added) validates exactly when :mod:`jsonschema`'s own ``is_valid`` says so, and when it
  does not, :class:`~pico3.tools.InvalidArguments` lists every problem, each naming its path
  under ``arguments``;
* garbage schemas (random keywords with random values) either fail when the tool is declared,
  with a ``ValueError`` naming the schema path, or build a tool whose ``validate`` raises only
  ``InvalidArguments``;
* validation never mutates the arguments.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chord.context import Context
from pico3.tools import InvalidArguments, ToolApi, ToolDeclaration, ToolResult


async def _execute(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
    return ToolResult.text("unused")


def declare(schema: dict[str, Any]) -> ToolDeclaration:
    return ToolDeclaration("fuzzed", "a fuzzed tool", schema, _execute)


Pair = tuple[dict[str, Any], st.SearchStrategy[Any]]
"""A schema and a strategy of values it accepts."""

names = st.text("abcdefgh_", min_size=1, max_size=5)
scalar_values = st.none() | st.booleans() | st.integers(-100, 100) | st.text(max_size=4)


@st.composite
def leaf_schema(draw: st.DrawFn) -> Pair:
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "null", "enum", "any"]))
    if kind == "string":
        low = draw(st.integers(0, 3))
        high = draw(st.integers(low, low + 5))
        schema = {"type": "string", "minLength": low, "maxLength": high}
        return schema, st.text("xyz\u00e9\U0001f600", min_size=low, max_size=high)
    if kind == "integer":
        low = draw(st.integers(-50, 50))
        high = draw(st.integers(low, low + 100))
        return {"type": "integer", "minimum": low, "maximum": high}, st.integers(low, high)
    if kind == "number":
        low = draw(st.integers(-50, 50))
        values = st.integers(low, low + 10) | st.floats(low, low + 10, allow_nan=False)
        return {"type": "number", "minimum": low}, values
    if kind == "boolean":
        return {"type": "boolean"}, st.booleans()
    if kind == "null":
        return {"type": "null"}, st.none()
    if kind == "enum":
        options = draw(st.lists(scalar_values, min_size=1, max_size=4, unique_by=repr))
        # jsonschema compares enum members by JSON equality (1 == True is false there, but
        # 1 == 1.0 is true): sampled members are always valid whatever the others are.
        return {"enum": options}, st.sampled_from(options)
    return {}, scalar_values


def node_schema(depth: int) -> st.SearchStrategy[Pair]:
    if depth <= 0:
        return leaf_schema()
    return st.one_of(leaf_schema(), array_schema(depth), object_schema(depth))


@st.composite
def array_schema(draw: st.DrawFn, depth: int) -> Pair:
    items, values = draw(node_schema(depth - 1))
    low = draw(st.integers(0, 2))
    high = draw(st.integers(low, low + 3))
    schema = {"type": "array", "items": items, "minItems": low, "maxItems": high}
    return schema, st.lists(values, min_size=low, max_size=high)


@st.composite
def object_schema(draw: st.DrawFn, depth: int) -> Pair:
    props = draw(st.dictionaries(names, node_schema(depth - 1), max_size=4))
    required = sorted(draw(st.sets(st.sampled_from(sorted(props)))) if props else set())
    closed = draw(st.booleans())
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: pair[0] for name, pair in props.items()},
    }
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    values = st.fixed_dictionaries(
        {name: props[name][1] for name in required},
        optional={name: pair[1] for name, pair in props.items() if name not in required},
    )
    return schema, values


tool_schemas = st.integers(1, 3).flatmap(object_schema)

json_values = st.recursive(
    scalar_values | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def edited(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with one random edit somewhere (a fresh structure)."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        return {**value, key: draw(edited(value[key]))}
    if isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], draw(edited(value[index])), *value[index + 1 :]]
    edit = draw(st.sampled_from(["replace", "drop", "add"]))
    if edit == "drop" and isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        return {k: v for k, v in value.items() if k != key}
    if edit == "add" and isinstance(value, dict):
        return {**value, draw(names): draw(json_values)}
    if edit == "add" and isinstance(value, list):
        return [*value, draw(json_values)]
    return draw(json_values)


def _problems_name_paths(error: InvalidArguments, arguments: Any) -> None:
    assert error.tool == "fuzzed"
    assert error.problems, "an InvalidArguments must list at least one problem"
    for problem in error.problems:
        assert re.match(r"^arguments(\.[^:\[]+|\[\d+\])*: ", problem), problem
        assert problem in str(error)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), pair=tool_schemas)
def test_values_drawn_from_a_random_schema_always_validate(data: st.DataObject, pair: Pair) -> None:
    schema, values = pair
    tool = declare(schema)
    value = data.draw(values)
    before = copy.deepcopy(value)
    tool.validate(value)
    assert value == before


@settings(max_examples=300, deadline=None)
@given(data=st.data(), pair=tool_schemas)
def test_edited_values_validate_exactly_when_jsonschema_accepts_them(
    data: st.DataObject, pair: Pair
) -> None:
    schema, values = pair
    tool = declare(schema)
    value = data.draw(edited(data.draw(values)))
    before = copy.deepcopy(value)
    oracle = jsonschema.Draft202012Validator(schema).is_valid(value)
    try:
        tool.validate(value)
    except InvalidArguments as error:
        assert not oracle, f"refused a valid value: {error}"
        _problems_name_paths(error, value)
    else:
        assert oracle, "accepted a value jsonschema refuses"
    assert value == before, "validation mutated the arguments"


KEYWORDS = [
    "type",
    "properties",
    "required",
    "items",
    "minLength",
    "maximum",
    "enum",
    "pattern",
    "additionalProperties",
    "minItems",
    "format",
    "const",
    "not",
    "anyOf",
    "$ref",
    "uniqueItems",
    "multipleOf",
]
garbage_values = st.one_of(
    json_values,
    st.sampled_from(
        ["string", "object", "[", "(?P<", "a{2,1}", "#/nope", "#", 0, -1, 0.0, [], {}, None]
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    extra=st.dictionaries(st.sampled_from(KEYWORDS), garbage_values, max_size=4),
    nested=st.dictionaries(st.sampled_from(KEYWORDS), garbage_values, max_size=3),
    arguments=json_values,
)
def test_garbage_schemas_fail_at_declaration_or_validate_cleanly(
    extra: dict[str, Any], nested: dict[str, Any], arguments: Any
) -> None:
    schema = {**extra, "type": "object", "properties": {"p": nested}}
    try:
        tool = declare(schema)
    except ValueError as error:
        assert re.search(r"parameters|JSON Schema", str(error)), error
        return
    before = copy.deepcopy(arguments)
    try:
        tool.validate(arguments)
    except InvalidArguments as error:
        _problems_name_paths(error, arguments)
    assert arguments == before


@pytest.mark.parametrize(
    ("keyword", "value"),
    [("pattern", "(?P<"), ("pattern", "a{2,1}"), ("$ref", "#/nope")],
)
def test_schemas_that_cannot_validate_are_refused_when_declared(keyword: str, value: Any) -> None:
    # a schema whose use would raise (a broken regex, a dangling reference) is a declaration
    # error, not a crash at the first tool call
    schema = {"type": "object", "properties": {"p": {keyword: value}}}
    probe: Callable[[], Any] = lambda: declare(schema).validate({"p": "x"})  # noqa: E731
    with pytest.raises(ValueError, match=r"parameters"):
        probe()


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "$ref": "#"},
        {"type": "object", "allOf": [{"$ref": "#"}]},
        {"type": "object", "properties": {"p": {"anyOf": [{"$ref": "#/properties/p"}]}}},
    ],
)
def test_a_reference_cycle_that_never_reaches_the_arguments_is_refused(
    schema: dict[str, Any],
) -> None:
    # found by test_garbage_schemas_...: {"$ref": "#"} at the root recursed until RecursionError
    with pytest.raises(ValueError, match=r"endless recursion"):
        declare(schema)


def test_a_recursive_schema_that_descends_into_the_arguments_is_fine() -> None:
    tool = declare({"type": "object", "properties": {"child": {"$ref": "#"}}})
    tool.validate({"child": {"child": {}}})
    with pytest.raises(InvalidArguments, match=r"arguments\.child\.child"):
        tool.validate({"child": {"child": 3}})
