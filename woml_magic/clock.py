"""Clocks: one interface, a real and a simulated implementation (spec §5.1, STYLE 3, 13).

The engine never calls ``time.sleep`` or ``asyncio.sleep`` itself; it asks its clock.
Every time a clock reports is seconds since the run started, on the run's clock.

``Clock`` is the interface and holds no state. ``RealClock`` waits really elapse.
``SimulatedClock`` is the one virtual clock, with trio's ``MockClock`` as its model:
a timer heap, and time that jumps to the earliest timer when nothing real is happening
(no script executing, no HTTP request in flight — callers say so with ``busy()``) and
the event loop is idle (``MockClock(autojump_threshold=0)``). Its knobs cover each use:

- ``rate``: virtual seconds per real second. 1 for a run's simulated clock (spec §5.1:
  script execution costs its real duration, and a busy loop still meets its timeout);
  0 for the lab's (spec §11: time stands still while scripts run, so how fast this
  machine is changes nothing);
- ``stall_s``: with ``rate=0``, how long real work may hold time still without any
  progress before time moves on around it (counted in ``stalls``);
- ``on_idle``: asked first whenever time could jump; it may give the waiting tasks
  work at this instant instead (the lab's settled steps);
- ``epoch_s``: the Unix time of virtual 0, for scripts' ``Date.now()``.

The Temporal engine's clock (``temporal.workflow.WorkflowClock``) implements ``Clock``
over Temporal's own deterministic time; ``ShiftedClock`` is one lab client's view of
the lab's clock. Nothing else implements a clock (tests/test_architecture.py).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import Final, Literal, get_args

from .errors import one_of, quote

#: The clocks a run can have (spec §5.1): the one declaration of their names; the
#: API's check, ``--clock``'s choices and ``Woml.clock``'s validator derive from it
#: (STYLE 14).
ClockKind = Literal["real", "simulated"]
CLOCKS: Final[tuple[ClockKind, ...]] = get_args(ClockKind)

#: Consecutive loop iterations a simulated clock waits for the loop to go idle before
#: it moves on anyway and counts a stall (a loop that never settles, or another
#: simulated clock on the same loop deferring too). Each is one turn of the loop, so
#: even the limit costs milliseconds.
MAX_DEFERRALS = 10_000


class Clock(ABC):
    """Time for one run (spec §5.1): the interface, without state."""

    kind: ClockKind

    @abstractmethod
    def now(self) -> float:
        """Seconds since the run started, on this clock."""

    @abstractmethod
    def epoch_ms(self) -> float:
        """Unix time in milliseconds that corresponds to ``now()`` (scripts' ``Date.now()``)."""

    @abstractmethod
    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock; a wait of 0 or less returns at once, without
        a turn of the loop."""

    def alarm(self, seconds: float) -> asyncio.Future[None]:
        """A future that completes once ``seconds`` have passed on this clock (an
        attempt's timeout, spec §3.2): ``sleep``'s wait without a task to await it, so
        one attempt races its script against it at no more cost than a callback.
        Cancel it when it is no longer needed. This default runs ``sleep`` in a task;
        the clocks of this module keep a plain timer instead."""
        return asyncio.ensure_future(self.sleep(seconds))

    def busy(self) -> AbstractContextManager[None]:
        """Mark real work in progress (a script running, a request in flight)."""
        return nullcontext()


class RealClock(Clock):
    """Waits really elapse (spec §5.1). ``start_at`` resumes a journaled run at its last
    time (spec §5.3)."""

    kind: ClockKind = "real"

    def __init__(self, start_at: float = 0.0) -> None:
        self._t0 = time.monotonic() - start_at
        self._wall0 = time.time() - start_at

    def now(self) -> float:
        return time.monotonic() - self._t0

    def epoch_ms(self) -> float:
        return (self._wall0 + self.now()) * 1000.0

    async def sleep(self, seconds: float) -> None:
        due = self.now() + seconds
        # asyncio may wake a timer up to one clock-resolution early; loop until due.
        while (left := due - self.now()) > 0:
            await asyncio.sleep(left)

    def alarm(self, seconds: float) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        due = self.now() + seconds
        timer: list[asyncio.TimerHandle] = []

        def ring() -> None:
            if fut.done():
                return
            left = due - self.now()
            if left > 0:  # woken early (clock resolution): as ``sleep``, wait until due
                timer[0] = loop.call_later(left, ring)
            else:
                fut.set_result(None)

        timer.append(loop.call_later(max(0.0, seconds), ring))
        fut.add_done_callback(lambda _: timer[0].cancel())  # a cancelled alarm leaves no timer
        return fut


def loop_has_ready_callbacks(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` has callbacks due now, i.e. it is not idle yet.

    asyncio has no public way to ask (trio's ``wait_all_tasks_blocked`` has no asyncio
    counterpart): this reads the private ready queue of the standard loops, the one
    peek at asyncio's privates in the package (tests/test_architecture.py). A loop
    without one (another implementation) reads as idle.

    A simulated clock's own look (``SimulatedClock._advance``, queued by ``kick``) is
    not work: two clocks on one loop (a lab and a run, one lab after another's
    leftover look) would otherwise each wait for the other's look until
    ``MAX_DEFERRALS`` and count a stall.
    """
    ready: Iterable[object] = getattr(loop, "_ready", None) or ()
    return any(getattr(getattr(handle, "_callback", None), "__func__", None) is not _LOOK
               for handle in ready)


class SimulatedClock(Clock):
    """The virtual clock (module docstring): waits pass at once when nothing real is
    happening; real work advances time at ``rate``."""

    kind: ClockKind = "simulated"

    def __init__(self, start_at: float = 0.0, *, rate: float = 1.0,
                 epoch_s: float | None = None, stall_s: float | None = None,
                 on_idle: Callable[[], bool] | None = None) -> None:
        """``start_at``: the virtual time now (a resumed run's, spec §5.3). The knobs are
        the module docstring's; ``on_idle`` returns True if it gave work (then time
        stays)."""
        if rate < 0:
            raise ValueError(f"rate must be 0 or more virtual seconds per second, got {rate}")
        self._rate = rate
        self._t0 = time.monotonic()
        self._offset = start_at
        self._epoch = time.time() - start_at if epoch_s is None else epoch_s
        self._stall_s = stall_s
        self._on_idle = on_idle
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._busy = 0
        self._progress = time.monotonic()
        self._soon: asyncio.Handle | None = None  # a look at the timers, next iteration
        self._later: asyncio.TimerHandle | None = None  # one after real time passes
        self._deferrals = 0
        #: How many times time moved on before the loop had settled: around work that
        #: held it ``stall_s`` real seconds, or a loop that never went idle.
        self.stalls = 0

    def now(self) -> float:
        if not self._rate:
            return self._offset
        return self._offset + self._rate * (time.monotonic() - self._t0)

    def epoch_ms(self) -> float:
        return (self._epoch + self.now()) * 1000.0

    def set_on_idle(self, on_idle: Callable[[], bool]) -> None:
        """Who gives the waiting tasks work when time could jump (the lab's settled step)."""
        self._on_idle = on_idle

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return  # as on the real clock: nothing to wait for, no timer to keep
        fut = self.alarm(seconds)
        try:
            await fut
        finally:
            fut.cancel()
            self.kick()

    def alarm(self, seconds: float) -> asyncio.Future[None]:
        """``Clock.alarm``: one timer on the heap. Cancelled, it stays there until the
        clock's next look, which drops it: every change that could let time jump (a
        wait, work ending, ``kick``) looks, and a look that met it still running either
        rang it or waited for work whose end looks again."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if seconds <= 0:
            fut.set_result(None)
            return fut
        heapq.heappush(self._timers, (self.now() + seconds, next(self._seq), fut))
        self.kick()
        return fut

    def busy(self) -> AbstractContextManager[None]:
        return _Busy(self)

    def _hold(self) -> None:
        self._busy += 1
        self._progress = time.monotonic()

    def _let_go(self) -> None:
        self._busy -= 1
        self._progress = time.monotonic()
        self.kick()

    def kick(self) -> None:
        """Look at the timers again on the next loop iteration, after the callbacks
        ready now (one look sees every change made before it)."""
        if self._soon is not None:
            return  # a look is due already; it will see this change
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # outside a loop nothing can be waiting
            return
        self._soon = loop.call_soon(self._advance)

    def _advance(self) -> None:
        self._soon = None
        loop = asyncio.get_running_loop()
        self._fire()  # the timers real time has carried the clock to
        if self._busy and not self._stalled():
            self._wait_for_real_time(loop)
            return
        # Jump only once the loop is idle: tasks woken by the last timer (an attempt
        # that just timed out, say) or by the last answer must react first.
        if loop_has_ready_callbacks(loop):
            if self._deferrals < MAX_DEFERRALS:
                self._deferrals += 1
                self._soon = loop.call_soon(self._advance)
                return
            self.stalls += 1  # the loop never settled (another clock deferring too?)
        self._deferrals = 0
        if self._on_idle is not None and self._on_idle():
            self.kick()  # work given at this instant: its tasks move first, then a look
            return
        while self._timers and self._timers[0][2].done():
            heapq.heappop(self._timers)
        if not self._timers:
            return
        due = self._timers[0][0]
        now = self.now()
        if not self._rate:
            self._offset = max(now, due)  # exactly the timer's time: lab times are exact
        elif due > now:
            self._offset += due - now
        self._fire()
        if self._timers:
            self.kick()

    def _fire(self) -> None:
        now = self.now()
        while self._timers and self._timers[0][0] <= now:
            _, _, fut = heapq.heappop(self._timers)
            if not fut.done():
                fut.set_result(None)

    def _wait_for_real_time(self, loop: asyncio.AbstractEventLoop) -> None:
        """Real work is under way: at ``rate > 0`` real time carries the clock to the next
        timer; at ``rate=0`` time waits for the work (looking again when it would stall:
        one watchdog at a time, not one per look — a lab looks several times an attempt)."""
        if self._rate:
            if self._later is not None:
                self._later.cancel()
                self._later = None
            if self._timers:
                self._later = loop.call_later(
                    (self._timers[0][0] - self.now()) / self._rate, self._look)
        elif self._stall_s is not None and self._later is None:
            left = self._progress + self._stall_s - time.monotonic()
            self._later = loop.call_later(max(0.0, left), self._look)

    def _look(self) -> None:
        self._later = None
        self.kick()

    def _stalled(self) -> bool:
        """Whether real work has held time still ``stall_s`` real seconds with no
        progress (then time moves on around it, and counts it)."""
        if self._stall_s is None or time.monotonic() - self._progress < self._stall_s:
            return False
        self.stalls += 1
        self._progress = time.monotonic()
        return True

    def view(self, start: float) -> ShiftedClock:
        """This clock as seen by something that started at ``start`` on it."""
        return ShiftedClock(self, start)


class _Busy:
    """``SimulatedClock.busy()``: real work under way while entered. A class, not a
    generator context manager: a lab enters one for every attempt."""

    __slots__ = ("_clock",)

    def __init__(self, clock: SimulatedClock) -> None:
        self._clock = clock

    def __enter__(self) -> None:
        self._clock._hold()

    def __exit__(self, *_: object) -> None:
        self._clock._let_go()


#: What a clock's look is, to tell it from work in ``loop_has_ready_callbacks``.
_LOOK = SimulatedClock._advance


class ShiftedClock(Clock):
    """Another clock seen from ``start`` on it (a lab client's run, spec §11: every time
    its ``Run`` shows is seconds since that client started, spec §5.1); waits, work and
    the epoch are the other clock's."""

    def __init__(self, base: Clock, start: float) -> None:
        self._base = base
        self.start = start
        self.kind = base.kind

    def now(self) -> float:
        return self._base.now() - self.start

    def epoch_ms(self) -> float:
        return self._base.epoch_ms()

    async def sleep(self, seconds: float) -> None:
        await self._base.sleep(seconds)

    def alarm(self, seconds: float) -> asyncio.Future[None]:
        return self._base.alarm(seconds)

    def busy(self) -> AbstractContextManager[None]:
        return self._base.busy()


def make_clock(kind: ClockKind, start_at: float = 0.0) -> Clock:
    """The clock named by ``--clock`` (spec §6.1): one of ``CLOCKS``."""
    if kind == "real":
        return RealClock(start_at)
    if kind == "simulated":
        return SimulatedClock(start_at)
    raise ValueError(f"unknown clock {kind!r}; use {one_of(CLOCKS)}")


def as_clock(value: object) -> ClockKind:
    """``value`` as a ``ClockKind``; ``ValueError`` naming the clocks otherwise."""
    for kind in CLOCKS:
        if value == kind:
            return kind
    raise ValueError(f"unknown clock {quote(value)}; use {one_of(CLOCKS)}")
