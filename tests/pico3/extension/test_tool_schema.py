"""Tool parameters are JSON Schema dicts validated with jsonschema (docs/design/decisions.md#d8-g16); errors name the
field (docs/design/turn.md#tool)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chord.context import Context
from pico3.tools import InvalidArguments, ToolApi, ToolDeclaration, ToolResult, validate_arguments

QUESTION = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 1},
        "options": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"label": {"type": "string"}, "weight": {"type": "integer"}},
                "required": ["label"],
            },
        },
        "timeout": {"type": "integer", "minimum": 0},
    },
    "required": ["question"],
    "additionalProperties": False,
}


async def _run(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
    return ToolResult.text("ok")


def declare(parameters: Any) -> ToolDeclaration:
    return ToolDeclaration("question", "Ask.", parameters, _run)


def problems(arguments: Any) -> list[str]:
    with pytest.raises(InvalidArguments) as caught:
        declare(QUESTION).validate(arguments)
    assert caught.value.tool == "question"
    return caught.value.problems


def test_valid_arguments_pass() -> None:
    declare(QUESTION).validate({"question": "Why?", "options": [{"label": "a", "weight": 2}]})


def test_missing_required_field_is_named_at_its_own_path() -> None:
    assert problems({}) == ["arguments.question: is required"]


def test_nested_errors_name_the_full_path() -> None:
    found = problems({"question": "q", "options": [{"label": "a"}, {"weight": "heavy"}]})
    assert "arguments.options[1].label: is required" in found
    assert "arguments.options[1].weight: 'heavy' is not of type 'integer'" in found


def test_every_problem_is_reported_and_the_message_lists_them() -> None:
    with pytest.raises(InvalidArguments) as caught:
        declare(QUESTION).validate({"question": "", "timeout": -1, "extra": True})
    text = str(caught.value)
    assert text.startswith("Invalid arguments for tool 'question': ")
    assert "arguments.question:" in text and "arguments.timeout:" in text
    assert "arguments.extra: is not allowed (the allowed properties are: " in text
    assert text.endswith(". Fix them and call 'question' again.")


def test_bool_is_not_an_integer() -> None:
    assert problems({"question": "q", "timeout": True}) == [
        "arguments.timeout: True is not of type 'integer'"
    ]


def test_arguments_must_be_an_object() -> None:
    with pytest.raises(InvalidArguments, match="arguments: "):
        validate_arguments(declare(QUESTION), ["question"])


def test_a_bad_schema_fails_when_the_tool_is_declared() -> None:
    with pytest.raises(ValueError, match=r"invalid JSON Schema at parameters.properties.n"):
        declare({"type": "object", "properties": {"n": {"type": "integr"}}})


def test_a_schema_checked_once_is_not_trusted_for_another_schema_or_a_bad_one() -> None:
    # Passed checks are remembered by the schema's content (start-up declares the same schemas
    # twice): an equal schema (other key order) is accepted and validates alike; a schema
    # changed after a pass, or a bad one declared again, is still refused with its tool's name.
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    ToolDeclaration("first", "One.", schema, _run)
    reordered = {"properties": {"n": {"type": "integer"}}, "type": "object"}
    second = ToolDeclaration("second", "Two.", reordered, _run)
    with pytest.raises(InvalidArguments, match="second"):
        second.validate({"n": "x"})
    schema["properties"]["n"]["type"] = "integr"
    for name in ("third", "fourth"):
        with pytest.raises(ValueError, match=rf"tool '{name}': invalid JSON Schema at parameters"):
            ToolDeclaration(name, "Bad.", schema, _run)
    dangling = {"type": "object", "properties": {"n": {"$ref": "#/$defs/missing"}}}
    for name in ("fifth", "sixth"):
        with pytest.raises(ValueError, match=name):
            ToolDeclaration(name, "Bad ref.", dangling, _run)


def test_parameters_must_describe_an_object() -> None:
    with pytest.raises(ValueError, match='"type": "object"'):
        declare({"type": "string"})


def test_parameters_must_be_strict_json() -> None:
    with pytest.raises(ValueError, match="parameters"):
        declare({"type": "object", "default": float("nan")})


def test_the_declaration_keeps_a_private_copy_of_its_schema() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
    declaration = declare(schema)
    schema["required"].append("late")  # the caller mutates its object afterwards
    declaration.validate({})
    assert declaration.wire() == {
        "name": "question",
        "description": "Ask.",
        "parameters": {"type": "object", "properties": {}, "required": []},
    }


def test_a_result_s_plain_text_joins_its_text_blocks() -> None:
    image = {"type": "image", "data": "AA==", "mimeType": "image/png"}
    result = ToolResult(
        content=[{"type": "text", "text": "a"}, image, {"type": "text", "text": "b"}]
    )
    assert result.plain_text == "a\nb"
    assert ToolResult().plain_text == ""  # a streamed result has no content of its own


_PLAIN_CASES: list[Any] = [
    QUESTION,
    True,
    {"type": ["string", "null"], "description": "d", "title": "t", "$comment": "c"},
    {"type": "string", "enum": ["a", "b"], "default": "a", "format": "uri", "maxLength": 9},
    {"type": "array", "items": False, "minItems": 0, "maxItems": 3, "uniqueItems": True},
    {"type": "number", "minimum": -1.5, "exclusiveMaximum": 10, "const": 2},
    {"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1},
    {"type": "object", "properties": {"a": True, "b": {}}, "required": []},
    {"deprecated": True, "readOnly": False, "writeOnly": False},
    # Refused by the meta-schema: each must read as not plain (check_schema then refuses it).
    {"type": "integr"},
    {"type": []},
    {"type": ["string", "string"]},
    {"type": 3},
    {"properties": []},
    {"properties": {"a": 3}},
    {"items": [{"type": "string"}]},
    {"required": ["a", "a"]},
    {"required": "a"},
    {"required": [1]},
    {"enum": "a"},
    {"description": 1},
    {"minItems": -1},
    {"minItems": 1.5},
    {"minItems": True},
    {"minimum": "1"},
    {"minimum": True},
    {"uniqueItems": 1},
    {"additionalProperties": 1},
    # Valid, but outside the plain keywords: check_schema decides.
    {"type": "string", "pattern": "^a"},
    {"anyOf": [{"type": "string"}]},
    {"$schema": "http://json-schema.org/draft-07/schema#"},
    {"minItems": 1.0},
]


@pytest.mark.parametrize("schema", _PLAIN_CASES)
def test_a_schema_read_as_plain_is_one_the_meta_schema_accepts(schema: Any) -> None:
    # Declaring a plain schema skips jsonschema's meta-schema walk (start-up: jsonschema is not
    # even imported); that is sound only if every plain schema passes the walk.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    from pico3.tools.schema import _plainly_valid  # pyright: ignore[reportPrivateUsage]

    try:
        Draft202012Validator.check_schema(schema)
        accepted = True
    except SchemaError:
        accepted = False
    if _plainly_valid(schema):
        assert accepted
    elif isinstance(schema, dict) and not accepted:
        with pytest.raises(ValueError, match="invalid JSON Schema at parameters"):
            declare({"type": "object", "properties": {"x": schema}})


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(-5, 5, allow_nan=False)
    | st.sampled_from(["", "a", "ab", "abcde"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
    ),
    max_leaves=8,
)
_TYPES = st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object"])


def _schemas(inner: Any) -> Any:
    keyword = st.one_of(
        st.tuples(st.just("type"), _TYPES | st.lists(_TYPES, min_size=1, max_size=3, unique=True)),
        st.tuples(
            st.just("properties"), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
        ),
        st.tuples(st.just("required"), st.lists(st.sampled_from("abc"), max_size=3, unique=True)),
        st.tuples(st.sampled_from(["items", "additionalProperties"]), inner),
        st.tuples(st.just("enum"), st.lists(_JSON, min_size=1, max_size=3)),
        st.tuples(st.sampled_from(sorted(_COUNT_KEYS)), st.integers(0, 3)),
        st.tuples(st.sampled_from(sorted(_BOUND_KEYS)), st.integers(-3, 3) | st.floats(-3, 3)),
        st.tuples(st.sampled_from(["const", "default"]), _JSON),
        st.tuples(st.just("uniqueItems"), st.booleans()),
        st.tuples(st.sampled_from(["description", "format"]), st.just("uri")),
        st.tuples(st.just("pattern"), st.just("^a")),  # not plain: jsonschema decides
    )
    return st.lists(keyword, max_size=4).map(dict)


_COUNT_KEYS = {"minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"}
_BOUND_KEYS = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
_SCHEMA = st.recursive(st.booleans() | st.just({}), _schemas, max_leaves=6)


@settings(max_examples=1500, deadline=None)
@given(schema=_SCHEMA, value=_JSON)
def test_arguments_read_as_plainly_valid_are_valid_for_jsonschema(schema: Any, value: Any) -> None:
    # A valid call's validation skips jsonschema (not even imported); sound only if every value
    # the plain walk accepts is one jsonschema accepts.
    from jsonschema import Draft202012Validator

    from pico3.tools.schema import _plainly_conforms  # pyright: ignore[reportPrivateUsage]

    Draft202012Validator.check_schema(schema)
    if _plainly_conforms(schema, value):
        assert not list(Draft202012Validator(schema).iter_errors(value))


def test_a_valid_call_is_validated_without_jsonschema_and_a_bad_one_with_it() -> None:
    script = (
        "import sys\n"
        "from pico3.tools import ArgumentSchema, InvalidArguments\n"
        "schema = ArgumentSchema('edit', {'type': 'object', 'properties': {'path': "
        "{'type': 'string'}, 'edits': {'type': 'array', 'minItems': 1, 'items': {'type': "
        "'object', 'properties': {'oldText': {'type': 'string'}}, 'required': ['oldText'], "
        "'additionalProperties': False}}}, 'required': ['path', 'edits']})\n"
        "schema.validate({'path': 'a.py', 'edits': [{'oldText': 'x'}]})\n"
        "print('jsonschema' in sys.modules)\n"
        "print(schema.problems({'path': 'a.py', 'edits': [{'newText': 'x'}]}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    imported, problems = done.stdout.splitlines()
    assert imported == "False"
    assert "arguments.edits[0].oldText: is required" in problems
