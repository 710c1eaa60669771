"""The one generic Temporal workflow that interprets any WOML document (spec §9).

Its input is the parsed document with the payload (and, for a resumed run, the
journaled past); any worker runs any document. The workflow code is the local
engine's own schedule (``engine.schedule.Engine``, ``resume.plan_step``): §3.1's
waits become durable timers (a wait of 0 is no timer), §3.2's rules decide what
retries, and each attempt is one activity execution with Temporal's retries off
(``maximum_attempts=1``) — so a run reads the same on both engines.

The workflow records the WOML events it emits; the query ``events`` serves them to a
kernel that follows the run live, and its result holds them all. Replaying its
history gives them back too (``temporal.history``). Its input and result are
dataclasses (``RunInput``, ``RunOutput``), which Temporal's default data converter
reads and writes by their fields; a kernel names its query and signals by method
(``handle.query(WomlWorkflow.events, …)``), never by a string.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError, TimeoutError

from ..clock import Clock, ClockKind
from ..engine.attempt import attempt_error, record_interrupted
from ..engine.config import EngineConfig
from ..engine.schedule import Engine
from ..events import (
    JSON,
    AttemptError,
    AttemptFinished,
    AttemptStarted,
    CallFinished,
    CallStarted,
    Event,
    WaitScheduled,
    event_from_dict,
)
from ..explain import explain
from ..model import Run, Step
from ..outcomes import (
    CRASH,
    RESPONSE,
    Outcome,
    StopReason,
    as_outcome,
    stop_outcome,
)
from ..policy import format_duration
from ..runtime.attempt import StepResults
from ..services import StepCalls
from ..services.scope import is_reattachable
from .activity import AttemptInput, run_attempt
from .document import from_data

#: The workflow type every WOML run runs as.
WORKFLOW = "woml"
#: The signal that records a call before its request leaves, by the name histories
#: already hold (a replay delivers signals by name); senders name it by method.
CALL_STARTED = "call-started"
#: A worker that stops heartbeating this long is dead: its attempt is ``interrupted``.
HEARTBEAT_TIMEOUT = timedelta(seconds=3)
#: Beyond the step's own timeout (enforced by the activity), Temporal's backstop.
BACKSTOP = timedelta(seconds=60)



@dataclass(frozen=True)
class RunInput:
    """The workflow's input (spec §9): the parsed document, the payload and the config
    (never its secrets); for a resumed run, its journaled past and where its clock
    stood."""

    document: dict[str, Any]  # the parsed document (``temporal.document.to_data``)
    payload: JSON = None
    config: EngineConfig = field(default_factory=EngineConfig)
    retry_interrupted: bool = False
    past: list[dict[str, Any]] = field(default_factory=list)  # ``Event.to_dict`` each
    clock_start: float = 0.0


@dataclass(frozen=True)
class RunOutput:
    """The workflow's result: the run's status and every WOML event it emitted."""

    status: str
    events: list[dict[str, Any]]


#: Replays that want the events a workflow emits (``temporal.history``), by
#: (workflow id, run id). Written only while replaying.
CAPTURE: dict[tuple[str, str], list[dict[str, Any]]] = {}


class WorkflowClock(Clock):
    """The run's clock inside the workflow: Temporal's deterministic time (spec §5.1),
    behind the one ``Clock`` interface (Temporal keeps the timers; ``clock.py`` says why
    this is no second virtual clock).

    ``now`` counts from the workflow's start (plus, for a resumed run, where its clock
    stood); ``sleep`` is a durable timer with a summary that reads like the timeline.
    """

    kind: ClockKind = "real"

    def __init__(self, start_at: float = 0.0) -> None:
        self._started = workflow.now()
        self._start_at = start_at
        self.summary: str | None = None  # the next timer's summary (``wait 2s …``)

    def now(self) -> float:
        return self._start_at + (workflow.now() - self._started).total_seconds()

    def epoch_ms(self) -> float:
        return workflow.now().timestamp() * 1000.0

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return  # spec §9: a wait of 0 is no timer at all
        summary, self.summary = self.summary, None
        await workflow.sleep(seconds, summary=summary or f"wait {format_duration(seconds)}")


class ActivityAttempts:
    """Each attempt as one activity execution, its events re-emitted in the workflow."""

    def __init__(self, run: Run, clock: WorkflowClock, emit: Callable[[Event], None],
                 document: dict[str, Any], config: EngineConfig,
                 calls_started: dict[tuple[str, int], list[dict[str, Any]]]) -> None:
        self._run, self._clock, self._emit = run, clock, emit
        self._document, self._config = document, config
        self._calls_started = calls_started  # signalled by activities (call_started)

    async def run(
        self, step: Step, number: int, results: StepResults, calls: StepCalls,
        stop_reason: Callable[[], str | None],
    ) -> Outcome:
        run = self._run
        started = self._clock.now()
        self._emit(AttemptStarted(run_id=run.id, at=started, step_id=step.id, number=number,
                                  idempotency_key=run.steps[step.id].idempotency_key))
        request = AttemptInput(run_id=run.id, document=self._document, payload=run.payload,
                               step_id=step.id, number=number, results=dict(results),
                               reattach=dict(calls.reattach), config=self._config)
        try:
            out = await workflow.execute_activity(
                run_attempt, request,
                start_to_close_timeout=step.timeout + BACKSTOP,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=1),  # WOML decides (spec §3.2)
                summary=f"{step.id} · attempt {number}/{step.policy.attempts}",
            )
        except (asyncio.CancelledError, CancelledError):
            self._finish(step, number, stop_outcome(stop_reason()), None)
            raise
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):  # the server cancelled it
                return self._finish(step, number, stop_outcome(stop_reason()), None)
            return self._lost(step, number, started, exc)
        return self._replay(step, number, started, out.events, calls)

    def _replay(self, step: Step, number: int, started: float,
                events: list[dict[str, Any]], calls: StepCalls) -> Outcome:
        """Emit what the activity recorded (but its ``attempt-started``: already
        emitted), on the run's clock; the outcome of its ``attempt-finished``."""
        ended = self._clock.now()
        outcome: Outcome | None = None
        for data in events:
            if data["kind"] == AttemptStarted.kind:
                continue
            event = event_from_dict({**data, "at": min(ended, started + float(data["at"]))})
            if isinstance(event, AttemptFinished):
                event = _at(event, ended)
                outcome = event.outcome
            if isinstance(event, CallFinished) and event.name is not None \
                    and event.outcome == RESPONSE and is_reattachable(event.status) \
                    and isinstance(event.response, dict):
                calls.reattach[event.name] = dict(event.response)  # spec §4.3
            self._emit(event)
        if outcome is None:
            return self._finish(step, number, CRASH, "the activity returned no outcome")
        return as_outcome(outcome)

    def _lost(self, step: Step, number: int, started: float, exc: ActivityError) -> Outcome:
        """The activity ended without a result: its worker died (a heartbeat or
        start-to-close timeout) — ``interrupted``, its effects unknown (spec §5.3, §9)."""
        cause = exc.cause
        if not isinstance(cause, TimeoutError):
            return self._finish(step, number, CRASH, f"the activity failed: {exc.cause or exc}")
        details = list(cause.last_heartbeat_details or [])
        seen = details[0] if details and isinstance(details[0], list) else []
        # Calls the activity recorded durably before sending (a signal each) that its
        # last heartbeat did not carry yet.
        beat = {d.get("call_index") for d in seen if d.get("kind") == CallStarted.kind}
        seen = [*seen, *(d for d in self._calls_started.get((step.id, number), [])
                         if d.get("call_index") not in beat)]
        now = self._clock.now()
        recorded = [event_from_dict({**d, "at": min(now, started + float(d["at"]))})
                    for d in seen
                    if d.get("kind") not in (AttemptStarted.kind, AttemptFinished.kind)]
        return record_interrupted(self._run, step, number, now, self._emit, who="the worker",
                                  recorded=recorded)

    def _finish(self, step: Step, number: int, outcome: Outcome, detail: str | None) -> Outcome:
        error = attempt_error(step, number, outcome, None)
        if error is None and detail is not None:
            error = AttemptError("WorkerError", detail)
        self._emit(AttemptFinished(
            run_id=self._run.id, at=self._clock.now(), step_id=step.id, number=number,
            outcome=outcome, error=error,
            explanation=explain(outcome, step, number, detail=detail)))
        return outcome

    async def aclose(self) -> None:
        return None


def _at(event: AttemptFinished, at: float) -> AttemptFinished:
    return dataclasses.replace(event, at=at)


@workflow.defn(name=WORKFLOW)
class WomlWorkflow:
    """Interprets one WOML document (spec §9); its result is the run's events."""

    def __init__(self) -> None:
        self._events: list[dict[str, Any]] = []
        self._engine: Engine | None = None
        self._stop_reason: StopReason | None = None
        self._calls_started: dict[tuple[str, int], list[dict[str, Any]]] = {}

    @workflow.run
    async def run(self, data: RunInput) -> RunOutput:
        info = workflow.info()
        capture = CAPTURE.get((info.workflow_id, info.run_id)) \
            if workflow.unsafe.is_replaying() else None
        document = from_data(data.document)
        past = [event_from_dict(e) for e in data.past]
        if past:
            run = Run.from_events(document, past)
        else:
            run = Run(id=info.workflow_id, workflow=document, clock="real",
                      payload=data.payload)
        clock = WorkflowClock(start_at=data.clock_start)

        def record(event: Event) -> None:
            as_dict = event.to_dict()
            self._events.append(as_dict)
            if capture is not None:
                capture.append(as_dict)
            if isinstance(event, WaitScheduled):
                clock.summary = (f"wait {format_duration(event.seconds)} before "
                                 f"{event.step_id} attempt {event.after_attempt + 1}")

        def attempts(run: Run, clock_: Clock, emit: Callable[[Event], None]) -> ActivityAttempts:
            return ActivityAttempts(run, clock, emit, data.document, data.config,
                                    self._calls_started)

        engine = Engine(run, clock, attempts=attempts, sinks=[record], resume=bool(past),
                        retry_interrupted=data.retry_interrupted)
        self._engine = engine
        if self._stop_reason is not None:
            engine.stop_reason(self._stop_reason)
        with contextlib.suppress(asyncio.CancelledError, CancelledError):
            await engine.execute()
        # A cancelled run ends like any other WOML run (its attempt `cancelled`, the
        # run `failed`): the workflow completes with its events either way.
        return RunOutput(status=run.status, events=self._events)

    @workflow.query
    def events(self, since: int) -> list[dict[str, Any]]:
        """The WOML events from index ``since`` on (a kernel following the run)."""
        return self._events[since:]

    @workflow.signal(name=CALL_STARTED)
    def call_started(self, event: dict[str, Any]) -> None:
        """An activity is about to send a request (spec §5.2): kept until the attempt
        ends, so a worker that dies mid-call leaves that call ``ambiguous``."""
        key = (str(event.get("step_id")), int(event.get("number", 0)))
        self._calls_started.setdefault(key, []).append(event)

    @workflow.signal
    def stop(self, reason: str) -> None:
        """Why the coming cancel stops the run: ``cancelled`` or ``interrupted`` (the
        signal's text is read as one of them, spec §3.2)."""
        self._stop_reason = stop_outcome(reason)
        if self._engine is not None:
            self._engine.stop_reason(self._stop_reason)


@contextlib.contextmanager
def capturing(workflow_id: str, run_id: str) -> Iterator[list[dict[str, Any]]]:
    """Collect the events a replay of ``(workflow_id, run_id)`` emits."""
    events: list[dict[str, Any]] = []
    CAPTURE[(workflow_id, run_id)] = events
    try:
        yield events
    finally:
        CAPTURE.pop((workflow_id, run_id), None)
