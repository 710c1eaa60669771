"""The Python API: ``run``, ``run_async`` and ``start`` (spec §7).

``run_async`` is the one code path; ``run`` drives it to the end from plain code or
from inside a running loop (a notebook cell, through nest_asyncio), and ``start``
runs it in the background behind a ``RunHandle``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Coroutine, Generator, Iterable
from typing import TYPE_CHECKING, Any

from .clock import make_clock
from .engine import Engine, EngineConfig, check_scripts
from .errors import WomlError, WomlRunError
from .events import EventSink
from .model import Run, Workflow
from .runtime.pool import WorkerPool

if TYPE_CHECKING:
    from .journal import Journal

#: Ticks this often while a run is active so a kernel interrupt lands promptly (the
#: notes: an idle loop otherwise did not see ipykernel's task cancel for ~29 s).
_WAKE_INTERVAL = 0.1

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


def check_payload(payload: Any) -> Any:
    """Return ``payload`` if it is JSON-serialisable, else raise ``WomlRunError`` (spec §6.1)."""
    try:
        return json.loads(json.dumps(payload, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise WomlRunError(
            f"the payload must be a JSON value (dict, list, str, int, float, bool or None): "
            f"{exc}"
        ) from None


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

    Cancelling the task records the running attempt as ``cancelled`` and then raises
    ``asyncio.CancelledError``.
    """
    workflow = _as_workflow(text_or_workflow)
    if clock not in ("real", "simulated"):
        raise WomlRunError(f"unknown clock {clock!r}; use 'real' or 'simulated'")
    pool = default_pool()
    await check_scripts(workflow, pool)  # spec §2.3: nothing runs, nothing is journaled
    with _open_journal(journal) as jr:
        if resume is not None:
            engine = _resume_engine(workflow, jr, resume, pool, sinks, config, retry_interrupted)
            if engine is None:
                return jr.load(resume, workflow)
        else:
            rid = _validate_run_id(run_id) if run_id is not None else new_run_id()
            if jr.has_run(rid):
                raise WomlRunError(
                    f"run id {rid!r} is already in the journal {jr.path}; pick another id, "
                    f"or continue it with resume={rid!r}"
                )
            run = Run(id=rid, workflow=workflow, clock=clock, payload=check_payload(payload))
            engine = Engine(run, make_clock(clock), pool=pool, sinks=[jr, *sinks],
                            config=config)
        if on_engine is not None:
            on_engine(engine)
        waker = asyncio.ensure_future(_wake_periodically())
        try:
            if resume is not None:
                return await engine.resume()
            return await engine.start_new()
        finally:
            waker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waker


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

    Works in a plain process and inside a running event loop (a notebook cell). A
    kernel interrupt (SIGINT) ends the running attempt ``interrupted``, tears the
    worker down, then raises ``KeyboardInterrupt`` (spec §6.1).
    """
    engines: list[Engine] = []

    def remember(engine: Engine) -> None:
        engines.append(engine)
        if on_engine is not None:
            on_engine(engine)

    coro = run_async(text_or_workflow, payload, clock, run_id, journal, resume,
                     retry_interrupted, sinks=sinks, config=config, on_engine=remember)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None:
        loop = asyncio.new_event_loop()
        try:
            return _drive(loop, coro, engines)
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
    import nest_asyncio

    nest_asyncio.apply(loop)
    return _drive(loop, coro, engines)


def _drive(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Run], engines: list[Engine]
) -> Run:
    """Run ``coro`` on ``loop``; turn SIGINT into an ``interrupted`` attempt, then re-raise."""
    task = loop.create_task(coro)
    interrupted = False

    def interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        for engine in engines:
            engine.stop_reason("interrupted")
        task.cancel()

    previous = None
    if threading.current_thread() is threading.main_thread():
        def on_sigint(signum: int, frame: object) -> None:
            loop.call_soon_threadsafe(interrupt)

        previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        while True:
            try:
                return loop.run_until_complete(task)
            except KeyboardInterrupt:
                # SIGINT arrived outside our handler (another thread's handler, or it
                # landed before ours was installed): stop the task cleanly, then re-raise.
                interrupt()
            except asyncio.CancelledError:
                if interrupted:
                    raise KeyboardInterrupt from None
                raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


class RunHandle:
    """A run going on in the background (spec §7: ``wm.start``)."""

    def __init__(self, engine_ready: threading.Event) -> None:
        self._engine: Engine | None = None
        self._engine_ready = engine_ready
        self._task: asyncio.Future[Run] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._result: Run | None = None  # the Run the task returned

    @property
    def run(self) -> Run:
        """The live ``Run``, updated as events arrive."""
        self._engine_ready.wait(timeout=30)
        if self._result is not None:
            return self._result
        if self._engine is None:
            if self._error is not None:
                raise self._error
            raise WomlError("the run has not started yet")
        return self._engine.run

    @property
    def id(self) -> str:
        return self.run.id

    def cancel(self) -> None:
        """Cancel the run: the running attempt ends ``cancelled`` (spec §3.2)."""
        if self._loop is None or self._task is None:
            return
        task = self._task

        def do_cancel() -> None:
            if self._engine is not None:
                self._engine.stop_reason("cancelled")
            task.cancel()

        if self._thread is None:
            do_cancel()
        else:
            self._loop.call_soon_threadsafe(do_cancel)

    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def result(self, timeout: float | None = None) -> Run:
        """Block until the run ends (for plain scripts; in a notebook ``await handle``)."""
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"the run did not finish within {timeout}s")
        elif self._task is not None and not self._task.done():
            raise WomlError("the run is still going; use `await handle` inside the event loop")
        return self._final()

    def _final(self) -> Run:
        if self._error is not None:
            raise self._error
        return self.run

    def __await__(self) -> Generator[Any, None, Run]:
        if self._thread is not None:
            yield from asyncio.get_running_loop().run_in_executor(None, self._thread.join)
        elif self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                yield from self._task.__await__()
        return self._final()

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
    """Start a run in the background and return at once (spec §7).

    Inside a running event loop (a notebook) the run is a task on that loop; in plain
    code it runs on a loop in a background thread.
    """
    ready = threading.Event()
    handle = RunHandle(ready)

    def got_engine(engine: Engine) -> None:
        handle._engine = engine
        ready.set()
        if on_engine is not None:
            on_engine(engine)

    async def main() -> Run:
        try:
            handle._result = await run_async(
                text_or_workflow, payload, clock, run_id, journal, resume, retry_interrupted,
                sinks=sinks, config=config, on_engine=got_engine)
        except asyncio.CancelledError:
            if handle._engine is None:
                raise
            return handle._engine.run
        except BaseException as exc:
            handle._error = exc
            raise
        else:
            return handle._result
        finally:
            ready.set()

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        handle._loop = loop
        handle._task = loop.create_task(main())
        handle._task.add_done_callback(_consume)
        return handle
    new_loop = asyncio.new_event_loop()
    handle._loop = new_loop
    handle._task = new_loop.create_task(main())
    handle._task.add_done_callback(_consume)

    def drive() -> None:
        try:
            assert handle._task is not None
            with contextlib.suppress(BaseException):
                new_loop.run_until_complete(handle._task)
        finally:
            new_loop.run_until_complete(new_loop.shutdown_asyncgens())
            new_loop.close()

    handle._thread = threading.Thread(target=drive, name="woml-run", daemon=True)
    handle._thread.start()
    return handle


def _consume(task: asyncio.Future[Run]) -> None:
    """Mark a background task's exception as retrieved (the handle re-raises it)."""
    if not task.cancelled():
        task.exception()
