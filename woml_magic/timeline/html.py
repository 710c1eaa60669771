"""The timeline as self-contained HTML with inline SVG (spec §6.3).

For front ends without widgets (nbconvert, GitHub, a saved notebook): no scripts, no
external assets, no links, inline styles only. The SVG draws one lane per step on a
shared time axis with ticks; bars are coloured *and* labelled by outcome, failures
also hatched (colour is never the only cue); waits are labelled gaps; planned attempts
are grey and dashed. Below it, each step's key in full (selectable ``<code>``), its
policy in words and one ``<details>`` per attempt. The output is well-formed XML.

Everything shown is escaped: script output, error messages and URLs are untrusted.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable

from ..model import Attempt, Call, Run
from ._layout import (
    OUTCOMES,
    WAIT_COLOR,
    Lane,
    Segment,
    TimelineLayout,
    compute_layout,
    error_text,
    outcome_style,
    place,
    seconds,
)

LABEL_W = 190  # px: the step-id column left of the lanes
TRACK_W = 720  # px: the time axis
LANE_H = 34
AXIS_H = 26
LEGEND_H = 28
CHAR_W = 6.4  # px per character at font-size 11 (a safe over-estimate for sans-serif)
RESULT_PREVIEW_CHARS = 1000
LOG_LINES_SHOWN = 200

# XML 1.0 forbids C0 controls other than tab/newline/CR, U+FFFE and U+FFFF; lone
# surrogates cannot be encoded. DEL is legal XML but invisible, so it goes too.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")

_FONT = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px"
_CODE = "user-select:all;font-family:ui-monospace,monospace;background:#f5f5f5;padding:0 3px"


def esc(text: object) -> str:
    """``text`` safe inside HTML/XML text or a quoted attribute (untrusted input)."""
    return html.escape(_UNSAFE.sub("\ufffd", str(text)), quote=True)


def min_label_width(label: str) -> float:
    """The narrowest bar that still shows ``label`` in full: its text must fit."""
    return len(label) * CHAR_W + 8


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
    replayed = "reattached (replayed from the journal)" if call.replayed else "sent"
    headers = "; ".join(f"{k}: {v}" for k, v in call.request_headers.items()) or "none"
    cells = (call.name or "(unnamed)", call.method, call.url, result, key, replayed, headers)
    return "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>"


def attempt_details_html(step_id: str, attempt: Attempt) -> str:
    """What selecting an attempt shows (spec §6.3): outcome and explanation, the error
    with its cell line, HTTP calls, console output and a result preview."""
    style = outcome_style(attempt.outcome)
    end = "still running" if attempt.ended_at is None else seconds(attempt.ended_at)
    out = [
        f'<div class="woml-details-body" style="{_FONT}">',
        f"<p><strong>{esc(step_id)} · attempt {attempt.number} · {esc(style.label)}</strong>"
        f" · {esc(seconds(attempt.started_at))} → {esc(end)}</p>",
        f'<p>idempotency key <code style="{_CODE}">{esc(attempt.idempotency_key)}</code></p>',
    ]
    if attempt.explanation:
        out.append(f"<p>{esc(attempt.explanation)}</p>")
    if attempt.error is not None:
        e = attempt.error
        out.append(
            f'<p class="woml-error">error <code>{esc(error_text(e.name, e.message, e.line))}'
            "</code></p>"
        )
    if attempt.calls:
        head = ("name", "method", "URL", "status", "idempotency header sent", "replayed", "headers")
        out.append(
            '<table class="woml-calls" style="border-collapse:collapse;font-size:12px">'
            "<tr>"
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


def _bar(seg: Segment, x: float, w: float, y: float) -> str:
    style = outcome_style(seg.outcome)
    h = LANE_H - 12
    cls = f"woml-{seg.kind} woml-outcome-{style.label}"
    title = f"<title>{esc(seg.tooltip)}</title>"
    box = f'x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h}"'
    if seg.kind in ("wait", "planned-wait"):
        dash = ' stroke="#90a4ae" stroke-dasharray="4 3"' if seg.kind == "planned-wait" else ""
        rect = f'<rect {box} fill="{WAIT_COLOR}"{dash}/>'
        fill = "#455a64"
    elif seg.kind == "planned":
        rect = f'<rect {box} rx="3" fill="#f5f5f5" stroke="{style.color}" stroke-dasharray="4 3"/>'
        fill = "#616161"
    else:
        rect = f'<rect {box} rx="3" fill="{style.color}"/>'
        if style.pattern == "hatch":
            rect += f'<rect {box} rx="3" fill="url(#woml-hatch)"/>'
        fill = "#ffffff"
    text = (
        f'<text x="{x + 4:.1f}" y="{y + h / 2 + 4:.1f}" fill="{fill}" font-size="11">'
        f"{esc(seg.label)}</text>"
    )
    return f'<g class="{cls}">{title}{rect}{text}</g>'


def _lane_svg(lane: Lane, index: int, scale: float) -> str:
    y0 = AXIS_H + index * LANE_H
    parts = [
        f'<text x="6" y="{y0 + 14}" font-size="12" font-weight="bold">{esc(lane.step_id)}</text>',
        f'<text x="6" y="{y0 + 27}" font-size="10" fill="#546e7a">{esc(lane.status)}</text>',
    ]
    spots = place(
        lane.segments, scale=scale, min_width=[min_label_width(s.label) for s in lane.segments]
    )
    for seg, (x, w) in zip(lane.segments, spots, strict=True):
        parts.append(_bar(seg, LABEL_W + x, w, y0 + 6))
    return f'<g class="woml-lane">{"".join(parts)}</g>'


def _legend(layout: TimelineLayout, y: float) -> str:
    present = {s.outcome for lane in layout.lanes for s in lane.segments} - {"wait"}
    x = 6.0
    parts = []
    for name, style in OUTCOMES.items():
        if name not in present:
            continue
        dash = ' stroke-dasharray="3 2" stroke="#9e9e9e"' if style.pattern == "dashed" else ""
        fill = "#f5f5f5" if style.pattern == "dashed" else style.color
        hatch = (
            f'<rect x="{x:.1f}" y="{y}" width="14" height="12" fill="url(#woml-hatch)"/>'
            if style.pattern == "hatch"
            else ""
        )
        parts.append(
            f'<rect x="{x:.1f}" y="{y}" width="14" height="12" fill="{fill}"{dash}/>{hatch}'
            f'<text x="{x + 18:.1f}" y="{y + 10}" font-size="11">{esc(style.label)}</text>'
        )
        x += 18 + min_label_width(style.label) + 10
    return f'<g class="woml-legend">{"".join(parts)}</g>'


def render_svg(layout: TimelineLayout) -> str:
    """The lanes, the axis with ticks, resume and "now" markers, and a legend."""
    scale = TRACK_W / layout.axis_end
    lanes_h = len(layout.lanes) * LANE_H
    widest = max(
        [
            LABEL_W + x + w
            for lane in layout.lanes
            for x, w in place(
                lane.segments,
                scale=scale,
                min_width=[min_label_width(s.label) for s in lane.segments],
            )[-1:]
        ]
        + [LABEL_W + TRACK_W]
    )
    width, height = widest + 24, AXIS_H + lanes_h + LEGEND_H + 8
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="woml-svg" width="{width:.0f}"'
        f' height="{height}" viewBox="0 0 {width:.0f} {height}" role="img"'
        f' style="{_FONT}" font-family="sans-serif">',
        f"<title>timeline of run {esc(layout.run_id)}</title>",
        '<defs><pattern id="woml-hatch" width="6" height="6" patternUnits="userSpaceOnUse"'
        ' patternTransform="rotate(45)"><rect width="2" height="6" fill="#ffffff"'
        ' fill-opacity="0.3"/></pattern></defs>',
    ]
    axis = ['<g class="woml-axis">']
    for t in layout.ticks:
        x = LABEL_W + t * scale
        axis.append(
            f'<line x1="{x:.1f}" y1="{AXIS_H - 6}" x2="{x:.1f}" y2="{AXIS_H + lanes_h}"'
            ' stroke="#e0e0e0"/>'
            f'<text x="{x:.1f}" y="{AXIS_H - 10}" font-size="10" text-anchor="middle"'
            f' fill="#546e7a">{esc(seconds(t))}</text>'
        )
    axis.append("</g>")
    parts += axis
    marks = [(t, "resumed", "#6a1b9a") for t in layout.resumes]
    if layout.status == "running":
        marks.append((layout.now, "now", "#1565c0"))
    for t, word, color in marks:
        x = LABEL_W + t * scale
        parts.append(
            f'<g class="woml-mark-{word}"><line x1="{x:.1f}" y1="{AXIS_H - 4}" x2="{x:.1f}"'
            f' y2="{AXIS_H + lanes_h}" stroke="{color}" stroke-dasharray="2 2"/>'
            f'<text x="{x + 3:.1f}" y="{AXIS_H - 1}" font-size="9" fill="{color}">{word}</text></g>'
        )
    parts += [_lane_svg(lane, i, scale) for i, lane in enumerate(layout.lanes)]
    parts.append(_legend(layout, AXIS_H + lanes_h + 10))
    parts.append("</svg>")
    return "".join(parts)


def _lane_html(run: Run, lane: Lane) -> Iterable[str]:
    sr = run.steps[lane.step_id]
    yield (
        '<div class="woml-lane" style="margin:6px 0;padding:4px 0;border-top:1px solid #eee">'
        f"<div><strong>{esc(lane.step_id)}</strong> · {esc(lane.status_words)} · "
        f'<span class="woml-policy">{esc(lane.policy)}</span></div>'
        f'<div>idempotency key <code class="woml-key" style="{_CODE}">{esc(lane.key)}</code></div>'
    )
    for a in sorted(sr.attempts, key=lambda a: a.number):
        label = outcome_style(a.outcome).label
        end = "…" if a.ended_at is None else seconds(a.ended_at)
        yield (
            f'<details class="woml-attempt woml-outcome-{esc(label)}"><summary>#{a.number} '
            f"{esc(label)} · {esc(seconds(a.started_at))} → {esc(end)}</summary>"
            f"{attempt_details_html(lane.step_id, a)}</details>"
        )
    planned = [s.number for s in lane.segments if s.kind == "planned"]
    if planned:
        yield f"<div>planned, not yet run: {', '.join(f'#{n}' for n in planned)}</div>"
    yield "</div>"


def render_html(run: Run) -> str:
    """The static timeline of ``run``: header, SVG lanes and per-attempt details (spec §6.3)."""
    layout = compute_layout(run)
    parts = [
        f'<div class="woml-timeline" style="{_FONT}">',
        f'<div class="woml-header">workflow <strong>{esc(layout.workflow_id)}</strong> · run '
        f'<code style="{_CODE}">{esc(layout.run_id)}</code> · {esc(layout.clock)} clock · '
        f"<strong>{esc(layout.status)}</strong> · t = {esc(seconds(layout.now))}</div>",
        f'<div style="overflow-x:auto">{render_svg(layout)}</div>',
    ]
    for lane in layout.lanes:
        parts.extend(_lane_html(run, lane))
    parts.append("</div>")
    return "".join(parts)
