"""The static timeline: plain text and HTML with inline SVG (spec §6.3).

Runs come from hand-written event sequences (``timeline_runs``) applied through
``Run.apply``, exactly as the engine and the journal build them.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lxml import etree
from lxml import html as lxml_html
from timeline_runs import CHARGE_POLICY, Recorder, failed_closed, succeeded, waiting, workflow

from woml_magic.model import Run, idempotency_key
from woml_magic.policy import RetryPolicy
from woml_magic.timeline import mimebundle, render_html, render_text
from woml_magic.timeline._layout import Segment, compute_layout, nice_axis, place

SVG = "{http://www.w3.org/2000/svg}"
EVIL = "<script>alert('x')</script>"


def parse_xml(text: str) -> etree._Element:
    return etree.fromstring(text.encode())


def by_class(root: etree._Element, cls: str) -> list[etree._Element]:
    return root.xpath(f".//*[contains(concat(' ', @class, ' '), ' {cls} ')]")  # type: ignore[no-any-return]


def in_svg(root: etree._Element, cls: str) -> list[etree._Element]:
    (svg,) = root.findall(f".//{SVG}svg")
    return by_class(svg, cls)


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


def test_text_rows_give_number_outcome_times_explanation_and_error_line() -> None:
    text = render_text(failed_closed().run)
    row1 = next(line for line in text.splitlines() if line.strip().startswith("1   threw"))
    assert "0s" in row1
    assert "0.12s" in row1
    assert "retrying after 1s" in row1
    assert "TypeError: boom @ line 7" in row1
    row3 = next(line for line in text.splitlines() if line.strip().startswith("3   timeout"))
    assert "3.3s" in row3
    assert "33.3s" in row3
    assert "(line unknown)" in row3  # a timeout has no script line


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


def test_text_shows_calls_with_idempotency_header() -> None:
    r = failed_closed()
    text = render_text(r.run)
    assert f"POST http://127.0.0.1:9/charges → 503 · Idempotency-Key: {r.key('charge')}" in text


# --- layout shared by every renderer -------------------------------------------------


@pytest.mark.parametrize(
    ("end", "axis_end", "step"),
    [(33.3, 40.0, 10.0), (1.0, 1.0, 0.2), (0.0, 0.001, 0.0002), (7200.0, 8000.0, 2000.0)],
)
def test_axis_ends_at_a_round_value_with_ticks_at_1_2_5_steps(
    end: float, axis_end: float, step: float
) -> None:
    got_end, ticks = nice_axis(end)
    assert got_end == pytest.approx(axis_end)
    assert ticks[0] == 0
    assert ticks[-1] == pytest.approx(got_end)
    assert all(b - a == pytest.approx(step) for a, b in itertools.pairwise(ticks))


@given(
    st.lists(
        st.tuples(st.floats(0, 100), st.floats(0, 50), st.floats(0, 80)), min_size=1, max_size=12
    ),
    st.floats(0.5, 200),
)
def test_placed_segments_never_overlap_and_keep_min_width(
    spans: list[tuple[float, float, float]], scale: float
) -> None:
    segs, t = [], 0.0
    for gap, length, _least in spans:
        t += gap
        segs.append(Segment("attempt", 1, t, t + length, "threw", "#1 threw", ""))
        t += length
    least = [s[2] for s in spans]
    spots = place(segs, scale=scale, min_width=least)
    cursor = 0.0
    for seg, (x, w), m in zip(segs, spots, least, strict=True):
        assert x >= cursor - 1e-9
        assert x >= seg.start * scale - 1e-9
        assert w >= m
        cursor = x + w


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
    fills = [v for v in root.xpath("//@fill") if v.startswith("url(")]
    assert set(fills) <= {"url(#woml-hatch)"}  # the only reference is to our own pattern
    lxml_html.fromstring(render_html(run))  # and it is HTML too


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
    """What an XML reader can see of ``text``: characters XML 1.0 forbids become U+FFFD,
    and line ends are normalised to LF (XML 1.0 §2.2, §2.11)."""

    def ok(c: str) -> bool:
        o = ord(c)
        return (
            c in "\t\n\r"
            or (0x20 <= o < 0xD800 and o != 0x7F)
            or 0xE000 <= o <= 0xFFFD
            or o > 0xFFFF
        )

    shown = "".join(c if ok(c) else "\ufffd" for c in text)
    return shown.replace("\r\n", "\n").replace("\r", "\n")


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


def test_svg_bars_are_coloured_and_labelled_by_outcome() -> None:
    root = parse_xml(render_html(failed_closed().run))
    bars = in_svg(root, "woml-attempt")
    titles = [b.findtext(f"{SVG}title") for b in bars]
    assert [b.findtext(f"{SVG}text") for b in bars] == ["#1 threw", "#2 threw", "#3 timeout"]
    assert titles[0] == "attempt 1 of charge · threw · 0s → 0.12s"  # the tooltip
    colours = {b.get("class"): b.find(f"{SVG}rect").get("fill") for b in bars}
    assert len(set(colours.values())) == 2  # threw and timeout differ
    hatched = [b for b in bars if b.xpath(".//*[@fill='url(#woml-hatch)']")]
    assert len(hatched) == 3  # failures carry a pattern too: colour is never the only cue


def test_svg_succeeded_bar_is_solid_green_and_labelled() -> None:
    root = parse_xml(render_html(succeeded({"id": 1}).run))
    (bar,) = in_svg(root, "woml-outcome-succeeded")
    assert bar.findtext(f"{SVG}text") == "#1 succeeded"
    assert not bar.xpath(".//*[@fill='url(#woml-hatch)']")


def test_svg_labels_wait_gaps() -> None:
    root = parse_xml(render_html(failed_closed().run))
    waits = [g.findtext(f"{SVG}text") for g in in_svg(root, "woml-wait")]
    assert waits == ["wait 1s", "wait 2s"]


def test_svg_draws_planned_attempts_grey_and_dashed() -> None:
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
        assert rect.get("fill") == "#f5f5f5"


def test_svg_has_a_time_axis_with_ticks_covering_the_run() -> None:
    root = parse_xml(render_html(failed_closed().run))
    (axis,) = in_svg(root, "woml-axis")
    ticks = [t.text for t in axis.iter(f"{SVG}text")]
    assert ticks[0] == "0s"
    assert len(ticks) >= 3
    assert float(ticks[-1].rstrip("s")) >= 33.3


def test_html_shows_full_key_in_code_and_policy_in_words() -> None:
    root = parse_xml(render_html(failed_closed().run))
    keys = [k.text for k in by_class(root, "woml-key")]
    assert keys == [idempotency_key("run-1", "charge"), idempotency_key("run-1", "email")]
    assert all(k.tag == "code" for k in by_class(root, "woml-key"))
    policies = [p.text for p in by_class(root, "woml-policy")]
    assert policies == [CHARGE_POLICY.describe(), "1 attempt · no retry"]


def test_html_details_show_explanation_error_line_calls_and_logs() -> None:
    r = failed_closed()
    root = parse_xml(render_html(r.run))
    details = root.xpath("//details")
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
        "sent",
        "none",
    ]


def test_replayed_calls_are_marked_reattached() -> None:
    r = Recorder(workflow(("s", RetryPolicy())))
    r.step("s", 0)
    r.start("s", 1, 0)
    r.call("s", 1, 0.1, replayed=True, status=201)
    root = parse_xml(render_html(r.run))
    (calls,) = by_class(root, "woml-calls")
    assert "reattached (replayed from the journal)" in "".join(calls.itertext())
    assert "reattached" in render_text(r.run)


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


# --- the bundle and the journal path -------------------------------------------------


def test_mimebundle_is_text_and_html_and_is_what_run_displays() -> None:
    run = failed_closed().run
    bundle = mimebundle(run)
    assert bundle == {"text/plain": render_text(run), "text/html": render_html(run)}
    assert run._repr_mimebundle_() == bundle


def test_a_run_rebuilt_from_its_events_renders_identically() -> None:
    # spec §6.2: `%woml show` draws a past run from the journal's events.
    live = failed_closed().run
    again = Run.from_events(live.workflow, live.events)
    assert render_html(again) == render_html(live)
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
    from timeline_runs import CHARGE_POLICY, Recorder, workflow

    rec = Recorder(workflow(("charge", CHARGE_POLICY)))
    rec.step("charge", 0.0)
    rec.start("charge", 1, 0.0)
    rec.finish("charge", 1, 0.5, "interrupted", error=("InterruptedError", "stopped", None))
    rec.start("charge", 2, 3.0)
    rec.finish("charge", 2, 3.2, "succeeded")
    text = render_text(rec.run)
    assert "resumed" in text
    assert "wait 2.5s" not in text
