"""The Temporal engine behind ``executor.Executor`` (spec §9).

``TemporalExecutor`` checks scripts as the local engine does; each run becomes one
workflow execution whose id is the WOML run id (so §3.5's keys are the local
engine's). The kernel follows it by querying the workflow's WOML events and emits
them to the run's sinks — the ``Run``, the journal and the live timeline see the same
events a local run gives them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from temporalio.converter import DataConverter

from ..clock import Clock
from ..engine.check import check_scripts
from ..engine.config import EngineConfig
from ..errors import WomlRunError
from ..events import Event, EventSink, event_from_dict
from ..model import Run, Workflow
from ..outcomes import StopReason
from ..runtime.pool import default_pool
from .document import to_data
from .options import TemporalOptions, connect, ui_url
from .workflow import RunInput, RunOutput, WomlWorkflow

#: How often a kernel asks the workflow for new events while it runs: every POLL_S
#: while events come, backing off to POLL_MAX_S while none do (each query costs the
#: worker ≈ 2 ms, bench/temporal.py).
POLL_S = 0.05
POLL_MAX_S = 0.25
#: Temporal refuses payloads over 2 MB (``limit.blobSize.error``).
MAX_INPUT_BYTES = 2 * 1024 * 1024 - 64 * 1024
#: History events a WOML attempt and its wait cost at most (scheduled, started,
#: completed, a workflow task of three, a timer of two), and the history's hard
#: limit (51,200 events) with room to spare.
EVENTS_PER_ATTEMPT = 10
MAX_HISTORY_EVENTS = 40_000
#: How long a cancelled run may take to record its stop.
STOP_WAIT_S = 30.0


def as_options(value: TemporalOptions | str | Mapping[str, Any] | None) -> TemporalOptions:
    """``temporal=``: options, ``"HOST:PORT"`` of a cluster, a mapping of the options'
    fields, or None (a local dev server)."""
    if value is None:
        return TemporalOptions()
    if isinstance(value, str):
        return TemporalOptions(target=value)
    if isinstance(value, TemporalOptions):
        return value
    if isinstance(value, Mapping):
        return TemporalOptions(**value)
    raise WomlRunError(
        f"temporal= takes TemporalOptions, 'HOST:PORT' or None, not {type(value).__name__}"
    )


class TemporalExecutor:
    """Runs WOML runs as Temporal workflow executions."""

    name = "temporal"

    def __init__(self, options: TemporalOptions | str | Mapping[str, Any] | None = None) -> None:
        self.options = as_options(options)

    async def check(self, workflow: Workflow) -> None:
        await check_scripts(workflow, default_pool())  # spec §2.3, as locally
        events = sum(s.policy.attempts for s in workflow.steps) * EVENTS_PER_ATTEMPT
        if events > MAX_HISTORY_EVENTS:
            raise WomlRunError(
                f"this document may need {events:,} Temporal history events, more than "
                f"the {MAX_HISTORY_EVENTS:,} one workflow execution can hold (Temporal's "
                "limit is 51,200); split it into several documents or run it with the "
                "local engine"
            )

    def execution(
        self, run: Run, clock: Clock, *, sinks: Iterable[EventSink], config: EngineConfig,
        resume: bool, retry_interrupted: bool,
    ) -> TemporalExecution:
        if config.secrets:
            raise WomlRunError(
                f"secrets are not sent to Temporal: a workflow's input is kept in its event "
                f"history, so the values of {', '.join(config.secrets.names)} would be stored "
                "there in plain text; run a workflow that uses secrets with engine='local'"
            )
        if clock.kind != "real":
            raise WomlRunError(
                "engine='temporal' runs on the real clock: Temporal's time skipping is not "
                "available on this server; use clock='real' with engine='temporal', or the "
                "simulated clock with the local engine"
            )
        return TemporalExecution(self.options, run, clock, sinks=sinks, config=config,
                                 resume=resume, retry_interrupted=retry_interrupted)


class TemporalExecution:
    """One WOML run as one workflow execution, followed from the kernel."""

    def __init__(
        self, options: TemporalOptions, run: Run, clock: Clock, *, sinks: Iterable[EventSink],
        config: EngineConfig, resume: bool, retry_interrupted: bool,
    ) -> None:
        self._options = options
        self._run = run
        self._clock = clock
        self._sinks = list(sinks)
        self._config = config
        self._resume = resume
        self._retry_interrupted = retry_interrupted
        self._stop_reason: StopReason | None = None

    @property
    def run(self) -> Run:
        return self._run

    def subscribe(self, sink: EventSink) -> None:
        self._sinks.append(sink)

    def now(self) -> float:
        return self._clock.now()

    def stop_reason(self, reason: StopReason) -> None:
        self._stop_reason = reason

    def emit(self, event: Event) -> None:
        self._run.apply(event)
        for sink in self._sinks:
            sink(event)

    def _input(self) -> RunInput:
        data = RunInput(
            document=to_data(self._run.workflow),
            payload=self._run.payload,
            # Never the secrets (refused above; an empty store is dropped too).
            config=dataclasses.replace(self._config, secrets=None),
            retry_interrupted=self._retry_interrupted,
            past=[e.to_dict() for e in self._run.events] if self._resume else [],
            clock_start=self._clock.now() if self._resume else 0.0,
        )
        # The size Temporal will see: the payload its default converter makes of it.
        size = len(DataConverter.default.payload_converter.to_payloads([data])[0].data)
        if size > MAX_INPUT_BYTES:
            raise WomlRunError(
                f"the run's document, payload and history are {size:,} bytes; Temporal "
                f"takes at most 2 MB per workflow input; make the payload smaller or run "
                "it with the local engine"
            )
        return data

    async def execute(self) -> Run:
        from temporalio.client import WorkflowQueryFailedError
        from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
        from temporalio.exceptions import WorkflowAlreadyStartedError
        from temporalio.service import RPCError

        from .worker import ensure_in_kernel_worker

        opts = self._options
        client = await connect(opts)
        if opts.target is None:
            await ensure_in_kernel_worker(client, opts)
        # A new run under an id Temporal already holds is refused, as the local engine
        # refuses an id its journal holds (spec §3.5, §5.2): running it again would
        # repeat its effects under the same idempotency keys. A resume is, by design, a
        # new execution of the same id that continues the journaled past (spec §5.3).
        reuse = WorkflowIDReusePolicy.ALLOW_DUPLICATE if self._resume \
            else WorkflowIDReusePolicy.REJECT_DUPLICATE
        try:
            handle = await client.start_workflow(
                WomlWorkflow.run, self._input(), id=self._run.id, task_queue=opts.task_queue,
                id_reuse_policy=reuse,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                static_summary=f"WOML {self._run.workflow.id} · "
                               f"{len(self._run.workflow.steps)} step(s)",
            )
        except WorkflowAlreadyStartedError:
            raise await self._refusal(client) from None
        web = ui_url(opts)
        if web is not None:  # spec §9: the timeline links to the run in Temporal's UI
            self._run.links["Temporal Web UI"] = (
                f"{web.rstrip('/')}/namespaces/{opts.namespace}/workflows/{self._run.id}")
        result: asyncio.Future[RunOutput] = asyncio.ensure_future(handle.result())
        seen = 0
        poll = POLL_S
        try:
            while not result.done():
                await asyncio.wait({result}, timeout=poll)
                if result.done():
                    break
                try:
                    new = await handle.query(WomlWorkflow.events, seen)
                except (RPCError, WorkflowQueryFailedError):
                    new = []  # not answerable before the first workflow task: ask again
                seen = self._emit_all(new, seen)
                poll = POLL_S if new else min(POLL_MAX_S, poll * 2)
            self._emit_all(result.result().events[seen:], seen)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await handle.signal(WomlWorkflow.stop, self._stop_reason or "cancelled")
                await handle.cancel()
            with contextlib.suppress(Exception):
                done = await asyncio.wait_for(asyncio.shield(result), STOP_WAIT_S)
                self._emit_all(done.events[seen:], seen)
            raise
        return self._run

    async def _refusal(self, client: Any) -> WomlRunError:
        """Why Temporal would not start the run: it is running, or it already ran."""
        from temporalio.client import WorkflowExecutionStatus
        from temporalio.service import RPCError

        run_id, ns = self._run.id, self._options.namespace
        show = f"`%woml show {run_id} --engine temporal` shows it"
        try:
            status = (await client.get_workflow_handle(run_id).describe()).status
        except RPCError:
            status = None
        if status is None or status == WorkflowExecutionStatus.RUNNING:
            return WomlRunError(
                f"run {run_id!r} is already running on Temporal (namespace {ns}); {show}")
        return WomlRunError(
            f"run {run_id!r} already ran on Temporal (namespace {ns}, "
            f"{status.name.lower().replace('_', ' ')}); a run id runs once, so its "
            f"idempotency keys are never reused by another run: pick another id, or "
            f"continue it with resume={run_id!r} from its journal; {show}"
        )

    def _emit_all(self, events: list[dict[str, Any]], seen: int) -> int:
        for data in events:
            self.emit(event_from_dict(data))
        return seen + len(events)
