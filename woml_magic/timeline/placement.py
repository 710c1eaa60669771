"""Where a lane's bars and labels go on the track (spec §6.3: labels that do not fit a
bar go beside it).

Bars: every attempt starts exactly at ``x(start)``. An attempt is drawn at least
``MIN_BAR_W`` (3 px) wide so a 6 ms attempt is visible; the extra width comes out of
the gap after it and a bar stops ``BAR_CLEARANCE`` (1 px) before the next attempt of its
lane, so the minimum never moves a later start (it can shorten the drawn part of the
following wait by up to 3 px, the same for every wait after a similarly short attempt).

Labels go inside a bar when they fit, else beside it, else in label rows above or below
the lane; their boxes are estimated by ``text_width`` (an over-estimate) and never
overlap.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from .axis import Gap, XMap
from .geometry import (
    BAR_CLEARANCE,
    BAR_GAP,
    INSIDE_PAD,
    LABEL_GAP,
    LABEL_SLACK,
    MAX_ROWS_ABOVE,
    MAX_ROWS_BELOW,
    MIN_BAR_W,
    text_width,
)
from .lanes import Drawn, Label, Lane, Segment

Extent = tuple[float, float]


def draw_lane(lane: Lane, x_of: XMap, breaks: Sequence[Gap]) -> Lane:
    """``lane`` with its segments drawn: bars at their true x, then labels: inside,
    beside, or in label rows."""
    segs = lane.segments
    bars = [i for i, s in enumerate(segs) if s.is_bar]
    extents: list[Extent] = [(0.0, 0.0)] * len(segs)
    for j, i in enumerate(bars):
        s = segs[i]
        x0 = x_of(s.start)
        limit = x_of(segs[bars[j + 1]].start) - BAR_CLEARANCE if j + 1 < len(bars) else math.inf
        x1 = max(x_of(s.end), min(x0 + MIN_BAR_W, limit), x0 + 1.0)
        extents[i] = (x0, x1)
    prev_end = -math.inf
    for i, s in enumerate(segs):
        if s.is_bar:
            prev_end = extents[i][1]
        else:
            x0 = max(x_of(s.start), prev_end)
            extents[i] = (x0, max(x0, x_of(s.end)))
    # A break's zig-zag crosses the bar row: no label may sit on it.
    boxes = _Boxes(
        bars=[extents[i] for i in bars] + [(x_of(a), x_of(b)) for a, b in breaks],
        waits=[extents[i] for i, s in enumerate(segs) if not s.is_bar],
    )
    track = (x_of.x0, x_of.x1 + LABEL_SLACK)
    placed: dict[int, list[Extent]] = {}
    labels: list[Label | None] = []
    for i, s in enumerate(segs):
        label = _place_label(s, extents[i], boxes, placed, track)
        if label is not None:
            placed.setdefault(label.row, []).append((label.x, label.right))
        labels.append(label)
    rows = [lb.row for lb in labels if lb is not None]
    return dataclasses.replace(
        lane,
        drawn=tuple(
            Drawn(s, e[0], e[1], lb) for s, e, lb in zip(segs, extents, labels, strict=True)
        ),
        rows_above=-min([0, *rows]),
        rows_below=max([0, *rows]),
    )


@dataclasses.dataclass(frozen=True)
class _Boxes:
    """What a label in the bar row must respect: ``bars`` (attempts and axis breaks) it
    keeps clear of, ``waits`` it lies wholly inside or keeps clear of."""

    bars: Sequence[Extent]
    waits: Sequence[Extent]


def _clear(x0: float, x1: float, box: Extent) -> bool:
    return x1 + BAR_GAP <= box[0] or x0 >= box[1] + BAR_GAP


def _free(
    x0: float,
    x1: float,
    row: int,
    placed: dict[int, list[Extent]],
    boxes: _Boxes,
    own: Extent | None,
) -> bool:
    """Whether a label box ``x0``–``x1`` in ``row`` keeps clear of every placed label
    (``LABEL_GAP``) and, in the bar row, of every other bar (``BAR_GAP``), and lies
    inside or clear of every wait: a label beside a bar sits over the wait after it, and
    must not reach past the wait's end into the real-clock gap before the next attempt
    (spec §6.3: labels lie inside a bar or clear of it)."""
    if any(x1 + LABEL_GAP > a and x0 < b + LABEL_GAP for a, b in placed.get(row, [])):
        return False
    if row != 0:
        return True
    return all(_clear(x0, x1, b) for b in boxes.bars if b != own) and all(
        _clear(x0, x1, w) or (w[0] <= x0 and x1 <= w[1]) for w in boxes.waits
    )


def _candidates(
    seg: Segment,
    extent: Extent,
    text: str,
    rows: Sequence[int],
    track: Extent,
) -> list[tuple[float, int, bool]]:
    """Where ``text`` may go, best first: ``(x, row, inside)``."""
    x0, x1 = extent
    w = text_width(text)
    if not seg.is_bar:
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
    extent: Extent,
    boxes: _Boxes,
    placed: dict[int, list[Extent]],
    track: Extent,
) -> Label | None:
    """The first free place, in this order: the full label inside or beside the bar (or
    centred on a wait), in the nearest label row; then the short label ("#4", "8s")
    likewise; then the full label in the further rows; else no label (the tooltip and
    the details still say it all)."""
    above = [-r for r in range(1, MAX_ROWS_ABOVE + 1)]
    below = list(range(1, MAX_ROWS_BELOW + 1))
    near, far = (
        (above[:1] + below[:1], above[1:] + below[1:])
        if seg.is_bar
        else (below[:1] + above[:1], below[1:] + above[1:])
    )
    short = seg.short if seg.short and seg.short != seg.label else None
    tries = [(seg.label, near)] + ([(short, near + far)] if short else []) + [(seg.label, far)]
    for i, (text, rows) in enumerate(tries):
        for x, row, inside in _candidates(seg, extent, text, rows, track):
            if i == len(tries) - 1 and row == 0:
                continue  # tried already
            if x >= track[0] and _free(
                x, x + text_width(text), row, placed, boxes, extent if seg.is_bar else None
            ):
                return Label(text, x, row, inside)
    return None
