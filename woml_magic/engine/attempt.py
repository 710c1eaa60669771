"""One attempt: a script run in the worker, raced against its timeout on the run's clock
(spec §3.2, §4.2, §4.5).

``AttemptRunner`` records ``attempt-started``, runs the script with the run's services,
and records ``attempt-finished`` with the attempt's one outcome, its error and its
explanation. The schedule around attempts is ``engine.schedule``'s.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ..clock import Clock
from ..events import AttemptError, AttemptFinished, AttemptStarted, CallFinished, Event, LogEmitted
from ..explain import explain, interrupted_message
from ..model import Run, Step
from ..outcomes import (
    AMBIGUOUS,
    CANCELLED,
    INTERRUPTED,
    RUNNING,
    SUCCEEDED,
    TIMEOUT,
    Outcome,
    StopReason,
    as_outcome,
    is_user_stop,
    stop_outcome,
)
from ..policy import format_duration
from ..runtime import AttemptRequest, AttemptResult
from ..runtime.attempt import StepResults, encode
from ..runtime.pool import WorkerPool
from ..services import CallScope, RunServices, StepCalls
from .activity import Activity
from .config import EngineConfig


class AttemptRunner:
    """Runs the attempts of one run (spec §3.2) and records each one's events."""

    def __init__(
        self,
        run: Run,
        clock: Clock,
        *,
        pool: WorkerPool,
        config: EngineConfig,
        emit: Callable[[Event], None],
        durable: Callable[[Event], Awaitable[None]] | None = None,
        services: RunServices | None = None,
    ) -> None:
        """``durable``: awaited with each ``call-started`` before its request leaves,
        where ``emit`` alone does not make it durable (spec §5.2; a Temporal activity).
        ``services``: what performs the scripts' ``services.*`` calls, when not the run's
        own made from ``config`` (the lab's model server, spec §11); closed with the run."""
        self._durable = durable
        self._run = run
        self._clock = clock
        self._pool = pool
        self._config = config
        self._services = services if services is not None else RunServices(clock, config)
        self._emit = emit
        self._payload_text: str | None = None  # the payload's JSON text, encoded once

    async def run(
        self,
        step: Step,
        number: int,
        results: StepResults,
        calls: StepCalls,
        stop_reason: Callable[[], StopReason | None],
    ) -> Outcome:
        """Attempt ``number`` of ``step``; its outcome. A cancel of the calling task
        records the attempt with ``stop_reason()``'s outcome, then propagates."""
        run = self._run
        key = run.steps[step.id].idempotency_key
        self._emit(AttemptStarted(run_id=run.id, at=self._clock.now(), step_id=step.id,
                                  number=number, idempotency_key=key))
        # Made at the attempt's first services call: most attempts make none.
        scope: CallScope | None = None
        activity = Activity(self._clock)

        async def call(name: str, args: list[Any]) -> Any:
            nonlocal scope
            if scope is None:
                scope = CallScope(run_id=run.id, step_id=step.id, attempt_number=number,
                                  step_calls=calls, emit=self._emit, now=self._clock.now,
                                  busy=self._clock.busy, sleep=self._clock.sleep,
                                  durable=self._durable, step_key=key)
            with activity.awaiting_service():
                return await self._services.call(name, args, scope)

        def on_log(level: str, text: str) -> None:
            line = text if level == "log" else f"[{level}] {text}"
            self._emit(LogEmitted(run_id=run.id, at=self._clock.now(), step_id=step.id,
                                  number=number, level=level, text=line))

        request = self._request(step, number, key, results)
        result: AttemptResult | None = None
        outcome: Outcome
        try:
            async with self._pool.worker() as worker:
                with activity.running():
                    # The script races its timeout on the run's clock: the alarm, armed
                    # when the attempt starts, ends it in the worker, which kills its
                    # process (spec §4.5).
                    result = await worker.run_attempt(
                        request, call, on_log, activity.stalled,
                        deadline=functools.partial(self._clock.alarm,
                                                   step.timeout.total_seconds()))
                    ended = self._clock.now()
            outcome = as_outcome(result.outcome)  # the worker checked it (§4.5)
            if outcome == TIMEOUT:
                result = None
        except asyncio.CancelledError:
            self._finish(step, number, stop_outcome(stop_reason()), None, scope, self._clock.now())
            raise
        return self._finish(step, number, outcome, result, scope, ended)

    async def aclose(self) -> None:
        """Close the run's services (its HTTP client, spec §4.1)."""
        await self._services.aclose()

    def _request(self, step: Step, number: int, key: str, results: StepResults) -> AttemptRequest:
        run, config = self._run, self._config
        if self._payload_text is None:
            self._payload_text = encode(run.payload)
        return AttemptRequest(
            script=step.script,
            script_line=step.script_line,
            script_column=step.script_column,
            # context.steps is read lazily from `results` (spec §3.6): linear in steps.
            context={"payload": run.payload, "steps": results,
                     "run": {"id": run.id, "workflow": run.workflow.id}},
            attempt={"number": number, "maxAttempts": step.policy.attempts,
                     "idempotencyKey": key},
            now_ms=self._clock.epoch_ms,
            limits=config.limits,
            payload_text=self._payload_text,
            secret_names=config.secrets.names if config.secrets else (),
        )

    def _finish(
        self, step: Step, number: int, outcome: Outcome, result: AttemptResult | None,
        scope: CallScope | None, ended: float,
    ) -> Outcome:
        """Record the attempt's end. ``scope`` is None when the script made no services
        call: then no call of the attempt can be ambiguous or faulted."""
        error = attempt_error(step, number, outcome, result)
        original = outcome
        if outcome != SUCCEEDED and not is_user_stop(outcome) and scope is not None \
                and scope.unkeyed_ambiguity:
            outcome = AMBIGUOUS  # spec §4.2: the guard outranks the attempt's own failure
        detail = result.error_message if result is not None else None
        keyed = scope is not None and _keyed_ambiguity(self._run, step.id, number)
        explanation = explain(outcome, step, number, original=original, detail=detail,
                              error_name=None if error is None else error.name,
                              keyed_ambiguity=keyed)
        if scope is not None:
            explanation = with_injected(explanation, self._run, step.id, number)
        self._emit(AttemptFinished(
            run_id=self._run.id, at=ended, step_id=step.id, number=number,
            outcome=outcome,
            result=result.result if outcome == SUCCEEDED and result else None,
            error=error,
            explanation=explanation,
        ))
        return outcome


def attempt_error(
    step: Step, number: int, outcome: Outcome, result: AttemptResult | None
) -> AttemptError | None:
    """The error an attempt records (spec §3.2): the script's, or the engine's own for a
    timeout, a cancel or a kernel interrupt."""
    if outcome == TIMEOUT:
        return AttemptError("TimeoutError", f"attempt {number} of {step.id} ran past its "
                                            f"timeout of {format_duration(step.timeout)}")
    if is_user_stop(outcome):
        cancelled = outcome == CANCELLED
        what = "the run was cancelled" if cancelled else "the kernel was interrupted"
        return AttemptError("CancelledError" if cancelled else "InterruptedError",
                            f"attempt {number} of {step.id} was stopped: {what}")
    if result is not None and result.outcome != SUCCEEDED:
        return AttemptError(result.error_name or "Error", result.error_message or "",
                            result.error_line)
    return None


def with_injected(explanation: str, run: Run, step_id: str, number: int) -> str:
    """``explanation``, saying which injected faults acted in attempt ``number`` (spec
    §10.2), still one sentence; unchanged when none did."""
    calls = run.steps[step_id].attempt(number).calls
    injected = [f"{c.name}: {c.injected}" for c in calls if c.injected]
    if not injected:
        return explanation
    which = "an injected fault" if len(injected) == 1 else "injected faults"
    return f"{explanation.rstrip('.')}; this attempt met {which} ({'; '.join(injected)})."


def record_interrupted(
    run: Run, step: Step, number: int, at: float, emit: Callable[[Event], None], *,
    who: str, recorded: Iterable[Event] = (),
) -> Outcome:
    """End attempt ``number`` of ``step``, which started but never finished, as spec
    §5.3 says; the one recorder of an interrupted attempt for both engines.

    ``recorded``: what the attempt did that the run has not seen yet (a dead Temporal
    worker's last heartbeat, spec §9), emitted first. Then each call the attempt left
    in flight ends ``ambiguous`` (spec §4.1: the request may have reached the server;
    nothing says whether it acted), and the attempt ``interrupted`` at ``at`` with
    §5.3's sentence as its error. ``who`` stopped: "the process" (found on resume),
    "the worker" (a Temporal worker that died)."""
    for event in recorded:
        emit(event)
    attempt = run.steps[step.id].attempt(number)
    for index, call in enumerate(attempt.calls):
        if call.outcome == RUNNING:
            emit(CallFinished(
                run_id=run.id, at=at, step_id=step.id, number=number, call_index=index,
                name=call.name, outcome=AMBIGUOUS,
                error=f"{who} stopped while the request was in flight; whether the server "
                      "acted on it is unknown",
            ))
    emit(AttemptFinished(
        run_id=run.id, at=at, step_id=step.id, number=number, outcome=INTERRUPTED,
        error=AttemptError("InterruptedError", interrupted_message(step.id, number)),
        explanation=explain(INTERRUPTED, step, number, on_resume=True),
    ))
    return INTERRUPTED


def _keyed_ambiguity(run: Run, step_id: str, number: int) -> bool:
    """Did attempt ``number`` see an ambiguous call that carried an idempotency key?"""
    calls = run.steps[step_id].attempt(number).calls
    return any(c.outcome == AMBIGUOUS and c.idempotency_header for c in calls)
