"""A run's lanes: one per step, its attempts, waits and planned schedule as segments on
the time axis (spec §6.3).

``build_lanes`` reads the run's history (attempts, and the waits between them as the
engine scheduled them) and, for a run still going, appends what is still to come: a
live wait with its countdown, then the attempts the policy still allows, each after its
planned wait (spec §3.1). Segments hold times only; ``placement`` then draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..events import WaitScheduled
from ..model import Attempt, Run, StepRun
from ..outcomes import (
    FAILED,
    FAILED_CLOSED,
    INTERRUPTED,
    LIVE,
    NOT_RUN,
    PENDING,
    REATTACHED,
    RUNNING,
    SUCCEEDED,
    WAITING,
    StepStatus,
)
from ..policy import attempts_used
from .axis import format_time
from .faults import fault_kinds, injected_of
from .geometry import BAR_H, LANE_GAP, ROW_H, text_width
from .outcome_styles import PLANNED, outcome_style

SegmentKind = Literal["attempt", "wait", "planned", "planned-wait"]

#: spec §7's step statuses, in words for the lane header.
STEP_STATUS_WORDS: dict[StepStatus, str] = {
    SUCCEEDED: "succeeded",
    FAILED: "failed (last allowed attempt threw)",
    FAILED_CLOSED: "failed closed (not retried)",
    REATTACHED: "reattached (result from the journal)",
    NOT_RUN: "not run (an earlier step did not succeed)",
    PENDING: "pending",
    RUNNING: "running",
    WAITING: "waiting to retry",
}

#: What a lane without segments says, by step status.
LANE_NOTES: dict[StepStatus, str] = {
    NOT_RUN: "not run: an earlier step did not succeed",
    REATTACHED: "reattached: result from the journal, not run again",
    PENDING: "pending",
}


@dataclass(frozen=True)
class Segment:
    """One piece of a lane on the time axis: an attempt, a wait, or a planned one.

    ``number`` is the attempt's number; for a wait, the number of the attempt it
    follows. ``left`` is the countdown of a live wait (seconds still to wait), else None.
    ``short`` is the label used where ``label`` does not fit ("#4", "8s").
    ``injected`` names the faults injected into an attempt's calls (spec §10.2).
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
    injected: tuple[str, ...] = ()

    @property
    def is_bar(self) -> bool:
        """An attempt or a planned one, drawn as a bar; else a wait, drawn as a gap."""
        return self.kind in ("attempt", "planned")


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
    ``note`` is what a lane without segments says ("not run: …"). ``policy`` is the
    policy in words ("4 attempts · fixed 1s"); ``summary`` what the step's header says
    after its status: attempts used against allowed, then the schedule ("3 of 4
    attempts · fixed 1s"): ``count`` (None for a step that made no attempt: no count
    is shown then, spec §6.3), then ``waits``, the schedule in words. ``run_ref`` is
    the lane's run in a comparison (its place, ``"1"``, ``"2"``, …; ``compare``), empty
    in one run's timeline.
    """

    step_id: str
    status: str
    status_words: str
    policy: str
    used: int
    allowed: int
    waits: str
    key: str
    segments: tuple[Segment, ...]
    drawn: tuple[Drawn, ...] = ()
    rows_above: int = 0
    rows_below: int = 0
    y: float = 0.0
    note: str | None = None
    run_ref: str = ""

    @property
    def ref(self) -> str:
        """What the drawing and the details panel call the lane (``data-step``): the step
        id, or in a comparison ``run_ref/step_id``, so lanes of two runs with the same
        steps stay apart."""
        return f"{self.run_ref}/{self.step_id}" if self.run_ref else self.step_id

    @property
    def count(self) -> str | None:
        """``3 of 4 attempts``, or None for a step that made no attempt."""
        return attempts_used(self.used, self.allowed)

    @property
    def summary(self) -> str:
        """The header's words after the status: ``3 of 4 attempts · fixed 1s``."""
        return self.waits if self.count is None else f"{self.count} · {self.waits}"

    @property
    def bar_y(self) -> float:
        return self.y + self.rows_above * ROW_H

    @property
    def height(self) -> float:
        return (self.rows_above + self.rows_below) * ROW_H + BAR_H + LANE_GAP


def build_lanes(run: Run, now: float) -> list[Lane]:
    """One lane per step of ``run``, its segments in time order, not yet drawn.

    ``now`` is the current time on the run's clock: running attempts last until it and
    a live run's planned schedule starts no earlier.
    """
    waits = _scheduled_waits(run)
    lanes: list[Lane] = []
    earliest = now  # when the step before could end at the earliest
    live = run.status == RUNNING
    for sr in run.steps.values():
        segs = _history(sr, waits, now)
        if not (live and sr.status in LIVE):
            segs += _cut_wait(sr, waits, run)
        if live and sr.status in LIVE:
            end = _planned(sr, segs, now, earliest)
            earliest = now if end is None else max(now, end)
        lanes.append(_make_lane(sr, segs))
    return lanes


def _scheduled_waits(run: Run) -> dict[tuple[str, int], WaitScheduled]:
    return {(e.step_id, e.after_attempt): e for e in run.events if isinstance(e, WaitScheduled)}


def _attempt_segment(
    step_id: str,
    a_number: int,
    start: float,
    end: float,
    outcome: str,
    injected: tuple[str, ...] = (),
) -> Segment:
    label = outcome_style(outcome).label
    span = f"{format_time(start)} → {format_time(end)}" + (
        " (still running)" if outcome == RUNNING else ""
    )
    faults = f" · injected: {', '.join(injected)}" if injected else ""
    return Segment(
        "attempt",
        a_number,
        start,
        end,
        outcome,
        f"#{a_number} {label}",
        f"attempt {a_number} of {step_id} · {label} · {span}{faults}",
        short=f"#{a_number}",
        injected=injected,
    )


def _injected(a: Attempt) -> tuple[str, ...]:
    """The kinds of the faults injected into ``a``'s calls, each once (spec §10.2)."""
    described = (injected_of(c) for c in a.calls)
    return tuple(dict.fromkeys(k for d in described if d is not None for k in fault_kinds(d)))


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
        segs.append(_attempt_segment(sr.id, a.number, a.started_at, end, a.outcome, _injected(a)))
        if i + 1 < len(attempts):
            nxt = attempts[i + 1]
            sched = waits.get((sr.id, a.number))
            w_start = sched.at if sched is not None else end
            w_end = max(w_start, nxt.started_at)
            length = sched.seconds if sched is not None else w_end - w_start
            title = f"waited {format_time(w_end - w_start)} before attempt {nxt.number}"
            seg = _wait_segment("wait", a.number, w_start, w_end, length, title)
            if sched is None and a.outcome == INTERRUPTED:
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


def _cut_wait(sr: StepRun, waits: dict[tuple[str, int], WaitScheduled], run: Run) -> list[Segment]:
    """The wait after a finished step's last attempt, drawn to where it stopped: a run
    cancelled or interrupted during a wait (spec §3.2, §6.3) ends the step there, and
    the drawing shows how much of the wait had passed."""
    if not sr.attempts:
        return []
    last = max(sr.attempts, key=lambda a: a.number)
    sched = waits.get((sr.id, last.number))
    if sched is None:
        return []
    stop = run.ended_at if run.ended_at is not None else run.now
    end = max(sched.at, min(sched.due, stop))
    waited = format_time(end - sched.at)
    why = f"the run was {run.stopped}" if run.stopped is not None else "the run stopped"
    return [
        Segment(
            "wait",
            last.number,
            sched.at,
            end,
            "wait",
            f"wait {format_time(sched.seconds)}, cut at {waited}",
            f"waited {waited} of {format_time(sched.seconds)} before attempt"
            f" {last.number + 1}; {why} then, and attempt {last.number + 1} never started",
            short=f"cut at {waited}",
        )
    ]


def _planned(sr: StepRun, segs: list[Segment], now: float, earliest: float) -> float | None:
    """Append the planned schedule of a live step; return when its next attempt could
    end at the earliest (so a following pending step is planned from there), or None.

    A running attempt is expected to end no earlier than ``now``; a planned attempt is
    drawn at its planned start with no duration. Waits follow the policy (spec §3.1).
    """
    policy = sr.step.policy
    last = max(sr.attempts, key=lambda a: a.number) if sr.attempts else None
    if sr.status == WAITING and sr.wait_started_at is not None and sr.wait_due is not None:
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
    first_end: float | None = cursor if last is None or last.outcome != RUNNING else now
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
                PLANNED,
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
        used=len(sr.attempts),
        allowed=sr.step.policy.attempts,
        waits=sr.step.policy.describe_waits(),
        key=sr.idempotency_key,
        segments=tuple(segs),
        note=None if segs else LANE_NOTES.get(sr.status, STEP_STATUS_WORDS.get(sr.status)),
    )
