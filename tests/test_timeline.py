"""The static timeline: plain text and HTML with inline SVG (spec §6.3).

Runs come from hand-written event sequences (``timeline_runs``) applied through
``Run.apply``, exactly as the engine and the journal build them.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import time
import unicodedata
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from lxml import html as lxml_html
from timeline_runs import (
    CHARGE_POLICY,
    SPEC_WAITS,
    Recorder,
    failed_closed,
    retried,
    succeeded,
    unpicture,
    waiting,
    workflow,
)

import woml_magic as wm
from woml_magic.model import Run, idempotency_key
from woml_magic.outcomes import OUTCOMES, RULES
from woml_magic.policy import RetryPolicy
from woml_magic.policy_targets import TARGETS, translate_all
from woml_magic.timeline import mimebundle, render_html, render_text
from woml_magic.timeline import theme as tl_theme
from woml_magic.timeline.axis import format_time, nice_axis, tick_step
from woml_magic.timeline.details import TARGET_NAMES
from woml_magic.timeline.geometry import BAR_CLEARANCE, BAR_GAP, BREAK_W, LABEL_GAP, MIN_BAR_W
from woml_magic.timeline.layout import TimelineLayout, compute_layout
from woml_magic.timeline.outcome_styles import BAR_TEXT, OUTCOME_STYLES

SVG = "{http://www.w3.org/2000/svg}"
EVIL = "<script>alert('x')</script>"


def parse_xml(text: str) -> etree._Element:
    return etree.fromstring(text.encode())


def by_class(root: etree._Element, cls: str) -> list[etree._Element]:
    return root.xpath(f".//*[contains(concat(' ', @class, ' '), ' {cls} ')]")  # type: ignore[no-any-return]


def in_svg(root: etree._Element, cls: str) -> list[etree._Element]:
    (svg,) = root.findall(f".//{SVG}svg")
    return by_class(svg, cls)


def same_page(html: str) -> str:
    """``html`` with the root's random id (and the pattern ids built on it) fixed."""
    return re.sub(r"woml-tl-[0-9a-f]+", "woml-tl-ID", html)


def attempt_block(text: str, start: str) -> list[str]:
    """The row of the text table that starts with ``start`` and its continuation lines."""
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if line.strip().startswith(start))
    block = [lines[i]]
    for line in lines[i + 1 :]:
        if not line.startswith(" " * 12) or line.strip().startswith(("call", "log")):
            break
        block.append(line)
    return block


#: spec §3.1's example as a document (real QuickJS on the simulated clock).
SPEC_DOC = """
<step id="charge" retry="10" retry-backoff="exponential" retry-delay="1s" retry-max-delay="30s">
  <script>throw new Error("card network busy");</script>
</step>
<step id="email"><script>return 1;</script></step>
"""


@pytest.fixture(scope="module")
def spec_run() -> Run:
    run = wm.run(SPEC_DOC, clock="simulated")
    outcomes = [a.outcome for a in run.steps["charge"].attempts]
    assert outcomes == ["threw"] * 10, [a.error for a in run.steps["charge"].attempts]
    return run


def drawn(layout: TimelineLayout, step: str, kind: str) -> list[tuple[float, float, float, float]]:
    """``(start, end, x0, x1)`` of each segment of ``kind`` in ``step``'s lane."""
    lane = next(lane for lane in layout.lanes if lane.step_id == step)
    return [(d.seg.start, d.seg.end, d.x0, d.x1) for d in lane.drawn if d.seg.kind == kind]


# --- plain text ----------------------------------------------------------------------


def test_text_shows_each_step_id_status_policy_in_words_and_full_key() -> None:
    run = failed_closed().run
    text = render_text(run)
    assert "step charge · failed closed" in text
    assert "4 attempts · exponential 1s → max 10s" in text  # spec §6.3's example
    assert "1 attempt · no retry" in text
    assert idempotency_key("run-1", "charge") in text
    assert idempotency_key("run-1", "email") in text
    assert "step email · not run" in text


FAIL_CLOSED_FIRST = """<step id="busy" retry="3" retry-delay="1s">
  <script>return NaN;</script>
</step>
<step id="after" retry="2"><script>return 1;</script></step>"""


def step_headers(run: Run) -> dict[str, list[str]]:
    """What every static rendering says in each step's header: the text timeline's
    step line, the details panel's status and summary, the SVG's step column."""
    text = render_text(run)
    root = parse_xml(render_html(run))
    steps = by_class(root, "woml-step")
    column = [t.text for t in in_svg(root, "woml-muted") if t.get("x") == "6"]
    headers: dict[str, list[str]] = {}
    for i, step_id in enumerate(run.steps):
        line = next(x for x in text.splitlines() if x.startswith(f"step {step_id} · "))
        headers[step_id] = [line, "".join(steps[i][0].itertext()), column[i]]
    return headers


def test_a_steps_header_counts_attempts_used_of_allowed_everywhere() -> None:
    # spec §6.3: "3 of 4 attempts", never the policy's allowance as if it were used (an
    # attempt that failed closed at once said "· 3 attempts"); a step not run, no count.
    run = wm.run(FAIL_CLOSED_FIRST, clock="simulated")
    assert [a.outcome for a in run.steps["busy"].attempts] == ["invalid-json"]
    headers = step_headers(run)
    text, details, column = headers["busy"]
    assert text == "step busy · failed closed (not retried) · 1 of 3 attempts"
    assert details.endswith("1 of 3 attempts · fixed 1s"), details
    assert column == "failed-closed · 1 of 3"
    for where in headers["after"]:
        assert not re.search(r"\d+ (of \d+ )?attempts?", where), where
    assert headers["after"][0] == "step after · not run (an earlier step did not succeed)"
    assert "policy  2 attempts · fixed 1s" in render_text(run)  # the policy, labelled


def test_a_succeeded_steps_header_counts_the_attempts_it_took() -> None:
    # The README's first cell: three attempts of four, not "4 attempts" after 3.
    doc = """<step id="charge" retry="4" retry-backoff="exponential" retry-delay="1s"
      retry-max-delay="10s"><script>
      if (attempt.number < 3) throw new Error("card network busy");
      return 1;</script></step>"""
    text, details, column = step_headers(wm.run(doc, clock="simulated"))["charge"]
    assert text == "step charge · succeeded · 3 of 4 attempts"
    assert details.endswith("3 of 4 attempts · exponential 1s → max 10s"), details
    assert column == "succeeded · 3 of 4"


def test_a_cancelled_runs_header_says_cancelled() -> None:
    # spec §6.3: "a cancelled run says `cancelled`", not "failed" (its status stays
    # "failed", spec §7; RunFinished carries why it stopped, spec §3.2).
    handle = wm.start(
        '<step id="s" retry="3" timeout="60s"><script>'
        "await services.sleep('1h'); return 1;</script></step>",
        clock="real",
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not handle.run.steps["s"].attempts:
        time.sleep(0.02)
    handle.cancel()
    run = handle.result(timeout=10)
    assert run.status == "failed"
    assert run.stopped == "cancelled"
    assert render_text(run).splitlines()[0].endswith(f"· cancelled · t = {format_time(run.now)}")
    header = "".join(by_class(parse_xml(render_html(run)), "woml-header")[0].itertext())
    assert "· cancelled ·" in header
    assert "failed" not in header


def test_text_rows_give_number_outcome_times_explanation_and_error_line() -> None:
    # The row holds number, outcome and times; explanation and error follow, wrapped.
    text = render_text(failed_closed().run)
    row1 = attempt_block(text, "1   threw")
    assert "0s" in row1[0]
    assert "0.12s" in row1[0]
    assert "retrying after 1s" in " ".join(row1)
    assert "TypeError: boom @ line 7" in " ".join(row1)
    row3 = attempt_block(text, "3   timeout")
    assert "3.3s" in row3[0]
    assert "33.3s" in row3[0]
    assert "(line unknown)" in " ".join(row3)  # a timeout has no script line


def test_text_labels_waits_with_their_scheduled_length() -> None:
    lines = [line.strip() for line in render_text(failed_closed().run).splitlines()]
    assert lines.count("wait 1s") == 1
    assert lines.count("wait 2s") == 1


def test_text_lists_planned_attempts_and_waits_of_a_live_run() -> None:
    text = render_text(waiting().run)
    assert "wait 1s, 1.0s left (waiting now)" in text
    for n in (2, 3, 4):
        assert any(
            line.split()[:2] == [str(n), "planned"] for line in text.splitlines() if line.strip()
        )
    assert "wait 2s (planned)" in text
    assert "wait 4s (planned)" in text


def test_text_of_a_finished_run_plans_nothing() -> None:
    assert "planned" not in render_text(failed_closed().run)


def test_text_shows_calls_with_idempotency_header_and_the_servers_verdict() -> None:
    r = failed_closed()
    lines = render_text(r.run).splitlines()
    i = next(i for i, line in enumerate(lines) if "call  POST" in line)
    assert "POST http://127.0.0.1:9/charges → 503 · sent fresh · name charge" in lines[i]
    assert lines[i + 1].strip() == f"Idempotency-Key: {r.key('charge')}"


def test_text_says_not_run_in_the_lane_of_a_step_that_did_not_run() -> None:
    text = render_text(failed_closed().run)
    email = text[text.index("step email") :]
    assert "not run: an earlier step did not succeed" in email


LONG_EXPLANATION = (
    "Attempt 1 of 1 was not retried: it made an HTTP call without an idempotency key whose "
    "outcome is unknown and then failed (POST http://127.0.0.1:9/charges timed out); a retry "
    "could repeat that effect, so WOML fails closed. Give the request idempotency: "
    "{header: 'Idempotency-Key', value: attempt.idempotencyKey} and the server can tell a "
    "repeat from a new request."
)


def one_attempt(
    *,
    explanation: str = "x",
    message: str = "boom",
    log: str | None = None,
    url: str = "",
    headers: dict[str, str] | None = None,
    step: str = "s",
) -> Recorder:
    r = Recorder(workflow((step, RetryPolicy())))
    r.step(step, 0)
    r.start(step, 1, 0)
    if log is not None:
        r.log(step, 1, 0.05, log)
    if url or headers:
        r.call(step, 1, 0.1, url=url or "http://127.0.0.1:9/x", headers=headers)
    r.finish(step, 1, 0.2, "threw", error=("Error", message, 3), explanation=explanation)
    return r


def test_text_wraps_a_long_explanation_whole_at_100_columns_with_a_hanging_indent() -> None:
    """spec §3.2: every attempt's explanation is shown; it is never cut mid-sentence."""
    text = render_text(one_attempt(explanation=LONG_EXPLANATION).run)
    block = attempt_block(text, "1   threw")
    assert all(len(line) <= 100 for line in text.splitlines())
    assert len(block) > 2
    indent = len(block[1]) - len(block[1].lstrip())
    assert all(len(line) - len(line.lstrip()) == indent for line in block[1:])
    words = " ".join(line[indent:].strip() for line in block)
    assert LONG_EXPLANATION in words
    assert "…" not in text


@pytest.mark.parametrize(
    ("length", "shown"),
    [(300, 300), (3999, 3999), (4000, 4000), (50_000, 4000)],
)
def test_text_bounds_only_very_long_untrusted_error_messages(length: int, shown: int) -> None:
    message = "Ж" * length
    text = render_text(one_attempt(message=message).run)
    assert text.count("Ж") == shown
    words = " ".join(text.split())
    assert (f"({length - shown} more characters)" in words) == (length > shown)


CONTROL_INPUTS = [
    ("\x1b[2J", "^[[2J"),  # console.log("\x1b[2J") must not clear the terminal
    ("bell\x07", "bell^G"),
    ("back\x08space", "back^Hspace"),
    ("over\rwrite", "over ⏎ write"),
    ("del\x7f", "del^?"),
    ("csi\x9b31m", "csi⟨U+009B⟩31m"),  # C1 CSI
    ("rtl\u202eevil", "rtl⟨U+202E⟩evil"),  # bidirectional override
]


@pytest.mark.parametrize(("raw", "visible"), CONTROL_INPUTS, ids=[v for _, v in CONTROL_INPUTS])
@pytest.mark.parametrize("where", ["log", "error", "explanation", "url", "header", "step id"])
def test_text_shows_terminal_control_characters_as_harmless_text(
    raw: str, visible: str, where: str
) -> None:
    kwargs: dict[str, object] = {
        "log": {"log": raw},
        "error": {"message": raw},
        "explanation": {"explanation": raw},
        "url": {"url": f"http://127.0.0.1:9/{raw}"},
        "header": {"headers": {"x-note": raw}},
        "step id": {"step": f"s{raw}"},
    }[where]
    text = render_text(one_attempt(**kwargs).run)  # type: ignore[arg-type]
    bad = [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")]
    assert bad == []
    if where != "header":  # headers are in the HTML details, not in the text table
        assert visible in text


# --- format_time, ticks and the layout shared by every renderer ---------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0s"),
        (0.006, "0.006s"),
        (0.00025, "0.00025s"),
        (1.0, "1s"),
        (12.3, "12.3s"),
        (59.9994, "59.999s"),
        (59.9996, "1m"),
        (60.0, "1m"),
        (150.0, "2m 30s"),
        (150.54, "2m 30.5s"),
        (3599.96, "1h"),
        (3605.0, "1h 5s"),
        (86400.0, "24h"),
        (90180.0, "25h 3m"),
        (-2.5, "-2.5s"),
    ],
)
def test_format_time_rules(seconds: float, text: str) -> None:
    """spec §6.3: ticks, labels and the header use one format (the JS mirrors it)."""
    assert format_time(seconds) == text


@pytest.mark.parametrize(
    ("least", "step"),
    [
        (0.0004, 0.0005),
        (0.3, 0.5),
        (1.0, 1.0),
        (3.0, 5.0),
        (12.4, 15.0),
        (45.0, 60.0),
        (200.0, 300.0),
        (5000.0, 7200.0),
        (100_000.0, 172_800.0),
    ],
)
def test_tick_steps_are_round_times(least: float, step: float) -> None:
    assert tick_step(least) == pytest.approx(step)


@pytest.mark.parametrize(
    ("end", "axis_end", "step"),
    [(33.3, 40.0, 10.0), (1.0, 1.0, 0.2), (0.0, 0.001, 0.0002), (7200.0, 8000.0, 2000.0)],
)
def test_axis_ends_at_a_round_value_with_ticks_at_1_2_5_steps(
    end: float, axis_end: float, step: float
) -> None:
    # A live run's scale is rounded this way, so it changes only when the run outgrows it.
    got_end, ticks = nice_axis(end)
    assert got_end == pytest.approx(axis_end)
    assert ticks[0] == 0
    assert ticks[-1] == pytest.approx(got_end)
    assert all(b - a == pytest.approx(step) for a, b in itertools.pairwise(ticks))


@settings(deadline=None)  # checks what is drawn, not how fast (bench/timeline.py)
@given(
    st.lists(st.tuples(st.floats(0.0001, 50), st.floats(0, 100)), min_size=1, max_size=9),
)
def test_bars_start_at_their_true_x_never_overlap_and_have_a_minimum_width(
    spans: list[tuple[float, float]],
) -> None:
    """spec §6.3: an attempt starts where its start time is; the minimum drawn width
    comes out of the gap after it, never out of the next attempt."""
    policy = RetryPolicy(10, "fixed", timedelta(seconds=1))
    r = Recorder(workflow(("s", policy)))
    r.step("s", 0)
    t = 0.0
    for n, (length, gap) in enumerate(spans, start=1):
        r.start("s", n, t)
        t += length
        r.finish("s", n, t, "threw", explanation="x")
        t += gap
    r.step_done("s", t, "failed")
    r.run_done(t, "failed")
    layout = compute_layout(r.run)
    bars = drawn(layout, "s", "attempt")
    for (start, end, x0, x1), nxt in zip(bars, [*bars[1:], None], strict=True):
        assert x0 == pytest.approx(layout.x(start), abs=0.01)
        assert x1 >= layout.x(end) - 0.01
        assert x1 - x0 >= 1.0
        if nxt is None:
            assert x1 - x0 >= MIN_BAR_W - 0.01
        else:
            assert x1 <= max(nxt[2] - BAR_CLEARANCE, x0 + 1.0, layout.x(end)) + 0.01
            room = nxt[2] - BAR_CLEARANCE - x0
            assert x1 - x0 >= min(MIN_BAR_W, room) - 0.01


def test_live_wait_counts_down_from_now_on_the_run_clock() -> None:
    run = waiting().run
    seg = next(s for s in compute_layout(run, now=0.52).lanes[0].segments if s.left is not None)
    assert seg.left == pytest.approx(0.6)
    assert seg.label == "wait 0.6s left"


def test_running_attempt_is_drawn_up_to_now() -> None:
    r = waiting()
    r.start("charge", 2, 1.12)
    seg = next(s for s in compute_layout(r.run, now=2.0).lanes[0].segments if s.number == 2)
    assert (seg.kind, seg.outcome, seg.end) == ("attempt", "running", 2.0)


def test_pending_step_shows_its_whole_schedule_as_planned() -> None:
    lane = compute_layout(waiting().run).lanes[1]
    assert [s.kind for s in lane.segments] == ["planned"]
    assert lane.status == "pending"


def test_planned_attempts_sit_where_the_schedule_puts_them() -> None:
    """spec §3.1, §6.3: after the live wait, #2 at its due time, then the planned waits
    2s and 4s; the pending step's #1 when charge could end at the earliest (if #2
    succeeds at once), not at "now"."""
    layout = compute_layout(waiting().run)  # charge #1 threw at 0.12s, waits 1s
    planned = drawn(layout, "charge", "planned")
    assert [p[0] for p in planned] == pytest.approx([1.12, 3.12, 7.12])
    assert [s for s, *_ in drawn(layout, "charge", "planned-wait")] == pytest.approx([1.12, 3.12])
    (email,) = drawn(layout, "email", "planned")
    assert email[0] == pytest.approx(1.12)
    assert layout.now == pytest.approx(0.12)
    for start, _end, x0, _x1 in [*planned, email]:
        assert x0 == pytest.approx(layout.x(start), abs=0.01)


def test_a_running_attempt_plans_the_next_ones_from_now() -> None:
    r = waiting()
    r.start("charge", 2, 1.12)
    layout = compute_layout(r.run, now=1.5)
    planned = drawn(layout, "charge", "planned")
    assert [p[0] for p in planned] == pytest.approx([1.5 + 2, 1.5 + 2 + 4])


# --- the true-to-time axis (spec §6.3) ----------------------------------------------------


def test_spec_example_waits_grow_with_the_wait_and_the_30s_waits_are_equal(
    spec_run: Run,
) -> None:
    """spec §3.1, §6.3: waits 1, 2, 4, 8, 16, 30, 30, 30, 30 s, drawn to scale."""
    layout = compute_layout(spec_run)
    waits = drawn(layout, "charge", "wait")
    assert [round(e - s) for s, e, _, _ in waits] == list(SPEC_WAITS)
    widths = [x1 - x0 for _, _, x0, x1 in waits]
    assert all(b > a + 1 for a, b in itertools.pairwise(widths[:6]))
    assert max(widths[5:]) - min(widths[5:]) < 0.5
    # the drawn part is the time scale minus at most the 3 px of the bar before it
    for (s, e, _, _), w in zip(waits, widths, strict=True):
        assert (e - s) * layout.scale - MIN_BAR_W - 0.5 <= w <= (e - s) * layout.scale + 0.01
    assert not layout.breaks


def test_spec_example_x_is_proportional_to_time(spec_run: Run) -> None:
    layout = compute_layout(spec_run)
    attempts = drawn(layout, "charge", "attempt")
    origin = layout.track_x0
    for start, _end, x0, _x1 in attempts:
        assert x0 - origin == pytest.approx(start * layout.scale, abs=0.5)
    assert len(layout.axis) == 2  # one straight line: no break, no bend


def test_spec_example_attempts_are_narrow_and_everything_fits_without_scrolling(
    spec_run: Run,
) -> None:
    layout = compute_layout(spec_run)
    for _s, _e, x0, x1 in drawn(layout, "charge", "attempt"):
        assert MIN_BAR_W - 0.01 <= x1 - x0 <= MIN_BAR_W + 0.5  # ms attempts, a few px
    assert 720 <= layout.width <= 1000
    root = parse_xml(render_html(spec_run))
    (svg,) = root.findall(f".//{SVG}svg")
    assert float(svg.get("width")) == layout.width
    for g in by_class(svg, "woml-seg"):
        assert float(g.get("data-x1")) <= layout.width


def test_a_24h_wait_is_an_axis_break_with_its_length_and_the_rest_stays_to_scale() -> None:
    policy = RetryPolicy(4, "exponential", timedelta(seconds=1), timedelta(hours=24))
    r = retried((1.0, 2.0, 86400.0), policy=policy, last="succeeded")
    layout = compute_layout(r.run)
    (brk,) = layout.breaks
    assert (brk.t0, brk.t1) == pytest.approx((3.018, 86403.018))
    assert brk.x1 - brk.x0 == pytest.approx(BREAK_W)
    assert brk.label == "≈ 24h"
    w1, w2, w24 = [x1 - x0 for _, _, x0, x1 in drawn(layout, "charge", "wait")]
    assert w2 + MIN_BAR_W == pytest.approx(2 * (w1 + MIN_BAR_W), rel=0.02)
    assert w24 < w2  # not a box as wide as a short wait, let alone 86,400 times wider
    root = parse_xml(render_html(r.run))
    (g,) = in_svg(root, "woml-break")
    assert float(g.get("data-t0")) == pytest.approx(3.018)
    assert float(g.get("data-t1")) == pytest.approx(86403.018)
    assert "≈ 24h" in "".join(g.itertext())
    assert g.findall(f".//{SVG}polyline")  # the zig-zag
    ticks = [t.text for t in in_svg(root, "woml-tick")]
    assert len(ticks) == len(set(ticks))  # no two ticks say the same time


@pytest.mark.parametrize(
    ("waits", "breaks"),
    [
        (SPEC_WAITS, 0),  # spec §3.1: all to scale
        ((30.0,), 0),
        ((45.0,), 0),  # under 10 × 5 s: never a break
        ((600.0,), 1),
        ((1.0, 2.0, 86400.0), 1),
        ((*SPEC_WAITS[:-1], 1000.0), 1),  # 1000 s > 10 × 30 s
        ((*SPEC_WAITS[:-1], 200.0), 0),  # 200 s < 10 × 30 s
        ((86400.0, 86400.0, 1.0), 2),
        ((3600.0, 86400.0, 1.0), 2),
    ],
)
def test_a_gap_is_a_break_when_longer_than_ten_times_every_span_left_to_scale(
    waits: tuple[float, ...], breaks: int
) -> None:
    policy = RetryPolicy(10, "fixed", timedelta(seconds=1))
    layout = compute_layout(retried(waits, policy=policy).run)
    assert len(layout.breaks) == breaks
    knots = layout.axis
    assert all(b[0] > a[0] and b[1] > a[1] for a, b in itertools.pairwise(knots))
    assert knots[-1][1] == pytest.approx(layout.track_x0 + 780)


LAYOUT_CASES = {
    "spec": retried,
    "24h": lambda: retried((1.0, 2.0, 86400.0), last="succeeded"),
    "failed_closed": failed_closed,
    "waiting": waiting,
    "succeeded": lambda: succeeded({"id": 1}),
    "tight": lambda: retried((0.001,) * 9, attempt_s=0.0005),
    "long attempts": lambda: retried((1.0,) * 3, attempt_s=40.0, last="succeeded"),
}


@pytest.mark.parametrize("case", list(LAYOUT_CASES))
def test_labels_never_overlap_and_stay_inside_the_svg(case: str) -> None:
    layout = compute_layout(LAYOUT_CASES[case]().run)
    for lane in layout.lanes:
        labels = [d.label for d in lane.drawn if d.label is not None]
        for a, b in itertools.combinations(labels, 2):
            if a.row == b.row:
                assert a.right + LABEL_GAP <= b.x or b.right + LABEL_GAP <= a.x, (a, b)
        for d in lane.drawn:
            lb = d.label
            if lb is None:
                continue
            assert layout.track_x0 <= lb.x
            assert lb.right <= layout.width
            if lb.inside:
                assert d.x0 < lb.x
                assert lb.right < d.x1
            elif lb.row == 0:  # beside: clear of every other bar of the lane
                for o in lane.drawn:
                    if o is not d and o.seg.kind in ("attempt", "planned"):
                        assert lb.right + BAR_GAP <= o.x0 or lb.x >= o.x1 + BAR_GAP
        for br in layout.breaks:
            for lb in labels:
                if lb.row == 0:
                    assert lb.right <= br.x0 or lb.x >= br.x1


def assert_labels_apart(layout: TimelineLayout) -> None:
    """No two labels of a lane's row overlap; none leaves the SVG; in the bar row each
    lies inside its own bar or clear of every other bar, and inside or clear of every
    wait (spec §6.3; the browser's check of the same in tests/test_browser.py)."""
    for lane in layout.lanes:
        labels = [d.label for d in lane.drawn if d.label is not None]
        for a, b in itertools.combinations(labels, 2):
            if a.row == b.row:
                assert a.right + LABEL_GAP <= b.x or b.right + LABEL_GAP <= a.x, (a, b)
        for lb in labels:
            assert layout.track_x0 <= lb.x
            assert lb.right <= layout.width
        for d in lane.drawn:
            lb = d.label
            if lb is None or lb.row != 0:
                continue
            for o in lane.drawn:
                clear = lb.right + BAR_GAP <= o.x0 or lb.x >= o.x1 + BAR_GAP
                inside = o.x0 <= lb.x and lb.right <= o.x1
                if o.seg.is_bar and o is not d:
                    assert clear, (lb, o.seg.kind, o.seg.number, o.x0, o.x1)
                elif not o.seg.is_bar:
                    assert clear or inside, (lb, o.seg.kind, o.seg.number, o.x0, o.x1)


def test_a_label_beside_a_bar_ends_inside_the_wait_after_it_not_in_the_late_start() -> None:
    # Notebook 01 on the real clock: 0.2 s waits, each next attempt starting a few ms
    # after its wait was due. "#1 threw" beside attempt 1 reached past the end of the
    # wait into that gap (a CI failure of test_bars_are_placed_at_their_times).
    policy = RetryPolicy(3, "fixed", timedelta(seconds=0.2))
    for late in (0.0, 0.004, 0.008, 0.012, 0.02):
        r = retried((0.2, 0.2), attempt_s=0.003, policy=policy, late_s=late)
        assert_labels_apart(compute_layout(r.run))


@settings(deadline=None)  # checks what is drawn, not how fast (bench/timeline.py)
@given(
    st.lists(st.floats(0, 100_000), min_size=0, max_size=9),
    st.floats(0.0001, 60),
    st.sampled_from(["threw", "succeeded", "timeout", "crash"]),
    st.sampled_from([0.0, 0.0, 0.002, 0.01, 0.05, 0.5]),
)
def test_labels_of_any_schedule_stay_apart_and_inside(
    waits: list[float], attempt_s: float, last: str, late_s: float
) -> None:
    policy = RetryPolicy(10, "fixed", timedelta(seconds=1))
    run = retried(waits, attempt_s=attempt_s, policy=policy, last=last, late_s=late_s).run
    layout = compute_layout(run)
    assert_labels_apart(layout)
    assert all(b[1] > a[1] for a, b in itertools.pairwise(layout.axis))


@pytest.mark.parametrize("stopped", ["cancelled", "interrupted"])
def test_a_wait_cut_short_by_a_stop_is_drawn_to_where_it_stopped(stopped: str) -> None:
    # spec §3.2, §6.3 (issue 21): Kernel ▸ Interrupt or cancel 3 s into a 20 s wait; the
    # drawing used to end after "#1 threw", the wait that was cut short not drawn.
    policy = RetryPolicy(3, "fixed", timedelta(seconds=20))
    r = Recorder(workflow(("s", policy)))
    r.step("s", 0.0)
    r.start("s", 1, 0.0)
    r.finish("s", 1, 0.01, "threw", error=("Error", "busy", 1))
    r.wait("s", 1, 0.01, 20.0)
    r.step_done("s", 3.01, "failed-closed")
    r.run_done(3.01, "failed", stopped=stopped)
    layout = compute_layout(r.run)
    ((t0, t1, _x0, x1),) = drawn(layout, "s", "wait")
    assert (t0, t1) == pytest.approx((0.01, 3.01))
    assert x1 == pytest.approx(layout.x(3.01))  # not to the 20 s it was due
    (lane,) = layout.lanes
    (wait,) = [d for d in lane.drawn if d.seg.kind == "wait"]
    assert wait.seg.label == "wait 20s, cut at 3s"
    assert f"the run was {stopped} then" in wait.seg.tooltip
    root = parse_xml(render_html(r.run))
    (g,) = in_svg(root, "woml-wait")
    assert float(g.get("data-t1")) == pytest.approx(3.01)
    assert "wait 20s, cut at 3s" in render_text(r.run)


def test_a_finished_step_draws_no_wait_after_its_last_attempt() -> None:
    # The cut wait is drawn only where a wait was scheduled and never ended.
    layout = compute_layout(failed_closed().run)
    charge = next(lane for lane in layout.lanes if lane.step_id == "charge")
    assert [d.seg.kind for d in charge.drawn][-1] == "attempt"


def test_every_attempt_of_the_spec_example_has_a_label() -> None:
    layout = compute_layout(retried().run)
    (charge, _) = layout.lanes
    assert all(d.label is not None for d in charge.drawn if d.seg.kind == "attempt")


def test_not_run_step_says_so_in_its_lane() -> None:
    root = parse_xml(render_html(failed_closed().run))
    (lane,) = [g for g in in_svg(root, "woml-lane") if g.get("data-step") == "email"]
    assert "not run: an earlier step did not succeed" in "".join(lane.itertext())


def test_succeeded_after_retries_reads_as_success_with_amber_retries() -> None:
    run = retried((1.0, 2.0), last="succeeded").run
    root = parse_xml(render_html(run))
    assert root.get("data-status") == "succeeded"
    (charge,) = [g for g in in_svg(root, "woml-lane") if g.get("data-step") == "charge"]
    threw = by_class(charge, "woml-outcome-threw")
    assert len(threw) == 2
    r, g, b = (int(OUTCOME_STYLES["threw"].color[i : i + 2], 16) for i in (1, 3, 5))
    assert r > g > b  # amber: orange-brown, not a red
    assert g > 0.35 * r
    for bar in threw:
        assert bar.find(f"{SVG}rect").get("fill") == OUTCOME_STYLES["threw"].color
    assert OUTCOME_STYLES["threw"].color not in {
        OUTCOME_STYLES[o].color for o in ("timeout", "crash")
    }
    status = by_class(root, "woml-step-status")[0]
    assert status.text == "succeeded"


def test_legend_names_every_outcome_drawn_waits_and_breaks() -> None:
    r = retried((1.0, 86400.0), last="succeeded")
    root = parse_xml(render_html(r.run))
    (legend,) = in_svg(root, "woml-legend")
    kinds = [g.get("data-kind") for g in by_class(legend, "woml-legend-entry")]
    assert kinds == ["succeeded", "threw", "wait", "break"]
    words = "".join(legend.itertext())
    assert "succeeded" in words
    assert "threw" in words
    assert "axis break" in words
    planned = parse_xml(render_html(waiting().run))
    assert "planned" in "".join(in_svg(planned, "woml-legend")[0].itertext())


# --- contrast (WCAG 2.x, spec §6.3) -------------------------------------------------------

THEMES = Path(sys.prefix, "share/jupyter/lab/themes/@jupyterlab")


def _rgb(
    colour: str, under: tuple[float, float, float] = (1.0, 1.0, 1.0)
) -> tuple[float, float, float]:
    """sRGB 0..1 of ``#rrggbb``, a CSS name we use, or ``rgba()`` over ``under``."""
    colour = {"white": "#ffffff", "black": "#000000"}.get(colour.strip(), colour.strip())
    if colour.startswith("#"):
        h = colour[1:]
        if len(h) == 3:
            h = "".join(c * 2 for c in h)
        return (int(h[0:2], 16) / 255, int(h[2:4], 16) / 255, int(h[4:6], 16) / 255)
    m = re.fullmatch(r"rgba?\(([^)]*)\)", colour)
    assert m, colour
    parts = [float(p) for p in m.group(1).split(",")]
    alpha = parts[3] if len(parts) == 4 else 1.0
    rgb = [p / 255 for p in parts[:3]]
    return tuple(a * alpha + u * (1 - alpha) for a, u in zip(rgb, under, strict=True))  # type: ignore[return-value]


def luminance(rgb: tuple[float, float, float]) -> float:
    """WCAG 2.x relative luminance."""

    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg: tuple[float, float, float], bg: tuple[float, float, float]) -> float:
    hi, lo = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def theme_vars(theme: str) -> dict[str, str]:
    css = (THEMES / f"theme-{theme}-extension/index.css").read_text()
    out: dict[str, str] = {}
    for name, value in re.findall(r"(--jp-[\w-]+):([^;}]+)", css):
        out.setdefault(name, value.strip())
    return out


def resolve(value: str, variables: dict[str, str]) -> str:
    """A theme value with ``var(--x, fallback)`` resolved (md-* palette: its fallback)."""
    m = re.fullmatch(r"var\((--[\w-]+)(?:,\s*(.+))?\)", value.strip())
    if not m:
        return value
    name, fallback = m.groups()
    if name in variables:
        return resolve(variables[name], variables)
    assert fallback is not None, value
    return resolve(fallback, variables)


def test_every_outcome_of_spec_3_2_has_a_style_and_its_legend_in_rule_order() -> None:
    assert list(OUTCOME_STYLES) == [*OUTCOMES, "running", "planned"]
    for outcome in OUTCOMES:
        assert OUTCOME_STYLES[outcome].meaning == RULES[outcome].legend


@pytest.mark.parametrize("outcome", list(OUTCOME_STYLES))
def test_text_inside_every_bar_fill_meets_wcag_aa(outcome: str) -> None:
    ratio = contrast(_rgb(BAR_TEXT), _rgb(OUTCOME_STYLES[outcome].color))
    assert ratio >= 4.5, f"{outcome}: {ratio:.2f}"


@pytest.mark.parametrize(
    ("fg", "bg"),
    [
        (tl_theme.TEXT, "#ffffff"),
        (tl_theme.TEXT_MUTED, "#ffffff"),
        (tl_theme.TEXT, tl_theme.CODE_BG),
        (tl_theme.FOCUS, "#ffffff"),
    ],
)
def test_fallback_colours_meet_wcag_aa_on_white(fg: str, bg: str) -> None:
    assert contrast(_rgb(fg), _rgb(bg)) >= 4.5


#: Text roles and the background they sit on (the notebook's layout colours).
TEXT_ON = [
    ("text", "--jp-layout-color0"),
    ("text", "--jp-layout-color1"),
    ("muted", "--jp-layout-color0"),
    ("muted", "--jp-layout-color1"),
    ("text", "code-bg"),
]


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize(("role", "background"), TEXT_ON)
def test_theme_text_meets_wcag_aa_in_jupyterlab_light_and_dark(
    theme: str, role: str, background: str
) -> None:
    variables = theme_vars(theme)
    bg_name = (
        tl_theme.THEME_VARS[background][0] if background in tl_theme.THEME_VARS else background
    )
    bg = _rgb(resolve(variables[bg_name], variables))
    fg_name = tl_theme.THEME_VARS[role][0]
    fg = _rgb(resolve(variables[fg_name], variables), under=bg)
    ratio = contrast(fg, bg)
    assert ratio >= 4.5, f"{fg_name} on {bg_name} in {theme}: {ratio:.2f}"


def test_the_style_uses_those_theme_variables_with_fallbacks_and_is_scoped() -> None:
    root = parse_xml(render_html(failed_closed().run))
    style = root.find("style")
    assert style is not None
    css = style.text or ""
    for name, fallback in tl_theme.THEME_VARS.values():
        assert f"var({name},{fallback})" in css
    selectors = re.findall(r"(?:^|})([^{}]+)\{", css)
    assert selectors
    for group in selectors:
        for sel in group.split(","):
            assert sel.strip().startswith(".woml-timeline"), sel
    assert re.search(r"\.woml-selected \.woml-bar\{stroke:var\(--jp-brand-color1", css)
    assert "user-select:all" in css


def test_text_outside_bars_carries_a_fallback_fill_and_a_theme_class() -> None:
    root = parse_xml(render_html(failed_closed().run))
    (svg,) = root.findall(f".//{SVG}svg")
    for text in svg.iter(f"{SVG}text"):
        assert text.get("fill") in {tl_theme.TEXT, tl_theme.TEXT_MUTED, BAR_TEXT}, text.text
        assert text.get("class"), text.text


# --- HTML with inline SVG ------------------------------------------------------------


@pytest.mark.parametrize("make", [failed_closed, waiting, succeeded], ids=lambda f: f.__name__)
def test_html_is_well_formed_self_contained_and_has_an_svg(make: object) -> None:
    run = make().run  # type: ignore[operator]
    root = parse_xml(render_html(run))
    assert root.findall(f".//{SVG}svg")
    assert not root.xpath(
        "//*[local-name()='script' or local-name()='link' or "
        "local-name()='img' or local-name()='iframe']"
    )
    assert not root.xpath("//@src | //@href | //@*[local-name()='href']")
    patterns = set(root.xpath("//*[local-name()='pattern']/@id"))
    fills = {v for v in root.xpath("//@fill") if v.startswith("url(")}
    assert fills <= {f"url(#{p})" for p in patterns}  # only references to our own patterns
    assert all(p.startswith(root.get("id")) for p in patterns)  # unique on the page
    lxml_html.fromstring(render_html(run))  # and it is HTML too


def test_html_follows_the_dom_contract() -> None:
    r = failed_closed()
    page = render_html(r.run)
    root = parse_xml(page)
    assert root.tag == "div"
    assert root.get("class") == "woml-timeline"
    assert re.fullmatch(r"woml-tl-[0-9a-f]{12}", root.get("id") or "")
    assert (root.get("data-run"), root.get("data-status")) == ("run-1", "failed")
    assert float(root.get("data-end")) == pytest.approx(33.3)
    children = [c.get("class") or c.tag for c in root]
    assert children == ["style", "woml-header", "woml-scroll", "woml-replay", "woml-steps"]
    (header,) = by_class(root, "woml-header")
    assert header.find("code").text == "run-1"
    assert "t = 33.3s" in "".join(header.itertext())
    (scroll,) = by_class(root, "woml-scroll")
    assert "overflow-x:auto" in scroll.get("style")
    (replay,) = by_class(root, "woml-replay")
    assert len(replay) == 0
    assert not (replay.text or "").strip()
    (svg,) = scroll
    assert svg.get("class") == "woml-svg"
    assert svg.get("role") == "group"  # its attempts are buttons, visible to screen readers
    knots = json.loads(svg.get("data-axis"))
    assert knots[0] == [0.0, 150.0]
    assert all(b[0] > a[0] and b[1] > a[1] for a, b in itertools.pairwise(knots))
    assert in_svg(root, "woml-axis")
    assert [g.get("data-step") for g in in_svg(root, "woml-lane")] == ["charge", "email"]
    segs = in_svg(root, "woml-seg")
    kinds = [next(k for k in g.get("class").split() if k != "woml-seg") for g in segs]
    # Waits are painted first so attempt labels drawn over them stay clickable.
    assert kinds == ["woml-wait", "woml-wait", "woml-attempt", "woml-attempt", "woml-attempt"]
    first = segs[2]
    assert first.get("class") == "woml-seg woml-attempt woml-outcome-threw"
    assert (first.get("data-step"), first.get("data-n")) == ("charge", "1")
    assert (float(first.get("data-t0")), float(first.get("data-t1"))) == (0.0, 0.12)
    assert float(first.get("data-x0")) == 150.0
    assert float(first.get("data-x1")) > 150.0
    assert (first.get("tabindex"), first.get("role")) == ("0", "button")
    assert first.get("aria-label") == "attempt 1 of charge: threw"
    assert [c.tag for c in first][:2] == [f"{SVG}title", f"{SVG}rect"]
    assert first.find(f"{SVG}rect").get("class") == "woml-bar"
    assert by_class(first, "woml-label")
    assert segs[0].get("data-n") == "1"  # the wait after attempt 1
    assert segs[0].get("tabindex") is None  # waits are not selectable
    for g in segs:
        for attr in ("data-step", "data-n", "data-t0", "data-t1", "data-x0", "data-x1"):
            assert g.get(attr) is not None, (g.get("class"), attr)
    assert in_svg(root, "woml-legend")
    (steps,) = by_class(root, "woml-steps")
    details = by_class(steps, "woml-attempt-details")
    assert [(d.get("data-step"), d.get("data-n")) for d in details] == [
        ("charge", "1"),
        ("charge", "2"),
        ("charge", "3"),
    ]
    assert details[0].get("class") == "woml-attempt-details woml-outcome-threw"
    assert details[0].find("summary").text == "#1 threw · 0s → 0.12s"
    assert "<script" not in page


def test_html_escapes_untrusted_logs_errors_urls_headers_and_results() -> None:
    r = Recorder(workflow(("s", RetryPolicy())))
    r.step("s", 0)
    r.start("s", 1, 0)
    r.log("s", 1, 0.1, EVIL)
    r.call("s", 1, 0.2, url=f"http://127.0.0.1:9/x?q={EVIL}", headers={"x-note": EVIL})
    r.finish("s", 1, 0.3, "succeeded", result={"html": EVIL}, explanation=EVIL)
    r.step_done("s", 0.3, "succeeded")
    r.run_done(0.3, "succeeded")
    page = render_html(r.run)
    root = parse_xml(page)
    assert not root.xpath("//*[local-name()='script']")
    text = "".join(root.itertext())
    assert text.count(EVIL) >= 4  # log, URL, header, explanation: shown as text
    assert "<script>" not in page


def xml_visible(text: str) -> str:
    """What a reader can see of ``text`` in the HTML: characters that would act instead
    of showing (C0 and C1 controls but tab, newline and carriage return; DEL; Unicode
    format characters, category Cf; U+2028/U+2029; surrogates; U+FFFE/U+FFFF) are
    written as text, C0 in caret notation and the rest as ``⟨U+XXXX⟩``, and line ends
    are normalised to LF (XML 1.0 §2.11)."""

    def shown(c: str) -> str:
        o = ord(c)
        if c in "\t\n\r":
            return c
        if o < 0x20:
            return "^" + chr(o + 0x40)
        if o == 0x7F:
            return "^?"
        if (
            0x80 <= o <= 0x9F
            or unicodedata.category(c) in ("Cf", "Zl", "Zp", "Cs")
            or o in (0xFFFE, 0xFFFF)
        ):
            return f"⟨U+{o:04X}⟩"
        return c

    return "".join(map(shown, text)).replace("\r\n", "\n").replace("\r", "\n")


@settings(deadline=None)  # checks what is drawn, not how fast (bench/timeline.py)
@given(st.text(max_size=60))
def test_html_stays_well_formed_for_any_console_output(line: str) -> None:
    r = Recorder(workflow(("s", RetryPolicy())))
    r.step("s", 0)
    r.start("s", 1, 0)
    r.log("s", 1, 0.1, line)
    r.finish("s", 1, 0.2, "threw", error=("Error", line, 3), explanation="x")
    root = parse_xml(render_html(r.run))
    (logs,) = by_class(root, "woml-logs")
    assert (logs.text or "") == xml_visible(line)


@settings(deadline=None)  # checks what is drawn, not how fast (bench/timeline.py)
@given(st.text(max_size=30))
def test_html_stays_well_formed_for_any_step_id_in_the_svg(step: str) -> None:
    r = one_attempt(step=step or "s")
    parse_xml(render_html(r.run))


def test_svg_bars_are_coloured_patterned_and_labelled_by_outcome() -> None:
    root = parse_xml(render_html(failed_closed().run))
    bars = in_svg(root, "woml-attempt")
    titles = [b.findtext(f"{SVG}title") for b in bars]
    labels = [b.findtext(f"{SVG}text") for b in bars]
    # in full where there is room; "#2" alone where its neighbour is too close
    assert labels == ["#1 threw", "#2", "#3 timeout"]
    assert titles[0] == "attempt 1 of charge · threw · 0s → 0.12s"  # the tooltip
    assert [b.get("aria-label").rsplit(": ", 1)[1] for b in bars] == ["threw", "threw", "timeout"]
    colours = {b.get("class"): b.find(f"{SVG}rect").get("fill") for b in bars}
    assert len(set(colours.values())) == 2  # threw and timeout differ
    hatched = [b for b in bars if b.xpath(".//*[starts-with(@fill, 'url(#')]")]
    assert len(hatched) == 3  # failures carry a pattern too: colour is never the only cue
    stripes, cross = (b.xpath(".//@fill[starts-with(., 'url(#')]")[0] for b in bars[1:])
    assert stripes != cross  # retried and fail-closed failures differ in pattern too


def test_svg_succeeded_bar_is_solid_green_and_labelled_inside() -> None:
    root = parse_xml(render_html(succeeded({"id": 1}).run))
    (bar,) = in_svg(root, "woml-outcome-succeeded")
    (text,) = bar.findall(f"{SVG}text")
    assert text.text == "#1 succeeded"
    assert text.get("fill") == BAR_TEXT
    assert "woml-in" in text.get("class")
    assert not bar.xpath(".//*[starts-with(@fill, 'url(#')]")


def test_svg_labels_wait_gaps() -> None:
    root = parse_xml(render_html(failed_closed().run))
    waits = [g.findtext(f"{SVG}text") for g in in_svg(root, "woml-wait")]
    assert waits == ["wait 1s", "2s"]  # the short form where "wait 2s" has no room
    titles = [g.findtext(f"{SVG}title") for g in in_svg(root, "woml-wait")]
    assert titles == ["waited 1s before attempt 2", "waited 2s before attempt 3"]


def test_svg_draws_planned_attempts_as_dashed_outlines() -> None:
    root = parse_xml(render_html(waiting().run))
    planned = in_svg(root, "woml-planned")
    assert [g.findtext(f"{SVG}text") for g in planned] == [
        "#2 planned",
        "#3 planned",
        "#4 planned",
        "#1 planned",
    ]
    for g in planned:
        rect = g.find(f"{SVG}rect")
        assert rect.get("stroke-dasharray")
        assert rect.get("fill") == "none"


def test_svg_has_a_time_axis_with_ticks_covering_the_run() -> None:
    # The axis ends where the run ends (it used to be rounded up): ticks fall every
    # round step from 0 up to the end.
    layout = compute_layout(failed_closed().run)
    root = parse_xml(render_html(failed_closed().run))
    (axis,) = in_svg(root, "woml-axis")
    ticks = [t.text for t in axis.iter(f"{SVG}text")]
    assert ticks[0] == "0s"
    assert len(ticks) >= 3
    assert ticks == [format_time(t) for t in layout.ticks]
    step = layout.ticks[1] - layout.ticks[0]
    assert layout.ticks[-1] > 33.3 - step
    assert layout.x(layout.ticks[-1]) <= layout.track_x1


def test_html_shows_full_key_in_code_and_policy_in_words() -> None:
    root = parse_xml(render_html(failed_closed().run))
    keys = [k.text for k in by_class(root, "woml-key")]
    assert keys == [idempotency_key("run-1", "charge"), idempotency_key("run-1", "email")]
    assert all(k.tag == "code" for k in by_class(root, "woml-key"))
    # spec §6.3: attempts used against allowed, then the schedule; the step never run
    # (email) shows no count.
    policies = [p.text for p in by_class(root, "woml-policy")]
    assert policies == ["3 of 4 attempts · exponential 1s → max 10s", "no retry"]


def test_html_details_show_explanation_error_line_calls_and_logs() -> None:
    r = failed_closed()
    root = parse_xml(render_html(r.run))
    details = by_class(root, "woml-attempt-details")
    assert len(details) == 3
    first = "".join(details[0].itertext())
    assert "#1 threw" in first
    assert "retrying after 1s" in first
    assert "TypeError: boom @ line 7" in first
    assert "charging card" in first
    (calls,) = by_class(details[0], "woml-calls")
    row = [td.text for td in calls.findall("tr")[1].findall("td")]
    assert row == [
        "charge",
        "POST",
        "http://127.0.0.1:9/charges",
        "503",
        f"Idempotency-Key: {r.key('charge')}",
        "sent fresh",
        "none",
    ]


@pytest.mark.parametrize(
    ("replayed", "headers", "verdict"),
    [
        (False, None, "sent fresh"),
        (False, {"content-type": "application/json"}, "sent fresh"),
        (False, {"Idempotent-Replayed": "true"}, "replayed by the server"),
        (False, {"idempotent-replayed": "True "}, "replayed by the server"),
        (False, {"idempotent-replayed": "false"}, "sent fresh"),
        (True, {"idempotent-replayed": "true"}, "reattached from the journal"),
        (True, None, "reattached from the journal"),
    ],
)
def test_http_details_give_the_servers_verdict_per_call(
    replayed: bool, headers: dict[str, str] | None, verdict: str
) -> None:
    """spec §6.3: each call says whether it was replayed (by the server, or reattached
    from the journal by WOML, spec §4.3) or sent fresh, with the key header sent."""
    r = Recorder(workflow(("s", RetryPolicy())))
    r.step("s", 0)
    r.start("s", 1, 0)
    r.call("s", 1, 0.1, replayed=replayed, status=201, response_headers=headers)
    root = parse_xml(render_html(r.run))
    (calls,) = by_class(root, "woml-calls")
    head = [th.text for th in calls.findall("tr")[0].findall("th")]
    row = dict(zip(head, [td.text for td in calls.findall("tr")[1].findall("td")], strict=True))
    assert row["server's verdict"] == verdict
    assert row["idempotency header sent"] == f"Idempotency-Key: {r.key('s')}"
    assert f"→ 201 · {verdict}" in render_text(r.run)


@pytest.mark.parametrize(
    ("outcome", "verdict"),
    [("network-error", "no response (network error)"), ("ambiguous", "effect unknown (ambiguous)")],
)
def test_calls_without_a_response_say_so(outcome: str, verdict: str) -> None:
    r = Recorder(workflow(("s", RetryPolicy())))
    r.step("s", 0)
    r.start("s", 1, 0)
    r.call("s", 1, 0.1, status=None, outcome=outcome, key_header=None)
    assert verdict in "".join(parse_xml(render_html(r.run)).itertext())
    assert verdict in render_text(r.run)
    assert "no idempotency key sent" in render_text(r.run)


def test_redacted_authorization_header_renders_as_bullets() -> None:
    # spec §4.1: the HTTP service redacts before the event; the timeline shows what it got.
    r = Recorder(workflow(("s", RetryPolicy())))
    r.step("s", 0)
    r.start("s", 1, 0)
    r.call("s", 1, 0.1, headers={"authorization": "•••"})
    root = parse_xml(render_html(r.run))
    (calls,) = by_class(root, "woml-calls")
    assert "authorization: •••" in "".join(calls.itertext())


def test_result_preview_is_truncated_with_a_note() -> None:
    big = {"items": ["x" * 50] * 100}
    root = parse_xml(render_html(succeeded(big).run))
    (pre,) = by_class(root, "woml-result")
    shown = pre.text or ""
    full = json.dumps(big, ensure_ascii=False, indent=1)
    assert shown.startswith(full[:1000])
    assert shown.endswith(f"… ({len(full) - 1000} more characters)")


def test_resumed_run_marks_the_resume_on_the_axis() -> None:
    from woml_magic.events import RunResumed

    r = waiting()
    r.emit(RunResumed("run-1", 5.0))
    root = parse_xml(render_html(r.run))
    assert in_svg(root, "woml-mark-resumed")
    assert "resumed at 5s" in render_text(r.run)


def test_each_render_has_its_own_root_id() -> None:
    run = failed_closed().run
    assert parse_xml(render_html(run)).get("id") != parse_xml(render_html(run)).get("id")


# --- the bundle and the journal path -------------------------------------------------


def test_mimebundle_is_text_and_html_and_is_what_run_displays() -> None:
    run = failed_closed().run
    bundle = mimebundle(run)
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"] == render_text(run)
    # the HTML is this drawing, as a picture (spec §6.5), then the script that makes it
    # the inline drawing again
    assert same_page(unpicture(bundle["text/html"])).startswith(same_page(render_html(run)))
    shown = run._repr_mimebundle_()
    assert set(shown) == set(bundle)
    assert same_page(unpicture(shown["text/html"])) == same_page(unpicture(bundle["text/html"]))


def test_a_run_rebuilt_from_its_events_renders_identically() -> None:
    # spec §6.2: `%woml show` draws a past run from the journal's events.
    live = failed_closed().run
    again = Run.from_events(live.workflow, live.events)
    assert same_page(render_html(again)) == same_page(render_html(live))
    assert render_text(again) == render_text(live)


def test_importing_the_timeline_does_not_import_ipywidgets() -> None:
    code = "import sys, woml_magic.timeline as t; t.mimebundle; print('ipywidgets' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"


def test_fixed_policy_with_max_delay_says_it_has_no_effect() -> None:
    policy = RetryPolicy(3, "fixed", timedelta(seconds=2), timedelta(seconds=5))
    text = render_text(Recorder(workflow(("s", policy))).run)
    assert "retry-max-delay has no effect with fixed backoff" in text


def test_the_gap_after_an_interrupted_attempt_is_labelled_resumed_not_wait() -> None:
    """spec §5.3: --retry-interrupted starts the next attempt at once; no wait was scheduled."""
    rec = Recorder(workflow(("charge", CHARGE_POLICY)))
    rec.step("charge", 0.0)
    rec.start("charge", 1, 0.0)
    rec.finish("charge", 1, 0.5, "interrupted", error=("InterruptedError", "stopped", None))
    rec.start("charge", 2, 3.0)
    rec.finish("charge", 2, 3.2, "succeeded")
    text = render_text(rec.run)
    assert "resumed" in text
    assert "wait 2.5s" not in text


def test_text_timeline_of_the_spec_example_from_a_real_run(spec_run: Run) -> None:
    text = render_text(spec_run)
    waits = [line.strip() for line in text.splitlines() if line.strip().startswith("wait ")]
    assert waits == [f"wait {format_time(w)}" for w in SPEC_WAITS]
    explanation = spec_run.steps["charge"].attempts[0].explanation
    block = " ".join(line.strip() for line in attempt_block(text, "1   threw"))
    assert explanation in block


def test_a_live_run_is_drawn_up_to_the_given_now() -> None:
    r = waiting()
    r.start("charge", 2, 1.12)
    root = parse_xml(render_html(r.run, now=2.0))
    (running,) = in_svg(root, "woml-outcome-running")
    assert float(running.get("data-t1")) == 2.0
    assert root.get("data-status") == "running"
    assert "t = 2s" in "".join(by_class(root, "woml-header")[0].itertext())


def test_a_retry_the_demo_api_replays_reads_replayed_by_the_server() -> None:
    """spec §8: the demo API stores the dropped response under the key and answers the
    retry with ``Idempotent-Replayed: true``; the timeline says so (spec §6.3)."""
    from woml_magic.demo import DemoAPI

    with DemoAPI() as api:
        api.drop_response_next(1)
        doc = f"""<step id="charge" retry="3" retry-backoff="fixed" retry-delay="1s"><script>
const r = await services.http.request({{method: "POST", url: "{api.url}/charges",
  json: {{amount: 4200, currency: "eur"}},
  idempotency: {{header: "Idempotency-Key", value: attempt.idempotencyKey}}}});
return r.status;
</script></step>"""
        run = wm.run(doc, clock="simulated")
    first, second = run.steps["charge"].attempts
    assert (first.calls[0].outcome, second.calls[0].status) == ("ambiguous", 201)
    text = " ".join(render_text(run).split())
    assert "→ 201 · replayed by the server" in text
    assert "effect unknown (ambiguous)" in text
    rows = by_class(parse_xml(render_html(run)), "woml-calls")
    verdicts = [tr.findall("td")[5].text for table in rows for tr in table.findall("tr")[1:]]
    assert verdicts == ["effect unknown (ambiguous)", "replayed by the server"]


def test_the_header_links_to_the_run_in_its_engines_ui_escaped() -> None:
    """spec §9: a Run's links (its engine's Web UI) are links in the header; no links,
    no anchor."""
    run = wm.run('<step id="s"><script>return 1;</script></step>', clock="simulated")
    assert "woml-link" not in render_html(run)
    run.links["Temporal Web UI"] = 'http://127.0.0.1:8233/namespaces/default/workflows/a"b'
    page = lxml_html.fromstring(render_html(run))
    (anchor,) = page.xpath('//div[@class="woml-header"]/a[@class="woml-link"]')
    assert anchor.get("href") == 'http://127.0.0.1:8233/namespaces/default/workflows/a"b'
    assert anchor.text == "Temporal Web UI"
    assert anchor.get("rel") == "noopener"


def test_html_ends_each_step_that_made_calls_with_its_key_lineage() -> None:
    """spec §10.3, the DOM contract extended: after a step's attempts, for a step that
    made HTTP calls, ``div.woml-lineage[data-step]`` with its summary and a
    ``table.woml-lineage-table`` of ``tr.woml-lineage-row[data-step, data-n,
    data-verdict]``; the attempts' own ``table.woml-calls`` are unchanged."""
    r = failed_closed()
    root = parse_xml(render_html(r.run))
    (steps,) = by_class(root, "woml-steps")
    charge, email = steps.findall("div")
    assert charge[-1].get("class") == "woml-lineage"
    assert charge[-1].get("data-step") == "charge"
    assert not by_class(email, "woml-lineage")  # no calls, no lineage
    (summary,) = by_class(charge, "woml-lineage-summary")
    assert "".join(summary.itertext()) == ("Key lineage · 1 request carried the key: 1 error")
    (table,) = by_class(charge, "woml-lineage-table")
    head = [th.text for th in table.findall("tr")[0].findall("th")]
    assert head == ["attempt", "call", "method", "URL", "status", "server's verdict", "why"]
    (row,) = table.findall("tr")[1:]
    assert row.get("class") == "woml-lineage-row woml-verdict-error"
    assert (row.get("data-step"), row.get("data-n"), row.get("data-verdict")) == (
        "charge",
        "1",
        "error",
    )
    assert [td.text for td in row.findall("td")][:5] == [
        "#1",
        "charge",
        "POST",
        "http://127.0.0.1:9/charges",
        "503",
    ]
    assert len(by_class(root, "woml-calls")) == 1
    assert not by_class(root, "woml-injected")  # nothing was injected


def test_text_ends_each_step_that_made_calls_with_its_key_lineage() -> None:
    text = render_text(failed_closed().run)
    lines = text.splitlines()
    at = lines.index("  key lineage 1 request carried the key: 1 error")
    assert lines[at + 1].startswith(
        "    #1 charge POST http://127.0.0.1:9/charges → 503 error answer · not a verdict"
    )
    assert lines[at + 2] == ""  # then the next step
    assert lines[at + 3].startswith("step email")
    assert text.count("key lineage") == 1


# --- the policy in other engines (spec §11) ----------------------------------------------


def policy_targets_of(root: etree._Element, step: str) -> etree._Element:
    (box,) = [d for d in by_class(root, "woml-policy-targets") if d.get("data-step") == step]
    return box


def test_html_shows_each_steps_policy_in_other_engines_after_its_key() -> None:
    """The DOM contract extended: per step, after its key and before its attempts,
    ``details.woml-policy-targets[data-step]`` (closed) with one
    ``div.woml-policy-target[data-target, data-same]`` per target of ``translate_all``:
    its name, same schedule or not, its waits, the snippet verbatim, the warnings."""
    r = failed_closed()
    root = parse_xml(render_html(r.run))
    (steps,) = by_class(root, "woml-steps")
    for step_div, step in zip(steps.findall("div"), r.run.workflow.steps, strict=True):
        box = policy_targets_of(root, step.id)
        assert box.tag == "details"
        assert box.getparent() is step_div
        kids = list(step_div)
        assert kids.index(box) == 2  # status and policy, key, then this
        assert all(kids.index(d) > 2 for d in by_class(step_div, "woml-attempt-details"))
        assert box.get("open") is None
        assert box.findtext("summary") == "Retry policy in other engines"
        translations = translate_all(step.policy)
        targets = box.findall("div")
        assert [t.get("data-target") for t in targets] == list(TARGETS)
        for div, t in zip(targets, translations.values(), strict=True):
            assert div.get("class") == "woml-policy-target"
            assert div.get("data-same") == str(t.same).lower()
            (head,) = by_class(div, "woml-target-head")
            (name,) = by_class(head, "woml-target-name")
            assert name.text == TARGET_NAMES[t.target]
            mark = by_class(head, "woml-same" if t.same else "woml-differs")
            assert [m.text for m in mark] == ["same schedule" if t.same else "differs"]
            (code,) = div.xpath("pre[@class='woml-target-code']/code")
            assert code.text == t.code
            warnings = by_class(div, "woml-target-warnings")
            if t.warnings:
                assert [li.text for li in warnings[0].findall("li")] == list(t.warnings)
            else:
                assert warnings == []
    assert [t.get("data-target") for t in by_class(root, "woml-policy-target")] == [
        *TARGETS,
        *TARGETS,
    ]


def test_policy_in_other_engines_gives_the_waits_as_the_axis_writes_them() -> None:
    """4 attempts, exponential 500ms, max 3s: WOML waits 0.5s, 1s, 2s; Step Functions
    says whole seconds only (1s, 2s, 3s), so it differs; the others are the same."""
    policy = RetryPolicy(4, "exponential", timedelta(milliseconds=500), timedelta(seconds=3))
    root = parse_xml(render_html(Recorder(workflow(("s", policy))).run))
    box = policy_targets_of(root, "s")
    waits = {
        d.get("data-target"): by_class(d, "woml-target-waits")[0].text for d in box.findall("div")
    }
    assert waits == {
        "temporal": "waits 0.5s, 1s, 2s, as WOML",
        "stepfunctions": "waits 1s, 2s, 3s; WOML waits 0.5s, 1s, 2s",
        "tenacity": "waits 0.5s, 1s, 2s, as WOML",
        "stamina": "waits 0.5s, 1s, 2s, as WOML",
    }
    (differs,) = by_class(box, "woml-differs")
    assert differs.getparent().getparent().get("data-target") == "stepfunctions"
    assert differs.getparent().getparent().get("data-same") == "false"


def test_policy_in_other_engines_of_a_single_attempt_says_no_retry() -> None:
    root = parse_xml(render_html(succeeded().run))
    box = policy_targets_of(root, "fetch")
    assert {by_class(d, "woml-target-waits")[0].text for d in box.findall("div")} == {
        "no retry, as WOML"
    }
    warned = [
        d.get("data-target") for d in box.findall("div") if by_class(d, "woml-target-warnings")
    ]
    assert warned == ["stepfunctions"]  # MaxAttempts counts retries


def test_policy_in_other_engines_escapes_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step id, a target, a snippet or a warning with markup in it shows as text."""
    from woml_magic.policy_targets import Translation
    from woml_magic.timeline import details

    def evil(policy: RetryPolicy) -> dict[str, Translation]:
        return {
            EVIL: Translation(
                EVIL, f"x = '{EVIL}' & \"y\"", {}, (1.0,), False, (EVIL, f"{EVIL}\x00"), (2.0,)
            )
        }

    monkeypatch.setattr(details, "translate_all", evil)
    r = one_attempt(step=EVIL)
    page = render_html(r.run)
    assert "<script>" not in page
    root = parse_xml(page)
    assert not root.xpath("//*[local-name()='script']")
    box = policy_targets_of(root, EVIL)
    (target,) = box.findall("div")
    assert target.get("data-target") == EVIL
    assert by_class(target, "woml-target-name")[0].text == EVIL
    assert target.find("pre/code").text == f"x = '{EVIL}' & \"y\""
    assert [li.text for li in target.iter("li")] == [EVIL, f"{EVIL}^@"]
    assert by_class(target, "woml-target-waits")[0].text == "waits 1s; WOML waits 2s"
    lxml_html.fromstring(page)


def test_policy_in_other_engines_stays_small_and_out_of_the_text_table() -> None:
    """It appears once per step: a few kilobytes at most, whatever the policy; the
    plain-text table (too long there) does not show it."""
    policies = [
        RetryPolicy(),
        RetryPolicy(10, "exponential", timedelta(milliseconds=500), None),
        RetryPolicy(10, "fixed", timedelta(0), None),
        RetryPolicy(10, "exponential", timedelta(hours=24), timedelta(hours=24)),
    ]
    run = Recorder(workflow(*((f"s{i}", p) for i, p in enumerate(policies)))).run
    root = parse_xml(render_html(run))
    for i in range(len(policies)):
        size = len(etree.tostring(policy_targets_of(root, f"s{i}"), encoding="unicode"))
        assert size < 6000, (policies[i].describe(), size)
    text = render_text(run)
    assert "other engines" not in text
    for words in ("RetryPolicy(", "stamina", "tenacity", "Step Functions", "States."):
        assert words not in text
