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
from timeline_runs import Recorder, workflow

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
