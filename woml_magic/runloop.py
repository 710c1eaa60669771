"""The run loop: one asyncio event loop, in a thread the package owns, where every run
executes (spec §6.3: running a cell never re-enters the kernel's own event loop).

Why a thread of our own (docs/magic.md, "How a cell runs"): a notebook cell is called
from inside the kernel's running loop. Re-entering that loop (``nest_asyncio`` and
``run_until_complete``) runs ipykernel 7's own ``shell_main`` task inside the cell; as
soon as a front end has queued more cells (Run All), the kernel stops answering. Here
the cell's thread only *waits* for a run that executes on this loop:

- a blocking wait on a lock is interrupted by SIGINT, so a kernel interrupt reaches the
  cell as ``KeyboardInterrupt`` at once; the caller then stops the run's task here
  (its attempt ends ``interrupted``) and waits until the books are closed
  (``RunTask.wait_interruptibly``, the one blocking wait of ``run`` and ``lab``);
- an ``await`` from another loop ticks that loop while it waits, so a cancel that does
  not wake an idle loop (ipykernel's Ctrl-C in an ``await`` cell) lands
  (``RunTask.wait_cancellably``, the one awaiting wait of ``run_async``, ``lab_async``
  and ``await handle``);
- widget updates and display updates are sent from this thread (ipykernel's IOPub is
  thread-safe), so a foreground run's timeline is live while its cell blocks;
- every task runs in a copy of the submitting thread's ``contextvars`` context, so
  ipykernel 7 attributes its outputs to the cell that started the run;
- warm script workers attach to this one loop (spec §4.5), whichever thread or loop
  the run was asked from.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_THREAD_NAME = "woml-run-loop"

#: How long a stopped caller waits for the task to close its books (a run records its
#: attempt ``interrupted`` or ``cancelled``, a lab ends every client's run) before it
#: raises anyway.
STOP_WAIT_S = 10.0

#: While a task is awaited from another loop, that loop wakes this often, so a cancel
#: that does not wake an idle loop lands (shared notes: ipykernel's Ctrl-C in an
#: ``await`` cell otherwise took ~29 s, or was lost).
WAKE_INTERVAL_S = 0.1


class RunLoop:
    """The event loop in its own daemon thread, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop, started in its thread if it is not running yet."""
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                self._loop, self._thread = self._start()
            return self._loop

    @staticmethod
    def _start() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=serve, name=_THREAD_NAME, daemon=True)
        thread.start()
        ready.wait()
        return loop, thread

    def is_current(self) -> bool:
        """Whether the caller runs on this loop's thread (where blocking would deadlock)."""
        return self._thread is not None and threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> RunTask[T]:
        """Run ``coro`` as a task on the loop, in a copy of the caller's context."""
        loop = self.loop
        task: RunTask[T] = RunTask(loop)
        loop.call_soon_threadsafe(task._begin, coro, context=contextvars.copy_context())
        return task

    def call(self, fn: Callable[[], object]) -> None:
        """Call ``fn`` on the loop's thread soon (for state owned by a running run)."""
        self.loop.call_soon_threadsafe(fn)


class RunTask(Generic[T]):
    """A coroutine running on the run loop, as seen from any other thread or loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._task: asyncio.Task[T] | None = None
        self._cancel_requested = False
        self.future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def _begin(self, coro: Coroutine[Any, Any, T]) -> None:
        # Runs on the loop thread, inside the submitter's copied context, so the task
        # created here (which copies the current context) carries it too.
        if not self.future.set_running_or_notify_cancel():
            coro.close()
            return
        self._task = self._loop.create_task(coro)
        self._task.add_done_callback(self._settle)
        if self._cancel_requested:
            self._task.cancel()

    def _settle(self, task: asyncio.Task[T]) -> None:
        if task.cancelled():
            self.future.set_exception(asyncio.CancelledError())
        elif (exc := task.exception()) is not None:
            self.future.set_exception(exc)
        else:
            self.future.set_result(task.result())

    def cancel(self, before: Callable[[], object] | None = None) -> None:
        """Cancel the task from any thread; ``before`` runs first, on the loop thread.

        A no-op once the task is done (spec §7: cancelling a finished run does nothing).
        """
        if self.future.done() or self._loop.is_closed():
            return

        def stop() -> None:
            if before is not None:
                before()
            self._cancel_requested = True
            if self._task is not None:
                self._task.cancel()

        self._loop.call_soon_threadsafe(stop)

    def done(self) -> bool:
        return self.future.done()

    def result(self, timeout: float | None = None) -> T:
        """Block until the task ends and return its value (or raise its exception)."""
        return self.future.result(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the task ends, at most ``timeout`` seconds; whether it ended."""
        done, _ = concurrent.futures.wait([self.future], timeout=timeout)
        return bool(done)

    async def wait_async(self) -> T:
        """Await the task from another event loop."""
        return await asyncio.wrap_future(self.future)

    def wait_interruptibly(self, stop: Callable[[], object],
                           timeout: float | None = None) -> bool:
        """Block until the task ends, at most ``timeout`` seconds; whether it ended.

        A ``KeyboardInterrupt`` (Ctrl-C, a kernel interrupt) calls ``stop`` (which
        cancels the task, saying why), waits up to ``STOP_WAIT_S`` for the task to end,
        and is re-raised (spec §6.1).
        """
        try:
            return self.wait(timeout)
        except KeyboardInterrupt:
            stop()
            self.wait(STOP_WAIT_S)
            raise

    async def wait_cancellably(self, stop: Callable[[], object]) -> T:
        """Await the task's value from another event loop, waking that loop every
        ``WAKE_INTERVAL_S`` (module docstring). Cancelling the awaiting task calls
        ``stop``, waits up to ``STOP_WAIT_S`` for the task to end, and re-raises; a task
        cancelled by anyone else raises ``CancelledError`` without calling ``stop``."""
        waker = asyncio.ensure_future(_wake_periodically())
        ended = asyncio.ensure_future(self.wait_async())
        try:
            # asyncio.wait leaves ``ended`` alone when this task is cancelled.
            await asyncio.wait([ended])
        except asyncio.CancelledError:
            stop()
            await asyncio.wait([ended], timeout=STOP_WAIT_S)
            raise
        finally:
            waker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waker
        return ended.result()


async def _wake_periodically() -> None:
    while True:
        await asyncio.sleep(WAKE_INTERVAL_S)


_default: RunLoop | None = None
_default_lock = threading.Lock()


def run_loop() -> RunLoop:
    """The process's run loop (one per process, like the warm worker pool, spec §4.5)."""
    global _default  # noqa: PLW0603 - one loop per process is the design (module docstring)
    with _default_lock:
        if _default is None:
            _default = RunLoop()
        return _default
