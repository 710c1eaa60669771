"""The timeline's behaviour in a real browser (spec §6.3): ``timeline.js`` in headless
Chromium on standalone HTML pages, no Jupyter.

Selecting an attempt opens its details; a finished run replays with Play and a slider
over its time axis, uniformly in drawn x; the readout writes times as the axis does;
timelines on one page are independent; the controls meet WCAG AA in JupyterLab's light
and dark themes (their ``--jp-*`` variables, copied from the installed JupyterLab); the
widget's ES module redraws a live run keeping the selection and sends Cancel once.
Screenshots of a replay half-way go to ``WOML_SCREENSHOT_DIR`` when it is set.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import time
from pathlib import Path
from typing import Any

import pytest
from timeline_runs import CHARGE_POLICY, Recorder, waiting, workflow

import woml_magic as wm
from woml_magic.model import Run
from woml_magic.timeline import interactive_html, render_html, timeline_js, widget_esm
from woml_magic.timeline.axis import format_time

pytestmark = pytest.mark.browser

PLAY_SECONDS = 6.0  # timeline.js PLAY_MS


# --- timelines of real runs -------------------------------------------------------

# charge: #1 and #2 throw after 2s each with 1s waits, #3 succeeds after 22s; email:
# #1 throws at once, a 10-minute wait (an axis break), #2 succeeds after 1s.
DOC = """<step id="charge" retry="3" retry-delay="1s" timeout="1m"><script>
await services.sleep("2s");
if (attempt.number < 3) throw new Error("the API is busy");
await services.sleep("20s");
return {charged: true};
</script></step>
<step id="email" retry="2" retry-delay="10m"><script>
if (attempt.number < 2) throw new Error("mail server down");
await services.sleep("1s");
return "sent";
</script></step>"""


@pytest.fixture(scope="module")
def run() -> Run:
    finished = wm.run(DOC, clock="simulated")
    assert finished.status == "succeeded"
    return finished


@pytest.fixture(scope="module")
def live_run() -> Run:
    return waiting().run


class Axis:
    """The time→x map of a drawn timeline, from its ``data-axis`` knots."""

    def __init__(self, knots: list[list[float]]) -> None:
        self.knots = knots

    def x(self, t: float) -> float:
        k = self.knots
        for (ta, xa), (tb, xb) in itertools.pairwise(k):
            if t <= tb:
                return xa + (t - ta) * (xb - xa) / (tb - ta)
        (ta, xa), (tb, xb) = k[-2], k[-1]
        return xb + (t - tb) * (xb - xa) / (tb - ta)


def axis(page: Any, root: str = "") -> Axis:
    return Axis(json.loads(page.get_attribute(f"{root} svg.woml-svg", "data-axis")))


def drawn(page: Any, root: str = "") -> dict[tuple[str, str, int], dict[str, float]]:
    """(kind, step, n) → the segment's data-t0/t1/x0/x1 as drawn."""
    rows = page.eval_on_selector_all(
        f"{root} .woml-seg",
        """els => els.map(e => [
            ['attempt', 'wait', 'planned-wait', 'planned'].find(
                k => e.classList.contains('woml-' + k)),
            e.dataset.step, +e.dataset.n,
            {t0: +e.dataset.t0, t1: +e.dataset.t1, x0: +e.dataset.x0, x1: +e.dataset.x1}])""",
    )
    return {(kind, step, n): data for kind, step, n, data in rows}


def end_of(page: Any, root: str = "") -> float:
    return float(page.get_attribute(root or ".woml-timeline", "data-end"))


def root_id(bundle_html: str) -> str:
    found = re.search(r' id="(woml-tl-[^"]+)"', bundle_html)
    assert found
    return found.group(1)


def split(bundle_html: str) -> tuple[str, str, str]:
    """An interactive timeline's drawing, inline script and script code."""
    found = re.search(r"<script>(.*)</script>$", bundle_html, re.S)
    assert found
    return bundle_html[: found.start()], found.group(0), found.group(1)


# --- the browser --------------------------------------------------------------------


def seg(root: str, step: str, n: int, kind: str = "attempt") -> str:
    return f'{root} .woml-seg.woml-{kind}[data-step="{step}"][data-n="{n}"]'


def selected(page: Any, root: str = "") -> list[tuple[str, str]]:
    return [
        tuple(x)
        for x in page.eval_on_selector_all(
            f"{root} .woml-seg.woml-selected",
            "els => els.map(e => [e.dataset.step, e.dataset.n])",
        )
    ]


def opened(page: Any, root: str = "") -> list[tuple[str, str]]:
    return [
        tuple(x)
        for x in page.eval_on_selector_all(
            f"{root} details.woml-attempt-details",
            "els => els.filter(e => e.open).map(e => [e.dataset.step, e.dataset.n])",
        )
    ]


def set_slider(page: Any, t: float, root: str = "") -> None:
    page.eval_on_selector(
        f"{root} .woml-slider",
        "(s, t) => { s.value = String(t); s.dispatchEvent(new Event('input', {bubbles: true})); }",
        t,
    )


def visibility(page: Any, selector: str) -> str:
    result: str = page.eval_on_selector(selector, "e => getComputedStyle(e).visibility")
    return result


def width(page: Any, selector: str) -> float:
    result: float = page.eval_on_selector(
        selector, "e => e.querySelector('.woml-bar').width.baseVal.value"
    )
    return result


# --- selection ------------------------------------------------------------------------


def test_clicking_an_attempt_selects_it_alone_and_opens_its_details(
    open_page: Any, run: Run
) -> None:
    page = open_page(interactive_html(run))
    assert selected(page) == []
    assert opened(page) == []
    page.click(seg("", "charge", 1) + " .woml-bar")
    assert selected(page) == [("charge", "1")]
    assert opened(page) == [("charge", "1")]
    page.click(seg("", "email", 2) + " .woml-bar")
    assert selected(page) == [("email", "2")]
    assert opened(page) == [("email", "2")]
    page.click(seg("", "email", 2) + " .woml-bar")  # a second click unselects
    assert selected(page) == []
    assert opened(page) == []


def test_a_label_drawn_beside_its_bar_selects_that_attempt(open_page: Any) -> None:
    # spec §6.3: labels that do not fit a bar go beside it; they stay clickable (the
    # waits they are drawn over are painted first). The spec example: ten attempts.
    spec = wm.run(
        '<step id="charge" retry="10" retry-backoff="exponential" retry-delay="1s" '
        'retry-max-delay="30s"><script>throw new Error("busy");</script></step>',
        clock="simulated",
    )
    page = open_page(interactive_html(spec))
    beside = page.eval_on_selector_all(
        ".woml-seg.woml-attempt text.woml-label:not(.woml-in)",
        "els => els.map(e => e.closest('.woml-seg').dataset.n)",
    )
    assert len(beside) >= 5
    for n in beside:
        # no force: Playwright fails if another element would receive the click
        page.click(f'.woml-seg.woml-attempt[data-n="{n}"] text.woml-label', timeout=2000)
        assert selected(page) == [("charge", n)]
        page.click(f'.woml-seg.woml-attempt[data-n="{n}"] text.woml-label', timeout=2000)


def test_waits_are_not_selectable(open_page: Any, run: Run) -> None:
    page = open_page(interactive_html(run))
    page.click(seg("", "charge", 1, "wait") + " .woml-bar", force=True)
    assert selected(page) == []


@pytest.mark.parametrize("key", ["Enter", " "])
def test_enter_and_space_select_the_focused_attempt(open_page: Any, run: Run, key: str) -> None:
    page = open_page(interactive_html(run))
    page.focus(seg("", "charge", 3))
    page.keyboard.press(key)
    assert selected(page) == [("charge", "3")]
    assert opened(page) == [("charge", "3")]
    assert page.evaluate("window.scrollY") == 0  # Space did not scroll the page


def test_the_selected_details_are_scrolled_into_view(open_page: Any, run: Run) -> None:
    page = open_page(interactive_html(run))
    page.set_viewport_size({"width": 1000, "height": 260})
    assert page.evaluate("window.scrollY") == 0
    page.click(seg("", "email", 1) + " .woml-bar")
    page.wait_for_function(
        """() => { const r = document.querySelector(
            'details.woml-attempt-details[data-step="email"][data-n="1"] > summary')
            .getBoundingClientRect();
            return scrollY > 0 && r.top >= 0 && r.bottom <= innerHeight; }"""
    )


def test_selection_works_on_a_live_run_too(open_page: Any, live_run: Run) -> None:
    page = open_page(interactive_html(live_run))
    page.click(seg("", "charge", 1) + " .woml-bar")
    assert selected(page) == [("charge", "1")]
    assert opened(page) == [("charge", "1")]


# --- replay ---------------------------------------------------------------------------


def test_a_finished_run_has_play_a_slider_over_its_time_and_a_readout(
    open_page: Any, run: Run
) -> None:
    page = open_page(interactive_html(run))
    end = end_of(page)
    assert end == pytest.approx(run.ended_at, abs=1e-5)
    assert page.inner_text(".woml-play").strip().endswith("Play")
    assert page.get_attribute(".woml-slider", "min") == "0"
    assert float(page.get_attribute(".woml-slider", "max")) == end
    assert page.inner_text(".woml-time") == format_time(end)
    assert page.eval_on_selector(".woml-slider", "s => +s.value") == end


def test_play_and_pause_are_one_width_so_the_slider_stays_put(open_page: Any, run: Run) -> None:
    # spec §6.3 (issue 21): "Play/Pause changes width and shifts the slider".
    page = open_page(interactive_html(run))
    box = "e => { const r = e.getBoundingClientRect(); return [r.left, r.width]; }"
    play_w = page.eval_on_selector(".woml-play", box)[1]
    slider_x = page.eval_on_selector(".woml-slider", box)[0]
    page.click(".woml-play")
    assert page.inner_text(".woml-play").strip().endswith("Pause")
    assert page.eval_on_selector(".woml-play", box)[1] == pytest.approx(play_w, abs=0.01)
    assert page.eval_on_selector(".woml-slider", box)[0] == pytest.approx(slider_x, abs=0.01)
    page.click(".woml-play")  # pause: the page's check of errors runs on a still page


def test_the_http_table_fits_an_800px_output_with_the_verdict_in_view(open_page: Any) -> None:
    # spec §6.3 (issue 21): the table was 974 px inside an 828 px output and the
    # server's verdict column was cut off. A long URL, key and headers must wrap.
    r = Recorder(workflow(("charge", CHARGE_POLICY)))
    r.step("charge", 0.0)
    r.start("charge", 1, 0.0)
    long_url = "http://127.0.0.1:9/v1/customers/cus_" + "x" * 120 + "/charges?expand=" + "y" * 80
    r.call("charge", 1, 0.002, url=long_url, headers={"X-Trace": "t" * 200})
    r.finish("charge", 1, 0.05, "succeeded", result={"id": 1}, explanation="ok")
    r.step_done("charge", 0.05, "succeeded", {"id": 1})
    r.run_done(0.05, "succeeded")
    page = open_page(f'<div id="out" style="width:800px">{interactive_html(r.run)}</div>')
    page.click(seg("", "charge", 1))
    sizes = page.eval_on_selector(
        "#out",
        """out => {
            const t = out.querySelector('details[open] table.woml-calls');
            const cells = [...t.querySelectorAll('tr:last-child td')];
            const box = (e) => e.getBoundingClientRect();
            const tables = [...out.querySelectorAll('table')].map((e) => box(e).right);
            const steps = out.querySelector('.woml-steps');
            return {out: box(out).right, table: Math.max(...tables), scroll: steps.scrollWidth,
                    client: steps.clientWidth, verdict: box(cells[5]).right,
                    verdictText: cells[5].textContent};
        }""",
    )
    assert sizes["table"] <= sizes["out"] + 0.5, sizes
    assert sizes["verdict"] <= sizes["out"] + 0.5, sizes
    assert sizes["scroll"] <= sizes["client"], sizes
    assert sizes["verdictText"].strip()


def test_a_running_run_has_no_replay_controls(open_page: Any, live_run: Run) -> None:
    page = open_page(interactive_html(live_run))
    assert page.query_selector(".woml-play") is None
    assert page.inner_html(".woml-replay") == ""


def test_the_slider_at_t_hides_later_segments_and_cuts_the_running_one(
    open_page: Any, run: Run
) -> None:
    page = open_page(interactive_html(run))
    segs, ax = drawn(page), axis(page)
    a2 = segs["attempt", "charge", 2]
    t = (a2["t0"] + a2["t1"]) / 2
    set_slider(page, t)
    first = seg("", "charge", 1)
    assert visibility(page, first) == "visible"
    assert width(page, first) == pytest.approx(
        segs["attempt", "charge", 1]["x1"] - segs["attempt", "charge", 1]["x0"], abs=0.1
    )
    assert visibility(page, seg("", "charge", 1, "wait")) == "visible"
    running = seg("", "charge", 2)
    assert visibility(page, running) == "visible"
    assert width(page, running) == pytest.approx(ax.x(t) - a2["x0"], abs=0.6)
    assert "woml-replay-running" in page.get_attribute(running, "class")
    for later in (seg("", "charge", 2, "wait"), seg("", "charge", 3), seg("", "email", 1)):
        assert visibility(page, later) == "hidden"
    assert f"replay at t = {format_time(t)}" in page.inner_text(".woml-header")
    assert page.inner_text(".woml-time") == format_time(t)

    wait = segs["wait", "email", 1]  # the 10-minute wait, drawn as an axis break
    t = wait["t0"] + 300
    set_slider(page, t)
    line = page.eval_on_selector(seg("", "email", 1, "wait") + " line", "l => l.x2.baseVal.value")
    assert line == pytest.approx(ax.x(t), abs=0.6)
    assert wait["x0"] < line < wait["x1"]
    assert "woml-replay-running" not in page.get_attribute(running, "class")
    assert visibility(page, seg("", "email", 2)) == "hidden"

    set_slider(page, end_of(page))  # the end: the whole run again
    assert visibility(page, seg("", "email", 2)) == "visible"
    assert width(page, running) == pytest.approx(a2["x1"] - a2["x0"], abs=0.1)
    assert "replay at" not in page.inner_text(".woml-header")
    assert page.query_selector_all(".woml-replay-running, .woml-replay-hidden") == []


def test_planned_segments_are_hidden_before_the_end(open_page: Any) -> None:
    # A finished run shows no planned attempts; a drawing that has them hides them
    # until the end of the replay.
    page = open_page(
        interactive_html(waiting().run).replace('data-status="running"', 'data-status="failed"', 1)
    )
    planned = seg("", "charge", 2, "planned")
    assert visibility(page, planned) == "visible"
    assert end_of(page) == pytest.approx(0.12)
    set_slider(page, 0.05)
    assert visibility(page, planned) == "hidden"


def test_a_cut_attempt_says_running_not_its_outcome(open_page: Any, run: Run) -> None:
    page = open_page(interactive_html(run))
    a3 = drawn(page)["attempt", "charge", 3]
    label = seg("", "charge", 3) + " .woml-label"
    whole = page.text_content(label)
    assert "succeeded" in whole
    set_slider(page, a3["t0"] + 0.8 * (a3["t1"] - a3["t0"]))
    assert page.text_content(label) == "#3 running"
    assert visibility(page, label) == "visible"
    set_slider(page, end_of(page))
    assert page.text_content(label) == whole


def test_the_slider_keys_move_along_the_drawn_axis(open_page: Any, run: Run) -> None:
    page = open_page(interactive_html(run))
    ax, end = axis(page), end_of(page)
    page.focus(".woml-slider")
    page.keyboard.press("Home")
    assert page.inner_text(".woml-time") == "0s"
    page.keyboard.press("ArrowRight")  # 1/50 of the drawn width
    t = page.eval_on_selector(".woml-slider", "s => +s.value")
    assert ax.x(t) - ax.x(0) == pytest.approx((ax.x(end) - ax.x(0)) / 50)
    page.keyboard.press("End")
    assert page.inner_text(".woml-time") == format_time(end)


def test_play_from_zero_reaches_the_end_and_reveals_every_segment(open_page: Any, run: Run) -> None:
    page = open_page(interactive_html(run))
    end = end_of(page)
    set_slider(page, 0)
    assert page.query_selector_all(".woml-replay-hidden")
    began = time.monotonic()
    page.click(".woml-play")
    assert page.inner_text(".woml-play").strip().endswith("Pause")
    page.wait_for_function(
        "() => document.querySelector('.woml-play').textContent.endsWith('Play')",
        timeout=PLAY_SECONDS * 3 * 1000,
    )
    took = time.monotonic() - began
    assert PLAY_SECONDS * 0.8 < took < PLAY_SECONDS * 2
    assert page.query_selector_all(".woml-replay-hidden, .woml-replay-running") == []
    assert page.inner_text(".woml-time") == format_time(end)
    assert page.eval_on_selector(".woml-slider", "s => +s.value") == end


def test_play_moves_uniformly_in_drawn_x_through_axis_breaks(open_page: Any, run: Run) -> None:
    page = open_page(interactive_html(run))
    ax, end = axis(page), end_of(page)
    set_slider(page, 0)
    samples = page.evaluate(
        """() => new Promise(done => {
            const out = [], slider = document.querySelector('.woml-slider');
            const t0 = performance.now();
            document.querySelector('.woml-play').click();
            const look = () => {
                out.push([performance.now() - t0, +slider.value]);
                if (+slider.value < +slider.max) requestAnimationFrame(look); else done(out);
            };
            requestAnimationFrame(look);
        })"""
    )
    span, total = ax.x(end) - ax.x(0), samples[-1][0]
    # Drawn x grows linearly with wall time: the ten minutes of the break pass in the
    # break's share of the drawn width, not in their share of the run's time.
    worst = max(abs((ax.x(t) - ax.x(0)) / span - ms / total) for ms, t in samples)
    assert worst < 0.1
    mid = next(t for ms, t in samples if ms >= total / 2)
    assert mid < 30  # half-way in drawn x is in charge #3, not at half the run's time


def test_play_at_the_end_restarts_from_zero_and_pause_stops(open_page: Any, run: Run) -> None:
    page = open_page(interactive_html(run))
    page.click(".woml-play")
    page.wait_for_timeout(300)
    page.click(".woml-play")  # pause
    t = page.eval_on_selector(".woml-slider", "s => +s.value")
    assert 0 < t < 10
    assert page.inner_text(".woml-play").strip().endswith("Play")
    page.wait_for_timeout(200)
    assert page.eval_on_selector(".woml-slider", "s => +s.value") == t
    page.click(".woml-play")  # play on from the slider's position
    page.wait_for_timeout(100)
    assert page.eval_on_selector(".woml-slider", "s => +s.value") > t


def test_play_is_keyboard_accessible(open_page: Any, run: Run) -> None:
    page = open_page(interactive_html(run))
    page.focus(".woml-play")
    page.keyboard.press("Enter")
    page.wait_for_timeout(150)
    assert page.eval_on_selector(".woml-slider", "s => +s.value") < end_of(page)
    page.keyboard.press(" ")
    assert page.inner_text(".woml-play").strip().endswith("Play")


# --- the readout is the axis's format ------------------------------------------------

TIMES = [
    0, -0.0, -1.5, 1e-9, 0.00025, 0.000251, 0.0004, 0.0004999, 0.0005, 0.0015, 0.001,
    0.006, 0.01, 0.1, 0.12, 0.25, 0.0625, 0.1875, 1.0625, 2.5625, 1, 1.5, 1.25, 1.125,
    2.0005, 12.3, 33.3, 59.99, 59.9994, 59.9995, 59.9996, 60, 60.04, 60.05, 60.25, 90,
    125.5, 150.55, 599.95, 3599.94, 3599.95, 3599.999, 3600, 3600.5, 3601.5, 3605, 3780,
    86400.25, 90061, 1 / 3, 2 / 3, 0.3 + 0.6, 1e6 + 0.0625,
]  # fmt: skip


def test_the_time_readout_is_formatted_exactly_like_the_axis(open_page: Any) -> None:
    rng = random.Random(63)
    times = TIMES + [10 ** rng.uniform(-5, 6) for _ in range(400)]
    times += [round(rng.uniform(0, 4000), rng.choice([1, 2, 3, 4])) for _ in range(400)]
    script = f"<script>{timeline_js()}\nwindow.formatTime = womlTimeline.formatTime;</script>"
    page = open_page(script)
    got = page.evaluate("ts => ts.map(t => formatTime(t))", times)
    assert got == [format_time(t) for t in times]


def test_the_slider_readout_matches_python_at_any_position(open_page: Any, run: Run) -> None:
    page = open_page(interactive_html(run))
    for t in (0.0625, 1.5, 7.125, 20 / 3, 95.25, 600.04):
        set_slider(page, t)
        shown = page.eval_on_selector(".woml-slider", "s => +s.value")
        assert page.inner_text(".woml-time") == format_time(shown)


# --- scope ----------------------------------------------------------------------------


def test_two_timelines_on_one_page_do_not_interfere(open_page: Any, run: Run) -> None:
    one, two = interactive_html(run), interactive_html(run)
    page = open_page(f"{one}<p>between</p>{two}")
    a, b = (f"#{root_id(h)}" for h in (one, two))
    assert a != b
    assert len(page.query_selector_all(".woml-play")) == 2
    page.click(seg(a, "charge", 1) + " .woml-bar")
    page.click(seg(b, "charge", 2) + " .woml-bar")
    assert selected(page, a) == [("charge", "1")]
    assert selected(page, b) == [("charge", "2")]
    assert opened(page, a) == [("charge", "1")]
    set_slider(page, 4, a)
    assert visibility(page, seg(a, "email", 1)) == "hidden"
    assert visibility(page, seg(b, "email", 1)) == "visible"
    assert page.inner_text(f"{b} .woml-time") == format_time(end_of(page, b))


def test_the_script_leaks_no_global_and_running_it_twice_is_harmless(
    open_page: Any, run: Run
) -> None:
    bundle = interactive_html(run)
    page = open_page(bundle)
    assert page.evaluate("typeof womlTimeline") == "undefined"
    # A front end that re-runs the output's scripts: the same code, the same root.
    page.add_script_tag(content=split(bundle)[2])
    assert len(page.query_selector_all(".woml-play")) == 1
    assert len(page.query_selector_all(".woml-replay-cursor")) == 1
    assert len(page.query_selector_all(".woml-replay-at")) == 1
    page.click(seg("", "charge", 2) + " .woml-bar")  # one listener: the click toggles once
    assert selected(page) == [("charge", "2")]


def test_a_saved_copy_of_a_filled_page_gets_one_set_of_controls(open_page: Any, run: Run) -> None:
    bundle = interactive_html(run)
    filled = open_page(bundle).evaluate("document.querySelector('.woml-timeline').outerHTML")
    assert "woml-play" in filled
    page = open_page(filled + split(bundle)[1])
    for control in (".woml-play", ".woml-slider", ".woml-replay-at", ".woml-replay-cursor"):
        assert len(page.query_selector_all(control)) == 1, control


def test_the_script_finds_its_root_by_id_when_moved(open_page: Any, run: Run) -> None:
    # Some front ends move scripts out of the output before running them.
    drawing, script, _ = split(interactive_html(run))
    page = open_page(f"<div>{drawing}</div><p>elsewhere</p>{script}")
    assert page.query_selector(".woml-play") is not None


def test_the_interactive_html_is_the_drawing_then_a_well_formed_script(run: Run) -> None:
    from lxml import etree

    bundle = interactive_html(run)
    drawing, _, _ = split(bundle)
    assert drawing.startswith('<div class="woml-timeline"')
    assert drawing.count("<script") == 0
    etree.fromstring(f"<div>{bundle}</div>".encode())


# --- themes ---------------------------------------------------------------------------

CONTRAST = """el => {
    const parse = s => {
        const m = s.match(/rgba?\\(([^)]+)\\)/);
        if (!m) throw new Error('colour ' + s);
        const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
        return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
    };
    const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3]));
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
        layers.push(parse(getComputedStyle(e).backgroundColor));
    }
    let bg = [255, 255, 255];
    for (const c of layers.reverse()) bg = over(c, bg);
    const fg = over(parse(getComputedStyle(el).color), bg);
    const lum = c => c.map(v => v / 255)
        .map(v => v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4))
        .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    return (hi + 0.05) / (lo + 0.05);
}"""


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_controls_text_meets_wcag_aa_in_light_and_dark(
    open_page: Any, run: Run, theme: str
) -> None:
    page = open_page(interactive_html(run), theme)
    set_slider(page, 4)
    for sel in (".woml-play", ".woml-time", ".woml-time-end", ".woml-replay-at"):
        ratio = page.eval_on_selector(sel, CONTRAST)
        assert ratio >= 4.5, f"{sel} in {theme}: contrast {ratio:.2f}"
    page.hover(".woml-play")
    assert page.eval_on_selector(".woml-play", CONTRAST) >= 4.5


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_screenshot_of_a_replay_half_way(
    open_page: Any, run: Run, theme: str, tmp_path: Path
) -> None:
    page = open_page(interactive_html(run), theme)
    page.click(seg("", "charge", 2) + " .woml-bar")
    a3 = drawn(page)["attempt", "charge", 3]
    set_slider(page, (a3["t0"] + a3["t1"]) / 2)
    page.focus(".woml-slider")
    folder = Path(os.environ.get("WOML_SCREENSHOT_DIR") or tmp_path)
    shot = folder / f"timeline-replay-{theme}.png"
    page.locator(".woml-timeline").first.screenshot(path=str(shot))
    assert shot.stat().st_size > 1000


# --- the widget's ES module with a stand-in model ------------------------------------

MOUNT = """async ({src, html}) => {
    const mod = await import(URL.createObjectURL(new Blob([src], {type: 'text/javascript'})));
    const state = {html, status: 'running', cancellable: true, cancelling: false};
    const handlers = {};
    const sent = [];
    const model = {
        get: k => state[k],
        on: (name, fn) => (handlers[name] = handlers[name] || []).push(fn),
        off: (name, fn) => { handlers[name] = (handlers[name] || []).filter(f => f !== fn); },
        send: msg => sent.push(msg),
    };
    const el = document.createElement('div');
    document.body.prepend(el);
    const cleanup = mod.default.render({model, el});
    window.w = {
        sent, handlers, cleanup, el,
        set(k, v) { state[k] = v; (handlers['change:' + k] || []).forEach(f => f()); },
    };
}"""


@pytest.fixture
def widget_page(open_page: Any, live_run: Run) -> Any:
    page = open_page("")
    page.evaluate(MOUNT, {"src": widget_esm(), "html": render_html(live_run)})
    return page


def test_the_widget_draws_its_html_and_keeps_the_selection_across_redraws(
    widget_page: Any,
) -> None:
    page = widget_page
    assert page.query_selector(".woml-widget .woml-timeline") is not None
    page.click(seg(".woml-widget", "charge", 1) + " .woml-bar")
    page.focus(seg(".woml-widget", "charge", 1))
    r = waiting()
    r.start("charge", 2, 1.12)
    page.evaluate("html => w.set('html', html)", render_html(r.run))
    assert page.query_selector(seg(".woml-widget", "charge", 2)) is not None
    assert selected(page) == [("charge", "1")]
    assert opened(page) == [("charge", "1")]
    assert page.evaluate("document.activeElement.dataset.n") == "1"
    assert len(page.query_selector_all(".woml-widget .woml-timeline")) == 1


def test_the_widget_cancel_button_sends_cancel_once(widget_page: Any) -> None:
    page = widget_page
    button = ".woml-widget .woml-cancel"
    assert page.is_visible(button)
    assert page.inner_text(button) == "Cancel"
    page.click(button)
    page.click(button, force=True)
    assert page.evaluate("w.sent") == [{"type": "cancel"}]
    assert page.inner_text(button) == "Cancelling…"
    assert page.is_disabled(button)
    page.evaluate("w.set('status', 'failed')")
    assert not page.is_visible(button)


def test_the_widget_shows_cancelling_when_the_kernel_says_so(widget_page: Any) -> None:
    page = widget_page
    page.evaluate("w.set('cancelling', true)")
    assert page.inner_text(".woml-widget .woml-cancel") == "Cancelling…"


def test_the_widget_cancel_button_works_again_when_cancelling_failed(widget_page: Any) -> None:
    page = widget_page
    page.click(".woml-widget .woml-cancel")
    page.evaluate("w.set('cancelling', true); w.set('cancelling', false)")
    assert page.inner_text(".woml-widget .woml-cancel") == "Cancel"
    page.click(".woml-widget .woml-cancel")
    assert page.evaluate("w.sent.length") == 2


def test_the_widget_cancel_button_shows_only_when_cancellable(widget_page: Any) -> None:
    page = widget_page
    page.evaluate("w.set('cancellable', false)")
    assert not page.is_visible(".woml-widget .woml-cancel")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_cancel_button_meets_wcag_aa(open_page: Any, live_run: Run, theme: str) -> None:
    page = open_page("", theme)
    page.evaluate(MOUNT, {"src": widget_esm(), "html": render_html(live_run)})
    assert page.eval_on_selector(".woml-cancel", CONTRAST) >= 4.5
    page.click(".woml-cancel")
    assert page.eval_on_selector(".woml-cancel", CONTRAST) >= 4.5


def test_the_widget_cleanup_removes_its_listeners(widget_page: Any) -> None:
    page = widget_page
    page.evaluate("w.cleanup()")
    assert page.evaluate("Object.values(w.handlers).every(list => list.length === 0)")


# --- the policy in other engines: tabs (spec §11) ---------------------------------------


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_policy_in_other_engines_is_tabs_kept_across_a_live_redraw(
    open_page: Any, live_run: Run, theme: str
) -> None:
    """The script puts a tab strip over each step's targets: one tab per target, the
    first shown; click, arrows (round), Home and End pick one; its text meets WCAG AA;
    a live redraw keeps the section open, its tab and the focus."""
    from woml_magic.policy_targets import translate_all
    from woml_magic.timeline.details import TARGET_NAMES

    page = open_page("", theme)
    page.evaluate(MOUNT, {"src": widget_esm(), "html": render_html(live_run)})
    box = '.woml-widget details.woml-policy-targets[data-step="charge"]'
    translations = translate_all(live_run.steps["charge"].step.policy)
    page.click(box + " > summary")

    def tabs() -> list[list[Any]]:
        rows: list[list[Any]] = page.eval_on_selector_all(
            box + " > .woml-target-tabs > .woml-target-tab",
            """ts => ts.map(t => [t.textContent, t.getAttribute('role'),
                t.getAttribute('aria-selected'), t.tabIndex,
                document.getElementById(t.getAttribute('aria-controls')).hidden])""",
        )
        return rows

    labels = [
        f"{TARGET_NAMES[t]} · {'same' if x.same else 'differs'}" for t, x in translations.items()
    ]
    assert tabs() == [
        [label, "tab", str(i == 0).lower(), 0 if i == 0 else -1, i != 0]
        for i, label in enumerate(labels)
    ]

    def shown() -> list[str]:
        result: list[str] = page.eval_on_selector_all(
            box + " > .woml-policy-target",
            "ps => ps.filter(p => p.offsetParent !== null).map(p => p.dataset.target)",
        )
        return result

    assert shown() == ["temporal"]
    page.click(box + ' .woml-target-tab[data-target="tenacity"]')
    assert shown() == ["tenacity"]
    code = page.text_content(box + ' .woml-policy-target[data-target="tenacity"] pre code')
    assert code == translations["tenacity"].code
    for key, target in [
        ("ArrowRight", "stamina"),
        ("ArrowRight", "temporal"),
        ("End", "stamina"),
        ("Home", "temporal"),
        ("ArrowLeft", "stamina"),
    ]:
        page.keyboard.press(key)
        assert shown() == [target], key
        assert page.evaluate("document.activeElement.dataset.target") == target

    for sel in (
        box + ' .woml-target-tab[aria-selected="true"]',
        box + ' .woml-target-tab[aria-selected="false"]',
        box + " .woml-policy-target:not([hidden]) .woml-target-waits",
        box + " .woml-policy-target:not([hidden]) .woml-same",
        box + " .woml-policy-target:not([hidden]) code",
        box + " .woml-policy-target:not([hidden]) li",
    ):
        ratio = page.eval_on_selector(sel, CONTRAST)
        assert ratio >= 4.5, f"{sel} in {theme}: contrast {ratio:.2f}"

    r = waiting()
    r.start("charge", 2, 1.12)
    page.evaluate("html => w.set('html', html)", render_html(r.run))
    assert page.eval_on_selector(box, "d => d.open")
    assert shown() == ["stamina"]
    assert page.evaluate("document.activeElement.dataset.target") == "stamina"
    assert len(page.query_selector_all(box + " .woml-target-tabs")) == 1
    email = '.woml-widget details.woml-policy-targets[data-step="email"]'
    assert not page.eval_on_selector(email, "d => d.open")


# --- zoom and pan (spec §6.3, issue 21) ------------------------------------------------

PAGE_JS = Path(__file__).parent / "browser" / "page.js"


def wait_widths(page: Any) -> list[float]:
    """The drawn width on screen of each wait of the page's timeline, in time order."""
    rows = page.eval_on_selector_all(
        ".woml-seg.woml-wait",
        "els => els.map(e => [+e.dataset.t0, e.querySelector('rect.woml-bar')"
        ".getBoundingClientRect().width])",
    )
    return [round(w, 1) for _, w in sorted(rows)]


def track_width(page: Any) -> float:
    """How wide the track is drawn now (stretched to fill the output, spec §6.3)."""
    a, b = (float(v) for v in (page.get_attribute(".woml-timeline", "data-track") or "").split())
    return b - a


def zoom_state(page: Any) -> str | None:
    state: str | None = page.get_attribute(".woml-timeline", "data-zoom")
    return state


def screen_x(page: Any, t: float) -> float:
    """The page x where the drawing puts time ``t`` now (stretched to fit, zoomed)."""
    x: float = page.eval_on_selector(
        "svg.woml-svg",
        "(svg, x) => { const m = (svg.querySelector('g.woml-zoom') || svg).getScreenCTM();"
        " return m.e + m.a * x; }",
        axis(page).x(t),
    )
    return x


def test_zooming_the_spec_example_to_its_first_10s_draws_its_waits_true_to_time(
    open_page: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # spec §3.1's example: waits of 1, 2, 4, 8, 16, 30, 30, 30, 30 s. At the default zoom
    # the 1 s wait is 2 px wide; zoomed to its first 10 s every second is 78 px.
    from timeline_runs import retried

    page = open_page(interactive_html(retried().run))
    default = wait_widths(page)
    page.eval_on_selector(".woml-timeline", "r => r._womlTimeline.zoomTime(0, 10)")
    zoomed = wait_widths(page)
    with capsys.disabled():
        print(f"\nspec example wait widths, default zoom (px): {default}")
        print(f"spec example wait widths, zoomed to 0–10 s (px): {zoomed}")
    # Zoomed, the track (its width: the axis's first to last knot) holds 10 s.
    per_second = track_width(page) / 10
    assert default[0] < 3  # unreadable unzoomed
    # Zoomed: each wait of the first 10 s is as long as its seconds say (the bar of the
    # attempt before it, at its least width of 3 px, takes its first pixels).
    for width, seconds in zip(zoomed[:3], (1, 2, 4), strict=True):
        assert width + 3 == pytest.approx(seconds * per_second, abs=1.5), (zoomed, per_second)
    assert zoomed[1] / zoomed[0] == pytest.approx((2 * per_second - 3) / (per_second - 3), rel=0.02)
    assert zoom_state(page)


def test_dragging_across_the_drawing_zooms_there_and_a_double_click_resets(
    open_page: Any, run: Run
) -> None:
    page = open_page(interactive_html(run))
    y = page.eval_on_selector("svg.woml-svg", "s => s.getBoundingClientRect().top + 60")
    x0, x1 = screen_x(page, 0), screen_x(page, 10)
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, y, steps=4)
    page.mouse.move(x1, y, steps=4)
    page.mouse.up()
    state = zoom_state(page)
    assert state, "a drag across the drawing zooms to it"
    a, b = (float(v) for v in state.split())
    assert a == pytest.approx(axis(page).x(0), abs=1.0)
    assert b == pytest.approx(axis(page).x(10), abs=1.0)
    assert selected(page) == []  # the drag ended on an attempt: not a click on it
    # Clicking an attempt still selects it, zoomed.
    page.click(seg("", "charge", 2))
    assert selected(page) == [("charge", "2")]
    page.dblclick("svg.woml-svg", position={"x": 300, "y": 5})
    assert zoom_state(page) == ""


def test_the_zoom_buttons_work_from_the_keyboard(open_page: Any, run: Run) -> None:
    page = open_page(interactive_html(run))
    button = ".woml-zoom-controls button[aria-label='{}']".format
    assert page.is_disabled(button("reset zoom (or double-click the drawing)"))
    page.focus(button("zoom in"))
    page.keyboard.press("Enter")
    a, b = (float(v) for v in (zoom_state(page) or "").split())
    full = axis(page).knots[-1][1] - axis(page).knots[0][1]
    assert b - a == pytest.approx(full / 2, rel=0.01)
    assert not page.is_disabled(button("earlier"))  # zoomed about the middle
    page.focus(button("later"))
    page.keyboard.press("Enter")
    a2, _ = (float(v) for v in (zoom_state(page) or "").split())
    assert a2 > a
    page.focus(button("reset zoom (or double-click the drawing)"))
    page.keyboard.press("Enter")
    assert zoom_state(page) == ""


def test_zoomed_texts_keep_their_size_and_never_collide(open_page: Any) -> None:
    # Zooming scales time, not text: every label keeps its height and width, and the
    # texts in view (the clip hides the rest) keep clear of each other.
    from timeline_runs import retried

    page = open_page(interactive_html(retried().run))
    page.add_script_tag(path=str(PAGE_JS))
    sizes = (
        "() => Object.fromEntries([...document.querySelectorAll('svg.woml-svg text.woml-label')]"
        ".map(t => [t.textContent, [t.getBoundingClientRect().width,"
        " t.getBoundingClientRect().height]]))"
    )
    before = page.evaluate(sizes)
    for t0, t1 in ((0, 10), (0, 2), (20, 40), (100, 131), (0, 131)):
        page.eval_on_selector(".woml-timeline", f"r => r._womlTimeline.zoomTime({t0}, {t1})")
        for text, (w, h) in page.evaluate(sizes).items():
            if text in before:
                assert (w, h) == pytest.approx(before[text], abs=0.6), (t0, t1, text)
        found = page.evaluate("() => __woml.textCollisions(document.querySelector('svg.woml-svg'))")
        assert found == [], (t0, t1, found)


def test_a_replay_while_zoomed_cuts_at_t_true_to_the_zoomed_axis(open_page: Any) -> None:
    from timeline_runs import retried

    page = open_page(interactive_html(retried().run))
    page.eval_on_selector(".woml-timeline", "r => r._womlTimeline.zoomTime(0, 10)")
    per_second = track_width(page) / 10
    set_slider(page, 0.5)  # half-way through the 1 s wait after attempt 1
    first = wait_widths(page)[0]
    assert first + 3 == pytest.approx((0.5 - 0.006) * per_second, abs=1.5)
    set_slider(page, 131.1)
    expected = [s * per_second - 3 for s in (1, 2, 4)]  # as zoomed, the replay at its end
    assert wait_widths(page)[:3] == pytest.approx(expected, abs=1.5)


def test_the_drawing_fills_a_wide_output_and_follows_a_resize(open_page: Any) -> None:
    # spec §6.3 (issue 21): "the drawing stays 946 px wide even on a 1920 px screen".
    from timeline_runs import retried

    page = open_page(interactive_html(retried().run), width=1600)
    natural = axis(page).knots[-1][1] - axis(page).knots[0][1]
    box = "s => [s.getBoundingClientRect().width, s.parentElement.clientWidth]"
    svg_w, room = page.eval_on_selector("svg.woml-svg", box)
    assert svg_w == pytest.approx(room, abs=1.5)  # fills the output
    assert track_width(page) > natural + 500
    label = "t => t.getBoundingClientRect().height"
    heights = page.eval_on_selector_all("svg.woml-svg text", f"ts => ts.map({label})")
    assert min(h for h in heights if h > 0) >= 13.5  # 12 px text, not stretched
    # Attempts stay true to time across the stretched track.
    x = page.eval_on_selector_all(
        ".woml-seg.woml-attempt rect.woml-bar", "rs => rs.map(r => r.getBoundingClientRect().left)"
    )
    assert (x[2] - x[0]) / (x[1] - x[0]) == pytest.approx(3.012 / 1.006, rel=0.02)
    page.set_viewport_size({"width": 1200, "height": 700})
    page.wait_for_function(
        "() => Math.abs(document.querySelector('svg.woml-svg').getBoundingClientRect().width"
        " - document.querySelector('svg.woml-svg').parentElement.clientWidth) < 1.5"
    )
    page.set_viewport_size({"width": 700, "height": 700})  # narrower than the drawing
    page.wait_for_function(
        "() => document.querySelector('.woml-timeline').dataset.track.split(' ')"
        f".map(Number).reduce((a, b) => b - a) < {natural + 0.5}"
    )
    scroll = page.eval_on_selector(".woml-scroll", "d => [d.scrollWidth, d.clientWidth]")
    assert scroll[0] > scroll[1]  # it scrolls sideways, text stays 12 px
    heights = page.eval_on_selector_all("svg.woml-svg text", f"ts => ts.map({label})")
    assert min(h for h in heights if h > 0) >= 13.5


def test_the_first_tick_label_is_whole_until_the_track_is_zoomed(open_page: Any, run: Run) -> None:
    # The zoom's clip keeps zoomed content off the step column; unzoomed (an output
    # narrower than the drawing: nothing stretched) it must not cut the axis's own first
    # tick label, "0s", centred on the track's start.
    page = open_page(interactive_html(run))
    page.set_viewport_size({"width": 700, "height": 800})
    page.wait_for_function(
        "() => !document.querySelector('.woml-timeline').hasAttribute('data-track')"
        " || document.querySelector('g.woml-zoom').getAttribute('transform') === ''"
    )
    clip_x = "() => +document.querySelector('g.woml-zoom-clip > clipPath > rect').getAttribute('x')"
    tick_x = (
        "() => [...document.querySelectorAll('g.woml-axis text.woml-tick')]"
        ".find(t => t.textContent === '0s').getBBox().x"
    )
    assert page.evaluate(tick_x) < 150  # it reaches into the step column's last px
    assert page.evaluate(clip_x) <= page.evaluate(tick_x)
    page.eval_on_selector(".woml-timeline", "r => r._womlTimeline.zoomTime(0, 10)")
    assert page.evaluate(clip_x) == pytest.approx(150 - 3)


def test_a_comparison_plays_one_shared_t_across_both_runs(open_page: Any) -> None:
    # spec §10.4: two runs on one axis replay together: at t the later attempts of both
    # are hidden, Play reveals every one of both runs.
    doc = (
        '<step id="s" retry="4" retry-backoff="{b}" retry-delay="1s">'
        '<script>throw new Error("x");</script></step>'
    )
    runs = [wm.run(doc.format(b=b), clock="simulated") for b in ("fixed", "exponential")]
    page = open_page(wm.compare(*runs)._repr_mimebundle_()["text/html"])
    set_slider(page, 2.5)
    hidden = page.evaluate(
        "() => [...document.querySelectorAll('.woml-seg.woml-attempt.woml-replay-hidden')]"
        ".map(g => g.dataset.step + '#' + g.dataset.n)"
    )
    # Fixed: attempts at 0, 1, 2, 3 s (#4 hidden); exponential: 0, 1, 3, 7 s (#3, #4).
    assert sorted(hidden) == ["1/s#4", "2/s#3", "2/s#4"]
    page.click("button.woml-play")
    page.wait_for_function(
        "() => document.querySelectorAll('.woml-seg.woml-replay-hidden').length === 0"
        " && document.querySelector('button.woml-play').textContent.includes('Play')",
        timeout=20_000,
    )
