"""The notebooks as real front ends drive them: JupyterLab 4 and Notebook 7 in headless
Chromium (spec §6.1, §6.3; issue 11).

One server per app on 127.0.0.1 (isolated Jupyter folders, serving copies of the four
teaching notebooks and a few scratch notebooks) and one Chromium for the session
(``tests/browser/``). Every notebook is run with the app's own *Run All*, which queues
all cells at once: every code cell must get an execution count, none may stay
``[*]``, and no cell may show an error, asyncio noise or "Error displaying widget".
On the JupyterLab pages the timelines are then measured as drawn: text contrast in
the Light and Dark themes (WCAG AA, from computed styles), bar positions against
their times, a replay from t = 0 to the end, selection, and screenshots — into the
test's temporary folder, or over docs/images/timeline.png and timeline-dark.png when
WOML_UPDATE_SCREENSHOT=1 (so a test run leaves the checkout clean).

Assertions read the timeline's data attributes (``data-t0``, ``data-n``, ``data-end``,
…) rather than fixed numbers, so they hold for any run the notebooks make.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from browser import frontend, scratch
from browser.servers import JupyterServer
from browser.session import Frontends

from woml_magic.model import idempotency_key

pytestmark = pytest.mark.browser

DOCS_IMAGES = Path(__file__).parents[1] / "docs" / "images"
TEACHING = [p.name for p in scratch.TEACHING]
SPEC = "spec-example.ipynb"
COMPARE = "compare.ipynb"
LIVE = "live.ipynb"
LIGHT, DARK = "JupyterLab Light", "JupyterLab Dark"
#: WCAG 2.x success criterion 1.4.3 (AA), normal text.
AA = 4.5
#: A run that has not ended shows one of these statuses (spec §7).
LIVE_STATUSES = {"running", "pending", "waiting"}
#: What wraps a live (widget) view of a run in the page.
LIVE_WIDGET = ".jupyter-widgets, .woml-widget"
PX = 1.5  # tolerance for positions read from the page (sub-pixel rounding, strokes)


@pytest.fixture(scope="session")
def lab_server(frontends: Frontends) -> JupyterServer:
    """JupyterLab 4 on 127.0.0.1 (expose_app_in_browser), serving the notebooks."""
    return frontends.servers["lab"]


@pytest.fixture(scope="session")
def notebook_server(frontends: Frontends) -> JupyterServer:
    """Notebook 7 on 127.0.0.1 (expose_app_in_browser), serving the notebooks."""
    return frontends.servers["notebook"]


def say(capsys: pytest.CaptureFixture[str], *lines: str) -> None:
    """Print figures the report needs, even when pytest captures output."""
    with capsys.disabled():
        for line in lines:
            print(line)


# --- Run All -------------------------------------------------------------------------


def is_timeline_cell(source: str) -> bool:
    """A ``%%woml`` cell that displays a timeline (spec §6.1: one output, the Run)."""
    head = source.lstrip().splitlines()[0] if source.strip() else ""
    return head.startswith("%%woml") and "--no-timeline" not in head


def assert_finished_cleanly(result: frontend.RunAll) -> None:
    """Every cell ran, in order, once; no error, no noise; one timeline per %%woml cell."""
    problems = result.problems()
    counts = [c["count"] for c in result.code_cells]
    if counts != sorted(counts) or len(set(counts)) != len(counts):
        problems.append(f"execution counts not in cell order: {counts}")
    for c in result.code_cells:
        if not is_timeline_cell(c["source"]):
            continue
        head = f"cell {c['index']} ({frontend.first_line(c['source'])!r})"
        shown = [o for o in c["outputs"] if o["type"] in ("display_data", "execute_result")]
        if len(shown) != 1:
            problems.append(
                f"{head}: {len(shown)} display outputs, want 1: "
                + "; ".join(o.get("text", "")[:80] for o in shown)
            )
        if len(c["timelines"]) != 1:
            problems.append(f"{head}: {len(c['timelines'])} .woml-timeline shown, want 1")
        for t in c["timelines"]:
            if t["status"] is None or t["status"] in LIVE_STATUSES:
                problems.append(f"{head}: timeline {t['id']!r} still shows status {t['status']!r}")
            if t["inWidget"]:
                problems.append(f"{head}: finished run still shown as the live widget")
            if not t["svgVisible"]:
                problems.append(f"{head}: no visible svg.woml-svg")
    assert problems == [], f"{result.app} {result.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("app", ["lab", "notebook"])
@pytest.mark.parametrize("name", TEACHING)
def test_run_all_runs_every_cell_without_errors(
    app: str,
    name: str,
    frontends: Frontends,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server: JupyterServer = request.getfixturevalue(f"{app}_server")
    try:
        result = frontends.run(app, name)
        say(capsys, f"\n  {app} {name}: Run All finished in {result.seconds:.1f}s")
        assert_finished_cleanly(result)
        assert not (server.root / ".woml").exists(), f"{name} left a journal in its folder"
        assert frontends.blocked[app] == [], "the page tried to leave 127.0.0.1"
    finally:
        if app != "lab":  # later tests measure the JupyterLab pages
            frontends.done_with(app, name)


_NO_IPK6 = "WOML_IPYKERNEL6_PYTHON is not set (.ci/run makes that environment)"


@pytest.mark.skipif(
    not os.environ.get("WOML_IPYKERNEL6_PYTHON") and os.environ.get("CI") != "true",
    reason=_NO_IPK6,
)
@pytest.mark.parametrize("name", TEACHING)
def test_run_all_runs_every_cell_on_ipykernel_6_too(
    name: str,
    frontends: Frontends,
    lab_server: JupyterServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # spec §6.3 on the older kernel generation: the same notebook, its kernelspec
    # pointing at the second environment's ipykernel 6.
    assert os.environ.get("WOML_IPYKERNEL6_PYTHON"), _NO_IPK6
    copy = f"{scratch.IPYKERNEL6_PREFIX}{name}"
    try:
        result = frontends.run("lab", copy)
        sessions = lab_server.api("GET", "sessions").json()
        kernels = {s["kernel"]["name"] for s in sessions if s["path"].endswith(copy)}
        assert kernels == {"woml-ipykernel6"}, sessions
        say(capsys, f"\n  lab {copy}: Run All finished in {result.seconds:.1f}s")
        assert_finished_cleanly(result)
    finally:
        frontends.done_with("lab", copy)


@pytest.mark.parametrize(
    ("name", "kwargs", "reason"),
    [
        (  # issue 11's wedge: the kernel idles while cells wait at [*]
            "wedge.ipynb",
            {"idle_grace": 4.0},
            r"idle for \d+s with cells queued(.|\n)*cell 2 \[\[\*\]:\] \"print\('after'\)\"",
        ),
        ("endless.ipynb", {"timeout": 6.0}, r"kernel 'busy' after \d+s(.|\n)*cell 1 \[\[\*\]:\]"),
        ("raises.ipynb", {"idle_grace": 4.0}, r"ValueError: boom"),
        ("noisy.ipynb", {}, r"Exception in callback"),
    ],
    ids=["wedged-kernel", "endless-cell", "error-output", "asyncio-noise"],
)
def test_run_all_check_fails_for_the_right_reason(
    name: str, kwargs: dict[str, Any], reason: str, frontends: Frontends
) -> None:
    # The check above is only worth something if it fails on a broken notebook.
    try:
        with pytest.raises(AssertionError, match=reason):
            assert_finished_cleanly(frontends.run("lab", name, **kwargs))
    finally:
        frontends.done_with("lab", name)


# --- the live widget ---------------------------------------------------------------


def test_background_run_is_live_clickable_and_cancellable(frontends: Frontends) -> None:
    from playwright.sync_api import expect

    page = frontends.open("lab", LIVE)
    try:
        page.evaluate("name => __woml.runAll(name)", LIVE)
        cell = page.locator(".jp-CodeCell").nth(1)
        # The live view: a widget (anywidget/ipywidgets) around the same timeline HTML.
        live = cell.locator(LIVE_WIDGET).filter(has=page.locator(".woml-timeline"))
        expect(live).to_have_count(1, timeout=30_000)
        expect(live.locator(".woml-timeline")).to_be_visible()
        # spec §6.3: attempts 1 and 2 threw, attempt 3 is running; the run has a Cancel.
        threw = live.locator(".woml-seg.woml-attempt.woml-outcome-threw")
        expect(threw).to_have_count(2, timeout=15_000)
        running = live.locator(".woml-seg.woml-attempt.woml-outcome-running")
        expect(running).to_have_count(1, timeout=15_000)
        assert running.get_attribute("data-n") == "3"
        key = live.locator("code.woml-key").first.inner_text().strip()
        assert key == idempotency_key(scratch.LIVE_RUN_ID, "charge")

        threw.first.locator("rect.woml-bar").click()
        expect(threw.first).to_have_class(re.compile(r"\bwoml-selected\b"))
        details = live.locator("details.woml-attempt-details[data-step='charge'][data-n='1']")
        expect(details).to_have_attribute("open", "")
        expect(details).to_contain_text("the API is busy")

        live.locator("button.woml-cancel").click()
        # When the run ends, the widget gives way to the static timeline: one output.
        expect(cell.locator(LIVE_WIDGET)).to_have_count(0, timeout=15_000)
        static = cell.locator(".woml-timeline")
        expect(static).to_have_count(1)
        expect(static).not_to_have_attribute("data-status", "running")
        cancelled = static.locator(".woml-seg.woml-attempt.woml-outcome-cancelled")
        expect(cancelled).to_have_count(1)
        expect(static.locator(".woml-outcome-running")).to_have_count(0)
        cells = page.evaluate("name => __woml.cells(name)", LIVE)
        outputs = [o for o in cells[1]["outputs"] if o["type"] != "stream"]
        assert len(outputs) == 1, outputs
    finally:
        frontends.runs.pop(("lab", LIVE), None)
        frontend.shutdown(page, LIVE)


# --- theme contrast --------------------------------------------------------------------


@pytest.mark.parametrize("theme", [LIGHT, DARK])
def test_timeline_text_meets_wcag_aa_contrast(
    theme: str, frontends: Frontends, capsys: pytest.CaptureFixture[str]
) -> None:
    measured: list[dict[str, Any]] = []
    for name in [*TEACHING, SPEC]:
        page = frontends.run("lab", name).page
        frontend.set_theme(page, theme)
        found = page.evaluate("() => __woml.contrastOfTimelines()")
        for r in found:
            r["notebook"] = name
        measured.extend(found)
        if found:
            low = min(found, key=lambda r: r["ratio"])
            say(capsys, f"  {theme} {name}: {len(found)} texts, min {low['ratio']:.2f}")
    assert measured, "no timeline text to measure"
    assert any(r["svg"] for r in measured), "no SVG text measured"
    worst = min(measured, key=lambda r: r["ratio"])
    say(
        capsys,
        f"\n  {theme}: minimum contrast {worst['ratio']:.2f}:1 over {len(measured)} texts "
        f"({worst['text']!r} {worst['fg']} on {worst['bg']} from {worst['bgFrom']})",
    )
    failing = sorted((r for r in measured if r["ratio"] < AA), key=lambda r: r["ratio"])
    assert failing == [], f"{len(failing)} texts below {AA}:1 in {theme}:\n" + "\n".join(
        f"  {r['ratio']:.2f} {r['notebook']} {r['element']} {r['text']!r}: {r['fg']} on "
        f"{r['bg']} ({r['bgFrom']})"
        for r in failing[:40]
    )


#: Known WCAG ratios, to check the in-page measure itself: HTML text on an ancestor's
#: background, translucent text, SVG text on the bar it lies in, SVG text beside a bar.
CONTRAST_FIXTURE = """
<div class="woml-timeline" style="background:#ffffff;font-size:13px">
  <p style="color:#767676">grey on white</p>
  <p style="color:rgba(0,0,0,0.54)">translucent black on white</p>
  <div style="background:#000000"><span style="color:#ffffff">white on black</span></div>
  <details><summary>closed</summary><p style="color:#777777">inside closed details</p></details>
  <svg width="300" height="40">
    <rect class="woml-bar" x="0" y="0" width="200" height="30" fill="#b45309"/>
    <text x="4" y="20" fill="#ffffff" font-size="11">white on the bar</text>
    <text x="210" y="20" fill="#000000" font-size="11">beside</text>
  </svg>
</div>
"""


def test_contrast_measure_matches_known_ratios(chromium: Any) -> None:
    page = chromium.new_page()
    try:
        page.set_content(CONTRAST_FIXTURE)
        page.add_script_tag(content=frontend.PAGE_JS)
        found = {r["text"]: r for r in page.evaluate("() => __woml.contrastOfTimelines()")}
    finally:
        page.close()
    assert found["grey on white"]["ratio"] == pytest.approx(4.54, abs=0.01)
    assert found["translucent black on white"]["ratio"] == pytest.approx(4.6, abs=0.05)
    assert found["white on black"]["ratio"] == 21
    assert found["inside closed details"]["ratio"] == pytest.approx(4.48, abs=0.01)
    assert found["white on the bar"]["bgFrom"] == "rect.woml-bar"
    assert found["white on the bar"]["ratio"] == pytest.approx(5.02, abs=0.01)
    assert found["beside"]["ratio"] == 21


# --- the axis is true to time ----------------------------------------------------------


def across_break(g: dict[str, Any], t_a: float, t_b: float) -> bool:
    """Whether some axis break of ``g`` lies between times ``t_a`` and ``t_b``."""
    lo, hi = min(t_a, t_b), max(t_a, t_b)
    return any(b["t0"] < hi and b["t1"] > lo for b in g["breaks"])


def interpolate(points: list[tuple[float, float]], t: float) -> float:
    """``data-axis``'s piecewise-linear map from time to SVG x (extended at its ends)."""
    for (t0, x0), (t1, x1) in pairwise(points):
        if t <= t1 or (t1, x1) == points[-1]:
            return x0 + (x1 - x0) * (t - t0) / (t1 - t0)
    return points[0][1]


def axis_problems(g: dict[str, Any]) -> list[str]:
    """Where the drawing of one timeline is not true to time (spec §6.3).

    The SVG's ``data-axis`` maps time to x. It must be one straight line except across
    ``g.woml-break``s; every attempt's bar must start, and every wait's bar end, where
    the axis puts its time, in the page; consecutive attempts not separated by a break
    are as far apart as their times say. Labels lie inside a bar or clear of it;
    nothing is drawn outside the SVG; there is a legend.
    """
    where = f"timeline {g['id'] or g['run']}"
    found = [f"{where}: label {s['text']!r} straddles {s['bar']}" for s in g["straddling"]]
    if not g["legend"]:
        found.append(f"{where}: no legend")
    if g["svg"]["width"] == 0 or g["svg"]["height"] == 0:
        return [
            *found,
            f"{where}: the SVG is not rendered ({g['svg']}, {g['svgDisplay']}, "
            f"page {g['visibilityState']}, hidden by {g['hiddenBy']})",
        ]
    if not isinstance(g["axis"], list) or len(g["axis"]) < 2 or g["ctm"] is None:
        return [*found, f"{where}: no usable data-axis ({g['axis']!r})"]
    points = [(float(t), float(x)) for t, x in g["axis"]]
    if any(b[0] <= a[0] or b[1] <= a[1] for a, b in pairwise(points)):
        return [*found, f"{where}: data-axis is not increasing: {points}"]
    slopes = {
        (a[0], b[0]): (b[1] - a[1]) / (b[0] - a[0])
        for a, b in pairwise(points)
        if not across_break(g, a[0], b[0])
    }
    if not slopes:
        return [*found, f"{where}: the whole axis is a break: {points}"]
    k = statistics.median(slopes.values())
    found.extend(
        f"{where}: the axis from t={t0:g} to t={t1:g} runs at {v:.4g} x/s, elsewhere {k:.4g} "
        "(no axis break marks it)"
        for (t0, t1), v in slopes.items()
        if abs(v - k) > 0.01 * k
    )
    scale, origin = g["ctm"]["a"], g["ctm"]["e"]

    def page_x(t: float) -> float:
        return scale * interpolate(points, t) + origin

    segs = sorted((s for s in g["segs"] if s["bar"]), key=lambda s: (s["t0"], s["kind"]))
    for s in segs:
        name = f"{s['kind']} {s['step']}#{s['n']}"
        if s["kind"] in ("attempt", "planned"):
            if abs(s["bar"]["left"] - page_x(s["t0"])) > PX:
                found.append(
                    f"{where}: {name} starts at {s['bar']['left']:.1f}px, its time "
                    f"t={s['t0']:g} is at {page_x(s['t0']):.1f}px"
                )
        elif abs(s["bar"]["right"] - page_x(s["t1"])) > PX or (
            s["bar"]["left"] < page_x(s["t0"]) - PX
        ):
            found.append(
                f"{where}: {name} drawn {s['bar']['left']:.1f}–{s['bar']['right']:.1f}px, "
                f"its times {s['t0']:g}–{s['t1']:g} are at "
                f"{page_x(s['t0']):.1f}–{page_x(s['t1']):.1f}px"
            )
        if s["bar"]["right"] > g["svg"]["right"] + PX or s["bar"]["left"] < g["svg"]["left"] - PX:
            found.append(f"{where}: {name} drawn outside the SVG (clipped)")
    starts = [s for s in segs if s["kind"] in ("attempt", "planned")]
    for a, b in pairwise(starts):
        dx, dt = b["bar"]["left"] - a["bar"]["left"], b["t0"] - a["t0"]
        if across_break(g, a["t0"], b["t0"]):
            if dx > scale * k * dt + PX:
                found.append(f"{where}: #{a['n']}→#{b['n']} spans a break but is not shorter")
        elif abs(dx - scale * k * dt) > PX:
            found.append(
                f"{where}: {a['step']}#{a['n']}→{b['step']}#{b['n']} {dx:.1f}px apart for "
                f"Δt {dt:g}, {scale * k * dt:.1f}px at scale"
            )
    for b in g["breaks"]:
        if not b["shown"] or not b["text"]:
            found.append(f"{where}: axis break {b['t0']}–{b['t1']} not labelled")
    return found


def synthetic(widths: list[float], *, gap: float = 0.0) -> dict[str, Any]:
    """A drawn timeline (as ``__woml.geometry`` reports it) of attempts 1 s apart plus
    waits of 1, 2, 4 s, the waits drawn ``widths`` px wide, at 10 px per second."""
    segs, t, x = [], 0.0, 100.0
    for n, (wait, width) in enumerate(zip([1, 2, 4], widths, strict=True), start=1):
        segs.append(
            {
                "kind": "attempt",
                "step": "s",
                "n": n,
                "t0": t,
                "t1": t,
                "bar": {"left": x, "right": x + 2, "width": 2},
            }
        )
        segs.append(
            {
                "kind": "wait",
                "step": "s",
                "n": n,
                "t0": t,
                "t1": t + wait,
                "bar": {"left": x + gap, "right": x + width, "width": width - gap},
            }
        )
        t, x = t + wait, x + width
    segs.append(
        {
            "kind": "attempt",
            "step": "s",
            "n": 4,
            "t0": t,
            "t1": t,
            "bar": {"left": x, "right": x + 2, "width": 2},
        }
    )
    return {
        "id": "synthetic",
        "run": "r",
        "svg": {"left": 0, "right": 1000, "width": 1000, "height": 50},
        "ctm": {"a": 1.0, "e": 0.0},
        "axis": [[0, 100], [7, 170]],
        "segs": segs,
        "breaks": [],
        "legend": True,
        "straddling": [],
        "collisions": [],
    }


def test_axis_check_accepts_true_time_and_rejects_equal_boxes() -> None:
    # True to time (10 px/s), waits starting after a 2 px attempt bar: accepted.
    assert axis_problems(synthetic([10, 20, 40], gap=2)) == []
    # Issue 11's drawing: every wait the same box, attempts laid end to end.
    lies = axis_problems(synthetic([30, 30, 30]))
    assert any("wait s#1 drawn" in p for p in lies), lies
    assert any("s#2→s#3" in p for p in lies), lies


@pytest.mark.parametrize("name", [*TEACHING, SPEC, COMPARE])
def test_bars_are_placed_at_their_times(name: str, frontends: Frontends) -> None:
    page = frontends.run("lab", name).page
    frontend.set_theme(page, LIGHT)
    geometries = frontend.measured(page)
    assert geometries, f"{name}: no svg.woml-svg timelines"
    problems = [p for g in geometries for p in axis_problems(g)]
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("name", [*TEACHING, SPEC, COMPARE])
def test_no_two_texts_of_a_timeline_overlap_or_touch(name: str, frontends: Frontends) -> None:
    # spec §6.3, issue 21: every text box of every drawn timeline (labels, ticks, the
    # step column, the legend, axis breaks) keeps clear of every other by half a pixel.
    page = frontends.run("lab", name).page
    frontend.set_theme(page, LIGHT)
    geometries = frontend.measured(page)
    assert geometries, f"{name}: no svg.woml-svg timelines"
    found = [
        f"timeline {g['id'] or g['run']}: {c['a']!r} ({c['aClass']}) and {c['b']!r}"
        f" ({c['bClass']}) overlap by {c['dx']} x {c['dy']} px"
        for g in geometries
        for c in g["collisions"]
    ]
    assert found == [], "\n".join(found)


def test_spec_example_waits_grow_then_hold_at_the_cap(
    frontends: Frontends, capsys: pytest.CaptureFixture[str]
) -> None:
    # spec §3.1's example, drawn (spec §6.3): 1, 2, 4, 8, 16, 30, 30, 30, 30 s.
    page = frontends.run("lab", SPEC).page
    frontend.set_theme(page, LIGHT)
    (g,) = frontend.measured(page)
    waits = sorted((s for s in g["segs"] if s["kind"] == "wait"), key=lambda s: s["t0"])
    attempts = sorted((s for s in g["segs"] if s["kind"] == "attempt"), key=lambda s: s["t0"])
    assert len(attempts) == 10
    assert len(waits) == 9
    unit = waits[0]["t1"] - waits[0]["t0"]
    nominal = [round((s["t1"] - s["t0"]) / unit) for s in waits]
    assert nominal == scratch.SPEC_WAITS
    widths = [round(s["bar"]["width"], 2) for s in waits]
    say(capsys, f"\n  the nine waits drawn (px): {widths}")
    for i, (a, b) in enumerate(pairwise(widths)):
        if nominal[i + 1] > nominal[i]:
            assert b > a, f"wait {i + 2} ({nominal[i + 1]}s) not wider than wait {i + 1}: {widths}"
        else:
            assert abs(b - a) <= 1, f"waits {i + 1} and {i + 2} are both 30s: {widths}"
    assert axis_problems(g) == []
    assert all(s["labelShown"] for s in g["segs"] if s["label"]), "a label is not shown"


# --- replay and selection --------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.(\d+))?)\s*(ms|s|m(?:in)?|h|d)\b")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_time(text: str) -> tuple[float, float] | None:
    """The first time shown in ``text`` (``12.3s``, ``2m 31s``, ``850ms``), in seconds,
    and half its last shown digit (the rounding it may carry)."""
    m = _DURATION.search(text)
    if m is None:
        return None
    total, half, end = 0.0, 0.0, m.start()
    for part in _DURATION.finditer(text, m.start()):
        if text[end : part.start()].strip():
            break  # the next time shown, not a part of this one ("2m 31s / 2m 31s")
        unit = _UNIT[part.group(3)]
        total += float(part.group(1)) * unit
        half = 0.5 * unit * 10 ** -len(part.group(2) or "")
        end = part.end()
    return total, half


def test_parse_time_reads_axis_formats() -> None:
    assert parse_time("12.3s") == pytest.approx((12.3, 0.05))
    assert parse_time("2m 31s / 2m 31s") == (151.0, 0.5)
    assert parse_time("850ms") == pytest.approx((0.85, 0.0005))
    assert parse_time("t = 0s") == (0.0, 0.5)


def replay_from_zero(page: Any, ids: list[str], timeout: float = 90.0) -> list[dict[str, Any]]:
    """Rewind every timeline to t = 0, press Play on all, wait until all reach the end.

    The end is the run's ``data-end``: ``span.woml-time`` must show it (to the digits it
    shows) and every attempt must be shown again. All play at once, to save time.
    """
    hidden_at_zero = {}
    for tid in ids:
        state = page.eval_on_selector(f"[id='{tid}']", "t => __woml.rewind(t)")
        start = parse_time(state["time"] or "")
        assert start is not None, f"{tid}: span.woml-time shows {state['time']!r}"
        assert start[0] <= start[1], f"{tid}: rewound to {state['time']!r}, not t = 0"
        hidden_at_zero[tid] = state["attempts"] - state["shown"]
    for tid in ids:
        page.locator(f"[id='{tid}'] button.woml-play").click()
    deadline = time.monotonic() + timeout
    waiting = list(ids)
    done: list[dict[str, Any]] = []
    while waiting:
        page.wait_for_timeout(250)
        for tid in list(waiting):
            state = page.eval_on_selector(f"[id='{tid}']", "t => __woml.replayState(t)")
            shown = parse_time(state["time"] or "")
            at_end = shown is not None and abs(shown[0] - state["end"]) <= shown[1] + 1e-9
            if at_end and state["shown"] == state["attempts"]:
                done.append({**state, "hiddenAtZero": hidden_at_zero[tid]})
                waiting.remove(tid)
            elif time.monotonic() > deadline:
                raise AssertionError(
                    f"{tid}: replay from 0 did not reach the run's end ({state['end']}) in "
                    f"{timeout:.0f}s; it shows {state}"
                )
    return done


@pytest.mark.parametrize("name", [SPEC, "04-resume-and-reattach.ipynb"])
def test_play_replays_every_timeline_from_zero_to_the_end(name: str, frontends: Frontends) -> None:
    page = frontends.run("lab", name).page
    ids = page.evaluate("() => __woml.topTimelines(document).map(t => t.id)")
    assert ids, f"{name}: no timelines"
    assert all(ids), f"{name}: a timeline without an id: {ids}"
    states = replay_from_zero(page, ids)
    # Replaying from zero must have hidden something, or the test proved nothing.
    assert any(s["hiddenAtZero"] for s in states), states


def test_clicking_an_attempt_selects_it_and_opens_its_details(frontends: Frontends) -> None:
    from playwright.sync_api import expect

    page = frontends.run("lab", SPEC).page
    timeline = page.locator(".woml-timeline").first
    attempts = timeline.locator(".woml-seg.woml-attempt")
    for n in (3, 1):
        seg = timeline.locator(f".woml-seg.woml-attempt[data-n='{n}']")
        seg.locator("rect.woml-bar").click()  # the bar, as a user aims at it
        expect(seg).to_have_class(re.compile(r"\bwoml-selected\b"))
        expect(timeline.locator(".woml-seg.woml-selected")).to_have_count(1)
        details = timeline.locator(f"details.woml-attempt-details[data-step='poll'][data-n='{n}']")
        expect(details).to_have_attribute("open", "")
        expect(details).to_contain_text("not ready")
    assert attempts.count() == 10


# --- a comparison (spec §10.4) ----------------------------------------------------------


def compared(page: Any) -> Any:
    """The page's one comparison: ``%woml compare``'s output."""
    from playwright.sync_api import expect

    found = page.locator(".woml-timeline.woml-compare")
    expect(found).to_have_count(1)
    return found


def bar_lefts(timeline: Any) -> dict[str, float]:
    """The on-screen left of each attempt's bar, by ``step#n``."""
    found: dict[str, float] = timeline.evaluate(
        """t => Object.fromEntries([...t.querySelectorAll('.woml-seg.woml-attempt')].map(g =>
          [g.dataset.step + '#' + g.dataset.n,
           g.querySelector('rect.woml-bar').getBoundingClientRect().left]))"""
    )
    return found


def test_a_comparison_draws_both_runs_lanes_on_one_axis_labelled_by_run(
    frontends: Frontends,
) -> None:
    page = frontends.run("lab", COMPARE).page
    frontend.set_theme(page, LIGHT)
    timeline = compared(page)
    assert timeline.locator("svg.woml-svg").count() == 1
    assert timeline.locator("svg.woml-svg g.woml-axis").count() == 1
    labels = timeline.locator("text.woml-run-label").evaluate_all(
        "els => els.map(e => e.textContent)"
    )
    for label, run_id in zip(scratch.COMPARE_LABELS, scratch.COMPARE_RUN_IDS, strict=True):
        assert any(t.startswith(f"{label} · run {run_id}") for t in labels), labels
    lefts = bar_lefts(timeline)
    assert sorted(lefts) == sorted(f"{i}/charge#{n}" for i in (1, 2) for n in range(1, 6))
    # One axis: the first attempts start at one x; the exponential run's fifth attempt
    # (after 1 + 2 + 4 + 8 s) is right of the fixed run's (after 4 × 1 s).
    assert abs(lefts["1/charge#1"] - lefts["2/charge#1"]) <= PX
    assert abs(lefts["1/charge#2"] - lefts["2/charge#2"]) <= PX
    assert lefts["2/charge#5"] > lefts["1/charge#5"] + 100
    (g,) = [g for g in frontend.measured(page) if g["status"] == "compared"]
    assert axis_problems(g) == []
    # Selecting an attempt of the second run opens its details, not the first run's.
    seg = timeline.locator(".woml-seg.woml-attempt[data-step='2/charge'][data-n='3']")
    seg.locator("rect.woml-bar").click()
    details = timeline.locator("details.woml-attempt-details[data-step='2/charge'][data-n='3']")
    assert details.get_attribute("open") == ""
    assert timeline.locator("details.woml-attempt-details[open]").count() == 1


def test_play_and_zoom_act_on_every_lane_of_a_comparison(frontends: Frontends) -> None:
    page = frontends.run("lab", COMPARE).page
    timeline = compared(page)
    tid = timeline.get_attribute("id")
    assert tid
    # Play advances one shared t: at 0 both runs' later attempts are hidden, at the
    # end every attempt of both is shown again.
    state = page.eval_on_selector(f"[id='{tid}']", "t => __woml.rewind(t)")
    assert state["shown"] < state["attempts"] - 2, state
    hidden = timeline.evaluate(
        "t => [...t.querySelectorAll('.woml-seg.woml-attempt.woml-replay-hidden')]"
        ".map(g => g.dataset.step)"
    )
    assert {"1/charge", "2/charge"} <= set(hidden), hidden
    (done,) = replay_from_zero(page, [tid])
    assert done["shown"] == done["attempts"] == 10
    # Zoom in: both runs' bars move apart about the same middle, as one track.
    before = bar_lefts(timeline)
    timeline.locator("button[aria-label='zoom in']").click()
    page.wait_for_function(
        "id => document.getElementById(id).getAttribute('data-zoom') !== ''", arg=tid
    )
    after = bar_lefts(timeline)
    for run in ("1", "2"):
        spread = after[f"{run}/charge#2"] - after[f"{run}/charge#1"]
        was = before[f"{run}/charge#2"] - before[f"{run}/charge#1"]
        assert spread > 1.5 * was, (run, was, spread)
    assert abs(after["1/charge#2"] - after["2/charge#2"]) <= PX  # still one axis
    timeline.locator("button[aria-label^='reset zoom']").click()
    page.wait_for_function(
        "id => document.getElementById(id).getAttribute('data-zoom') === ''", arg=tid
    )
    back = bar_lefts(timeline)
    assert all(abs(back[k] - before[k]) <= PX for k in before), (before, back)


@pytest.mark.parametrize(("theme", "file"), [(LIGHT, "compare.png"), (DARK, "compare-dark.png")])
def test_screenshot_of_a_comparison(
    theme: str, file: str, frontends: Frontends, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = frontends.run("lab", COMPARE).page
    frontend.set_theme(page, theme)
    timeline = compared(page)
    viewport = page.viewport_size
    assert viewport is not None
    # Wide enough for the whole drawing: both runs to their ends, without scrolling.
    page.set_viewport_size({"width": 1400, "height": viewport["height"]})
    try:
        page.wait_for_function(
            "el => { const s = el.querySelector('.woml-scroll');"
            " return s.scrollWidth <= s.clientWidth + 1; }",
            arg=timeline.element_handle(), timeout=10_000,
        )
        timeline.scroll_into_view_if_needed()
        page.mouse.move(0, 0)  # no hover effects in the picture
        update = os.environ.get("WOML_UPDATE_SCREENSHOT") == "1"
        shot = DOCS_IMAGES / file if update else tmp_path / file
        shot.parent.mkdir(parents=True, exist_ok=True)
        box = timeline.locator(".woml-replay").bounding_box()
        top = timeline.bounding_box()
        assert box is not None
        assert top is not None
        # The header, the drawing and the Play bar: the details panel below is text.
        page.screenshot(path=str(shot), clip={
            "x": top["x"], "y": top["y"], "width": top["width"],
            "height": box["y"] + box["height"] - top["y"] + 4})
    finally:
        page.set_viewport_size(viewport)
    say(capsys, f"\n  screenshot ({theme}): {shot}")
    assert shot.stat().st_size > 10_000


# --- screenshots -----------------------------------------------------------------------


@pytest.mark.parametrize(("theme", "file"), [(LIGHT, "timeline.png"), (DARK, "timeline-dark.png")])
def test_screenshot_of_the_spec_example(
    theme: str, file: str, frontends: Frontends, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = frontends.run("lab", SPEC).page
    frontend.set_theme(page, theme)
    timeline = page.locator(".woml-timeline").first
    # The same picture whatever ran before: attempt 1 selected, its details open.
    first = timeline.locator(".woml-seg.woml-attempt[data-n='1']")
    if "woml-selected" not in (first.get_attribute("class") or ""):
        first.locator("rect.woml-bar").click()
    timeline.scroll_into_view_if_needed()
    page.mouse.move(0, 0)  # no hover effects in the picture
    update = os.environ.get("WOML_UPDATE_SCREENSHOT") == "1"
    shot = DOCS_IMAGES / file if update else tmp_path / file
    shot.parent.mkdir(parents=True, exist_ok=True)
    timeline.screenshot(path=str(shot))
    say(capsys, f"\n  screenshot ({theme}): {shot}")
    assert shot.stat().st_size > 10_000  # a real picture of the timeline
