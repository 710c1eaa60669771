"""The timeline's time axis: true to time, with breaks and ticks (spec §6.3).

Time maps to x by a piecewise-linear function whose knots are ``TimelineLayout.axis``:

- one scale (px per second) for the whole run, so a wait's drawn length grows with
  the wait and equal waits are drawn equal;
- except for **axis breaks**: a gap in which no attempt runs, so long that drawing it
  to scale would crush the rest, is drawn ``BREAK_W`` wide with a zig-zag and its
  length (``≈ 24h``). The rule, in ``axis_breaks``: sort the gaps longest first and
  break the *k* longest for the largest *k* such that the *k*-th is longer than
  ``BREAK_RATIO`` (10) × the longest span left to scale (a gap or a stretch in which
  attempts run), that span taken as at least ``BREAK_FLOOR`` (5 s). So nothing under
  50 s is ever broken, the retry schedule of spec §3.1 (waits up to 30 s) is drawn to
  scale, and a 1 h and a 24 h wait next to 1 s ones are both breaks. The time left to
  scale is then drawn as if at least ``BREAK_FLOOR`` long, so a few milliseconds of
  attempts around a break are not stretched across the whole track;
- every attempt starts exactly at ``x(start)`` (how a bar's width is drawn is
  ``placement``'s business).

A finished run ends at the track's end (``TRACK_W``); a live run's time to scale is
rounded up (``nice_axis``) so the scale changes only when the run outgrows it. Ticks
fall on round times (``tick_step``) and are labelled by ``format_time``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .geometry import BREAK_W, LABEL_GAP, LABEL_W, TICK_MIN_PX, TRACK_W, text_width

BREAK_RATIO = 10.0
BREAK_FLOOR = 5.0  # seconds
#: The most tick candidates one piece of the axis can hold (see ``axis_ticks``).
_MAX_TICKS_PER_PIECE = math.ceil(TRACK_W / TICK_MIN_PX) + 2

Knots = Sequence[tuple[float, float]]
Gap = tuple[float, float]


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

    An axis break's label is ``"≈ " + format_time(length)``. Total, whatever it is
    given (a ``Run`` need not come from a sound journal): ±∞ is ``∞s``/``-∞s`` and NaN
    ``?s``; a time of an hour or more never takes the millisecond path, whose product
    would overflow for the largest floats.
    """
    if math.isnan(seconds):
        return "?s"
    if seconds < 0:
        return "-" + format_time(-seconds)
    if math.isinf(seconds):
        return "∞s"
    if seconds == 0:
        return "0s"
    if seconds >= 3600:
        return _hours(seconds)
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
    return _hours(seconds)


def _hours(seconds: float) -> str:
    whole = round(seconds)
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return " ".join([f"{h}h"] + ([f"{m}m"] if m else []) + ([f"{s}s"] if s else []))


def _trim(number: str) -> str:
    return number.rstrip("0").rstrip(".") if "." in number else number


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


def interpolate(knots: Knots, scale: float, t: float) -> float:
    """The x of time ``t``: linear between ``knots``, ``scale`` px/s beyond them."""
    times = [k[0] for k in knots]
    i = bisect.bisect_right(times, t)
    if i == 0:
        return knots[0][1] + (t - knots[0][0]) * scale
    if i == len(knots):
        return knots[-1][1] + (t - knots[-1][0]) * scale
    (ta, xa), (tb, xb) = knots[i - 1], knots[i]
    return xa if tb <= ta else xa + (t - ta) * (xb - xa) / (tb - ta)


class XMap:
    """The time→x map of ``knots`` as a function, with the track's ends ``x0``, ``x1``."""

    def __init__(self, knots: Knots, scale: float) -> None:
        self.knots, self.scale = knots, scale
        self.x0, self.x1 = knots[0][1], knots[-1][1]

    def __call__(self, t: float) -> float:
        return interpolate(self.knots, self.scale, t)


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


def idle_gaps(busy: Iterable[Gap], end: float) -> tuple[list[Gap], list[float]]:
    """The idle gaps up to ``end`` (no ``busy`` interval runs in them: no attempt runs in
    any lane) and the lengths of the busy spans between them."""
    gaps: list[Gap] = []
    lengths: list[float] = []
    cursor = 0.0
    span_start: float | None = None
    for a, b in sorted(busy):
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


def axis_breaks(gaps: Sequence[Gap], busy: Sequence[float]) -> list[Gap]:
    """The gaps drawn as axis breaks (the rule is in the module docstring)."""
    ranked = sorted(gaps, key=lambda g: g[1] - g[0], reverse=True)
    lengths = [b - a for a, b in ranked]
    for k in range(len(ranked), 0, -1):
        rest = max([*lengths[k:], *busy, 0.0])
        if lengths[k - 1] > BREAK_RATIO * max(rest, BREAK_FLOOR):
            return sorted(ranked[:k])
    return []


def axis_knots(
    end: float, broken: Sequence[Gap], live: bool
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


def axis_ticks(knots: Knots, broken: Sequence[Gap], scale: float) -> tuple[float, ...]:
    """Round times whose labels do not collide with each other or a break's label."""
    step = tick_step(TICK_MIN_PX / scale)
    starts = {a for a, _ in broken}
    taken: list[tuple[float, float]] = [
        (interpolate(knots, scale, a) - 2, interpolate(knots, scale, b) + 2) for a, b in broken
    ]
    out: list[float] = []
    pieces = [
        (knots[i][0], knots[i + 1][0]) for i in range(len(knots) - 1) if knots[i][0] not in starts
    ]
    for t0, t1 in pieces:
        k = math.ceil(t0 / step - 1e-9)
        # A piece is at most the track wide and ticks are at least TICK_MIN_PX apart, so
        # this many candidates cover it; the bound also ends the loop where floats are
        # too coarse for the step to advance (a time near 1e300 plus 1 s is itself).
        for _ in range(_MAX_TICKS_PER_PIECE):
            if k * step > t1 + 1e-9:
                break
            t = round(k * step, 9)
            x = interpolate(knots, scale, t)
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
