"""The timeline's drawing: lanes on the true-to-time axis as inline SVG (spec §6.3).

``render_svg(layout)`` writes ``svg.woml-svg[data-axis]`` (the DOM is described in
``html``'s docstring): ``g.woml-axis`` (ticks), one ``g.woml-break`` per axis break,
resume and "now" markers, one ``g.woml-lane`` per step whose ``g.woml-seg`` children
are its segments, then ``g.woml-legend``. Every element carries presentation
attributes (``fill=…``, the ``theme`` fallbacks) so the SVG still reads where styles are
stripped; colour is never the only cue: bars also carry a pattern (``outcome_styles``)
and their label the outcome word.
"""

from __future__ import annotations

import json
import math

from ..outcomes import RUNNING
from .axis import format_time
from .geometry import (
    AXIS_H,
    BAND_H,
    BAR_H,
    FONT_SIZE,
    LABEL_GAP,
    LABEL_W,
    LANE_GAP,
    MARK_BASELINE,
    ROW_H,
    TICK_BASELINE,
    text_width,
)
from .lanes import Drawn, Label, Lane
from .layout import RunBand, TimelineLayout
from .markup import data_time, esc
from .outcome_styles import BAR_TEXT, OUTCOME_STYLES, outcome_style
from .theme import GRID, TEXT, TEXT_MUTED

LEGEND_ROW_H = 20.0


def _num(v: float) -> str:
    return f"{v:.1f}"


def _row_baseline(lane: Lane, row: int) -> float:
    if row < 0:
        return lane.bar_y + row * ROW_H + ROW_H - 3
    if row == 0:
        return lane.bar_y + BAR_H / 2 + 4
    return lane.bar_y + BAR_H + (row - 1) * ROW_H + 12


def _text(lane: Lane, d: Drawn) -> str:
    lb = d.label
    if lb is None:
        return ""
    cls, fill = ("woml-label woml-in", BAR_TEXT) if lb.inside else ("woml-label", TEXT)
    plate = ""
    if lb.inside:
        # A solid plate of the bar's own fill under the text: the pattern's light lines
        # must not lower the text's contrast (WCAG AA holds for the fill itself).
        plate = (
            f'<rect class="woml-plate" x="{_num(lb.x - 2)}" y="{_num(lane.bar_y + 3)}"'
            f' width="{_num(lb.width + 4)}" height="{BAR_H - 6}"'
            f' fill="{outcome_style(d.seg.outcome).color}"/>'
        )
    return (
        f'{plate}<text class="{cls}" x="{_num(lb.x)}" y="{_num(_row_baseline(lane, lb.row))}"'
        f' data-anchor="{_num(label_anchor(lb, d.x0, d.x1))}"'
        f' fill="{fill}" font-size="{FONT_SIZE}">{esc(lb.text)}</text>'
    )


def label_anchor(lb: Label, x0: float, x1: float) -> float:
    """Where a label hangs on its segment ``x0``–``x1`` (``data-anchor``: what the
    script's zoom keeps it by, spec §6.3): the bar's end for a label right of it, its
    start for one left of it or starting with it, its end for one ending with it, else
    the same share of the way along as the label's middle."""
    left, right = lb.x, lb.x + lb.width
    if left >= x1 - 0.5:
        return x1
    if right <= x0 + 0.5 or not x1 > x0 or abs(left - x0) <= 0.5:
        return x0
    if abs(right - x1) <= 0.5:
        return x1
    share = min(1.0, max(0.0, ((left + right) / 2 - x0) / (x1 - x0)))
    return x0 + share * (x1 - x0)


def _pattern_fill(rid: str, pattern: str) -> str | None:
    return {"stripes": f"url(#{rid}-stripes)", "cross": f"url(#{rid}-cross)"}.get(pattern)


def _segment(rid: str, lane: Lane, d: Drawn) -> str:
    seg = d.seg
    y = lane.bar_y
    w = max(d.x1 - d.x0, 0.0)
    data = (
        f'data-step="{esc(lane.ref)}" data-n="{seg.number}" data-t0="{data_time(seg.start)}"'
        f' data-t1="{data_time(seg.end)}" data-x0="{_num(d.x0)}" data-x1="{_num(d.x1)}"'
    )
    title = f"<title>{esc(seg.tooltip)}</title>"
    if not seg.is_bar:
        ly = y + BAR_H - 2
        dash = ' stroke-dasharray="3 3"' if seg.kind == "planned-wait" else ""
        shape = (
            f'<rect class="woml-bar woml-wait-bar" x="{_num(d.x0)}" y="{_num(y)}"'
            f' width="{_num(w)}" height="{BAR_H}" fill="transparent"/>'
            f'<line class="woml-wait-line" x1="{_num(d.x0)}" y1="{_num(ly)}" x2="{_num(d.x1)}"'
            f' y2="{_num(ly)}" stroke="{TEXT_MUTED}" stroke-width="2"{dash}/>'
            f'<line class="woml-wait-line" x1="{_num(d.x1)}" y1="{_num(ly - 5)}"'
            f' x2="{_num(d.x1)}" y2="{_num(ly + 2)}" stroke="{TEXT_MUTED}"/>'
        )
        return f'<g class="woml-seg woml-{seg.kind}" {data}>{title}{shape}{_text(lane, d)}</g>'
    style = outcome_style(seg.outcome)
    box = f'x="{_num(d.x0)}" y="{_num(y)}" width="{_num(w)}" height="{BAR_H}"'
    if seg.kind == "planned":
        shape = (
            f'<rect class="woml-bar" {box} rx="2" fill="none" stroke="{TEXT_MUTED}"'
            ' stroke-dasharray="3 2"/>'
        )
        verb = "planned, not yet run"
    else:
        shape = f'<rect class="woml-bar" {box} rx="2" fill="{style.color}"/>'
        pattern = _pattern_fill(rid, style.pattern)
        if pattern is not None:
            shape += f'<rect class="woml-pattern" {box} rx="2" fill="{pattern}"/>'
        verb = style.label
    aria = f"attempt {seg.number} of {lane.step_id}: {verb}"
    marked = ""
    if seg.injected:
        aria += f" (injected: {', '.join(seg.injected)})"
        marked = " woml-injected"
    return (
        f'<g class="woml-seg woml-{seg.kind} woml-outcome-{esc(style.label)}{marked}" {data}'
        f' tabindex="0" role="button" aria-label="{esc(aria)}">'
        f"{title}{shape}{_text(lane, d)}</g>"
    )


def _fitted(text: str, room: float, *, bold: bool = False) -> str:
    """``text`` at ``FONT_SIZE``, cut to ``room`` px with an ellipsis if it is wider."""
    if text_width(text, bold=bold) <= room:
        return text
    room -= text_width("…", bold=bold)
    cut, used = 0, 0.0
    for c in text:
        used += text_width(c, bold=bold)
        if used > room:
            break
        cut += 1
    return text[: max(cut, 1)] + "…"


def _step_column(lane: Lane) -> str:
    shown = _fitted(lane.step_id, LABEL_W - 12, bold=True)
    status = lane.status + (f" · {lane.used} of {lane.allowed}" if lane.used else "")
    said = _fitted(status, LABEL_W - 8)
    return (
        f'<text class="woml-step-id" x="6" y="{_num(lane.bar_y + 7)}" font-size="{FONT_SIZE}"'
        f' font-weight="bold" fill="{TEXT}"><title>{esc(lane.step_id)}</title>{esc(shown)}</text>'
        f'<text class="woml-muted" x="6" y="{_num(lane.bar_y + 23)}" font-size="{FONT_SIZE}"'
        f' fill="{TEXT_MUTED}">'
        + (f"<title>{esc(status)}</title>" if said != status else "")
        + f"{esc(said)}</text>"
    )


def _lane_svg(rid: str, lane: Lane, track_x0: float) -> str:
    parts = [_step_column(lane)]
    if lane.note is not None:
        parts.append(
            f'<text class="woml-note woml-muted" x="{_num(track_x0 + 4)}"'
            f' y="{_num(lane.bar_y + 14)}" font-size="{FONT_SIZE}" font-style="italic"'
            f' fill="{TEXT_MUTED}">{esc(lane.note)}</text>'
        )
    # Waits first: SVG paints in document order, so an attempt's label drawn beside its
    # bar (over the next wait) stays on top and clicks on it reach the attempt.
    waits = [d for d in lane.drawn if not d.seg.is_bar]
    bars = [d for d in lane.drawn if d.seg.is_bar]
    parts += [_segment(rid, lane, d) for d in (*waits, *bars)]
    return f'<g class="woml-lane" data-step="{esc(lane.ref)}">{"".join(parts)}</g>'


def _band_svg(band: RunBand, width: float) -> str:
    """A comparison's row over one run's lanes (``compare``): the run's label in bold,
    then its words, muted, cut to the drawing's width; a rule across it above. It stays
    put while the track zooms (it is not a lane)."""
    label = _fitted(band.label, width / 2, bold=True)
    room = width - 12 - text_width(label + " · ", bold=True)
    words = _fitted(band.words, max(room, 40.0))
    y = band.y + BAND_H - 8
    return (
        f'<g class="woml-run" data-run="{esc(band.ref)}">'
        f'<line class="woml-grid" x1="0" y1="{_num(band.y + 1)}" x2="100%"'
        f' y2="{_num(band.y + 1)}" stroke="{GRID}"/>'
        f'<text class="woml-run-label woml-label" x="6" y="{_num(y)}" font-size="{FONT_SIZE}"'
        f' fill="{TEXT}"><tspan font-weight="bold">{esc(label)}</tspan>'
        f'<tspan class="woml-muted" fill="{TEXT_MUTED}"> · {esc(words)}</tspan>'
        "<title>" + esc(f"{band.label} · {band.words}") + "</title></text></g>"
    )


#: What a comparison's axis says in its corner: its times are each run's own.
COMPARE_AXIS = "t from each run's start"


def _swatch(rid: str, name: str, x: float, y: float) -> str:
    style = OUTCOME_STYLES[name]
    box = f'x="{_num(x)}" y="{_num(y)}" width="16" height="12"'
    if style.pattern == "dashed":
        return (
            f'<rect class="woml-planned-swatch" {box} rx="2" fill="none" stroke="{TEXT_MUTED}"'
            ' stroke-dasharray="3 2"/>'
        )
    out = f'<rect {box} rx="2" fill="{style.color}"/>'
    pattern = _pattern_fill(rid, style.pattern)
    if pattern is not None:
        out += f'<rect {box} rx="2" fill="{pattern}"/>'
    return out


def legend_entries(layout: TimelineLayout) -> list[str]:
    """The legend's words: each outcome drawn, then waits and axis breaks if any."""
    present = {d.seg.outcome for lane in layout.lanes for d in lane.drawn}
    names = [n for n in OUTCOME_STYLES if n in present]
    extra = []
    if "wait" in present:
        extra.append("wait")
    if layout.breaks:
        extra.append("break")
    return names + extra


def _legend(rid: str, layout: TimelineLayout, y0: float) -> tuple[str, float]:
    x, y = 6.0, y0
    parts = []
    for name in legend_entries(layout):
        if name == "wait":
            word = "wait (gap before a retry)"
        elif name == "break":
            word = "≈ axis break (long gap, not to scale)"
        else:
            word = OUTCOME_STYLES[name].label
        w = 16 + 4 + text_width(word) + 14
        if x + w > layout.width and x > 6:
            x, y = 6.0, y + LEGEND_ROW_H
        if name == "wait":
            sw = (
                f'<line class="woml-wait-line" x1="{_num(x)}" y1="{_num(y + 10)}"'
                f' x2="{_num(x + 16)}" y2="{_num(y + 10)}" stroke="{TEXT_MUTED}"'
                ' stroke-width="1.5"/>'
            )
        elif name == "break":
            sw = _zigzag(x + 8, y, y + 12)
        else:
            sw = _swatch(rid, name, x, y)
        parts.append(
            f'<g class="woml-legend-entry" data-kind="{name}">{sw}<text class="woml-label"'
            f' x="{_num(x + 20)}" y="{_num(y + 10)}" fill="{TEXT}" font-size="{FONT_SIZE}">'
            f"{esc(word)}</text></g>"
        )
        x += w
    return f'<g class="woml-legend">{"".join(parts)}</g>', y + LEGEND_ROW_H


def _zigzag(x: float, y0: float, y1: float) -> str:
    pts, y, k = [], y0, 0
    while y < y1:
        pts.append(f"{_num(x + (3 if k % 2 else -3))},{_num(y)}")
        y += 4
        k += 1
    pts.append(f"{_num(x)},{_num(y1)}")
    return (
        f'<polyline class="woml-zigzag" points="{" ".join(pts)}" fill="none"'
        f' stroke="{TEXT_MUTED}" stroke-width="1.5"/>'
    )


def _defs(rid: str) -> str:
    stripes = (
        f'<pattern id="{rid}-stripes" width="6" height="6" patternUnits="userSpaceOnUse"'
        ' patternTransform="rotate(45)"><rect width="2" height="6" fill="#ffffff"'
        ' fill-opacity="0.35"/></pattern>'
    )
    cross = (
        f'<pattern id="{rid}-cross" width="6" height="6" patternUnits="userSpaceOnUse"'
        ' patternTransform="rotate(45)"><rect width="2" height="6" fill="#ffffff"'
        ' fill-opacity="0.35"/><rect width="6" height="2" fill="#ffffff"'
        ' fill-opacity="0.35"/></pattern>'
    )
    return f"<defs>{stripes}{cross}</defs>"


def render_svg(layout: TimelineLayout, rid: str = "woml-tl") -> str:
    """The lanes on the true-to-time axis, with ticks, axis breaks, resume and "now"
    markers, and a legend. ``rid`` prefixes the ids of the SVG's patterns."""
    head, lanes, tail = svg_parts(layout, rid)
    return head + "".join(lanes) + tail


def svg_parts(layout: TimelineLayout, rid: str = "woml-tl") -> tuple[str, list[str], str]:
    """``render_svg``'s markup in three parts: everything before the lanes, each lane's
    ``g.woml-lane`` (one per ``layout.lanes``, in order), and the legend with the end
    tag (``picture.drawing_data`` keeps a big run's lanes apart, for the script to
    build the ones in view)."""
    bottom = layout.lanes_bottom - LANE_GAP / 2
    legend, height = _legend(rid, layout, layout.lanes_bottom + 4)
    width = layout.width
    knots = json.dumps([[round(t, 6), round(x, 2)] for t, x in layout.axis])
    # role "group", not "img": an image's children are hidden from assistive technology,
    # and the attempts are buttons.
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="woml-svg" width="{width:.0f}"'
        f' height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="group"'
        f' aria-label="{esc(layout.title)}" data-axis="{esc(knots)}"'
        f' font-family="system-ui, sans-serif" font-size="{FONT_SIZE}">',
        f"<title>{esc(layout.title)}</title>",
        _defs(rid),
    ]
    axis = ['<g class="woml-axis">']
    for t in layout.ticks:
        x = layout.x(t)
        axis.append(
            f'<line class="woml-grid" x1="{_num(x)}" y1="{AXIS_H - 6}" x2="{_num(x)}"'
            f' y2="{_num(bottom)}" stroke="{GRID}"/>'
            f'<text class="woml-tick woml-muted" x="{_num(x)}" y="{TICK_BASELINE}"'
            f' font-size="{FONT_SIZE}" text-anchor="middle" fill="{TEXT_MUTED}">'
            f"{esc(format_time(t))}</text>"
        )
    axis.append("</g>")
    parts += axis
    if layout.bands:
        parts.append(
            f'<text class="woml-axis-note woml-muted" x="6" y="{MARK_BASELINE}"'
            f' font-size="{FONT_SIZE}" fill="{TEXT_MUTED}">{esc(COMPARE_AXIS)}</text>'
        )
        parts += [_band_svg(band, width) for band in layout.bands]
    for b in layout.breaks:
        mid = (b.x0 + b.x1) / 2
        # Two zig-zags across each lane's bar row and under the label on the axis; label
        # rows stay free for labels.
        bands = [(lane.bar_y - 2, lane.bar_y + BAR_H + 2) for lane in layout.lanes]
        bands.append((AXIS_H - 8, AXIS_H - 2))
        zigzags = "".join(_zigzag(mid + dx, y0, y1) for y0, y1 in bands for dx in (-5, 5))
        parts.append(
            f'<g class="woml-break" data-t0="{data_time(b.t0)}" data-t1="{data_time(b.t1)}"'
            f' data-x0="{_num(b.x0)}" data-x1="{_num(b.x1)}">'
            f"<title>{esc(format_time(b.t1 - b.t0))} not drawn to scale</title>{zigzags}"
            f'<text class="woml-label" x="{_num(mid)}" y="{TICK_BASELINE}" font-size="{FONT_SIZE}"'
            f' text-anchor="middle" fill="{TEXT}">{esc(b.label)}</text></g>'
        )
    marks = [(t, "resumed") for t in layout.resumes]
    if layout.status == RUNNING:
        marks.append((layout.now, "now"))
    free_from = -math.inf  # where the last mark's word ends
    for t, word in sorted(marks):
        x = layout.x(t)
        w = text_width(word)
        # The word right of its line, else left of it at the SVG's edge; a mark whose
        # word would overlap the previous one keeps its line and says it in its title.
        at, anchor = (x + 3, "start") if x + 3 + w <= width else (x - 3, "end")
        left = at if anchor == "start" else at - w
        text = ""
        if left >= free_from:
            free_from = left + w + LABEL_GAP
            text = (
                f'<text class="woml-label" x="{_num(at)}" y="{MARK_BASELINE}"'
                f' font-size="{FONT_SIZE}" text-anchor="{anchor}" fill="{TEXT}">{word}</text>'
            )
        parts.append(
            f'<g class="woml-mark woml-mark-{word}" data-t="{data_time(t)}"><title>{word} at'
            f' {esc(format_time(t))}</title><line x1="{_num(x)}"'
            f' y1="{AXIS_H - 4}" x2="{_num(x)}" y2="{_num(bottom)}" stroke="{TEXT_MUTED}"'
            f' stroke-dasharray="2 2"/>{text}</g>'
        )
    lanes = [_lane_svg(rid, lane, layout.track_x0) for lane in layout.lanes]
    return "".join(parts), lanes, legend + "</svg>"
