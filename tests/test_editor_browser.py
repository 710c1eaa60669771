"""Writing a ``%%woml`` cell in JupyterLab 4 and Notebook 7, as a person does (spec §6.4,
issue 22): highlighting, diagnostics as you type, completion and help.

The front ends serve this checkout's build of the extension (``labextension/prebuilt``;
tests/browser/editor.py), in headless Chromium; every keystroke goes through
Playwright's keyboard. What is checked is what the page draws: the highlight classes
around each token (read from the DOM), the lint underlines and their tooltips, the
completer's items and the text they write, the inspection tooltip. A baseline server
with the extension disabled shows that the highlighting checks fail without it and that
Python cells look exactly the same with it. No page may log an error (Notebook 7's own
``reading 'schema'`` excepted).

One notebook per app serves most tests, each typing into a WOML cell of its own
(``CELLS``); its first cell (``%load_ext woml_magic``) is run with Shift+Enter once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from browser import editor, frontend
from browser.editor import PYTHON_CELL, PYTHON_TWIN, SETUP, TWIN_FIRST_LINE, WOML_CELL
from browser.servers import JupyterServer
from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytestmark = pytest.mark.browser

APPS = ["lab", "notebook"]
#: The baseline: JupyterLab with the extension disabled.
WITHOUT = "lab-without"
MISSPELLED = "retry-delay-max"
#: The shared notebook: which cell each test reads or types into.
CELLS = {
    "setup": 0, "highlight": 1, "twin": 2, "python": 3, "first line": 4,
    "misspelled": 5, "retry-b": 6, "services": 7, "help": 8, "busy": 9, "astral": 10,
}
#: Characters outside the BMP before the misspelling: the kernel counts code points,
#: the editor UTF-16 units.
ASTRAL_CELL = WOML_CELL.replace('\n<step id="poll"', '\n<!-- 🚀🚀 --><step id="poll"', 1)
SHARED = [SETUP, WOML_CELL, PYTHON_TWIN, PYTHON_CELL, *[WOML_CELL] * 6, ASTRAL_CELL]
assert len(SHARED) == len(CELLS)


@dataclass
class Opened:
    app: str
    name: str
    page: Any
    console: editor.Console


class Notebooks:
    """The module's pages: opened on first use, checked for errors after every test."""

    def __init__(self, context: Any, servers: dict[str, JupyterServer]) -> None:
        self.context, self.servers = context, servers
        self.opened: dict[str, Opened] = {}

    def get(self, app: str, name: str = "editor.ipynb", sources: list[str] = SHARED,
            *, run_first: bool = True) -> Opened:
        key = f"{app} {name}"
        if key not in self.opened:
            page, console = editor.open_notebook(self.context, self.servers[app], sources, name)
            self.opened[key] = Opened(app, name, page, console)
            if run_first:
                editor.run_first_cell(page, name)
        nb = self.opened[key]
        nb.page.bring_to_front()
        return nb

    def errors(self) -> list[str]:
        found = [f"{nb.app} {nb.name}: {e}"
                 for nb in self.opened.values() for e in nb.console.errors]
        for nb in self.opened.values():
            nb.console.errors.clear()
        return found

    def close(self) -> None:
        for nb in self.opened.values():
            frontend.shutdown(nb.page, nb.name)


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory: pytest.TempPathFactory, chromium: Any) -> Iterator[Notebooks]:
    """JupyterLab and Notebook 7 with this checkout's build, JupyterLab without it, and
    their pages."""
    assert (editor.BUILD / "package.json").exists(), (
        f"{editor.BUILD} is missing: build it with `npm ci && npm run build` in labextension/"
    )
    home = tmp_path_factory.mktemp("editor")
    servers: dict[str, JupyterServer] = {}
    context = editor.new_context(chromium)
    found = None
    try:
        for app in APPS:
            servers[app] = editor.start(app, home)
        servers[WITHOUT] = editor.start("lab", home / "without", extension=False)
        found = Notebooks(context, servers)
        yield found
    finally:
        if found is not None:
            found.close()
        context.close()
        for server in servers.values():
            server.stop()


@pytest.fixture(autouse=True)
def _no_page_errors(notebooks: Notebooks) -> Iterator[None]:
    """Whatever page a test used logged no error while it ran."""
    notebooks.errors()
    yield
    errors = notebooks.errors()
    assert errors == [], "the page logged errors:\n" + "\n".join(errors)


# --- highlighting ---------------------------------------------------------------------


@pytest.mark.parametrize("app", APPS)
def test_a_woml_cell_is_highlighted_as_xml_with_javascript_in_its_scripts(
    app: str, notebooks: Notebooks
) -> None:
    nb = notebooks.get(app)
    drawn = editor.lines(nb.page, CELLS["highlight"])
    tag, attribute, value, comment = (
        editor.class_of(drawn, token) for token in ("step", "retry", '"3"', "// ask once more")
    )
    # Each kind of token has its own class (XML, and JavaScript inside <script>).
    assert "" not in (tag, attribute, value, comment), drawn
    assert len({tag, attribute, value, comment}) == 4, (tag, attribute, value, comment)
    keyword = editor.class_of(drawn, "await")
    assert keyword
    assert keyword not in {tag, attribute, value, comment}
    assert editor.class_of(drawn, "const") == keyword
    assert editor.class_of(drawn, "script") == tag
    # CDATA content is JavaScript too.
    assert editor.class_of(drawn, "// inside CDATA") == comment
    # A template literal is one JavaScript string, not Python's backticks and operators.
    template = editor.class_of(drawn, "`attempt")
    assert template
    assert template not in {tag, attribute, comment, keyword}
    # The first line: the magic and its flags.
    assert editor.class_of(drawn, "%%woml")
    assert editor.class_of(drawn, "--simulate") == editor.class_of(drawn, "--run-id") != ""


def test_python_cells_look_exactly_as_without_the_extension(notebooks: Notebooks) -> None:
    with_it = notebooks.get("lab")
    without = notebooks.get(WITHOUT, run_first=False)
    for cell in (CELLS["twin"], CELLS["python"]):
        drawn = editor.looks(editor.lines(with_it.page, cell))
        assert drawn == editor.looks(editor.lines(without.page, cell)), f"cell {cell}"
    # The comparison can tell: without the extension the WOML cell is Python's.
    baseline = editor.lines(without.page, CELLS["highlight"])
    assert editor.looks(editor.lines(with_it.page, CELLS["highlight"])) != editor.looks(baseline)
    assert editor.class_of(baseline, "ask once more") == ""  # Python names, not a comment


@pytest.mark.parametrize("app", APPS)
def test_changing_the_first_line_away_from_woml_goes_back_to_python(
    app: str, notebooks: Notebooks
) -> None:
    nb = notebooks.get(app)
    cell = CELLS["first line"]
    woml = editor.classes(editor.lines(nb.page, cell))
    python = editor.classes(editor.lines(nb.page, CELLS["twin"]))
    first_line = WOML_CELL.splitlines()[0]

    def retype_first_line(text: str, want: list[list[tuple[str, str]]]) -> None:
        editor.put_cursor_at_line_end(nb.page, cell, 0)
        nb.page.keyboard.press("Shift+Home")
        editor.type_text(nb.page, text)
        nb.page.wait_for_function(
            "([i, want]) => JSON.stringify(__womlEditor.lines(i)"
            ".map(l => l.map(r => [r.text, r.cls]))) === JSON.stringify(want)",
            arg=[cell, want],
            timeout=10_000,
        )

    retype_first_line(TWIN_FIRST_LINE, python)  # now highlighted exactly as its twin
    retype_first_line(first_line, woml)  # and WOML again


# --- diagnostics as you type ----------------------------------------------------------


def type_misspelled_attribute(nb: Opened, cell: int) -> None:
    """After ``retry-delay="1s"`` on the ``<step>`` line, before its ``>``."""
    editor.put_cursor_at_line_end(nb.page, cell, 1)
    nb.page.keyboard.press("ArrowLeft")
    editor.type_text(nb.page, f' {MISSPELLED}="5s"')


@pytest.mark.parametrize("app", APPS)
def test_a_misspelled_attribute_is_underlined_with_did_you_mean(
    app: str, notebooks: Notebooks
) -> None:
    nb = notebooks.get(app)
    cell = CELLS["misspelled"]
    type_misspelled_attribute(nb, cell)
    editor.wait_lint_range(nb.page, cell, MISSPELLED)
    (underline,) = editor.lint_ranges(nb.page, cell)
    assert "cm-lintRange-error" in underline["cls"]
    tip = editor.tooltip_of_lint_range(nb.page, cell)
    assert f"unknown attribute `{MISSPELLED}`" in tip
    assert "did you mean `retry-max-delay`?" in tip
    # Fixed (the typed text deleted again), the underline goes.
    nb.page.keyboard.press("Escape")
    editor.put_cursor_at_line_end(nb.page, cell, 1)
    nb.page.keyboard.press("ArrowLeft")
    for _ in f' {MISSPELLED}="5s"':
        nb.page.keyboard.press("Backspace")
    nb.page.wait_for_function("i => __womlEditor.lintRanges(i).length === 0", arg=cell,
                              timeout=5_000)


def test_the_underline_covers_the_attribute_after_characters_outside_the_bmp(
    notebooks: Notebooks,
) -> None:
    nb = notebooks.get("lab")
    cell = CELLS["astral"]
    type_misspelled_attribute(nb, cell)
    editor.wait_lint_range(nb.page, cell, MISSPELLED)
    assert [r["text"] for r in editor.lint_ranges(nb.page, cell)] == [MISSPELLED]


def test_nothing_is_underlined_without_the_comm_target_until_the_kernel_loads_it(
    notebooks: Notebooks,
) -> None:
    sources = ["print('woml_magic is not loaded here')", WOML_CELL]
    nb = notebooks.get("lab", "no-target.ipynb", sources)
    type_misspelled_attribute(nb, 1)
    nb.page.wait_for_timeout(1500)  # five times the debounce: the kernel was asked
    assert editor.lint_ranges(nb.page, 1) == []
    assert editor.class_of(editor.lines(nb.page, 1), "step"), "highlighting needs no kernel"
    # Once the kernel has run %load_ext, the next edit is underlined.
    execute(nb, SETUP)
    nb.page.keyboard.type(" ")
    editor.wait_lint_range(nb.page, 1, MISSPELLED)


def test_nothing_is_underlined_without_a_kernel_and_highlighting_stays(
    notebooks: Notebooks,
) -> None:
    nb = notebooks.get("lab", "no-kernel.ipynb", [WOML_CELL], run_first=False)
    nb.page.evaluate("name => __woml.panel(name).sessionContext.shutdown()", nb.name)
    nb.page.wait_for_function("name => __woml.kernelStatus(name) === 'no kernel'", arg=nb.name)
    type_misspelled_attribute(nb, 0)
    nb.page.wait_for_timeout(1500)
    assert editor.lint_ranges(nb.page, 0) == []
    assert editor.class_of(editor.lines(nb.page, 0), MISSPELLED), "highlighting needs no kernel"
    # JupyterLab's debugger, asking the kernel the test shut down, logs this itself.
    debugger = "Could not restore the debugger state: Canceled future for debug_request"
    nb.console.errors[:] = [e for e in nb.console.errors if debugger not in e]


def test_nothing_is_underlined_while_the_kernel_runs_a_cell_then_it_is(
    notebooks: Notebooks,
) -> None:
    nb = notebooks.get("lab")
    cell = CELLS["busy"]
    # Not the kernel's status: JupyterLab's own requests (a subshell's) report "idle"
    # while the cell still runs. The cell runs until its reply arrives.
    nb.page.evaluate(
        "name => { window.__running = true; __woml.panel(name).sessionContext.session.kernel"
        ".requestExecute({code: 'import time; time.sleep(4)'}).done"
        ".then(() => { window.__running = false; }); }",
        nb.name,
    )
    nb.page.wait_for_function("name => __woml.kernelStatus(name) === 'busy'", arg=nb.name)
    type_misspelled_attribute(nb, cell)
    nb.page.wait_for_timeout(1000)  # three times the debounce
    assert nb.page.evaluate("() => window.__running"), "the cell ended too early to tell"
    assert editor.lint_ranges(nb.page, cell) == []
    editor.wait_lint_range(nb.page, cell, MISSPELLED, timeout=15)  # once the cell is done
    assert not nb.page.evaluate("() => window.__running")


def execute(nb: Opened, code: str) -> None:
    """Run ``code`` in the notebook's kernel and wait until it is done."""
    nb.page.evaluate(
        "([name, code]) => __woml.panel(name).sessionContext.session.kernel"
        ".requestExecute({code}).done",
        [nb.name, code],
    )


# --- completion and help (from the kernel) ---------------------------------------------


def completer_items(nb: Opened) -> list[str] | None:
    """The completer's items once it shows (None: it wrote its only item at once)."""
    completer = nb.page.locator(".jp-Completer")
    try:
        completer.wait_for(state="visible", timeout=3_000)
    except PlaywrightTimeout:  # nothing to choose from
        return None
    items: list[str] = completer.locator(".jp-Completer-item .jp-Completer-match").all_inner_texts()
    return items


@pytest.mark.parametrize("app", APPS)
def test_tab_after_retry_b_offers_retry_backoff_and_accepting_writes_it(
    app: str, notebooks: Notebooks
) -> None:
    nb = notebooks.get(app)
    cell = CELLS["retry-b"]
    editor.put_cursor_at_line_end(nb.page, cell, 1)
    nb.page.keyboard.press("ArrowLeft")
    editor.type_text(nb.page, " retry-b")
    nb.page.keyboard.press("Tab")
    items = completer_items(nb)
    if items is not None:
        assert items[0] == "retry-backoff", items
        nb.page.keyboard.press("Enter")
    nb.page.wait_for_function(
        "i => __womlEditor.lineText(i, 1).includes(' retry-backoff>')", arg=cell, timeout=5_000
    )


@pytest.mark.parametrize("app", APPS)
def test_tab_after_services_offers_http_sleep_and_secret(
    app: str, notebooks: Notebooks
) -> None:
    nb = notebooks.get(app)
    editor.put_cursor_at_line_end(nb.page, CELLS["services"], 3)  # after "// ask once more"
    nb.page.keyboard.press("Enter")
    editor.type_text(nb.page, "services.")
    nb.page.keyboard.press("Tab")
    items = completer_items(nb)
    assert items is not None, "no completer shown"
    assert {"http", "sleep", "secret"} <= set(items), items
    nb.page.keyboard.press("Escape")


@pytest.mark.parametrize("app", APPS)
def test_shift_tab_on_the_magic_shows_the_cell_usage(
    app: str, notebooks: Notebooks
) -> None:
    nb = notebooks.get(app)
    editor.put_cursor_at_line_end(nb.page, CELLS["help"], 0)
    nb.page.keyboard.press("Home")
    for _ in range(4):
        nb.page.keyboard.press("ArrowRight")  # inside "%%woml"
    nb.page.keyboard.press("Shift+Tab")
    tooltip = nb.page.locator(".jp-Tooltip")
    tooltip.wait_for(state="visible", timeout=10_000)
    text = tooltip.inner_text()
    nb.page.keyboard.press("Escape")
    assert "%%woml" in text or "%woml" in text, text
    assert "--simulate" in text, text
    assert "runs/show/cancel" not in text, "the line magic's docstring, not the cell's usage"


def test_the_cell_the_tests_type_into_has_no_diagnostics_of_its_own() -> None:
    # Every underline the tests above wait for comes from what they typed.
    from woml_magic.editing.diagnostics import diagnostics

    assert diagnostics(WOML_CELL) == []
    assert diagnostics(PYTHON_TWIN) == []  # not a %%woml cell


# --- screenshots for docs/editor.md ----------------------------------------------------

DOCS_IMAGES = Path(__file__).parents[1] / "docs" / "images"
LIGHT, DARK = "JupyterLab Light", "JupyterLab Dark"
SHOT_CELL = """%%woml --simulate --run-id charge-1
<step id="charge" retry="5" retry-backoff="exponential" retry-delay="1s">
  <script>
    // the same key on every attempt: the API charges once
    const r = await services.http.request({
      method: "POST",
      url: "https://api.example/charges",
      headers: {"Idempotency-Key": attempt.idempotencyKey},
    });
    return `charged: ${r.status}`;
  </script>
</step>"""
PAD = 12


def shoot(nb: Opened, cell: int, popup: str, path: Path) -> None:
    """A picture of the cell's input and ``popup`` (a tooltip or the completer)."""
    boxes = [nb.page.locator(".jp-Notebook .jp-Cell").nth(cell).locator(".jp-InputArea")
             .bounding_box(), nb.page.locator(popup).first.bounding_box()]
    assert None not in boxes, boxes
    left = min(b["x"] for b in boxes) - PAD
    top = min(b["y"] for b in boxes) - PAD
    right = max(b["x"] + b["width"] for b in boxes) + PAD
    bottom = max(b["y"] + b["height"] for b in boxes) + PAD
    nb.page.screenshot(path=str(path), clip={"x": max(left, 0), "y": max(top, 0),
                                             "width": right - max(left, 0),
                                             "height": bottom - max(top, 0)})


@pytest.mark.parametrize(("theme", "suffix"), [(LIGHT, ""), (DARK, "-dark")])
def test_screenshots_of_highlighting_a_diagnostic_and_completion(
    theme: str, suffix: str, notebooks: Notebooks, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    nb = notebooks.get("lab", "screenshots.ipynb", [SETUP, SHOT_CELL])
    frontend.set_theme(nb.page, theme)
    update = os.environ.get("WOML_UPDATE_SCREENSHOT") == "1"
    folder = DOCS_IMAGES if update else tmp_path
    shots = {name: folder / f"editor-{name}{suffix}.png" for name in ("diagnostic", "completion")}

    # Highlighting and a diagnostic: a misspelled attribute, its tooltip shown.
    editor.put_cursor_at_line_end(nb.page, 1, 1)
    nb.page.keyboard.press("ArrowLeft")
    editor.type_text(nb.page, f' {MISSPELLED}="30s"')
    editor.wait_lint_range(nb.page, 1, MISSPELLED)
    editor.tooltip_of_lint_range(nb.page, 1)
    shoot(nb, 1, ".cm-tooltip-lint", shots["diagnostic"])
    nb.page.mouse.move(0, 0)
    editor.put_cursor_at_line_end(nb.page, 1, 1)
    nb.page.keyboard.press("ArrowLeft")
    for _ in f' {MISSPELLED}="30s"':
        nb.page.keyboard.press("Backspace")

    # Completion from the kernel in the script.
    editor.put_cursor_at_line_end(nb.page, 1, 3)
    nb.page.keyboard.press("Enter")
    editor.type_text(nb.page, "await services.")
    nb.page.keyboard.press("Tab")
    assert completer_items(nb), "no completer shown"
    shoot(nb, 1, ".jp-Completer", shots["completion"])
    nb.page.keyboard.press("Escape")
    for _ in "    await services.":
        nb.page.keyboard.press("Backspace")
    nb.page.keyboard.press("Backspace")  # the line break
    frontend.set_theme(nb.page, LIGHT)
    with capsys.disabled():
        for path in shots.values():
            print(f"\n  screenshot ({theme}): {path} ({path.stat().st_size // 1024} KB)")
    for path in shots.values():
        assert 10_000 < path.stat().st_size < 150_000, path
