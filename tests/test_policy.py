"""Durations (spec §2.4) and the retry schedule (spec §3.1)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import tenacity
from hypothesis import given, settings
from hypothesis import strategies as st

from woml_magic.policy import DurationError, RetryPolicy, format_duration, parse_duration

S = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("250ms", timedelta(milliseconds=250)),
        ("1s", S),
        ("1.5s", timedelta(seconds=1.5)),
        ("2m", timedelta(minutes=2)),
        ("1m30s", timedelta(seconds=90)),
        ("1h", timedelta(hours=1)),
        ("1h2m3s4ms", timedelta(hours=1, minutes=2, seconds=3, milliseconds=4)),
        ("0s", timedelta(0)),
        ("0ms", timedelta(0)),
        ("24h", timedelta(hours=24)),
        ("90s", timedelta(seconds=90)),  # a unit may exceed the next one up
        ("0.5ms", timedelta(microseconds=500)),
        ("1h30m", timedelta(minutes=90)),
        ("1s500ms", timedelta(milliseconds=1500)),
    ],
)
def test_spec_2_4_duration_is_number_unit_groups_in_decreasing_order(
    text: str, expected: timedelta
) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty duration"),
        ("1", "has no unit"),
        ("30", "has no unit"),
        ("1.5", "has no unit"),
        ("1 s", "no spaces"),
        (" 1s", "no spaces"),
        ("1s ", "no spaces"),
        ("1m 30s", "no spaces"),
        ("-1s", "no sign"),
        ("+1s", "no sign"),
        ("1s1m", "in the order h, m, s, ms"),  # wrong unit order
        ("1ms1s", "in the order h, m, s, ms"),
        ("1s1s", "once each"),  # repeated unit
        ("1m2m", "once each"),
        ("1d", "cannot read"),
        ("1S", "cannot read"),
        ("1sec", "cannot read"),
        (".5s", "cannot read"),
        ("1.s", "cannot read"),
        ("1e3s", "cannot read"),
        ("s", "cannot read"),
        ("١s", "cannot read"),  # Arabic-Indic digit one: decimal digits are ASCII
        ("1" * 400 + "s", "far too long"),
        ("99999999999999h", "far too long"),
    ],
)
def test_spec_2_4_invalid_duration_names_the_value_and_what_is_allowed(
    text: str, says: str
) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    message = str(info.value)
    assert says in message
    assert "<number><unit>" in message
    assert len(message) < 250  # a huge value is shortened, not echoed whole


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.25, "250ms"),
        (0.0004, "0.4ms"),  # nonzero must not print as 0s
        (1, "1s"),
        (1.5, "1.5s"),
        (90, "1m30s"),
        (3600, "1h"),
        (3600 + 0.5, "1h0.5s"),
        (86400, "24h"),
    ],
)
def test_format_duration_writes_durations_as_people_do(seconds: float, text: str) -> None:
    assert format_duration(timedelta(seconds=seconds)) == text
    assert format_duration(seconds) == text


@settings(max_examples=300, deadline=None, database=None)
@given(st.integers(min_value=0, max_value=24 * 3_600_000))
def test_format_duration_round_trips_through_parse_duration_to_the_millisecond(ms: int) -> None:
    value = timedelta(milliseconds=ms)
    assert parse_duration(format_duration(value)) == value


def _waits(policy: RetryPolicy) -> list[float]:
    return [w.total_seconds() for w in policy.waits()]


@pytest.mark.parametrize(
    ("policy", "waits"),
    [
        # spec §3.1 examples
        (RetryPolicy(4, "exponential", S, 10 * S), [1, 2, 4]),
        (RetryPolicy(10, "exponential", S, 30 * S), [1, 2, 4, 8, 16, 30, 30, 30, 30]),
        # the seed's first example (its second is the spec's first, above)
        (RetryPolicy(3, "exponential", S, 30 * S), [1, 2]),
        # uncapped exponential: the last of 10 attempts waits 2^8 s
        (RetryPolicy(10, "exponential", S, None), [1, 2, 4, 8, 16, 32, 64, 128, 256]),
        (RetryPolicy(3, "fixed", 2 * S), [2, 2]),
        # retry-max-delay has no effect with fixed backoff (spec §2.2)
        (RetryPolicy(3, "fixed", 2 * S, 3 * S), [2, 2]),
        (RetryPolicy(3, "exponential", timedelta(0)), [0, 0]),
        (RetryPolicy(1, "exponential", S), []),
        (RetryPolicy(), []),
    ],
)
def test_spec_3_1_schedule(policy: RetryPolicy, waits: list[float]) -> None:
    assert _waits(policy) == waits
    assert len(policy.waits()) == policy.attempts - 1


def _tenacity_waits(attempts: int, delay: float, max_delay: float | None) -> list[float]:
    wait = (
        tenacity.wait_exponential(multiplier=delay)
        if max_delay is None
        else tenacity.wait_exponential(multiplier=delay, max=max_delay)
    )
    out = []
    for k in range(1, attempts):
        state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
        state.attempt_number = k
        out.append(wait(state))
    return out


@pytest.mark.parametrize("attempts", range(1, 11))
@pytest.mark.parametrize(
    ("delay", "max_delay"), [(1.0, 30.0), (1.0, None), (0.25, 10.0), (3.0, 3.0), (0.0, None)]
)
def test_spec_3_1_exponential_schedule_equals_tenacity_wait_exponential(
    attempts: int, delay: float, max_delay: float | None
) -> None:
    policy = RetryPolicy(
        attempts,
        "exponential",
        timedelta(seconds=delay),
        None if max_delay is None else timedelta(seconds=max_delay),
    )
    assert _waits(policy) == pytest.approx(_tenacity_waits(attempts, delay, max_delay))


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"attempts": 0}, "attempts must be 1..10"),
        ({"attempts": 11}, "attempts must be 1..10"),
        ({"backoff": "linear"}, "fixed or exponential"),
        ({"delay": timedelta(hours=25)}, "between 0 and 24h"),
        ({"delay": -S}, "between 0 and 24h"),
        ({"delay": 2 * S, "max_delay": S}, "at least delay"),
        ({"max_delay": timedelta(hours=25)}, "at most 24h"),
    ],
)
def test_retry_policy_refuses_values_outside_spec_2_2(kwargs: dict[str, object], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
