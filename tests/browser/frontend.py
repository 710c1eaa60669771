"""Drive a notebook page as a user's front end does, and read what it shows.

Run All goes through the app's own command (``notebook:run-all-cells``), which queues
every cell at once (the situation of spec §6.3's last sentence); the test then polls
the notebook's model and DOM (``page.js``) until every code cell has an execution
count and none shows ``[*]``. A kernel that sits idle while cells still wait is
wedged: that fails fast, naming the cells, instead of waiting for the whole timeout.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import BrowserContext, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from .servers import JupyterServer

PAGE_JS = (Path(__file__).with_name("page.js")).read_text()

#: Text in a cell's output that means the kernel or the front end broke (issue 11).
NOISE = (
    "Traceback (most recent call last)",
    "Exception in callback",
    "Task was destroyed but it is pending",
    "is already entered",
    "Error displaying widget",
)
#: The same, in the server's log (kernel stderr that reached no cell).
LOG_NOISE = ("Exception in callback", "Task was destroyed but it is pending", "is already entered")

LOCAL = ("http://127.0.0.1:", "data:", "blob:")

FINISHED = frozenset({"succeeded", "failed", "failed-closed", "cancelled", "reattached"})


@dataclass
class RunAll:
    """A notebook after Run All: its page, its cells as the front end holds them."""

    app: str
    name: str
    page: Page
    cells: list[dict[str, Any]]
    seconds: float
    log_noise: list[str] = field(default_factory=list)

    @property
    def code_cells(self) -> list[dict[str, Any]]:
        return [c for c in self.cells if c["type"] == "code"]

    def problems(self) -> list[str]:
        """Error outputs, asyncio noise, broken widgets: one line per finding."""
        found = []
        for c in self.code_cells:
            head = f"cell {c['index']} ({first_line(c['source'])!r})"
            for out in c["outputs"]:
                if out["type"] == "error":
                    found.append(f"{head}: error output {out['text'][:800]}")
                elif any(n in out.get("text", "") for n in NOISE):
                    found.append(
                        f"{head}: {out['type']} {out.get('name', '')}: {out['text'][:800]}"
                    )
            found.extend(
                f"{head}: stderr shown {t[:800]}"
                for t in c["stderrDom"]
                if any(n in t for n in NOISE)
            )
            if c["widgetErrors"]:
                found.append(f"{head}: shows 'Error displaying widget'")
        found.extend(f"server log: {line}" for line in self.log_noise)
        return found


def first_line(source: str) -> str:
    return source.strip().splitlines()[0] if source.strip() else ""


def new_context(browser: Any, blocked: list[str] | None = None) -> BrowserContext:
    """A browser context with ``page.js`` in every page; requests off 127.0.0.1 abort.

    Only 127.0.0.1 exists here (and a test must not depend on the internet); aborted
    URLs are appended to ``blocked``.
    """
    context: BrowserContext = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(PAGE_JS)
    sink = blocked if blocked is not None else []

    def block(route: Any) -> None:
        sink.append(route.request.url)
        route.abort()

    context.route(lambda url: not url.startswith(LOCAL), block)
    return context


def open_notebook(
    context: BrowserContext, server: JupyterServer, name: str, timeout: float = 60.0
) -> Page:
    """Open ``name`` in the server's app and wait until its kernel is idle."""
    page = context.new_page()
    page.goto(server.url(name))
    wait_kernel_idle(page, name, timeout)
    return page


def wait_kernel_idle(page: Page, name: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    status = "?"
    while time.monotonic() < deadline:
        status = page.evaluate("name => window.__woml ? __woml.kernelStatus(name) : 'no js'", name)
        if status == "idle":
            return
        page.wait_for_timeout(200)
    raise AssertionError(f"{name}: kernel not idle after {timeout:.0f}s (status {status!r})")


def pending(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Code cells that have not finished: no execution count yet, or ``[*]``."""
    return [
        c
        for c in cells
        if c["type"] == "code" and (c["count"] is None or "*" in (c["prompt"] or ""))
    ]


def run_all(
    page: Page,
    server: JupyterServer,
    app: str,
    name: str,
    *,
    timeout: float = 240.0,
    idle_grace: float = 30.0,
) -> RunAll:
    """Run All, then wait until every code cell finished (or fail, naming the cells).

    ``idle_grace``: how long the kernel may report ``idle`` while cells still wait
    before the run counts as wedged (between two queued cells it is idle for
    milliseconds; issue 11's wedge left it idle for ever).
    """
    log_offset = server.log_size()
    wait_kernel_idle(page, name)
    t0 = time.monotonic()
    page.evaluate("name => __woml.runAll(name)", name)
    idle_since: float | None = None
    cells: list[dict[str, Any]] = []
    while True:
        page.wait_for_timeout(250)
        cells = page.evaluate("name => __woml.cells(name)", name)
        waiting = pending(cells)
        now = time.monotonic()
        if not waiting:
            break
        status = page.evaluate("name => __woml.kernelStatus(name)", name)
        idle_since = (idle_since or now) if status == "idle" else None
        wedged = idle_since is not None and now - idle_since > idle_grace
        if wedged or now - t0 > timeout or status in ("dead", "unknown", "no kernel"):
            reason = (
                f"the kernel has been idle for {now - idle_since:.0f}s with cells queued"
                if wedged and idle_since is not None
                else f"kernel {status!r} after {now - t0:.0f}s"
            )
            lines = [
                f"  cell {c['index']} [{c['prompt'] or ' '}] {first_line(c['source'])!r}"
                for c in waiting
            ]
            shown = RunAll(app, name, page, cells, now - t0).problems()
            raise AssertionError(
                f"{app}: Run All of {name} did not finish: {reason}; "
                f"{len(waiting)} cell(s) never ran or still show [*]:\n"
                + "\n".join(lines)
                + ("\nwhat the notebook shows:\n" + "\n".join(shown) if shown else "")
                + f"\nserver log:\n{server.log_since(log_offset)[-3000:]}"
            )
    seconds = time.monotonic() - t0
    log = server.log_since(log_offset)
    noise = [line for line in log.splitlines() if any(n in line for n in LOG_NOISE)]
    return RunAll(app, name, page, cells, seconds, noise)


def wait_timelines_finished(page: Page, name: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The cells once every timeline on the page shows a finished run (or the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        cells: list[dict[str, Any]] = page.evaluate("name => __woml.cells(name)", name)
        timelines = [t for c in cells if c["type"] == "code" for t in c["timelines"]]
        if all(t["status"] in FINISHED and not t["inWidget"] for t in timelines):
            return cells
        if time.monotonic() > deadline:
            return cells
        page.wait_for_timeout(250)


def set_theme(page: Page, theme: str) -> None:
    """Switch the JupyterLab theme through the app's command and wait until applied."""
    page.evaluate(
        "theme => window.jupyterapp.commands.execute('apputils:change-theme', {theme})", theme
    )
    page.wait_for_function(
        "theme => document.body.dataset.jpThemeName === theme", arg=theme, timeout=30_000
    )
    # The theme's stylesheet is in; let the SVG's var(--jp-*) colours repaint.
    page.wait_for_timeout(300)


def shutdown(page: Page, name: str) -> None:
    """Shut the notebook's kernel down and close the page."""
    try:
        page.evaluate(
            "name => { const p = __woml.panel(name); return p && p.sessionContext.shutdown(); }",
            name,
        )
    finally:
        page.close()


def measured(page: Page, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The geometry of every timeline on the page, once every SVG has a layout box.

    The page is brought to the front first (what the user looks at); an SVG that
    stays without a box is reported by the caller, with what hides it.
    """
    page.bring_to_front()
    with contextlib.suppress(PlaywrightTimeout):  # the caller reports SVGs without a box
        page.wait_for_function(
            "() => __woml.geometries().every(g => g.svg.width > 0 && g.svg.height > 0)",
            timeout=timeout * 1000,
        )
    geometries: list[dict[str, Any]] = page.evaluate("() => __woml.geometries()")
    return geometries
