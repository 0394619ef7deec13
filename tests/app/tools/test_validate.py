"""Tool argument validation (docs/design/decisions.md#d8-g16): the built-in tools use pico3's one
validator (``pico3.ArgumentSchema``), so a refused call reads the same on either side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coding_agent.worker.provider_search import PROVIDER_SEARCH_DESCRIPTION
from coding_agent.worker.tools import (
    BASH_TOOL,
    EDIT_TOOL,
    READ_TOOL,
    ToolArgumentError,
    ToolContext,
    ToolSpec,
    WebSettings,
    builtin_tools,
    validate_args,
)
from coding_agent.worker.tools_facet import tool_declaration
from pico3 import InvalidArguments, ToolResult


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
        "todo",
        "web_fetch",
        "web_search",  # the model provider's own search: offered only where one serves
    ]
    assert specs[-1].description == PROVIDER_SEARCH_DESCRIPTION
    with_search = builtin_tools(WebSettings(search_backend="brave"))
    assert [spec.name for spec in with_search][-2:] == ["web_fetch", "web_search"]
    assert with_search[-1].description != PROVIDER_SEARCH_DESCRIPTION
    for spec in [*specs, *with_search]:
        jsonschema.Draft202012Validator.check_schema(spec.parameters)
        assert spec.parameters["type"] == "object"
        assert spec.description


@pytest.mark.parametrize(
    ("spec", "args", "field"),
    [
        (READ_TOOL, {}, "arguments.path: is required"),
        (READ_TOOL, {"path": 3}, "arguments.path: 3 is not of type 'string'"),
        (READ_TOOL, {"path": "a", "offset": 0}, "arguments.offset: "),
        (READ_TOOL, {"path": "a", "bogus": True}, "arguments.bogus: is not allowed"),
        (EDIT_TOOL, {"path": "a", "edits": [{"oldText": "x"}]}, "arguments.edits[0].newText: "),
        (EDIT_TOOL, {"path": "a", "edits": []}, "arguments.edits: "),
        (
            EDIT_TOOL,
            {"path": "a", "edits": [{"oldText": "x", "newText": 1}]},
            "arguments.edits[0].newText: 1 is not of type 'string'",
        ),
    ],
)
def test_validation_errors_name_the_bad_field(spec: ToolSpec, args: Any, field: str) -> None:
    with pytest.raises(ToolArgumentError) as caught:
        validate_args(spec, args)
    assert [p for p in caught.value.problems if p.startswith(field)], caught.value.problems
    assert str(caught.value).startswith(f"Invalid arguments for tool {spec.name!r}: {field}")


def test_non_object_arguments_are_rejected() -> None:
    with pytest.raises(ToolArgumentError, match=r"arguments: \['path'\] is not of type 'object'"):
        validate_args(READ_TOOL, ["path"])


def test_every_bad_field_is_named_with_the_allowed_ones_and_the_fix() -> None:
    with pytest.raises(ToolArgumentError) as caught:
        validate_args(READ_TOOL, {"offset": "3", "bogus": True})
    assert str(caught.value) == (
        "Invalid arguments for tool 'read': "
        "arguments.path: is required; "
        "arguments.bogus: is not allowed (the allowed properties are: limit, offset, path); "
        "arguments.offset: '3' is not of type 'integer'. "
        "Fix them and call 'read' again."
    )


@pytest.mark.anyio
async def test_the_tool_and_the_harness_refuse_bad_arguments_with_the_same_text(
    tmp_path: Path,
) -> None:
    """One validator, one message: what ``ToolSpec.execute`` returns for a bad call is exactly
    what the harness's ``pi.tool`` tells the model (it validates with the declaration first)."""
    args = {"command": 7, "timeout": -1}
    result = await BASH_TOOL.execute(args, ToolContext(cwd=tmp_path))
    with pytest.raises(InvalidArguments) as caught:
        tool_declaration(BASH_TOOL, tmp_path).validate(args)
    assert isinstance(result, ToolResult)  # one result type too: pico3's
    assert result.is_error
    assert result.plain_text == str(caught.value)
    assert result.details["problems"] == caught.value.problems
    assert result.plain_text.startswith("Invalid arguments for tool 'bash': arguments.command: ")
    assert result.plain_text.endswith(". Fix them and call 'bash' again.")


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
        "url",
        "query",
        "count",
        "todos",
    ]
)
tool_args = st.dictionaries(known_keys | st.text(max_size=6), json_values, max_size=5)


@settings(max_examples=300, deadline=None)
@given(
    spec=st.sampled_from(builtin_tools(WebSettings(search_backend="brave"))),
    args=tool_args | json_values,
)
def test_random_json_is_either_valid_or_a_clear_error(spec: ToolSpec, args: Any) -> None:
    try:
        checked = validate_args(spec, args)
    except ToolArgumentError as error:
        assert error.problems
        assert all(problem.startswith("arguments") for problem in error.problems)
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
