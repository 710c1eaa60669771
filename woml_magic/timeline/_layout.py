"""The timeline's geometry and words, computed once per render (spec §6.3).

``compute_layout(run)`` turns a ``Run`` into lanes of segments on one shared time axis:
attempts (coloured and labelled by outcome), waits (labelled "wait 2s", with a countdown
while live), and, for a run still going, the planned schedule of attempts not yet run.
The plain-text table, the SVG and (through the SVG) the widget all draw this one layout,
so they never disagree about what happened when.

The axis is true to time (spec §6.3). Time maps to x by a piecewise-linear function
whose knots are ``TimelineLayout.axis``:

- one scale (px per second) for the whole run, so a wait's drawn length grows with
  the wait and equal waits are drawn equal;
- except for **axis breaks**: a gap in which no attempt runs, so long that drawing it
  to scale would crush the rest, is drawn ``BREAK_W`` wide with a zig-zag and its
  length (``≈ 24h``). The rule, in ``_breaks``: sort the gaps longest first and break
  the *k* longest for the largest *k* such that the *k*-th is longer than
  ``BREAK_RATIO`` (10) × the longest span left to scale (a gap or a stretch in which
  attempts run), that span taken as at least ``BREAK_FLOOR`` (5 s). So nothing under
  50 s is ever broken, the retry schedule of spec §3.1 (waits up to 30 s) is drawn to
  scale, and a 1 h and a 24 h wait next to 1 s ones are both breaks. The time left to
  scale is then drawn as if at least ``BREAK_FLOOR`` long, so a few milliseconds of
  attempts around a break are not stretched across the whole track;
- every attempt starts exactly at ``x(start)``. An attempt is drawn at least
  ``MIN_BAR_W`` (3 px) wide so a 6 ms attempt is visible; the extra width comes out of
  the gap after it and a bar stops 1 px before the next attempt of its lane, so the
  minimum never moves a later start (it can shorten the drawn part of the following
  wait by up to 3 px, the same for every wait after a similarly short attempt).

The track is ``TRACK_W`` (780 px) wide: the whole run fits, with ``LABEL_W`` for the
step column, in under 1000 px, so nothing needs scrolling; the SVG is wider only when a
label beside the last bar needs it (at most ``LABEL_SLACK``), and the HTML wraps it in
a horizontally scrolling container all the same. A finished run ends at the track's
end; a live run's time to scale is rounded up (``nice_axis``) so the scale changes only
when the run outgrows it.

Labels go inside a bar when they fit, else beside it, else in label rows above or below
the lane; their boxes are estimated at ``CHAR_W`` px a character and never overlap.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..events import WaitScheduled
from ..model import Call, Run, StepRun

SegmentKind = Literal["attempt", "wait", "planned", "planned-wait"]

# --- geometry, in SVG user units (CSS px) ---------------------------------------------
LABEL_W = 150.0  # the step column left of the track
TRACK_W = 780.0  # the time axis of a finished run: LABEL_W + TRACK_W + RIGHT_PAD < 1000
RIGHT_PAD = 16.0
AXIS_H = 30.0  # tick labels above the first lane
BAR_H = 20.0
ROW_H = 14.0  # one label row above or below the bars
LANE_GAP = 14.0  # between lanes
FONT_SIZE = 11
CHAR_W = 6.4  # px per character at font-size 11 (a safe over-estimate for sans-serif)
LABEL_GAP = 4.0  # the least space between two labels
BAR_GAP = 2.0  # the least space between a label and a bar other than its own
LABEL_SLACK = 60.0  # how far right of the track a label may reach (the SVG widens)
INSIDE_PAD = 4.0  # text inset inside a bar
MIN_BAR_W = 3.0
BAR_CLEARANCE = 1.0  # a widened bar stops this far before the next attempt
BREAK_W = 56.0
BREAK_RATIO = 10.0
BREAK_FLOOR = 5.0  # seconds
TICK_MIN_PX = 64.0  # the least distance between two ticks
MAX_ROWS_ABOVE = 3
MAX_ROWS_BELOW = 2


@dataclass(frozen=True)
class OutcomeStyle:
    """How one outcome looks (spec §6.3: colour is never the only cue).

    ``color`` is the bar's fill; text inside a bar is always white (``BAR_TEXT``), and
    every fill is dark enough for white text to meet WCAG AA (4.5:1) in any theme.
    ``pattern`` is the second cue: ``solid`` for success and running, ``stripes`` for a
    retryable failure (``threw``), ``cross`` for fail-closed outcomes, ``dashed``
    outline for planned attempts. Labels also carry the outcome word.
    """

    label: str
    color: str
    pattern: Literal["solid", "stripes", "cross", "dashed"]
    meaning: str


#: The fixed colour of text inside a bar (every fill above is ≥ 4.5:1 against it).
BAR_TEXT = "#ffffff"

#: spec §3.2's outcomes plus the live states. ``threw`` is amber, not red: a step that
#: succeeded after retries must not read as a failure.
OUTCOMES: dict[str, OutcomeStyle] = {
    "succeeded": OutcomeStyle("succeeded", "#2e7d32", "solid", "the script returned a result"),
    "threw": OutcomeStyle("threw", "#b45309", "stripes", "the script threw; retried if allowed"),
    "timeout": OutcomeStyle("timeout", "#c62828", "cross", "ran past the step timeout"),
    "invalid-json": OutcomeStyle("invalid-json", "#ad1457", "cross", "result is not JSON"),
    "oversized": OutcomeStyle("oversized", "#7b1fa2", "cross", "result too large"),
    "crash": OutcomeStyle("crash", "#8e0000", "cross", "the script worker or host failed"),
    "interrupted": OutcomeStyle("interrupted", "#4527a0", "cross", "interrupted; effect unknown"),
    "cancelled": OutcomeStyle("cancelled", "#6d4c41", "cross", "cancelled by the user"),
    "ambiguous": OutcomeStyle("ambiguous", "#c2185b", "cross", "a call's effect is unknown"),
    "running": OutcomeStyle("running", "#1565c0", "solid", "running now"),
    "planned": OutcomeStyle("planned", "#616161", "dashed", "not yet run"),
}

#: spec §7's step statuses, in words for the lane header.
STEP_STATUS_WORDS: dict[str, str] = {
    "succeeded": "succeeded",
    "failed": "failed (last allowed attempt threw)",
    "failed-closed": "failed closed (not retried)",
    "reattached": "reattached (result from the journal)",
    "not-run": "not run (an earlier step did not succeed)",
    "pending": "pending",
    "running": "running",
    "waiting": "waiting to retry",
}

#: What a lane without segments says, by step status.
LANE_NOTES: dict[str, str] = {
    "not-run": "not run: an earlier step did not succeed",
    "reattached": "reattached: result from the journal, not run again",
    "pending": "pending",
}

_LIVE_STEP = frozenset({"pending", "running", "waiting"})


def outcome_style(outcome: str) -> OutcomeStyle:
    """The style of ``outcome``; an unknown outcome keeps its own name as its label."""
    return OUTCOMES.get(outcome) or OutcomeStyle(outcome, "#616161", "cross", outcome)


def format_time(seconds: float) -> str:
    """A time or duration on the run's clock, for ticks, labels and the header (§6.3).

    The rules (the widget's JavaScript mirrors them exactly):

    - ``0`` → ``0s``; a negative value is ``-`` followed by the rule for its size;
    - below 60 s (after rounding to the millisecond): seconds with at most three
      decimals, trailing zeros dropped: ``0.006s``, ``1.5s``, ``12.3s``; a nonzero time
      that rounds to 0 ms keeps two significant digits: ``0.00025s``;
    - below 1 h (after rounding to 0.1 s): minutes, then seconds to 0.1 s unless zero,
      separated by a space: ``1m``, ``2m 30s``, ``2m 30.5s``;
    - otherwise whole seconds as hours, minutes, seconds, zero parts left out (hours
      always shown, never days): ``1h``, ``1h 5s``, ``24h``, ``25h 3m``.

    Rounding is half to even (Python's ``round``), in each step above.

    An axis break's label is ``"≈ " + format_time(length)``.
    """
    if seconds < 0:
        return "-" + format_time(-seconds)
    if seconds == 0:
        return "0s"
    ms = round(seconds * 1000)
    if ms == 0:
        decimals = 1 - math.floor(math.log10(seconds))
        return _trim(f"{seconds:.{decimals}f}") + "s"
    if ms < 60_000:
        return _trim(f"{ms / 1000:.3f}") + "s"
    tenths = round(seconds * 10)
    if tenths < 36_000:
        m, rest = divmod(tenths, 600)
        return f"{m}m" + (f" {_trim(f'{rest / 10:.1f}')}s" if rest else "")
    whole = round(seconds)
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return " ".join([f"{h}h"] + ([f"{m}m"] if m else []) + ([f"{s}s"] if s else []))


def _trim(number: str) -> str:
    return number.rstrip("0").rstrip(".") if "." in number else number


def text_width(text: str) -> float:
    """The estimated width of ``text`` at ``FONT_SIZE`` (an over-estimate)."""
    return len(text) * CHAR_W


@dataclass(frozen=True)
class Segment:
    """One piece of a lane on the time axis: an attempt, a wait, or a planned one.

    ``number`` is the attempt's number; for a wait, the number of the attempt it
    follows. ``left`` is the countdown of a live wait (seconds still to wait), else None.
    ``short`` is the label used where ``label`` does not fit ("#4", "8s").
    """

    kind: SegmentKind
    number: int
    start: float
    end: float
    outcome: str
    label: str
    tooltip: str
    left: float | None = None
    short: str = ""


@dataclass(frozen=True)
class Label:
    """A placed label: its text, left edge, row and whether it sits inside its bar.

    ``row`` 0 is the bar row; -1, -2, … are label rows above the bars, 1, 2, … below.
    """

    text: str
    x: float
    row: int
    inside: bool = False

    @property
    def width(self) -> float:
        return text_width(self.text)

    @property
    def right(self) -> float:
        return self.x + self.width


@dataclass(frozen=True)
class Drawn:
    """A segment's drawn extent ``x0``–``x1`` and its label (None: shown in the tooltip
    and the details only, because no place was free)."""

    seg: Segment
    x0: float
    x1: float
    label: Label | None


@dataclass(frozen=True)
class Lane:
    """One step: its words (spec §6.3), its segments in time order and their drawing.

    ``y`` is the top of the lane; the bars sit ``rows_above`` label rows below it.
    ``note`` is what a lane without segments says ("not run: …").
    """

    step_id: str
    status: str
    status_words: str
    policy: str
    key: str
    segments: tuple[Segment, ...]
    drawn: tuple[Drawn, ...] = ()
    rows_above: int = 0
    rows_below: int = 0
    y: float = 0.0
    note: str | None = None

    @property
    def bar_y(self) -> float:
        return self.y + self.rows_above * ROW_H

    @property
    def height(self) -> float:
        return (self.rows_above + self.rows_below) * ROW_H + BAR_H + LANE_GAP


@dataclass(frozen=True)
class AxisBreak:
    """A gap drawn ``BREAK_W`` wide instead of to scale, labelled ``≈ 24h``."""

    t0: float
    t1: float
    x0: float
    x1: float

    @property
    def label(self) -> str:
        return "≈ " + format_time(self.t1 - self.t0)


@dataclass(frozen=True)
class TimelineLayout:
    """Everything a renderer draws: header facts, the shared axis and the lanes.

    ``axis`` holds the knots ``(t, x)`` of the piecewise-linear time→x map, x in SVG
    units, both increasing; ``x(t)`` interpolates it. ``ticks`` are the times that get
    a tick and a label (``format_time``).
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

    @property
    def track_x0(self) -> float:
        return self.axis[0][1]

    @property
    def track_x1(self) -> float:
        return self.axis[-1][1]

    def x(self, t: float) -> float:
        """The x of time ``t``: linear between knots, the run's scale beyond them."""
        return _interpolate(self.axis, self.scale, t)


def _interpolate(knots: Sequence[tuple[float, float]], scale: float, t: float) -> float:
    times = [k[0] for k in knots]
    i = bisect.bisect_right(times, t)
    if i == 0:
        return knots[0][1] + (t - knots[0][0]) * scale
    if i == len(knots):
        return knots[-1][1] + (t - knots[-1][0]) * scale
    (ta, xa), (tb, xb) = knots[i - 1], knots[i]
    return xa if tb <= ta else xa + (t - ta) * (xb - xa) / (tb - ta)


def nice_axis(end: float, target_ticks: int = 6) -> tuple[float, tuple[float, ...]]:
    """A round axis end ≥ ``end`` and evenly spaced ticks at 1, 2 or 5 × 10ⁿ seconds.

    A live run's scale uses the round end, so it changes only when the run outgrows it.
    """
    end = max(end, 0.001)
    raw = end / target_ticks
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    n = max(1, math.ceil(end / step - 1e-9))
    return n * step, tuple(round(i * step, 9) for i in range(n + 1))


#: Tick steps of 10 s and more, in seconds: whole minutes and hours read better.
_LONG_STEPS = (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200)


def tick_step(least: float) -> float:
    """The smallest round step ≥ ``least`` seconds: 1, 2, 5 × 10ⁿ below 10 s, then
    10 s, 15 s, 30 s, 1m, 2m, 5m, 10m, 15m, 30m, 1h, 2h, 3h, 6h, 12h, then days."""
    least = max(least, 1e-9)
    if least <= 10:
        power = 10 ** math.floor(math.log10(least))
        return float(next(m * power for m in (1, 2, 5, 10) if m * power >= least * 0.999999))
    for step in _LONG_STEPS:
        if step >= least:
            return float(step)
    return 86400.0 * math.ceil(least / 86400.0)


# --- segments (time only) --------------------------------------------------------------


def _scheduled_waits(run: Run) -> dict[tuple[str, int], WaitScheduled]:
    return {(e.step_id, e.after_attempt): e for e in run.events if isinstance(e, WaitScheduled)}


def _attempt_segment(
    step_id: str, a_number: int, start: float, end: float, outcome: str
) -> Segment:
    label = outcome_style(outcome).label
    span = f"{format_time(start)} → {format_time(end)}" + (
        " (still running)" if outcome == "running" else ""
    )
    return Segment(
        "attempt",
        a_number,
        start,
        end,
        outcome,
        f"#{a_number} {label}",
        f"attempt {a_number} of {step_id} · {label} · {span}",
        short=f"#{a_number}",
    )


def _wait_segment(
    kind: SegmentKind,
    after: int,
    start: float,
    end: float,
    length: float,
    tooltip: str,
    left: float | None = None,
) -> Segment:
    words = format_time(length)
    label = f"wait {words}" if left is None else f"wait {left:.1f}s left"
    short = words if left is None else f"{left:.1f}s"
    return Segment(kind, after, start, end, "wait", label, tooltip, left=left, short=short)


def _history(sr: StepRun, waits: dict[tuple[str, int], WaitScheduled], now: float) -> list[Segment]:
    segs: list[Segment] = []
    attempts = sorted(sr.attempts, key=lambda a: a.number)
    for i, a in enumerate(attempts):
        end = a.ended_at if a.ended_at is not None else max(now, a.started_at)
        segs.append(_attempt_segment(sr.id, a.number, a.started_at, end, a.outcome))
        if i + 1 < len(attempts):
            nxt = attempts[i + 1]
            sched = waits.get((sr.id, a.number))
            w_start = sched.at if sched is not None else end
            w_end = max(w_start, nxt.started_at)
            length = sched.seconds if sched is not None else w_end - w_start
            title = f"waited {format_time(w_end - w_start)} before attempt {nxt.number}"
            seg = _wait_segment("wait", a.number, w_start, w_end, length, title)
            if sched is None and a.outcome == "interrupted":
                # spec §5.3: --retry-interrupted starts the next attempt at once; the gap
                # is the time until the run was resumed, not a scheduled wait.
                seg = Segment(
                    "wait",
                    a.number,
                    w_start,
                    w_end,
                    "wait",
                    "resumed",
                    f"resumed {format_time(w_end - w_start)} later; no wait",
                    short="resumed",
                )
            segs.append(seg)
    return segs


def _planned(sr: StepRun, segs: list[Segment], now: float, earliest: float) -> float | None:
    """Append the planned schedule of a live step; return when its next attempt could
    end at the earliest (so a following pending step is planned from there), or None.

    A running attempt is expected to end no earlier than ``now``; a planned attempt is
    drawn at its planned start with no duration. Waits follow the policy (spec §3.1).
    """
    policy = sr.step.policy
    last = max(sr.attempts, key=lambda a: a.number) if sr.attempts else None
    if sr.status == "waiting" and sr.wait_started_at is not None and sr.wait_due is not None:
        after = last.number if last is not None else 0
        length = sr.wait_due - sr.wait_started_at
        left = max(0.0, sr.wait_due - now)
        segs.append(
            _wait_segment(
                "wait",
                after,
                sr.wait_started_at,
                sr.wait_due,
                length,
                f"waiting {format_time(length)} before attempt {after + 1}, "
                f"due at {format_time(sr.wait_due)}",
                left=left,
            )
        )
        cursor, next_number = sr.wait_due, after + 1
    elif last is not None:
        next_number = last.number + 1
        cursor = max(now, segs[-1].end)
    else:
        next_number, cursor = 1, max(now, earliest)
    first_end: float | None = cursor if last is None or last.outcome != "running" else now
    for k in range(next_number, policy.attempts + 1):
        if k > 1 and not (segs and segs[-1].kind == "wait"):
            gap = policy.wait(k - 1).total_seconds()
            segs.append(
                _wait_segment(
                    "planned-wait",
                    k - 1,
                    cursor,
                    cursor + gap,
                    gap,
                    f"planned wait of {format_time(gap)} if attempt {k - 1} throws",
                )
            )
            cursor += gap
        segs.append(
            Segment(
                "planned",
                k,
                cursor,
                cursor,
                "planned",
                f"#{k} planned",
                f"attempt {k} of {sr.id} · planned at {format_time(cursor)}, not yet run",
                short=f"#{k}",
            )
        )
    return first_end


def _make_lane(sr: StepRun, segs: Sequence[Segment]) -> Lane:
    return Lane(
        step_id=sr.id,
        status=sr.status,
        status_words=STEP_STATUS_WORDS.get(sr.status, sr.status)
        + ("" if sr.reason is None else f": {sr.reason}"),
        policy=sr.step.policy.describe(),
        key=sr.idempotency_key,
        segments=tuple(segs),
        note=None if segs else LANE_NOTES.get(sr.status, STEP_STATUS_WORDS.get(sr.status)),
    )


def _lanes(run: Run, now: float) -> list[Lane]:
    waits = _scheduled_waits(run)
    lanes: list[Lane] = []
    earliest = now  # when the step before could end at the earliest
    live = run.status == "running"
    for sr in run.steps.values():
        segs = _history(sr, waits, now)
        if live and sr.status in _LIVE_STEP:
            end = _planned(sr, segs, now, earliest)
            earliest = now if end is None else max(now, end)
        lanes.append(_make_lane(sr, segs))
    return lanes


# --- the axis ---------------------------------------------------------------------------


def _spans(lanes: Sequence[Lane], end: float) -> tuple[list[tuple[float, float]], list[float]]:
    """The idle gaps (no attempt runs in any lane) and the lengths of the busy spans."""
    busy = sorted(
        (s.start, s.end)
        for lane in lanes
        for s in lane.segments
        if s.kind in ("attempt", "planned")
    )
    gaps: list[tuple[float, float]] = []
    lengths: list[float] = []
    cursor = 0.0
    span_start: float | None = None
    for a, b in busy:
        if span_start is None or a > cursor:
            if span_start is not None:
                lengths.append(cursor - span_start)
            if a > cursor:
                gaps.append((cursor, a))
            span_start = a
        cursor = max(cursor, b)
    if span_start is not None:
        lengths.append(cursor - span_start)
    if end > cursor:
        gaps.append((cursor, end))
    return gaps, lengths


def _breaks(
    gaps: Sequence[tuple[float, float]], busy: Sequence[float]
) -> list[tuple[float, float]]:
    """The gaps drawn as axis breaks (the rule is in the module docstring)."""
    ranked = sorted(gaps, key=lambda g: g[1] - g[0], reverse=True)
    lengths = [b - a for a, b in ranked]
    for k in range(len(ranked), 0, -1):
        rest = max([*lengths[k:], *busy, 0.0])
        if lengths[k - 1] > BREAK_RATIO * max(rest, BREAK_FLOOR):
            return sorted(ranked[:k])
    return []


def _axis(
    end: float, broken: Sequence[tuple[float, float]], live: bool
) -> tuple[tuple[tuple[float, float], ...], float, float]:
    """The knots of the time→x map, the scale (px/s) and the axis end (seconds)."""
    unbroken = end - sum(b - a for a, b in broken)
    shown = max(unbroken, BREAK_FLOOR) if broken else unbroken
    if live or shown <= 0:
        shown = nice_axis(shown)[0]
    scale = (TRACK_W - BREAK_W * len(broken)) / shown
    knots = [(0.0, LABEL_W)]
    t, x = 0.0, LABEL_W
    for a, b in broken:
        x += (a - t) * scale
        knots.append((a, x))
        x += BREAK_W
        knots.append((b, x))
        t = b
    axis_end = end + (shown - unbroken)  # a live run's rounding leaves empty track at the end
    knots.append((axis_end, x + (axis_end - t) * scale))
    return tuple(knots), scale, axis_end


def _ticks(
    knots: Sequence[tuple[float, float]], broken: Sequence[tuple[float, float]], scale: float
) -> tuple[float, ...]:
    """Round times whose labels do not collide with each other or a break's label."""
    step = tick_step(TICK_MIN_PX / scale)
    starts = {a for a, _ in broken}
    taken: list[tuple[float, float]] = [
        (_interpolate(knots, scale, a) - 2, _interpolate(knots, scale, b) + 2) for a, b in broken
    ]
    out: list[float] = []
    pieces = [
        (knots[i][0], knots[i + 1][0]) for i in range(len(knots) - 1) if knots[i][0] not in starts
    ]
    for t0, t1 in pieces:
        k = math.ceil(t0 / step - 1e-9)
        while k * step <= t1 + 1e-9:
            t = round(k * step, 9)
            x = _interpolate(knots, scale, t)
            half = text_width(format_time(t)) / 2 + LABEL_GAP / 2
            if _says_exactly(t) and all(x + half <= lo or x - half >= hi for lo, hi in taken):
                out.append(t)
                taken.append((x - half, x + half))
            k += 1
    return tuple(sorted(set(out)))


def _says_exactly(t: float) -> bool:
    """Whether ``format_time(t)`` names ``t`` without rounding (a tick must not lie)."""
    unit = 0.001 if t < 60 else 0.1 if t < 3600 else 1.0
    return abs(t / unit - round(t / unit)) < 1e-6


# --- bars and labels ---------------------------------------------------------------------


def _draw_lane(lane: Lane, x_of: _XMap, breaks: Sequence[tuple[float, float]]) -> Lane:
    """Bars at their true x, then labels: inside, beside, or in label rows."""
    segs = lane.segments
    bars = [i for i, s in enumerate(segs) if s.kind in ("attempt", "planned")]
    extents: list[tuple[float, float]] = [(0.0, 0.0)] * len(segs)
    for j, i in enumerate(bars):
        s = segs[i]
        x0 = x_of(s.start)
        limit = x_of(segs[bars[j + 1]].start) - BAR_CLEARANCE if j + 1 < len(bars) else math.inf
        x1 = max(x_of(s.end), min(x0 + MIN_BAR_W, limit), x0 + 1.0)
        extents[i] = (x0, x1)
    prev_end = -math.inf
    for i, s in enumerate(segs):
        if s.kind in ("attempt", "planned"):
            prev_end = extents[i][1]
        else:
            x0 = max(x_of(s.start), prev_end)
            extents[i] = (x0, max(x0, x_of(s.end)))
    # A break's zig-zag crosses the bar row: no label may sit on it.
    bar_boxes = [extents[i] for i in bars] + [(x_of(a), x_of(b)) for a, b in breaks]
    track = (x_of.x0, x_of.x1 + LABEL_SLACK)
    placed: dict[int, list[tuple[float, float]]] = {}
    labels: list[Label | None] = []
    for i, s in enumerate(segs):
        label = _place_label(s, extents[i], bar_boxes, placed, track)
        if label is not None:
            placed.setdefault(label.row, []).append((label.x, label.right))
        labels.append(label)
    rows = [lb.row for lb in labels if lb is not None]
    return Lane(
        step_id=lane.step_id,
        status=lane.status,
        status_words=lane.status_words,
        policy=lane.policy,
        key=lane.key,
        segments=segs,
        drawn=tuple(
            Drawn(s, e[0], e[1], lb) for s, e, lb in zip(segs, extents, labels, strict=True)
        ),
        rows_above=-min([0, *rows]),
        rows_below=max([0, *rows]),
        note=lane.note,
    )


class _XMap:
    def __init__(self, knots: Sequence[tuple[float, float]], scale: float) -> None:
        self.knots, self.scale = knots, scale
        self.x0, self.x1 = knots[0][1], knots[-1][1]

    def __call__(self, t: float) -> float:
        return _interpolate(self.knots, self.scale, t)


def _free(
    x0: float,
    x1: float,
    row: int,
    placed: dict[int, list[tuple[float, float]]],
    bars: Sequence[tuple[float, float]],
    own: tuple[float, float] | None,
) -> bool:
    """Whether a label box ``x0``–``x1`` in ``row`` keeps clear of every placed label
    (``LABEL_GAP``) and, in the bar row, of every other bar (``BAR_GAP``)."""
    if any(x1 + LABEL_GAP > a and x0 < b + LABEL_GAP for a, b in placed.get(row, [])):
        return False
    if row != 0:
        return True
    return all(x1 + BAR_GAP <= a or x0 >= b + BAR_GAP for a, b in bars if (a, b) != own)


def _candidates(
    seg: Segment,
    extent: tuple[float, float],
    text: str,
    rows: Sequence[int],
    track: tuple[float, float],
) -> list[tuple[float, int, bool]]:
    """Where ``text`` may go, best first: ``(x, row, inside)``."""
    x0, x1 = extent
    w = text_width(text)
    if seg.kind not in ("attempt", "planned"):
        mid = min(max(track[0], (x0 + x1) / 2 - w / 2), track[1] - w)
        fits = w + 2 * BAR_GAP <= x1 - x0
        return ([(mid, 0, False)] if fits else []) + [(mid, r, False) for r in rows]
    out: list[tuple[float, int, bool]] = []
    if seg.kind == "attempt" and w + 2 * INSIDE_PAD <= x1 - x0:
        out.append((x0 + INSIDE_PAD, 0, True))
    if x1 + LABEL_GAP + w <= track[1]:
        out.append((x1 + LABEL_GAP, 0, False))
    else:  # no room right of the last bars: beside on the left, rows end at the bar
        out.append((x0 - LABEL_GAP - w, 0, False))
    at = x0 if x0 + w <= track[1] else max(track[0], x1 - w)
    return out + [(at, r, False) for r in rows]


def _place_label(
    seg: Segment,
    extent: tuple[float, float],
    bars: Sequence[tuple[float, float]],
    placed: dict[int, list[tuple[float, float]]],
    track: tuple[float, float],
) -> Label | None:
    """The first free place, in this order: the full label inside or beside the bar (or
    centred on a wait), in the nearest label row; then the short label ("#4", "8s")
    likewise; then the full label in the further rows; else no label (the tooltip and
    the details still say it all)."""
    is_bar = seg.kind in ("attempt", "planned")
    above = [-r for r in range(1, MAX_ROWS_ABOVE + 1)]
    below = list(range(1, MAX_ROWS_BELOW + 1))
    near, far = (
        (above[:1] + below[:1], above[1:] + below[1:])
        if is_bar
        else (below[:1] + above[:1], below[1:] + above[1:])
    )
    short = seg.short if seg.short and seg.short != seg.label else None
    tries = [(seg.label, near)] + ([(short, near + far)] if short else []) + [(seg.label, far)]
    for i, (text, rows) in enumerate(tries):
        for x, row, inside in _candidates(seg, extent, text, rows, track):
            if i == len(tries) - 1 and row == 0:
                continue  # tried already
            if x >= track[0] and _free(
                x, x + text_width(text), row, placed, bars, extent if is_bar else None
            ):
                return Label(text, x, row, inside)
    return None


def compute_layout(run: Run, *, now: float | None = None, min_end: float = 0.0) -> TimelineLayout:
    """Lay ``run`` out on one true-to-time axis (spec §6.3).

    ``now`` is the current time on the run's clock (default ``run.now``): running
    attempts are drawn up to it and live waits count down from it. ``min_end`` keeps
    the axis at least that long (a replay keeps the whole run's axis while it scrubs).
    """
    t_now = run.now if now is None else max(now, run.now)
    if run.ended_at is not None:
        t_now = run.ended_at if now is None else t_now
    lanes = _lanes(run, t_now)
    end = max([t_now, min_end, *(s.end for lane in lanes for s in lane.segments)])
    gaps, busy = _spans(lanes, end)
    broken = _breaks(gaps, busy)
    knots, scale, axis_end = _axis(end, broken, live=run.status == "running")
    x_of = _XMap(knots, scale)
    y = AXIS_H
    drawn: list[Lane] = []
    for lane in lanes:
        d = _draw_lane(lane, x_of, broken)
        d = Lane(
            d.step_id,
            d.status,
            d.status_words,
            d.policy,
            d.key,
            d.segments,
            d.drawn,
            d.rows_above,
            d.rows_below,
            y,
            d.note,
        )
        drawn.append(d)
        y += d.height
    right = max(
        [
            knots[-1][1],
            *(dr.label.right for lane in drawn for dr in lane.drawn if dr.label is not None),
        ]
    )
    return TimelineLayout(
        run_id=run.id,
        workflow_id=run.workflow_id,
        clock=run.clock,
        status=run.status,
        now=t_now,
        axis_end=axis_end,
        ticks=_ticks(knots, broken, scale),
        lanes=tuple(drawn),
        resumes=tuple(run.resumes),
        axis=knots,
        breaks=tuple(AxisBreak(a, b, x_of(a), x_of(b)) for a, b in broken),
        scale=scale,
        width=math.ceil(right + RIGHT_PAD),
        lanes_bottom=y,
    )


#: The server's header for a replayed response (IETF Idempotency-Key draft, Stripe).
REPLAY_HEADER = "idempotent-replayed"


def server_replayed(call: Call) -> bool:
    """Whether the server answered ``call`` with ``Idempotent-Replayed: true``.

    ``Call.response`` holds what the HTTP service recorded: ``{status, headers, data}``
    with the response headers (names as the server sent them, secrets redacted).
    """
    response = call.response
    headers = response.get("headers") if isinstance(response, dict) else None
    if not isinstance(headers, dict):
        return False
    return any(
        str(k).lower() == REPLAY_HEADER and str(v).strip().lower() == "true"
        for k, v in headers.items()
    )


def call_verdict(call: Call) -> str:
    """What became of ``call``, in words (spec §6.3: "replayed or not").

    ``reattached from the journal`` (the HTTP service returned the journaled response,
    nothing was sent, ``Call.replayed``), ``replayed by the server`` (the server
    answered ``Idempotent-Replayed: true``: it had already done this and did not do it
    again), ``sent fresh`` (any other response); without a response: ``no response
    (network error)``, ``effect unknown (ambiguous)`` or ``in flight``.
    """
    if call.replayed:
        return "reattached from the journal"
    if call.outcome == "response":
        return "replayed by the server" if server_replayed(call) else "sent fresh"
    return {
        "network-error": "no response (network error)",
        "ambiguous": "effect unknown (ambiguous)",
        "running": "in flight",
    }.get(call.outcome, call.outcome)


def error_text(name: str, message: str, line: int | None) -> str:
    """An attempt's error in one line: ``TypeError: boom @ line 7`` (spec §3.2)."""
    where = f" @ line {line}" if line is not None else " (line unknown)"
    return f"{name}: {message}{where}"
