"""A big saved timeline builds only the lanes near the view (issue 21 item 6, spec §6.3).

A saved output of more than ``html.DEFER_DETAILS_AT`` attempts carries its live drawing
as data with its lanes apart (``picture.drawing_data``); the script puts the drawing
without them in the picture's place, at its whole height, and builds a lane when it
comes near the view, when one of its attempts is selected, or beside a focused attempt
(``timeline.js``, ``LazyLanes``). A lane built late gets what the others have: the
selection, the replay at its time, the zoom. The figures are bench/browser.py's.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from lxml import etree
from timeline_runs import drawing_parts, many

from woml_magic.model import Run
from woml_magic.timeline import interactive_html
from woml_magic.timeline.layout import compute_layout

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def thousand() -> Run:
    """Issue 21 item 6's run, 1,000 steps × 3 attempts; ``s900``'s attempts each make a
    keyed call (its key lineage lists them)."""
    return many(1000, 3, calls={"s900"})


@pytest.fixture(scope="module")
def saved(thousand: Run) -> str:
    return interactive_html(thousand)


@pytest.fixture(scope="module")
def lane_y(thousand: Run) -> dict[str, float]:
    """Each lane's top in the drawing's px."""
    return {lane.ref: lane.y for lane in compute_layout(thousand).lanes}


def test_a_big_saved_timeline_keeps_its_lanes_apart_each_with_its_place(
    thousand: Run, saved: str
) -> None:
    parts = drawing_parts(saved)
    assert parts is not None
    shell = etree.fromstring(parts["svg"].encode())
    assert shell.get("class") == "woml-svg"
    assert shell.get("height") == f"{compute_layout(thousand).lanes_bottom + 24:.0f}"
    assert shell.findall(f"{SVG}g[@class='woml-lane']") == []
    assert [ref for ref, *_ in parts["lanes"]] == [f"s{i}" for i in range(1000)]
    bottom = None
    for ref, y, height, segments, markup in parts["lanes"]:
        (lane,) = etree.fromstring(f'<svg xmlns="{SVG[1:-1]}">{markup}</svg>'.encode())
        assert (lane.get("class"), lane.get("data-step")) == ("woml-lane", ref)
        segs = [g for g in lane.iter(f"{SVG}g") if "woml-seg" in g.get("class", "")]
        assert len(segs) == segments == 5  # 3 attempts, 2 waits
        ys = [float(el.get(a)) for el in lane.iter() for a in ("y", "y1", "y2") if el.get(a)]
        assert y <= min(ys)
        assert max(ys) <= y + height
        assert bottom is None or y == bottom  # one under the other, nothing between
        bottom = y + height


# --- in the browser ----------------------------------------------------------------

READY = "() => { const r = document.querySelector('.woml-timeline'); return r && r._womlTimeline; }"
#: The data-step of each lane built, in the drawing's order.
BUILT = "() => [...document.querySelectorAll('svg.woml-svg g.woml-lane')].map(g => g.dataset.step)"
#: Scroll ``scroller`` (the window: null) to ``y`` px of the drawing, then two frames.
SCROLL_TO = """async ([y, scroller]) => {
  const svg = document.querySelector('.woml-timeline svg.woml-svg');
  const top = svg.getBoundingClientRect().top + y - 100;
  if (scroller === null) window.scrollBy(0, top);
  else document.querySelector(scroller).scrollTop += top - document.querySelector(scroller)
    .getBoundingClientRect().top;
  for (let i = 0; i < 2; i += 1) await new Promise(requestAnimationFrame);
}"""
#: A lane as drawn: per element its tag and attributes (the zoom's and the replay's
#: included), its visibility and a text's words; with its step column's texts.
LANE_STATE = """(step) => {
  const lane = document.querySelector(`svg.woml-svg g.woml-lane[data-step="${step}"]`);
  const column = [...document.querySelectorAll('svg.woml-svg g.woml-step-column > text')]
    .filter(t => (t.querySelector('title') || {}).textContent === step);
  return [...lane.querySelectorAll('*'), ...column].map(el => [
    el.tagName, el.closest('g.woml-step-column') !== null,
    [...el.attributes].map(a => [a.name, a.value]).sort(),
    getComputedStyle(el).visibility,
    el.tagName === 'text' ? el.textContent : null]);
}"""


def index(step: str) -> int:
    return int(step[1:])


def open_saved(open_page: Any, saved: str, around: str = "{}") -> Any:
    page = open_page(around.format(saved) if around != "{}" else saved)
    page.wait_for_function(READY)
    return page


def scroll_to(page: Any, y: float, scroller: str | None = None) -> None:
    page.evaluate(SCROLL_TO, [y, scroller])


@pytest.mark.browser
def test_a_1000_step_saved_timeline_builds_only_the_lanes_near_the_view(
    open_page: Any, saved: str, lane_y: dict[str, float]
) -> None:
    page = open_saved(open_page, saved)
    built = page.evaluate(BUILT)
    # The lanes within a window's height of the 700 px window, and the last (Tab).
    assert 5 < len(built) <= 40
    assert built[-1] == "s999"
    assert built[:-1] == [f"s{i}" for i in range(len(built) - 1)]
    top = page.evaluate("() => document.querySelector('svg.woml-svg').getBoundingClientRect().top")
    assert all(ref in built for ref, y in lane_y.items() if top + y < 2 * 700)
    # The drawing keeps its whole height: the page scrolls as if every lane were there.
    height = page.evaluate(
        "() => document.querySelector('svg.woml-svg').getBoundingClientRect().height"
    )
    assert height > lane_y["s999"] + 98


@pytest.mark.parametrize("scroller", [None, "#box"])
@pytest.mark.browser
def test_scrolling_builds_the_lanes_that_come_near_the_view(
    open_page: Any, saved: str, lane_y: dict[str, float], scroller: str | None
) -> None:
    """The window, or an element that scrolls the output (JupyterLab's notebook)."""
    box = "<div id='box' style='height:600px;overflow:auto'>{}</div>"
    around = "{}" if scroller is None else box
    page = open_saved(open_page, saved, around)
    before = page.evaluate(BUILT)
    assert "s500" not in before
    scroll_to(page, lane_y["s500"], scroller)
    built = page.evaluate(BUILT)
    assert {"s495", "s500", "s505"} <= set(built)
    assert len(built) - len(before) <= 40
    assert [index(s) for s in built] == sorted(index(s) for s in built)  # in their order
    # What the lanes show is their own (the data came through whole).
    assert page.eval_on_selector(
        'g.woml-lane[data-step="s500"] .woml-seg.woml-attempt[data-n="2"] title',
        "t => t.textContent",
    ).startswith("attempt 2 of s500 · threw")


@pytest.mark.browser
def test_lanes_named_beyond_u_ffff_come_through_whole(open_page: Any) -> None:
    """The data's lengths are a JavaScript string's (a character beyond U+FFFF counts
    twice): every lane built is a whole lane, the last one too."""
    saved = interactive_html(many(70, 3, name="\U0001f600"))  # 210 attempts: big
    parts = drawing_parts(saved)
    assert parts is not None
    assert len(parts["lanes"]) == 70
    page = open_saved(open_page, saved)
    built = page.evaluate(
        """() => [...document.querySelectorAll('svg.woml-svg g.woml-lane')].map(g => [
          g.dataset.step, g.querySelector('text.woml-step-id > title').textContent,
          g.querySelectorAll('.woml-seg').length])"""
    )
    assert built[-1][0] == "\U0001f60069"
    assert 5 < len(built) < 70
    assert all(step == title and segs == 5 for step, title, segs in built)


@pytest.mark.browser
def test_lanes_that_show_without_a_scroll_are_built(open_page: Any, saved: str) -> None:
    """The page moves the drawing into view (what was above it goes): no scroll event,
    the placeholders' observer sees it."""
    page = open_saved(open_page, saved, "<div id='above' style='height:3000px'></div>{}")
    assert page.evaluate(BUILT) == ["s0", "s999"]  # Tab's ends only
    page.evaluate("() => document.getElementById('above').remove()")
    page.wait_for_function(f"() => ({BUILT})().includes('s5')")
    assert page.evaluate("() => window.scrollY") == 0


@pytest.mark.browser
def test_selecting_an_attempt_of_a_lane_not_built_builds_and_selects_it(
    open_page: Any, saved: str, lane_y: dict[str, float]
) -> None:
    page = open_saved(open_page, saved)
    assert "s900" not in page.evaluate(BUILT)
    page.click('tr.woml-lineage-row[data-step="s900"][data-n="2"]')  # in the listing
    assert "s900" in page.evaluate(BUILT)
    marked = page.eval_on_selector_all(
        ".woml-seg.woml-selected", "els => els.map(e => [e.dataset.step, e.dataset.n])"
    )
    assert marked == [["s900", "2"]]
    page.wait_for_function(
        """() => { const d = document.querySelector(
          'details.woml-attempt-details[data-step="s900"][data-n="2"]'); return d && d.open; }"""
    )
    # Scrolled to, it shows selected; the key lineage row too.
    scroll_to(page, lane_y["s900"])
    bar = page.eval_on_selector(
        '.woml-seg.woml-attempt[data-step="s900"][data-n="2"] .woml-bar',
        "r => [r.getBoundingClientRect().top, getComputedStyle(r).strokeWidth]",
    )
    assert 0 <= bar[0] <= 700
    assert bar[1] == "4px"
    assert page.eval_on_selector(
        'tr.woml-lineage-row[data-step="s900"][data-n="2"]',
        "r => r.classList.contains('woml-selected')",
    )


@pytest.mark.browser
def test_a_click_on_an_attempt_far_down_shows_its_own_details(
    open_page: Any, saved: str, lane_y: dict[str, float]
) -> None:
    """spec §6.3: selecting an attempt shows its details. The listing's steps are laid
    out only near the view, so a smooth scroll to s900's details stopped hundreds of
    steps short as the steps it passed grew to their real heights (it showed s334)."""
    page = open_saved(open_page, saved)
    scroll_to(page, lane_y["s900"])
    page.locator('.woml-seg.woml-attempt[data-step="s900"][data-n="2"]').dispatch_event("click")
    details = 'details.woml-attempt-details[data-step="s900"][data-n="2"]'
    page.wait_for_function(f"() => document.querySelector('{details}').open")
    for _ in range(10):  # the reveal's frames and a few more, for the layout to settle
        page.evaluate("() => new Promise(requestAnimationFrame)")
    top, bottom = page.eval_on_selector(
        details, "d => [d.getBoundingClientRect().top, d.getBoundingClientRect().bottom]"
    )
    height = page.evaluate("() => window.innerHeight")
    assert bottom > 0, (top, bottom)
    assert top < height, (top, bottom)


def zoom_in(page: Any) -> None:
    for _ in range(3):
        page.click('.woml-zoom-controls button[aria-label="zoom in"]')


def replay_at(page: Any, t: float) -> None:
    page.eval_on_selector(
        ".woml-slider",
        "(s, t) => { s.value = String(t); s.dispatchEvent(new Event('input', {bubbles: true})); }",
        t,
    )


@pytest.mark.parametrize("actions", [("zoom",), ("replay",), ("zoom", "replay")])
@pytest.mark.browser
def test_a_lane_built_after_a_zoom_or_a_replay_is_drawn_as_if_it_had_been_there(
    open_page: Any, saved: str, thousand: Run, lane_y: dict[str, float], actions: tuple[str, ...]
) -> None:
    """``s500`` zoomed (about the run's middle, where its bars are) and replayed while
    its second attempt runs: built after that, it is drawn exactly as when built before."""
    t = thousand.steps["s500"].attempts[1].started_at + 0.1

    def act(page: Any) -> None:
        for action in actions:
            if action == "zoom":
                zoom_in(page)
            else:
                replay_at(page, t)

    late = open_saved(open_page, saved)
    act(late)
    assert "s500" not in late.evaluate(BUILT)
    scroll_to(late, lane_y["s500"])
    early = open_saved(open_page, saved)
    scroll_to(early, lane_y["s500"])
    act(early)
    state = late.evaluate(LANE_STATE, "s500")
    assert state == early.evaluate(LANE_STATE, "s500")
    # ... and the zoom and the replay are there to see.
    attrs = [dict(a) for _tag, _column, a, _v, _words in state]
    if "zoom" in actions:
        assert any("scale(" in a.get("transform", "") for a in attrs)
        assert any(column for _tag, column, *_ in state)  # its step id beside the track
    if "replay" in actions:
        classes = [a.get("class", "") for a in attrs]
        assert any("woml-replay-running" in c for c in classes)
        assert any("woml-replay-hidden" in c for c in classes)


@pytest.mark.browser
def test_tab_goes_on_to_the_next_lane_and_back_from_the_controls_to_the_last(
    open_page: Any, saved: str
) -> None:
    page = open_saved(open_page, saved)
    built = page.evaluate(BUILT)
    last = built[-2]  # the last one in view (s999 comes after it)
    after = f"s{index(last) + 1}"
    assert after not in built
    page.eval_on_selector(  # no scroll: the focus alone builds what Tab goes to
        f'.woml-seg.woml-attempt[data-step="{last}"][data-n="3"]',
        "el => el.focus({preventScroll: true})",
    )
    page.keyboard.press("Tab")
    active = "() => [document.activeElement.dataset.step, document.activeElement.dataset.n]"
    assert page.evaluate(active) == [after, "1"]
    page.focus("button.woml-play")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate(active) == ["s999", "3"]


@pytest.mark.browser
def test_a_lane_built_late_is_the_lane_the_whole_drawing_shows(
    open_page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 steps × 3 attempts: a big run of more lanes than are built at once, and few
    enough segments to be stretched to a wide output. Stretched, zoomed and replayed,
    a lane built late is drawn as the same lane of the whole drawing (a saved output
    within the big-run size: every lane drawn at once)."""
    from woml_magic.timeline import html

    run = many(100, 3)
    t = run.steps["s60"].attempts[2].started_at + 0.1
    y = next(lane.y for lane in compute_layout(run).lanes if lane.ref == "s60")
    lazy = interactive_html(run)
    assert 'class="woml-drawing-data"' in lazy
    monkeypatch.setattr(html, "DEFER_DETAILS_AT", 10_000)
    whole = interactive_html(run)
    assert 'class="woml-drawing-data"' not in whole
    states = []
    for saved in (lazy, whole):
        page = open_page(saved, width=1600)
        page.wait_for_function(READY)
        assert page.evaluate("() => document.querySelector('.woml-timeline').dataset.track")
        zoom_in(page)
        replay_at(page, t)
        scroll_to(page, y)
        state = json.dumps(page.evaluate(LANE_STATE, "s60"))
        states.append(re.sub(r"woml-tl-[0-9a-f]+", "ID", state))  # each output's own id
        built = page.evaluate(BUILT)
        assert len(built) < 100 if saved is lazy else len(built) == 100
    assert states[0] == states[1]
