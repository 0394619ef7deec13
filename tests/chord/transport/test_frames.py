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
    RequestFrame,
    ResultFrame,
    UpdateFrame,
    decode_frame,
    encode_frame,
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
        (b'{"type": "cancel", "id": 9007199254740993}', "invalid_frame", "outside"),
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
