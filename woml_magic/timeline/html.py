"""The timeline as self-contained HTML with inline SVG (spec §6.3).

For front ends without widgets (nbconvert, GitHub, a saved notebook), and the DOM that
the live widget's JavaScript brings to life (it appends its ``<script>``; this module
writes none). No external assets, no links. The output is well-formed XML:

``div.woml-timeline#woml-tl-<hex>[data-run, data-status, data-end]`` holds a scoped
``<style>``, ``div.woml-header`` (workflow, run id, clock, status, ``t = …``, and an
``a.woml-link`` per ``Run.links``: the run in its engine's own UI),
``div.woml-scroll`` (``overflow-x:auto``) with ``svg.woml-svg[data-axis]`` — the knots
``[[t, x], …]`` of the piecewise-linear time→x map —, an empty ``div.woml-replay`` for
the widget's Play control and slider, and ``div.woml-steps``, the no-JavaScript listing
that is also the details panel: per step its status and policy in words and its full
idempotency key, per attempt one ``details.woml-attempt-details`` (its HTTP calls in a
``table.woml-calls``, an injected fault marked by a ``span.woml-injected`` badge) and,
for a step that made calls, its key lineage ``div.woml-lineage[data-step]`` (spec
§10.3): ``p.woml-lineage-summary``, a ``table.woml-lineage-table`` with one
``tr.woml-lineage-row[data-step, data-n, data-verdict]`` per request that carried the
step's key (``data-verdict`` one of ``lineage.VERDICT_WORDS``), then
``p.woml-lineage-unkeyed``, ``p.woml-lineage-other`` and ``p.woml-lineage-warning``
when they have something to say. The widget toggles ``woml-selected`` on the lineage
rows of the selected attempt too.

Each ``div.woml-step`` also has, after its key and before its attempts, the policy in
other engines (spec §11, ``policy_targets.translate_all``):
``details.woml-policy-targets[data-step]``, closed, summary "Retry policy in other
engines", holding one ``div.woml-policy-target[data-target, data-same]`` per target in
``policy_targets.TARGETS`` order (``data-same`` "true" or "false"): a
``p.woml-target-head`` (``strong.woml-target-name``; ``span.woml-same`` "same schedule"
or ``span.woml-differs`` "differs"; ``span.woml-target-waits``, the target's waits as
the axis writes times and, where they differ, WOML's), ``pre.woml-target-code > code``
(the snippet, verbatim) and ``ul.woml-target-warnings`` (one ``li`` per warning; absent
without warnings). A later step with the same policy as an earlier one has, instead of
the four, ``p.woml-policy-same-as`` naming that step (its box carries
``data-same-as``): the translations appear once per policy. Without the script the
four read one after another. The script makes them tabs: it puts a
``div.woml-target-tabs[role=tablist]`` before them, one
``button.woml-target-tab[role=tab, data-target, aria-selected, aria-controls]`` per
target (its name and "same" or "differs"), gives each ``div.woml-policy-target``
``role=tabpanel`` and hides all but the selected one (the first, at first); click, the
arrow keys, Home and End pick a tab. The live widget keeps which of these are open, the
tab each shows and a focused tab across a redraw.

In the SVG, ``g.woml-axis`` (ticks), one ``g.woml-break[data-t0, data-t1]`` per axis
break, one ``g.woml-lane[data-step]`` per step whose ``g.woml-seg`` children are the
segments (``woml-attempt``, ``woml-wait``, ``woml-planned``, ``woml-planned-wait``;
attempts and planned ones also ``woml-outcome-<outcome>``), each with ``data-step``,
``data-n``, ``data-t0``/``data-t1`` (seconds) and ``data-x0``/``data-x1`` (its drawn
extent), a ``<title>``, a ``rect.woml-bar`` and its ``text.woml-label``; then
``g.woml-legend``. Attempts are focusable buttons; the widget toggles
``woml-selected`` on one, styled here. An attempt with an injected fault (spec §10.2)
also has the class ``woml-injected`` and says so in its ``<title>`` and ``aria-label``.

A saved timeline (``as_picture``) of more than ``DEFER_DETAILS_AT`` attempts keeps their
``details`` as data: each step has ``p.woml-attempt-lines[data-step]`` in their place
(one summary line per attempt, what a reader without scripts gets), and the root ends
with ``script.woml-details-data`` (``details_data``), from which the script puts a
step's ``details`` in when the step comes near the view or an attempt is selected.
Its picture is also ``picture.compact_svg`` of the drawing (no tooltips, ``data-*``,
classes or roles: what an image never uses), and the drawing itself comes after the
panel as ``script.woml-drawing-data`` (``picture.drawing_data``: gzipped, its lanes
apart), which the script decodes in the picture's place, building only the lanes near
the view (a drawing of more than 50 lanes; ``timeline.js``, ``LazyLanes``).

Colours follow JupyterLab's theme (``--jp-*`` variables, with fallbacks) through the
scoped ``<style>``; every element also carries presentation attributes (``fill=…``) so
the SVG still reads where styles are stripped. Text outside bars uses the theme's font
colours on the theme's layout colours; text inside a bar is white on a fill dark enough
for WCAG AA in any theme. Colour is never the only cue: bars also carry a pattern and
their label the outcome word.

Everything shown is escaped: script output, error messages and URLs are untrusted.

This module writes the page around its parts: the header and the scoped ``<style>``;
the drawing is ``svg``'s, the details panel ``details``'s, the colours ``theme``'s.
"""

from __future__ import annotations

import base64
import gzip
import json
import secrets

from ..model import Run
from ..policy import RetryPolicy
from .axis import format_time
from .details import step_details_html
from .layout import SHOWN_ATTEMPTS, TimelineLayout, compute_layout
from .markup import data_time, esc
from .outcome_styles import BAR_TEXT
from .picture import drawing_data, leading_drawing, picture
from .svg import render_svg
from .theme import var

#: spec §6.5: what a saved output says where its picture shows instead of the live
#: drawing (an untrusted notebook, GitHub, nbviewer, a sanitized export).
SHARED_NOTE = (
    "This is a picture of the timeline: scripts do not run here (an untrusted notebook, "
    "or a page that strips them). For the interactive timeline (select an attempt, "
    "Play), trust the notebook (JupyterLab and Notebook 7: File \u25b8 Trust Notebook) "
    "or run the cell again."
)
#: A saved timeline (``as_picture``) of more attempts than this keeps their details as
#: data, made into the details panel where and when the page needs them (issue 21: a
#: 1,000-step run's panel was 5.9 MB of markup the browser parsed and laid out at once),
#: and a compact picture with its live drawing as data (``picture``: 4.2 MB → 1.4 MB).
DEFER_DETAILS_AT = SHOWN_ATTEMPTS


def scoped_style(r: str = ".woml-timeline") -> str:
    """The scoped rules. Selectors start at the root ``r`` (``.woml-timeline``; the key
    lineage view of ``lineage_table`` has its own) so nothing leaks out."""
    rules = [
        f"{r}{{color:{var('text')};font-family:var(--jp-ui-font-family,system-ui,sans-serif);"
        "font-size:13px;line-height:1.4}",
        f"{r} code,{r} pre{{background:{var('code-bg')};color:{var('text')};"
        "font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:12px;"
        "padding:0 3px;border-radius:2px}",
        f"{r} pre{{padding:4px 6px;white-space:pre-wrap;overflow-wrap:anywhere;"
        "max-height:20em;overflow:auto}",
        f"{r} code.woml-key{{user-select:all;-webkit-user-select:all}}",
        # Never scaled down (JupyterLab's outputs have svg{max-width:100%}): its text
        # stays at least 12 px; a narrow output scrolls it sideways (spec §6.3).
        f"{r} .woml-svg{{display:block;max-width:none}}",
        f"{r} .woml-label,{r} .woml-tick,{r} .woml-step-id{{fill:{var('text')}}}",
        f"{r} .woml-muted{{fill:{var('muted')}}}",
        f"{r} .woml-label.woml-in{{fill:{BAR_TEXT}}}",
        f"{r} .woml-grid{{stroke:{var('grid')}}}",
        f"{r} .woml-wait-line,{r} .woml-zigzag,{r} .woml-mark line{{stroke:{var('muted')}}}",
        f"{r} .woml-planned .woml-bar,{r} .woml-legend .woml-planned-swatch"
        f"{{stroke:{var('muted')};fill:none}}",
        f"{r} .woml-seg[tabindex]{{cursor:pointer;outline:none}}",
        f"{r} .woml-seg:focus-visible .woml-bar"
        f"{{stroke:{var('focus')};stroke-width:3px;paint-order:stroke}}",
        # Selected: a ring around the bar (stroke on top, 2px outside even a 3px-wide
        # bar), and its label bold and underlined: not colour alone.
        f"{r} .woml-seg.woml-selected .woml-bar{{stroke:{var('focus')};stroke-width:4px}}",
        f"{r} .woml-seg.woml-selected .woml-label{{font-weight:bold;text-decoration:underline}}",
        f"{r} .woml-steps{{margin-top:6px}}",
        # A step of the listing off screen is not laid out until scrolled to: a saved
        # 1,000-step run draws ~20 % sooner (issue 21 item 6, bench/browser.py).
        f"{r} .woml-step{{margin:6px 0;padding-top:4px;border-top:1px solid {var('grid')};"
        "content-visibility:auto;contain-intrinsic-size:auto 40px}",
        f"{r} details.woml-attempt-details{{margin:2px 0 2px 12px}}",
        f"{r} table.woml-calls,{r} table.woml-lineage-table"
        "{border-collapse:collapse;font-size:12px}",
        f"{r} table.woml-calls th,{r} table.woml-calls td,{r} table.woml-lineage-table th,"
        f"{r} table.woml-lineage-table td{{border:1px solid {var('grid')};"
        "padding:2px 4px;text-align:left;vertical-align:top;overflow-wrap:break-word}",
        # Long untrusted text (URLs, errors, headers) may break anywhere; short cells
        # (a method, a status, a name) keep their words whole.
        f"{r} td.woml-long{{overflow-wrap:anywhere}}",
        # The HTTP and key lineage tables fit their output at any width (800 px too):
        # fixed columns, the URL, key and headers wrap, the server's verdict stays in view.
        f"{r} table.woml-calls,{r} table.woml-lineage-table{{table-layout:fixed;width:100%}}",
        f"{r} table.woml-calls th,{r} table.woml-lineage-table th{{overflow-wrap:anywhere}}",
        f"{r} .woml-lineage{{margin:4px 0 2px 12px}}",
        f"{r} .woml-lineage p{{margin:2px 0}}",
        f"{r} .woml-lineage-warning{{font-weight:bold}}",
        # The row of the selected attempt: bold on the code background, not colour alone.
        f"{r} tr.woml-lineage-row.woml-selected td{{font-weight:bold;background:{var('code-bg')}}}",
        f"{r} span.woml-injected{{display:inline-block;border:1px dashed {var('muted')};"
        "border-radius:3px;padding:0 3px;font-size:11px;white-space:nowrap}",
        # The policy in other engines (spec §11): each target indented under its summary;
        # "same schedule" and "differs" are words in a badge (a differing one dashed and
        # bold), not colours.
        f"{r} details.woml-policy-targets{{margin:2px 0 2px 12px}}",
        f"{r} .woml-policy-target{{margin:4px 0 6px 12px}}",
        f"{r} .woml-policy-target p{{margin:2px 0}}",
        f"{r} .woml-policy-target pre code{{padding:0}}",
        f"{r} ul.woml-target-warnings{{margin:2px 0;padding-left:18px}}",
        f"{r} span.woml-same,{r} span.woml-differs{{display:inline-block;"
        f"border:1px solid {var('muted')};border-radius:3px;padding:0 3px;font-size:11px;"
        "white-space:nowrap}",
        f"{r} span.woml-differs{{border-style:dashed;font-weight:bold}}",
        # The tabs the script makes: the selected one bold, on the code background and
        # underlined in the focus colour; not colour alone.
        f"{r} .woml-target-tabs{{display:flex;flex-wrap:wrap;gap:2px;margin:4px 0 0 12px;"
        f"border-bottom:1px solid {var('grid')}}}",
        f"{r} .woml-target-tabs ~ .woml-policy-target{{margin-top:6px}}",
        f"{r} button.woml-target-tab{{font:inherit;font-size:12px;color:{var('text')};"
        f"background:none;border:1px solid {var('grid')};border-bottom:none;"
        "border-radius:3px 3px 0 0;padding:2px 8px;cursor:pointer}",
        f"{r} button.woml-target-tab[aria-selected=true]{{font-weight:bold;"
        f"background:{var('code-bg')};box-shadow:inset 0 -2px 0 {var('focus')}}}",
        f"{r} button.woml-target-tab:focus-visible{{outline:2px solid {var('focus')};"
        "outline-offset:1px}",
    ]
    return "<style>" + "".join(rules) + "</style>"


def render_html(run: Run, *, now: float | None = None, as_picture: bool = False) -> str:
    """The static timeline of ``run``: header, SVG lanes and per-attempt details (spec
    §6.3), in the DOM described in the module docstring.

    ``now`` is the current time on the run's clock for a live run (running attempts
    are drawn up to it, a live wait counts down from it); default: the latest event.
    ``as_picture`` draws the lanes as ``picture`` with ``p.woml-shared-note`` after the
    header, for a saved output (spec §6.5); the script makes it live again (a big one,
    ``DEFER_DETAILS_AT``, from ``picture.drawing_data``).
    """
    layout = compute_layout(run, now=now)
    rid = f"woml-tl-{secrets.token_hex(6)}"
    big = as_picture and sum(len(sr.attempts) for sr in run.steps.values()) > DEFER_DETAILS_AT
    svg = "" if big else render_svg(layout, rid)  # a big one's drawing is data
    end = run.ended_at if run.ended_at is not None else layout.now
    parts = [
        f'<div class="woml-timeline" id="{rid}" data-run="{esc(run.id)}"'
        f' data-status="{esc(run.status)}" data-end="{data_time(end)}">',
        scoped_style(),
        f'<div class="woml-header">workflow <strong>{esc(layout.workflow_id)}</strong> · run '
        f"<code>{esc(layout.run_id)}</code> · {esc(layout.clock)} clock · "
        f'<strong class="woml-status">{esc(layout.status)}</strong> · '
        f"t = {esc(format_time(layout.now))}"
        + "".join(
            f' · <a class="woml-link" href="{esc(url)}" target="_blank" '
            f'rel="noopener">{esc(label)}</a>'
            for label, url in run.links.items()
        )
        + "</div>",
        *([f'<p class="woml-shared-note">{esc(SHARED_NOTE)}</p>'] if as_picture else []),
        f'<div class="woml-scroll" style="overflow-x:auto">'
        f"{_picture(layout, svg, rid, big) if as_picture else svg}"
        "</div>",
        '<div class="woml-replay"></div>',
        '<div class="woml-steps">',
    ]
    shown: dict[RetryPolicy, str] = {}  # a policy's translations once per page
    deferred: dict[str, str] | None = {} if big else None
    for lane in layout.lanes:
        parts.extend(step_details_html(run, lane, shown, deferred))
    parts.append("</div>")
    if big:
        parts.append(drawing_data(layout, rid))
    if deferred is not None:
        parts.append(details_data(deferred))
    parts.append("</div>")
    return "".join(parts)


def _picture(layout: TimelineLayout, svg: str, rid: str, big: bool) -> str:
    """A saved output's picture: the drawing ``svg``, or for a ``big`` run the compact
    picture of its first steps (``picture.leading_drawing``)."""
    alt = f"timeline of run {layout.run_id}"
    return picture(leading_drawing(layout, rid), alt, compact=True) if big else picture(svg, alt)


def details_data(deferred: dict[str, str]) -> str:
    """``script.woml-details-data[type=application/gzip]``: step id → the markup of its
    attempts' ``details``, as JSON, gzipped, in base64 (the markup of thousands of
    attempts repeats itself: a tenth of its size), from which the script puts a step's
    ``details`` in place of its ``p.woml-attempt-lines`` when the step comes near the
    view or one of its attempts is selected (``timeline.js``, ``deferDetails``). Base64
    holds no ``<``, ``&`` or ``]]>``: the page stays well-formed XML, and sanitizers drop
    the whole element with its text."""
    packed = gzip.compress(
        json.dumps(deferred, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
        mtime=0,
    )
    return (
        '<script type="application/gzip" class="woml-details-data">'
        f"{base64.b64encode(packed).decode('ascii')}</script>"
    )
