"""When an attempt holds a simulated clock (spec §5.1).

A simulated clock jumps to the next timer only while nothing real is happening; an
attempt is real work except while its script awaits service calls, when only the
service itself (an HTTP request) holds the clock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager

from ..clock import Clock


class Activity:
    """Tells a simulated clock when one attempt is doing real work.

    The attempt counts as busy except while the script awaits at least one service
    call: then only the service itself (an HTTP request) holds the clock.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._pending = 0
        self._busy: AbstractContextManager[None] | None = None  # the clock's, while held
        self._stalled = False

    def stalled(self) -> None:
        """Nothing can settle the script's promise: only the timeout can end the attempt,
        so no real work holds the clock any more (spec §3.2, §5.1)."""
        self._stalled = True
        self._release()

    def _hold(self) -> None:
        if self._busy is None:
            self._busy = self._clock.busy()
            self._busy.__enter__()

    def _release(self) -> None:
        busy, self._busy = self._busy, None
        if busy is not None:
            busy.__exit__(None, None, None)

    def running(self) -> AbstractContextManager[None]:
        """While the attempt's script runs (the activity itself is the context manager:
        one fewer generator per attempt)."""
        return self

    def __enter__(self) -> None:
        self._hold()

    def __exit__(self, *_: object) -> None:
        self._release()

    @contextlib.contextmanager
    def awaiting_service(self) -> Iterator[None]:
        """While the script awaits one service call."""
        self._pending += 1
        self._release()
        try:
            yield
        finally:
            self._pending -= 1
            if self._pending == 0 and not self._stalled:
                self._hold()
