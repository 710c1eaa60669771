"""The live timeline in JupyterLab, driven through headless Chromium (spec §6.1, §6.3).

A real JupyterLab on 127.0.0.1 runs a notebook with a real-clock ``--background``
run; Playwright watches the widget's DOM (never the text/plain fallback, so the test
fails when the widget front end is missing), clicks an attempt, presses Cancel, and
takes a screenshot: into the test's temporary folder, or over the README's
docs/images/timeline.png when WOML_UPDATE_SCREENSHOT=1 (so a test run leaves the
checkout clean).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import nbformat
import pytest

from woml_magic.model import idempotency_key

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
SCREENSHOT = Path(__file__).parents[1] / "docs" / "images" / "timeline.png"
RUN_ID = "browser-1"
# Two thrown attempts with 1s waits, then a third that sleeps until cancelled.
CELL = f"""%%woml --background --run-id {RUN_ID} --journal :memory:
<step id="charge" retry="5" retry-delay="1s" timeout="5m">
  <script>
    console.log("attempt " + attempt.number);
    if (attempt.number < 3) throw new Error("the API is busy");
    await services.sleep("2m");
    return {{charged: true}};
  </script>
</step>"""
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
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[str]:
    """JupyterLab on 127.0.0.1 serving ``tmp_path``; yields the notebook's URL."""
    if not Path(CHROMIUM).exists() and os.environ.get("CI") != "true":
        pytest.skip(f"{CHROMIUM} is not installed (CI must have it)")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext woml_magic"), nbformat.v4.new_code_cell(CELL)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, tmp_path / "timeline.ipynb")
    env = dict(os.environ)
    for name in (
        "JUPYTER_CONFIG_DIR",
        "JUPYTER_DATA_DIR",
        "JUPYTER_RUNTIME_DIR",
        "IPYTHONDIR",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
    ):
        (tmp_path / name.lower()).mkdir()
        env[name] = str(tmp_path / name.lower())
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    port, token = free_port(), secrets.token_hex(16)
    log = (tmp_path / "lab.log").open("wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={tmp_path}",
            "--LabApp.expose_app_in_browser=True",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120  # generous: CI machines can be busy
        with httpx.Client(trust_env=False) as client:
            while True:
                try:
                    if client.get(f"{base}/api/status", params={"token": token}).is_success:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise AssertionError((tmp_path / "lab.log").read_text()[-3000:])
                time.sleep(0.2)
        yield f"{base}/lab/tree/timeline.ipynb?token={token}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        shutil.rmtree(tmp_path / "jupyter_runtime_dir", ignore_errors=True)


def test_background_run_timeline_is_live_clickable_and_cancellable(
    lab: str, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(lab)
            page.wait_for_function(
                "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
                " const k = w && w.sessionContext && w.sessionContext.session"
                " && w.sessionContext.session.kernel;"
                " return k && k.status === 'idle'; }",
                timeout=30_000,
            )
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")

            timeline = page.locator(".jupyter-widgets.woml-timeline")
            expect(timeline).to_be_visible(timeout=30_000)
            # Intermediate states of the live run (spec §5.1, §6.3): waiting to retry
            # between attempts, then the third attempt running.
            expect(timeline).to_contain_text("waiting to retry", timeout=15_000)
            running = timeline.locator(".woml-attempt.woml-outcome-running")
            expect(running).to_contain_text("#3", timeout=15_000)
            expect(timeline.locator(".woml-attempt.woml-outcome-threw")).to_have_count(2)

            key = timeline.locator(".woml-key code").inner_text().strip()
            assert key == idempotency_key(RUN_ID, "charge")

            threw = timeline.locator(".woml-attempt.woml-outcome-threw").first
            threw.click()
            details = timeline.locator(".woml-details")
            expect(details).to_contain_text("the API is busy", timeout=10_000)
            expect(details).to_contain_text("attempt 1")

            timeline.locator(".woml-cancel").click()
            cancelled = timeline.locator(".woml-attempt.woml-outcome-cancelled")
            expect(cancelled).to_be_visible(timeout=10_000)
            expect(timeline.locator(".woml-attempt.woml-outcome-running")).to_have_count(0)
            shot = SCREENSHOT if os.environ.get("WOML_UPDATE_SCREENSHOT") == "1" else (
                tmp_path / "timeline.png")
            shot.parent.mkdir(parents=True, exist_ok=True)
            timeline.screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000  # a real picture of the widget
        finally:
            browser.close()
