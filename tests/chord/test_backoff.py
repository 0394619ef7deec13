"""chord.Backoff: the one exponential backoff, jittered below its ceiling, random injected."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chord import Backoff


def test_ceilings_double_up_to_the_maximum() -> None:
    backoff = Backoff(initial=0.5, maximum=3.0, jitter=0.0)
    assert list(itertools.islice(backoff.delays(), 5)) == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff.ceiling(10_000) == 3.0  # no overflow however long the outage


def test_jitter_draws_below_the_ceiling_from_the_injected_random() -> None:
    draws = iter([0.0, 0.5, 0.999])
    backoff = Backoff(initial=1.0, maximum=8.0, jitter=0.5, random=lambda: next(draws))
    assert [backoff.delay(n) for n in (1, 2, 3)] == [1.0, 1.5, pytest.approx(2.002)]


def test_a_seeded_random_gives_the_same_delays_every_run() -> None:
    def delays() -> list[float]:
        backoff = Backoff(random=random.Random(7).random)
        return list(itertools.islice(backoff.delays(), 6))

    first = delays()
    assert first == delays()
    assert len(set(first)) > 1


@given(st.integers(1, 60), st.floats(0, 0.9999), st.floats(0, 1))
def test_every_delay_stays_between_the_jitter_floor_and_the_cap(
    attempt: int, draw: float, jitter: float
) -> None:
    backoff = Backoff(initial=0.05, maximum=2.0, jitter=jitter, random=lambda: draw)
    delay = backoff.delay(attempt)
    assert (1 - jitter) * backoff.ceiling(attempt) - 1e-12 <= delay <= backoff.ceiling(attempt)
    assert delay <= 2.0


def test_bad_values_are_named() -> None:
    with pytest.raises(ValueError, match="0 < initial <= maximum"):
        Backoff(initial=0)
    with pytest.raises(ValueError, match="jitter"):
        Backoff(jitter=2)
    with pytest.raises(ValueError, match="attempt numbers start at 1"):
        Backoff().delay(0)
