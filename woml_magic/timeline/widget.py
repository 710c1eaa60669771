"""The live timeline widget (spec §6.3): an ``anywidget.AnyWidget`` shown while a run
goes on.

The drawing is the static timeline (``render_html``) of the run's current state, synced
as the ``html`` trait; the widget's ES module (``timeline.js``, the same code that the
static output inlines) draws it, keeps the selected attempt across redraws and shows a
Cancel button while the run is running and ``cancellable``. A click sends
``{"type": "cancel"}``; ``on_cancel`` is called once and the button says "Cancelling…".
Replay is client side and for finished runs, which the display layer shows as the static
timeline (``mimebundle``) once the run ends, closing this widget.

The widget is an ``EventSink``: the engine calls it after ``run.apply(event)``, on the
engine's own event loop thread. It re-renders at most ``max_rate_hz`` times a second
with ``loop.call_later`` on that running loop (at once without one), always at
``RunFinished``, and keeps a live wait's countdown ticking and a running attempt's
bar growing with the run's clock on screen (spec §6.3: at least twice a second; a
redraw every ``RUNNING_TICK_S`` while an attempt runs and nothing else happens).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

from ..events import Event, RunFinished
from ..model import Run
from ..outcomes import RUNNING, WAITING
from . import widget_esm
from .html import render_html
from .markup import esc

#: How often the drawing moves while an attempt runs and no event comes (spec §6.3: "at
#: least twice a second"): a quarter of a second, slower than a wait's countdown (the
#: rate limit), since a bar growing needs less than digits counting down.
RUNNING_TICK_S = 0.25


class TimelineWidget(anywidget.AnyWidget):
    """The live timeline of ``run`` (spec §6.3).

    ``on_cancel`` is called once when the Cancel button is pressed (the button shows
    only while the run is running and ``on_cancel`` is given). ``clock_now`` reads the
    run's clock (seconds since its start) for running attempts and the countdown of a
    live wait; without it the drawing stops at the latest event.
    """

    #: the static timeline of the run's current state (spec §6.3)
    html = traitlets.Unicode("").tag(sync=True)
    #: the run's status: "running", "succeeded", "failed"
    status = traitlets.Unicode(RUNNING).tag(sync=True)
    #: whether the view shows a Cancel button while the run is running
    cancellable = traitlets.Bool(False).tag(sync=True)
    #: set once Cancel was pressed and ``on_cancel`` called: the button says "Cancelling…"
    cancelling = traitlets.Bool(False).tag(sync=True)

    _esm = traitlets.Unicode().tag(sync=True)

    @traitlets.default("_esm")
    def _default_esm(self) -> str:
        return widget_esm()

    # Until __init__ finishes there is nothing of ours to close (Widget.__del__ calls
    # close() even on an instance whose __init__ raised).
    _closed = True

    def __init__(
        self,
        run: Run,
        *,
        on_cancel: Callable[[], None] | None = None,
        clock_now: Callable[[], float] | None = None,
        max_rate_hz: float = 10.0,
    ) -> None:
        if not (max_rate_hz > 0 and math.isfinite(max_rate_hz)):
            raise ValueError(f"max_rate_hz must be a positive number, got {max_rate_hz!r}")
        super().__init__(cancellable=on_cancel is not None, status=run.status)
        self._run = run
        self._on_cancel = on_cancel
        self._clock_now = clock_now
        self._min_interval = 1.0 / max_rate_hz
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._last_render = -math.inf
        self._dirty = False
        self._last_good = ""
        self._closed = False
        #: how many times the widget has rendered (observable by tests and benches)
        self.renders = 0
        self.on_msg(self._on_msg)
        self._safe_refresh()

    # --- the EventSink side -------------------------------------------------------

    def __call__(self, event: Event) -> None:
        """Note that ``run`` changed (called after ``run.apply(event)``) and re-render soon."""
        if self._closed:
            return
        self._dirty = True
        if isinstance(event, RunFinished):
            self._safe_refresh()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._safe_refresh()
            return
        self._schedule(loop)

    def _schedule(self, loop: asyncio.AbstractEventLoop, interval: float | None = None) -> None:
        if self._timer is not None:
            return
        # The rate limit is about what a person can see, so it runs on wall time, not
        # the run's (possibly simulated) clock.
        interval = self._min_interval if interval is None else max(interval, self._min_interval)
        delay = max(0.0, self._last_render + interval - time.monotonic())
        self._timer_loop = loop
        self._timer = loop.call_later(delay, self._flush)

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is None:
            return
        # The timer lives on the engine's loop; close() may come from another thread.
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._timer_loop:
            timer.cancel()
        elif self._timer_loop is not None:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nothing to stop
                self._timer_loop.call_soon_threadsafe(timer.cancel)

    @property
    def render_scheduled(self) -> bool:
        """Whether a render is due on the engine's loop (the rate limit or a countdown)."""
        return self._timer is not None

    def _flush(self) -> None:
        self._timer = None
        if self._closed:
            return
        if self._dirty or self._tick() is not None:
            self._safe_refresh()

    def _tick(self) -> float | None:
        """How often to redraw with no event: the rate limit while a wait counts down,
        ``RUNNING_TICK_S`` while an attempt runs (its bar grows, ``t`` advances); None
        when nothing moves on its own (or the run's clock cannot be read)."""
        if self._clock_now is None or self._run.status != RUNNING:
            return None
        statuses = {sr.status for sr in self._run.steps.values()}
        if WAITING in statuses:
            return self._min_interval
        if RUNNING in statuses:
            return RUNNING_TICK_S
        return None

    # --- rendering ------------------------------------------------------------------

    def _safe_refresh(self) -> None:
        # The engine calls sinks inline: a drawing failure must not fail the run (the
        # journal already has the event), so it is logged and shown above the last
        # drawing that worked instead.
        try:
            self.refresh()
        except Exception as exc:
            self.log.exception("the woml timeline could not render")
            self.html = (
                '<div class="woml-render-error" role="alert">The timeline could not render: '
                f"{esc(type(exc).__name__)}: {esc(exc)}</div>{self._last_good}"
            )

    def refresh(self) -> None:
        """Render the run's current state now."""
        if self._closed:
            return
        self._dirty = False
        self._last_render = time.monotonic()
        self.renders += 1
        run = self._run
        live = run.status == RUNNING
        if not live:
            self._cancel_timer()
        now = self._clock_now() if self._clock_now is not None and live else None
        drawing = render_html(run, now=now)
        self._last_good = drawing
        with self.hold_sync():
            self.html = drawing
            self.status = run.status
        tick = self._tick() if live else None
        if tick is not None:
            # Without a running loop the drawing advances with the next event.
            with contextlib.suppress(RuntimeError):
                self._schedule(asyncio.get_running_loop(), tick)

    # --- cancel ---------------------------------------------------------------------

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict) or content.get("type") != "cancel":
            return
        if self._on_cancel is None or self.cancelling or self._run.status != RUNNING:
            return
        self.cancelling = True
        try:
            self._on_cancel()
        except Exception:
            # Shown as a Cancel button that works again, and logged; never raised into
            # the kernel's comm handling.
            self.log.exception("cancelling the woml run failed")
            self.cancelling = False

    # --- ownership ------------------------------------------------------------------

    def close(self) -> None:
        """Stop the countdown timer and close the widget's comm."""
        if self._closed:
            return
        self._closed = True
        self._cancel_timer()
        self.on_msg(self._on_msg, remove=True)
        super().close()
