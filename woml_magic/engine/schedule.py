"""The schedule: a run's steps in order, each to its final status (spec §3.1, §3.2, §5.3).

``Engine`` executes one run, new or resumed. Each step's turn starts from its plan
(``resume.plan_step``: a new step and a resumed one are planned alike), then attempts
run (``engine.attempt``) with the waits of the step's policy between them on the run's
clock. The engine emits the frozen events of ``events.py``; the ``Run`` folds each one
first, then every subscriber (journal, timeline, tests) sees it, in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Protocol

from ..clock import Clock
from ..events import (
    JSON,
    Event,
    EventSink,
    RunFinished,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    WaitScheduled,
)
from ..model import Run, Step, StepRun
from ..outcomes import (
    DONE,
    FAILED,
    FAILED_CLOSED,
    NOT_RUN,
    PENDING,
    RUNNING,
    SUCCEEDED,
    WAITING,
    Outcome,
    RunStatus,
    StepStatus,
    StopReason,
    is_retried,
    stop_outcome,
)
from ..resume import Action, StepPlan, plan_step
from ..runtime.attempt import StepResults
from ..services import StepCalls
from .attempt import record_interrupted


class Attempts(Protocol):
    """What runs one attempt and records its events (``engine.attempt.AttemptRunner``
    in this process; an activity on a Temporal worker, spec §9)."""

    async def run(
        self, step: Step, number: int, results: StepResults, calls: StepCalls,
        stop_reason: Callable[[], StopReason | None],
    ) -> Outcome:
        """Attempt ``number`` of ``step``: records ``attempt-started``, what the script
        did, and ``attempt-finished``; returns the outcome. A cancel of the calling task
        records the attempt with ``stop_reason()``'s outcome, then propagates."""
        ...

    async def aclose(self) -> None:
        """Release what the run's attempts held (its HTTP client)."""


#: Makes the ``Attempts`` of one run, given the run, its clock and the engine's emit.
AttemptsFactory = Callable[[Run, Clock, Callable[[Event], None]], Attempts]


class Engine:
    """Executes one run (new or resumed) and emits its events.

    It is the local ``Execution`` of ``woml_magic.executor``: ``execute`` runs it,
    ``subscribe`` adds a sink, ``stop_reason`` says why its task is being cancelled.
    """

    def __init__(
        self,
        run: Run,
        clock: Clock,
        *,
        attempts: AttemptsFactory,
        sinks: Iterable[EventSink] = (),
        resume: bool = False,
        retry_interrupted: bool = False,
    ) -> None:
        self.run = run
        self.clock = clock
        self._make_attempts = attempts
        self._sinks = list(sinks)
        self._resume = resume
        self._retry_interrupted = retry_interrupted
        self._stop_reason: StopReason | None = None
        self._last_seen = run.now  # on resume: the last time the journal recorded

    # -- the Execution protocol -------------------------------------------------------
    def emit(self, event: Event) -> None:
        self.run.apply(event)
        for sink in self._sinks:
            sink(event)

    def subscribe(self, sink: EventSink) -> None:
        self._sinks.append(sink)

    def now(self) -> float:
        return self.clock.now()

    def stop_reason(self, reason: StopReason) -> None:
        """Say why the task running this engine is about to be cancelled.

        ``"cancelled"`` (user cancel, the default) or ``"interrupted"`` (kernel interrupt).
        """
        self._stop_reason = reason

    async def execute(self) -> Run:
        """Run (a new run) or continue (a resumed one) to the end; the final ``Run``."""
        if self._resume:
            self.emit(RunResumed(run_id=self.run.id, at=self.now(),
                                 retry_interrupted=self._retry_interrupted))
        else:
            wf = self.run.workflow
            self.emit(RunStarted(run_id=self.run.id, at=self.now(), workflow_id=wf.id,
                                 fingerprint=wf.fingerprint, clock=self.clock.kind,
                                 payload=self.run.payload, source=wf.source))
        attempts = self._make_attempts(self.run, self.clock, self.emit)
        results = StepResults()  # each result encoded once (spec §3.6, §4.5)
        # Named calls known from the journal, by step (spec §4.3 across resumes): one
        # pass over the history, not one per step.
        known_calls = StepCalls.by_step(self.run.events)
        status: RunStatus = SUCCEEDED
        try:
            for step in self.run.workflow.steps:
                sr = self.run.steps[step.id]
                if status != SUCCEEDED:
                    self._finish_step(sr, NOT_RUN)
                    continue
                calls = known_calls.pop(step.id, None) or StepCalls()  # spec §4.3
                final = await self._run_step(step, sr, attempts, results, calls)
                if final in DONE:
                    results.add(step.id, sr.result)
                else:
                    status = FAILED
        except asyncio.CancelledError:
            self._finish_after_stop()
            raise
        finally:
            await attempts.aclose()
        self.emit(RunFinished(run_id=self.run.id, at=self.now(), status=status))
        return self.run

    # -- steps ------------------------------------------------------------------------
    def _finish_after_stop(self) -> None:
        """Close the books when the run's task is cancelled mid-way (spec §3.2)."""
        stopped = stop_outcome(self._stop_reason)
        for sr in self.run.steps.values():
            if sr.status in (RUNNING, WAITING):
                reason = None
                if sr.status == WAITING:
                    # No attempt was running to carry the outcome: say why on the step.
                    reason = (f"the run was {stopped} during the wait before attempt "
                              f"{len(sr.attempts) + 1}; WOML does not retry after that")
                self._finish_step(sr, FAILED_CLOSED, reason=reason)
            elif sr.status == PENDING:
                self._finish_step(sr, NOT_RUN)
        self.emit(RunFinished(run_id=self.run.id, at=self.now(), status=FAILED,
                              stopped=stopped))

    def _finish_step(
        self, sr: StepRun, status: StepStatus, result: JSON = None, reason: str | None = None
    ) -> StepStatus:
        self.emit(StepFinished(run_id=self.run.id, at=self.now(), step_id=sr.id,
                               status=status, result=result, reason=reason))
        return status

    async def _run_step(
        self, step: Step, sr: StepRun, attempts: Attempts, results: StepResults,
        calls: StepCalls,
    ) -> StepStatus:
        """Run (or continue, on resume) one step to its final status (spec §3.1, §5.3)."""
        plan = plan_step(sr, retry_interrupted=self._retry_interrupted)
        if plan.action is Action.KEEP:
            return sr.status
        if plan.start:
            self.emit(StepStarted(run_id=self.run.id, at=self.now(), step_id=step.id,
                                  idempotency_key=sr.idempotency_key))
        if plan.close_attempt is not None:
            # spec §5.3: as far as anyone knows it ended when the journal last heard of
            # the run.
            record_interrupted(self.run, step, plan.close_attempt, self._last_seen,
                               self.emit, who="the process")
        if plan.action is Action.FINISH:
            assert plan.status is not None
            return self._finish_step(sr, plan.status, plan.result)
        used = plan.attempts_used
        pending_wait = self._first_wait(step, plan)
        while True:
            if pending_wait is not None:
                await self.clock.sleep(pending_wait)
            used += 1
            outcome = await attempts.run(step, used, results, calls, lambda: self._stop_reason)
            if outcome == SUCCEEDED:
                return self._finish_step(sr, SUCCEEDED, sr.attempt(used).result)
            if not is_retried(outcome):
                return self._finish_step(sr, FAILED_CLOSED)
            if used >= step.policy.attempts:
                return self._finish_step(sr, FAILED)
            pending_wait = self._schedule_wait(step, used)

    def _first_wait(self, step: Step, plan: StepPlan) -> float | None:
        """The wait before the step's next attempt (spec §3.1, §5.3): the rest of a wait
        journaled as scheduled, a wait scheduled now, or none."""
        if plan.wait_due is not None:
            return max(0.0, plan.wait_due - self.now())
        if plan.schedule_after is not None:
            return self._schedule_wait(step, plan.schedule_after)
        return None

    def _schedule_wait(self, step: Step, after: int) -> float:
        seconds = step.policy.wait(after).total_seconds()
        now = self.now()
        self.emit(WaitScheduled(run_id=self.run.id, at=now, step_id=step.id,
                                after_attempt=after, seconds=seconds, due=now + seconds))
        return seconds
