"""chord.services: service tokens and instance addresses."""

from __future__ import annotations

from typing import Protocol

import pytest

from chord.services import InstanceAddress, Service, define_service


class Greeter(Protocol):
    async def greet(self, name: str) -> str: ...


def test_define_service_defaults_to_remotable() -> None:
    token = define_service("demo.greeter", Greeter)
    assert token.id == "demo.greeter"
    assert token.local is False
    assert token.contract is Greeter


def test_local_service() -> None:
    assert define_service("pi.harness", local=True).local is True


def test_tokens_compare_by_id_and_locality() -> None:
    assert define_service("a") == define_service("a")
    assert define_service("a") != define_service("a", local=True)
    assert len({define_service("a"), define_service("a"), define_service("b")}) == 2


@pytest.mark.parametrize("bad", ["$chord.service", "$chord.anything"])
def test_reserved_prefix_is_rejected(bad: str) -> None:
    with pytest.raises(TypeError, match=r"\$chord\. are reserved"):
        define_service(bad)


def test_empty_id_is_rejected() -> None:
    with pytest.raises(TypeError, match="must not be empty"):
        define_service("")


def test_non_string_id_is_rejected() -> None:
    with pytest.raises(TypeError, match="must be a string"):
        Service(42)  # type: ignore[arg-type]


def test_instance_address_validates_key_and_generation() -> None:
    addr = InstanceAddress("call-1", 1)
    assert addr < InstanceAddress("call-1", 2) < InstanceAddress("call-2", 1)
    with pytest.raises(TypeError, match="key"):
        InstanceAddress("", 1)
    with pytest.raises(TypeError, match="generation"):
        InstanceAddress("k", 0)
    with pytest.raises(TypeError, match="generation"):
        InstanceAddress("k", True)
