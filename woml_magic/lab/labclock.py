"""The lab's one clock and its workers (spec §11): simulated time that moves only when
every client is waiting, each client's own view of it, and the warm script workers
handed out in an order drawn from the seed — what makes a lab deterministic."""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import contextvars
import random
from collections.abc import Callable

from ..clock import SimulatedClock
from ..model import Workflow
from ..runtime import ScriptWorker
from ..runtime.pool import WorkerPool
from ..runtime.transport import ChildProcess
from ..runtime.wrapper import reach_of

#: Scripts' ``Date.now()`` in a lab at simulated time 0: 2025-01-01T00:00:00Z, the same
#: in every lab, so a script that reads the date is as deterministic as the rest.
LAB_EPOCH_S = 1_735_689_600.0

#: Real seconds the clock may stand still without any progress before it moves on
#: around whatever holds it (module docstring).
STALL_S = 1.0

#: Warm script workers for a lab (measured on 2 cores: bench/lab.py; 3 was fastest).
DEFAULT_WORKERS = 3

#: Real seconds a lab's warm workers wait for the next lab on the same loop before they
#: stop (``KeptWorkers``).
KEEP_S = 30.0

#: Attempts a lab sends ahead to each worker when no script can reach ``services``
#: (``pipeline_depth``): enough to keep the workers busy while the kernel wakes a retry
#: wave's clients (measured on 2 cores: 3 → 2.3 s, 16 → 2.05 s, 64 or more → 1.95 s;
#: bench/lab.py, docs/performance.md).
PIPELINE_DEPTH = 64

#: The base URL a client's payload names for a model server: any URL reaches the
#: model (only the path and method are read), this one says so.
MODEL_URL = "http://model.lab"


def stream(seed: int, name: str) -> random.Random:
    """The seed's random stream ``name``: each kind of draw has its own, so adding one
    draw never shifts another (``simulate`` names its streams the same way)."""
    return random.Random(f"woml-lab:{seed}:{name}")  # noqa: S311 - a simulation, not a secret


def lab_clock() -> SimulatedClock:
    """One simulated clock for every client of a lab (module docstring): time stands
    still while anything holds ``busy()`` (``rate=0``) unless it holds it ``STALL_S``
    real seconds without progress; when nothing does and the loop is idle, its
    ``on_idle`` may give the clients work at this instant (a settled step), and
    otherwise time jumps to the earliest timer. Scripts' dates start at ``LAB_EPOCH_S``.
    """
    return SimulatedClock(rate=0.0, epoch_s=LAB_EPOCH_S, stall_s=STALL_S)


def can_call_services(workflow: Workflow) -> bool:
    """Whether any step's script can reach ``services`` (``wrapper.reach_of``, the
    worker's own test of what a script can name): only such a lab calls the server."""
    return any(reach_of(step.script).services for step in workflow.steps)


def pipeline_depth(workflow: Workflow) -> int:
    """How many attempts a lab sends ahead to each worker (``runtime/pipeline.py``):
    ``PIPELINE_DEPTH`` when no step's script can reach ``services`` (such an attempt
    never waits on the kernel, so none waits behind one that waits on the clock: which
    process runs an attempt changes nothing), else 1 — a script waiting for a call or
    a sleep holds its worker alone."""
    return 1 if can_call_services(workflow) else PIPELINE_DEPTH


#: The lab client the current task works for (each client's task sets it; the
#: engine's tasks inherit it): the pool gives workers in an order of clients.
CLIENT: contextvars.ContextVar[int] = contextvars.ContextVar("woml_lab_client", default=-1)


class KeptWorkers:
    """The last lab's warm workers, kept ``KEEP_S`` real seconds for the next lab on the
    same loop (spec §4.5: warm workers are reused across runs), then stopped.

    A lab's workers take ≈ 0.1 s to start, the time of 400 of its attempts; a notebook
    runs one lab after another (the retry-lab notebook, a lab cell run again), and
    each then starts none. Only healthy, idle workers are kept, of one lab at a time;
    they are stopped when their time is up, when a lab on another loop asks, and at
    interpreter exit. A worker whose process ended meanwhile is started again by its
    next attempt, as any worker is.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: list[ScriptWorker] = []
        self._timer: asyncio.TimerHandle | None = None
        atexit.register(self.stop)

    @property
    def pids(self) -> tuple[int | None, ...]:
        """The kept workers' process ids (for tests)."""
        return tuple(worker.pid for worker in self._workers)

    def take(self, loop: asyncio.AbstractEventLoop, most: int) -> list[ScriptWorker]:
        """Up to ``most`` kept workers for a lab on ``loop``; the others are stopped."""
        if loop is not self._loop:
            self.stop()
            return []
        taken, self._workers = self._workers[:most], self._workers[most:]
        self.stop()
        return taken

    def keep(self, loop: asyncio.AbstractEventLoop, workers: list[ScriptWorker]) -> None:
        """Keep ``workers`` (those of a lab that has ended on ``loop``) for ``KEEP_S``."""
        self.stop()
        self._loop = loop
        self._workers = workers
        self._timer = loop.call_later(KEEP_S, self.stop)

    def stop(self) -> None:
        """Stop every kept worker now."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        workers, self._workers = self._workers, []
        self._loop = None
        for worker in workers:
            worker.kill()


#: The one set of kept workers of this process.
KEPT = KeptWorkers()


class LabPool(WorkerPool):
    """A fixed number of warm script workers shared by every client (spec §4.5), each
    taking up to ``depth`` attempts at once (``pipeline_depth``).

    Clients that ask for a worker wait until the next settled step (module
    docstring); ``settle`` then queues them in an order drawn from the seed and gives
    out the free places. A place given back goes to the next client of that queue at
    once: who gets it does not depend on which attempt ended first (which worker does
    may, and changes nothing a client sees).

    When attempts are sent ahead (``depth`` > 1), no script can reach ``services``: an
    attempt then meets nothing another client changes (no server, no clock moving
    while it runs), so which client runs first changes nothing either, and a client
    takes a free place the moment it asks, or queues for one in the order it asked.
    The workers then start on a retry wave's first attempts while the kernel is still
    waking the rest of its clients, instead of after it has woken them all.
    """

    def __init__(self, workers: int, order: random.Random, depth: int = 1) -> None:
        super().__init__(keep=workers)
        self._workers = workers
        self._depth = depth
        self._free = workers * depth
        self._order = order
        # Attempts given to each warm worker and not given back (``warm`` fills it).
        self._load: dict[ScriptWorker, int] = {}
        self._asking: list[tuple[int, asyncio.Future[ScriptWorker]]] = []
        self._queue: collections.deque[asyncio.Future[ScriptWorker]] = collections.deque()
        self.on_change: Callable[[], None] = lambda: None

    def waiting(self) -> list[asyncio.Future[ScriptWorker]]:
        """The requests for a worker not given yet (to count late starts)."""
        return [f for _, f in self._asking] + [f for f in self._queue if not f.done()]

    async def warm(self) -> None:
        """Start every worker at once, before the clients need them (the scripts'
        syntax check, ``check_scripts``, runs on one of them): those the last lab on
        this loop left warm (``KEPT``) first."""
        kept = KEPT.take(asyncio.get_running_loop(), self._workers)
        for worker in kept:
            worker.set_depth(self._depth)
        started = kept + [self.new_worker() for _ in range(self._workers - len(kept))]
        self._idle.extend(started)  # ``aclose`` stops them, started or not
        await asyncio.gather(*(worker.start() for worker in started))
        self._load = dict.fromkeys(started, 0)

    async def aclose(self) -> None:
        """Keep the healthy, idle workers warm for the next lab (``KEPT``); stop the
        others."""
        workers = self._take_idle()
        healthy = [worker for worker in workers if worker.idle]
        for worker in workers:
            if worker not in healthy:
                await worker.aclose()
        if healthy:
            KEPT.keep(asyncio.get_running_loop(), healthy)

    def new_worker(self) -> ScriptWorker:
        """A worker the lab's loop keeps listening to between attempts: only this loop
        drives the lab's workers, and ``aclose`` stops them on it (``ScriptWorker``).
        Its process is batch work (``transport.as_batch_work``): it never takes the
        core of the kernel that feeds it."""
        return ScriptWorker(start_process=_batch_process, keep_listening=True,
                            depth=self._depth)

    def settle(self) -> bool:
        """Queue the clients that asked since the last step, in the seed's order, and
        give out free places; whether any was given."""
        if self._asking:
            asking = sorted(self._asking, key=lambda a: a[0])
            self._asking = []
            self._order.shuffle(asking)
            self._queue.extend(f for _, f in asking)
        return self._give() > 0

    def _give(self) -> int:
        given = 0
        while self._free and self._queue:
            fut = self._queue.popleft()
            if not fut.done():
                fut.set_result(self._place())
                given += 1
        return given

    def _take(self) -> ScriptWorker | None:
        """A place now, for a client of a pool that sends attempts ahead (class
        docstring), if one is free and nobody queues for it; else None."""
        if self._depth == 1 or not self._free or self._queue:
            return None
        return self._place()

    def _place(self) -> ScriptWorker:
        """One free place, on the least busy worker (the first of equals)."""
        load = self._load
        worker = min(load, key=load.__getitem__)
        load[worker] += 1
        self._free -= 1
        return worker

    def _ask(self) -> asyncio.Future[ScriptWorker]:
        """Ask for a worker for the current client: given at the next settled step, or,
        when attempts are sent ahead, when a place is given back (class docstring)."""
        fut: asyncio.Future[ScriptWorker] = asyncio.get_running_loop().create_future()
        if self._depth == 1:
            self._asking.append((CLIENT.get(), fut))
            self.on_change()
        else:
            self._queue.append(fut)
            self._give()  # free places behind cancelled requests only
        return fut

    def _release(self, worker: ScriptWorker) -> None:
        self._load[worker] -= 1
        self._free += 1
        self._give()
        self.on_change()

    def worker(self) -> contextlib.AbstractAsyncContextManager[ScriptWorker]:
        return _Lease(self)


def _batch_process() -> ChildProcess:
    return ChildProcess(batch=True)


class _Lease:
    """One attempt's place on a lab worker (``LabPool.worker``): asked for at the next
    settled step, then held until the attempt ends. A class rather than a generator
    context manager: one fewer generator and its bookkeeping per lab attempt."""

    def __init__(self, pool: LabPool) -> None:
        self._pool = pool
        self._worker: ScriptWorker | None = None

    async def __aenter__(self) -> ScriptWorker:
        self._worker = self._pool._take()
        if self._worker is not None:
            return self._worker
        fut = self._pool._ask()
        try:
            self._worker = await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._pool._release(fut.result())  # given, but cancelled before its use
            raise
        return self._worker

    async def __aexit__(self, *_: object) -> None:
        worker, self._worker = self._worker, None
        assert worker is not None
        self._pool._release(worker)
