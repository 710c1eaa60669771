"""Runs compared on one time axis (spec §10.4: ``wm.compare(run, …)``): the layout,
the text, the SVG, the HTML and the image, and the refusals.

The runs are real: ``wm.run`` on the simulated clock, scripts in the QuickJS worker.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lxml import etree

import woml_magic as wm
from woml_magic.errors import WomlError
from woml_magic.model import Run
from woml_magic.timeline.compare import MAX_LABEL, Comparison
from woml_magic.timeline.layout import compute_layout
from woml_magic.timeline.svg import COMPARE_AXIS

SVG_NS = {"s": "http://www.w3.org/2000/svg"}
DOC = """
<step id="charge" retry="4" retry-backoff="{backoff}" retry-delay="1s">
  <script>if (attempt.number < 4) throw new Error("busy"); return attempt.number;</script>
</step>
<step id="email"><script>return 1;</script></step>
"""


@pytest.fixture(scope="module")
def runs() -> tuple[Run, Run]:
    fixed = wm.run(DOC.format(backoff="fixed"), clock="simulated")
    expo = wm.run(DOC.format(backoff="exponential"), clock="simulated")
    assert fixed.status == expo.status == "succeeded"
    return fixed, expo


@pytest.fixture(scope="module")
def cmp(runs: tuple[Run, Run]) -> Comparison:
    return wm.compare(*runs, labels=["fixed", "exponential"])


def svg_of(cmp: Comparison) -> etree._Element:
    return etree.fromstring(cmp.to_svg().encode())


def test_the_layout_has_every_runs_lanes_under_its_band_on_one_axis(
    cmp: Comparison, runs: tuple[Run, Run]
) -> None:
    layout = cmp.layout()
    assert [lane.ref for lane in layout.lanes] == ["1/charge", "1/email", "2/charge", "2/email"]
    assert [(b.ref, b.label) for b in layout.bands] == [("1", "fixed"), ("2", "exponential")]
    # Each band sits above its run's lanes, the second below the first run's lanes.
    first, second = layout.bands
    assert first.y < layout.lanes[0].y <= layout.lanes[1].y < second.y < layout.lanes[2].y
    # One axis: it ends at the longer run's end, so the shorter run's times map as the
    # longer run's do (the fixed run's 3 s is left of the exponential run's 7 s).
    fixed, expo = runs
    assert expo.ended_at is not None
    assert fixed.ended_at is not None
    assert layout.now == pytest.approx(max(fixed.ended_at, expo.ended_at))
    alone = compute_layout(expo)
    assert layout.x(expo.ended_at) == pytest.approx(alone.x(expo.ended_at))
    assert layout.x(fixed.ended_at) < layout.x(expo.ended_at)


def test_equal_times_are_drawn_at_equal_x_in_both_runs(cmp: Comparison) -> None:
    layout = cmp.layout()
    bars = {
        lane.ref: [d for d in lane.drawn if d.seg.kind == "attempt"]
        for lane in layout.lanes
        if lane.step_id == "charge"
    }
    # Both runs' second attempts start after the same 1 s wait: the same x, to a px.
    assert bars["1/charge"][1].x0 == pytest.approx(bars["2/charge"][1].x0, abs=1.0)
    # The exponential run's fourth attempt comes 4 s later than the fixed run's.
    assert bars["2/charge"][3].x0 - bars["1/charge"][3].x0 == pytest.approx(
        layout.x(7.0) - layout.x(3.0), abs=3.0
    )


def test_text_names_each_run_and_holds_each_runs_table(
    cmp: Comparison, runs: tuple[Run, Run]
) -> None:
    text = cmp.to_text()
    head = text.splitlines()[0]
    assert head == f"compare 2 runs · fixed · exponential · {COMPARE_AXIS}"
    assert text.index("== 1. fixed") < text.index(runs[0].id) < text.index("== 2. exponential")
    assert text.index("== 2. exponential") < text.index(runs[1].id)
    assert "4 attempts · fixed 1s" in text
    assert "4 attempts · exponential 1s" in text


def test_svg_draws_a_band_per_run_and_lanes_of_both_on_one_axis(
    cmp: Comparison, runs: tuple[Run, Run]
) -> None:
    root = svg_of(cmp)
    labels = root.findall(".//s:g[@class='woml-run']/s:text", SVG_NS)
    words = ["".join(str(w) for w in t.itertext()) for t in labels]
    assert words[0].startswith("fixed · run " + runs[0].id)
    assert "succeeded" in words[0]
    assert words[1].startswith("exponential · run " + runs[1].id)
    lanes = root.findall(".//s:g[@class='woml-lane']", SVG_NS)
    assert [g.get("data-step") for g in lanes] == ["1/charge", "1/email", "2/charge", "2/email"]
    assert len(root.findall(".//s:g[@class='woml-axis']", SVG_NS)) == 1
    note = root.find(".//s:text[@class='woml-axis-note woml-muted']", SVG_NS)
    assert note is not None
    assert note.text == COMPARE_AXIS
    header = root.find(".//s:text[@class='woml-header']", SVG_NS)
    assert header is not None
    assert "".join(str(w) for w in header.itertext()).startswith("compare fixed · exponential")
    assert root.get("aria-label") == f"comparison of runs {runs[0].id} {runs[1].id}"


def test_html_keys_the_details_of_each_run_apart(cmp: Comparison) -> None:
    html = cmp.to_html()
    assert 'data-status="compared"' in html
    segs = set(re.findall(r'<g class="woml-seg woml-attempt[^"]*" data-step="([^"]+)"', html))
    details = set(
        re.findall(r'<details class="woml-attempt-details[^"]*" data-step="([^"]+)"', html)
    )
    assert segs == details == {"1/charge", "1/email", "2/charge", "2/email"}
    blocks = re.findall(r'<div class="woml-run-details" data-run="(\d)"><p><strong>([^<]+)', html)
    assert blocks == [("1", "fixed"), ("2", "exponential")]


def test_it_displays_as_a_picture_with_its_script_and_text(cmp: Comparison) -> None:
    bundle = cmp._repr_mimebundle_()
    assert bundle["text/plain"] == cmp.to_text()
    html = bundle["text/html"]
    assert '<img class="woml-picture"' in html
    assert "<svg" not in html.split("<script>")[0]
    root_id = re.search(r'id="(woml-tl-[0-9a-f]+)"', html)
    assert root_id is not None
    assert html.rstrip().endswith("</script>")
    assert f'"{root_id.group(1)}"' in html


def test_default_labels_are_the_workflow_and_run_ids(runs: tuple[Run, Run]) -> None:
    cmp = wm.compare(*runs)
    assert cmp.labels == tuple(f"{r.workflow_id} · {r.id}" for r in runs)
    long = wm.compare(*runs, labels=["x" * 100, "  two\n words "])
    assert long.labels == ("x" * (MAX_LABEL - 1) + "…", "two words")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_save_writes_the_comparison_as_svg(cmp: Comparison, tmp_path: Path, theme: str) -> None:
    path = cmp.save(tmp_path / "cmp.svg", theme=theme)
    assert path.read_text(encoding="utf-8") == cmp.to_svg(theme=theme)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("run", "other"), {}, "argument 1 is a str, not a Run"),
        ((None,), {}, "argument 2 is a NoneType, not a Run"),
        ((), {"labels": ["one"]}, "got 1 label for 2 runs"),
        ((), {"labels": "ab"}, "labels must be a list of strings"),
        ((), {"labels": ["a", " "]}, "labels must not be empty"),
    ],
)
def test_bad_arguments_say_what_compare_takes(
    runs: tuple[Run, Run], args: tuple[object, ...], kwargs: dict[str, object], message: str
) -> None:
    given: list[object] = list(runs)
    if args == ("run", "other"):
        given = ["run", runs[1]]
    elif args:
        given = [runs[0], *args]
    with pytest.raises(TypeError, match=re.escape(message)):
        wm.compare(*given, **kwargs)  # type: ignore[arg-type]


def test_one_run_is_not_a_comparison(runs: tuple[Run, Run]) -> None:
    with pytest.raises(TypeError, match="run_b"):
        wm.compare(runs[0])  # type: ignore[call-arg]


def test_a_run_still_going_is_refused_until_it_ends(runs: tuple[Run, Run]) -> None:
    handle = wm.start(
        '<step id="slow" retry="2" retry-delay="30s"><script>throw new Error("x");</script></step>'
    )
    try:
        assert handle.wait_started(10)
        assert handle.run.status == "running"
        with pytest.raises(WomlError, match="argument 2\\) is still running; wait for it"):
            wm.compare(runs[0], handle.run)
    finally:
        handle.cancel()
    ended = handle.result(10)
    assert ended.status != "running"
    assert wm.compare(runs[0], ended).runs[1] is ended
