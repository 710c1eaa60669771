"""The Python API: ``run``, ``run_async`` and ``start`` (spec §7).

Every run executes on the package's run loop, in a thread of its own (``runloop``,
spec §6.3): ``start`` submits it there and returns a ``RunHandle``; ``run`` waits for
that handle (a kernel interrupt ends the attempt ``interrupted``); ``run_async``
awaits it from any other loop. No caller's loop is ever re-entered.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, Any

from .clock import make_clock
from .engine import Engine, EngineConfig, check_scripts
from .errors import WomlError, WomlRunError
from .events import EventSink
from .limits import Limits, check_payload_limits
from .model import Run, Workflow
from .runloop import RunTask, run_loop
from .runtime.pool import WorkerPool

if TYPE_CHECKING:
    from .journal import Journal

#: Ticks this often while a run is awaited so a kernel interrupt lands promptly (the
#: notes: an idle loop otherwise did not see ipykernel's task cancel for ~29 s).
_WAKE_INTERVAL = 0.1
#: How long an interrupted caller waits for the run to record its ``interrupted`` attempt.
_STOP_WAIT_S = 10.0

_pool: WorkerPool | None = None


def default_pool() -> WorkerPool:
    """The process's warm script workers (spec §4.5: reused across attempts and runs)."""
    global _pool  # noqa: PLW0603 - one warm pool per process is the spec's design (§4.5)
    if _pool is None:
        _pool = WorkerPool()
        atexit.register(_pool.kill_all)
    return _pool


def new_run_id() -> str:
    """A random run id (spec §3.5: random unless the user pins it)."""
    return f"run-{secrets.token_hex(6)}"


def _as_workflow(text_or_workflow: str | Workflow) -> Workflow:
    if isinstance(text_or_workflow, Workflow):
        return text_or_workflow
    if not isinstance(text_or_workflow, str):
        raise TypeError(
            f"run() takes WOML text or a Workflow, not {type(text_or_workflow).__name__}"
        )
    from .parse import parse

    return parse(text_or_workflow)


def check_payload(payload: Any, limits: Limits | None = None) -> Any:
    """Return ``payload`` as the JSON value the run will see, or raise before anything
    runs (spec §6.1): ``WomlLimitError`` naming the limit when it is too deep or too
    large (spec §4.5), ``WomlRunError`` when it is not JSON."""
    lim = limits or Limits()
    try:
        text = check_payload_limits(payload, lim.max_payload_bytes, lim.max_json_depth)
    except (TypeError, ValueError) as exc:
        raise WomlRunError(
            f"the payload must be a JSON value (dict, list, str, int, float, bool or None): "
            f"{exc}"
        ) from None
    return json.loads(text)


@contextlib.contextmanager
def _open_journal(journal: str | os.PathLike[str] | Journal) -> Generator[Journal, None, None]:
    from .journal import Journal

    if isinstance(journal, Journal):
        yield journal
        return
    owned = Journal(journal)
    try:
        yield owned
    finally:
        owned.close()


def _validate_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not run_id or len(run_id) > 128 or not run_id.isprintable():
        raise WomlRunError(
            f"run id {run_id!r} is not allowed; use 1 to 128 printable characters"
        )
    return run_id


async def run_async(
    text_or_workflow: str | Workflow,
    payload: Any = None,
    clock: str = "real",
    run_id: str | None = None,
    journal: str | os.PathLike[str] | Journal = ":memory:",
    resume: str | None = None,
    retry_interrupted: bool = False,
    *,
    sinks: Iterable[EventSink] = (),
    config: EngineConfig | None = None,
    on_engine: Callable[[Engine], None] | None = None,
) -> Run:
    """Run a workflow to its end and return the ``Run`` (spec §7).

    The run executes on the package's run loop (``runloop``); awaiting it from any
    other loop only waits. Cancelling the awaiting task records the running attempt as
    ``cancelled`` and then raises ``asyncio.CancelledError``.
    """
    coro = _execute(text_or_workflow, payload, clock, run_id, journal, resume,
                    retry_interrupted, sinks=sinks, config=config, on_engine=on_engine)
    runner = run_loop()
    if runner.is_current():
        return await coro
    task = runner.submit(coro)
    # ipykernel turns Ctrl-C in an `await` cell into a cancel of the cell's task that
    # does not wake an idle loop (shared/notes): tick while we wait so it lands.
    waker = asyncio.ensure_future(_wake_periodically())
    try:
        return await asyncio.shield(task.wait_async())
    except asyncio.CancelledError:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task.wait_async()
        raise
    finally:
        waker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waker


async def _execute(
    text_or_workflow: str | Workflow,
    payload: Any,
    clock: str,
    run_id: str | None,
    journal: str | os.PathLike[str] | Journal,
    resume: str | None,
    retry_interrupted: bool,
    *,
    sinks: Iterable[EventSink],
    config: EngineConfig | None,
    on_engine: Callable[[Engine], None] | None,
) -> Run:
    """The run itself, on the run loop: check, open the journal, start or resume."""
    workflow = _as_workflow(text_or_workflow)
    if clock not in ("real", "simulated"):
        raise WomlRunError(f"unknown clock {clock!r}; use 'real' or 'simulated'")
    pool = default_pool()
    await check_scripts(workflow, pool)  # spec §2.3: nothing runs, nothing is journaled
    with _open_journal(journal) as jr:
        if resume is not None:
            engine = _resume_engine(workflow, jr, resume, pool, sinks, config, retry_interrupted)
            if engine is None:
                return _reattached(jr.load(resume, workflow))
        else:
            rid = _validate_run_id(run_id) if run_id is not None else new_run_id()
            if jr.has_run(rid):
                raise WomlRunError(
                    f"run id {rid!r} is already in the journal {jr.path}; pick another id, "
                    f"or continue it with resume={rid!r}"
                )
            limits = config.limits if config is not None else None
            run = Run(id=rid, workflow=workflow, clock=clock,
                      payload=check_payload(payload, limits))
            engine = Engine(run, make_clock(clock), pool=pool, sinks=[jr, *sinks],
                            config=config)
        if on_engine is not None:
            on_engine(engine)
        if resume is not None:
            return await engine.resume()
        return await engine.start_new()


def _resume_engine(
    workflow: Workflow,
    jr: Journal,
    run_id: str,
    pool: WorkerPool,
    sinks: Iterable[EventSink],
    config: EngineConfig | None,
    retry_interrupted: bool,
) -> Engine | None:
    """An engine that continues ``run_id`` (spec §5.3), or None if nothing is left to run."""
    if not jr.has_run(run_id):
        raise WomlRunError(
            f"no run {run_id!r} in the journal {jr.path}; `%woml runs` or "
            "woml_magic.journal.Journal(path).runs() lists the runs it holds"
        )
    past = jr.load(run_id, workflow)
    started = past.events[0]
    if getattr(started, "fingerprint", None) != workflow.fingerprint:
        raise WomlRunError(
            f"run {run_id!r} was started from a different document (its steps, policies or "
            "scripts changed); resume it with the same document, or start a new run"
        )
    if past.status != "running":
        stopped = [s for s in past.steps.values() if s.status in ("failed", "failed-closed")]
        can_retry = (
            retry_interrupted and stopped and stopped[0].attempts
            and stopped[0].attempts[-1].outcome == "interrupted"
        )
        if not can_retry:
            return None  # a finished run re-executes nothing
    clock = make_clock(past.clock, start_at=past.now + _downtime(jr, run_id, past.clock))
    return Engine(past, clock, pool=pool, sinks=[jr, *sinks], config=config,
                  retry_interrupted=retry_interrupted)


def _reattached(run: Run) -> Run:
    """A finished run resumed: nothing re-executes and nothing is journaled, but each
    succeeded step's result now comes from the journal, so it is ``reattached``
    (spec §5.3, §7), as it is when an unfinished run is resumed."""
    for sr in run.steps.values():
        if sr.status == "succeeded":
            sr.status = "reattached"
    return run


def _downtime(jr: Journal, run_id: str, clock: str) -> float:
    """Seconds the run's clock ran on since its last journaled event (spec §5.1, §5.3).

    A real clock keeps running while no process executes the run: a resumed run's
    time axis continues from the last event plus the wall time since it was written,
    so a wait that was under way continues its schedule (the remaining part, nothing
    if it is already due). A simulated clock only moves while the run executes.
    """
    if clock != "real":
        return 0.0
    return max(0.0, time.time() - jr.last_wall(run_id))


async def _wake_periodically() -> None:
    while True:
        await asyncio.sleep(_WAKE_INTERVAL)


def run(
    text_or_workflow: str | Workflow,
    payload: Any = None,
    clock: str = "real",
    run_id: str | None = None,
    journal: str | os.PathLike[str] | Journal = ":memory:",
    resume: str | None = None,
    retry_interrupted: bool = False,
    *,
    sinks: Iterable[EventSink] = (),
    config: EngineConfig | None = None,
    on_engine: Callable[[Engine], None] | None = None,
) -> Run:
    """Run a workflow to its end, blocking (spec §7).

    Works in a plain process and inside a running event loop (a notebook cell): the
    run executes on the package's run loop while this thread waits, so the caller's
    loop is never re-entered (spec §6.3). A kernel interrupt (SIGINT) ends the running
    attempt ``interrupted``, tears the worker down, then raises ``KeyboardInterrupt``
    (spec §6.1).
    """
    handle = start(text_or_workflow, payload, clock, run_id, journal, resume,
                   retry_interrupted, sinks=sinks, config=config, on_engine=on_engine)
    return handle.wait_interruptibly()


class RunHandle:
    """A run going on in the background on the run loop (spec §7: ``wm.start``)."""

    def __init__(self) -> None:
        self._engine: Engine | None = None
        self._started = threading.Event()  # the engine exists, or the run already ended
        self._task: RunTask[Run] | None = None

    def _attach(self, task: RunTask[Run]) -> None:
        self._task = task
        task.future.add_done_callback(lambda _f: self._started.set())

    def _got_engine(self, engine: Engine) -> None:
        self._engine = engine
        self._started.set()

    def wait_started(self, timeout: float | None = None) -> bool:
        """Block until the run has an engine (it started) or has already ended."""
        return self._started.wait(timeout)

    @property
    def engine(self) -> Engine | None:
        """The engine executing the run, once it started (None before, or if it never did)."""
        return self._engine

    @property
    def run(self) -> Run:
        """The live ``Run``, updated as events arrive."""
        self.wait_started(timeout=30)
        if self._engine is not None:
            return self._engine.run
        if self._task is not None and self._task.done():
            return self._task.result()  # ended before an engine: raises its error, or a
            #                             finished run resumed (nothing to re-execute)
        raise WomlError("the run has not started yet")

    @property
    def id(self) -> str:
        return self.run.id

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the run: the running attempt ends ``cancelled`` (spec §3.2).

        Does nothing once the run has ended. ``reason="interrupted"`` is what a kernel
        interrupt records instead (spec §6.1).
        """
        if self._task is None:
            return

        def say_why() -> None:
            if self._engine is not None:
                self._engine.stop_reason(reason)

        self._task.cancel(before=say_why)

    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def add_done_callback(self, fn: Callable[[RunHandle], object]) -> None:
        """Call ``fn(handle)`` when the run ends (on the run loop's thread)."""
        if self._task is not None:
            self._task.future.add_done_callback(lambda _f: fn(self))

    def result(self, timeout: float | None = None) -> Run:
        """Block until the run ends (for plain scripts; in a notebook ``await handle``)."""
        if self._task is None:
            raise WomlError("the run was never started")
        try:
            return self._task.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the run did not finish within {timeout}s") from None
        except asyncio.CancelledError:
            return self._cancelled_run()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ends, at most ``timeout`` seconds; whether it ended.

        On ``KeyboardInterrupt`` (a kernel interrupt) the running attempt ends
        ``interrupted``; this waits until that is recorded, then re-raises (spec §6.1).
        """
        if self._task is None:
            raise WomlError("the run was never started")
        try:
            return self._task.wait(timeout)
        except KeyboardInterrupt:
            self.cancel("interrupted")
            self._task.wait(_STOP_WAIT_S)
            raise

    def wait_interruptibly(self) -> Run:
        """Block until the run ends and return it; a kernel interrupt ends the running
        attempt ``interrupted`` and re-raises (see ``wait``)."""
        self.wait()
        return self.result()

    def _cancelled_run(self) -> Run:
        if self._engine is None:
            raise WomlError("the run was cancelled before it started") from None
        return self._engine.run

    def __await__(self) -> Generator[Any, None, Run]:
        if self._task is None:
            raise WomlError("the run was never started")
        try:
            return (yield from self._task.wait_async().__await__())
        except asyncio.CancelledError:
            if self._task.done():
                return self._cancelled_run()
            raise

    def __repr__(self) -> str:
        state = "done" if self.done() else "running"
        rid = self._engine.run.id if self._engine is not None else "?"
        return f"<RunHandle {rid} {state}>"


def start(
    text_or_workflow: str | Workflow,
    payload: Any = None,
    clock: str = "real",
    run_id: str | None = None,
    journal: str | os.PathLike[str] | Journal = ":memory:",
    resume: str | None = None,
    retry_interrupted: bool = False,
    *,
    sinks: Iterable[EventSink] = (),
    config: EngineConfig | None = None,
    on_engine: Callable[[Engine], None] | None = None,
) -> RunHandle:
    """Start a run in the background on the run loop and return at once (spec §7)."""
    handle = RunHandle()

    def got_engine(engine: Engine) -> None:
        handle._got_engine(engine)
        if on_engine is not None:
            on_engine(engine)

    runner = run_loop()
    if runner.is_current():
        raise WomlError(
            "wm.run()/wm.start() was called from the run loop itself (an event sink?); "
            "await wm.run_async(...) there instead"
        )
    coro = _execute(text_or_workflow, payload, clock, run_id, journal, resume,
                    retry_interrupted, sinks=sinks, config=config, on_engine=got_engine)
    handle._attach(runner.submit(coro))
    return handle
