"""The service grammar: exact JSON shapes, control calls and strict parsers (docs/design/chord.md#service-calls, #snapshots-and-updates)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from chord.remote import (
    REMOTE_SERVICE_ERROR_CODES,
    SERVICE_CONTROL_ID,
    CatalogueControlCall,
    RemoteServiceError,
    ServiceCall,
    ServiceCatalogueEntry,
    ServiceClosedUpdate,
    ServiceGrammarError,
    ServiceInstanceSnapshot,
    ServiceMethodSnapshot,
    ServiceReplacedUpdate,
    ServiceResetUpdate,
    ServiceSpawnedUpdate,
    ServiceStateSnapshot,
    ServiceStateUpdate,
    ServiceSubscriptionSnapshot,
    ServiceUnavailableUpdate,
    SubscribeControlCall,
    UnsubscribeControlCall,
    decode_service_control_call,
    is_remote_service_error_code,
    parse_service_call,
    parse_service_catalogue,
    parse_service_provider_update,
    parse_service_subscription_snapshot,
    parse_wire_service_provider_update,
    parse_wire_service_subscription_snapshot,
    service_catalogue_call,
    service_subscribe_call,
    service_unsubscribe_call,
)
from chord.services import InstanceAddress
from tests.chord.remote.grammar_examples import SNAPSHOT, UPDATES

# -- errors -----------------------------------------------------------------------------------


def test_error_codes_are_the_documented_eight() -> None:
    assert set(REMOTE_SERVICE_ERROR_CODES) == {
        "service_not_allowed",
        "service_not_found",
        "service_mode_mismatch",
        "service_member_not_found",
        "service_member_mismatch",
        "service_instance_not_found",
        "service_stale_instance",
        "service_invalid_value",
    }
    assert is_remote_service_error_code("service_not_found")
    assert not is_remote_service_error_code("internal_error")
    assert not is_remote_service_error_code(None)


def test_remote_service_error_carries_code_and_message() -> None:
    error = RemoteServiceError("service_not_found", "Unknown remote service x")
    assert error.code == "service_not_found"
    assert error.message == "Unknown remote service x"
    assert "service_not_found" in str(error) and "Unknown remote service x" in str(error)
    with pytest.raises(TypeError, match="Unknown remote service error code"):
        RemoteServiceError("nope", "x")  # type: ignore[arg-type]


# -- calls and control calls (item 68) --------------------------------------------------------


def test_service_call_json_shape_is_camel_case_and_omits_missing_instance() -> None:
    assert ServiceCall("a.b", "m", (1, "x")).to_json() == {
        "serviceId": "a.b",
        "member": "m",
        "args": [1, "x"],
    }
    keyed = ServiceCall("a.b", "m", (), InstanceAddress("k", 1)).to_json()
    assert keyed == {
        "serviceId": "a.b",
        "instance": {"key": "k", "generation": 1},
        "member": "m",
        "args": [],
    }


def test_control_calls_round_trip_through_json() -> None:
    # item 68
    calls = [
        service_catalogue_call(),
        service_subscribe_call("sub-1", "test.models", "keyed"),
        service_unsubscribe_call("sub-1"),
    ]
    decoded = [
        decode_service_control_call(parse_service_call(json.loads(json.dumps(call.to_json()))))
        for call in calls
    ]
    assert decoded == [
        CatalogueControlCall(),
        SubscribeControlCall("sub-1", "test.models", "keyed"),
        UnsubscribeControlCall("sub-1"),
    ]
    assert calls[1].to_json() == {
        "serviceId": SERVICE_CONTROL_ID,
        "member": "subscribe",
        "args": ["sub-1", "test.models", "keyed"],
    }


@pytest.mark.parametrize(
    "call",
    [
        ServiceCall(SERVICE_CONTROL_ID, "catalogue", ("extra",)),
        ServiceCall(SERVICE_CONTROL_ID, "subscribe", ("sub", "svc", "many")),
        ServiceCall(SERVICE_CONTROL_ID, "subscribe", ("", "svc", "keyed")),
        ServiceCall(SERVICE_CONTROL_ID, "subscribe", ("sub", "svc")),
        ServiceCall(SERVICE_CONTROL_ID, "unsubscribe", (1,)),
        ServiceCall(SERVICE_CONTROL_ID, "destroy", ()),
        ServiceCall(SERVICE_CONTROL_ID, "catalogue", (), InstanceAddress("k", 1)),
        ServiceCall("test.models", "catalogue", ()),
    ],
)
def test_malformed_or_foreign_control_calls_are_not_recognised(call: ServiceCall) -> None:
    assert decode_service_control_call(call) is None


def test_parse_service_call_accepts_the_exact_shape() -> None:
    call = parse_service_call(
        {
            "serviceId": "s",
            "instance": {"key": "k", "generation": 3},
            "member": "m",
            "args": [{"a": 1}],
        }
    )
    assert call == ServiceCall("s", "m", ({"a": 1},), InstanceAddress("k", 3))


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"serviceId": "s", "member": "m", "args": [], "extra": 1}, "unexpected key 'extra'"),
        ({"serviceId": "s", "member": "m"}, "missing key 'args'"),
        ({"serviceId": "", "member": "m", "args": []}, "$.serviceId"),
        ({"serviceId": "s", "member": "m", "args": {}}, "$.args"),
        ({"serviceId": "s", "member": "m", "args": [], "instance": {"key": "k"}}, "missing key"),
        (
            {
                "serviceId": "s",
                "member": "m",
                "args": [],
                "instance": {"key": "k", "generation": 0},
            },
            "$.instance.generation",
        ),
        (
            {
                "serviceId": "s",
                "member": "m",
                "args": [],
                "instance": {"key": "k", "generation": True},
            },
            "$.instance.generation",
        ),
        (["s", "m", []], "expected an object"),
    ],
)
def test_parse_service_call_rejects_bad_shapes_naming_the_field(value: object, where: str) -> None:
    with pytest.raises(ServiceGrammarError, match="Invalid service") as caught:
        parse_service_call(value)
    assert where in str(caught.value)


def test_parse_service_catalogue_checks_modes_and_unique_ids() -> None:
    entries = parse_service_catalogue(
        [{"serviceId": "a", "mode": "singleton"}, {"serviceId": "b", "mode": "keyed"}]
    )
    assert entries == (ServiceCatalogueEntry("a", "singleton"), ServiceCatalogueEntry("b", "keyed"))
    assert [entry.to_json() for entry in entries] == [
        {"serviceId": "a", "mode": "singleton"},
        {"serviceId": "b", "mode": "keyed"},
    ]
    with pytest.raises(ServiceGrammarError, match=r"Invalid service catalogue.*\$\[0\]\.mode"):
        parse_service_catalogue([{"serviceId": "a", "mode": "many"}])
    with pytest.raises(ServiceGrammarError, match="duplicate service id 'a'"):
        parse_service_catalogue(
            [{"serviceId": "a", "mode": "keyed"}, {"serviceId": "a", "mode": "keyed"}]
        )
    with pytest.raises(ServiceGrammarError, match="unexpected key"):
        parse_service_catalogue([{"serviceId": "a", "mode": "keyed", "x": 1}])
    with pytest.raises(ServiceGrammarError, match="expected an array"):
        parse_service_catalogue({"serviceId": "a"})


# -- snapshots and updates --------------------------------------------------------------------


def test_snapshot_parse_and_to_json_round_trip_exactly() -> None:
    snapshot = parse_service_subscription_snapshot(copy.deepcopy(SNAPSHOT))
    assert snapshot == ServiceSubscriptionSnapshot(
        "test.dialog",
        "keyed",
        (
            ServiceInstanceSnapshot(
                (
                    ServiceStateSnapshot("request", 3, (("r", {"q": "?"}),)),
                    ServiceMethodSnapshot("submit"),
                ),
                InstanceAddress("k", 2),
            ),
        ),
    )
    assert snapshot.to_json() == SNAPSHOT


@pytest.mark.parametrize("update", UPDATES, ids=[u["type"] for u in UPDATES])
def test_every_update_type_round_trips_through_json_text(update: dict[str, Any]) -> None:
    parsed = parse_service_provider_update(json.loads(json.dumps(update)))
    assert parsed.type == update["type"]
    assert parsed.to_json() == update
    assert json.loads(json.dumps(parsed.to_json())) == update


def test_decoded_parse_turns_op_arrays_into_tuples() -> None:
    parsed = parse_service_provider_update(UPDATES[1])
    assert isinstance(parsed, ServiceStateUpdate)
    assert parsed.ops == (("p", ("items",), 0, 1, [{"x": 1}]), ("d", ("gone",)))
    assert parsed.instance == InstanceAddress("k", 2)


def test_update_records_serialise_to_the_typescript_shapes() -> None:
    address = InstanceAddress("k", 1)
    instance = ServiceInstanceSnapshot((ServiceMethodSnapshot("go"),), address)
    assert ServiceStateUpdate("s", 1, (("s", ("a",), 1),)).to_json() == {
        "type": "state",
        "member": "s",
        "sequence": 1,
        "ops": [["s", ["a"], 1]],
    }
    assert ServiceUnavailableUpdate().to_json() == {"type": "unavailable"}
    assert ServiceClosedUpdate(address).to_json() == {
        "type": "closed",
        "instance": {"key": "k", "generation": 1},
    }
    assert ServiceSpawnedUpdate(instance).to_json() == {
        "type": "spawned",
        "instance": {
            "instance": {"key": "k", "generation": 1},
            "members": [{"name": "go", "kind": "method"}],
        },
    }
    assert ServiceReplacedUpdate(
        ServiceInstanceSnapshot((ServiceMethodSnapshot("go"),))
    ).to_json() == {
        "type": "replaced",
        "snapshot": {"members": [{"name": "go", "kind": "method"}]},
    }
    reset = ServiceResetUpdate(ServiceSubscriptionSnapshot("x", "singleton", ()))
    assert reset.to_json() == {
        "type": "reset",
        "snapshot": {"serviceId": "x", "mode": "singleton", "instances": []},
    }


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"type": "state", "member": "s", "sequence": 0, "ops": []}, r"\$\.sequence"),
        ({"type": "state", "member": "s", "sequence": 1.5, "ops": []}, r"\$\.sequence"),
        (
            {"type": "state", "member": "s", "sequence": 1, "ops": [], "extra": 1},
            "unexpected key 'extra'",
        ),
        ({"type": "state", "member": "s", "sequence": 1}, "missing key 'ops'"),
        ({"type": "state", "member": "", "sequence": 1, "ops": []}, r"\$\.member"),
        ({"type": "state", "member": "s", "sequence": 1, "ops": [["x", ["a"]]]}, r"\$\.ops\b"),
        (
            {"type": "state", "member": "s", "sequence": 1, "ops": [["s", ["__proto__"], 1]]},
            "bad op",
        ),
        (
            {"type": "state", "member": "s", "sequence": 1, "ops": [["s", ["a"], float("nan")]]},
            "bad op",
        ),
        ({"type": "explode"}, "unknown update type 'explode'"),
        ({"kind": "state"}, r"\$\.type"),
        ({"type": "unavailable", "reason": "x"}, "unexpected key 'reason'"),
        (
            {"type": "closed", "instance": {"key": "k", "generation": 0}},
            r"\$\.instance\.generation",
        ),
        ({"type": "spawned", "instance": {"members": [{"name": "m", "kind": "getter"}]}}, "kind"),
        (
            {
                "type": "spawned",
                "instance": {"members": [{"name": "m", "kind": "method", "sequence": 1}]},
            },
            "unexpected key 'sequence'",
        ),
        (
            {
                "type": "replaced",
                "snapshot": {
                    "members": [{"name": "s", "kind": "state", "sequence": -1, "ops": []}]
                },
            },
            r"\$\.snapshot\.members\[0\]\.sequence",
        ),
        (
            {"type": "reset", "snapshot": {**SNAPSHOT, "mode": "many"}},
            r"\$\.snapshot\.mode",
        ),
    ],
)
def test_update_parser_rejects_bad_input_naming_the_field(
    update: dict[str, Any], message: str
) -> None:
    # item 68
    with pytest.raises(ServiceGrammarError, match="Invalid service") as caught:
        parse_service_provider_update(update)
    assert caught.match(message)


def test_reset_must_contain_only_full_root_replacements() -> None:
    delta_reset = copy.deepcopy(SNAPSHOT)
    delta_reset["instances"][0]["members"][0]["ops"] = [["s", ["q"], "!"]]
    with pytest.raises(ServiceGrammarError, match="full root replacements"):
        parse_service_provider_update({"type": "reset", "snapshot": delta_reset})
    two_ops = copy.deepcopy(SNAPSHOT)
    two_ops["instances"][0]["members"][0]["ops"] = [["r", {}], ["s", ["q"], "!"]]
    with pytest.raises(ServiceGrammarError, match="full root replacements"):
        parse_wire_service_provider_update({"type": "reset", "snapshot": two_ops})
    # An ordinary snapshot may carry any batch (an encoded one, say).
    assert (
        parse_service_subscription_snapshot(delta_reset).instances[0].members[0].name == "request"
    )


def test_wire_parsers_accept_compressed_ops_and_keep_them_as_arrays() -> None:
    update = {
        "type": "state",
        "member": "state",
        "sequence": 2,
        "ops": [["#", 0, ["revision"]], ["s", 0, 2], ["s", 3]],
    }
    parsed = parse_wire_service_provider_update(update)
    assert isinstance(parsed, ServiceStateUpdate)
    assert parsed.ops == (["#", 0, ["revision"]], ["s", 0, 2], ["s", 3])
    assert parsed.to_json() == update
    with pytest.raises(ServiceGrammarError, match="Invalid service state update"):
        parse_service_provider_update(update)  # the decoded grammar has no path ids
    with pytest.raises(ServiceGrammarError, match="bad wire op"):
        parse_wire_service_provider_update({**update, "ops": [["#", 0, ["__proto__"]]]})
    snapshot = parse_wire_service_subscription_snapshot(SNAPSHOT)
    assert snapshot.to_json() == SNAPSHOT
