"""Runs built from hand-written event sequences, for the timeline tests (spec §6.3).

The events are the engine's real event classes applied through ``Run.apply``, so the
runs are exactly what the engine or the journal would hand the timeline.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Any

from woml_magic.events import (
    AttemptError,
    AttemptFinished,
    AttemptStarted,
    CallFinished,
    CallStarted,
    Event,
    LogEmitted,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    WaitScheduled,
)
from woml_magic.model import Run, Step, Workflow
from woml_magic.policy import RetryPolicy

CHARGE_POLICY = RetryPolicy(
    attempts=4, backoff="exponential", delay=timedelta(seconds=1), max_delay=timedelta(seconds=10)
)


def workflow(*steps: tuple[str, RetryPolicy], wf_id: str = "checkout") -> Workflow:
    return Workflow(wf_id, tuple(Step(sid, "return 1;", policy) for sid, policy in steps))


class Recorder:
    """Applies events to a ``Run`` and to any listening sink, like the engine does."""

    def __init__(self, wf: Workflow, run_id: str = "run-1", clock: str = "simulated") -> None:
        self.run = Run(run_id, wf, clock=clock)
        self.sinks: list[Any] = []
        self.emit(RunStarted(run_id, 0.0, workflow_id=wf.id, clock=clock))

    def emit(self, event: Event) -> Event:
        self.run.apply(event)
        for sink in self.sinks:
            sink(event)
        return event

    def key(self, step: str) -> str:
        return self.run.steps[step].idempotency_key

    def step(self, step: str, at: float) -> None:
        self.emit(StepStarted(self.run.id, at, step_id=step, idempotency_key=self.key(step)))

    def start(self, step: str, number: int, at: float) -> None:
        self.emit(
            AttemptStarted(
                self.run.id, at, step_id=step, number=number, idempotency_key=self.key(step)
            )
        )

    def log(self, step: str, number: int, at: float, text: str) -> None:
        self.emit(LogEmitted(self.run.id, at, step_id=step, number=number, text=text))

    def call(
        self,
        step: str,
        number: int,
        at: float,
        *,
        index: int = 0,
        method: str = "POST",
        url: str = "http://127.0.0.1:9/charges",
        status: int | None = 201,
        outcome: str = "response",
        replayed: bool = False,
        headers: dict[str, str] | None = None,
        key_header: str | None = "Idempotency-Key",
        name: str | None = "charge",
        response_headers: dict[str, str] | None = None,
    ) -> None:
        self.emit(
            CallStarted(
                self.run.id,
                at,
                step_id=step,
                number=number,
                call_index=index,
                name=name,
                method=method,
                url=url,
                request_headers=headers or {},
                idempotency_header=key_header,
                idempotency_value=self.key(step) if key_header else None,
            )
        )
        self.emit(
            CallFinished(
                self.run.id,
                at + 0.01,
                step_id=step,
                number=number,
                call_index=index,
                name=name,
                outcome=outcome,
                status=status,
                replayed=replayed,
                response=None
                if response_headers is None
                else {"status": status, "headers": response_headers, "data": None},
            )
        )

    def finish(
        self,
        step: str,
        number: int,
        at: float,
        outcome: str,
        *,
        error: tuple[str, str, int | None] | None = None,
        explanation: str = "",
        result: Any = None,
    ) -> None:
        err = None if error is None else AttemptError(*error)
        self.emit(
            AttemptFinished(
                self.run.id,
                at,
                step_id=step,
                number=number,
                outcome=outcome,
                error=err,
                explanation=explanation,
                result=result,
            )
        )

    def wait(self, step: str, after: int, at: float, seconds: float) -> None:
        self.emit(
            WaitScheduled(
                self.run.id,
                at,
                step_id=step,
                after_attempt=after,
                seconds=seconds,
                due=at + seconds,
            )
        )

    def step_done(self, step: str, at: float, status: str, result: Any = None) -> None:
        self.emit(StepFinished(self.run.id, at, step_id=step, status=status, result=result))

    def run_done(self, at: float, status: str, stopped: Any = None) -> None:
        self.emit(RunFinished(self.run.id, at, status=status, stopped=stopped))


def failed_closed(sinks: Sequence[Any] = ()) -> Recorder:
    """charge: #1 threw, wait 1s, #2 threw, wait 2s, #3 timeout → failed-closed; email not run."""
    r = Recorder(workflow(("charge", CHARGE_POLICY), ("email", RetryPolicy())))
    r.sinks.extend(sinks)
    r.step("charge", 0.0)
    r.start("charge", 1, 0.0)
    r.log("charge", 1, 0.05, "charging card")
    r.call("charge", 1, 0.06, status=503)
    r.finish(
        "charge",
        1,
        0.12,
        "threw",
        error=("TypeError", "boom", 7),
        explanation="Attempt 1 threw; retrying after 1s (3 attempts left).",
    )
    r.wait("charge", 1, 0.12, 1.0)
    r.start("charge", 2, 1.12)
    r.finish(
        "charge",
        2,
        1.3,
        "threw",
        error=("HttpError", "503 Service Unavailable", 9),
        explanation="Attempt 2 threw; retrying after 2s (2 attempts left).",
    )
    r.wait("charge", 2, 1.3, 2.0)
    r.start("charge", 3, 3.3)
    r.finish(
        "charge",
        3,
        33.3,
        "timeout",
        error=("TimeoutError", "attempt 3 ran past the step timeout of 30s", None),
        explanation="Attempt 3 timed out; timeouts fail closed and are not retried.",
    )
    r.step_done("charge", 33.3, "failed-closed")
    r.step_done("email", 33.3, "not-run")
    r.run_done(33.3, "failed")
    return r


def waiting(sinks: Sequence[Any] = ()) -> Recorder:
    """A live run: charge #1 threw at 0.12s and waits 1s; email is pending."""
    r = Recorder(workflow(("charge", CHARGE_POLICY), ("email", RetryPolicy())), clock="real")
    r.sinks.extend(sinks)
    r.step("charge", 0.0)
    r.start("charge", 1, 0.0)
    r.finish("charge", 1, 0.12, "threw", error=("TypeError", "boom", 7), explanation="retrying")
    r.wait("charge", 1, 0.12, 1.0)
    return r


def succeeded(result: Any = None) -> Recorder:
    """One step that succeeds at once with ``result``."""
    r = Recorder(workflow(("fetch", RetryPolicy())), run_id="run-ok")
    r.step("fetch", 0.0)
    r.start("fetch", 1, 0.0)
    r.finish("fetch", 1, 0.5, "succeeded", result=result, explanation="Attempt 1 succeeded.")
    r.step_done("fetch", 0.5, "succeeded", result)
    r.run_done(0.5, "succeeded")
    return r


#: spec §3.1's example: retry="10" exponential 1s, max 30s.
SPEC_POLICY = RetryPolicy(
    attempts=10, backoff="exponential", delay=timedelta(seconds=1), max_delay=timedelta(seconds=30)
)
#: spec §3.1: the waits of SPEC_POLICY.
SPEC_WAITS = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0)


def retried(
    waits: Sequence[float] = SPEC_WAITS,
    *,
    attempt_s: float = 0.006,
    policy: RetryPolicy = SPEC_POLICY,
    last: str = "threw",
    explanation: str = "Attempt {n} threw; retrying.",
    late_s: float = 0.0,
) -> Recorder:
    """charge throws ``len(waits)`` times with the given waits, then its last attempt
    ends ``last``; each attempt lasts ``attempt_s`` and starts ``late_s`` after its wait
    was due (a real clock's lateness); a second step ``email`` then runs (succeeded) or
    is not run."""
    r = Recorder(workflow(("charge", policy), ("email", RetryPolicy())))
    r.step("charge", 0.0)
    t = 0.0
    for n, wait in enumerate([*waits, None], start=1):
        r.start("charge", n, t)
        t += attempt_s
        outcome = "threw" if wait is not None else last
        error = ("Error", "card network busy", 2) if outcome == "threw" else None
        r.finish("charge", n, t, outcome, error=error, explanation=explanation.format(n=n))
        if wait is not None:
            r.wait("charge", n, t, wait)
            t += wait + late_s
    ok = last == "succeeded"
    r.step_done("charge", t, "succeeded" if ok else "failed")
    if ok:
        r.step("email", t)
        r.start("email", 1, t)
        t += 0.05
        r.finish("email", 1, t, "succeeded", explanation="Attempt 1 of 1 succeeded.")
        r.step_done("email", t, "succeeded")
    else:
        r.step_done("email", t, "not-run")
    r.run_done(t, "succeeded" if ok else "failed")
    return r


def many(steps: int, attempts: int, calls: Collection[str] = (), name: str = "s") -> Run:
    """``steps`` steps ``s0``, ``s1``, … (``name`` before the number), each throwing
    ``attempts - 1`` times and then succeeding; each attempt of a step in ``calls`` makes
    one keyed ``POST`` (its key lineage has a row per attempt)."""
    policy = RetryPolicy(attempts, "fixed", timedelta(seconds=1))
    r = Recorder(workflow(*((f"{name}{i}", policy) for i in range(steps))))
    t = 0.0
    for i in range(steps):
        sid = f"{name}{i}"
        r.step(sid, t)
        for n in range(1, attempts + 1):
            r.start(sid, n, t)
            r.log(sid, n, t + 0.01, f"try {n}")
            if sid in calls:
                r.call(sid, n, t + 0.05, status=201 if n == attempts else 503)
            last = n == attempts
            r.finish(
                sid,
                n,
                t + 0.2,
                "succeeded" if last else "threw",
                error=None if last else ("Error", "flaky", 3),
                explanation="succeeded" if last else "retrying",
                result={"ok": True} if last else None,
            )
            t += 0.2
            if not last:
                r.wait(sid, n, t, 1.0)
                t += 1.0
        r.step_done(sid, t, "succeeded", {"ok": True})
    r.run_done(t, "succeeded")
    return r.run


def unpicture(html: str) -> str:
    """What ``timeline.js`` makes of a saved output (spec §6.5): the picture's SVG
    inline again, without its background, and without the note on trusting."""

    def inline(m: re.Match[str]) -> str:
        svg = base64.b64decode(m.group(1)).decode("utf-8")
        return re.sub(r'<rect class="woml-picture-bg"[^>]*/>', "", svg, count=1)

    html = re.sub(
        r'<img class="woml-picture"[^>]*src="data:image/svg\+xml;base64,([^"]+)"/>', inline, html
    )
    return re.sub(r'<p class="woml-shared-note">[^<]*</p>', "", html)


def drawing_parts(saved: str) -> dict[str, Any] | None:
    """The live drawing a big saved output carries (``picture.drawing_data``):
    ``{"svg": …, "lanes": [[ref, y, height, segments, markup], …]}``, or None."""
    found = re.search(
        r'<script type="application/gzip" class="woml-drawing-data">([A-Za-z0-9+/=]+)</script>',
        saved,
    )
    if found is None:
        return None
    text = gzip.decompress(base64.b64decode(found.group(1))).decode("utf-8")
    line, rest = text.split("\n", 1)
    index = json.loads(line)
    units = rest.encode("utf-16-le")  # the lengths are a JavaScript string's
    at = 0

    def take(length: int) -> str:
        nonlocal at
        at += 2 * length
        return units[at - 2 * length : at].decode("utf-16-le")

    svg = take(index["svg"])
    lanes = [[*lane[:4], take(lane[4])] for lane in index["lanes"]]
    assert at == len(units)  # nothing left over
    return {"svg": svg, "lanes": lanes}
