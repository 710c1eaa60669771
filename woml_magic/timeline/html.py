"""The timeline as self-contained HTML with inline SVG (spec §6.3).

For front ends without widgets (nbconvert, GitHub, a saved notebook), and the DOM that
the live widget's JavaScript brings to life (it appends its ``<script>``; this module
writes none). No external assets, no links. The output is well-formed XML:

``div.woml-timeline#woml-tl-<hex>[data-run, data-status, data-end]`` holds a scoped
``<style>``, ``div.woml-header`` (workflow, run id, clock, status, ``t = …``),
``div.woml-scroll`` (``overflow-x:auto``) with ``svg.woml-svg[data-axis]`` — the knots
``[[t, x], …]`` of the piecewise-linear time→x map —, an empty ``div.woml-replay`` for
the widget's Play control and slider, and ``div.woml-steps``, the no-JavaScript listing
that is also the details panel: per step its status and policy in words and its full
idempotency key, per attempt one ``details.woml-attempt-details``.

In the SVG, ``g.woml-axis`` (ticks), one ``g.woml-break[data-t0, data-t1]`` per axis
break, one ``g.woml-lane[data-step]`` per step whose ``g.woml-seg`` children are the
segments (``woml-attempt``, ``woml-wait``, ``woml-planned``, ``woml-planned-wait``;
attempts and planned ones also ``woml-outcome-<outcome>``), each with ``data-step``,
``data-n``, ``data-t0``/``data-t1`` (seconds) and ``data-x0``/``data-x1`` (its drawn
extent), a ``<title>``, a ``rect.woml-bar`` and its ``text.woml-label``; then
``g.woml-legend``. Attempts are focusable buttons; the widget toggles
``woml-selected`` on one, styled here.

Colours follow JupyterLab's theme (``--jp-*`` variables, with fallbacks) through the
scoped ``<style>``; every element also carries presentation attributes (``fill=…``) so
the SVG still reads where styles are stripped. Text outside bars uses the theme's font
colours on the theme's layout colours; text inside a bar is white on a fill dark enough
for WCAG AA in any theme. Colour is never the only cue: bars also carry a pattern and
their label the outcome word.

Everything shown is escaped: script output, error messages and URLs are untrusted.
"""

from __future__ import annotations

import html
import json
import re
import secrets
from collections.abc import Iterable

from ..model import Attempt, Call, Run
from ._layout import (
    AXIS_H,
    BAR_H,
    BAR_TEXT,
    CHAR_W,
    FONT_SIZE,
    LABEL_W,
    LANE_GAP,
    OUTCOMES,
    ROW_H,
    Drawn,
    Lane,
    TimelineLayout,
    call_verdict,
    compute_layout,
    error_text,
    format_time,
    outcome_style,
    text_width,
)

RESULT_PREVIEW_CHARS = 1000
LOG_LINES_SHOWN = 200
LEGEND_ROW_H = 20.0

# XML 1.0 forbids C0 controls other than tab/newline/CR, U+FFFE and U+FFFF; lone
# surrogates cannot be encoded. DEL is legal XML but invisible, so it goes too.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")

#: Fallback colours, used as presentation attributes and as the ``var()`` fallbacks.
#: Each is ≥ 4.5:1 on white (what a page without JupyterLab's variables shows).
TEXT = "#1f1f1f"
TEXT_MUTED = "#5f5f5f"
GRID = "#d0d0d0"
CODE_BG = "#eeeeee"
FOCUS = "#1976d2"

#: The theme colours (JupyterLab variables) each fixed role uses.
THEME_VARS: dict[str, tuple[str, str]] = {
    "text": ("--jp-content-font-color1", TEXT),
    "muted": ("--jp-content-font-color2", TEXT_MUTED),
    "code-bg": ("--jp-layout-color2", CODE_BG),
    "grid": ("--jp-border-color2", GRID),
    "focus": ("--jp-brand-color1", FOCUS),
}


def _var(role: str) -> str:
    name, fallback = THEME_VARS[role]
    return f"var({name},{fallback})"


def _style() -> str:
    """The scoped rules. Selectors start at ``.woml-timeline`` so nothing leaks out."""
    r = ".woml-timeline"
    rules = [
        f"{r}{{color:{_var('text')};font-family:var(--jp-ui-font-family,system-ui,sans-serif);"
        "font-size:13px;line-height:1.4}",
        f"{r} code,{r} pre{{background:{_var('code-bg')};color:{_var('text')};"
        "font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:12px;"
        "padding:0 3px;border-radius:2px}",
        f"{r} pre{{padding:4px 6px;white-space:pre-wrap;overflow-wrap:anywhere;"
        "max-height:20em;overflow:auto}",
        f"{r} code.woml-key{{user-select:all;-webkit-user-select:all}}",
        f"{r} .woml-svg{{display:block}}",
        f"{r} .woml-label,{r} .woml-tick,{r} .woml-step-id{{fill:{_var('text')}}}",
        f"{r} .woml-muted{{fill:{_var('muted')}}}",
        f"{r} .woml-label.woml-in{{fill:{BAR_TEXT}}}",
        f"{r} .woml-grid{{stroke:{_var('grid')}}}",
        f"{r} .woml-wait-line,{r} .woml-zigzag,{r} .woml-mark line{{stroke:{_var('muted')}}}",
        f"{r} .woml-planned .woml-bar,{r} .woml-legend .woml-planned-swatch"
        f"{{stroke:{_var('muted')};fill:none}}",
        f"{r} .woml-seg[tabindex]{{cursor:pointer;outline:none}}",
        f"{r} .woml-seg:focus-visible .woml-bar"
        f"{{stroke:{_var('focus')};stroke-width:3px;paint-order:stroke}}",
        # Selected: a ring around the bar (stroke on top, 2px outside even a 3px-wide
        # bar), and its label bold and underlined: not colour alone.
        f"{r} .woml-seg.woml-selected .woml-bar{{stroke:{_var('focus')};stroke-width:4px}}",
        f"{r} .woml-seg.woml-selected .woml-label{{font-weight:bold;text-decoration:underline}}",
        f"{r} .woml-steps{{margin-top:6px}}",
        f"{r} .woml-step{{margin:6px 0;padding-top:4px;border-top:1px solid {_var('grid')}}}",
        f"{r} details.woml-attempt-details{{margin:2px 0 2px 12px}}",
        f"{r} table.woml-calls{{border-collapse:collapse;font-size:12px}}",
        f"{r} table.woml-calls th,{r} table.woml-calls td{{border:1px solid {_var('grid')};"
        "padding:2px 4px;text-align:left;vertical-align:top;overflow-wrap:anywhere}",
    ]
    return "<style>" + "".join(rules) + "</style>"


def esc(text: object) -> str:
    """``text`` safe inside HTML/XML text or a quoted attribute (untrusted input)."""
    return html.escape(_UNSAFE.sub("\ufffd", str(text)), quote=True)


def result_preview(value: object, limit: int = RESULT_PREVIEW_CHARS) -> str:
    """The result as JSON, cut to ``limit`` characters with a note of what was cut."""
    text = json.dumps(value, ensure_ascii=False, indent=1, default=str)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def _call_row(call: Call) -> str:
    if call.status is not None:
        result = str(call.status)
    else:
        result = call.outcome + (f": {call.error}" if call.error else "")
    key = (
        f"{call.idempotency_header}: {call.idempotency_value or ''}"
        if call.idempotency_header
        else "none sent"
    )
    headers = "; ".join(f"{k}: {v}" for k, v in call.request_headers.items()) or "none"
    cells = (
        call.name or "(unnamed)",
        call.method,
        call.url,
        result,
        key,
        call_verdict(call),
        headers,
    )
    return "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>"


def attempt_details_html(step_id: str, attempt: Attempt) -> str:
    """What selecting an attempt shows (spec §6.3): outcome and explanation, the error
    with its cell line, HTTP calls (with the server's verdict), console output and a
    result preview."""
    style = outcome_style(attempt.outcome)
    end = "still running" if attempt.ended_at is None else format_time(attempt.ended_at)
    out = [
        '<div class="woml-details-body">',
        f"<p><strong>{esc(step_id)} · attempt {attempt.number} · {esc(style.label)}</strong>"
        f" · {esc(format_time(attempt.started_at))} → {esc(end)}</p>",
        f"<p>idempotency key <code>{esc(attempt.idempotency_key)}</code></p>",
    ]
    if attempt.explanation:
        out.append(f'<p class="woml-explanation">{esc(attempt.explanation)}</p>')
    if attempt.error is not None:
        e = attempt.error
        out.append(
            f'<p class="woml-error">error <code>{esc(error_text(e.name, e.message, e.line))}'
            "</code></p>"
        )
    if attempt.calls:
        head = (
            "name",
            "method",
            "URL",
            "status",
            "idempotency header sent",
            "server's verdict",
            "headers",
        )
        out.append(
            '<table class="woml-calls"><tr>'
            + "".join(f"<th>{h}</th>" for h in head)
            + "</tr>"
            + "".join(_call_row(c) for c in attempt.calls)
            + "</table>"
        )
    if attempt.logs:
        shown = attempt.logs[:LOG_LINES_SHOWN]
        more = len(attempt.logs) - len(shown)
        text = "\n".join(shown) + (f"\n… {more} more lines" if more else "")
        out.append(f'<p>console output</p><pre class="woml-logs">{esc(text)}</pre>')
    if attempt.outcome == "succeeded":
        out.append(
            f'<p>result</p><pre class="woml-result">{esc(result_preview(attempt.result))}</pre>'
        )
    out.append("</div>")
    return "".join(out)


# --- SVG -------------------------------------------------------------------------------


def _num(v: float) -> str:
    return f"{v:.1f}"


def _t(v: float) -> str:
    """A time for a data attribute: seconds, enough digits to round-trip milliseconds."""
    return repr(round(v, 6))


def _row_baseline(lane: Lane, row: int) -> float:
    if row < 0:
        return lane.bar_y + row * ROW_H + ROW_H - 3
    if row == 0:
        return lane.bar_y + BAR_H / 2 + 4
    return lane.bar_y + BAR_H + (row - 1) * ROW_H + 11


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
        f' fill="{fill}" font-size="{FONT_SIZE}">{esc(lb.text)}</text>'
    )


def _pattern_fill(rid: str, pattern: str) -> str | None:
    return {"stripes": f"url(#{rid}-stripes)", "cross": f"url(#{rid}-cross)"}.get(pattern)


def _segment(rid: str, lane: Lane, d: Drawn) -> str:
    seg = d.seg
    y = lane.bar_y
    w = max(d.x1 - d.x0, 0.0)
    data = (
        f'data-step="{esc(lane.step_id)}" data-n="{seg.number}" data-t0="{_t(seg.start)}"'
        f' data-t1="{_t(seg.end)}" data-x0="{_num(d.x0)}" data-x1="{_num(d.x1)}"'
    )
    title = f"<title>{esc(seg.tooltip)}</title>"
    if seg.kind in ("wait", "planned-wait"):
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
    return (
        f'<g class="woml-seg woml-{seg.kind} woml-outcome-{esc(style.label)}" {data}'
        f' tabindex="0" role="button" aria-label="{esc(aria)}">'
        f"{title}{shape}{_text(lane, d)}</g>"
    )


def _step_column(lane: Lane) -> str:
    room = int((LABEL_W - 12) / (CHAR_W * 1.1))  # bold 12px is ~10% wider than 11px
    shown = lane.step_id if len(lane.step_id) <= room else lane.step_id[: room - 1] + "…"
    return (
        f'<text class="woml-step-id" x="6" y="{_num(lane.bar_y + 9)}" font-size="12"'
        f' font-weight="bold" fill="{TEXT}"><title>{esc(lane.step_id)}</title>{esc(shown)}</text>'
        f'<text class="woml-muted" x="6" y="{_num(lane.bar_y + 21)}" font-size="10"'
        f' fill="{TEXT_MUTED}">{esc(lane.status)}</text>'
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
    waits = [d for d in lane.drawn if d.seg.kind in ("wait", "planned-wait")]
    bars = [d for d in lane.drawn if d.seg.kind not in ("wait", "planned-wait")]
    parts += [_segment(rid, lane, d) for d in (*waits, *bars)]
    return f'<g class="woml-lane" data-step="{esc(lane.step_id)}">{"".join(parts)}</g>'


def _swatch(rid: str, name: str, x: float, y: float) -> str:
    style = OUTCOMES[name]
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
    names = [n for n in OUTCOMES if n in present]
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
            word = OUTCOMES[name].label
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
    bottom = layout.lanes_bottom - LANE_GAP / 2
    legend, height = _legend(rid, layout, layout.lanes_bottom + 4)
    width = layout.width
    knots = json.dumps([[round(t, 6), round(x, 2)] for t, x in layout.axis])
    # role "group", not "img": an image's children are hidden from assistive technology,
    # and the attempts are buttons.
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="woml-svg" width="{width:.0f}"'
        f' height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="group"'
        f' aria-label="timeline of run {esc(layout.run_id)}" data-axis="{esc(knots)}"'
        f' font-family="system-ui, sans-serif" font-size="{FONT_SIZE}">',
        f"<title>timeline of run {esc(layout.run_id)}</title>",
        _defs(rid),
    ]
    axis = ['<g class="woml-axis">']
    for t in layout.ticks:
        x = layout.x(t)
        axis.append(
            f'<line class="woml-grid" x1="{_num(x)}" y1="{AXIS_H - 6}" x2="{_num(x)}"'
            f' y2="{_num(bottom)}" stroke="{GRID}"/>'
            f'<text class="woml-tick woml-muted" x="{_num(x)}" y="{AXIS_H - 12}"'
            f' font-size="10" text-anchor="middle" fill="{TEXT_MUTED}">{esc(format_time(t))}'
            "</text>"
        )
    axis.append("</g>")
    parts += axis
    for b in layout.breaks:
        mid = (b.x0 + b.x1) / 2
        # Two zig-zags across each lane's bar row and under the label on the axis; label
        # rows stay free for labels.
        bands = [(lane.bar_y - 2, lane.bar_y + BAR_H + 2) for lane in layout.lanes]
        bands.append((AXIS_H - 8, AXIS_H - 2))
        zigzags = "".join(_zigzag(mid + dx, y0, y1) for y0, y1 in bands for dx in (-5, 5))
        parts.append(
            f'<g class="woml-break" data-t0="{_t(b.t0)}" data-t1="{_t(b.t1)}"'
            f' data-x0="{_num(b.x0)}" data-x1="{_num(b.x1)}">'
            f"<title>{esc(format_time(b.t1 - b.t0))} not drawn to scale</title>{zigzags}"
            f'<text class="woml-label" x="{_num(mid)}" y="{AXIS_H - 12}" font-size="10"'
            f' text-anchor="middle" fill="{TEXT}">{esc(b.label)}</text></g>'
        )
    marks = [(t, "resumed") for t in layout.resumes]
    if layout.status == "running":
        marks.append((layout.now, "now"))
    for t, word in marks:
        x = layout.x(t)
        parts.append(
            f'<g class="woml-mark woml-mark-{word}" data-t="{_t(t)}"><line x1="{_num(x)}"'
            f' y1="{AXIS_H - 4}" x2="{_num(x)}" y2="{_num(bottom)}" stroke="{TEXT_MUTED}"'
            ' stroke-dasharray="2 2"/>'
            f'<text class="woml-label" x="{_num(x + 3)}" y="{AXIS_H - 1}" font-size="9"'
            f' fill="{TEXT}">{word}</text></g>'
        )
    parts += [_lane_svg(rid, lane, layout.track_x0) for lane in layout.lanes]
    parts.append(legend)
    parts.append("</svg>")
    return "".join(parts)


# --- the page ----------------------------------------------------------------------------


def _step_html(run: Run, lane: Lane) -> Iterable[str]:
    sr = run.steps[lane.step_id]
    yield (
        f'<div class="woml-step" data-step="{esc(lane.step_id)}">'
        f"<div><strong>{esc(lane.step_id)}</strong> · "
        f'<span class="woml-step-status">{esc(lane.status_words)}</span> · '
        f'<span class="woml-policy">{esc(lane.policy)}</span></div>'
        f'<div>idempotency key <code class="woml-key" style="user-select:all">'
        f"{esc(lane.key)}</code></div>"
    )
    for a in sorted(sr.attempts, key=lambda a: a.number):
        label = outcome_style(a.outcome).label
        end = "…" if a.ended_at is None else format_time(a.ended_at)
        yield (
            f'<details class="woml-attempt-details woml-outcome-{esc(label)}"'
            f' data-step="{esc(lane.step_id)}" data-n="{a.number}"><summary>#{a.number} '
            f"{esc(label)} · {esc(format_time(a.started_at))} → {esc(end)}</summary>"
            f"{attempt_details_html(lane.step_id, a)}</details>"
        )
    planned = [s.number for s in lane.segments if s.kind == "planned"]
    if planned:
        yield f"<div>planned, not yet run: {', '.join(f'#{n}' for n in planned)}</div>"
    yield "</div>"


def render_html(run: Run, *, now: float | None = None) -> str:
    """The static timeline of ``run``: header, SVG lanes and per-attempt details (spec
    §6.3), in the DOM described in the module docstring.

    ``now`` is the current time on the run's clock for a live run (running attempts
    are drawn up to it, a live wait counts down from it); default: the latest event.
    """
    layout = compute_layout(run, now=now)
    rid = f"woml-tl-{secrets.token_hex(6)}"
    end = run.ended_at if run.ended_at is not None else layout.now
    parts = [
        f'<div class="woml-timeline" id="{rid}" data-run="{esc(run.id)}"'
        f' data-status="{esc(run.status)}" data-end="{_t(end)}">',
        _style(),
        f'<div class="woml-header">workflow <strong>{esc(layout.workflow_id)}</strong> · run '
        f"<code>{esc(layout.run_id)}</code> · {esc(layout.clock)} clock · "
        f'<strong class="woml-status">{esc(layout.status)}</strong> · '
        f"t = {esc(format_time(layout.now))}</div>",
        f'<div class="woml-scroll" style="overflow-x:auto">{render_svg(layout, rid)}</div>',
        '<div class="woml-replay"></div>',
        '<div class="woml-steps">',
    ]
    for lane in layout.lanes:
        parts.extend(_step_html(run, lane))
    parts.append("</div></div>")
    return "".join(parts)
