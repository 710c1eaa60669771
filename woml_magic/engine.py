"""The engine: runs a workflow's steps with WOML's retry semantics (spec §3, §4.2, §5.3).

It emits the frozen events of ``events.py``; the ``Run`` folds them first, then every
subscriber (journal, timeline, tests) sees them in order. Time comes only from the
run's ``Clock``; scripts run only in the script worker (spec §4.5). The engine never
imports widgets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .clock import Clock
from .errors import ServiceRejection, WomlSyntaxError
from .events import (
    JSON,
    AttemptFinished,
    AttemptStarted,
    CallFinished,
    Event,
    EventSink,
    LogEmitted,
    RunFinished,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    WaitScheduled,
)
from .explain import explain
from .limits import DEFAULT_MAX_RESULT_BYTES, DEFAULT_MEMORY_LIMIT_MB, Limits
from .model import Attempt, Run, Step, StepRun, Workflow
from .policy import DurationError, format_duration, parse_duration
from .redaction import DEFAULT_REDACTED
from .runtime import AttemptRequest, AttemptResult
from .runtime.attempt import StepResults, encode
from .runtime.pool import WorkerPool
from .services import CallScope, HttpService, StepCalls

#: spec §3.2: only a definitive script-thrown failure retries.
RETRYABLE = "threw"
#: User actions keep their own outcome even after an unkeyed ambiguous call (spec §4.2).
_USER_STOPS = ("cancelled", "interrupted")
MAX_SLEEP_SECONDS = 24 * 3600.0
#: How long compiling one script may take before the check gives up (spec §2.3).
CHECK_SECONDS = 10.0


@dataclass(frozen=True)
class EngineConfig:
    """Limits and HTTP settings for a run (spec §3.2, §4.1, §6.1 configuration)."""

    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    redact_headers: tuple[str, ...] = ()
    http_allow: tuple[str, ...] | None = None
    #: What may cross into the kernel (spec §4.5): payload, JSON depth, console,
    #: service-call arguments, response bodies.
    limits: Limits = field(default_factory=Limits)


def interrupted_message(step_id: str, number: int) -> str:
    """The error message of an attempt found open on resume (spec §5.3, verbatim)."""
    return (
        f"attempt {number} of {step_id} was interrupted; whether its effects happened is "
        "unknown. Check the external system, then resume with --retry-interrupted to run "
        "it again with the same idempotency key."
    )


async def check_scripts(workflow: Workflow, pool: WorkerPool) -> None:
    """Compile every script before anything runs (spec §2.3); raise ``WomlSyntaxError``."""
    pending = [step for step in workflow.steps if not pool.compiled(step.script)]
    if not pending:
        return
    async with pool.worker() as worker:
        for step in pending:
            try:
                problem = await asyncio.wait_for(
                    worker.check_syntax(step.script, step.script_line, step.script_column),
                    CHECK_SECONDS,
                )
            except asyncio.TimeoutError:
                # Only a script that closes its own function early can run code here.
                problem = (
                    f"compiling it did not finish within {CHECK_SECONDS:g}s; a script must be "
                    "the body of one async function (is there an unbalanced `}`?)",
                    step.script_line,
                    step.script_column,
                )
            if problem is not None:
                message, line, column = problem
                raise WomlSyntaxError(
                    f"JavaScript syntax error in the script of step {step.id!r}: {message}",
                    line,
                    column,
                ).with_source(workflow.cell_text())
            pool.remember_compiled(step.script)


class _Activity:
    """Tells a simulated clock when an attempt is doing real work.

    The attempt counts as busy except while the script awaits at least one service
    call: then only the service itself (an HTTP request) holds the clock.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._pending = 0
        self._busy: contextlib.ExitStack | None = None
        self._stalled = False

    def stalled(self) -> None:
        """Nothing can settle the script's promise: only the timeout can end the attempt,
        so no real work holds the clock any more (spec §3.2, §5.1)."""
        self._stalled = True
        self._release()

    def _hold(self) -> None:
        if self._busy is None:
            self._busy = contextlib.ExitStack()
            self._busy.enter_context(self._clock.busy())

    def _release(self) -> None:
        if self._busy is not None:
            self._busy.close()
            self._busy = None

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        self._hold()
        try:
            yield
        finally:
            self._release()

    @contextlib.contextmanager
    def awaiting_service(self) -> Iterator[None]:
        self._pending += 1
        self._release()
        try:
            yield
        finally:
            self._pending -= 1
            if self._pending == 0 and not self._stalled:
                self._hold()


class Engine:
    """Executes one run (new or resumed) and emits its events."""

    def __init__(
        self,
        run: Run,
        clock: Clock,
        *,
        pool: WorkerPool,
        sinks: Iterable[EventSink] = (),
        config: EngineConfig | None = None,
        retry_interrupted: bool = False,
    ) -> None:
        self.run = run
        self.clock = clock
        self._pool = pool
        self._sinks = list(sinks)
        self._config = config or EngineConfig()
        self._retry_interrupted = retry_interrupted
        self._stop_reason: str | None = None
        self._last_seen = run.now  # on resume: the last time the journal recorded
        self._http: HttpService | None = None
        self._payload_text: str | None = None  # the payload's JSON text, encoded once
        self._known_calls: dict[str, StepCalls] = {}

    # -- events ---------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        self.run.apply(event)
        for sink in self._sinks:
            sink(event)

    def subscribe(self, sink: EventSink) -> None:
        self._sinks.append(sink)

    def _now(self) -> float:
        return self.clock.now()

    # -- control ----------------------------------------------------------------------
    def stop_reason(self, reason: str) -> None:
        """Say why the task running this engine is about to be cancelled.

        ``"cancelled"`` (user cancel, the default) or ``"interrupted"`` (kernel interrupt).
        """
        self._stop_reason = reason

    # -- run --------------------------------------------------------------------------
    async def start_new(self) -> Run:
        wf = self.run.workflow
        self.emit(
            RunStarted(
                run_id=self.run.id,
                at=self._now(),
                workflow_id=wf.id,
                fingerprint=wf.fingerprint,
                clock=self.clock.kind,
                payload=self.run.payload,
                source=wf.source,
            )
        )
        return await self._execute()

    async def resume(self) -> Run:
        self.emit(
            RunResumed(
                run_id=self.run.id, at=self._now(), retry_interrupted=self._retry_interrupted
            )
        )
        return await self._execute()

    async def _execute(self) -> Run:
        results = StepResults()  # each result encoded once (spec §3.6, §4.5)
        # Named calls known from the journal, by step (spec §4.3 across resumes): one
        # pass over the history, not one per step.
        self._known_calls = StepCalls.by_step(self.run.events)
        status = "succeeded"
        try:
            for step in self.run.workflow.steps:
                sr = self.run.steps[step.id]
                if status != "succeeded":
                    self.emit(StepFinished(run_id=self.run.id, at=self._now(), step_id=step.id,
                                           status="not-run"))
                    continue
                final = await self._run_step(step, sr, results)
                if final in ("succeeded", "reattached"):
                    results.add(step.id, sr.result)
                else:
                    status = "failed"
        except asyncio.CancelledError:
            self._finish_after_stop()
            raise
        finally:
            http, self._http = self._http, None
            if http is not None:
                await http.aclose()
        self.emit(RunFinished(run_id=self.run.id, at=self._now(), status=status))
        return self.run

    def _finish_after_stop(self) -> None:
        """Close the books when the run's task is cancelled mid-way (spec §3.2)."""
        stopped = "interrupted" if self._stop_reason == "interrupted" else "cancelled"
        for sr in self.run.steps.values():
            reason = None
            if sr.status == "waiting":
                # No attempt was running to carry the outcome: say why on the step.
                reason = (f"the run was {stopped} during the wait before attempt "
                          f"{len(sr.attempts) + 1}; WOML does not retry after that")
            if sr.status in ("running", "waiting"):
                self.emit(StepFinished(run_id=self.run.id, at=self._now(), step_id=sr.id,
                                       status="failed-closed", reason=reason))
            elif sr.status == "pending":
                self.emit(StepFinished(run_id=self.run.id, at=self._now(), step_id=sr.id,
                                       status="not-run"))
        self.emit(RunFinished(run_id=self.run.id, at=self._now(), status="failed"))

    def _finish_step(self, sr: StepRun, status: str, result: JSON = None) -> str:
        self.emit(StepFinished(run_id=self.run.id, at=self._now(), step_id=sr.id,
                               status=status, result=result))
        return status

    async def _run_step(self, step: Step, sr: StepRun, results: StepResults) -> str:
        """Run (or continue, on resume) one step to its final status (spec §3.1, §5.3)."""
        policy = step.policy
        if sr.status in ("succeeded", "reattached"):
            # spec §5.3: a succeeded step is reattached, its result taken from the journal.
            return self._finish_step(sr, "reattached", sr.result)
        if sr.status in ("pending", "not-run"):
            # "not-run": an earlier resume stopped before it; now its turn has come (§5.3).
            self.emit(StepStarted(run_id=self.run.id, at=self._now(), step_id=step.id,
                                  idempotency_key=sr.idempotency_key))
        elif sr.status in ("failed", "failed-closed"):
            if not (self._retry_interrupted and sr.attempts
                    and sr.attempts[-1].outcome == "interrupted"):
                return sr.status
            self.emit(StepStarted(run_id=self.run.id, at=self._now(), step_id=step.id,
                                  idempotency_key=sr.idempotency_key))
        calls = self._known_calls.pop(step.id, None) or StepCalls()  # spec §4.3
        used = len(sr.attempts)
        last = sr.attempts[-1] if sr.attempts else None
        pending_wait: float | None = None
        if last is not None:
            if last.outcome == "running":
                # spec §5.3: an attempt that started but never finished is interrupted.
                message = interrupted_message(step.id, last.number)
                self._close_open_calls(step, last)
                # As far as anyone knows it ended when the journal last heard of the run.
                self.emit(AttemptFinished(
                    run_id=self.run.id, at=self._last_seen, step_id=step.id, number=last.number,
                    outcome="interrupted",
                    error={"name": "InterruptedError", "message": message, "line": None},
                    explanation=explain("interrupted-on-resume", step, last.number),
                ))
                if not self._retry_interrupted:
                    return self._finish_step(sr, "failed-closed")
            elif last.outcome == "interrupted":
                pass  # retry_interrupted: counts as used, the next attempt starts at once
            elif last.outcome == "succeeded":
                return self._finish_step(sr, "succeeded", last.result)
            elif last.outcome != RETRYABLE:
                return self._finish_step(sr, "failed-closed")
            elif used >= policy.attempts:
                return self._finish_step(sr, "failed")
            elif sr.wait_due is not None:
                pending_wait = max(0.0, sr.wait_due - self._now())  # continue the schedule
            else:
                pending_wait = self._schedule_wait(step, used)
            if used >= policy.attempts:
                return self._finish_step(sr, "failed-closed")
        while True:
            if pending_wait is not None:
                await self.clock.sleep(pending_wait)
            used += 1
            outcome = await self._attempt(step, sr, used, results, calls)
            if outcome == "succeeded":
                return self._finish_step(sr, "succeeded", sr.attempt(used).result)
            if outcome != RETRYABLE:
                return self._finish_step(sr, "failed-closed")
            if used >= policy.attempts:
                return self._finish_step(sr, "failed")
            pending_wait = self._schedule_wait(step, used)

    def _close_open_calls(self, step: Step, attempt: Attempt) -> None:
        """Record calls left in flight by a dead process as ``ambiguous`` (spec §4.1, §5.3).

        The request may have reached the server; nothing says whether it acted.
        """
        for index, call in enumerate(attempt.calls):
            if call.outcome == "running":
                self.emit(CallFinished(
                    run_id=self.run.id, at=self._last_seen, step_id=step.id,
                    number=attempt.number, call_index=index, name=call.name,
                    outcome="ambiguous",
                    error="the process stopped while the request was in flight; whether "
                          "the server acted on it is unknown",
                ))

    def _schedule_wait(self, step: Step, after: int) -> float:
        seconds = step.policy.wait(after).total_seconds()
        now = self._now()
        self.emit(WaitScheduled(run_id=self.run.id, at=now, step_id=step.id,
                                after_attempt=after, seconds=seconds, due=now + seconds))
        return seconds

    async def _attempt(
        self, step: Step, sr: StepRun, number: int, results: StepResults, calls: StepCalls
    ) -> str:
        """One attempt in the worker, raced against the timeout on the run's clock."""
        run_id = self.run.id
        self.emit(AttemptStarted(run_id=run_id, at=self._now(), step_id=step.id, number=number,
                                 idempotency_key=sr.idempotency_key))
        scope = CallScope(run_id=run_id, step_id=step.id, attempt_number=number,
                          step_calls=calls, emit=self.emit, now=self._now,
                          busy=self.clock.busy)
        activity = _Activity(self.clock)
        services = self._services(scope, activity)

        def on_log(level: str, text: str) -> None:
            line = text if level == "log" else f"[{level}] {text}"
            self.emit(LogEmitted(run_id=run_id, at=self._now(), step_id=step.id,
                                 number=number, level=level, text=line))

        if self._payload_text is None:
            self._payload_text = encode(self.run.payload)
        limits = self._config.limits
        request = AttemptRequest(
            script=step.script,
            script_line=step.script_line,
            script_column=step.script_column,
            # context.steps is read lazily from `results` (spec §3.6): linear in steps.
            context={"payload": self.run.payload, "steps": results,
                     "run": {"id": run_id, "workflow": self.run.workflow.id}},
            attempt={"number": number, "maxAttempts": step.policy.attempts,
                     "idempotencyKey": sr.idempotency_key},
            now_ms=self.clock.epoch_ms,
            memory_limit_bytes=self._config.memory_limit_mb * 1024 * 1024,
            max_result_bytes=self._config.max_result_bytes,
            max_json_depth=limits.max_json_depth,
            max_call_args_bytes=limits.max_call_args_bytes,
            max_log_lines=limits.max_log_lines,
            max_log_bytes=limits.max_log_bytes,
            payload_text=self._payload_text,
        )
        result: AttemptResult | None = None
        outcome: str
        try:
            async with self._pool.worker() as worker:
                with activity.running():
                    job = asyncio.ensure_future(worker.run_attempt(
                        request, services, on_log, activity.stalled))
                    timer = asyncio.ensure_future(self.clock.sleep(step.timeout.total_seconds()))
                    try:
                        done, _ = await asyncio.wait({job, timer},
                                                     return_when=asyncio.FIRST_COMPLETED)
                        ended = self._now()
                    finally:
                        timer.cancel()
                        if not job.done():
                            job.cancel()  # the worker kills its process (spec §4.5)
                        with contextlib.suppress(asyncio.CancelledError):
                            await job
            if job in done and not job.cancelled():
                result = job.result()
                outcome = result.outcome
            else:
                outcome = "timeout"
        except asyncio.CancelledError:
            self._finish_attempt(step, number, self._stop_reason or "cancelled", None, scope,
                                 self._now())
            raise
        return self._finish_attempt(step, number, outcome, result, scope, ended)

    def _finish_attempt(
        self, step: Step, number: int, outcome: str, result: AttemptResult | None,
        scope: CallScope, ended: float,
    ) -> str:
        error: dict[str, JSON] | None = None
        if result is not None and result.outcome != "succeeded":
            error = {"name": result.error_name or "Error",
                     "message": result.error_message or "", "line": result.error_line}
        detail = result.error_message if result is not None else None
        if outcome == "timeout":
            error = {"name": "TimeoutError",
                     "message": f"attempt {number} of {step.id} ran past its timeout of "
                                f"{format_duration(step.timeout)}", "line": None}
        elif outcome in _USER_STOPS:
            what = "the run was cancelled" if outcome == "cancelled" else \
                "the kernel was interrupted"
            error = {"name": "CancelledError" if outcome == "cancelled" else "InterruptedError",
                     "message": f"attempt {number} of {step.id} was stopped: {what}",
                     "line": None}
        original = outcome
        if outcome != "succeeded" and outcome not in _USER_STOPS and scope.unkeyed_ambiguity:
            outcome = "ambiguous"  # spec §4.2: the guard outranks the attempt's own failure
        self.emit(AttemptFinished(
            run_id=self.run.id, at=ended, step_id=step.id, number=number,
            outcome=outcome, result=result.result if outcome == "succeeded" and result else None,
            error=error,
            explanation=explain(outcome, step, number, original=original, detail=detail,
                                error_name=None if error is None else str(error["name"]),
                                keyed_ambiguity=_keyed_ambiguity(self.run, step.id, number)),
        ))
        return outcome

    def _http_service(self) -> HttpService:
        """The run's HTTP client, made on first use (its TLS setup costs ~15 ms) and
        closed with the run (spec §4.1)."""
        if self._http is None:
            self._http = HttpService(
                redact=_redact_names(self._config.redact_headers),
                allow_hosts=self._config.http_allow,
                max_response_bytes=self._config.limits.max_response_bytes,
                max_json_depth=self._config.limits.max_json_depth,
            )
        return self._http

    def _services(
        self, scope: CallScope, activity: _Activity
    ) -> Callable[[str, list[Any]], Any]:
        async def call(name: str, args: list[Any]) -> Any:
            with activity.awaiting_service():
                if name == "sleep":
                    await self.clock.sleep(_sleep_seconds(args))
                    return None
                if name == "http.request":
                    request = args[0] if args else None
                    options = args[1] if len(args) > 1 else None
                    return await self._http_service().request(request, options, scope)
            raise ServiceRejection("TypeError", f"services has no {name!r}")

        return call


def _sleep_seconds(args: list[Any]) -> float:
    """``services.sleep(duration)``: a duration string or milliseconds (spec §4.4)."""
    allowed = "pass a duration such as \"250ms\" or \"2s\", or a number of milliseconds"
    if not args:
        raise ServiceRejection("TypeError", f"services.sleep needs a duration; {allowed}")
    value = args[0]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ServiceRejection("TypeError", f"services.sleep got {json.dumps(value)}; {allowed}")
    if isinstance(value, str):
        try:
            seconds = parse_duration(value).total_seconds()
        except DurationError as exc:
            raise ServiceRejection("TypeError", f"services.sleep: {exc}") from None
    else:
        seconds = float(value) / 1000.0
    if not 0 <= seconds <= MAX_SLEEP_SECONDS:
        raise ServiceRejection("RangeError",
                               f"services.sleep got {value!r}; it must be between 0 and 24h")
    return seconds


def _redact_names(extra: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*DEFAULT_REDACTED, *(n.lower() for n in extra)]))


def _keyed_ambiguity(run: Run, step_id: str, number: int) -> bool:
    """Did attempt ``number`` see an ambiguous call that carried an idempotency key?"""
    calls = run.steps[step_id].attempt(number).calls
    return any(c.outcome == "ambiguous" and c.idempotency_header for c in calls)
