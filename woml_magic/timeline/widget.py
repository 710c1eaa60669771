"""The live timeline widget (spec §6.3), built from standard ipywidgets 8 only.

A header (workflow, run, clock, status, a Cancel button while the run goes on), one
lane per step (id, policy in words, status, the idempotency key in full and
selectable), attempt bars as clickable buttons on a shared time axis (labelled and
coloured by outcome), waits as labelled gaps with a countdown while live, planned
attempts as disabled grey buttons, a details panel for the selected attempt and, once
the run is over, a Play control and a slider that replay it.

The widget is an ``EventSink``: the engine calls it after ``run.apply(event)``. It
re-renders at most ``max_rate_hz`` times a second on the running asyncio loop and
always at ``RunFinished``. Renders update the existing child widgets in place (only
the traits that changed, under ``hold_sync``) instead of recreating them.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets

from ..events import Event, RunFinished
from ..model import Attempt, Run
from ._layout import WAIT_COLOR, Segment, TimelineLayout, compute_layout, outcome_style, place
from ._layout import seconds as fmt_seconds
from .html import _CODE, _FONT, attempt_details_html, esc

TRACK_PX = 640  # width of the time axis in the widget
BAR_CHAR_PX = 7.0  # button text at the notebook's default font size
WAIT_CHAR_PX = 6.2
PLACEHOLDER = "<i>Click an attempt to see its outcome, error, HTTP calls and logs.</i>"
_SLIDER_STEPS = 200  # replay resolution: the slider moves in 1/200 of the run


def _close_tree(w: Any) -> None:
    """Close ``w`` and the Layout/Style widgets it owns, so none stays registered."""
    for name in ("layout", "style"):
        sub = getattr(w, name, None)
        if isinstance(sub, widgets.Widget):
            sub.close()
    w.close()


@contextmanager
def _held(*ws: Any) -> Iterator[None]:
    """``hold_sync`` on several widgets: each sends its changes as one message."""
    if not ws:
        yield
        return
    with ws[0].hold_sync(), _held(*ws[1:]):
        yield


@dataclass
class _LaneView:
    """The widgets of one step's lane, kept across renders (only their traits change)."""

    box: Any
    info: Any
    key: Any
    track: Any
    slots: dict[tuple[str, int], Any] = field(default_factory=dict)
    applied: dict[tuple[str, int], tuple[Any, ...]] = field(default_factory=dict)
    shown: tuple[Any, ...] = ()


class TimelineWidget(widgets.VBox):  # type: ignore[misc]  # ipywidgets is untyped
    """The live, clickable timeline of ``run`` (spec §6.3).

    ``on_cancel`` is called once when the Cancel button is clicked (the button is
    shown only while the run is running and ``on_cancel`` is given). With
    ``live=False`` events are ignored until ``RunFinished``. ``clock_now`` reads the
    run's clock (seconds since its start) for the countdown of a live wait; without it
    the widget shows the time of the latest event.
    """

    # Until __init__ finishes there is nothing of ours to close (Widget.__del__ calls
    # close() even on an instance whose __init__ raised).
    _closed = True

    def __init__(
        self,
        run: Run,
        *,
        on_cancel: Callable[[], None] | None = None,
        live: bool = True,
        max_rate_hz: float = 10.0,
        clock_now: Callable[[], float] | None = None,
    ) -> None:
        if not (max_rate_hz > 0 and math.isfinite(max_rate_hz)):
            raise ValueError(f"max_rate_hz must be a positive number, got {max_rate_hz!r}")
        header = widgets.HTML().add_class("woml-header")
        cancel = widgets.Button(
            description="Cancel",
            icon="stop",
            button_style="danger",
            tooltip="Cancel the run: the running attempt ends cancelled (spec §3.2)",
        ).add_class("woml-cancel")
        axis = widgets.HTML().add_class("woml-axis")
        lanes = widgets.VBox().add_class("woml-lanes")
        replay = widgets.HBox().add_class("woml-replay")
        details = widgets.HTML(value=PLACEHOLDER).add_class("woml-details")
        top = widgets.HBox([header, cancel])
        super().__init__(children=[top, axis, lanes, replay, details])
        self.add_class("woml-timeline")
        self._run = run
        self._on_cancel = on_cancel
        self._live = live
        self._min_interval = 1.0 / max_rate_hz
        self._clock_now = clock_now
        self._top, self._header, self._cancel, self._axis = top, header, cancel, axis
        self._lanes_box, self._replay_box, self._details = lanes, replay, details
        self._lanes: dict[str, _LaneView] = {}
        self._selected: tuple[str, int] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last_render = -math.inf
        self._dirty = False
        self._closed = False
        self._replay_at: float | None = None
        self._play: Any = None
        self._slider: Any = None
        self._link: Any = None
        self._view: Run = run
        #: how many times the widget has rendered (observable by tests and benches)
        self.renders = 0
        cancel.on_click(self._cancel_clicked)
        self.refresh()

    # --- the EventSink side -------------------------------------------------------

    def __call__(self, event: Event) -> None:
        """Note that ``run`` changed (called after ``run.apply(event)``) and re-render soon."""
        if self._closed:
            return
        self._dirty = True
        if isinstance(event, RunFinished):
            self._safe_refresh()
            return
        if not self._live:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._safe_refresh()
            return
        self._schedule(loop)

    def _safe_refresh(self) -> None:
        # The engine calls sinks inline: a drawing failure must not fail the run
        # (the journal already has the event), so it is logged and shown instead.
        try:
            self.refresh()
        except Exception as exc:
            self.log.exception("the woml timeline could not render")
            self._header.value = (
                f"<b>The timeline could not render: {esc(type(exc).__name__)}: {esc(exc)}</b>"
            )

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is not None:
            return
        # The rate limit is about what a person can see, so it runs on wall time, not
        # the run's (possibly simulated) clock.
        delay = max(0.0, self._last_render + self._min_interval - time.monotonic())
        self._timer = loop.call_later(delay, self._flush)

    def _flush(self) -> None:
        self._timer = None
        if self._dirty or self._counting_down():
            self._safe_refresh()

    def _counting_down(self) -> bool:
        return (
            self._clock_now is not None
            and self._run.status == "running"
            and any(sr.status == "waiting" for sr in self._run.steps.values())
        )

    # --- rendering ------------------------------------------------------------------

    def refresh(self) -> None:
        """Render the run's current state now."""
        if self._closed:
            return
        self._dirty = False
        self._last_render = time.monotonic()
        self.renders += 1
        run = self._run
        finished = run.status != "running"
        if finished and self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._replay_at is not None and finished:
            self._view = _snapshot(run, self._replay_at)
            layout = compute_layout(self._view, now=self._replay_at, min_end=_full_end(run))
        else:
            self._view = run
            now = self._clock_now() if self._clock_now is not None and not finished else None
            layout = compute_layout(run, now=now)
        self._render_header(layout)
        self._render_axis(layout)
        self._render_lanes(layout)
        self._render_details()
        if finished:
            self._ensure_replay()
        elif self._live and self._counting_down():
            # Without a running loop the countdown advances with the next event.
            with contextlib.suppress(RuntimeError):
                self._schedule(asyncio.get_running_loop())

    def _render_header(self, layout: TimelineLayout) -> None:
        when = "replay at " if self._replay_at is not None and self._run.status != "running" else ""
        value = (
            f'<div style="{_FONT}">workflow <b>{esc(layout.workflow_id)}</b> · run '
            f'<code style="{_CODE}">{esc(layout.run_id)}</code> · {esc(layout.clock)} clock · '
            f"<b>{esc(self._run.status)}</b> · {when}t = {esc(fmt_seconds(layout.now))}</div>"
        )
        if self._header.value != value:
            self._header.value = value
        show = self._on_cancel is not None and self._run.status == "running"
        display = "" if show else "none"
        if self._cancel.layout.display != display:
            self._cancel.layout.display = display

    def _render_axis(self, layout: TimelineLayout) -> None:
        scale = TRACK_PX / layout.axis_end
        ticks = "".join(
            f'<span style="position:absolute;left:{t * scale:.0f}px;border-left:1px solid #b0bec5;'
            f'padding-left:2px;font-size:10px;color:#546e7a">{esc(fmt_seconds(t))}</span>'
            for t in layout.ticks
        )
        value = f'<div style="position:relative;height:16px;width:{TRACK_PX + 40}px">{ticks}</div>'
        if self._axis.value != value:
            self._axis.value = value

    def _render_lanes(self, layout: TimelineLayout) -> None:
        scale = TRACK_PX / layout.axis_end
        boxes = []
        for lane in layout.lanes:
            view = self._lanes.get(lane.step_id)
            if view is None:
                view = self._new_lane(lane.key)
                self._lanes[lane.step_id] = view
            info = (
                f'<div style="{_FONT}"><b>{esc(lane.step_id)}</b> · {esc(lane.status_words)} · '
                f"{esc(lane.policy)}</div>"
            )
            if view.info.value != info:
                view.info.value = info
            least = [_min_width(s) for s in lane.segments]
            spots = place(lane.segments, scale=scale, min_width=least)
            cursor = 0.0
            shown = []
            for seg, (x, w) in zip(lane.segments, spots, strict=True):
                shown.append(self._render_segment(lane.step_id, view, seg, x - cursor, w))
                cursor = x + w
            if tuple(shown) != view.shown:
                view.shown = tuple(shown)
                view.track.children = view.shown
            boxes.append(view.box)
        if tuple(boxes) != tuple(self._lanes_box.children):
            self._lanes_box.children = tuple(boxes)

    def _new_lane(self, key: str) -> _LaneView:
        info = widgets.HTML()
        code = f'<code style="{_CODE}">{esc(key)}</code>'
        key_w = widgets.HTML(
            value=f'<span style="{_FONT}">idempotency key {code}</span>'
        ).add_class("woml-key")
        track = widgets.HBox(layout=widgets.Layout(overflow="visible", min_height="30px"))
        track.add_class("woml-track")
        box = widgets.VBox([info, key_w, track]).add_class("woml-lane")
        return _LaneView(box=box, info=info, key=key_w, track=track)

    def _render_segment(
        self, step_id: str, view: _LaneView, seg: Segment, gap: float, width: float
    ) -> Any:
        slot = seg.slot
        style = outcome_style(seg.outcome)
        props = (seg.kind, seg.label, seg.tooltip, round(gap), round(width), style.label)
        w = view.slots.get(slot)
        if w is None:
            if slot[0] == "attempt":
                w = widgets.Button(layout=widgets.Layout(height="26px", padding="0 4px"))
                w.on_click(lambda _b, key=(step_id, seg.number): self.select(*key))
            else:
                w = widgets.HTML(layout=widgets.Layout(height="26px")).add_class("woml-wait")
            view.slots[slot] = w
        old = view.applied.get(slot)
        if old == props:
            return w
        view.applied[slot] = props
        with _held(w, w.layout):
            w.layout.margin = f"0 0 0 {gap:.0f}px"
            w.layout.width = f"{width:.0f}px"
            w.layout.flex = "0 0 auto"
            if slot[0] == "attempt":
                self._style_bar(w, seg, old)
            else:
                dashed = "dashed" if seg.kind == "planned-wait" else "solid"
                w.value = (
                    f'<div title="{esc(seg.tooltip)}" style="{_FONT};font-size:11px;'
                    f"background:{WAIT_COLOR};border:1px {dashed} #cfd8dc;height:24px;"
                    f'line-height:24px;overflow:hidden;white-space:nowrap;padding:0 4px">'
                    f"{esc(seg.label)}</div>"
                )
        return w

    def _style_bar(self, w: Any, seg: Segment, old: tuple[Any, ...] | None) -> None:
        style = outcome_style(seg.outcome)
        planned = seg.kind == "planned"
        with w.style.hold_sync():
            w.description = seg.label
            w.tooltip = seg.tooltip
            w.disabled = planned
            w.style.button_color = "#f5f5f5" if planned else style.color
            w.style.text_color = "#616161" if planned else "#ffffff"
            w.layout.border = "1px dashed #9e9e9e" if planned else ""
        if old is not None:
            w.remove_class(f"woml-outcome-{old[5]}").remove_class(f"woml-{old[0]}")
        w.add_class("woml-attempt").add_class(f"woml-{seg.kind}")
        w.add_class(f"woml-outcome-{style.label}")

    # --- selection and details ------------------------------------------------------

    def select(self, step_id: str, number: int) -> None:
        """Show attempt ``number`` of ``step_id`` in the details panel (spec §6.3)."""
        self._selected = (step_id, number)
        self._render_details()

    def _selected_attempt(self) -> tuple[str, Attempt] | None:
        if self._selected is None:
            return None
        step_id, number = self._selected
        sr = self._view.steps.get(step_id)
        if sr is None:
            return None
        for a in sr.attempts:
            if a.number == number:
                return step_id, a
        return None

    def _render_details(self) -> None:
        found = self._selected_attempt()
        value = PLACEHOLDER if found is None else attempt_details_html(*found)
        if self._details.value != value:
            self._details.value = value

    # --- cancel and replay ----------------------------------------------------------

    def _cancel_clicked(self, _button: Any) -> None:
        if self._on_cancel is None or self._cancel.disabled:
            return
        with self._cancel.hold_sync():
            self._cancel.disabled = True
            self._cancel.description = "Cancelling…"
        self._on_cancel()

    def _ensure_replay(self) -> None:
        if self._slider is not None or not self._run.events:
            return
        end_ms = max(1, math.ceil(_full_end(self._run) * 1000))
        step = max(1, end_ms // _SLIDER_STEPS)
        self._play = widgets.Play(
            min=0, max=end_ms, step=step, value=end_ms, interval=50, description="replay"
        ).add_class("woml-play")
        self._slider = widgets.IntSlider(
            min=0, max=end_ms, step=step, value=end_ms, description="t (ms)", continuous_update=True
        ).add_class("woml-slider")
        self._link = widgets.jslink((self._play, "value"), (self._slider, "value"))
        self._slider.observe(self._slider_moved, names="value")
        self._replay_box.children = (self._play, self._slider)

    def _slider_moved(self, change: dict[str, Any]) -> None:
        end_ms = self._slider.max
        self.replay_at(None if change["new"] >= end_ms else change["new"] / 1000)

    def replay_at(self, t: float | None) -> None:
        """Show the finished run as it was at ``t`` seconds on its clock (None: the end)."""
        self._replay_at = t
        self.refresh()

    # --- ownership ------------------------------------------------------------------

    def close(self) -> None:
        """Close every widget this timeline created, replaced or pooled ones included."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._link is not None:
            self._link.close()
        for view in self._lanes.values():
            for w in view.slots.values():
                _close_tree(w)
            for w in (view.info, view.key, view.track, view.box):
                _close_tree(w)
        owned = (self._header, self._cancel, self._axis, self._lanes_box, self._details)
        for w in (*owned, self._replay_box, self._top, self._play, self._slider):
            if w is not None:
                _close_tree(w)
        self.layout.close()
        super().close()


def _min_width(seg: Segment) -> float:
    per_char = BAR_CHAR_PX if seg.kind in ("attempt", "planned") else WAIT_CHAR_PX
    return len(seg.label) * per_char + 18


def _full_end(run: Run) -> float:
    ends = [run.now, run.ended_at or 0.0]
    return max(ends)


def _snapshot(run: Run, t: float) -> Run:
    """The run as it was at ``t``: rebuilt from its events up to then (STYLE 4)."""
    return Run.from_events(run.workflow, [e for e in run.events if e.at <= t])
