"""What the browser test modules share in a session: one server per app, one Chromium.

Each test module declares its session fixtures as one-liners over these generators
(``yield from session.chromium(home)``). To pytest those are separate fixture
definitions, one per module, so the objects themselves live in ``_SHARED``: the
second module gets the first one's servers and browser, and only the definition that
created an object closes it (pytest finalizes the first module's fixtures last).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import frontend, scratch
from .servers import JupyterServer

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-features=Translate,MediaRouter,OptimizationHints",
]

_SHARED: dict[str, Any] = {}


def require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} is missing: CI must run the browser tests")
        pytest.skip(f"{CHROMIUM} is not installed (CI must have it)")


def home(factory: pytest.TempPathFactory) -> Path:
    """Where the servers, Chromium's profile and the timings live."""
    if "home" not in _SHARED:
        _SHARED["home"] = factory.mktemp("browser")
    path: Path = _SHARED["home"]
    return path


def chromium(home: Path) -> Iterator[Any]:
    """One headless Chromium for the session (Playwright's sync API)."""
    require_chromium()
    created = "browser" not in _SHARED
    if created:
        from playwright.sync_api import sync_playwright

        pw = sync_playwright().start()
        xdg = home / "chromium-xdg"
        xdg.mkdir(exist_ok=True)
        env = dict(os.environ, XDG_CONFIG_HOME=str(xdg), XDG_CACHE_HOME=str(xdg))
        _SHARED["playwright"] = pw
        _SHARED["browser"] = pw.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, env=env
        )
    yield _SHARED["browser"]
    if created:
        _SHARED.pop("browser").close()
        _SHARED.pop("playwright").stop()


def timings() -> dict[str, float]:
    """How long each part took: the server starts, each notebook's open + Run All."""
    times: dict[str, float] = _SHARED.setdefault("timings", {})
    return times


class Frontends:
    """Pages of notebooks after Run All, one per (app, notebook), run at most once.

    The Run All tests run every notebook; later tests (contrast, replay, layout) read
    the same pages instead of running the notebooks again.
    """

    def __init__(self, browser: Any, servers: dict[str, JupyterServer], home: Path) -> None:
        self.browser = browser
        self.servers = servers
        self.home = home
        self.contexts: dict[str, Any] = {}
        self.blocked: dict[str, list[str]] = {}
        self.runs: dict[tuple[str, str], frontend.RunAll] = {}

    def context(self, app: str) -> Any:
        if app not in self.contexts:
            self.blocked[app] = []
            self.contexts[app] = frontend.new_context(self.browser, self.blocked[app])
        return self.contexts[app]

    def open(self, app: str, name: str) -> Any:
        return frontend.open_notebook(self.context(app), self.servers[app], name)

    def run(self, app: str, name: str, **kwargs: Any) -> frontend.RunAll:
        """``name`` after Run All in ``app`` (run now, or the earlier result)."""
        if (app, name) not in self.runs:
            t0 = time.monotonic()
            page = self.open(app, name)
            try:
                result = frontend.run_all(page, self.servers[app], app, name, **kwargs)
            except BaseException:
                frontend.shutdown(page, name)
                raise
            result.cells = frontend.wait_timelines_finished(page, name)
            self.runs[app, name] = result
            timings()[f"{app} {name}: open + Run All"] = time.monotonic() - t0
        result = self.runs[app, name]
        result.page.bring_to_front()  # the page the user looks at
        return result

    def done_with(self, app: str, name: str) -> None:
        """Shut the notebook's kernel down and close its page (it is not needed again)."""
        result = self.runs.pop((app, name), None)
        if result is not None and not result.page.is_closed():
            frontend.shutdown(result.page, name)

    def close(self) -> None:
        for context in self.contexts.values():
            context.close()
        self.contexts.clear()


def frontends(browser: Any, home: Path, request: pytest.FixtureRequest) -> Iterator[Frontends]:
    """The session's notebook pages; servers start when a test first needs them.

    At the end of the session it prints how long each part took.
    """
    created = "frontends" not in _SHARED
    if created:
        _SHARED.setdefault("t0", time.monotonic())
        _SHARED["frontends"] = Frontends(browser, _LazyServers(home), home)
    yield _SHARED["frontends"]
    if created:
        try:
            _SHARED.pop("frontends").close()
        finally:  # the servers and their kernels go, whatever happened to the browser
            for key in [k for k in _SHARED if k.startswith("server-")]:
                _SHARED.pop(key).stop()
        times = timings()
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        if times and capture is not None:
            total = time.monotonic() - _SHARED["t0"]
            with capture.global_and_fixture_disabled():
                print(f"\nbrowser timings (session total {total:.0f}s):")
                for what, seconds in times.items():
                    print(f"  {seconds:6.1f}s  {what}")


class _LazyServers(dict[str, JupyterServer]):
    """``servers[app]`` starts the app's server on first use (one per session)."""

    def __init__(self, home: Path) -> None:
        super().__init__()
        self.home = home

    def __missing__(self, app: str) -> JupyterServer:
        key = f"server-{app}"
        if key not in _SHARED:
            root = scratch.populate(self.home / f"{app}-root")
            _SHARED[key] = JupyterServer(app, root, self.home / f"{app}-home").start()
            timings()[f"{app} server start"] = _SHARED[key].startup_seconds
        server: JupyterServer = _SHARED[key]
        self[app] = server
        return server
