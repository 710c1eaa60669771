"""Clocks: one interface, a real and a simulated implementation (spec §5.1, STYLE 3).

The engine never calls ``time.sleep`` or ``asyncio.sleep`` itself; it asks its clock.
Every time a clock reports is seconds since the run started, on the run's clock.

The simulated clock skips time the way trio's ``MockClock(autojump_threshold=0)`` does:
when nothing real is happening (no script executing, no HTTP request in flight —
callers say so with ``busy()``), virtual time jumps to the earliest pending timer.
While something real is happening, virtual time advances with real time, so script
execution costs its real duration and a busy loop still meets its timeout.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Final, Literal, get_args

from .errors import one_of, quote

#: The clocks a run can have (spec §5.1): the one declaration of their names; the
#: API's check, ``--clock``'s choices and ``Woml.clock``'s validator derive from it
#: (STYLE 14).
ClockKind = Literal["real", "simulated"]
CLOCKS: Final[tuple[ClockKind, ...]] = get_args(ClockKind)
_MAX_DEFERRALS = 1000


class Clock(ABC):
    """Time for one run. ``start_at`` resumes a journaled run at its last time (spec §5.3)."""

    kind: ClockKind

    def __init__(self, start_at: float = 0.0) -> None:
        self._t0 = time.monotonic() - start_at
        self._wall0 = time.time() - start_at

    @abstractmethod
    def now(self) -> float:
        """Seconds since the run started, on this clock."""

    def epoch_ms(self) -> float:
        """Unix time in milliseconds that corresponds to ``now()`` (scripts' ``Date.now()``)."""
        return (self._wall0 + self.now()) * 1000.0

    @abstractmethod
    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock."""

    def busy(self) -> AbstractContextManager[None]:
        """Mark real work in progress (a script running, a request in flight)."""
        return nullcontext()


class RealClock(Clock):
    """Waits really elapse (spec §5.1)."""

    kind: ClockKind = "real"

    def now(self) -> float:
        return time.monotonic() - self._t0

    async def sleep(self, seconds: float) -> None:
        due = self.now() + seconds
        # asyncio may wake a timer up to one clock-resolution early; loop until due.
        while (left := due - self.now()) > 0:
            await asyncio.sleep(left)


class SimulatedClock(Clock):
    """Waits and ``services.sleep`` pass at once; real work advances time by its duration."""

    kind: ClockKind = "simulated"

    def __init__(self, start_at: float = 0.0) -> None:
        super().__init__(start_at)
        self._offset = 0.0
        self._busy = 0
        self._seq = 0
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._handle: asyncio.Handle | asyncio.TimerHandle | None = None
        self._deferrals = 0

    def now(self) -> float:
        return time.monotonic() - self._t0 + self._offset

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return  # as on the real clock: nothing to wait for, no timer to keep
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._timers, (self.now() + max(0.0, seconds), self._seq, fut))
        self._seq += 1
        self._kick()
        try:
            await fut
        finally:
            if not fut.done():
                fut.cancel()
            self._kick()

    @contextmanager
    def busy(self) -> Iterator[None]:
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1
            self._kick()

    def _kick(self) -> None:
        """Re-evaluate the timers on the next loop iteration, after ready callbacks run."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # outside a loop nothing can be waiting
            return
        if self._handle is not None:
            self._handle.cancel()
        self._handle = loop.call_soon(self._advance)

    def _advance(self) -> None:
        self._handle = None
        while self._timers and self._timers[0][2].done():
            heapq.heappop(self._timers)
        if not self._timers:
            return
        due = self._timers[0][0]
        now = self.now()
        if due > now:
            loop = asyncio.get_running_loop()
            if self._busy:
                # Real work is under way: let real time carry the clock to the timer.
                self._handle = loop.call_later(due - now, self._advance)
                return
            # Jump only once the loop is idle: tasks woken by the last timer (an attempt
            # that just timed out, say) must react before time moves on. ``_ready`` is
            # asyncio's private queue of callbacks due now; bounded, in case another
            # clock on the same loop is deferring too.
            if getattr(loop, "_ready", None) and self._deferrals < _MAX_DEFERRALS:
                self._deferrals += 1
                self._handle = loop.call_soon(self._advance)
                return
            self._deferrals = 0
            self._offset += due - now
        now = self.now()
        while self._timers and self._timers[0][0] <= now:
            _, _, fut = heapq.heappop(self._timers)
            if not fut.done():
                fut.set_result(None)
        if self._timers:
            self._kick()


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
