"""The timeline's geometry and words, computed once per render (spec §6.3).

``compute_layout(run)`` turns a ``Run`` into lanes of segments on one shared time axis:
attempts (coloured and labelled by outcome), waits (labelled "wait 2s", with a countdown
while live), and, for a run still going, the planned schedule of attempts not yet run.
The plain-text table, the SVG and the widget all draw this one layout, so they never
disagree about what happened when.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..events import WaitScheduled
from ..model import Run, StepRun
from ..policy import format_duration

SegmentKind = Literal["attempt", "wait", "planned", "planned-wait"]


@dataclass(frozen=True)
class OutcomeStyle:
    """How one outcome looks: a text label (never colour alone, spec §6.3) and a colour.

    ``pattern`` is a second non-colour cue for the SVG: ``solid`` for success and
    running, ``hatch`` for failures, ``dashed`` for planned attempts.
    """

    label: str
    color: str
    pattern: Literal["solid", "hatch", "dashed"]
    meaning: str


#: spec §3.2's outcomes plus the live states; reds and purples differ for each failure.
OUTCOMES: dict[str, OutcomeStyle] = {
    "succeeded": OutcomeStyle("succeeded", "#2e7d32", "solid", "the script returned a result"),
    "threw": OutcomeStyle("threw", "#ef6c00", "hatch", "the script threw; retried if allowed"),
    "timeout": OutcomeStyle("timeout", "#c62828", "hatch", "ran past the step timeout"),
    "invalid-json": OutcomeStyle("invalid-json", "#ad1457", "hatch", "result is not JSON"),
    "oversized": OutcomeStyle("oversized", "#7b1fa2", "hatch", "result too large"),
    "crash": OutcomeStyle("crash", "#8e0000", "hatch", "the script worker or host failed"),
    "interrupted": OutcomeStyle("interrupted", "#4527a0", "hatch", "interrupted; effect unknown"),
    "cancelled": OutcomeStyle("cancelled", "#6d4c41", "hatch", "cancelled by the user"),
    "ambiguous": OutcomeStyle("ambiguous", "#d81b60", "hatch", "a call's effect is unknown"),
    "running": OutcomeStyle("running", "#1565c0", "solid", "running now"),
    "planned": OutcomeStyle("planned", "#9e9e9e", "dashed", "not yet run"),
}

#: Colour of wait gaps (a neutral tone: a wait is not an outcome).
WAIT_COLOR = "#eceff1"

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

_LIVE_STEP = frozenset({"pending", "running", "waiting"})


def outcome_style(outcome: str) -> OutcomeStyle:
    """The style of ``outcome``; an unknown outcome keeps its own name as its label."""
    return OUTCOMES.get(outcome) or OutcomeStyle(outcome, "#616161", "hatch", outcome)


def seconds(t: float) -> str:
    """A time on the run's clock in seconds, to the millisecond: ``0s``, ``1.25s``, ``90s``."""
    text = f"{t:.3f}".rstrip("0").rstrip(".")
    return f"{'0' if text in ('', '-0') else text}s"


@dataclass(frozen=True)
class Segment:
    """One piece of a lane on the time axis: an attempt, a wait, or a planned one.

    ``number`` is the attempt's number; for a wait, the number of the attempt it
    follows. ``left`` is the countdown of a live wait (seconds still to wait), else None.
    """

    kind: SegmentKind
    number: int
    start: float
    end: float
    outcome: str
    label: str
    tooltip: str
    left: float | None = None

    @property
    def slot(self) -> tuple[str, int]:
        """A stable identity across renders: a planned attempt becomes the real one."""
        return ("attempt" if self.kind in ("attempt", "planned") else "wait", self.number)


@dataclass(frozen=True)
class Lane:
    """One step: its words (spec §6.3) and its segments in time order."""

    step_id: str
    status: str
    status_words: str
    policy: str
    key: str
    segments: tuple[Segment, ...]


@dataclass(frozen=True)
class TimelineLayout:
    """Everything a renderer draws: header facts, the shared axis and the lanes."""

    run_id: str
    workflow_id: str
    clock: str
    status: str
    now: float
    axis_end: float
    ticks: tuple[float, ...]
    lanes: tuple[Lane, ...]
    resumes: tuple[float, ...]


def nice_axis(end: float, target_ticks: int = 6) -> tuple[float, tuple[float, ...]]:
    """A round axis end ≥ ``end`` and evenly spaced ticks at 1, 2 or 5 × 10ⁿ seconds.

    Rounding the end up means the scale changes only when the run outgrows it, so a
    live widget rarely has to resize every bar.
    """
    end = max(end, 0.001)
    raw = end / target_ticks
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    n = max(1, math.ceil(end / step - 1e-9))
    return n * step, tuple(round(i * step, 9) for i in range(n + 1))


def _scheduled_waits(run: Run) -> dict[tuple[str, int], WaitScheduled]:
    return {(e.step_id, e.after_attempt): e for e in run.events if isinstance(e, WaitScheduled)}


def _attempt_segment(
    step_id: str, a_number: int, start: float, end: float, outcome: str
) -> Segment:
    label = outcome_style(outcome).label
    span = f"{seconds(start)} → {seconds(end)}" + (
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
    )


def _lane(run: Run, sr: StepRun, waits: dict[tuple[str, int], WaitScheduled], now: float) -> Lane:
    policy = sr.step.policy
    segs: list[Segment] = []
    attempts = sorted(sr.attempts, key=lambda a: a.number)
    for i, a in enumerate(attempts):
        end = a.ended_at if a.ended_at is not None else max(now, a.started_at)
        segs.append(_attempt_segment(sr.id, a.number, a.started_at, end, a.outcome))
        if i + 1 < len(attempts):
            nxt = attempts[i + 1]
            sched = waits.get((sr.id, a.number))
            length = sched.seconds if sched is not None else nxt.started_at - end
            w_start = sched.at if sched is not None else end
            label = f"wait {format_duration(length)}"
            title = f"waited {seconds(nxt.started_at - w_start)} before attempt {nxt.number}"
            if sched is None and a.outcome == "interrupted":
                # spec §5.3: --retry-interrupted starts the next attempt at once; the gap
                # is the time until the run was resumed, not a scheduled wait.
                label = "resumed"
                title = f"resumed {seconds(nxt.started_at - w_start)} later; no wait"
            segs.append(
                Segment("wait", a.number, w_start, max(w_start, nxt.started_at), "wait", label,
                        title)
            )
    planned_live = run.status == "running" and sr.status in _LIVE_STEP
    if not planned_live:
        return _make_lane(sr, segs)
    last = attempts[-1] if attempts else None
    if sr.status == "waiting" and sr.wait_started_at is not None and sr.wait_due is not None:
        after = last.number if last is not None else 0
        length = sr.wait_due - sr.wait_started_at
        left = max(0.0, sr.wait_due - now)
        segs.append(
            Segment(
                "wait",
                after,
                sr.wait_started_at,
                sr.wait_due,
                "wait",
                f"wait {left:.1f}s left",
                f"waiting {format_duration(length)} before attempt {after + 1}, "
                f"due at {seconds(sr.wait_due)}",
                left=left,
            )
        )
        cursor, next_number = sr.wait_due, after + 1
    else:
        next_number = (last.number + 1) if last is not None else 1
        cursor = max(now, segs[-1].end) if segs else now
    for k in range(next_number, policy.attempts + 1):
        if k > 1 and not (segs and segs[-1].kind == "wait"):
            gap = policy.wait(k - 1).total_seconds()
            segs.append(
                Segment(
                    "planned-wait",
                    k - 1,
                    cursor,
                    cursor + gap,
                    "wait",
                    f"wait {format_duration(gap)}",
                    f"planned wait of {format_duration(gap)} if attempt {k - 1} throws",
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
                f"attempt {k} of {sr.id} · planned, not yet run",
            )
        )
    return _make_lane(sr, segs)


def _make_lane(sr: StepRun, segs: Sequence[Segment]) -> Lane:
    return Lane(
        step_id=sr.id,
        status=sr.status,
        status_words=STEP_STATUS_WORDS.get(sr.status, sr.status)
        + ("" if sr.reason is None else f": {sr.reason}"),
        policy=sr.step.policy.describe(),
        key=sr.idempotency_key,
        segments=tuple(segs),
    )


def compute_layout(run: Run, *, now: float | None = None, min_end: float = 0.0) -> TimelineLayout:
    """Lay ``run`` out on one time axis (spec §6.3).

    ``now`` is the current time on the run's clock (default ``run.now``): running
    attempts are drawn up to it and live waits count down from it. ``min_end`` keeps
    the axis at least that long (a replay keeps the whole run's axis while it scrubs).
    """
    t_now = run.now if now is None else max(now, run.now)
    if run.ended_at is not None:
        t_now = run.ended_at if now is None else t_now
    waits = _scheduled_waits(run)
    lanes = tuple(_lane(run, sr, waits, t_now) for sr in run.steps.values())
    end = max([t_now, min_end, *(s.end for lane in lanes for s in lane.segments)])
    axis_end, ticks = nice_axis(end)
    return TimelineLayout(
        run_id=run.id,
        workflow_id=run.workflow_id,
        clock=run.clock,
        status=run.status,
        now=t_now,
        axis_end=axis_end,
        ticks=ticks,
        lanes=lanes,
        resumes=tuple(run.resumes),
    )


def place(
    segments: Sequence[Segment], *, scale: float, min_width: Sequence[float]
) -> list[tuple[float, float]]:
    """Pixel ``(x, width)`` of each segment: proportional to time, at least ``min_width``.

    ``x = start × scale`` unless an earlier segment's minimum width pushed past it, and
    the segment ends at ``end × scale`` if that still leaves it ``min_width``: a lane
    never overlaps itself, and after a push it snaps back to the axis at the next
    segment end it can (usually the end of a wait).
    """
    out: list[tuple[float, float]] = []
    cursor = 0.0
    for seg, least in zip(segments, min_width, strict=True):
        x = max(seg.start * scale, cursor)
        w = max(seg.end * scale - x, least)
        out.append((x, w))
        cursor = x + w
    return out


def error_text(name: str, message: str, line: int | None) -> str:
    """An attempt's error in one line: ``TypeError: boom @ line 7`` (spec §3.2)."""
    where = f" @ line {line}" if line is not None else " (line unknown)"
    return f"{name}: {message}{where}"
