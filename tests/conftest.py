"""Shared fixtures: every test talks only to 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import procs
import pytest


def child_pids() -> set[int]:
    """Live child processes of this process (read from /proc; no psutil needed)."""
    return procs.children(os.getpid())


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")




@pytest.fixture(autouse=True)
def _stop_kept_lab_workers() -> Iterator[None]:
    """Stop the workers a lab keeps warm for the next one (``labclock.KeptWorkers``):
    tests count the worker processes they leave, so each test starts without them."""
    yield
    labclock = sys.modules.get("woml_magic.lab.labclock")
    if labclock is not None:
        labclock.KEPT.stop()


@pytest.fixture(autouse=True)
def _close_leftover_event_loop() -> Iterator[None]:
    """Close an event loop a test left set as current.

    A test that made a loop current and left it open would otherwise keep it until
    garbage collection warns about it (``filterwarnings = error``).
    """
    yield
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    loop = getattr(local, "_loop", None)
    if isinstance(loop, asyncio.AbstractEventLoop) and not loop.is_running():
        if not loop.is_closed():
            loop.close()
        asyncio.set_event_loop(None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests run last, in their own order.

    Playwright's sync API keeps an asyncio loop running on the main thread for as long
    as its session is open (one for all browser modules, below); a test after it that
    calls ``asyncio.run`` would fail with "cannot be called from a running event loop".
    """
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


# -- the browser session, shared by every browser test module ------------------------------
# One Playwright (sync API) and one Chromium per process, one JupyterLab and one
# Notebook 7 server; each notebook runs once (tests/browser/session.py).


@pytest.fixture(scope="session")
def browser_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from browser import session

    return session.home(tmp_path_factory)


@pytest.fixture(scope="session")
def chromium(browser_home: Path) -> Iterator[Any]:
    """One headless Chromium (/usr/bin/chromium) for the whole session."""
    from browser import session

    yield from session.chromium(browser_home)


@pytest.fixture
def open_page(chromium: Any, tmp_path: Path) -> Iterator[Any]:
    """``open_page(body, theme)``: a static page in a JupyterLab theme (browser tests)."""
    from browser import static_page

    yield from static_page.pages(chromium, tmp_path)


@pytest.fixture(scope="session")
def frontends(chromium: Any, browser_home: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Notebook pages after Run All, shared by the tests (each notebook runs once)."""
    from browser import session

    yield from session.frontends(chromium, browser_home, request)


@pytest.fixture(scope="module")
def shell() -> Iterator[Any]:
    """A plain IPython shell for a module's magic tests (no history database); a module
    that needs another kind defines its own ``shell``."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=config)
    yield ip
    InteractiveShell.clear_instance()


@pytest.fixture
def ip(shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``shell`` with the extension loaded, working in ``tmp_path``; afterwards the
    extension unloaded, its ``%config`` settings and the test's variables gone."""
    monkeypatch.chdir(tmp_path)
    names = set(shell.user_ns)
    shell.run_line_magic("load_ext", "woml_magic")
    yield shell
    shell.run_line_magic("unload_ext", "woml_magic")
    shell.config.pop("Woml", None)  # %config records settings in the shell's config
    for name in set(shell.user_ns) - names:
        shell.user_ns.pop(name, None)
