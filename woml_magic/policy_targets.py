"""The same retry policy in other engines (spec §11): ``policy.to(target)``.

``translate(policy, target)`` gives a step's §3.1 policy as Temporal's ``RetryPolicy``,
an AWS Step Functions ``Retry`` field (ASL JSON), a tenacity decorator or a stamina
decorator: the snippet to paste (``code``), the same settings as data (``data``), the
waits the *target* would make, computed from the target's own documented semantics
(``delays``), whether they and the attempt count equal WOML's (``same``), and one
sentence per difference the target cannot avoid or the translation had to set
(``warnings``). ``translate_all(policy)`` gives all four.

The rules, target by target (every ``retry="N"`` is N total attempts):

- **temporal** — ``maximum_attempts=N`` (Temporal also counts the first attempt; its 0
  means unlimited and is never emitted); ``backoff_coefficient`` 2.0 or 1.0 for fixed;
  ``maximum_interval`` always explicit, since a missing one is 100 × ``initial_interval``
  (an uncapped WOML schedule gets its last planned wait); ``initial_interval=0`` becomes
  1 s on the server, so a 0 s wait becomes 1 ms; the start-to-close and heartbeat
  timeouts are listed as non-retryable, as WOML fails those attempts closed.
- **stepfunctions** — one retrier: ``MaxAttempts`` counts retries (N − 1);
  ``IntervalSeconds`` and ``MaxDelaySeconds`` are whole seconds (≥ 1), so other delays
  are rounded to the nearest one; ``BackoffRate`` 2.0 or 1.0; ``JitterStrategy`` NONE;
  ``ErrorEquals: ["States.TaskFailed"]``, which does not match ``States.Timeout``.
- **tenacity** — ``stop_after_attempt(N)``; ``wait_fixed(d)`` or
  ``wait_exponential(multiplier=d, max=m)`` (= ``d × 2^(k−1)`` clamped); ``reraise=True``.
- **stamina** — ``attempts=N``, ``timeout=None`` (its default gives up after 45 s),
  ``wait_jitter=0`` (its default adds up to 1 s), ``wait_initial=d``, ``wait_exp_base``
  2 or 1 for fixed, ``wait_max`` the cap (its default is 5 s; for an uncapped schedule,
  the last planned wait).

A single attempt (``retry="1"``) translates to the target's plain "no retry".

This module produces text and data only: it imports none of the four libraries.
What a translation holds and how it shows itself is ``policy_translation.Translation``.
``tests/test_policy_targets.py`` checks every translation against them (tenacity's
and stamina's real wait functions, a real Temporal dev server, and the ASL formula).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from .errors import TargetError, quote
from .policy import RetryPolicy, format_duration
from .policy_translation import Translation

__all__ = ["TARGETS", "Translation", "translate", "translate_all"]

#: The engines a policy translates to, in display order.
TARGETS: tuple[str, ...] = ("temporal", "stepfunctions", "tenacity", "stamina")

#: Temporal's server default for ``initial_interval`` 0, and its cap for a missing
#: ``maximum_interval`` (``retrypolicy.DefaultDefaultRetrySettings``).
TEMPORAL_DEFAULT_INITIAL = timedelta(seconds=1)
TEMPORAL_DEFAULT_MAX_COEFFICIENT = 100
#: What a WOML wait of 0 becomes on Temporal: the server cannot be told 0.
TEMPORAL_ZERO_STANDIN = timedelta(milliseconds=1)
#: Temporal failure types for its own timeouts (``retrypolicy.TimeoutFailureTypePrefix``):
#: WOML fails a timed-out attempt closed, and a dead worker shows as a heartbeat timeout.
TEMPORAL_NON_RETRYABLE = ("TemporalTimeout:StartToClose", "TemporalTimeout:Heartbeat")

#: The ASL error name that matches every task error except ``States.Timeout``.
STEPFUNCTIONS_ERRORS = ("States.TaskFailed",)

def translate(policy: RetryPolicy, target: str) -> Translation:
    """``policy`` in ``target`` (one of ``TARGETS``); ``TargetError`` (a ``WomlError``
    and a ``ValueError``) names the four."""
    build = _BUILDERS.get(target) if isinstance(target, str) else None
    if build is None:
        near = difflib.get_close_matches(target, TARGETS, n=1) if isinstance(target, str) \
            else []
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise TargetError(
            f"unknown target {quote(target, 40)}: choose one of {', '.join(TARGETS)}{hint}"
        )
    return build(policy)


def translate_all(policy: RetryPolicy) -> dict[str, Translation]:
    """``policy`` in every target, in ``TARGETS`` order."""
    return {target: translate(policy, target) for target in TARGETS}


# -- temporal ---------------------------------------------------------------------------


def _temporal(policy: RetryPolicy) -> Translation:
    n = policy.attempts
    if n == 1:
        data: dict[str, Any] = {"maximum_attempts": 1}
        return Translation.of(policy, "temporal", _temporal_code(data), data,
                       _temporal_delays(data), [])
    warnings = []
    waits = policy.waits()
    if policy.delay == timedelta(0):
        # Every WOML wait is 0 (0 × 2^k): a fixed stand-in is the closest schedule.
        initial, coefficient, maximum = TEMPORAL_ZERO_STANDIN, 1.0, TEMPORAL_ZERO_STANDIN
        warnings.append(
            "Temporal turns initial_interval=0 into 1 s, so a wait of 0 s cannot be said; "
            f"the policy waits {format_duration(TEMPORAL_ZERO_STANDIN)} instead."
        )
    elif policy.backoff == "fixed":
        initial, coefficient, maximum = policy.delay, 1.0, policy.delay
    else:
        initial, coefficient = policy.delay, 2.0
        if policy.max_delay is None:
            maximum = waits[-1]
            warnings.append(
                "WOML's exponential backoff without retry-max-delay is uncapped, but Temporal "
                "caps a missing maximum_interval at 100 × initial_interval, so "
                f"maximum_interval is the last planned wait ({format_duration(maximum)})."
            )
        else:
            maximum = policy.max_delay
    warnings += [
        "Temporal retries an activity whose start-to-close or heartbeat timeout fired, where "
        "WOML fails a timed-out or interrupted attempt closed, so the policy lists "
        f"{' and '.join(TEMPORAL_NON_RETRYABLE)} as non-retryable "
        "(a server feature, checked on the dev server 1.32).",
        "Temporal retries every other activity failure, so raise what WOML fails closed "
        "(an invalid or oversized result, a call whose effect is unknown) as "
        "ApplicationError(..., non_retryable=True).",
    ]
    data = {
        "initial_interval": initial,
        "backoff_coefficient": coefficient,
        "maximum_interval": maximum,
        "maximum_attempts": n,
        "non_retryable_error_types": list(TEMPORAL_NON_RETRYABLE),
    }
    return Translation.of(policy, "temporal", _temporal_code(data), data,
                   _temporal_delays(data), warnings)


def _temporal_delays(data: dict[str, Any]) -> tuple[float, ...]:
    """What a Temporal server waits before each retry of an activity with this policy.

    The server (``retrypolicy.EnsureDefaults``, ``ExponentialBackoffAlgorithm``): an
    ``initial_interval`` of 0 becomes 1 s, a missing ``maximum_interval`` 100 × initial;
    retry k waits ``min(initial × coefficient^(k−1), maximum)``, in whole nanoseconds.
    """
    attempts: int = data["maximum_attempts"]
    initial: timedelta = data.get("initial_interval") or TEMPORAL_DEFAULT_INITIAL
    maximum: timedelta = data.get("maximum_interval") or (
        initial * TEMPORAL_DEFAULT_MAX_COEFFICIENT
    )
    coefficient: float = data.get("backoff_coefficient", 2.0)
    initial_ns, maximum_ns = _nanoseconds(initial), _nanoseconds(maximum)
    out = []
    for k in range(1, attempts):
        interval = int(initial_ns * coefficient ** (k - 1))
        out.append(min(interval, maximum_ns) / 1e9)
    return tuple(out)


def _temporal_code(data: dict[str, Any]) -> str:
    args = []
    for name, value in data.items():
        if isinstance(value, timedelta):
            args.append(f"{name}={_timedelta_code(value)}")
        elif isinstance(value, list):
            args.append(f"{name}=[{', '.join(json.dumps(v) for v in value)}]")
        else:
            args.append(f"{name}={value!r}")
    imports = "from temporalio.common import RetryPolicy\n\n"
    if any(isinstance(v, timedelta) for v in data.values()):
        imports = "from datetime import timedelta\n\n" + imports
    body = "".join(f"    {a},\n" for a in args)
    return f"{imports}retry_policy = RetryPolicy(\n{body})"


# -- stepfunctions ----------------------------------------------------------------------


def _stepfunctions(policy: RetryPolicy) -> Translation:
    n = policy.attempts
    warnings = [
        "Step Functions' MaxAttempts counts retries after the first attempt, so "
        f'retry="{n}" is MaxAttempts {n - 1}.'
    ]
    retrier: dict[str, Any] = {"ErrorEquals": list(STEPFUNCTIONS_ERRORS)}
    if n == 1:
        retrier["MaxAttempts"] = 0
        return Translation.of(policy, "stepfunctions", _asl_code(retrier), retrier,
                       _stepfunctions_delays(retrier), warnings)
    delay_s = policy.delay.total_seconds()
    interval = _whole_seconds(delay_s)
    if policy.delay == timedelta(0):
        # Every WOML wait is 0: 1 s each (BackoffRate 1.0) is the closest schedule.
        rate = 1.0
        warnings.append(
            "IntervalSeconds is a whole number of seconds, at least 1, so a wait of 0 s "
            "cannot be said; the retrier waits 1 s instead."
        )
    else:
        rate = 1.0 if policy.backoff == "fixed" else 2.0
        if interval != delay_s:
            warnings.append(
                "IntervalSeconds is a whole number of seconds, at least 1, so "
                f"retry-delay={format_duration(policy.delay)} cannot be said; it is "
                f"rounded to {interval} s."
            )
    retrier |= {"IntervalSeconds": interval, "BackoffRate": rate, "MaxAttempts": n - 1}
    if policy.backoff == "exponential" and policy.max_delay is not None and rate > 1:
        max_s = policy.max_delay.total_seconds()
        retrier["MaxDelaySeconds"] = _whole_seconds(max_s)
        if retrier["MaxDelaySeconds"] != max_s:
            warnings.append(
                "MaxDelaySeconds is a whole number of seconds, so "
                f"retry-max-delay={format_duration(policy.max_delay)} cannot be said; it is "
                f"rounded to {retrier['MaxDelaySeconds']} s."
            )
    retrier["JitterStrategy"] = "NONE"
    warnings.append(
        "States.TaskFailed retries every task error except States.Timeout (a timeout fails "
        "closed, as in WOML) but also crashes and service errors that WOML fails closed; "
        "list your task's own error names in ErrorEquals to retry only what it throws."
    )
    return Translation.of(policy, "stepfunctions", _asl_code(retrier), retrier,
                   _stepfunctions_delays(retrier), warnings)


def _stepfunctions_delays(retrier: dict[str, Any]) -> tuple[float, ...]:
    """What a Step Functions retrier waits before each retry (the ASL's retrier fields).

    Retry k (k = 1 … ``MaxAttempts``) waits ``IntervalSeconds × BackoffRate^(k−1)``,
    at most ``MaxDelaySeconds`` when given; defaults 1 s, 2.0, 3 retries, no cap.
    """
    interval = retrier.get("IntervalSeconds", 1)
    rate = retrier.get("BackoffRate", 2.0)
    cap = retrier.get("MaxDelaySeconds")
    out = []
    for k in range(1, retrier.get("MaxAttempts", 3) + 1):
        wait = float(interval * rate ** (k - 1))
        out.append(wait if cap is None else min(wait, float(cap)))
    return tuple(out)


def _asl_code(retrier: dict[str, Any]) -> str:
    fields = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in retrier.items())
    return f'"Retry": [\n  {{\n{fields}\n  }}\n]'


# -- tenacity ---------------------------------------------------------------------------


def _tenacity(policy: RetryPolicy) -> Translation:
    n = policy.attempts
    data: dict[str, Any] = {"stop": {"stop_after_attempt": {"max_attempt_number": n}}}
    warnings = []
    if n > 1:
        delay = policy.delay.total_seconds()
        if policy.backoff == "fixed":
            data["wait"] = {"wait_fixed": {"wait": delay}}
        else:
            kwargs: dict[str, float] = {"multiplier": delay}
            if policy.max_delay is not None:
                kwargs["max"] = policy.max_delay.total_seconds()
            data["wait"] = {"wait_exponential": kwargs}
        warnings.append(
            "tenacity retries every exception by default and never stops a running attempt, "
            "while WOML retries only a thrown error and fails a timed-out attempt closed; "
            "pass retry=retry_if_exception_type(...) with the errors that mean the call "
            "surely failed."
        )
    data["reraise"] = True
    return Translation.of(policy, "tenacity", _tenacity_code(data), data,
                   _tenacity_delays(data), warnings)


def _tenacity_delays(data: dict[str, Any]) -> tuple[float, ...]:
    """What tenacity waits after attempt k (``tenacity/wait.py``).

    ``wait_fixed(w)``: ``w``; ``wait_exponential(multiplier, max, exp_base=2, min=0)``:
    ``multiplier × exp_base^(k−1)`` clamped to ``[min, max]``; no ``wait``: 0.
    """
    ((_, stop),) = data["stop"].items()
    attempts: int = stop["max_attempt_number"]
    ((kind, kw),) = data.get("wait", {"wait_fixed": {"wait": 0.0}}).items()
    out = []
    for k in range(1, attempts):
        if kind == "wait_fixed":
            out.append(float(kw["wait"]))
        else:
            grown = kw.get("multiplier", 1) * kw.get("exp_base", 2) ** (k - 1)
            out.append(float(max(0, kw.get("min", 0), min(grown, kw.get("max", math.inf)))))
    return tuple(out)


def _tenacity_code(data: dict[str, Any]) -> str:
    names = ["retry"]
    args = []
    for key in ("stop", "wait"):
        if key in data:
            ((fn, kw),) = data[key].items()
            names.append(fn)
            shown = ", ".join(
                _num(v) if k in ("max_attempt_number", "wait") else f"{k}={_num(v)}"
                for k, v in kw.items()
            )
            args.append(f"{key}={fn}({shown})")
    args.append("reraise=True")
    return (
        f"from tenacity import {', '.join(names)}\n\n"
        f"@retry({', '.join(args)})\n"
        "def step(): ..."
    )


# -- stamina ----------------------------------------------------------------------------


def _stamina(policy: RetryPolicy) -> Translation:
    n = policy.attempts
    data: dict[str, Any] = {"on": "Exception", "attempts": n}
    warnings = []
    if n > 1:
        delay = policy.delay.total_seconds()
        if policy.backoff == "fixed":
            base, cap = 1.0, delay
        else:
            base = 2.0
            if policy.max_delay is None:
                cap = policy.waits()[-1].total_seconds()
                warnings.append(
                    "stamina caps every wait at wait_max (5 s by default) and cannot say "
                    f"uncapped, so wait_max is the last planned wait ({format_duration(cap)})."
                )
            else:
                cap = policy.max_delay.total_seconds()
        data |= {
            "timeout": None,
            "wait_initial": delay,
            "wait_max": cap,
            "wait_jitter": 0.0,
            "wait_exp_base": base,
        }
        warnings += [
            "stamina adds a random jitter of up to wait_jitter (1 s by default) to every wait "
            "and WOML adds none, so wait_jitter=0.",
            "stamina gives up after timeout (45 s by default) of retrying in total and WOML "
            "has no overall limit, so timeout=None.",
            "stamina retries what on= names and never stops a running attempt, while WOML "
            "retries only a thrown error and fails a timed-out attempt closed; name the "
            "errors that mean the call surely failed (Exception is the widest).",
        ]
    return Translation.of(policy, "stamina", _stamina_code(data), data,
                   _stamina_delays(data), warnings)


def _stamina_delays(data: dict[str, Any]) -> tuple[float, ...]:
    """What stamina waits after attempt k (``stamina._core._compute_backoff``).

    ``min(wait_max, wait_initial × wait_exp_base^(k−1) + U(0, wait_jitter))``; the
    defaults (0.1 s, 5 s, 1 s, 2) apply to what ``data`` leaves out, with no jitter.
    """
    out = []
    for k in range(1, data["attempts"]):
        grown = data.get("wait_initial", 0.1) * data.get("wait_exp_base", 2) ** (k - 1)
        out.append(float(min(data.get("wait_max", 5.0), grown)))
    return tuple(out)


def _stamina_code(data: dict[str, Any]) -> str:
    args = "".join(
        f"    {k}={v if k == 'on' else _num(v)},\n" for k, v in data.items()
    )
    return f"import stamina\n\n@stamina.retry(\n{args})\ndef step(): ..."


# -- shared -----------------------------------------------------------------------------


def _whole_seconds(seconds: float) -> int:
    """The nearest whole number of seconds, at least 1 (halves round up)."""
    return max(1, math.floor(seconds + 0.5))


def _nanoseconds(value: timedelta) -> int:
    return (value // timedelta(microseconds=1)) * 1000


def _timedelta_code(value: timedelta) -> str:
    """``timedelta(...)`` in the largest unit that states ``value`` exactly."""
    us = value // timedelta(microseconds=1)
    for unit, size in (("hours", 3_600_000_000), ("minutes", 60_000_000),
                       ("seconds", 1_000_000), ("milliseconds", 1000)):
        if us % size == 0:
            return f"timedelta({unit}={us // size})"
    return f"timedelta(microseconds={us})"


def _num(value: object) -> str:
    """A number as a person writes it: ``1`` not ``1.0``; other values as ``repr``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)


_BUILDERS: dict[str, Callable[[RetryPolicy], Translation]] = {
    "temporal": _temporal,
    "stepfunctions": _stepfunctions,
    "tenacity": _tenacity,
    "stamina": _stamina,
}
