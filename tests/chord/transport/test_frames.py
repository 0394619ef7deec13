"""Wire frames: strict NDJSON decoding, size limits, close discipline."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chord.transport.frames import (
    CancelFrame,
    ClosedFrame,
    ErrorInfo,
    FrameDecoder,
    FrameError,
    PartFrame,
    RequestFrame,
    ResultFrame,
    UpdateFrame,
    decode_frame,
    encode_frame,
    encode_parts,
)

CALL = {"serviceId": "demo.counter", "member": "add", "args": [1]}


@pytest.mark.parametrize(
    "frame",
    [
        RequestFrame(id=1, call=CALL),
        ResultFrame(id=1, ok=True, result={"total": 3}),
        ResultFrame(id=2, ok=True),
        ResultFrame(id=3, ok=False, error=ErrorInfo("service_not_found", "no such service")),
        CancelFrame(id=4),
        UpdateFrame(subscription_id="s1", update={"type": "unavailable"}),
        ClosedFrame(reason="bye"),
        ClosedFrame(),
    ],
)
def test_frames_round_trip(frame: object) -> None:
    line = encode_frame(frame)  # type: ignore[arg-type]
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode_frame(line[:-1]) == frame


def test_wire_shape_is_camel_case_and_omits_defaults() -> None:
    text = encode_frame(UpdateFrame(subscription_id="s1", update={"type": "unavailable"}))
    assert json.loads(text) == {
        "type": "update",
        "subscriptionId": "s1",
        "update": {"type": "unavailable"},
    }
    assert json.loads(encode_frame(ResultFrame(id=2, ok=True))) == {
        "type": "result",
        "id": 2,
        "ok": True,
    }


@pytest.mark.parametrize(
    ("line", "code", "needle"),
    [
        (b"not json", "invalid_json", "not JSON"),
        (b"[1, 2]", "invalid_frame", "JSON object"),
        (b'{"type": "request", "id": 1, "call": {"a": NaN}}', "invalid_json", "NaN"),
        (b'{"type": "request", "id": 1, "call": {"a": Infinity}}', "invalid_json", "Infinity"),
        (b'{"type": "cancel", "id": 1, "id": 2}', "invalid_json", "duplicate key 'id'"),
        (b'{"type": "request", "id": 1, "call": {"x": 1, "x": 2}}', "invalid_json", "duplicate"),
        (b'{"type": "shout", "id": 1}', "invalid_frame", "shout"),
        (b'{"type": "cancel", "id": 1, "extra": true}', "invalid_frame", "extra"),
        (b'{"type": "cancel"}', "invalid_frame", "id"),
        (b'{"type": "cancel", "id": "1"}', "invalid_frame", "cancel"),
        (b'{"type": "cancel", "id": -1}', "invalid_frame", "out of range"),
        (b'{"type": "cancel", "id": 9007199254740993}', "invalid_frame", "out of range"),
        (b'{"type": "cancel", "id": 1.5}', "invalid_frame", "cancel"),
        (b'{"type": "request", "id": 1, "call": {"x": 1e400}}', "invalid_frame", "non-finite"),
        (
            b'{"type": "request", "id": 1, "call": {"x": 1' + b"0" * 400 + b"}}",
            "invalid_frame",
            "double",
        ),
        (b'{"type": "part", "data": "{}", "last": true}', "invalid_frame", "part"),
        (
            b'{"type": "result", "id": 1, "ok": true, "error": {"code": "x", "message": "y"}}',
            "invalid_frame",
            "either",
        ),
        (b'{"type": "result", "id": 1, "ok": false}', "invalid_frame", "either"),
        (b"\xff\xfe", "invalid_json", "UTF-8"),
    ],
)
def test_bad_frames_raise_a_named_error(line: bytes, code: str, needle: str) -> None:
    with pytest.raises(FrameError) as info:
        decode_frame(line)
    assert info.value.code == code
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("line", "code", "needle"),
    [
        # Compact lines, written the way an encoder writes them: each decodes on msgspec's fast
        # path, and each is caught there and decoded again carefully, with the same error.
        (b'{"type":"cancel","id":1,"id":2}', "invalid_json", "duplicate key 'id'"),
        (b'{"type":"request","id":1,"call":{"x":1,"x":1}}', "invalid_json", "duplicate key 'x'"),
        (b'{"type":"result","id":1,"ok":true,"ok":true}', "invalid_json", "duplicate key 'ok'"),
        (b'{"type":"request","id":1,"call":{"x":1' + b"0" * 400 + b"}}", "invalid_frame", "double"),
        (
            b'{"type":"result","id":1,"ok":true,"result":[' + b"9" * 309 + b"]}",
            "invalid_frame",
            "double",
        ),
        (b'{"type":"cancel","id":9007199254740992}', "invalid_frame", "out of range"),
        (b'{"type":"result","id":1,"ok":false}', "invalid_frame", "either"),
        (b'{"type":"request","id":1,"call":{"x":NaN}}', "invalid_json", "NaN"),
        (b'{"type":"part","data":"{}","last":true}', "invalid_frame", "part"),
    ],
)
def test_canonical_bad_frames_raise_the_same_named_errors(
    line: bytes, code: str, needle: str
) -> None:
    with pytest.raises(FrameError) as info:
        decode_frame(line)
    assert info.value.code == code
    assert needle in str(info.value)


def test_a_canonical_big_integer_below_the_double_range_is_kept_exactly() -> None:
    digits = b"9" * 308  # below 1.8e308: a double holds it, so strict JSON takes it
    frame = decode_frame(b'{"type":"result","id":1,"ok":true,"result":[' + digits + b"]}")
    assert isinstance(frame, ResultFrame)
    assert frame.result == [int(digits)]


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ({"a": [1, float("nan")]}, r"non-finite number nan at \$\.result\.a\[1\]"),
        ({"a": float("inf")}, r"non-finite number inf at \$\.result\.a"),
        ({"a": (1, 2)}, r"tuple is not allowed at \$\.result\.a"),
        ({1: "x"}, r"non-string key 1 at \$\.result"),
        ({"a": {1, 2}}, r"set is not allowed at \$\.result\.a"),
        ({"a": b"x"}, r"bytes is not allowed at \$\.result\.a"),
        ({"a": 2**1100}, r"beyond the range of a double at \$\.result\.a"),
    ],
)
def test_encode_refuses_what_msgspec_would_quietly_turn_into_other_json(
    payload: object, needle: str
) -> None:
    with pytest.raises(FrameError, match=needle):
        encode_frame(ResultFrame(id=1, ok=True, result=payload))


def test_encode_refuses_non_strict_payloads_naming_the_path() -> None:
    with pytest.raises(FrameError, match=r"\$\.call\.args\[0\]"):
        encode_frame(RequestFrame(id=1, call={"args": [float("nan")]}))


def test_decoder_splits_frames_across_arbitrary_chunks() -> None:
    data = b"".join(encode_frame(CancelFrame(id=i)) for i in range(50))
    decoder = FrameDecoder()
    frames = []
    for i in range(0, len(data), 7):
        frames.extend(decoder.feed(data[i : i + 7]))
    assert [f.id for f in frames] == list(range(50))  # type: ignore[union-attr]
    assert decoder.pending == 0
    decoder.eof()


def test_blank_lines_are_ignored() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"\n\n") == []
    assert decoder.feed(b'{"type":"cancel","id":1}\n\n') == [CancelFrame(id=1)]


def test_oversized_frame_is_refused_before_its_end_arrives() -> None:
    decoder = FrameDecoder(max_frame_size=64)
    decoder.feed(b'{"type":"request","id":1,"call":{"x":"')
    with pytest.raises(FrameError) as info:
        decoder.feed(b"a" * 100)
    assert info.value.code == "frame_too_large"


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    line = encode_frame(CancelFrame(id=12345))
    decoder = FrameDecoder(max_frame_size=len(line) - 1)
    assert decoder.feed(line) == [CancelFrame(id=12345)]


def test_frames_after_close_are_refused() -> None:
    decoder = FrameDecoder()
    out = decoder.feed(encode_frame(ClosedFrame(reason="done")))
    assert out == [ClosedFrame(reason="done")] and decoder.closed
    with pytest.raises(FrameError) as info:
        decoder.feed(encode_frame(CancelFrame(id=1)))
    assert info.value.code == "frame_after_close"


def test_stream_ending_inside_a_frame_is_an_error() -> None:
    decoder = FrameDecoder()
    decoder.feed(b'{"type":"can')
    with pytest.raises(FrameError, match="inside a frame"):
        decoder.eof()


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_random_bytes_never_crash_the_decoder(data: bytes) -> None:
    decoder = FrameDecoder(max_frame_size=256)
    try:
        decoder.feed(data)
    except FrameError as exc:
        assert exc.code in {"frame_too_large", "invalid_json", "invalid_frame", "frame_after_close"}


json_scalars = st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
    max_leaves=20,
)


@given(st.integers(0, 2**53 - 1), json_values)
@settings(max_examples=200, deadline=None)
def test_any_strict_result_round_trips(request_id: int, value: object) -> None:
    frame = ResultFrame(id=request_id, ok=True, result=value)
    decoded = decode_frame(encode_frame(frame)[:-1])
    assert isinstance(decoded, ResultFrame) and decoded.result == value


@given(st.lists(st.sampled_from([b"{", b"}", b'"', b"\n", b"type", b":", b"cancel", b",", b"1"])))
@settings(max_examples=300, deadline=None)
def test_adversarial_fragments_only_raise_frame_errors(parts: list[bytes]) -> None:
    decoder = FrameDecoder(max_frame_size=128)
    try:
        decoder.feed(b"".join(parts))
    except FrameError:
        pass


def _parts_of(frame: object, limit: int) -> list[bytes]:
    return encode_parts(encode_frame(frame), limit)  # type: ignore[arg-type]


@given(st.text(min_size=0, max_size=3000), st.integers(64, 400))
@settings(max_examples=200, deadline=None)
def test_a_frame_in_parts_keeps_every_line_under_the_limit_and_reassembles(
    text: str, limit: int
) -> None:
    frame = RequestFrame(id=3, call={"text": text, "q": '"\\'})
    parts = _parts_of(frame, limit)
    assert all(len(part) - 1 <= limit for part in parts)
    assert [json.loads(part)["type"] for part in parts] == ["part"] * len(parts)
    decoder = FrameDecoder(max_frame_size=limit)
    out = decoder.feed(b"".join(parts))
    assert out == [frame]
    decoder.eof()


def test_a_run_of_parts_is_refused_when_interrupted_unfinished_or_too_large() -> None:
    frame = RequestFrame(id=3, call={"text": "x" * 1000})
    parts = _parts_of(frame, 100)
    interrupted = FrameDecoder(max_frame_size=100)
    with pytest.raises(FrameError, match="interrupted a run of part frames") as info:
        interrupted.feed(parts[0] + encode_frame(CancelFrame(id=1)))
    assert info.value.code == "invalid_frame"
    unfinished = FrameDecoder(max_frame_size=100)
    unfinished.feed(b"".join(parts[:-1]))
    with pytest.raises(FrameError, match="inside a run of part frames"):
        unfinished.eof()
    small = FrameDecoder(max_frame_size=100, max_message_size=500)
    with pytest.raises(FrameError) as info:
        small.feed(b"".join(parts))
    assert info.value.code == "frame_too_large"
    nested = FrameDecoder(max_frame_size=100)
    inner = encode_frame(PartFrame(data="{}", last=True))  # type: ignore[arg-type]
    with pytest.raises(FrameError, match="holds another part"):
        nested.feed(_wrap(inner))


def _wrap(line: bytes) -> bytes:
    return encode_frame(PartFrame(data=line[:-1].decode(), last=True))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("line", "value"),
    [
        (b'{"type":"cancel","id":7.0}', CancelFrame(id=7)),
        (b'{"type":"cancel","id":7e0}', CancelFrame(id=7)),
    ],
)
def test_an_id_written_with_a_fraction_is_that_integer(line: bytes, value: object) -> None:
    assert decode_frame(line) == value


def test_numbers_chord_sends_are_accepted_and_big_integers_round_trip_exactly() -> None:
    big = 2**64 + 1
    line = (
        b'{"type":"result","id":1,"ok":true,"result":{"a":%d,"b":1e20,"c":-0.0,"d":2e-308}}' % big
    )
    frame = decode_frame(line)
    assert isinstance(frame, ResultFrame)
    assert frame.result["a"] == big and type(frame.result["a"]) is int
    assert frame.result["b"] == 1e20
    assert str(big).encode() in encode_frame(frame)
