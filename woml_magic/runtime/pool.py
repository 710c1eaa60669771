"""The warm script workers of a process (spec §4.5).

"A warm worker process (started on first use, reused across attempts and runs)": the
pool lends one worker per attempt and keeps up to ``keep`` idle ones. Concurrent runs
borrow different workers.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import AsyncIterator

from .worker import ScriptWorker


class WorkerPool:
    """Warm script workers, started on first use and reused across attempts and runs (§4.5).

    A run borrows one worker per attempt; concurrent runs borrow different workers.
    """

    #: How many scripts known to compile the pool remembers.
    COMPILED_CACHE = 1024
    #: The longest an attempt waits for a warm-up already starting a worker before it
    #: starts its own (a start takes ~0.1 s here; a stuck one must not hold a cell up).
    WARM_UP_WAIT_S = 2.0

    def __init__(self, keep: int = 2) -> None:
        self._keep = keep
        self._idle: list[ScriptWorker] = []
        # Scripts that compiled: compiling is deterministic in the text, so a cell run
        # again (or checked by the magic, then by the run) is not compiled twice.
        self._compiled: dict[str, None] = {}
        # The idle list is shared with ``warm_up``'s thread.
        self._lock = threading.Lock()
        self._closed = False
        self._warming = False
        # Set when the warm-up under way has ended, well or not.
        self._warmed = threading.Event()

    def compiled(self, script: str) -> bool:
        """Whether ``script`` already compiled in this process."""
        return script in self._compiled

    def remember_compiled(self, script: str) -> None:
        self._compiled[script] = None
        if len(self._compiled) > self.COMPILED_CACHE:
            del self._compiled[next(iter(self._compiled))]  # the oldest

    def warm_up(self) -> threading.Thread | None:
        """Start one worker in a background thread and keep it idle for the next
        attempt, unless one is idle or starting already (spec §4.5; the magic calls this
        at ``%load_ext``, the user's first use of woml, so the first cell finds a warm
        worker). A worker that fails to start is dropped without a word: the first
        attempt starts its own and reports why. Returns the (daemon) thread, for tests
        to join, or None."""
        with self._lock:
            if self._idle or self._warming or self._closed:
                return None
            self._warming = True
            self._warmed.clear()

        def start() -> None:
            started = ScriptWorker()
            worker: ScriptWorker | None = started
            try:
                asyncio.run(started.start())
            except Exception:  # reported by the first attempt's own start
                worker = None
            with self._lock:
                self._warming = False
                kept = not self._closed and len(self._idle) < self._keep
                if worker is not None and kept:
                    self._idle.append(worker)
            self._warmed.set()
            if worker is not None and not kept:
                worker.kill()

        thread = threading.Thread(target=start, name="woml-worker-warm-up", daemon=True)
        thread.start()
        return thread

    def worker(self) -> contextlib.AbstractAsyncContextManager[ScriptWorker]:
        """A worker lent for one attempt: ``async with pool.worker() as worker``."""
        return self._lend()

    @contextlib.asynccontextmanager
    async def _lend(self) -> AsyncIterator[ScriptWorker]:
        await self._join_warm_up()
        worker = self.borrow()
        try:
            yield worker
        finally:
            await self.give_back(worker)

    async def _join_warm_up(self) -> None:
        """When no worker is idle but a warm-up is starting one (the first cell right
        after ``%load_ext``), wait for it, up to ``WARM_UP_WAIT_S``, instead of starting a
        second worker beside it: the first cell then pays only what is left of one start
        (issue 21 item 6), and two starts do not share the cores."""
        with self._lock:
            waiting = self._warming and not self._idle
        if waiting:
            await asyncio.to_thread(self._warmed.wait, self.WARM_UP_WAIT_S)

    def borrow(self) -> ScriptWorker:
        """An idle worker, or a new one (started by its first attempt); ``give_back`` it.
        (``worker()`` is the context manager; a subclass that wraps it calls these, one
        asynchronous context manager fewer per attempt.)"""
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        return worker or self.new_worker()

    def new_worker(self) -> ScriptWorker:
        """A worker for this pool, not started yet (its first use starts it)."""
        return ScriptWorker()

    async def give_back(self, worker: ScriptWorker) -> None:
        """Keep ``worker`` warm for the next attempt, or stop it when ``keep`` are idle."""
        with self._lock:
            kept = len(self._idle) < self._keep
            if kept:
                self._idle.append(worker)
        if not kept:
            await worker.aclose()

    @property
    def idle(self) -> tuple[ScriptWorker, ...]:
        """The warm workers waiting for an attempt."""
        with self._lock:
            return tuple(self._idle)

    async def aclose(self) -> None:
        for worker in self._take_idle():
            await worker.aclose()

    def kill_all(self) -> None:
        """Synchronous teardown for interpreter exit (a warm-up still starting kills its
        worker when it ends)."""
        with self._lock:
            self._closed = True
        for worker in self._take_idle():
            worker.kill()

    def _take_idle(self) -> list[ScriptWorker]:
        with self._lock:
            idle, self._idle = self._idle, []
        return idle


_default: WorkerPool | None = None
_default_lock = threading.Lock()


def default_pool() -> WorkerPool:
    """The process's warm script workers (spec §4.5: reused across attempts and runs),
    made on first use and killed at interpreter exit."""
    global _default  # noqa: PLW0603 - one warm pool per process is the spec's design (§4.5)
    with _default_lock:
        if _default is None:
            _default = WorkerPool()
            atexit.register(_default.kill_all)
        return _default
