"""The timeline where no kernel and no widget manager is (spec §6.3; issue 11 item 5).

- A notebook executed by nbclient (which saves the widget state, as JupyterLab can) and
  exported by ``jupyter nbconvert --to html`` shows the SVG timeline and the
  idempotency key when the page is opened with every non-``file:`` request blocked:
  the static timeline must not depend on a widget renderer from a CDN.
- A notebook saved from JupyterLab after Run All, reopened after a kernel restart,
  shows the static timeline, not "Error displaying widget".
"""

# nbformat ships no type information.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser import frontend, scratch
from browser.servers import isolated_env
from browser.session import Frontends

from woml_magic.model import idempotency_key

pytestmark = pytest.mark.browser

EXPORT = "export.ipynb"
KEYS = sorted(idempotency_key(run, step) for run, step in scratch.EXPORT_KEYS)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


#: nbclient with its defaults (``store_widget_state=True``), in a process of its own: it
#: runs an asyncio loop, and Playwright's sync API keeps one in the test's thread.
EXECUTE = """
import sys, nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
NotebookClient(nb, timeout=120, kernel_name="python3").execute()
nbformat.write(nb, path)
"""


def execute(path: Path, home: Path) -> nbformat.NotebookNode:
    """Execute the notebook in place as nbclient does by default; return it."""
    subprocess.run(
        [sys.executable, "-c", EXECUTE, str(path)],
        check=True,
        capture_output=True,
        cwd=path.parent,
        env=isolated_env(home),
        timeout=180,
    )
    return nbformat.read(path, as_version=4)


def timeline_outputs(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    return [
        out
        for cell in nb.cells
        if cell.cell_type == "code" and cell.source.lstrip().startswith("%%woml")
        for out in cell.outputs
        if out.output_type in ("display_data", "execute_result")
    ]


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Path, nbformat.NotebookNode]:
    nb_path = scratch.write_notebook(tmp_path / EXPORT, scratch.EXPORT_CELLS)
    nb = execute(nb_path, tmp_path / "home")
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(nb_path)],
        check=True,
        capture_output=True,
        env=isolated_env(tmp_path / "home"),
        timeout=120,
    )
    return tmp_path / "export.html", nb


def test_nbconvert_html_shows_the_svg_timeline_offline(
    exported: tuple[Path, nbformat.NotebookNode], chromium: Any
) -> None:
    from playwright.sync_api import expect

    html, nb = exported
    outputs = timeline_outputs(nb)
    assert len(outputs) == 2, [sorted(o.get("data", {})) for o in outputs]
    saved_state = "widgets" in nb.metadata
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    blocked: list[str] = []

    def block(route: Any) -> None:
        blocked.append(route.request.url)
        route.abort()

    context.route(lambda url: not url.startswith(("file:", "data:")), block)
    try:
        page = context.new_page()
        page.goto(html.as_uri())
        page.wait_for_load_state("load")
        shown = page.evaluate(
            """() => [...document.querySelectorAll('.woml-timeline')].map(t => ({
                run: t.dataset.run || null,
                svg: [...t.querySelectorAll('svg.woml-svg')].some(s => {
                    const r = s.getBoundingClientRect();
                    return r.width > 0 && r.height > 0 && s.checkVisibility();
                }),
            }))"""
        )
        runs = sorted(run for run, _ in scratch.EXPORT_KEYS)
        with_svg = sorted(t["run"] for t in shown if t["svg"])
        assert with_svg == runs, (
            f"runs whose SVG timeline shows offline: {with_svg}, want {runs}; the outputs "
            f"were {[sorted(o.get('data', {})) for o in outputs]}, widget state saved: "
            f"{saved_state}, requests blocked: {blocked}"
        )
        keys = sorted(t.strip() for t in page.locator("code.woml-key").all_inner_texts())
        assert keys == KEYS, f"keys shown {keys}"
        for key in KEYS:
            expect(page.locator("code.woml-key", has_text=key)).to_be_visible()
        assert page.get_by_text("Error displaying widget").count() == 0
    finally:
        context.close()


def test_saved_notebook_shows_the_static_timeline_after_a_kernel_restart(
    frontends: Frontends,
) -> None:
    from playwright.sync_api import expect

    result = frontends.run("lab", EXPORT)
    page = result.page
    try:
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function(
            "name => { const p = __woml.panel(name); return p && !p.context.model.dirty; }",
            arg=EXPORT,
        )
        saved = nbformat.read(frontends.servers["lab"].root / EXPORT, as_version=4)
        assert len(timeline_outputs(saved)) == 2, "the saved notebook lacks the timelines"
        page.evaluate("name => __woml.panel(name).sessionContext.session.kernel.restart()", EXPORT)
        frontend.wait_kernel_idle(page, EXPORT)
        page.reload()
        frontend.wait_kernel_idle(page, EXPORT)
        cells = page.locator(".jp-CodeCell")
        expect(cells).to_have_count(len(scratch.EXPORT_CELLS))
        svgs = page.locator(".jp-OutputArea .woml-timeline svg.woml-svg")
        expect(svgs).to_have_count(2, timeout=15_000)
        for i in range(2):
            expect(svgs.nth(i)).to_be_visible()
        for key in KEYS:
            expect(page.locator("code.woml-key", has_text=key)).to_be_visible()
        expect(page.get_by_text("Error displaying widget")).to_have_count(0)
    finally:
        frontends.done_with("lab", EXPORT)
