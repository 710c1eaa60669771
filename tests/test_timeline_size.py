"""A timeline's saved output says each thing once (issue 21 item 6: a notebook in git
carries every byte; spec §6.3's details panel, §6.5's saved output).

Steps of one policy show its translations into other engines (spec §11) once: the
first such step holds them, the later ones name it. The byte goal itself is measured
in bench/browser.py.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from datetime import timedelta
from typing import Any

import pytest
from lxml import etree
from timeline_runs import Recorder, drawing_parts, many, workflow

from woml_magic.policy import RetryPolicy
from woml_magic.policy_targets import TARGETS
from woml_magic.timeline import interactive_html, render_html

P = RetryPolicy(3, "fixed", timedelta(seconds=1))
Q = RetryPolicy(4, "exponential", timedelta(milliseconds=500), timedelta(seconds=3))
STEPS = (("a", P), ("b", P), ("c", Q), ("d", P), ("e", Q))


def by_class(root: etree._Element, cls: str) -> list[etree._Element]:
    return root.xpath(f".//*[contains(concat(' ', @class, ' '), ' {cls} ')]")  # type: ignore[no-any-return]


def boxes() -> dict[str, etree._Element]:
    root = etree.fromstring(render_html(Recorder(workflow(*STEPS)).run).encode())
    return {d.get("data-step"): d for d in by_class(root, "woml-policy-targets")}


def test_each_policy_shows_its_translations_once_at_its_first_step() -> None:
    found = boxes()
    assert list(found) == ["a", "b", "c", "d", "e"]
    for step in ("a", "c"):
        assert found[step].get("data-same-as") is None
        targets = [t.get("data-target") for t in by_class(found[step], "woml-policy-target")]
        assert targets == list(TARGETS)


@pytest.mark.parametrize(("step", "first"), [("b", "a"), ("d", "a"), ("e", "c")])
def test_a_later_step_of_the_same_policy_names_the_step_that_shows_it(
    step: str, first: str
) -> None:
    box = boxes()[step]
    assert box.get("data-same-as") == first
    assert box.findtext("summary") == "Retry policy in other engines"  # still a section
    assert by_class(box, "woml-policy-target") == []
    (line,) = by_class(box, "woml-policy-same-as")
    assert "".join(line.itertext()) == (
        f"The same policy as step {first}: its translations are shown there."
    )


def test_a_run_of_many_steps_of_one_policy_grows_by_its_steps_not_its_translations() -> None:
    """1 step or 200 of one policy: the translations' text appears once."""
    one = render_html(Recorder(workflow(("s0", P))).run)
    many = render_html(Recorder(workflow(*((f"s{i}", P) for i in range(200)))).run)
    snippet = "stop_after_attempt(3)"  # tenacity's snippet for P
    assert one.count(snippet) == many.count(snippet) == 1


@pytest.mark.browser
def test_the_script_makes_tabs_of_the_first_and_leaves_the_named_ones(open_page: Any) -> None:
    page = open_page(interactive_html(Recorder(workflow(*STEPS)).run))
    tabs = (
        "() => [...document.querySelectorAll('details.woml-policy-targets')]"
        ".map(d => [d.dataset.step, d.querySelectorAll('.woml-target-tab').length])"
    )
    assert page.evaluate(tabs) == [["a", 4], ["b", 0], ["c", 4], ["d", 0], ["e", 0]]
    page.click('details.woml-policy-targets[data-step="b"] > summary')
    assert page.is_visible('details.woml-policy-targets[data-step="b"] .woml-policy-same-as')


# --- a big saved timeline keeps its attempts' details as data --------------------------

HOSTILE = '</script><script>alert(1)</script><!-- ]]> & "q" <b>'


def hostile_run() -> Any:
    """Two steps; the first logs and returns text that would end a script or a CDATA
    section if it were written raw."""
    r = Recorder(workflow(("a", P), ("b", Q)))
    r.step("a", 0.0)
    r.start("a", 1, 0.0)
    r.log("a", 1, 0.1, HOSTILE)
    r.finish("a", 1, 0.2, "threw", error=("Error", HOSTILE, 2), explanation="retrying")
    r.wait("a", 1, 0.2, 1.0)
    r.start("a", 2, 1.2)
    r.finish("a", 2, 1.3, "succeeded", result={"html": HOSTILE}, explanation="ok")
    r.step_done("a", 1.3, "succeeded")
    r.step("b", 1.3)
    r.start("b", 1, 1.3)
    r.finish("b", 1, 1.4, "succeeded", result=1, explanation="ok")
    r.step_done("b", 1.4, "succeeded")
    r.run_done(1.4, "succeeded")
    return r.run


@pytest.fixture
def defer_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every saved timeline counts as big (DEFER_DETAILS_AT attempts is a size, not a
    behaviour)."""
    from woml_magic.timeline import html

    monkeypatch.setattr(html, "DEFER_DETAILS_AT", 0)


def details_table(page: str) -> dict[str, str]:
    """The data at the end of a drawing (the page before its loader script)."""
    found = re.search(
        r'<script type="application/gzip" class="woml-details-data">([A-Za-z0-9+/=]+)'
        r"</script></div>$",
        page,
    )
    assert found is not None
    table: dict[str, str] = json.loads(gzip.decompress(base64.b64decode(found.group(1))))
    return table


def test_a_big_saved_timeline_has_summary_lines_and_its_details_as_data(defer_all: None) -> None:
    run = hostile_run()
    saved = interactive_html(run)
    root = etree.fromstring(f"<div>{saved}</div>".encode())  # still well-formed XML
    assert by_class(root, "woml-attempt-details") == []
    lines = {
        p.get("data-step"): "\n".join(p.itertext()) for p in by_class(root, "woml-attempt-lines")
    }
    assert lines == {
        "a": "#1 threw · 0s → 0.2s\n#2 succeeded · 1.2s → 1.3s",
        "b": "#1 succeeded · 1.3s → 1.4s",
    }
    # The data is the very markup the page shows when nothing is deferred.
    whole = etree.fromstring(render_html(run).encode())
    table = details_table(saved[: saved.rindex("<script>")])
    for step, markup in table.items():
        shown = [
            etree.tostring(d, encoding="unicode")
            for d in by_class(whole, "woml-attempt-details")
            if d.get("data-step") == step
        ]
        kept = etree.fromstring(f"<div>{markup}</div>")
        assert [etree.tostring(d, encoding="unicode") for d in kept] == shown


def test_a_small_saved_timeline_keeps_its_details_in_the_page() -> None:
    saved = interactive_html(hostile_run())
    drawing = saved[: saved.rindex("<script>")]
    assert "woml-details-data" not in drawing
    assert "woml-attempt-lines" not in drawing
    root = etree.fromstring(f"<div>{saved}</div>".encode())
    assert len(by_class(root, "woml-attempt-details")) == 3


@pytest.mark.browser
def test_selecting_an_attempt_of_a_big_timeline_shows_its_details(
    open_page: Any, defer_all: None
) -> None:
    page = open_page("<div style='height:3000px'></div>" + interactive_html(hostile_run()))
    # Out of view: nothing made yet.
    assert page.query_selector_all("details.woml-attempt-details") == []
    attempt = '.woml-seg.woml-attempt[data-step="a"][data-n="1"]'
    page.click(attempt + " .woml-bar")
    box = 'details.woml-attempt-details[data-step="a"][data-n="1"]'
    assert page.eval_on_selector(box, "d => d.open") is True
    assert page.eval_on_selector(attempt, "g => g.classList.contains('woml-selected')")
    text = page.inner_text(box)
    assert HOSTILE in text  # the data came through as text, never as markup
    assert page.query_selector_all(box + " b, " + box + " script") == []
    assert page.query_selector('p.woml-attempt-lines[data-step="a"]') is None
    # The keyboard too, on the other step.
    page.focus('.woml-seg.woml-attempt[data-step="b"][data-n="1"]')
    page.keyboard.press("Enter")
    assert page.eval_on_selector('details.woml-attempt-details[data-step="b"]', "d => d.open")


@pytest.mark.browser
def test_a_big_timelines_steps_get_their_details_when_they_come_into_view(
    open_page: Any, defer_all: None
) -> None:
    page = open_page(interactive_html(hostile_run()) + "<div style='height:3000px'></div>")
    page.wait_for_function(
        "() => document.querySelectorAll('details.woml-attempt-details').length === 3"
    )
    assert page.query_selector_all("p.woml-attempt-lines") == []
    order = page.eval_on_selector_all(
        '.woml-step[data-step="a"] > *', "els => els.map(e => e.className)"
    )
    # In their place: after the policy, before the key lineage or the next step.
    assert order.index("woml-policy-targets") < order.index(
        "woml-attempt-details woml-outcome-threw"
    )


# --- a big run's picture: compact, its live drawing as data (spec §6.5) ------------

SVG_NS = "{http://www.w3.org/2000/svg}"
PAINT = (
    *("fill", "fill-opacity", "stroke", "stroke-width", "stroke-dasharray"),
    *("font-size", "font-weight", "font-style", "text-anchor"),
)
GEOMETRY = ("x", "y", "width", "height", "rx", "x1", "y1", "x2", "y2", "points")


def picture_svg(saved: str) -> str:
    found = re.search(
        r'<img class="woml-picture"[^>]*src="data:image/svg\+xml;base64,([^"]+)"', saved
    )
    assert found is not None
    return base64.b64decode(found.group(1)).decode("utf-8")


def drawing_data(saved: str) -> str | None:
    """The live drawing a big saved output carries, whole: its lanes where the script
    builds them, before the legend."""
    parts = drawing_parts(saved)
    if parts is None:
        return None
    legend = '<g class="woml-legend">'
    lanes = "".join(markup for *_, markup in parts["lanes"])
    svg: str = parts["svg"]
    assert svg.count(legend) == 1
    return svg.replace(legend, lanes + legend)


def numbers(value: str) -> tuple[float | str, ...]:
    """An attribute's numbers (``540.0`` and ``540`` alike), or its words (``100%``)."""
    parts = re.split(r"[\s,]+", value.strip())
    try:
        return tuple(float(p) for p in parts)
    except ValueError:
        return (value,)


def drawn(svg: str) -> list[tuple[str, dict[str, str], tuple[Any, ...], str]]:
    """What ``svg`` paints, element by element in paint order: tag, paint (attributes,
    or a class of the SVG's own ``<style>``, over the drawing's inherited font size),
    geometry as numbers, and the words of a text (a tooltip's are not painted)."""
    root = etree.fromstring(svg.encode())
    rules: dict[str, dict[str, str]] = {}
    for style in root.iter(f"{SVG_NS}style"):
        for name, body in re.findall(r"\.([\w-]+)\{([^}]*)\}", style.text or ""):
            rules[name] = dict(part.split(":", 1) for part in body.split(";"))
    out = []
    for el in root.iter(etree.Element):
        tag = etree.QName(el).localname
        if tag in ("svg", "g", "title", "style", "defs", "pattern") or el.getparent().tag == (
            f"{SVG_NS}pattern"
        ):
            continue
        if tag == "rect" and el.get("fill") == "transparent" and el.get("stroke") is None:
            continue  # paints nothing
        if tag == "line" and (el.get("x1"), el.get("y1")) == (el.get("x2"), el.get("y2")):
            continue
        paint = {n: el.get(n) for n in PAINT if el.get(n) is not None}
        for cls in (el.get("class") or "").split():
            paint.update(rules.get(cls, {}))
        paint.setdefault("font-size", root.get("font-size"))
        geometry = tuple((n, numbers(v)) for n in GEOMETRY if (v := el.get(n)) is not None)
        words = (el.text or "") + "".join(child.tail or "" for child in el)
        out.append((tag, paint, geometry, words))
    return out


def test_a_big_saved_timelines_picture_paints_what_its_live_drawing_paints(
    defer_all: None,
) -> None:
    saved = interactive_html(hostile_run())
    live = drawing_data(saved)
    assert live is not None
    assert 'class="woml-svg"' in live
    picture = picture_svg(saved)
    # The same shapes and words, in the same order, in the same colours and places:
    assert drawn(picture)[1:] == drawn(live)  # [0]: the picture's own background
    assert drawn(picture)[0][1]["fill"] == "#ffffff"
    # ... without what only the live drawing uses, and smaller for it.
    root = etree.fromstring(picture.encode())
    assert [t.getparent() for t in root.iter(f"{SVG_NS}title")] == [root]  # no tooltips
    names = {n for el in root.iter(etree.Element) for n in el.attrib}
    assert not {n for n in names if n.startswith("data-")}
    assert not names & {"tabindex", "role", "aria-label"}
    assert list(root.iter(f"{SVG_NS}g")) == []
    assert len(picture) < 0.6 * len(live)


def test_a_big_saved_timelines_live_drawing_is_the_one_it_would_show_inline(
    defer_all: None,
) -> None:
    run = hostile_run()
    live = drawing_data(interactive_html(run))
    assert live is not None
    inline = etree.fromstring(render_html(run).encode())
    (svg,) = by_class(inline, "woml-svg")
    # Only the pattern ids differ: they carry each output's own root id.
    same = re.sub(r"woml-tl-[0-9a-f]+", "ID", etree.tostring(svg, encoding="unicode"))
    assert re.sub(r"woml-tl-[0-9a-f]+", "ID", live) == same


def test_a_small_saved_timelines_picture_is_its_live_drawing() -> None:
    saved = interactive_html(hostile_run())
    assert drawing_data(saved) is None
    picture = picture_svg(saved)
    assert 'class="woml-svg"' in picture
    assert "<title>" in picture
    assert "data-step=" in picture


@pytest.mark.browser
def test_a_big_saved_timeline_shows_its_live_drawing_where_scripts_run(
    open_page: Any, defer_all: None
) -> None:
    saved = interactive_html(hostile_run())
    page = open_page(saved)
    page.wait_for_function("() => document.querySelector('.woml-timeline')._womlTimeline")
    assert page.query_selector("img.woml-picture") is None
    assert page.query_selector(".woml-shared-note") is None
    live = etree.fromstring(drawing_data(saved).encode())  # type: ignore[union-attr]
    tips = [t.text for t in live.iter(f"{SVG_NS}title")]
    assert (
        page.eval_on_selector_all(
            ".woml-timeline svg.woml-svg title", "ts => ts.map(t => t.textContent)"
        )
        == tips
    )
    assert page.query_selector("svg.woml-svg > rect.woml-picture-bg") is None


@pytest.mark.browser
def test_a_big_saved_timeline_keeps_its_picture_where_the_page_cannot_gunzip(
    open_page: Any, defer_all: None
) -> None:
    page = open_page(
        "<script>delete window.DecompressionStream;</script>" + interactive_html(hostile_run())
    )
    page.wait_for_function("() => document.querySelector('.woml-timeline')._womlTimeline")
    assert page.eval_on_selector("img.woml-picture", "i => i.complete && i.naturalWidth > 0")
    assert page.query_selector(".woml-shared-note") is not None
    assert page.query_selector("svg.woml-svg") is None


# --- a big run's saved output is bounded, and says what it left out (spec §6.5) -------


@pytest.fixture(scope="module")
def thousand() -> Any:
    """Issue 21 item 6's run: 1,000 steps × 3 attempts."""
    return many(1000, 3)


def test_a_1000_step_saved_output_is_at_most_2_mb_as_a_notebook_stores_it(thousand: Any) -> None:
    import nbformat

    from woml_magic.timeline import mimebundle

    bundle = mimebundle(thousand)
    output = nbformat.v4.new_output("display_data", data=bundle)
    stored = nbformat.writes(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%%woml", outputs=[output])])
    )
    assert len(stored.encode("utf-8")) <= 2_000_000
    assert len(json.dumps(bundle).encode("utf-8")) <= 2_000_000  # as bench/browser.py counts


def test_a_big_runs_text_shows_its_first_steps_and_says_what_it_left_out(thousand: Any) -> None:
    from woml_magic.timeline import mimebundle
    from woml_magic.timeline.layout import SHOWN_ATTEMPTS

    text = mimebundle(thousand)["text/plain"]
    shown = SHOWN_ATTEMPTS // 3  # whole steps of 3 attempts: 66
    assert f"step s{shown - 1} · succeeded" in text
    assert f"step s{shown} " not in text
    left = 1000 - shown
    last = text[text.rindex("\n\n") + 2 :]
    assert " ".join(last.split()) == (
        f"… and {left} more steps ({3 * left} attempts) are left out of this text:"
        " run.to_text() has them all (%%woml --out NAME keeps the run in NAME)."
    )
    assert max(len(line) for line in last.splitlines()) <= 100  # text.WIDTH
    whole = thousand.to_text()
    assert "step s999 · succeeded" in whole
    assert "left out" not in whole
    assert whole.startswith(text[: text.index("\n\n… and")])


def test_a_run_within_the_bound_has_its_whole_text(defer_all: None) -> None:
    from woml_magic.timeline import mimebundle

    run = hostile_run()
    assert mimebundle(run)["text/plain"] == run.to_text()


@pytest.mark.parametrize(
    ("attempts", "shown", "words"),
    [
        (4, 2, "1 more step (2 attempts)"),
        (5, 2, "1 more step (2 attempts)"),
        (3, 1, "2 more steps (4 attempts)"),
        (0, 1, "2 more steps (4 attempts)"),
        (6, 3, None),
    ],
)
def test_the_text_keeps_whole_steps_up_to_its_attempts_and_at_least_one(
    attempts: int, shown: int, words: str | None
) -> None:
    from woml_magic.timeline import render_text

    run = many(3, 2)
    assert render_text(run, max_attempts=None) == run.to_text()
    text = render_text(run, max_attempts=attempts)
    assert [f"step s{i} " in text for i in range(3)] == [i < shown for i in range(3)]
    assert (words is None) == ("left out" not in text)
    if words is not None:
        assert f"… and {words} are left out of this text" in text


def test_a_big_runs_picture_draws_its_first_steps_and_says_how_many_it_left_out() -> None:
    from woml_magic.timeline.layout import compute_layout
    from woml_magic.timeline.picture import leading_drawing
    from woml_magic.timeline.svg import render_svg

    run = many(5, 2)
    layout = compute_layout(run)
    part = etree.fromstring(leading_drawing(layout, "r", attempts=4).encode())
    whole = etree.fromstring(render_svg(layout, "r").encode())
    lanes = [g.get("data-step") for g in by_class(part, "woml-lane")]
    assert lanes == ["s0", "s1"]
    (note,) = by_class(part, "woml-left-out")
    assert (
        note.text == "… and 3 more steps (6 attempts), not in this picture: the listing below"
        " has every step."
    )
    assert float(part.get("height")) < float(whole.get("height"))
    # The lanes it draws, it draws as the whole drawing does, on the whole run's axis.
    assert part.get("data-axis") == whole.get("data-axis")
    for step in lanes:
        drawn_as = [
            [etree.tostring(g) for g in by_class(svg, "woml-lane") if g.get("data-step") == step]
            for svg in (part, whole)
        ]
        assert drawn_as[0] == drawn_as[1]
    assert leading_drawing(layout, "r", attempts=10) == render_svg(layout, "r")


def test_a_1000_step_saved_outputs_picture_is_its_first_steps(thousand: Any) -> None:
    from woml_magic.timeline.layout import SHOWN_ATTEMPTS

    saved = interactive_html(thousand)
    picture = etree.fromstring(picture_svg(saved).encode())
    texts = ["".join(t.itertext()) for t in picture.iter(f"{SVG_NS}text")]
    shown = SHOWN_ATTEMPTS // 3
    assert f"s{shown - 1}" in texts
    assert f"s{shown}" not in texts
    assert [t for t in texts if t.startswith("… and")] == [
        f"… and {1000 - shown} more steps ({3 * (1000 - shown)} attempts), not in this picture:"
        " the listing below has every step."
    ]
    live = etree.fromstring(drawing_data(saved).encode())  # type: ignore[union-attr]
    assert len(by_class(live, "woml-lane")) == 1000  # the live drawing has them all
    (img,) = re.findall(r'<img class="woml-picture"[^>]*>', saved)
    assert f'height="{picture.get("height")}"' in img
    # ... and the listing below it, every step.
    root = etree.fromstring(f"<div>{saved}</div>".encode())
    assert len(by_class(root, "woml-attempt-lines")) == 1000
