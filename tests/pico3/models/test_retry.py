"""Backoff policy, Retry-After parsing and the retry loop (time injected, never slept)."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chord.context import BACKGROUND, ContextCancelled, with_cancel
from pico3.models import ModelProviderError, RetryPolicy, parse_retry_after, retry_call


def test_backoff_doubles_from_the_base_and_is_capped() -> None:
    policy = RetryPolicy(max_retries=5, base_delay=2.0, max_delay=10.0, jitter=0.0)
    assert [policy.delay(n) for n in range(1, 6)] == [2.0, 4.0, 8.0, 10.0, 10.0]
    assert policy.delay(6) is None


def test_backoff_is_jittered_below_the_ceiling_and_retry_after_is_not() -> None:
    policy = RetryPolicy(max_retries=5, base_delay=2.0, max_delay=10.0)  # jitter 0.5
    assert [policy.delay(n, random=lambda: 0.0) for n in range(1, 5)] == [2.0, 4.0, 8.0, 10.0]
    assert [policy.delay(n, random=lambda: 0.5) for n in range(1, 5)] == [1.5, 3.0, 6.0, 7.5]
    assert policy.delay(4, random=lambda: 0.999) == pytest.approx(5.005)
    assert policy.delay(1, retry_after=7.5, random=lambda: 0.9) == 7.5
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=1.5)


def test_retry_after_wins_over_backoff_but_not_beyond_max_delay() -> None:
    policy = RetryPolicy(max_retries=3, base_delay=2.0, max_delay=30.0)
    assert policy.delay(1, retry_after=7.5) == 7.5
    assert policy.delay(1, retry_after=0.0) == 0.0
    assert policy.delay(1, retry_after=31.0) is None  # surfaced instead of a long hang


@given(
    st.integers(0, 10),
    st.floats(0, 100, allow_nan=False),
    st.floats(0, 1000, allow_nan=False),
    st.integers(1, 12),
)
@settings(max_examples=200, deadline=None)
def test_delays_never_exceed_the_cap(retries: int, base: float, cap: float, n: int) -> None:
    delay = RetryPolicy(max_retries=retries, base_delay=base, max_delay=cap).delay(n)
    assert (delay is None) == (n > retries)
    assert delay is None or 0 <= delay <= cap


def test_policy_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ValueError, match="base_delay"):
        RetryPolicy(base_delay=float("nan"))
    with pytest.raises(ValueError, match="retry numbers start at 1"):
        RetryPolicy().delay(0)


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after": " 1.5 "}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "-4"}) is None
    now = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    date = "Tue, 14 Nov 2023 22:13:30 GMT"
    assert parse_retry_after({"retry-after": date}, clock=lambda: now) == 10.0
    assert parse_retry_after({"retry-after": date}, clock=lambda: now + 60) == 0.0


class _Flaky:
    def __init__(self, errors: list[ModelProviderError]) -> None:
        self.errors = errors
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


@pytest.mark.anyio
async def test_retry_call_waits_per_retry_after_then_backoff() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    fn = _Flaky(
        [
            ModelProviderError("rate limited", retryable=True, retry_after=5.0, status=429),
            ModelProviderError("server", retryable=True, status=500),
        ]
    )
    told: list[tuple[int, float]] = []
    result = await retry_call(
        fn,
        RetryPolicy(max_retries=3, base_delay=1.0),
        BACKGROUND,
        sleep=sleep,
        on_retry=lambda n, d, _e: told.append((n, d)),
        random=lambda: 0.5,  # the backoff wait is 2.0 less a quarter
    )
    assert result == "ok" and fn.calls == 3
    assert slept == [5.0, 1.5]
    assert told == [(1, 5.0), (2, 1.5)]


@pytest.mark.anyio
async def test_non_retryable_errors_raise_at_once() -> None:
    async def sleep(seconds: float) -> None:
        raise AssertionError("must not wait")

    fn = _Flaky([ModelProviderError("bad request", retryable=False, status=400)])
    with pytest.raises(ModelProviderError, match="bad request"):
        await retry_call(fn, RetryPolicy(), BACKGROUND, sleep=sleep)
    assert fn.calls == 1


@pytest.mark.anyio
async def test_gives_up_after_max_retries_with_the_last_error() -> None:
    async def sleep(seconds: float) -> None:
        return None

    fn = _Flaky([ModelProviderError(f"e{i}", retryable=True) for i in range(5)])
    with pytest.raises(ModelProviderError, match="e2"):
        await retry_call(fn, RetryPolicy(max_retries=2), BACKGROUND, sleep=sleep)
    assert fn.calls == 3


@pytest.mark.anyio
async def test_abort_during_backoff_raises_context_cancelled() -> None:
    ctx, cancel = with_cancel(BACKGROUND)
    started = anyio.Event()

    async def sleep(seconds: float) -> None:
        started.set()
        await anyio.sleep_forever()

    fn = _Flaky([ModelProviderError("busy", retryable=True)])
    outcome: list[BaseException] = []

    async def run() -> None:
        try:
            await retry_call(fn, RetryPolicy(), ctx, sleep=sleep)
        except ContextCancelled as exc:
            outcome.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        cancel()
    assert len(outcome) == 1 and fn.calls == 1
