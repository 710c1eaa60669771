"""%%woml in a real ipykernel: widget output, saved widget state, interrupts (spec §6.1, §6.3).

nbclient executes a notebook the way CI and nbconvert do; the interrupt test drives a
kernel through jupyter_client directly so it can send SIGINT mid-cell from this thread.
"""

from __future__ import annotations

import json
import os
import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from woml_magic.model import idempotency_key

pytestmark = pytest.mark.kernel

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
RETRIES = """<step id="charge" retry="3" retry-delay="5s">
  <script>
    if (attempt.number < 3) throw new Error("busy");
    return {ok: true};
  </script>
</step>"""
LONG_WAIT = (
    '<step id="slow" timeout="1h"><script>await services.sleep("30s"); return 1;</script></step>'
)


def kernel_env(tmp_path: Path) -> dict[str, str]:
    """A kernel environment that writes nothing outside ``tmp_path``."""
    env = dict(os.environ)
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        path = tmp_path / name.lower()
        path.mkdir(exist_ok=True)
        env[name] = str(path)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    return env


def execute(tmp_path: Path, cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    client = NotebookClient(
        nb,
        timeout=60,
        kernel_name="python3",
        store_widget_state=True,  # nbclient's default, as `nbconvert --execute` runs it
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute(cwd=str(tmp_path), env=kernel_env(tmp_path))
    return nb


def test_a_quick_run_is_one_static_timeline_and_no_widget(tmp_path: Path) -> None:
    nb = execute(tmp_path, [
        "%load_ext woml_magic",
        f"%%woml --simulate --run-id nb-1\n{RETRIES}",
        "%woml runs",
    ])
    outputs = nb.cells[1].outputs
    # spec §6.3: one output per cell, the static timeline (with its replay script).
    assert len(outputs) == 1, outputs
    assert outputs[0].output_type == "display_data"
    assert WIDGET_VIEW not in outputs[0].data
    assert "woml-timeline" in outputs[0].data["text/html"]
    assert idempotency_key("nb-1", "charge") in outputs[0].data["text/html"]
    assert "charge" in outputs[0].data["text/plain"]
    assert "widgets" not in nb.metadata  # nothing for an export to depend on

    table = nb.cells[2].outputs[0]
    assert "<td>nb-1</td>" in table.data["text/html"]
    assert (tmp_path / ".woml" / "journal.sqlite3").exists()


def test_a_live_run_ends_as_the_static_timeline_in_the_saved_notebook(tmp_path: Path) -> None:
    # A real-clock run outlives LIVE_AFTER_S: the cell shows the live widget, then the
    # same output becomes the static timeline, so the saved notebook (and an nbconvert
    # export of it) never needs the widget's state (spec §6.3).
    nb = execute(tmp_path, [
        "%load_ext woml_magic",
        '%%woml --run-id nb-live\n<step id="w" retry="2" retry-delay="600ms"><script>'
        'if (attempt.number < 2) throw new Error("busy"); return 1;</script></step>',
        "r = _\nprint(r.status)",
    ])
    outputs = nb.cells[1].outputs
    assert len(outputs) == 1, outputs
    assert WIDGET_VIEW not in outputs[0].data
    assert 'data-run="nb-live"' in outputs[0].data["text/html"]
    assert "succeeded" in outputs[0].data["text/plain"]
    # the widget existed while the run went on, and was closed when it ended
    state = nb.metadata["widgets"][WIDGET_STATE]["state"]
    assert any("woml" in json.dumps(s) for s in state.values())
    assert nb.cells[2].outputs[0].text == "succeeded\n"


class Kernel:
    """A kernel driven through jupyter_client; every message of a cell is collected."""

    def __init__(self, tmp_path: Path) -> None:
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=str(tmp_path), env=kernel_env(tmp_path))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def send(self, code: str) -> str:
        msg_id: str = self.kc.execute(code)
        return msg_id

    def collect(self, msg_id: str, timeout: float = 30) -> list[dict[str, Any]]:
        """The iopub messages of ``msg_id`` up to its idle status."""
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            out.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return out
        raise AssertionError(f"cell did not finish within {timeout}s: {out}")

    def wait_for(self, msg_id: str, msg_type: str, timeout: float = 30) -> list[dict[str, Any]]:
        """Messages of ``msg_id`` up to the first one of ``msg_type``."""
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            out.append(msg)
            if msg["msg_type"] == msg_type:
                return out
        raise AssertionError(f"no {msg_type} within {timeout}s: {out}")

    def run(self, code: str) -> str:
        """Execute ``code``; return its stdout, failing on an error."""
        msgs = self.collect(self.send(code))
        errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
        assert not errors, errors
        return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)
        self.km.cleanup_resources()


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    k = Kernel(tmp_path)
    yield k
    k.close()


def test_interrupt_ends_the_attempt_interrupted_and_the_kernel_stays_usable(
    kernel: Kernel,
) -> None:
    kernel.run("%load_ext woml_magic")
    msg_id = kernel.send(f"%%woml --run-id int-1 --out r\n{LONG_WAIT}")
    # The run outlives LIVE_AFTER_S, so the live widget is displayed: wait for it.
    shown = kernel.wait_for(msg_id, "display_data")
    assert WIDGET_VIEW in shown[-1]["content"]["data"]
    time.sleep(1.0)
    interrupted_at = time.monotonic()
    kernel.km.interrupt_kernel()
    msgs = kernel.collect(msg_id, timeout=15)
    elapsed = time.monotonic() - interrupted_at
    assert elapsed < 5.0, f"the interrupt took {elapsed:.1f}s to end the cell"
    errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
    # spec §6.3: one line, what stopped and what to do next, never a traceback; still a
    # KeyboardInterrupt (the front end stops a Run All as after any interrupt).
    assert [e["ename"] for e in errors] == ["CellInterrupted"]
    (line,) = errors[0]["traceback"]
    assert line.startswith("Interrupted: run int-1: attempt 1 of slow ended interrupted")
    assert "%%woml --resume int-1 --retry-interrupted" in line
    assert "Traceback" not in line
    # spec §6.3: the live output ends as the static timeline of the interrupted run.
    final = [m for m in msgs if m["msg_type"] == "update_display_data"][-1]["content"]["data"]
    assert WIDGET_VIEW not in final
    assert 'data-status="failed"' in final["text/html"]
    assert "interrupted" in final["text/plain"]

    out = kernel.run(
        "a = r.steps['slow'].attempts[-1]\n"
        "print(a.outcome, r.steps['slow'].status, r.status, a.ended_at - a.started_at)"
    )
    outcome, step_status, run_status, took = out.split()
    assert (outcome, step_status, run_status) == ("interrupted", "failed-closed", "failed")
    assert 0.5 < float(took) < 6.0
    # the journal has it too, and the kernel runs the next cell normally
    shown_again = kernel.run(
        "print(get_ipython().run_line_magic('woml', 'show int-1')"
        ".steps['slow'].attempts[-1].outcome)"
    )
    assert shown_again == "interrupted\n"
    after = kernel.run(f"%%woml --simulate --run-id after\n{RETRIES}\n")
    assert after == ""
    assert kernel.run("print(_.status)") == "succeeded\n"


def test_a_background_run_shown_again_while_it_goes_on_is_live_then_static(
    kernel: Kernel,
) -> None:
    # spec §6.3: wherever a Run is displayed, a run still going is the live timeline
    # (here: as a later cell's value), and it becomes the static one when the run ends.
    kernel.run("%load_ext woml_magic\n%config Woml.journal = ':memory:'")
    kernel.run('%%woml --background --run-id bg-1 --out r\n<step id="w" retry="2" '
               'retry-delay="1s"><script>if (attempt.number < 2) throw new Error("busy"); '
               "return 1;</script></step>")
    msg_id = kernel.send("r")
    msgs = kernel.collect(msg_id)
    shown = [m for m in msgs if m["msg_type"] == "display_data"]
    assert len(shown) == 1
    assert WIDGET_VIEW in shown[0]["content"]["data"]
    assert "woml-timeline" in shown[0]["content"]["data"]["text/html"]  # its fallback
    display_id = shown[0]["content"]["transient"]["display_id"]
    # Later cells run while the background run goes on; its end updates that output.
    deadline = time.monotonic() + 15
    final = None
    while final is None and time.monotonic() < deadline:
        try:
            m = kernel.kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if (m["msg_type"] == "update_display_data"
                and m["content"]["transient"].get("display_id") == display_id
                and WIDGET_VIEW not in m["content"]["data"]):
            final = m
    assert final is not None, "the live output never became the static timeline"
    assert "succeeded" in final["content"]["data"]["text/plain"]
    assert kernel.run("print(r.status)") == "succeeded\n"


def test_a_background_run_ended_by_a_later_cell_is_static_in_the_saved_notebook(
    tmp_path: Path,
) -> None:
    # The run ends on the run loop, whose update carries the starting cell's header;
    # nbclient (nbconvert --execute) only follows the cell executing now, so the
    # update is repeated after that cell (spec §6.3: the export shows the SVG).
    nb = execute(tmp_path, [
        "%load_ext woml_magic\n%config Woml.journal = ':memory:'",
        f"%%woml --background --run-id bg-save\n{LONG_WAIT}",
        "import time; time.sleep(0.5)\n%woml cancel bg-save",
        "print('after')",
    ])
    outputs = nb.cells[1].outputs
    assert len(outputs) == 1, outputs
    assert WIDGET_VIEW not in outputs[0].data
    assert 'data-run="bg-save"' in outputs[0].data["text/html"]
    assert 'data-status="failed"' in outputs[0].data["text/html"]
    assert "cancelled" in outputs[0].data["text/plain"]
