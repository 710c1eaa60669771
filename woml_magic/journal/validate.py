"""What is read back is checked before it is trusted (spec §5.2).

A journal is a file anyone with access can change. Before a run read from it is drawn
(``%woml show``) or resumed, every row is checked, and the first that fails is refused
with a sentence naming it (its seq and kind): nothing of the run is used, so nothing
is appended. The rules:

- **values** (``decode``): the row's data is a JSON object of its own kind and run, with
  no NaN or ±Infinity anywhere (``1e999`` reads as Infinity, so it is one too); every
  time is a finite number of seconds in ``[0, MAX_RUN_SECONDS]``;
- **order** (``checked_run``): each event can follow the ones before it, as the engine
  emits them: one ``run-started``, first; step events name a step of the document;
  an attempt starts only in a started step, numbered one past the last, within the
  policy's attempts, after the last one finished; calls, logs and outcomes
  belong to an attempt that is still open; a wait follows a retried failure of the
  step's last attempt and lasts exactly the policy's ``wait(k)`` (spec §3.1); a
  ``step-finished`` needs a start and the attempt that decides it (``succeeded`` with
  that attempt's result, ``failed`` after the last allowed attempt threw), or for
  ``reattached`` a step already done; ``run-finished`` comes when no step is still
  going and says what the steps say; after it only a ``run-resumed`` may come.

The checks fold the events into a ``Run`` with ``Run.apply``, the fold the engine uses,
so what is checked is what resume and the timeline then see.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Final

from ..clock import CLOCKS
from ..errors import WomlJournalError, one_of, quote
from ..events import (
    JSON,
    AttemptEvent,
    AttemptFinished,
    AttemptStarted,
    CallFinished,
    CallStarted,
    Event,
    LogEmitted,
    RunFinished,
    RunResumed,
    RunStarted,
    StepEvent,
    StepFinished,
    StepStarted,
    WaitScheduled,
    event_from_dict,
)
from ..model import Run, StepRun, Workflow
from ..outcomes import (
    DONE,
    FAILED,
    FAILED_CLOSED,
    NOT_RUN,
    OUTCOMES,
    PENDING,
    REATTACHED,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    WAITING,
    is_retried,
)

#: The longest time on a run's clock a journal may hold: ~317 years. A real-clock run
#: resumed after years is far below it; anything above was not written by a clock.
MAX_RUN_SECONDS: Final = 1e10
#: The latest unix time a row may say it was written (year 5138).
MAX_WALL: Final = 1e11
#: Float slack when a journaled wait is compared with the policy's (both are computed
#: the same way; JSON round-trips floats exactly, so this only forgives rounding).
_WAIT_SLACK: Final = 1e-6
_GOING = frozenset({RUNNING, WAITING})


class BadRow(ValueError):
    """Why one row cannot be trusted; ``refuse`` words it for the user."""


def refuse(path: str, run_id: str, seq: int, kind: str, why: str) -> WomlJournalError:
    """The sentence naming the refused row (spec §5.2)."""
    return WomlJournalError(
        f"event {seq} of run {run_id!r} ({kind[:40]}) in the journal {path!r} is refused: "
        f"{why}; it was not written by woml-magic as it stands, so the run is neither "
        "shown nor resumed and nothing is appended to it"
    )


def _no_constant(name: str) -> float:
    raise BadRow(f"it holds {name}, which is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadRow(f"it holds the number {text[:24]}, too large to be finite")
    return value


def check_time(name: str, value: Any) -> float:
    """``value`` as a time on the run's clock, or ``BadRow`` saying what is wrong."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRow(f"its {name} is {str(value)[:24]!r}, not a number of seconds")
    if not 0 <= value <= MAX_RUN_SECONDS:
        raise BadRow(f"its {name} is {value!r} s, outside 0 … {MAX_RUN_SECONDS:g} s")
    return float(value)


def check_wall(value: Any) -> float:
    """``value`` as the unix time a row was written, or ``BadRow``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_WALL:
        raise BadRow(f"it was written at unix time {quote(value, 24)}, which is not a time")
    return float(value)


def decode(data: str, kind: str, run_id: str) -> Event:
    """One row's ``data`` as its event, its values checked (module docstring)."""
    try:
        record = json.loads(data, parse_constant=_no_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise BadRow(f"its data is not JSON ({exc.msg})") from None
    if not isinstance(record, dict):
        raise BadRow("its data is not a JSON object")
    try:
        event = event_from_dict(record)
    except (TypeError, ValueError, KeyError) as exc:
        raise BadRow(
            f"it cannot be read ({str(exc)[:120]}); it may come from a newer woml-magic"
        ) from None
    if event.kind != kind or event.run_id != run_id:
        raise BadRow("its data names another kind or run than its row")
    check_time("at", event.at)
    return event


def checked_run(workflow: Workflow, rows: Sequence[tuple[int, Event]], path: str) -> Run:
    """The ``Run`` of ``rows`` (seq, event) folded in order, each checked first."""
    run: Run | None = None
    for seq, event in rows:
        try:
            if run is None:
                run = _first(workflow, event)
            else:
                _check(run, event)
            run.apply(event)
        except BadRow as exc:
            raise refuse(path, event.run_id, seq, event.kind, str(exc)) from None
    if run is None:
        raise WomlJournalError(f"the journal {path!r} holds no events of this run")
    return run


def _first(workflow: Workflow, event: Event) -> Run:
    if not isinstance(event, RunStarted):
        raise BadRow("a run's first event must be run-started")
    if event.clock not in CLOCKS:  # spec §5.1: a resume makes the run's clock again
        raise BadRow(f"its clock {quote(event.clock)} is not a clock; one of {one_of(CLOCKS)}")
    return Run(id=event.run_id, workflow=workflow, clock=event.clock, payload=event.payload)


def _check(run: Run, event: Event) -> None:
    """Raise ``BadRow`` unless ``event`` can follow the events folded into ``run``."""
    finished = run.status != RUNNING
    if isinstance(event, RunStarted):
        raise BadRow("the run already started (seq of its first run-started is earlier)")
    if isinstance(event, RunResumed):
        return
    if finished:
        raise BadRow("the run had finished and was not resumed")
    if isinstance(event, RunFinished):
        _check_run_finished(run, event)
        return
    if not isinstance(event, StepEvent):
        raise BadRow("no such event is ever journaled for a run")
    sr = run.steps.get(event.step_id)
    if sr is None:
        raise BadRow(f"it names step {event.step_id[:40]!r}, which the document does not have")
    if isinstance(event, StepStarted):
        if sr.status not in (PENDING, NOT_RUN, *STOPPED):
            raise BadRow(f"step {sr.id!r} is {sr.status}, so it cannot start again")
    elif isinstance(event, AttemptStarted):
        _check_attempt_started(sr, event)
    elif isinstance(event, AttemptEvent):
        _check_in_attempt(sr, event)
    elif isinstance(event, WaitScheduled):
        _check_wait(sr, event)
    elif isinstance(event, StepFinished):
        _check_step_finished(sr, event)


def _check_attempt_started(sr: StepRun, event: AttemptStarted) -> None:
    if sr.status not in _GOING:
        raise BadRow(f"step {sr.id!r} is {sr.status}: no step-started precedes it")
    if sr.attempts and sr.attempts[-1].outcome == RUNNING:
        raise BadRow(f"attempt {sr.attempts[-1].number} of {sr.id!r} has not finished")
    if event.number != len(sr.attempts) + 1 or event.number > sr.step.policy.attempts:
        raise BadRow(
            f"step {sr.id!r} has used {len(sr.attempts)} of its "
            f"{sr.step.policy.attempts} attempts, so its next is not "
            f"attempt {event.number}"
        )


def _check_in_attempt(sr: StepRun, event: AttemptEvent) -> None:
    if (
        not sr.attempts
        or event.number != sr.attempts[-1].number
        or sr.attempts[-1].outcome != RUNNING
    ):
        raise BadRow(f"attempt {event.number} of {sr.id!r} is not the one running")
    attempt = sr.attempts[-1]
    if isinstance(event, CallStarted) and event.call_index != len(attempt.calls):
        raise BadRow(
            f"attempt {event.number} has made {len(attempt.calls)} calls, so its "
            f"next is not call {event.call_index}"
        )
    if isinstance(event, CallFinished) and not (
        0 <= event.call_index < len(attempt.calls)
        and attempt.calls[event.call_index].outcome == "running"
    ):
        raise BadRow(f"call {event.call_index} of attempt {event.number} is not in flight")
    if isinstance(event, AttemptFinished) and event.outcome not in OUTCOMES:
        raise BadRow(f"{str(event.outcome)[:24]!r} is not an attempt outcome (spec §3.2)")
    if isinstance(event, LogEmitted) and not isinstance(event.text, str):
        raise BadRow("its text is not a string")


def _check_wait(sr: StepRun, event: WaitScheduled) -> None:
    last = sr.attempts[-1] if sr.attempts else None
    if (
        sr.status != RUNNING
        or last is None
        or not is_retried(last.outcome)
        or event.after_attempt != last.number
    ):
        raise BadRow(f"no retried failure of {sr.id!r}'s last attempt precedes it")
    policy = sr.step.policy
    if last.number >= policy.attempts:
        raise BadRow(f"attempt {last.number} was {sr.id!r}'s last: no wait follows it")
    allowed = policy.wait(last.number).total_seconds()
    seconds = check_time("length", event.seconds)
    due = check_time("due time", event.due)
    if abs(seconds - allowed) > _WAIT_SLACK * max(1.0, allowed):
        raise BadRow(
            f"it waits {seconds!r} s where the policy waits {allowed:g} s after "
            f"attempt {last.number} (spec §3.1)"
        )
    if abs(due - (event.at + seconds)) > _WAIT_SLACK * max(1.0, due):
        raise BadRow(f"its due time {due!r} is not its time plus its length")


def _check_step_finished(sr: StepRun, event: StepFinished) -> None:
    status = event.status
    last = sr.attempts[-1] if sr.attempts else None
    if status == NOT_RUN:
        if sr.status not in (PENDING, NOT_RUN):
            raise BadRow(f"step {sr.id!r} is {sr.status}, so it cannot be not-run")
        return
    if status == REATTACHED:
        if sr.status not in DONE or event.result != sr.result:
            raise BadRow(f"step {sr.id!r} had not succeeded with this result")
        return
    if sr.status not in _GOING:
        raise BadRow(f"step {sr.id!r} is {sr.status}: no step-started precedes it")
    if last is not None and last.outcome == RUNNING:
        raise BadRow(f"attempt {last.number} of {sr.id!r} has not finished")
    if status == SUCCEEDED:
        if last is None or last.outcome != SUCCEEDED or not _same_json(event.result, last.result):
            raise BadRow(f"no succeeded attempt of {sr.id!r} returned this result")
    elif status == FAILED:
        if last is None or not is_retried(last.outcome) or last.number < sr.step.policy.attempts:
            raise BadRow(f"{sr.id!r} has attempts left, so it has not failed")
    elif status == FAILED_CLOSED:
        if last is not None and (
            last.outcome == SUCCEEDED
            or (
                is_retried(last.outcome)
                and last.number < sr.step.policy.attempts
                and event.reason is None
            )
        ):
            raise BadRow(f"no attempt of {sr.id!r} failed closed")
    else:
        raise BadRow(f"{str(status)[:24]!r} is not a status a step ends with")


def _check_run_finished(run: Run, event: RunFinished) -> None:
    going = [sr.id for sr in run.steps.values() if sr.status in _GOING]
    if going:
        raise BadRow(f"step {going[0]!r} has not finished")
    all_done = all(sr.status in DONE for sr in run.steps.values())
    if event.status not in (SUCCEEDED, FAILED) or (event.status == SUCCEEDED) != all_done:
        raise BadRow(f"the run's steps do not make it {quote(event.status, 24)}")


def _same_json(a: JSON, b: JSON) -> bool:
    """Equal as JSON values (``1 == 1.0`` and ``True == 1`` do not count as the same)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
