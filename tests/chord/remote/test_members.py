"""Member classification of remotable implementations (docs/design/chord.md#member-classification)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from chord.context import Context
from chord.remote import classify_implementation
from chord.remote.members import MethodMember, StateMember
from chord.state import ReplicaState, replicated_state


async def _echo(value: Any, ctx: Context) -> Any:
    return value


def test_mapping_members_are_sorted_and_classified() -> None:
    state = replicated_state({"n": 0})
    classified = classify_implementation("test.svc", {"zeta": _echo, "alpha": state})
    assert list(classified.members) == ["alpha", "zeta"]
    assert classified.shape == {"alpha": "state", "zeta": "method"}
    assert isinstance(classified.members["alpha"], StateMember)
    assert classified.members["alpha"].state is state
    member = classified.members["zeta"]
    assert isinstance(member, MethodMember) and member.function is _echo


def test_namespace_and_class_instances_expose_public_attributes_and_methods() -> None:
    class Counter:
        shared_state_is_not_assumed = None  # class data that is neither: refused below

        def __init__(self) -> None:
            self.state = replicated_state([])
            self._secret = "hidden"

        async def bump(self, ctx: Context) -> None:
            return None

        @staticmethod
        def version(ctx: Context) -> str:
            return "1"

        def _private(self) -> None:
            return None

    with pytest.raises(
        TypeError, match=r"test\.counter\.shared_state_is_not_assumed is not remotely"
    ):
        classify_implementation("test.counter", Counter())
    del Counter.shared_state_is_not_assumed
    classified = classify_implementation("test.counter", Counter())
    assert classified.shape == {"bump": "method", "state": "state", "version": "method"}
    namespace = classify_implementation("test.ns", SimpleNamespace(run=_echo))
    assert namespace.shape == {"run": "method"}


def test_slots_fields_are_plain_attributes() -> None:
    class Slotted:
        __slots__ = ("run",)

        def __init__(self) -> None:
            self.run = _echo

    assert classify_implementation("test.slotted", Slotted()).shape == {"run": "method"}


def test_properties_and_descriptors_are_refused_without_running_them() -> None:
    ran: list[str] = []

    class WithProperty:
        @property
        def state(self) -> Any:
            ran.append("getter")
            return replicated_state({})

    with pytest.raises(TypeError, match=r"test\.prop\.state must be a plain attribute.*property"):
        classify_implementation("test.prop", WithProperty())
    assert ran == []


@pytest.mark.parametrize("value", [1, "text", {"a": 1}, [1], None, b"x"])
def test_values_that_are_neither_methods_nor_states_are_not_remotely_exposable(
    value: object,
) -> None:
    with pytest.raises(TypeError, match=r"test\.bad\.member is not remotely exposable"):
        classify_implementation("test.bad", {"member": value, "ok": _echo})


def test_duck_typed_states_are_not_states() -> None:
    class LooksLikeState:
        value = {"n": 1}

        def subscribe(self, listener: Any) -> Any:
            return lambda: None

    with pytest.raises(TypeError, match="not remotely exposable"):
        classify_implementation("test.duck", {"state": LooksLikeState()})


def test_consumer_replicas_cannot_be_provided() -> None:
    with pytest.raises(TypeError, match=r"test\.replica\.state is a consumer replica"):
        classify_implementation("test.replica", {"state": ReplicaState()})


@pytest.mark.parametrize("implementation", [None, 3, "x", [], (), dict, True])
def test_implementation_must_be_an_object(implementation: object) -> None:
    with pytest.raises(TypeError, match="implementation must be an object"):
        classify_implementation("test.obj", implementation)


def test_no_members_is_refused() -> None:
    with pytest.raises(TypeError, match=r"test\.empty has no members"):
        classify_implementation("test.empty", {})
    with pytest.raises(TypeError, match="has no members"):
        classify_implementation("test.empty", object())


def test_private_mapping_keys_are_refused() -> None:
    with pytest.raises(TypeError, match=r"test\.map\._hidden is private"):
        classify_implementation("test.map", {"_hidden": _echo, "run": _echo})
