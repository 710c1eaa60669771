"""Temporal workers for WOML runs (spec §9): one per ``woml worker`` process, and one
inside the kernel when it uses its own local dev server.

A worker polls one task queue for the generic ``woml`` workflow and its
``woml-attempt`` activities; any worker runs any document. Workflow code runs
unsandboxed: it is the package's own deterministic schedule (``engine.schedule``),
whose only sources of time and randomness are Temporal's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from .activity import HEARTBEAT_EVERY_S, run_attempt
from .options import TemporalOptions, connect
from .workflow import WomlWorkflow

#: After this long without its worker, a workflow task moves off a dead worker's
#: sticky queue to the shared one (Temporal's default, 10 s, delays takeover).
STICKY_TIMEOUT = timedelta(seconds=2)

_in_kernel: dict[tuple[Any, ...], asyncio.Task[None]] = {}


def make_worker(
    client: Client, task_queue: str, *, max_concurrent_activities: int | None = None
) -> Worker:
    """A worker for WOML runs on ``task_queue``."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[WomlWorkflow],
        activities=[run_attempt],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_concurrent_activities=max_concurrent_activities,
        sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
        # An attempt's heartbeat carries its calls: send it as often as it is given
        # (the default throttle, 0.8 × the heartbeat timeout, lost calls made in the
        # last 2.4 s before a worker died).
        max_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT_EVERY_S),
        default_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT_EVERY_S),
        graceful_shutdown_timeout=timedelta(seconds=1),
    )


async def serve(
    options: TemporalOptions,
    *,
    max_concurrent_activities: int | None = None,
    ready: Callable[[], None] | None = None,
) -> None:
    """Run a worker until cancelled (``woml worker``)."""
    client = await connect(options)
    worker = make_worker(client, options.task_queue,
                         max_concurrent_activities=max_concurrent_activities)
    async with worker:
        if ready is not None:
            ready()
        await asyncio.Event().wait()


async def ensure_in_kernel_worker(client: Client, options: TemporalOptions) -> None:
    """Start, once per task queue and loop, a worker inside this process (the local dev
    server has no other workers); it runs for the life of the process."""
    # Keyed by the server really connected to: a local dev server started again (after
    # a stop) gets a worker of its own.
    key = (id(asyncio.get_running_loop()), client.service_client.config.target_host,
           options.namespace, options.task_queue)
    task = _in_kernel.get(key)
    if task is not None and not task.done():
        return
    worker = make_worker(client, options.task_queue)
    _in_kernel[key] = asyncio.ensure_future(worker.run())


async def stop_in_kernel_workers() -> None:
    """Stop the workers ``ensure_in_kernel_worker`` started (before their server stops,
    so none keeps polling a server that is gone)."""
    tasks = list(_in_kernel.values())
    _in_kernel.clear()
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(BaseException):
            await task
