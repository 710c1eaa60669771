"""The timeline's geometry and words, computed once per render (spec §6.3).

``compute_layout(run)`` turns a ``Run`` into lanes of segments on one shared time axis:
attempts (coloured and labelled by outcome), waits (labelled "wait 2s", with a countdown
while live), and, for a run still going, the planned schedule of attempts not yet run.
The plain-text table, the SVG and (through the SVG) the widget all draw this one layout,
so they never disagree about what happened when.

``lay_out`` is the one layout of lanes on an axis: one run's (``compute_layout``) or
several runs' together, grouped under a row per run (``compare``).

Each step is its own module: ``lanes`` builds the segments from the run's events,
``axis`` maps time to x (true to time, with breaks) and picks the ticks, ``placement``
draws each lane's bars and places their labels; the sizes are in ``geometry``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Run
from ..outcomes import RUNNING
from .axis import AxisBreak, XMap, axis_breaks, axis_knots, axis_ticks, idle_gaps, interpolate
from .geometry import AXIS_H, BAND_H, LABEL_W, RIGHT_PAD, TRACK_W
from .lanes import Lane, build_lanes
from .placement import draw_lane


@dataclass(frozen=True)
class RunBand:
    """The row over one run's lanes in a comparison (``compare``): its ``label`` (bold)
    and ``words`` (run id, status, how long), ``y`` the row's top."""

    ref: str
    label: str
    words: str
    y: float = 0.0


@dataclass(frozen=True)
class TimelineLayout:
    """Everything a renderer draws: header facts, the shared axis and the lanes.

    ``bands`` (a comparison, several runs' lanes on one axis) label each run's lanes;
    its times are each run's own, from its start. ``axis`` holds the knots ``(t, x)``
    of the piecewise-linear time→x map, x in SVG units, both increasing; ``x(t)``
    interpolates it. ``ticks`` are the times that get a tick and a label
    (``format_time``).
    """

    run_id: str
    workflow_id: str
    clock: str
    status: str
    now: float
    axis_end: float
    ticks: tuple[float, ...]
    lanes: tuple[Lane, ...]
    resumes: tuple[float, ...]
    axis: tuple[tuple[float, float], ...] = ((0.0, LABEL_W), (1.0, LABEL_W + TRACK_W))
    breaks: tuple[AxisBreak, ...] = ()
    scale: float = TRACK_W
    width: float = LABEL_W + TRACK_W + RIGHT_PAD
    lanes_bottom: float = AXIS_H
    #: a comparison's rows of run labels, one per run (``compare``); empty for one run
    bands: tuple[RunBand, ...] = ()

    @property
    def title(self) -> str:
        """What the drawing is, for its ``<title>`` and assistive technology."""
        what = "comparison of runs" if self.bands else "timeline of run"
        return f"{what} {self.run_id}"

    @property
    def track_x0(self) -> float:
        return self.axis[0][1]

    @property
    def track_x1(self) -> float:
        return self.axis[-1][1]

    def x(self, t: float) -> float:
        """The x of time ``t``: linear between knots, the run's scale beyond them."""
        return interpolate(self.axis, self.scale, t)


#: The latest time drawn, in seconds on the run's clock (~317 years; the journal
#: refuses later ones, spec §5.2). A ``Run`` built by other means may hold any float:
#: its times are drawn within ``[0, MAX_DRAWN_S]``, so every render is bounded.
MAX_DRAWN_S = 1e10


def bounded(t: float) -> float:
    """``t`` within ``[0, MAX_DRAWN_S]``; NaN is 0 (spec §5.1: times start at 0)."""
    return 0.0 if math.isnan(t) else min(max(t, 0.0), MAX_DRAWN_S)


def _bounded_lane(lane: Lane) -> Lane:
    if all(
        0.0 <= s.start <= s.end <= MAX_DRAWN_S and (s.left is None or 0.0 <= s.left <= MAX_DRAWN_S)
        for s in lane.segments
    ):
        return lane  # the usual case: nothing to copy
    segments = tuple(
        dataclasses.replace(
            s,
            start=bounded(s.start),
            end=max(bounded(s.start), bounded(s.end)),
            left=None if s.left is None else bounded(s.left),
        )
        for s in lane.segments
    )
    return dataclasses.replace(lane, segments=segments)


#: A saved output's picture and plain text (spec §6.5) show a big run's leading steps
#: up to this many attempts, and say what they left out (issue 21 item 6: a notebook in
#: git carries every byte; a 98,000 px picture of 1,000 steps is neither read nor
#: cheap to show). The details panel lists every step.
SHOWN_ATTEMPTS = 200


def leading_lanes(lanes: tuple[Lane, ...], attempts: int = SHOWN_ATTEMPTS) -> int:
    """How many of ``lanes``, from the first, hold at most ``attempts`` attempts in all
    (at least one lane, and all of them when they fit)."""
    total = 0
    for i, lane in enumerate(lanes):
        total += lane.used
        if total > attempts:
            return max(i, 1)
    return len(lanes)


def left_out(lanes: tuple[Lane, ...]) -> str:
    """``lanes`` left out, in words: "990 more steps (2970 attempts)"."""
    steps = len(lanes)
    tried = sum(lane.used for lane in lanes)
    return (
        f"{steps} more step{'' if steps == 1 else 's'} ({tried} attempt{'' if tried == 1 else 's'})"
    )


def compute_layout(run: Run, *, now: float | None = None, min_end: float = 0.0) -> TimelineLayout:
    """Lay ``run`` out on one true-to-time axis (spec §6.3).

    ``now`` is the current time on the run's clock (default ``run.now``): running
    attempts are drawn up to it and live waits count down from it. ``min_end`` keeps
    the axis at least that long (a replay keeps the whole run's axis while it scrubs).
    """
    t_now = run.now if now is None else max(now, run.now)
    if run.ended_at is not None:
        t_now = run.ended_at if now is None else t_now
    t_now = bounded(t_now)
    lanes = [_bounded_lane(lane) for lane in build_lanes(run, t_now)]
    return lay_out(
        [(None, lanes)],
        now=t_now,
        min_end=min_end,
        live=run.status == RUNNING,
        run_id=run.id,
        workflow_id=run.workflow_id,
        clock=run.clock,
        # A run the user stopped says how (spec §6.3), not just "failed".
        status=run.stopped or run.status,
        resumes=tuple(bounded(t) for t in run.resumes),
    )


def run_lanes(run: Run, run_ref: str = "") -> list[Lane]:
    """``run``'s lanes as it ended, bounded, each marked with ``run_ref`` (a comparison's
    place of the run, ``Lane.ref``)."""
    t_end = bounded(run.ended_at if run.ended_at is not None else run.now)
    return [
        dataclasses.replace(_bounded_lane(lane), run_ref=run_ref)
        for lane in build_lanes(run, t_end)
    ]


def lay_out(
    groups: Sequence[tuple[RunBand | None, Sequence[Lane]]],
    *,
    now: float,
    min_end: float = 0.0,
    live: bool = False,
    run_id: str,
    workflow_id: str,
    clock: str,
    status: str,
    resumes: tuple[float, ...] = (),
) -> TimelineLayout:
    """Lanes in ``groups`` on one true-to-time axis (spec §6.3): one axis (breaks and
    scale) for all of them, then each group's lanes under its ``RunBand`` (a row with
    the run's label; None: no row, one run's timeline), in order. The words after
    ``live`` are the layout's header facts."""
    lanes = [lane for _, group in groups for lane in group]
    end = max([now, bounded(min_end), *(s.end for lane in lanes for s in lane.segments)])
    gaps, busy = idle_gaps(
        ((s.start, s.end) for lane in lanes for s in lane.segments if s.is_bar), end
    )
    broken = axis_breaks(gaps, busy)
    knots, scale, axis_end = axis_knots(end, broken, live=live)
    x_of = XMap(knots, scale)
    y = AXIS_H
    drawn: list[Lane] = []
    bands: list[RunBand] = []
    for band, group in groups:
        if band is not None:
            bands.append(dataclasses.replace(band, y=y))
            y += BAND_H
        for lane in group:
            d = dataclasses.replace(draw_lane(lane, x_of, broken), y=y)
            drawn.append(d)
            y += d.height
    right = max(
        [
            knots[-1][1],
            *(dr.label.right for lane in drawn for dr in lane.drawn if dr.label is not None),
        ]
    )
    return TimelineLayout(
        run_id=run_id,
        workflow_id=workflow_id,
        clock=clock,
        status=status,
        now=now,
        axis_end=axis_end,
        ticks=axis_ticks(knots, broken, scale),
        lanes=tuple(drawn),
        resumes=resumes,
        axis=knots,
        breaks=tuple(AxisBreak(a, b, x_of(a), x_of(b)) for a, b in broken),
        scale=scale,
        width=math.ceil(right + RIGHT_PAD),
        lanes_bottom=y,
        bands=tuple(bands),
    )
