"""A shared notebook keeps its timeline as a picture (spec §6.5), in a real JupyterLab.

A notebook executed elsewhere (nbclient here: a colleague's copy, a git checkout, a
student's hand-out) is untrusted when opened: JupyterLab sanitizes its ``text/html``
outputs, dropping inline SVG, ``<style>`` and ``<script>`` and keeping their text. The
saved timeline must then still show as an image with readable text and one line on
how to get the interactive view, never the drawing's labels run together. Where the
script runs (the same output, trusted), the picture becomes the live drawing again.
"""

# nbformat and nbclient ship no type information.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser import frontend, scratch
from browser.session import Frontends
from nbclient import NotebookClient

pytestmark = pytest.mark.browser

DOCS_IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"
SHARED = "shared-untrusted.ipynb"
LIGHT, DARK = "JupyterLab Light", "JupyterLab Dark"
#: A run with retries and waits (spec §3.1's example), one that fails closed, and the
#: two compared on one axis (spec §10.4).
CELLS = [
    scratch.SETUP,
    scratch.SPEC_CELL,
    '%%woml --simulate --run-id shared-flaky\n<step id="flaky" retry="3" retry-delay="1s">'
    "\n  <script>\n    if (attempt.number < 2) throw new Error('busy');\n"
    "    return NaN;\n  </script>\n</step>",
    f"%woml compare {scratch.SPEC_RUN_ID} shared-flaky --labels 'the spec,flaky'",
]


@pytest.fixture(scope="module")
def shared(frontends: Frontends, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The notebook, run by nbclient (not by this server), saved beside the others."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python",
                                 "display_name": "Python 3"}
    cwd = tmp_path_factory.mktemp("shared-run")
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(cwd)}}).execute()
    nbformat.write(nb, frontends.servers["lab"].root / SHARED)
    return SHARED


def output_facts(page: Any) -> list[dict[str, Any]]:
    """Per timeline output: its picture (loaded, drawn size), inline SVGs, the note,
    and the text of the drawing's area (what would run together)."""
    return page.evaluate(
        """() => [...document.querySelectorAll('.jp-OutputArea-output')]
          .filter(o => o.querySelector('.woml-header, img.woml-picture'))
          .map(o => {
            const img = o.querySelector('img.woml-picture');
            const box = img ? img.getBoundingClientRect() : null;
            const scroll = o.querySelector('.woml-scroll');
            return {
              picture: img !== null,
              loaded: img !== null && img.complete && img.naturalWidth > 0,
              width: box ? box.width : 0,
              height: box ? box.height : 0,
              alt: img ? img.alt : '',
              svgs: o.querySelectorAll('svg').length,
              note: (o.querySelector('.woml-shared-note') || {}).innerText || '',
              drawingText: scroll ? scroll.innerText.trim() : null,
              text: o.innerText,
            };
          })"""
    )


@pytest.mark.parametrize(("theme", "file"), [(LIGHT, "untrusted.png"),
                                             (DARK, "untrusted-dark.png")])
def test_an_untrusted_notebook_shows_each_timeline_as_a_picture_with_readable_text(
    theme: str, file: str, shared: str, frontends: Frontends, tmp_path: Path,
) -> None:
    page = frontends.open("lab", shared)
    try:
        assert page.evaluate(
            "name => __woml.panel(name).model.cells.get(1).trusted", shared) is False
        frontend.set_theme(page, theme)
        page.wait_for_function(
            "() => document.querySelectorAll('img.woml-picture').length >= 3", timeout=30_000)
        page.wait_for_function(
            "() => [...document.querySelectorAll('img.woml-picture')]"
            ".every(i => i.complete && i.naturalWidth > 0)", timeout=30_000)
        facts = output_facts(page)
        assert len(facts) == 3, facts
        for fact in facts:
            assert fact["picture"], fact
            assert fact["loaded"], fact
            assert fact["width"] > 300, fact  # drawn, not a broken-image icon
            assert fact["height"] > 50, fact
            assert fact["svgs"] == 0, fact  # the sanitizer took the inline drawing
            assert fact["drawingText"] == "", fact  # no labels run together
            assert "Trust Notebook" in fact["note"], fact
            assert "run the cell again" in fact["note"], fact
        spec, flaky, both = facts
        assert "timeline of run" in spec["alt"], spec
        assert "timeline of run" in flaky["alt"], flaky
        # The comparison is one picture of both runs, and its text names both.
        assert both["alt"] == f"comparison of runs {scratch.SPEC_RUN_ID} shared-flaky", both
        assert "compare the spec" in both["text"], both
        assert "10 of 10 attempts" in both["text"], both
        assert "failed closed (not retried) · 2 of 3 attempts" in both["text"], both
        # Readable text: the details panel, step by step, in words.
        assert "poll" in spec["text"]
        assert "10 of 10 attempts" in spec["text"]
        assert "failed closed (not retried) · 2 of 3 attempts" in flaky["text"]
        assert "invalid-json" in flaky["text"]
        update = os.environ.get("WOML_UPDATE_SCREENSHOT") == "1"
        shot = DOCS_IMAGES / file if update else tmp_path / file
        page.locator(".jp-OutputArea-output:has(img.woml-picture)").nth(1).screenshot(
            path=str(shot))
        assert shot.stat().st_size > 10_000
    finally:
        frontend.shutdown(page, shared)


def test_the_same_output_trusted_is_the_live_drawing_again(
    shared: str, frontends: Frontends,
) -> None:
    # Trusting the notebook renders the saved outputs with their script: the picture is
    # the inline SVG again (attempts are buttons), and the note on trusting is gone.
    page = frontends.open("lab", shared)
    try:
        # Not awaited: the command resolves only once its dialog is answered.
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:trust'); }")
        dialog = page.locator(".jp-Dialog .jp-mod-accept")
        dialog.wait_for(timeout=10_000)
        dialog.click()
        page.wait_for_function(
            "() => document.querySelectorAll('svg.woml-svg').length >= 3", timeout=30_000)
        facts = output_facts(page)
        assert [f["picture"] for f in facts] == [False, False, False], facts
        assert all(f["note"] == "" for f in facts), facts
        assert page.locator(".woml-seg.woml-attempt[tabindex]").count() >= 2 * (10 + 2)
        assert page.locator(".woml-compare .woml-seg[data-step='2/flaky']").count() >= 2
    finally:
        frontend.shutdown(page, shared)
