"""The shared vocabulary: attempt outcomes, step, run and call statuses (spec §3.2, §4.1,
§5.2, §5.3).

Every module that names an outcome or a status imports it from here, so a typo is a
type error (``mypy --strict`` checks the ``Literal``s) and adding an outcome is one row
of ``RULES``. The strings are the journal's and the timeline's words: they are stored
and shown as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

Outcome = Literal[
    "succeeded",
    "threw",
    "timeout",
    "invalid-json",
    "oversized",
    "crash",
    "interrupted",
    "cancelled",
    "ambiguous",
]
"""How one attempt ended (spec §3.2: exactly one outcome per attempt)."""

AttemptState = Literal[Outcome, "running"]
"""An attempt's outcome, or ``running`` while it has none yet."""

StepStatus = Literal[
    "pending",
    "running",
    "waiting",
    "succeeded",
    "failed",
    "failed-closed",
    "reattached",
    "not-run",
]
"""Where a step stands (spec §3.2, §5.3)."""

RunStatus = Literal["running", "succeeded", "failed"]
"""Where a run stands: ``running`` until its ``run-finished`` event (spec §5.2)."""

CallFailure = Literal["network-error", "ambiguous"]
"""How a managed HTTP call ended without a response (spec §4.1): definitive, nothing
can have reached the server, or ambiguous, it may have."""

CallOutcome = Literal["running", "response", CallFailure]
"""How a managed HTTP call ended (spec §4.1); ``running`` while it is in flight."""

StopReason = Literal["cancelled", "interrupted"]
"""Why a user action stopped a run (spec §3.2, §6.1)."""

SUCCEEDED: Final = "succeeded"
THREW: Final = "threw"
TIMEOUT: Final = "timeout"
INVALID_JSON: Final = "invalid-json"
OVERSIZED: Final = "oversized"
CRASH: Final = "crash"
INTERRUPTED: Final = "interrupted"
CANCELLED: Final = "cancelled"
AMBIGUOUS: Final = "ambiguous"
RUNNING: Final = "running"

PENDING: Final = "pending"
WAITING: Final = "waiting"
FAILED: Final = "failed"
FAILED_CLOSED: Final = "failed-closed"
REATTACHED: Final = "reattached"
NOT_RUN: Final = "not-run"

RESPONSE: Final = "response"
NETWORK_ERROR: Final = "network-error"


@dataclass(frozen=True)
class OutcomeRule:
    """One row of spec §3.2's table."""

    outcome: Outcome
    #: Only a definitive script-thrown failure retries, while attempts remain.
    retried: bool
    #: A user action (cancel, kernel interrupt) keeps its own outcome even after an
    #: unkeyed ambiguous call (spec §4.2).
    user_stop: bool
    #: Decided inside the script worker (the rest the engine decides, spec §4.5).
    by_worker: bool
    #: The timeline's one-line legend (spec §6.3).
    legend: str

    @property
    def fails_closed(self) -> bool:
        """The step ends ``failed-closed`` at once, whatever attempts remain (§3.2)."""
        return self.outcome != SUCCEEDED and not self.retried


RULES: Final[Mapping[Outcome, OutcomeRule]] = {
    rule.outcome: rule
    for rule in (
        OutcomeRule(SUCCEEDED, False, False, True, "the script returned a result"),
        OutcomeRule(THREW, True, False, True, "the script threw; retried if allowed"),
        OutcomeRule(TIMEOUT, False, False, False, "ran past the step timeout"),
        OutcomeRule(INVALID_JSON, False, False, True, "result is not JSON"),
        OutcomeRule(OVERSIZED, False, False, True, "result too large"),
        OutcomeRule(CRASH, False, False, True, "the script worker or host failed"),
        OutcomeRule(INTERRUPTED, False, True, False, "interrupted; effect unknown"),
        OutcomeRule(CANCELLED, False, True, False, "cancelled by the user"),
        OutcomeRule(AMBIGUOUS, False, False, False, "a call's effect is unknown"),
    )
}

OUTCOMES: Final[tuple[Outcome, ...]] = get_args(Outcome)
STEP_STATUSES: Final[tuple[StepStatus, ...]] = get_args(StepStatus)
#: The outcomes the script worker decides by itself (spec §4.5).
WORKER_OUTCOMES: Final[tuple[Outcome, ...]] = tuple(o for o in OUTCOMES if RULES[o].by_worker)
#: Steps whose result later steps and resumes use (spec §3.6, §5.3).
DONE: Final[frozenset[StepStatus]] = frozenset({SUCCEEDED, REATTACHED})
#: Steps a resume may still change (spec §5.3).
LIVE: Final[frozenset[StepStatus]] = frozenset({PENDING, RUNNING, WAITING})
#: Steps that ended without succeeding.
STOPPED: Final[frozenset[StepStatus]] = frozenset({FAILED, FAILED_CLOSED})


def is_retried(outcome: str) -> bool:
    """Whether an attempt that ended ``outcome`` is retried while attempts remain (§3.2)."""
    rule = RULES.get(outcome)  # type: ignore[call-overload]
    return rule is not None and rule.retried


def is_user_stop(outcome: str) -> bool:
    """Whether ``outcome`` is a user action's (§4.2: it outranks the ambiguity guard)."""
    rule = RULES.get(outcome)  # type: ignore[call-overload]
    return rule is not None and rule.user_stop


def as_outcome(value: str) -> Outcome:
    """``value`` as an ``Outcome``; ``ValueError`` naming the allowed ones otherwise."""
    if value in RULES:
        return value  # type: ignore[return-value]
    raise ValueError(f"unknown attempt outcome {value!r}; one of {', '.join(OUTCOMES)}")


def stop_outcome(reason: str | None) -> StopReason:
    """The outcome a stopped attempt records: ``interrupted`` for a kernel interrupt,
    else ``cancelled`` (spec §3.2, §6.1)."""
    return INTERRUPTED if reason == INTERRUPTED else CANCELLED
