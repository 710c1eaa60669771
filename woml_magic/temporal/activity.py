"""One WOML attempt as one Temporal activity execution (spec §9).

The activity runs the attempt exactly as the local engine does — ``engine.attempt``'s
``AttemptRunner``: the script in the warm QuickJS worker (spec §4.5), the step's
timeout enforced here on the worker's real clock, the §4.2 guard, the same error and
explanation — and returns the attempt's events as data. It heartbeats with the events
so far, so when its worker dies the workflow still knows the calls in flight (§5.3).

Its input and result are dataclasses (``AttemptInput``, ``AttemptOutput``): Temporal's
default data converter writes them, and reads them back, from their fields — the
run's ``EngineConfig`` included, whole — so nothing here restates a field by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity

from ..clock import RealClock
from ..engine.attempt import AttemptRunner
from ..engine.config import EngineConfig
from ..events import JSON, Event
from ..model import Run, Workflow
from ..outcomes import CANCELLED
from ..runtime.attempt import StepResults
from ..runtime.pool import default_pool
from ..services import StepCalls
from .document import from_data

#: The activity type every WOML attempt runs as.
ACTIVITY = "woml-attempt"
#: How often a running attempt heartbeats (its worker's liveness; spec §9).
HEARTBEAT_EVERY_S = 0.5


@dataclass(frozen=True)
class AttemptInput:
    """What one attempt needs (the activity's input, spec §9)."""

    run_id: str
    document: dict[str, Any]  # the parsed document (``temporal.document.to_data``)
    payload: JSON
    step_id: str
    number: int
    #: Results of the steps that succeeded before this one (spec §3.6).
    results: dict[str, JSON] = field(default_factory=dict)
    #: Named calls whose 2xx response is known, by name (spec §4.3).
    reattach: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The run's config, never with its secrets (spec §10.1: they stay in the kernel).
    config: EngineConfig = field(default_factory=EngineConfig)


@dataclass(frozen=True)
class AttemptOutput:
    """What one attempt did: its events (``attempt-started`` … ``attempt-finished``) as
    dicts, ``at`` in seconds since the activity started."""

    events: list[dict[str, Any]]


@functools.lru_cache(maxsize=64)
def _document(text: str) -> Workflow:
    return from_data(json.loads(text))


def document(data: dict[str, Any]) -> Workflow:
    """The ``Workflow`` of ``data``, decoded once per worker and document."""
    return _document(json.dumps(data, sort_keys=True))


@activity.defn(name=ACTIVITY)
async def run_attempt(req: AttemptInput) -> AttemptOutput:
    """Run one attempt; what it did."""
    workflow = document(req.document)
    step = workflow.step(req.step_id)
    run = Run(id=req.run_id, workflow=workflow, clock="real", payload=req.payload)
    events: list[dict[str, Any]] = []

    def emit(event: Event) -> None:
        run.apply(event)
        events.append(event.to_dict())

    clock = RealClock()
    info = activity.info()
    durable = None
    if info.workflow_id is not None:  # run by a workflow (not alone, as in a test)
        from .workflow import WomlWorkflow  # it runs this activity: imported when run

        workflow_handle = activity.client().get_workflow_handle(
            info.workflow_id, run_id=info.workflow_run_id)

        async def durable(event: Event) -> None:
            # spec §5.2 on Temporal: the workflow's history holds the call before the
            # request leaves, so a worker that dies mid-call leaves it `ambiguous`.
            await workflow_handle.signal(WomlWorkflow.call_started, event.to_dict())

    runner = AttemptRunner(run, clock, pool=default_pool(), config=req.config,
                           emit=emit, durable=durable)
    results = StepResults()
    for step_id, value in req.results.items():
        results.add(step_id, value)
    beats = asyncio.ensure_future(_heartbeat(events))
    try:
        await runner.run(step, req.number, results, StepCalls(reattach=dict(req.reattach)),
                         lambda: CANCELLED)
    finally:
        beats.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beats
        await runner.aclose()
    return AttemptOutput(events)


async def _heartbeat(events: list[dict[str, Any]]) -> None:
    """Tell the server this worker lives, with the attempt's events so far (spec §9: a
    dead worker's attempt is ``interrupted``; its calls in flight are ``ambiguous``).
    The SDK sends at most one heartbeat per throttle interval, the latest details."""
    while True:
        # The first after one interval: at once, it would carry nothing yet and cost
        # every attempt a round trip to the server (≈ 3.7 ms, bench/temporal.py).
        await asyncio.sleep(HEARTBEAT_EVERY_S)
        activity.heartbeat(list(events))
