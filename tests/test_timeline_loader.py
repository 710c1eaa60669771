"""The timeline's script is compiled once per page (spec §6.3, §6.5; issue 21 item 6).

Every static timeline carries the whole of ``timeline.js`` (a saved page or an export
opened offline still works on its own), but as inert text that its small loader
compiles only when the page has no compiled copy of that version yet. Standalone pages
in headless Chromium, as in test_timeline_js.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from test_timeline_js import DOC, opened, root_id, seg, selected

import woml_magic as wm
from woml_magic.model import Run
from woml_magic.timeline import REGISTRY_KEY, interactive_html, timeline_js, timeline_version

pytestmark = pytest.mark.browser

#: Counts what the page compiles from text (``new Function``), before any output runs.
COUNT_COMPILES = """<script>
window.__compiled = 0;
window.Function = new Proxy(Function, {
  construct(target, args, newTarget) {
    window.__compiled += 1;
    return Reflect.construct(target, args, newTarget);
  },
});
</script>"""

REGISTRY = f"globalThis[Symbol.for({json.dumps(REGISTRY_KEY)})]"
#: Per timeline root on the page: the class of its controller (one compiled copy of the
#: code has one ``Timeline`` class).
CONTROLLER_CLASSES = """() => {
  const roots = [...document.querySelectorAll('.woml-timeline')];
  const classes = [...new Set(roots.map((r) => r._womlTimeline.constructor))];
  return roots.map((r) => classes.indexOf(r._womlTimeline.constructor));
}"""


@pytest.fixture(scope="module")
def run() -> Run:
    finished = wm.run(DOC, clock="simulated")
    assert finished.status == "succeeded"
    return finished


def works(page: Any, root: str, n: int) -> None:
    """A click on attempt ``n`` of charge selects it and opens its details, in ``root``
    alone."""
    page.click(seg(root, "charge", n) + " .woml-bar")
    assert selected(page, root) == [("charge", str(n))]
    assert opened(page, root) == [("charge", str(n))]


def test_three_timelines_on_a_page_compile_the_code_once_and_each_works(
    open_page: Any, run: Run
) -> None:
    outputs = [interactive_html(run) for _ in range(3)]
    page = open_page(COUNT_COMPILES + "<p>between</p>".join(outputs))
    assert page.evaluate("() => window.__compiled") == 1
    assert page.evaluate(CONTROLLER_CLASSES) == [0, 0, 0]  # one Timeline class
    assert page.evaluate(f"() => [...{REGISTRY}.keys()]") == [timeline_version()]
    for n, html in enumerate(outputs, start=1):
        works(page, f"#{root_id(html)}", n)
    assert len(page.query_selector_all(".woml-play")) == 3


def test_an_output_alone_compiles_its_own_copy(open_page: Any, run: Run) -> None:
    # A saved page or an export opened offline: nothing else on the page.
    page = open_page(COUNT_COMPILES + interactive_html(run))
    assert page.evaluate("() => window.__compiled") == 1
    works(page, "", 2)


def test_outputs_of_two_versions_on_one_page_keep_their_own_code(
    open_page: Any, run: Run
) -> None:
    # A notebook saved by another release next to a fresh output: the other version's
    # code (here: the same code under another version) is compiled apart, not shared.
    ours = interactive_html(run)
    other = interactive_html(run).replace(json.dumps(timeline_version()), '"other-version"')
    assert other != ours
    page = open_page(COUNT_COMPILES + ours + other + interactive_html(run))
    assert page.evaluate("() => window.__compiled") == 2
    assert page.evaluate(CONTROLLER_CLASSES) == [0, 1, 0]
    assert sorted(page.evaluate(f"() => [...{REGISTRY}.keys()]")) == sorted(
        [timeline_version(), "other-version"]
    )
    works(page, f"#{root_id(ours)}", 1)
    works(page, f"#{root_id(other)}", 3)


def test_an_output_saved_by_an_older_release_still_works_beside_a_new_one(
    open_page: Any, run: Run
) -> None:
    # Before this loader, each output inlined the code itself (issue 21 item 6).
    new = interactive_html(run)
    drawing = new[: new.rindex("<script>")]
    rid = root_id(drawing)
    old = (
        f"{drawing}<script>(() => {{\n{timeline_js()}\n"
        f"womlTimeline.fromScript(document.currentScript, {json.dumps(rid)});\n}})();</script>"
    )
    page = open_page(old.replace(rid, "woml-tl-old") + new)
    works(page, "#woml-tl-old", 1)
    works(page, f"#{root_id(new)}", 2)


def test_the_loader_adds_no_global_name(open_page: Any, run: Run) -> None:
    names = "() => Object.getOwnPropertyNames(window).sort()"
    before = open_page("<p>nothing</p>").evaluate(names)
    after = open_page(interactive_html(run) + interactive_html(run)).evaluate(names)
    assert sorted(set(after) - set(before)) == []


def test_the_code_is_inert_text_in_each_output(run: Run) -> None:
    """The whole code is in each output (it works alone), once, as one JavaScript string
    that only the loader compiles; the output stays well-formed XML (spec §6.3)."""
    from lxml import etree

    html = interactive_html(run)
    (script,) = re.findall(r"<script>(.*?)</script>", html, re.S)
    literal = re.search(r"new Function\((\"(?:[^\"\\]|\\.)*\")\)", script)
    assert literal is not None
    assert json.loads(literal.group(1)).startswith(timeline_js())
    loader = script.replace(literal.group(1), "")
    assert "const womlTimeline" not in loader  # the code is only in the string
    assert len(loader) < 1000
    etree.fromstring(f"<div>{html}</div>".encode())
