"""Run All as front ends do it: every cell queued at once (spec §6.3).

JupyterLab's and Notebook 7's *Run All Cells* send every execute request without
waiting for a reply. A cell that re-enters the kernel's own event loop then wedges the
kernel: the later cells never reply, while the kernel shows Idle. nbclient sends one
cell at a time and never sees that, so these tests drive a real kernel through
``jupyter_client`` and queue whole notebooks. They run against the ipykernel installed
here (7.x) and against ipykernel 6 from the second environment that ``.ci/run`` makes
(``WOML_IPYKERNEL6_PYTHON``; skipped outside CI when it is not set).
"""

from __future__ import annotations

import json
import os
import queue
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("0*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: What asyncio prints when a loop was re-entered under queued cells (the bug).
NOISE = ("Exception in callback", "Task was destroyed", "cannot enter context",
         "Traceback", "RuntimeError")

RETRIES = """<step id="charge" retry="3" retry-delay="1s">
  <script>if (attempt.number < 3) throw new Error("busy"); return {ok: true};</script>
</step>"""
REAL_CLOCK = """<step id="wait" retry="2" retry-delay="400ms">
  <script>if (attempt.number < 2) throw new Error("busy"); return 1;</script>
</step>"""
#: Every way a cell can run a workflow (spec §6.1, §7), with plain cells between them.
EVERY_KIND = [
    "%load_ext woml_magic\n%config Woml.journal = ':memory:'",
    f"%%woml --simulate --run-id fg\n{RETRIES}",
    "print('after-foreground')",
    f"%%woml --simulate --no-timeline --run-id quiet\n{RETRIES}",
    f"%%woml --background --run-id bg\n{REAL_CLOCK}",
    "print('after-background')",
    f"%%woml --run-id live\n{REAL_CLOCK}",
    "import woml_magic as wm\n"
    f"r = wm.run('''{RETRIES}''', clock='simulated')\nprint('wm.run', r.status)",
    f"h = wm.start('''{RETRIES}''', clock='simulated')\nprint('wm.start', h.result(30).status)",
    f"r2 = await wm.run_async('''{RETRIES}''', clock='simulated')\nprint('run_async', r2.status)",
    "print('last-cell')",
]


def kernel_pythons() -> list[Any]:
    """The interpreters whose ipykernel the tests run against."""
    here = pytest.param(sys.executable, id="ipykernel-here")
    other = os.environ.get("WOML_IPYKERNEL6_PYTHON")
    if other:
        return [here, pytest.param(other, id="ipykernel-6")]
    reason = "WOML_IPYKERNEL6_PYTHON is not set (.ci/run makes that environment)"
    skip = pytest.mark.skipif(os.environ.get("CI") != "true", reason=reason)
    fail = pytest.mark.xfail(os.environ.get("CI") == "true", reason=reason, strict=True)
    return [here, pytest.param("", id="ipykernel-6", marks=[skip, fail])]


class QueuedKernel:
    """A kernel of ``python`` in ``cwd``, fed as a front end's Run All feeds it."""

    def __init__(self, python: str, cwd: Path) -> None:
        if not python:
            raise AssertionError("no interpreter with ipykernel 6 was given")
        specs = cwd / "kernels"
        spec = specs / "woml-test"
        spec.mkdir(parents=True)
        argv = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(json.dumps(
            {"argv": argv, "display_name": "woml test", "language": "python"}))
        env = dict(os.environ)
        for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                     "IPYTHONDIR"):
            path = cwd / name.lower()
            path.mkdir(exist_ok=True)
            env[name] = str(path)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
        self.km = KernelManager(kernel_name="woml-test",
                                kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs)]))
        self.km.start_kernel(cwd=str(cwd), env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.version = self.evaluate("import ipykernel; print(ipykernel.__version__)")

    def evaluate(self, code: str) -> str:
        msg_id = self.kc.execute(code)
        replies, iopub = self.drain([msg_id], timeout=30)
        assert replies[msg_id] == "ok", iopub
        return "".join(m["content"].get("text", "") for m in iopub[msg_id]
                       if m["msg_type"] == "stream")

    def run_all(self, cells: list[str], timeout: float) -> tuple[list[str], dict[str, Any]]:
        """Queue every cell without waiting (Run All); return their ids and messages."""
        ids = [self.kc.execute(code, store_history=True) for code in cells]
        replies, iopub = self.drain(ids, timeout)
        return ids, {"replies": replies, "iopub": iopub}

    def drain(self, ids: list[str], timeout: float) -> tuple[dict[str, str], dict[str, list[Any]]]:
        replies: dict[str, str] = {}
        iopub: dict[str, list[Any]] = {i: [] for i in ids}
        idle: set[str] = set()
        deadline = time.monotonic() + timeout
        while (len(replies) < len(ids) or len(idle) < len(ids)) and time.monotonic() < deadline:
            try:
                msg = self.kc.get_shell_msg(timeout=0.05)
                parent = msg["parent_header"].get("msg_id")
                if msg["msg_type"] == "execute_reply" and parent in iopub:
                    replies[parent] = msg["content"]["status"]
            except queue.Empty:
                pass
            while True:
                try:
                    m = self.kc.get_iopub_msg(timeout=0.01)
                except queue.Empty:
                    break
                parent = m["parent_header"].get("msg_id")
                if parent in iopub:
                    iopub[parent].append(m)
                    if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                        idle.add(parent)
                elif m["msg_type"] == "stream":  # output with no parent: noise to report
                    iopub.setdefault("orphan", []).append(m)
        return replies, iopub

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)
        self.km.cleanup_resources()


@pytest.fixture
def kernel_factory(tmp_path: Path) -> Iterator[Any]:
    made: list[QueuedKernel] = []

    def make(python: str, cwd: Path | None = None) -> QueuedKernel:
        k = QueuedKernel(python, cwd or tmp_path)
        made.append(k)
        return k

    yield make
    for k in made:
        k.close()


def noise(messages: list[dict[str, Any]]) -> list[str]:
    """Stream and error output that tells of a broken loop (or any traceback)."""
    found = []
    for m in messages:
        if m["msg_type"] == "stream" and any(n in m["content"]["text"] for n in NOISE):
            found.append(m["content"]["text"][:500])
        if m["msg_type"] == "error":
            found.append(f"{m['content']['ename']}: {m['content']['evalue']}"[:500])
    return found


def outputs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages
            if m["msg_type"] in ("display_data", "execute_result", "update_display_data")]


def own_outputs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A cell's own output and the updates of it. Under ipykernel 6 an update sent from
    the run loop carries the header of the cell executing then (ipykernel 7 keeps each
    thread's), so a background run that ends while a later cell runs puts the update
    of *its* display among that cell's messages; front ends apply it by display id."""
    shown = outputs(messages)
    first = next(m for m in shown if m["msg_type"] != "update_display_data")
    display_id = first["content"].get("transient", {}).get("display_id")
    return [first, *(m for m in shown if m["msg_type"] == "update_display_data"
                     and m["content"].get("transient", {}).get("display_id") == display_id)]


@pytest.mark.parametrize("python", kernel_pythons())
def test_every_queued_cell_runs_in_order_with_no_asyncio_noise(
    kernel_factory: Any, python: str
) -> None:
    k = kernel_factory(python)
    ids, got = k.run_all(EVERY_KIND, timeout=120)
    replies, iopub = got["replies"], got["iopub"]
    missing = [i for i, msg_id in enumerate(ids) if msg_id not in replies]
    assert not missing, f"cells {missing} never replied (ipykernel {k.version}): Run All wedged"
    assert [replies[i] for i in ids] == ["ok"] * len(ids), {
        n: noise(iopub[i]) for n, i in enumerate(ids)}
    for n, msg_id in enumerate(ids):
        assert not noise(iopub[msg_id]), (n, noise(iopub[msg_id]))
    assert not noise(iopub.get("orphan", []))
    printed = "".join(m["content"]["text"] for i in ids for m in iopub[i]
                      if m["msg_type"] == "stream")
    order = ["after-foreground", "after-background", "wm.run succeeded",
             "wm.start succeeded", "run_async succeeded", "last-cell"]
    assert [line for line in printed.splitlines() if line in order] == order


@pytest.mark.parametrize("python", kernel_pythons())
def test_a_woml_cell_has_exactly_one_output_whatever_the_run(
    kernel_factory: Any, python: str
) -> None:
    # spec §6.3: one output per cell; a quick run is its static timeline, a longer one
    # is live and then becomes the static timeline (never two outputs, never Out[n]).
    k = kernel_factory(python)
    ids, got = k.run_all(EVERY_KIND[:7], timeout=120)
    iopub = got["iopub"]
    for n in (1, 3, 6):
        shown = [m for m in outputs(iopub[ids[n]]) if m["msg_type"] != "update_display_data"]
        assert len(shown) == 1, (n, [m["content"]["data"].keys() for m in shown])
        assert shown[0]["msg_type"] == "display_data" or n == 3
        assert "woml-timeline" in shown[0]["content"]["data"]["text/html"]
    # the quick simulated run never made a widget; the real-clock one did, then ended
    # as the static timeline (its last update has no widget view in it).
    assert WIDGET_VIEW not in outputs(iopub[ids[1]])[0]["content"]["data"]
    live = own_outputs(iopub[ids[6]])
    assert WIDGET_VIEW in live[0]["content"]["data"]
    final = live[-1]
    assert final["msg_type"] == "update_display_data"
    assert WIDGET_VIEW not in final["content"]["data"]
    assert 'data-status="succeeded"' in final["content"]["data"]["text/html"]


@pytest.mark.parametrize("python", kernel_pythons())
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_each_notebook_runs_all_its_queued_cells(
    kernel_factory: Any, python: str, notebook: Path, tmp_path: Path
) -> None:
    nb = nbformat.read(notebook, as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code"]
    k = kernel_factory(python, tmp_path)
    ids, got = k.run_all(cells, timeout=240)
    replies, iopub = got["replies"], got["iopub"]
    statuses = [replies.get(i, "never replied") for i in ids]
    assert statuses == ["ok"] * len(ids), [
        (n, s, noise(iopub[i])) for n, (s, i) in enumerate(zip(statuses, ids, strict=True))
        if s != "ok"]
    for n, msg_id in enumerate(ids):
        assert not noise(iopub[msg_id]), (n, noise(iopub[msg_id]))
