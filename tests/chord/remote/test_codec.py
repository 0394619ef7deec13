"""Per-subscription wire codecs for service state ops (docs/design/chord.md#path-codec)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chord.remote import (
    ServiceClosedUpdate,
    ServiceInstanceSnapshot,
    ServiceMethodSnapshot,
    ServiceReplacedUpdate,
    ServiceResetUpdate,
    ServiceSpawnedUpdate,
    ServiceStateSnapshot,
    ServiceStateUpdate,
    ServiceSubscriptionSnapshot,
    ServiceUnavailableUpdate,
    create_service_state_decoder,
    create_service_state_encoder,
    parse_wire_service_provider_update,
    parse_wire_service_subscription_snapshot,
)
from chord.services import InstanceAddress


def _state(name: str, value: object, sequence: int = 0) -> ServiceStateSnapshot:
    return ServiceStateSnapshot(name, sequence, (("r", value),))


def _singleton(
    *members: ServiceStateSnapshot | ServiceMethodSnapshot,
) -> ServiceSubscriptionSnapshot:
    return ServiceSubscriptionSnapshot(
        "test.pair", "singleton", (ServiceInstanceSnapshot(tuple(members)),)
    )


def _set(
    member: str, sequence: int, value: int, instance: InstanceAddress | None = None
) -> ServiceStateUpdate:
    return ServiceStateUpdate(member, sequence, (("s", ("revision",), value),), instance)


def test_second_use_of_a_path_defines_an_id_on_the_same_member() -> None:
    encoder = create_service_state_encoder()
    encoder.encode_snapshot(_singleton(_state("left", {"revision": 0})))
    first = encoder.encode_update(_set("left", 1, 1))
    second = encoder.encode_update(_set("left", 2, 2))
    assert first.to_json()["ops"] == [["s", ["revision"], 1]]
    assert second.to_json()["ops"] == [["#", 0, ["revision"]], ["s", 0, 2]]


def test_dictionaries_are_independent_per_member_and_per_subscription() -> None:
    # item 69
    snapshot = _singleton(_state("left", {"revision": 0}), _state("right", {"revision": 0}))
    one, two = create_service_state_encoder(), create_service_state_encoder()
    one.encode_snapshot(snapshot)
    two.encode_snapshot(snapshot)
    one.encode_update(_set("left", 1, 1))
    assert one.encode_update(_set("right", 1, 1)).to_json()["ops"] == [["s", ["revision"], 1]]
    assert two.encode_update(_set("left", 1, 1)).to_json()["ops"] == [["s", ["revision"], 1]]
    # A base `r` on `left` resets only left's dictionary; `right` still defines its own id 0.
    one.encode_update(ServiceStateUpdate("left", 2, (("r", {"revision": 9}),)))
    assert one.encode_update(_set("right", 2, 2)).to_json()["ops"] == [
        ["#", 0, ["revision"]],
        ["s", 0, 2],
    ]


def test_encoded_stream_decodes_back_to_the_original_ops() -> None:
    snapshot = _singleton(_state("left", {"revision": 0}), ServiceMethodSnapshot("poke"))
    encoder, decoder = create_service_state_encoder(), create_service_state_decoder()
    wire_snapshot = parse_wire_service_subscription_snapshot(
        encoder.encode_snapshot(snapshot).to_json()
    )
    assert decoder.decode_snapshot(wire_snapshot) == snapshot
    for sequence in range(1, 6):
        update = _set("left", sequence, sequence)
        wire = parse_wire_service_provider_update(encoder.encode_update(update).to_json())
        assert decoder.decode_update(wire) == update


def test_closed_instance_drops_its_codecs() -> None:
    # item 69
    address = InstanceAddress("dialog", 1)
    encoder = create_service_state_encoder()
    encoder.encode_snapshot(ServiceSubscriptionSnapshot("test.dialogs", "keyed", ()))
    spawned = ServiceSpawnedUpdate(
        ServiceInstanceSnapshot((_state("request", {"revision": 0}),), address)
    )
    assert encoder.encode_update(spawned).to_json() == spawned.to_json()  # `r` encodes to itself
    encoder.encode_update(_set("request", 1, 1, address))
    encoder.encode_update(ServiceClosedUpdate(address))
    with pytest.raises(ValueError, match=r"Unknown service state dialog@1\.request"):
        encoder.encode_update(_set("request", 2, 2, address))


def test_unknown_member_and_duplicate_spawn_raise() -> None:
    address = InstanceAddress("dialog", 1)
    encoder = create_service_state_encoder()
    encoder.encode_snapshot(_singleton(_state("left", {})))
    with pytest.raises(ValueError, match="Unknown service state right"):
        encoder.encode_update(_set("right", 1, 1))
    spawned = ServiceSpawnedUpdate(ServiceInstanceSnapshot((_state("request", {}),), address))
    encoder.encode_update(spawned)
    with pytest.raises(ValueError, match=r"Duplicate service state dialog@1\.request"):
        encoder.encode_update(spawned)


def test_reset_replaced_and_unavailable_start_fresh_dictionaries() -> None:
    encoder, decoder = create_service_state_encoder(), create_service_state_decoder()
    snapshot = _singleton(_state("left", {"revision": 0}))
    decoder.decode_snapshot(encoder.encode_snapshot(snapshot))
    for sequence in (1, 2):
        decoder.decode_update(encoder.encode_update(_set("left", sequence, sequence)))
    for lifecycle in (
        ServiceResetUpdate(_singleton(_state("left", {"revision": 2}, 2))),
        ServiceReplacedUpdate(ServiceInstanceSnapshot((_state("left", {"revision": 0}),))),
    ):
        decoder.decode_update(encoder.encode_update(lifecycle))
        first = encoder.encode_update(_set("left", 3, 3))
        assert first.to_json()["ops"] == [["s", ["revision"], 3]]
        assert decoder.decode_update(first) == _set("left", 3, 3)
    encoder.encode_update(ServiceUnavailableUpdate())
    decoder.decode_update(ServiceUnavailableUpdate())
    with pytest.raises(ValueError, match="Unknown service state left"):
        encoder.encode_update(_set("left", 4, 4))
    with pytest.raises(ValueError, match="Unknown service state left"):
        decoder.decode_update(_set("left", 4, 4))


_paths = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3).map(tuple)
_set_ops = st.tuples(st.just("s"), _paths, st.integers(-5, 5))
_batches = st.lists(_set_ops, min_size=1, max_size=4).map(tuple)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["left", "right"]), _batches), max_size=12))
def test_any_update_stream_survives_encode_json_parse_decode(stream: list[tuple[str, Any]]) -> None:
    snapshot = _singleton(_state("left", {}), _state("right", {}))
    encoder, decoder = create_service_state_encoder(), create_service_state_decoder()
    decoder.decode_snapshot(
        parse_wire_service_subscription_snapshot(encoder.encode_snapshot(snapshot).to_json())
    )
    sequences = {"left": 0, "right": 0}
    for member, ops in stream:
        sequences[member] += 1
        update = ServiceStateUpdate(member, sequences[member], ops)
        text = json.dumps(encoder.encode_update(update).to_json())
        assert decoder.decode_update(parse_wire_service_provider_update(json.loads(text))) == update
