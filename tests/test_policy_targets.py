"""The same policy in other engines (spec §11): ``step.policy.to(target)``.

Golden translations first: spec §3.1's examples, a fixed, a zero and an uncapped
policy and a single attempt, with their exact code, data, waits and warnings.

Then the translations are verified, not asserted, over 500 random valid policies
(a seeded generator: every attempt count, both backoffs, zero, sub-second, fractional,
whole and odd microsecond delays up to 24h, capped and uncapped):

- tenacity: the real ``wait`` and ``stop`` objects built from ``data``, called with real
  ``RetryCallState``s, and the pasted ``code`` itself run by tenacity against a function
  that always fails, with tenacity's sleep recorded instead of slept;
- stamina: the pasted ``code`` run by stamina (its real backoff computation and stop
  condition; stamina's synchronous retries sleep through tenacity's ``nap``) against a
  function that always fails, sleeps recorded the same way, and its instrumentation's
  ``RetryDetails`` as a second witness;
- Temporal: for all 500, the pasted ``code`` builds the ``RetryPolicy`` of ``data`` and the
  SDK turns it into the proto it sends (no field left to the server's defaults); then, on
  a real dev server, a subset (see ``test_temporal_server_waits_what_the_translation_says``);
- Step Functions: there is no engine here, so the retrier is checked against the ASL's
  documented rules (field types and ranges, and retry k waiting
  ``IntervalSeconds × BackoffRate^(k−1)`` capped by ``MaxDelaySeconds`` for
  ``MaxAttempts`` retries: AWS Step Functions Developer Guide, "Handling errors"),
  written out here independently of the module.

Wherever a translation claims ``same``, its target's waits equal WOML's ``waits()``;
wherever it does not, the reason is one the warnings name.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
import stamina
import tenacity
import tenacity.nap

import woml_magic as wm
from woml_magic.policy import MAX_DURATION, RetryPolicy
from woml_magic.policy_targets import TARGETS, Translation, translate, translate_all

SEED = 20_241_116
COUNT = 500


def step_policy(attrs: str) -> RetryPolicy:
    return wm.parse(f'<step id="s" {attrs}><script>return 1;</script></step>').steps[0].policy


def close(a: list[float] | tuple[float, ...], b: list[float] | tuple[float, ...]) -> bool:
    """Equal waits: within 1e-9 s, or 1e-12 relative for waits of weeks (float rounding)."""
    return len(a) == len(b) and all(
        math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-9) for x, y in zip(a, b, strict=True)
    )


def woml_waits(policy: RetryPolicy) -> list[float]:
    return [w.total_seconds() for w in policy.waits()]


# -- golden -----------------------------------------------------------------------------

TEMPORAL_TIMEOUTS = (
    "Temporal retries an activity whose start-to-close or heartbeat timeout fired, where "
    "WOML fails a timed-out or interrupted attempt closed, so the policy lists "
    "TemporalTimeout:StartToClose and TemporalTimeout:Heartbeat as non-retryable (a server "
    "feature, checked on the dev server 1.32)."
)
TEMPORAL_OTHERS = (
    "Temporal retries every other activity failure, so raise what WOML fails closed (an "
    "invalid or oversized result, a call whose effect is unknown) as "
    "ApplicationError(..., non_retryable=True)."
)
SFN_ERRORS = (
    "States.TaskFailed retries every task error except States.Timeout (a timeout fails "
    "closed, as in WOML) but also crashes and service errors that WOML fails closed; list "
    "your task's own error names in ErrorEquals to retry only what it throws."
)
TENACITY_ERRORS = (
    "tenacity retries every exception by default and never stops a running attempt, while "
    "WOML retries only a thrown error and fails a timed-out attempt closed; pass "
    "retry=retry_if_exception_type(...) with the errors that mean the call surely failed."
)
STAMINA_STANDING = (
    "stamina adds a random jitter of up to wait_jitter (1 s by default) to every wait and "
    "WOML adds none, so wait_jitter=0.",
    "stamina gives up after timeout (45 s by default) of retrying in total and WOML has no "
    "overall limit, so timeout=None.",
    "stamina retries what on= names and never stops a running attempt, while WOML retries "
    "only a thrown error and fails a timed-out attempt closed; name the errors that mean "
    "the call surely failed (Exception is the widest).",
)
NON_RETRYABLE = '["TemporalTimeout:StartToClose", "TemporalTimeout:Heartbeat"]'


def sfn_count(n: int) -> str:
    return (
        f"Step Functions' MaxAttempts counts retries after the first attempt, so "
        f'retry="{n}" is MaxAttempts {n - 1}.'
    )


SPEC_10 = 'retry="10" retry-backoff="exponential" retry-delay="1s" retry-max-delay="30s"'
SPEC_10_WAITS = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0)


def test_spec_example_retry_10_exponential_1s_max_30s_in_every_target() -> None:
    policy = step_policy(SPEC_10)
    got = translate_all(policy)
    assert list(got) == ["temporal", "stepfunctions", "tenacity", "stamina"]
    for t in got.values():
        assert t.delays == SPEC_10_WAITS
        assert t.same
        assert t.woml_delays == SPEC_10_WAITS

    temporal = got["temporal"]
    assert temporal.code == (
        "from datetime import timedelta\n\n"
        "from temporalio.common import RetryPolicy\n\n"
        "retry_policy = RetryPolicy(\n"
        "    initial_interval=timedelta(seconds=1),\n"
        "    backoff_coefficient=2.0,\n"
        "    maximum_interval=timedelta(seconds=30),\n"
        "    maximum_attempts=10,\n"
        f"    non_retryable_error_types={NON_RETRYABLE},\n"
        ")"
    )
    assert temporal.data == {
        "initial_interval": timedelta(seconds=1),
        "backoff_coefficient": 2.0,
        "maximum_interval": timedelta(seconds=30),
        "maximum_attempts": 10,
        "non_retryable_error_types": ["TemporalTimeout:StartToClose", "TemporalTimeout:Heartbeat"],
    }
    assert temporal.warnings == (TEMPORAL_TIMEOUTS, TEMPORAL_OTHERS)

    sfn = got["stepfunctions"]
    assert sfn.code == (
        '"Retry": [\n'
        "  {\n"
        '    "ErrorEquals": ["States.TaskFailed"],\n'
        '    "IntervalSeconds": 1,\n'
        '    "BackoffRate": 2.0,\n'
        '    "MaxAttempts": 9,\n'
        '    "MaxDelaySeconds": 30,\n'
        '    "JitterStrategy": "NONE"\n'
        "  }\n"
        "]"
    )
    assert sfn.data == {
        "ErrorEquals": ["States.TaskFailed"],
        "IntervalSeconds": 1,
        "BackoffRate": 2.0,
        "MaxAttempts": 9,
        "MaxDelaySeconds": 30,
        "JitterStrategy": "NONE",
    }
    assert sfn.warnings == (sfn_count(10), SFN_ERRORS)

    ten = got["tenacity"]
    assert ten.code == (
        "from tenacity import retry, stop_after_attempt, wait_exponential\n\n"
        "@retry(stop=stop_after_attempt(10), wait=wait_exponential(multiplier=1, max=30), "
        "reraise=True)\n"
        "def step(): ..."
    )
    assert ten.data == {
        "stop": {"stop_after_attempt": {"max_attempt_number": 10}},
        "wait": {"wait_exponential": {"multiplier": 1.0, "max": 30.0}},
        "reraise": True,
    }
    assert ten.warnings == (TENACITY_ERRORS,)

    sta = got["stamina"]
    assert sta.code == (
        "import stamina\n\n"
        "@stamina.retry(\n"
        "    on=Exception,\n"
        "    attempts=10,\n"
        "    timeout=None,\n"
        "    wait_initial=1,\n"
        "    wait_max=30,\n"
        "    wait_jitter=0,\n"
        "    wait_exp_base=2,\n"
        ")\n"
        "def step(): ..."
    )
    assert sta.data == {
        "on": "Exception",
        "attempts": 10,
        "timeout": None,
        "wait_initial": 1.0,
        "wait_max": 30.0,
        "wait_jitter": 0.0,
        "wait_exp_base": 2.0,
    }
    assert sta.warnings == STAMINA_STANDING


def test_fixed_fractional_delay_is_exact_except_on_step_functions() -> None:
    policy = step_policy('retry="3" retry-delay="1.5s" retry-max-delay="20s"')
    got = translate_all(policy)
    assert got["temporal"].data == {
        "initial_interval": timedelta(milliseconds=1500),
        "backoff_coefficient": 1.0,
        # retry-max-delay has no effect with fixed backoff (spec §2.2)
        "maximum_interval": timedelta(milliseconds=1500),
        "maximum_attempts": 3,
        "non_retryable_error_types": ["TemporalTimeout:StartToClose", "TemporalTimeout:Heartbeat"],
    }
    assert "initial_interval=timedelta(milliseconds=1500)," in got["temporal"].code
    assert got["tenacity"].data["wait"] == {"wait_fixed": {"wait": 1.5}}
    assert "wait=wait_fixed(1.5)" in got["tenacity"].code
    assert got["stamina"].data | {"on": None} == {
        "on": None, "attempts": 3, "timeout": None, "wait_initial": 1.5, "wait_max": 1.5,
        "wait_jitter": 0.0, "wait_exp_base": 1.0,
    }
    for target in ("temporal", "tenacity", "stamina"):
        assert got[target].delays == (1.5, 1.5)
        assert got[target].same
    sfn = got["stepfunctions"]
    assert sfn.data == {
        "ErrorEquals": ["States.TaskFailed"],
        "IntervalSeconds": 2,
        "BackoffRate": 1.0,
        "MaxAttempts": 2,
        "JitterStrategy": "NONE",
    }
    assert sfn.delays == (2.0, 2.0)
    assert not sfn.same
    assert sfn.warnings == (
        sfn_count(3),
        "IntervalSeconds is a whole number of seconds, at least 1, so retry-delay=1.5s "
        "cannot be said; it is rounded to 2 s.",
        SFN_ERRORS,
    )


def test_zero_delay_cannot_be_said_on_temporal_or_step_functions() -> None:
    policy = step_policy('retry="3" retry-backoff="exponential" retry-delay="0s" '
                         'retry-max-delay="5s"')
    got = translate_all(policy)
    temporal = got["temporal"]
    assert temporal.code == (
        "from datetime import timedelta\n\n"
        "from temporalio.common import RetryPolicy\n\n"
        "retry_policy = RetryPolicy(\n"
        "    initial_interval=timedelta(milliseconds=1),\n"
        "    backoff_coefficient=1.0,\n"
        "    maximum_interval=timedelta(milliseconds=1),\n"
        "    maximum_attempts=3,\n"
        f"    non_retryable_error_types={NON_RETRYABLE},\n"
        ")"
    )
    assert temporal.delays == (0.001, 0.001)
    assert not temporal.same
    assert temporal.warnings == (
        "Temporal turns initial_interval=0 into 1 s, so a wait of 0 s cannot be said; the "
        "policy waits 1ms instead.",
        TEMPORAL_TIMEOUTS,
        TEMPORAL_OTHERS,
    )
    sfn = got["stepfunctions"]
    assert sfn.data == {
        "ErrorEquals": ["States.TaskFailed"],
        "IntervalSeconds": 1,
        "BackoffRate": 1.0,
        "MaxAttempts": 2,
        "JitterStrategy": "NONE",
    }
    assert sfn.delays == (1.0, 1.0)
    assert not sfn.same
    assert sfn.warnings == (
        sfn_count(3),
        "IntervalSeconds is a whole number of seconds, at least 1, so a wait of 0 s cannot "
        "be said; the retrier waits 1 s instead.",
        SFN_ERRORS,
    )
    assert got["tenacity"].data["wait"] == {"wait_exponential": {"multiplier": 0.0, "max": 5.0}}
    assert got["stamina"].data["wait_initial"] == 0.0
    for target in ("tenacity", "stamina"):
        assert got[target].delays == (0.0, 0.0)
        assert got[target].same


def test_uncapped_exponential_gets_an_explicit_cap_where_the_target_has_a_default() -> None:
    # docs/semantics.md: retry="5" exponential 250ms → 250ms, 500ms, 1s, 2s
    policy = step_policy('retry="5" retry-backoff="exponential" retry-delay="250ms"')
    got = translate_all(policy)
    assert got["temporal"].data["maximum_interval"] == timedelta(seconds=2)
    assert got["temporal"].warnings[0] == (
        "WOML's exponential backoff without retry-max-delay is uncapped, but Temporal caps a "
        "missing maximum_interval at 100 × initial_interval, so maximum_interval is the last "
        "planned wait (2s)."
    )
    assert got["stamina"].data["wait_max"] == 2.0
    assert got["stamina"].warnings[0] == (
        "stamina caps every wait at wait_max (5 s by default) and cannot say uncapped, so "
        "wait_max is the last planned wait (2s)."
    )
    assert got["tenacity"].data["wait"] == {"wait_exponential": {"multiplier": 0.25}}
    assert "wait=wait_exponential(multiplier=0.25)" in got["tenacity"].code
    assert "MaxDelaySeconds" not in got["stepfunctions"].data
    for target in ("temporal", "tenacity", "stamina"):
        assert got[target].delays == (0.25, 0.5, 1.0, 2.0)
        assert got[target].same
    assert got["stepfunctions"].delays == (1.0, 2.0, 4.0, 8.0)
    assert "retry-delay=250ms cannot be said; it is rounded to 1 s." in (
        got["stepfunctions"].warnings[1]
    )


def test_a_single_attempt_is_each_targets_plain_no_retry() -> None:
    policy = step_policy('retry="1" retry-delay="0s"')
    got = translate_all(policy)
    assert got["temporal"].data == {"maximum_attempts": 1}
    assert got["temporal"].code == (
        "from temporalio.common import RetryPolicy\n\n"
        "retry_policy = RetryPolicy(\n    maximum_attempts=1,\n)"
    )
    assert got["stepfunctions"].data == {"ErrorEquals": ["States.TaskFailed"], "MaxAttempts": 0}
    assert got["tenacity"].code == (
        "from tenacity import retry, stop_after_attempt\n\n"
        "@retry(stop=stop_after_attempt(1), reraise=True)\n"
        "def step(): ..."
    )
    assert got["stamina"].data == {"on": "Exception", "attempts": 1}
    for target, t in got.items():
        assert t.delays == ()
        assert t.same
        assert t.warnings == ((sfn_count(1),) if target == "stepfunctions" else ())


def test_policy_to_is_translate_and_an_unknown_target_names_the_four() -> None:
    policy = step_policy(SPEC_10)
    assert policy.to("tenacity") == translate(policy, "tenacity")
    with pytest.raises(ValueError, match="unknown target 'step-functions'") as err:
        policy.to("step-functions")
    assert "choose one of temporal, stepfunctions, tenacity, stamina" in str(err.value)
    assert "did you mean 'stepfunctions'?" in str(err.value)


def test_a_translation_shows_itself_in_a_notebook_and_a_terminal() -> None:
    t = step_policy('retry="3" retry-delay="0s"').to("temporal")
    page = t._repr_html_()
    assert page.startswith('<div class="woml-policy-target" data-target="temporal" '
                           'data-same="false">')
    assert "waits 1ms, 1ms; WOML waits 0s, 0s" in page
    assert "<pre><code>from datetime import timedelta" in page
    assert "<li>Temporal turns initial_interval=0 into 1 s" in page
    assert "&quot;TemporalTimeout:StartToClose&quot;" in page  # escaped
    text = str(step_policy(SPEC_10).to("tenacity"))
    assert text.splitlines()[0] == (
        "tenacity · waits 1s, 2s, 4s, 8s, 16s, 30s, 30s, 30s, 30s, as WOML"
    )
    assert "@retry(stop=stop_after_attempt(10)" in text
    assert text.endswith(f"warnings:\n- {TENACITY_ERRORS}")


# -- 500 random valid policies ----------------------------------------------------------


def random_duration(rng: random.Random, low: timedelta, high: timedelta) -> timedelta:
    """A duration in [low, high] of a kind people write, or any microsecond value."""
    kind = rng.choices(["zero", "whole", "ms", "quarter", "any"], [8, 35, 15, 17, 25])[0]
    if kind == "zero":
        value = timedelta(0)
    elif kind == "whole":
        value = timedelta(seconds=rng.choice([rng.randint(1, 60), rng.randint(1, 86_400)]))
    elif kind == "ms":
        value = timedelta(milliseconds=rng.randint(1, 999))
    elif kind == "quarter":
        value = timedelta(seconds=rng.randint(1, 2400) / 4)
    else:
        value = timedelta(microseconds=rng.randint(0, MAX_DURATION // timedelta(microseconds=1)))
    if not low <= value <= high:
        span = (high - low) // timedelta(microseconds=1)
        value = low + timedelta(microseconds=rng.randint(0, span))
    return value


def random_policy(rng: random.Random) -> RetryPolicy:
    """Any policy ``RetryPolicy`` accepts (spec §2.2: attempts 1..10, delays 0..24h)."""
    delay = random_duration(rng, timedelta(0), MAX_DURATION)
    max_delay = None if rng.random() < 0.4 else random_duration(rng, delay, MAX_DURATION)
    return RetryPolicy(
        attempts=rng.randint(1, 10),
        backoff=rng.choice(["fixed", "exponential"]),
        delay=delay,
        max_delay=max_delay,
    )


EDGES = [
    step_policy(SPEC_10),
    step_policy('retry="4" retry-backoff="exponential" retry-delay="1s" retry-max-delay="10s"'),
    RetryPolicy(10, "exponential", MAX_DURATION),  # uncapped: the last wait is 256 days
    RetryPolicy(10, "exponential", MAX_DURATION, MAX_DURATION),
    RetryPolicy(2, "fixed", timedelta(0)),
    RetryPolicy(10, "exponential", timedelta(microseconds=1)),
    RetryPolicy(5, "exponential", timedelta(seconds=1), timedelta(milliseconds=2500)),
    RetryPolicy(5, "exponential", timedelta(seconds=3), timedelta(seconds=3)),
]


def all_policies() -> list[RetryPolicy]:
    rng = random.Random(SEED)
    return EDGES + [random_policy(rng) for _ in range(COUNT - len(EDGES))]


POLICIES = all_policies()


def test_the_sample_covers_what_the_targets_disagree_on() -> None:
    assert len(POLICIES) == COUNT
    assert {p.attempts for p in POLICIES} == set(range(1, 11))
    assert sum(p.delay == timedelta(0) and p.attempts > 1 for p in POLICIES) >= 20
    assert sum(p.max_delay is None and p.backoff == "exponential" for p in POLICIES) >= 50
    assert sum(p.delay.total_seconds() % 1 != 0 for p in POLICIES) >= 100


def test_same_is_false_exactly_where_a_warning_says_the_target_cannot_say_it() -> None:
    """temporal: only a 0 s wait; stepfunctions: any wait that is not a whole number of
    seconds ≥ 1; tenacity and stamina: never."""
    for policy in POLICIES:
        waits = woml_waits(policy)
        got = translate_all(policy)
        assert got["temporal"].same == (not waits or policy.delay > timedelta(0)), policy
        whole = all(w >= 1 and w.is_integer() for w in waits)
        assert got["stepfunctions"].same == whole, policy
        assert got["tenacity"].same, policy
        assert got["stamina"].same, policy
        for t in got.values():
            assert t.woml_delays == tuple(waits)
            if t.same:
                assert close(t.delays, waits), (t.target, policy)
            else:
                assert any("cannot be said" in w for w in t.warnings), (t.target, policy)


def tenacity_from_data(data: dict[str, Any]) -> tuple[Any, Any]:
    ((stop_name, stop_kw),) = data["stop"].items()
    stop = getattr(tenacity, stop_name)(**stop_kw)
    wait = tenacity.wait_none()
    if "wait" in data:
        ((wait_name, wait_kw),) = data["wait"].items()
        wait = getattr(tenacity, wait_name)(**wait_kw)
    return stop, wait


class Boom(Exception):
    pass


@pytest.fixture
def recorded_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """tenacity's default sleep (and so stamina's synchronous one) records, not sleeps."""
    sleeps: list[float] = []
    monkeypatch.setattr(tenacity.nap, "time", SimpleNamespace(sleep=sleeps.append))
    return sleeps


def run_pasted(code: str, sleeps: list[float], env: dict[str, Any]) -> tuple[int, list[float]]:
    """Run a decorator snippet on a function that always fails: (calls, sleeps)."""
    calls = 0

    def failing() -> None:
        nonlocal calls
        calls += 1
        raise Boom(f"attempt {calls}")

    assert code.endswith("\ndef step(): ...")
    namespace: dict[str, Any] = {"failing": failing, **env}
    exec(code.replace("def step(): ...", "def step():\n    failing()"), namespace)
    sleeps.clear()
    with pytest.raises(Boom):  # reraise: the last error, not tenacity's RetryError
        namespace["step"]()
    return calls, list(sleeps)


def test_tenacity_real_wait_and_stop_give_the_translated_waits(
    recorded_sleeps: list[float],
) -> None:
    mismatches = []
    for policy in POLICIES:
        t = policy.to("tenacity")
        stop, wait = tenacity_from_data(t.data)
        # What Retrying asks after attempt k fails: wait(k), then stop(k).
        state = tenacity.RetryCallState(None, None, (), {})
        waits = []
        for attempt in range(1, 20):
            state.attempt_number = attempt
            if stop(state):
                break
            waits.append(wait(state))
        # The snippet itself, run by tenacity.
        calls, slept = run_pasted(t.code, recorded_sleeps, {})
        ok = attempt == policy.attempts == calls and close(waits, t.delays)
        ok = ok and close(slept, t.delays) and (not t.same or close(waits, woml_waits(policy)))
        if not ok:
            mismatches.append((policy, attempt, calls, waits, slept, t.delays))
    assert not mismatches, mismatches[:3]


def test_stamina_real_backoff_gives_the_translated_waits(recorded_sleeps: list[float]) -> None:
    assert stamina.is_active()
    # testing mode (stamina ≥ 24.3) would make every wait 0
    assert not getattr(stamina, "is_testing", lambda: False)()
    details: list[Any] = []
    stamina.instrumentation.set_on_retry_hooks([details.append])
    try:
        mismatches = []
        for policy in POLICIES:
            t = policy.to("stamina")
            details.clear()
            # on=Exception in the snippet: our Boom stands in for "the call surely failed".
            calls, slept = run_pasted(t.code, recorded_sleeps, {"Exception": Boom})
            witnessed = [d.wait_for for d in details]
            ok = calls == policy.attempts and close(slept, t.delays)
            ok = ok and [d.retry_num for d in details] == list(range(1, policy.attempts))
            ok = ok and all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
                            for a, b in zip(witnessed, t.delays, strict=True))
            ok = ok and (not t.same or close(slept, woml_waits(policy)))
            if not ok:
                mismatches.append((policy, calls, slept, t.delays))
    finally:
        stamina.instrumentation.set_on_retry_hooks(None)
    assert not mismatches, mismatches[:3]


def test_stamina_snippet_says_what_the_data_says(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []

    def retry(**kw: Any) -> Callable[[Any], Any]:
        seen.append(kw)
        return lambda fn: fn

    monkeypatch.setitem(sys.modules, "stamina", SimpleNamespace(retry=retry))
    for policy in POLICIES:
        t = policy.to("stamina")
        exec(t.code, {})
        kw = seen.pop()
        assert kw.pop("on") is Exception
        assert kw == {k: v for k, v in t.data.items() if k != "on"}


def test_temporal_snippet_is_the_data_and_leaves_nothing_to_server_defaults() -> None:
    from temporalio.api.common.v1 import RetryPolicy as RetryPolicyProto
    from temporalio.common import RetryPolicy as TemporalRetryPolicy

    for policy in POLICIES:
        t = policy.to("temporal")
        namespace: dict[str, Any] = {}
        exec(t.code, namespace)
        built = namespace["retry_policy"]
        assert built == TemporalRetryPolicy(**t.data)
        proto = RetryPolicyProto()
        built.apply_to_proto(proto)  # the SDK's own validation, then what it sends
        assert proto.maximum_attempts == policy.attempts  # never 0, which is unlimited
        if policy.attempts == 1:
            continue
        initial = proto.initial_interval.ToTimedelta()
        maximum = proto.maximum_interval.ToTimedelta()
        assert initial > timedelta(0)  # the server would make 0 into 1 s
        assert maximum == t.data["maximum_interval"]  # not the SDK's 100 × initial
        assert list(proto.non_retryable_error_types) == [
            "TemporalTimeout:StartToClose", "TemporalTimeout:Heartbeat"]
        # The server's schedule (retry.go): min(initial × coefficient^(k−1), maximum).
        server = [
            min(initial * proto.backoff_coefficient ** (k - 1), maximum).total_seconds()
            for k in range(1, policy.attempts)
        ]
        assert close(server, t.delays), policy


def test_step_functions_retrier_follows_the_asl_rules() -> None:
    for policy in POLICIES:
        t = policy.to("stepfunctions")
        assert json.loads("{" + t.code + "}") == {"Retry": [t.data]}
        r = t.data
        assert r["ErrorEquals"] == ["States.TaskFailed"]
        assert isinstance(r["MaxAttempts"], int)
        assert r["MaxAttempts"] == policy.attempts - 1  # retries, not attempts
        interval = r.get("IntervalSeconds", 1)
        rate = r.get("BackoffRate", 2.0)
        assert isinstance(interval, int)
        assert 1 <= interval <= 99_999_999
        assert rate >= 1.0
        assert r.get("JitterStrategy", "NONE") == "NONE"
        if "MaxDelaySeconds" in r:
            assert isinstance(r["MaxDelaySeconds"], int)
            assert 0 < r["MaxDelaySeconds"] < 31_622_401
        # Retry k waits IntervalSeconds × BackoffRate^(k−1), capped by MaxDelaySeconds.
        asl = []
        for k in range(1, r["MaxAttempts"] + 1):
            wait = interval * rate ** (k - 1)
            asl.append(min(wait, r["MaxDelaySeconds"]) if "MaxDelaySeconds" in r else wait)
        assert close(asl, t.delays), policy
        assert t.same == close(asl, woml_waits(policy)), policy


# -- a real Temporal server -------------------------------------------------------------

#: A gap between attempt starts may exceed the planned wait by the server's dispatch
#: (10–25 ms measured, docs temporal-facts) and the activity's own run; never undercut it.
EARLY_S, LATE_S = 0.005, 0.05
#: Real time per subset policy: its longest wait and all its waits.
MAX_WAIT_S, SUM_WAITS_S = 0.3, 0.8
SUBSET = 15

#: Each workflow's plan (policy and timeouts) and each activity run's start times, by
#: workflow id; the worker runs in this process (an unsandboxed workflow reads them).
_PLANS: dict[str, dict[str, Any]] = {}
_STARTS: dict[str, list[float]] = {}


def scaled(policy: RetryPolicy) -> RetryPolicy:
    """``policy`` shrunk (to whole milliseconds) until its waits take little real time."""
    waits = woml_waits(policy)
    if not waits or max(waits) == 0:
        return policy
    f = min(1.0, MAX_WAIT_S / max(waits), SUM_WAITS_S / sum(waits))

    def shrink(d: timedelta) -> timedelta:
        return timedelta(milliseconds=round(d.total_seconds() * f * 1000))

    return RetryPolicy(policy.attempts, policy.backoff, shrink(policy.delay),
                       None if policy.max_delay is None else shrink(policy.max_delay))


def temporal_subset() -> list[RetryPolicy]:
    """Every backoff, a zero wait, an uncapped one and a single attempt among them."""
    picked = [RetryPolicy(1), RetryPolicy(3, "fixed", timedelta(0)),
              RetryPolicy(8, "exponential", timedelta(milliseconds=3))]
    retried = [p for p in POLICIES if p.attempts > 1]
    picked += [scaled(p) for p in random.Random(SEED + 1).sample(retried, SUBSET - len(picked))]
    return picked


@pytest.fixture(scope="module")
def temporal_server() -> Iterator[Any]:
    pytest.importorskip("temporalio")
    server = pytest.importorskip("woml_magic.temporal.server")
    try:
        server.temporal_binary()
    except wm.WomlError as err:
        pytest.skip(str(err))
    with server.DevServer() as dev:
        yield dev


try:  # the Temporal extra is optional: only the server tests below need it
    from temporalio import activity as temporal_activity
    from temporalio import workflow as temporal_workflow
except ImportError:
    temporal_workflow = None

if temporal_workflow is not None:

    @temporal_activity.defn(name="flaky")
    async def flaky(key: str) -> None:
        """One attempt: stamp its start, then fail (or outlive its timeout first)."""
        _STARTS.setdefault(key, []).append(time.monotonic())
        plan = _PLANS[key]
        if plan.get("overrun"):
            await asyncio.sleep(plan["overrun"])  # no heartbeat: a timeout fires first
        raise RuntimeError(f"attempt {temporal_activity.info().attempt} failed")

    @temporal_workflow.defn(name="policy-probe", sandboxed=False)
    class Probe:
        """One activity under the plan's RetryPolicy; returns how it ended."""

        @temporal_workflow.run
        async def run(self, key: str) -> str:
            from temporalio.common import RetryPolicy as TemporalRetryPolicy
            from temporalio.exceptions import ActivityError

            plan = _PLANS[key]
            try:
                await temporal_workflow.execute_activity(
                    flaky, key,
                    start_to_close_timeout=plan.get("start_to_close", timedelta(seconds=10)),
                    heartbeat_timeout=plan.get("heartbeat"),
                    retry_policy=TemporalRetryPolicy(**plan["policy"]),
                )
            except ActivityError as err:
                return type(err.cause).__name__
            return "succeeded"


def run_on_temporal(address: str, plans: list[dict[str, Any]]) -> list[tuple[int, list[float]]]:
    """Run one workflow per plan, one after another, with a worker in this process;
    (attempts, gaps between attempt starts) for each."""
    from temporalio.client import Client
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    async def main() -> list[tuple[int, list[float]]]:
        client = await Client.connect(address)
        queue = f"policy-targets-{uuid.uuid4().hex[:8]}"
        out = []
        async with Worker(client, task_queue=queue, workflows=[Probe], activities=[flaky],
                          workflow_runner=UnsandboxedWorkflowRunner()):
            for plan in plans:
                key = f"policy-{uuid.uuid4()}"
                _PLANS[key] = plan
                await client.execute_workflow(Probe.run, key, id=key, task_queue=queue)
                starts = _STARTS.pop(key, [])
                out.append((len(starts), [b - a for a, b in itertools.pairwise(starts)]))
        _PLANS.clear()
        return out

    return asyncio.run(main())


@pytest.mark.temporal
@pytest.mark.slow
def test_temporal_server_waits_what_the_translation_says(temporal_server: Any) -> None:
    """A real dev server runs each translated RetryPolicy; the gaps between attempt starts
    (stamped by the activity itself) are the translation's delays, within 5 ms early and
    50 ms late.

    A subset of 15, not the 500: each costs real time (its waits plus ~15 ms a retry), so
    the policies are scaled to waits of at most 0.3 s (0.8 s in all); the schedule's shape
    (attempts, backoff, cap, zero wait) is what is checked. The exact arithmetic of all
    500 is checked above against the proto the SDK sends.
    """
    subset = temporal_subset()
    translations = [p.to("temporal") for p in subset]
    results = run_on_temporal(temporal_server.address,
                              [{"policy": t.data} for t in translations])
    bad = []
    for policy, t, (attempts, gaps) in zip(subset, translations, results, strict=True):
        late = [g - d for g, d in zip(gaps, t.delays, strict=False)]
        if attempts != policy.attempts or any(not -EARLY_S <= x <= LATE_S for x in late):
            bad.append((policy, t.delays, gaps))
    assert not bad, bad


@pytest.mark.temporal
@pytest.mark.slow
def test_temporal_server_does_what_the_warnings_say(temporal_server: Any) -> None:
    """Each Temporal warning, shown on the server: an initial_interval of 0 waits 1 s; a
    missing maximum_interval caps at 100 × initial (the translation's explicit cap does
    not); a start-to-close or heartbeat timeout is retried unless the translation's
    non-retryable types are listed."""
    uncapped = RetryPolicy(9, "exponential", timedelta(milliseconds=4))  # last wait 512 ms
    given = uncapped.to("temporal").data
    assert given["maximum_interval"] == timedelta(milliseconds=512)
    timeouts = RetryPolicy(3, "fixed", timedelta(milliseconds=10)).to("temporal").data
    no_list = {k: v for k, v in timeouts.items() if k != "non_retryable_error_types"}
    plans = [
        {"policy": {"initial_interval": timedelta(0), "maximum_attempts": 2}},
        {"policy": given},
        {"policy": given | {"maximum_interval": None}},
        {"policy": no_list, "start_to_close": timedelta(milliseconds=200), "overrun": 0.5},
        {"policy": timeouts, "start_to_close": timedelta(milliseconds=200), "overrun": 0.5},
        {"policy": no_list, "heartbeat": timedelta(milliseconds=200), "overrun": 0.5},
        {"policy": timeouts, "heartbeat": timedelta(milliseconds=200), "overrun": 0.5},
    ]
    zero, explicit, default_cap, stc, stc_listed, hb, hb_listed = run_on_temporal(
        temporal_server.address, plans)
    assert zero[0] == 2
    assert 1.0 - EARLY_S <= zero[1][0] <= 1.0 + LATE_S
    assert explicit[0] == default_cap[0] == 9
    assert 0.512 - EARLY_S <= explicit[1][-1] <= 0.512 + LATE_S
    assert 0.400 - EARLY_S <= default_cap[1][-1] <= 0.400 + LATE_S
    assert stc[0] == 3
    assert hb[0] == 3
    assert stc_listed[0] == 1
    assert hb_listed[0] == 1


def test_the_comparison_docs_show_what_the_translation_gives() -> None:
    """docs/comparison.md's worked example is the translation's own code (STYLE 12)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "comparison.md").read_text("utf-8")
    section = text[text.index("## The same policy in other engines"):]
    policy = step_policy('retry="4" retry-backoff="exponential" retry-delay="500ms" '
                         'retry-max-delay="3s"')
    got = translate_all(policy)
    for target, t in got.items():
        shown = t.code.split("\n\n")[-1].removesuffix("\ndef step(): ...")
        assert shown in section, target
    assert "WOML waits 500ms, 1s, 2s" in section
    assert got["stepfunctions"].delays == (1.0, 2.0, 3.0)
    assert "waits 1s, 2s, 3s" in section
    assert [t.same for t in got.values()] == [True, False, True, True]


def test_every_target_is_covered() -> None:
    assert TARGETS == ("temporal", "stepfunctions", "tenacity", "stamina")
    assert all(isinstance(t, Translation) for t in translate_all(RetryPolicy()).values())
