"""The editor extension (labextension/, spec §6.4) in real front ends, as a user types.

``start(app, home)`` runs JupyterLab 4 or Notebook 7 serving this checkout's build
(``labextension/prebuilt``, linked into the server's own ``JUPYTER_DATA_DIR``, which
comes before an installed copy), or with the extension disabled (``extension=False``)
for the baseline: what the same notebook looks like without it. The notebooks are
written into the server's root. ``editor.js`` reads what CodeMirror drew; the rest
types as a person does (Playwright's keyboard) and waits for what the page shows.
Shared by tests/test_editor_browser.py and bench/editor.py.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import BrowserContext, Page

from . import frontend, scratch
from .servers import REPO, JupyterServer

NAME = "woml-magic"
BUILD = REPO / "labextension" / "prebuilt"
EDITOR_JS = (Path(__file__).with_name("editor.js")).read_text()

#: Errors that are not ours: Notebook 7 throws this from notebook_core.js on every page,
#: with or without a notebook (measured; /work/shared/notes/browser-testing.md).
NOT_OURS = "reading 'schema'"
NOT_OURS_FROM = "notebook_core"

SETUP = "%load_ext woml_magic"
#: A WOML cell with everything the highlighting distinguishes: the magic's options, tags,
#: attributes and their strings, a script with a `//` comment, a template literal, and
#: a CDATA section whose content is JavaScript too. It runs cleanly (Run All).
WOML_CELL = """%%woml --simulate --run-id editor
<step id="poll" retry="3" retry-delay="1s">
  <script>
    // ask once more
    await services.sleep("1ms");
    return `attempt ${attempt.number}`;
  </script>
</step>
<step id="cdata">
  <script><![CDATA[
    // inside CDATA
    const small = attempt.number < 2;
    return small ? "a < b" : "b";
  ]]></script>
</step>"""
#: The same text whose first line is not ``%%woml``: IPython's highlighting of it.
TWIN_FIRST_LINE = "# not a woml cell"
PYTHON_TWIN = TWIN_FIRST_LINE + WOML_CELL[WOML_CELL.index("\n") :]
PYTHON_CELL = 'def f(x):\n    """Doc."""\n    return x < 2  # a comment'
def start(app: str, home: Path, *, extension: bool = True) -> JupyterServer:
    """``app`` with this checkout's build of the extension, or with it disabled."""
    root = home / f"{app}-root"
    root.mkdir(parents=True, exist_ok=True)
    server_home = home / f"{app}-home"
    # servers.isolated_env names the server's folders after the variables.
    labextensions = server_home / "jupyter_data_dir" / "labextensions"
    labextensions.mkdir(parents=True, exist_ok=True)
    if extension:
        (labextensions / NAME).symlink_to(BUILD, target_is_directory=True)
    else:  # disabled, wherever else it may be installed
        labconfig = server_home / "jupyter_config_dir" / "labconfig"
        labconfig.mkdir(parents=True, exist_ok=True)
        (labconfig / "page_config.json").write_text(
            json.dumps({"disabledExtensions": {NAME: True}})
        )
    return JupyterServer(app, root, server_home).start()


@dataclass
class Console:
    """The page's errors: uncaught exceptions and console errors (not ours filtered)."""

    errors: list[str] = field(default_factory=list)

    def watch(self, page: Page) -> None:
        page.on("pageerror", self._uncaught)
        page.on("console", self._console)

    def _uncaught(self, error: Any) -> None:
        if NOT_OURS in str(error) and NOT_OURS_FROM in (getattr(error, "stack", "") or ""):
            return
        self.errors.append(f"uncaught: {error} {getattr(error, 'stack', '')[:600]}")

    def _console(self, message: Any) -> None:
        where = message.location.get("url", "") if message.location else ""
        if message.type != "error" or (NOT_OURS in message.text and NOT_OURS_FROM in where):
            return
        self.errors.append(f"console.error: {message.text} ({where})")


def new_context(browser: Any) -> BrowserContext:
    context = frontend.new_context(browser)
    context.add_init_script(EDITOR_JS)
    return context


def open_notebook(
    context: BrowserContext, server: JupyterServer, sources: list[str], name: str
) -> tuple[Page, Console]:
    """A new notebook ``name`` of ``sources`` in the server's root, opened once its
    kernel is idle and every cell is drawn, with its console watched."""
    scratch.write_notebook(server.root / name, sources)
    page = context.new_page()
    console = Console()
    console.watch(page)
    page.goto(server.url(name))
    frontend.wait_kernel_idle(page, name)
    page.wait_for_function(
        "n => (window.__womlEditor.lines(n) || []).length > 0", arg=len(sources) - 1
    )
    return page, console


def lines(page: Page, cell: int) -> list[list[dict[str, str]]]:
    """The cell's input as drawn: per line, runs of text and their highlight classes."""
    drawn: list[list[dict[str, str]]] = page.evaluate("i => __womlEditor.lines(i)", cell)
    return drawn


def class_of(drawn: list[list[dict[str, str]]], text: str) -> str:
    """The highlight classes of the first run whose text is ``text`` (stripped)."""
    for line in drawn:
        for run in line:
            if run["text"].strip() == text:
                return run["cls"]
    shown = [[r["text"] for r in line] for line in drawn]
    raise AssertionError(f"no run {text!r} in the cell; runs: {shown}")


def classes(drawn: list[list[dict[str, str]]]) -> list[list[tuple[str, str]]]:
    """``drawn`` as comparable tuples: each run's text and highlight classes."""
    return [[(r["text"], r["cls"]) for r in line] for line in drawn]


def looks(drawn: list[list[dict[str, str]]]) -> list[list[tuple[str, str]]]:
    """``drawn`` as the user sees it: each run's text and its colour and font style
    (class names are generated per page, so two pages compare by what they draw)."""
    return [[(r["text"], r["style"]) for r in line] for line in drawn]


def run_first_cell(page: Page, name: str, timeout: float = 60.0) -> None:
    """Click into the first cell and press Shift+Enter; wait until it has run."""
    page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".cm-line").first.click()
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(
        "name => { const c = __woml.cells(name)[0]; return c.count !== null"
        " && !(c.prompt || '').includes('*'); }",
        arg=name,
        timeout=timeout * 1000,
    )
    problems = frontend.RunAll("", name, page, page.evaluate("n => __woml.cells(n)", name), 0)
    assert problems.problems() == [], problems.problems()


def put_cursor_at_line_end(page: Page, cell: int, line: int) -> None:
    """Click the cell's line ``line`` (0-based), then End: where a person would type."""
    target = page.locator(".jp-Notebook .jp-Cell").nth(cell).locator(".cm-line").nth(line)
    target.click()
    page.keyboard.press("End")


def type_text(page: Page, text: str) -> None:
    """Type as a person does: one key at a time."""
    page.keyboard.type(text, delay=20)


def lint_ranges(page: Page, cell: int) -> list[dict[str, str]]:
    ranges: list[dict[str, str]] = page.evaluate("i => __womlEditor.lintRanges(i)", cell)
    return ranges


def wait_lint_range(page: Page, cell: int, text: str, timeout: float = 10.0) -> float:
    """Seconds until the cell shows an underline over ``text`` (or an AssertionError)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if any(r["text"] == text for r in lint_ranges(page, cell)):
            return time.monotonic() - t0
        page.wait_for_timeout(10)
    shown = lint_ranges(page, cell)
    raise AssertionError(f"no underline over {text!r} after {timeout:.0f}s: {shown}")


def tooltip_of_lint_range(page: Page, cell: int) -> str:
    """Hover the cell's first underline; the lint tooltip's text."""
    page.locator(".jp-Notebook .jp-Cell").nth(cell).locator(".cm-lintRange").first.hover()
    page.wait_for_selector(".cm-tooltip-lint", timeout=5_000)
    tips: list[str] = page.evaluate("() => __womlEditor.tooltips()")
    return "\n".join(tips)
