"""The lab's one clock and its workers (spec §11): simulated time that moves only when
every client is waiting, each client's own view of it, and the warm script workers
handed out in an order drawn from the seed — what makes a lab deterministic."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import heapq
import itertools
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator

from ..clock import Clock, ClockKind
from ..runtime import ScriptWorker
from ..runtime.pool import WorkerPool

#: Scripts' ``Date.now()`` in a lab at simulated time 0: 2025-01-01T00:00:00Z, the same
#: in every lab, so a script that reads the date is as deterministic as the rest.
LAB_EPOCH_S = 1_735_689_600.0

#: Real seconds the clock may stand still without any progress before it moves on
#: around whatever holds it (module docstring).
STALL_S = 1.0

#: Warm script workers for a lab (measured on 2 cores: bench/lab.py; 3 was fastest).
DEFAULT_WORKERS = 3

#: Consecutive loop iterations the clock waits for ready callbacks before jumping
#: anyway (another simulated clock on the same loop defers too; see clock.py).
_MAX_DEFERRALS = 10_000

#: The base URL a client's payload names for a model server: any URL reaches the
#: model (only the path and method are read), this one says so.
MODEL_URL = "http://model.lab"


def stream(seed: int, name: str) -> random.Random:
    """The seed's random stream ``name``: each kind of draw has its own, so adding one
    draw never shifts another (``simulate`` names its streams the same way)."""
    return random.Random(f"woml-lab:{seed}:{name}")  # noqa: S311 - a simulation, not a secret


class LabClock(Clock):
    """One simulated clock for every client of a lab (module docstring).

    Time stands still while anything holds ``busy()``; when nothing does and the loop
    is idle, ``on_idle`` may give the clients work at this instant (a settled step),
    and otherwise time jumps to the earliest timer.
    """

    kind: ClockKind = "simulated"

    def __init__(self, on_idle: Callable[[], bool] | None = None) -> None:
        """``on_idle``: called when nothing real is happening; True if it gave the
        clients something to do at this instant (then time stays)."""
        super().__init__()
        self._wall0 = LAB_EPOCH_S
        self._now = 0.0
        self._on_idle = on_idle
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._holds = 0
        self._progress = time.monotonic()
        self._handle: asyncio.Handle | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._deferrals = 0
        #: How many times the clock moved on without the lab being settled: around work
        #: that held it ``STALL_S`` real seconds, or a loop that never went idle.
        self.stalls = 0

    def now(self) -> float:
        return self._now

    def set_on_idle(self, on_idle: Callable[[], bool]) -> None:
        """Who delivers work when every client waits (the server's exchange)."""
        self._on_idle = on_idle

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self._now + seconds, next(self._seq), fut))
        self.kick()
        try:
            await fut
        finally:
            if not fut.done():
                fut.cancel()
            self.kick()

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        self._holds += 1
        self._progress = time.monotonic()
        try:
            yield
        finally:
            self._holds -= 1
            self._progress = time.monotonic()
            self.kick()

    def kick(self) -> None:
        """Look at the timers again on the next loop iteration."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # outside a loop nothing can be waiting
            return
        if self._handle is None:  # else a look is already due, and sees this change too
            self._handle = loop.call_soon(self._advance)

    def _advance(self) -> None:
        self._handle = None
        loop = asyncio.get_running_loop()
        if self._holds and not self._stalled():
            # Real work under way: time waits for it (a watchdog looks again later).
            if self._watchdog is None:
                self._watchdog = loop.call_later(STALL_S, self._watch)
            return
        # Tasks woken by the last timer or answer must make their move first.
        if getattr(loop, "_ready", None):
            if self._deferrals < _MAX_DEFERRALS:
                self._deferrals += 1
                self._handle = loop.call_soon(self._advance)
                return
            self.stalls += 1  # the loop never settled (another clock deferring too?)
        self._deferrals = 0
        if self._on_idle is not None and self._on_idle():
            return  # answers delivered at this instant; their clients move next
        while self._timers and self._timers[0][2].done():
            heapq.heappop(self._timers)
        if not self._timers:
            return
        self._now = max(self._now, self._timers[0][0])
        while self._timers and self._timers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._timers)
            if not fut.done():
                fut.set_result(None)
        if self._timers:
            self.kick()

    def _stalled(self) -> bool:
        """Whether work has held the clock ``STALL_S`` real seconds with no progress
        (then the clock moves on around it, and counts it)."""
        if time.monotonic() - self._progress < STALL_S:
            return False
        self.stalls += 1
        self._progress = time.monotonic()
        return True

    def _watch(self) -> None:
        self._watchdog = None
        if self._holds:
            self.kick()


class ClientClock(Clock):
    """One client's view of the lab's clock: seconds since that client started (every
    time its ``Run`` shows is on it, spec §5.1); waits and work are the lab clock's."""

    kind: ClockKind = "simulated"

    def __init__(self, lab: LabClock, start: float) -> None:
        super().__init__()
        self._lab = lab
        self.start = start

    def now(self) -> float:
        return self._lab.now() - self.start

    def epoch_ms(self) -> float:
        return self._lab.epoch_ms()

    async def sleep(self, seconds: float) -> None:
        await self._lab.sleep(seconds)

    def busy(self) -> contextlib.AbstractContextManager[None]:
        return self._lab.busy()


#: The lab client the current task works for (each client's task sets it; the
#: engine's tasks inherit it): the pool gives workers in an order of clients.
CLIENT: contextvars.ContextVar[int] = contextvars.ContextVar("woml_lab_client", default=-1)


class LabPool(WorkerPool):
    """A fixed number of warm script workers shared by every client (spec §4.5).

    Clients that ask for a worker wait until the next settled step (module
    docstring); ``settle`` then queues them in an order drawn from the seed and gives
    out the free workers. A worker given back goes to the next client of that queue
    at once: who gets it does not depend on which attempt ended first.
    """

    def __init__(self, workers: int, order: random.Random) -> None:
        super().__init__(keep=workers)
        self._workers = workers
        self._free = workers
        self._order = order
        self._asking: list[tuple[int, asyncio.Future[None]]] = []
        self._queue: collections.deque[asyncio.Future[None]] = collections.deque()
        self.on_change: Callable[[], None] = lambda: None

    def waiting(self) -> list[asyncio.Future[None]]:
        """The requests for a worker not given yet (to count late starts)."""
        return [f for _, f in self._asking] + [f for f in self._queue if not f.done()]

    async def warm(self) -> None:
        """Start every worker at once, before the clients need them."""
        started = [ScriptWorker() for _ in range(self._workers - len(self._idle))]
        await asyncio.gather(*(worker.start() for worker in started))
        self._idle.extend(started)

    def settle(self) -> bool:
        """Queue the clients that asked since the last step, in the seed's order, and
        give out free workers; whether any was given."""
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
                fut.set_result(None)
                self._free -= 1
                given += 1
        return given

    def _release(self) -> None:
        self._free += 1
        self._give()
        self.on_change()

    @contextlib.asynccontextmanager
    async def worker(self) -> AsyncIterator[ScriptWorker]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._asking.append((CLIENT.get(), fut))
        self.on_change()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release()  # given, but the attempt was cancelled before using it
            raise
        try:
            async with super().worker() as worker:
                yield worker
        finally:
            self._release()
