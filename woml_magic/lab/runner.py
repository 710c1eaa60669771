"""The lab's real clients: N runs of one workflow on one simulated clock (spec §11).

Each client is a real run — its scripts in the QuickJS worker, the same ``Engine``
and ``AttemptRunner``, the same outcome rules (spec §3.2) — with its own ``Run`` (id
``lab-<seed>-<n>``, so its idempotency keys are §3.5's) and its own view of one
lab clock (``labclock.lab_clock``) that every client shares. A client's
``services.http.request`` is performed by the lab's one ``HttpService``
(``lab_http``): answered by the server model in-process (its transport,
``ModelTransport``: no socket), or, against the demo API, sent over HTTP to 127.0.0.1.

Deterministic from the seed. The lab moves in *settled steps*: whenever no script is
running and the event loop is idle (every client waits on a worker, the server or
the clock), the lab clock's ``on_idle`` does the first of

1. give free script workers to the clients waiting for one (``LabPool.settle``), in
   an order drawn from the seed (when no script can reach ``services``, a client
   takes a free place the moment it asks instead: such an attempt meets nothing
   another client changes, so the order changes nothing; ``LabPool``);
2. answer the requests the server model holds, in an order drawn from the seed
   (``ModelExchange.flush``; a real server sees simultaneous requests in no
   particular order);
3. jump the clock to the next timer.

Between two settled steps scripts run concurrently on the warm workers, but nothing
they do is decided until the next step, and every decision depends only on what the
clients did, never on which process answered first. The lab clock does not move while
real work happens: script execution costs no simulated time in a lab (unlike the
plain simulated clock, spec §5.1), so how fast this machine is changes nothing.

The model's answers reach the script at the instant of the request (the model's
``latency`` is the model path's, ``simulate``): a script waiting on simulated time
holds a real worker, and with every worker held the clients still waiting for one
would start late. Such late starts (scripts that ``services.sleep``) are counted
(``ClientsRun.late``). A script that keeps the clock still for ``STALL_S`` seconds of
real time (an endless loop, a request the demo API never answers) lets the lab move
on around it, so its step's timeout can end it; such a lab is no longer
deterministic, and says so (``SimulatedClock.stalls``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..clock import Clock
from ..engine import AttemptRunner, Engine, EngineConfig, check_scripts
from ..events import Event
from ..model import Run, Workflow
from ..runtime import ScriptWorker
from ..services import RunServices
from .labclock import CLIENT, DEFAULT_WORKERS, LabPool, lab_clock, pipeline_depth, stream
from .model_http import LabServer, ModelExchange, json_copy, lab_http


@dataclass
class ClientRun:
    """One lab client: its number, when it started on the lab's clock, and its ``Run``
    (``lab.ClientSummary`` reads it)."""

    client: int
    start: float
    run: Run


def client_payload(client: int, base_url: str) -> dict[str, Any]:
    """What ``context.payload`` holds for client ``client`` by default."""
    return {"client": client, "api": base_url}


@dataclass
class ClientsRun:
    """What ``run_clients`` gives back: every client in order, and how the lab went.

    ``late``: attempts that waited for a worker while the clock moved on (every worker
    was held by a script waiting on the clock); ``stalls``: times the clock moved on
    before the lab had settled (the clock's ``stalls``; then the lab is not
    deterministic); ``seconds``: the real time it took.
    """

    clients: list[ClientRun]
    workers: int
    late: int = 0
    stalls: int = 0
    seconds: float = 0.0

    @property
    def deterministic(self) -> bool:
        """Whether nothing but the seed decided the lab (no stall)."""
        return self.stalls == 0


class _SettledStep:
    """The lab clock's ``on_idle``: workers first, then the server, then the clock
    (module docstring)."""

    def __init__(self, pool: LabPool, exchange: ModelExchange | None) -> None:
        self._pool = pool
        self._exchange = exchange
        self.late: set[asyncio.Future[ScriptWorker]] = set()

    def __call__(self) -> bool:
        if self._pool.settle():
            return True
        if self._exchange is not None and self._exchange.flush():
            return True
        self.late.update(self._pool.waiting())
        return False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while the clients run, as ``timeit``
    pauses it, and turned back on after unless it was off before.

    Every attempt adds a few objects that live as long as the lab (its events, its
    ``Attempt``), so the collector's passes over them grew with the lab and took about a
    quarter of the kernel's CPU per attempt (bench/lab.py: 0.21-0.26 → 0.17 ms). Reference
    counting still frees everything that is not a cycle; the few cycles a lab leaves
    (a handful per client, not per attempt) wait for the next collection. Two labs at
    once on one loop leave it on once the first ends: only slower, never off for good.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


async def run_clients(
    workflow: Workflow,
    starts: Sequence[float],
    *,
    seed: int,
    server: LabServer | None,
    base_url: str,
    payload: Callable[[int], Any] | None = None,
    workers: int = DEFAULT_WORKERS,
    config: EngineConfig | None = None,
) -> ClientsRun:
    """Run one real client per entry of ``starts`` (its start time on the lab clock,
    seconds) to its end.

    ``server``: the model's state (answers in-process), or None for real HTTP (an
    API at ``base_url``, such as the demo API; ``config.http_allow`` should name it).
    ``payload(n)`` is client ``n``'s payload (default ``client_payload``). Cancelling
    the calling task cancels every client's run (their running attempts end
    ``cancelled``, spec §3.2).
    """
    began = time.perf_counter()
    config = config or EngineConfig()
    clock = lab_clock()
    pool = LabPool(workers, stream(seed, "workers"), pipeline_depth(workflow))
    pool.on_change = clock.kick
    exchange = (ModelExchange(server, clock, stream(seed, "server-order"))
                if server is not None else None)
    step = _SettledStep(pool, exchange)
    clock.set_on_idle(step)
    make_payload = payload or (lambda n: client_payload(n, base_url))
    clients = [ClientRun(n, start, Run(id=f"lab-{seed}-{n}", workflow=workflow,
                                       clock="simulated", payload=json_copy(make_payload(n))))
               for n, start in enumerate(starts)]
    http = lab_http(config, exchange, {c.run.id: c.client for c in clients})
    try:
        await pool.warm()  # every worker starts at once
        await check_scripts(workflow, pool)  # spec §2.3: nothing runs if one fails

        async def one(client: ClientRun) -> None:
            CLIENT.set(client.client)
            await clock.sleep(client.start)
            view = clock.view(client.start)
            services = RunServices(view, config, http=http)

            def attempts(r: Run, c: Clock, emit: Callable[[Event], None]) -> AttemptRunner:
                return AttemptRunner(r, c, pool=pool, config=config, emit=emit,
                                     services=services)

            await Engine(client.run, view, attempts=attempts).execute()

        tasks = [asyncio.ensure_future(one(client)) for client in clients]
        try:
            with collector_paused():
                await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    finally:
        await pool.aclose()
        await http.aclose()
    return ClientsRun(clients, workers, late=len(step.late), stalls=clock.stalls,
                      seconds=time.perf_counter() - began)
