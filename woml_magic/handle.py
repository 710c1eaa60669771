"""``RunHandle``: a run going on in the background on the run loop (spec §7 ``wm.start``).

The handle is how anything above the API follows a run without knowing what executes
it: ``run`` is the live ``Run``, ``subscribe`` adds an event sink, ``now`` reads the
run's clock, ``cancel`` stops it, ``wait``/``result``/``await`` wait for its end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from .errors import WomlError
from .events import EventSink
from .executor import Execution
from .model import Run
from .outcomes import StopReason
from .runloop import RunTask, run_loop

S = TypeVar("S", bound=EventSink)


class RunHandle:
    """A run going on in the background on the run loop (spec §7: ``wm.start``)."""

    def __init__(self) -> None:
        self._execution: Execution | None = None
        self._started = threading.Event()  # it has an execution, or already ended
        self._task: RunTask[Run] | None = None

    # -- made by api.start ------------------------------------------------------------
    def _attach(self, task: RunTask[Run]) -> None:
        self._task = task
        task.future.add_done_callback(lambda _f: self._started.set())

    def _begin(self, execution: Execution) -> None:
        self._execution = execution
        self._started.set()

    # -- following the run ------------------------------------------------------------
    def wait_started(self, timeout: float | None = None) -> bool:
        """Block until the run has started executing or has already ended."""
        return self._started.wait(timeout)

    @property
    def started(self) -> bool:
        """Whether the run started executing (False while checking, or if it never did)."""
        return self._execution is not None

    @property
    def run(self) -> Run:
        """The live ``Run``, updated as events arrive."""
        self.wait_started(timeout=30)
        if self._execution is not None:
            return self._execution.run
        if self._task is not None and self._task.done():
            return self._task.result()  # ended before executing: raises its error, or a
            #                             finished run resumed (nothing to re-execute)
        raise WomlError("the run has not started yet")

    @property
    def id(self) -> str:
        return self.run.id

    def now(self) -> float:
        """Seconds since the run started, on the run's clock (spec §5.1)."""
        if self._execution is None:
            raise WomlError("the run has not started yet")
        return self._execution.now()

    def subscribe(self, sink: EventSink) -> None:
        """Send ``sink`` every event from now on, in order, on the run loop's thread;
        returns once it is subscribed."""
        self.watch(lambda _run: sink)

    def watch(self, make: Callable[[Run], S]) -> S:
        """Call ``make(run)`` with the live ``Run`` and subscribe the sink it returns,
        both on the run loop, where the run changes: no event can come between what
        ``make`` read of the run and the first event the sink sees. Returns the sink
        (a live view builds itself from the run this way, spec §6.3).
        """
        if self._execution is None:
            raise WomlError("the run has not started yet; wait_started() first")
        execution = self._execution
        made: list[S] = []

        def add() -> None:
            sink = make(execution.run)
            execution.subscribe(sink)
            made.append(sink)

        loop = run_loop()
        if loop.is_current():
            add()
            return made[0]
        finished = threading.Event()
        failed: list[BaseException] = []

        def add_there() -> None:
            try:
                add()
            except BaseException as exc:
                failed.append(exc)
            finally:
                finished.set()

        loop.call(add_there)
        finished.wait()
        if failed:
            raise failed[0]
        return made[0]

    def cancel(self, reason: StopReason = "cancelled") -> None:
        """Cancel the run: the running attempt ends ``cancelled`` (spec §3.2).

        Does nothing once the run has ended. ``reason="interrupted"`` is what a kernel
        interrupt records instead (spec §6.1).
        """
        if self._task is None:
            return

        def say_why() -> None:
            if self._execution is not None:
                self._execution.stop_reason(reason)

        self._task.cancel(before=say_why)

    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def add_done_callback(self, fn: Callable[[RunHandle], object]) -> None:
        """Call ``fn(handle)`` when the run ends (on the run loop's thread)."""
        if self._task is not None:
            self._task.future.add_done_callback(lambda _f: fn(self))

    # -- waiting ------------------------------------------------------------------------
    def result(self, timeout: float | None = None) -> Run:
        """Block until the run ends (for plain scripts; in a notebook ``await handle``)."""
        task = self._need_task()
        try:
            return task.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the run did not finish within {timeout}s") from None
        except asyncio.CancelledError:
            return self._cancelled_run()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ends, at most ``timeout`` seconds; whether it ended.

        On ``KeyboardInterrupt`` (a kernel interrupt) the running attempt ends
        ``interrupted``; this waits until that is recorded, then re-raises (spec §6.1).
        """
        return self._need_task().wait_interruptibly(lambda: self.cancel("interrupted"),
                                                    timeout)

    def wait_interruptibly(self) -> Run:
        """Block until the run ends and return it; a kernel interrupt ends the running
        attempt ``interrupted`` and re-raises (see ``wait``)."""
        self.wait()
        return self.result()

    def _need_task(self) -> RunTask[Run]:
        if self._task is None:
            raise WomlError("the run was never started")
        return self._task

    def _cancelled_run(self) -> Run:
        if self._execution is None:
            raise WomlError("the run was cancelled before it started") from None
        return self._execution.run

    def __await__(self) -> Generator[Any, None, Run]:
        return self._wait_async().__await__()

    async def _wait_async(self) -> Run:
        """``await handle``: the run's end, awaited with the one awaiting wait of the run
        loop (``RunTask.wait_cancellably``, as ``run_async`` awaits), so a cancel of the
        awaiting task that does not wake its loop (ipykernel's Ctrl-C in an ``await``
        cell) lands: the running attempt ends ``cancelled`` and the cancel re-raises. A
        run cancelled otherwise (``handle.cancel()``) gives its ``Run`` (spec §7)."""
        task = self._need_task()
        stopped: list[bool] = []

        def stop() -> None:
            stopped.append(True)
            self.cancel()

        try:
            return await task.wait_cancellably(stop)
        except asyncio.CancelledError:
            if task.done() and not stopped:
                return self._cancelled_run()
            raise

    def __repr__(self) -> str:
        state = "done" if self.done() else "running"
        rid = self._execution.run.id if self._execution is not None else "?"
        return f"<RunHandle {rid} {state}>"
