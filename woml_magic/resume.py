"""Resume planning (spec §5.3): from a run's journaled past to what happens next.

Pure functions of the folded past (a ``Run``) and the user's choice: no I/O, no clock,
no events. The engine carries a plan out (``engine.schedule``); the API decides with
``check_resumable`` and ``needs_execution`` whether there is a run to continue at all.

A fresh step is planned by the same function as a resumed one: a new run is a run
with no past.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .errors import WomlRunError
from .events import JSON, RunStarted
from .model import Run, StepRun, Workflow
from .outcomes import (
    DONE,
    FAILED,
    FAILED_CLOSED,
    INTERRUPTED,
    NOT_RUN,
    PENDING,
    REATTACHED,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    StepStatus,
    is_retried,
)


class Action(Enum):
    """What the engine does with a step when its turn comes."""

    #: The step already ended (``failed``/``failed-closed``); nothing is recorded.
    KEEP = "keep"
    #: The step ends now with ``StepPlan.status``, without another attempt.
    FINISH = "finish"
    #: Attempts run, from ``attempts_used + 1``, after the planned wait.
    RUN = "run"


@dataclass(frozen=True)
class StepPlan:
    """One step's plan (spec §3.1, §5.3)."""

    action: Action
    #: Record ``step-started`` first (the step starts, or starts again).
    start: bool = False
    #: An attempt found without an outcome: record it ``interrupted`` first (§5.3).
    close_attempt: int | None = None
    #: With ``FINISH``: the status the step ends with, and its result.
    status: StepStatus | None = None
    result: JSON = None
    #: With ``RUN``: attempts already used (the next is ``attempts_used + 1``).
    attempts_used: int = 0
    #: With ``RUN``: a wait already scheduled, due at this time on the run's clock
    #: (the remainder is waited, nothing if it is past).
    wait_due: float | None = None
    #: With ``RUN``: schedule the wait after this attempt before the next (§3.1).
    schedule_after: int | None = None


def plan_step(sr: StepRun, *, retry_interrupted: bool = False) -> StepPlan:
    """What to do with step ``sr`` given what is known of it (spec §3.1, §3.2, §5.3).

    - a succeeded step is reattached, its result taken from the journal;
    - a step that ended without succeeding stays as it is, unless its last attempt was
      interrupted and ``retry_interrupted`` asks to run it again with the same key;
    - an attempt that started but never finished is ``interrupted``: the step fails
      closed, or with ``retry_interrupted`` its next attempt starts at once;
    - a retried failure continues its schedule: a wait already scheduled keeps its due
      time; otherwise the wait after the last attempt is scheduled now.
    """
    if sr.status in DONE:
        return StepPlan(Action.FINISH, status=REATTACHED, result=sr.result)
    last = sr.attempts[-1] if sr.attempts else None
    start = sr.status in (PENDING, NOT_RUN)  # "not-run": an earlier resume stopped first
    if sr.status in STOPPED:
        if not (retry_interrupted and last is not None and last.outcome == INTERRUPTED):
            return StepPlan(Action.KEEP)
        start = True
    if last is None:
        return StepPlan(Action.RUN, start=start)
    used = len(sr.attempts)
    close: int | None = None
    wait_due: float | None = None
    schedule_after: int | None = None
    if last.outcome == RUNNING:
        close = last.number
        if not retry_interrupted:
            return StepPlan(Action.FINISH, start=start, close_attempt=close, status=FAILED_CLOSED)
    elif last.outcome == INTERRUPTED:
        pass  # retry_interrupted: it counts as used; the next attempt starts at once
    elif last.outcome == SUCCEEDED:
        # The process stopped between the attempt's outcome and the step's end.
        return StepPlan(Action.FINISH, start=start, status=SUCCEEDED, result=last.result)
    elif not is_retried(last.outcome):
        return StepPlan(Action.FINISH, start=start, status=FAILED_CLOSED)
    elif used >= sr.step.policy.attempts:
        return StepPlan(Action.FINISH, start=start, status=FAILED)
    elif sr.wait_due is not None:
        wait_due = sr.wait_due
    else:
        schedule_after = used
    if used >= sr.step.policy.attempts:
        return StepPlan(Action.FINISH, start=start, close_attempt=close, status=FAILED_CLOSED)
    return StepPlan(Action.RUN, start=start, close_attempt=close, attempts_used=used,
                    wait_due=wait_due, schedule_after=schedule_after)


def check_resumable(past: Run, workflow: Workflow) -> None:
    """Refuse to resume ``past`` with a different document (spec §5.3)."""
    started = past.events[0] if past.events else None
    if not isinstance(started, RunStarted) or started.fingerprint != workflow.fingerprint:
        raise WomlRunError(
            f"run {past.id!r} was started from a different document (its steps, policies or "
            "scripts changed); resume it with the same document, or start a new run"
        )


def needs_execution(past: Run, *, retry_interrupted: bool) -> bool:
    """Whether resuming ``past`` executes anything (spec §5.3).

    An unfinished run always continues. A finished run re-executes nothing, unless its
    stopping step's last attempt was interrupted and ``retry_interrupted`` is given.
    """
    if past.status == RUNNING:
        return True
    stopped = [s for s in past.steps.values() if s.status in (FAILED, FAILED_CLOSED)]
    return bool(
        retry_interrupted and stopped and stopped[0].attempts
        and stopped[0].attempts[-1].outcome == INTERRUPTED
    )


def reattached(past: Run) -> Run:
    """A finished run resumed: nothing re-executes and nothing is journaled, but each
    succeeded step's result now comes from the journal, so it is ``reattached``
    (spec §5.3, §7), as it is when an unfinished run is resumed."""
    for sr in past.steps.values():
        if sr.status == SUCCEEDED:
            sr.status = REATTACHED
    return past


def clock_start(past: Run, *, last_wall: float, now_wall: float) -> float:
    """Where a resumed run's clock starts, in seconds on the run's clock (spec §5.1, §5.3).

    A real clock kept running while no process executed the run: its time axis
    continues from the last event plus the wall time since it was written, so a wait
    under way continues its schedule (the remaining part, nothing if already due). A
    simulated clock only moves while the run executes.
    """
    if past.clock != "real":
        return past.now
    return past.now + max(0.0, now_wall - last_wall)
