"""The text tool-calling protocol: the fenced-block parser, the tools prompt and the history."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from coding_agent.worker.providers.text_tools import (
    OPEN_FENCE,
    ParsedCall,
    TextToolParser,
    parse_call,
    render_call,
    render_history,
    render_tools_prompt,
    text_call_id,
)
from pico3.models import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

Piece = str | ParsedCall


def _parse(chunks: list[str]) -> list[Piece]:
    parser = TextToolParser()
    pieces: list[Piece] = []
    for chunk in chunks:
        pieces.extend(parser.feed(chunk))
    pieces.extend(parser.finish())
    return _merged(pieces)


def _merged(pieces: list[Piece]) -> list[Piece]:
    out: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, str):
            if not piece:
                continue
            if out and isinstance(out[-1], str):
                out[-1] += piece
                continue
        out.append(piece)
    return out


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def _block(name: str, arguments: dict[str, Any]) -> str:
    return render_call(ToolCall(id="x", name=name, arguments=arguments)) + "\n"


# -- examples ----------------------------------------------------------------------------------
def test_text_before_and_after_a_block_and_the_call_between() -> None:
    stream = (
        'Let me look.\n```tool_call\n{"name": "read", "arguments": {"path": "a.py"}}\n```\nDone'
    )
    assert _parse([stream]) == [
        "Let me look.\n",
        ParsedCall("read", {"path": "a.py"}),
        "Done",
    ]


def test_a_block_is_held_back_until_it_closes() -> None:
    parser = TextToolParser()
    assert parser.feed("Reading ``") == ["Reading "]  # "``" might start a fence
    assert parser.feed("`tool") == []
    assert parser.feed('_call\n{"name": "ls",') == []
    assert parser.feed(' "arguments": {}}\n`') == []
    assert parser.feed("``\nafter") == [ParsedCall("ls", {}), "after"]
    assert parser.finish() == []
    assert parser.calls == 1


def test_several_blocks_in_one_answer_come_out_in_order() -> None:
    stream = _block("read", {"path": "a"}) + _block("read", {"path": "b"})
    assert _parse([stream]) == [
        ParsedCall("read", {"path": "a"}),
        ParsedCall("read", {"path": "b"}),
    ]


def test_a_malformed_block_stays_text_unchanged() -> None:
    stream = 'Try:\n```tool_call\n{"name": "read", "arguments": {path: a}}\n```\nend'
    assert _parse([stream]) == [stream]


@pytest.mark.parametrize(
    "body",
    [
        '{"arguments": {}}',  # no name
        '{"name": "", "arguments": {}}',
        '{"name": "read", "arguments": [1]}',
        '{"name": 3}',
        "[1, 2]",
        '{"name": "read", "arguments": {"n": 1e400}}',  # not strict JSON: no double holds it
        '{"name": "read", "arguments": {"n": NaN}}',  # not strict JSON
        "",
    ],
)
def test_bodies_that_are_not_calls_are_refused(body: str) -> None:
    assert parse_call(body) is None


def test_arguments_encoded_twice_and_missing_arguments_are_accepted() -> None:
    assert parse_call('{"name": "ls", "arguments": "{\\"path\\": \\".\\"}"}') == ParsedCall(
        "ls", {"path": "."}
    )
    assert parse_call('{"name": "ls"}') == ParsedCall("ls", {})


def test_a_fence_word_followed_by_more_text_is_not_a_block() -> None:
    stream = "Write a ```tool_call block like this one.\n"
    assert _parse(list(stream)) == [stream]


def test_an_unclosed_block_at_the_end_is_a_call_if_complete_else_text() -> None:
    assert _parse(['```tool_call\n{"name": "ls", "arguments": {}}']) == [ParsedCall("ls", {})]
    assert _parse(['x ```tool_call\n{"name": "ls", "argu']) == [
        'x ```tool_call\n{"name": "ls", "argu'
    ]
    assert _parse(["end ```tool_call"]) == ["end ```tool_call"]


def test_a_body_cannot_be_closed_by_backticks_inside_a_json_string() -> None:
    arguments = {"content": "```python\nprint(1)\n```\n"}
    assert _parse(list(_block("write", arguments))) == [ParsedCall("write", arguments)]


def test_the_parser_refuses_input_after_finish() -> None:
    parser = TextToolParser()
    parser.finish()
    with pytest.raises(RuntimeError, match="finished"):
        parser.feed("x")


def test_call_ids_are_deterministic_and_distinct() -> None:
    assert text_call_id("chatcmpl-1|5", 0) == text_call_id("chatcmpl-1|5", 0)
    ids = {text_call_id(seed, i) for seed in ("a", "b") for i in range(3)}
    assert len(ids) == 6
    assert all(i.startswith("call_") for i in ids)


# -- properties --------------------------------------------------------------------------------
_NOISE = st.text(alphabet='ab `\n{}":_toolcal', max_size=40)
_NAMES = st.sampled_from(["read", "bash", "edit"])
_ARGS = st.dictionaries(
    st.text(alphabet="pathxy", min_size=1, max_size=5),
    st.text(alphabet='a`\n{}"\\ ', max_size=12) | st.integers(-5, 5),
    max_size=3,
)
_SEGMENT = st.one_of(
    _NOISE.map(lambda t: ("text", t)),
    st.tuples(_NAMES, _ARGS).map(lambda c: ("call", c)),
    _NOISE.map(lambda t: ("raw", f"```tool_call\n{t}\n```\n")),  # mostly malformed
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_SEGMENT, max_size=8), st.lists(st.integers(0, 400), max_size=12))
def test_any_split_into_chunks_gives_the_same_text_and_calls(
    segments: list[tuple[str, Any]], cuts: list[int]
) -> None:
    stream = "".join(_block(*value) if kind == "call" else value for kind, value in segments)
    assert _parse(_split(stream, cuts)) == _parse([stream])
    assert _parse(list(stream)) == _parse([stream])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            _NOISE.map(lambda t: ("text", t)),
            st.tuples(_NAMES, _ARGS).map(lambda c: ("call", c)),
        ),
        max_size=8,
    ),
    st.lists(st.integers(0, 400), max_size=12),
)
def test_blocks_between_ordinary_text_are_found_exactly(
    segments: list[tuple[str, Any]], cuts: list[int]
) -> None:
    expected: list[Piece] = []
    stream = ""
    for kind, value in segments:
        if kind == "text":
            expected.append(value)
            stream += value
        else:
            expected.append(ParsedCall(*value))
            stream += _block(*value)
    texts = "".join(v for k, v in segments if k == "text")
    assume(OPEN_FENCE not in texts)
    assert _parse(_split(stream, cuts)) == _merged(expected)


# -- rendering ---------------------------------------------------------------------------------
def test_the_tools_prompt_lists_every_tool_with_its_schema_and_the_convention() -> None:
    tools = [
        Tool(name="read", description="Read a file.", parameters={"type": "object"}),
        Tool(name="ls", description="List a folder.", parameters={"type": "object", "a": 1}),
    ]
    prompt = render_tools_prompt(tools)
    assert "```tool_call\n" in prompt and "Tool result for call <id> (<name>):" in prompt
    assert '## read\nRead a file.\nParameters: {"type":"object"}' in prompt
    assert '## ls\nList a folder.\nParameters: {"type":"object","a":1}' in prompt


def test_history_renders_calls_as_blocks_and_merges_consecutive_results() -> None:
    call_a = ToolCall(id="c1", name="read", arguments={"path": "a"})
    call_b = ToolCall(id="c2", name="ls", arguments={})
    history = [
        UserMessage(content="go"),
        AssistantMessage(
            content=[ThinkingContent(thinking="hm"), TextContent(text="Looking."), call_a, call_b],
            model="m",
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="read", content=[TextContent(text="A")]),
        ToolResultMessage(
            tool_call_id="c2", tool_name="ls", content=[TextContent(text="x")], is_error=True
        ),
        AssistantMessage(content=[TextContent(text="ok")]),
    ]
    rendered = render_history(history)
    assert rendered[0] == history[0]
    assert rendered[1] == AssistantMessage(
        content=[
            TextContent(
                text='Looking.\n```tool_call\n{"name":"read","arguments":{"path":"a"}}\n```\n'
                '```tool_call\n{"name":"ls","arguments":{}}\n```\n'
            )
        ],
        model="m",
    )
    assert rendered[2] == UserMessage(
        content="Tool result for call c1 (read):\nA\n\nTool result for call c2 (ls) [error]:\nx"
    )
    assert rendered[3] == history[4]
    # What the model wrote parses back to the same calls.
    text = rendered[1].content[0]
    assert isinstance(text, TextContent)
    assert _parse([text.text]) == [
        "Looking.\n",
        ParsedCall("read", {"path": "a"}),
        ParsedCall("ls", {}),
    ]


def test_images_in_results_become_user_parts_or_a_note() -> None:
    image = ImageContent(data="AA==", mime_type="image/png")
    result = ToolResultMessage(
        tool_call_id="c", tool_name="read", content=[TextContent(text="pic"), image]
    )
    with_images = render_history([result], images=True)[0]
    assert isinstance(with_images, UserMessage) and isinstance(with_images.content, list)
    assert with_images.content[1] == image
    without = render_history([result], images=False)[0]
    assert isinstance(without, UserMessage) and isinstance(without.content, str)
    assert "image output omitted" in without.content


def test_rendered_calls_are_compact_json() -> None:
    call = ToolCall(id="i", name="bash", arguments={"command": "ls\n"})
    block = render_call(call)
    assert (
        block.splitlines()[1]
        == msgspec.json.encode({"name": "bash", "arguments": {"command": "ls\n"}}).decode()
    )
