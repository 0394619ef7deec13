"""Tool argument validation (docs/design/decisions.md#d8-g16): JSON Schema via jsonschema, errors name the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coding_agent.worker.tools import (
    EDIT_TOOL,
    READ_TOOL,
    ToolArgumentError,
    ToolContext,
    ToolSpec,
    builtin_tools,
    validate_args,
)


def test_builtin_tools_have_unique_names_and_valid_schemas() -> None:
    specs = builtin_tools()
    assert [spec.name for spec in specs] == [
        "read",
        "bash",
        "edit",
        "write",
        "grep",
        "find",
        "ls",
        "job_output",
        "job_kill",
    ]
    for spec in specs:
        jsonschema.Draft202012Validator.check_schema(spec.parameters)
        assert spec.parameters["type"] == "object"
        assert spec.description


@pytest.mark.parametrize(
    ("spec", "args", "field"),
    [
        (READ_TOOL, {}, "$.path"),
        (READ_TOOL, {"path": 3}, "$.path"),
        (READ_TOOL, {"path": "a", "offset": 0}, "$.offset"),
        (READ_TOOL, {"path": "a", "bogus": True}, "$.bogus"),
        (EDIT_TOOL, {"path": "a", "edits": [{"oldText": "x"}]}, "$.edits[0].newText"),
        (EDIT_TOOL, {"path": "a", "edits": []}, "$.edits"),
        (EDIT_TOOL, {"path": "a", "edits": [{"oldText": "x", "newText": 1}]}, "$.edits[0].newText"),
    ],
)
def test_validation_errors_name_the_bad_field(spec: ToolSpec, args: Any, field: str) -> None:
    with pytest.raises(ToolArgumentError) as caught:
        validate_args(spec, args)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"Invalid arguments for tool {spec.name!r}: {field}: ")


def test_non_object_arguments_are_rejected() -> None:
    with pytest.raises(ToolArgumentError, match=r"\$: expected an object, got list"):
        validate_args(READ_TOOL, ["path"])


@pytest.mark.anyio
async def test_execute_turns_bad_arguments_into_an_error_result(tmp_path: Path) -> None:
    result = await READ_TOOL.execute({"path": 7}, ToolContext(cwd=tmp_path))
    assert result.is_error
    assert result.text.startswith("Invalid arguments for tool 'read': $.path: ")
    assert result.details["field"] == "$.path"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
known_keys = st.sampled_from(
    [
        "path",
        "offset",
        "limit",
        "content",
        "edits",
        "oldText",
        "newText",
        "command",
        "timeout",
        "pattern",
        "glob",
        "ignoreCase",
        "literal",
        "context",
    ]
)
tool_args = st.dictionaries(known_keys | st.text(max_size=6), json_values, max_size=5)


@settings(max_examples=300, deadline=None)
@given(spec=st.sampled_from(builtin_tools()), args=tool_args | json_values)
def test_random_json_is_either_valid_or_a_clear_error(spec: ToolSpec, args: Any) -> None:
    try:
        checked = validate_args(spec, args)
    except ToolArgumentError as error:
        assert error.field.startswith("$")
        assert error.problem
        assert error.tool == spec.name
    else:
        assert checked is args
        jsonschema.validate(args, spec.parameters)


@settings(max_examples=100, deadline=None)
@given(
    path=st.text(min_size=1, max_size=20),
    offset=st.integers(1, 10**6) | st.none(),
    limit=st.integers(1, 10**6) | st.none(),
)
def test_well_formed_read_arguments_always_validate(
    path: str, offset: int | None, limit: int | None
) -> None:
    args: dict[str, Any] = {"path": path}
    if offset is not None:
        args["offset"] = offset
    if limit is not None:
        args["limit"] = limit
    assert validate_args(READ_TOOL, args) == args
