"""The warm script workers of a process (spec §4.5).

"A warm worker process (started on first use, reused across attempts and runs)": the
pool lends one worker per attempt and keeps up to ``keep`` idle ones. Concurrent runs
borrow different workers.
"""

from __future__ import annotations

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

    def __init__(self, keep: int = 2) -> None:
        self._keep = keep
        self._idle: list[ScriptWorker] = []
        # Scripts that compiled: compiling is deterministic in the text, so a cell run
        # again (or checked by the magic, then by the run) is not compiled twice.
        self._compiled: dict[str, None] = {}

    def compiled(self, script: str) -> bool:
        """Whether ``script`` already compiled in this process."""
        return script in self._compiled

    def remember_compiled(self, script: str) -> None:
        self._compiled[script] = None
        if len(self._compiled) > self.COMPILED_CACHE:
            del self._compiled[next(iter(self._compiled))]  # the oldest

    @contextlib.asynccontextmanager
    async def worker(self) -> AsyncIterator[ScriptWorker]:
        worker = self.borrow()
        try:
            yield worker
        finally:
            await self.give_back(worker)

    def borrow(self) -> ScriptWorker:
        """An idle worker, or a new one (started by its first attempt); ``give_back`` it.
        (``worker()`` is the context manager; a subclass that wraps it calls these, one
        asynchronous context manager fewer per attempt.)"""
        return self._idle.pop() if self._idle else ScriptWorker()

    async def give_back(self, worker: ScriptWorker) -> None:
        """Keep ``worker`` warm for the next attempt, or stop it when ``keep`` are idle."""
        if len(self._idle) < self._keep:
            self._idle.append(worker)
        else:
            await worker.aclose()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for worker in idle:
            await worker.aclose()

    def kill_all(self) -> None:
        """Synchronous teardown for interpreter exit."""
        idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()


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
