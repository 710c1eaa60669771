"""How long a ``%%woml`` cell takes in a real kernel, as a front end sees it (spec §6.1).

Measured through ``jupyter_client`` from sending the execute request to the kernel's
``idle`` status for that cell (everything the user waits for: the run, the journal,
the one display output). Goals: the first ``%%woml`` cell in a fresh kernel (after
``%load_ext``) within 150 ms; a warm 3-attempt simulated cell within 30 ms. The
baseline, measured in the same kernel: a ``print`` cell's round trip.

    python bench/cell.py
"""

from __future__ import annotations

import os
import queue
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIRST_GOAL_MS = 150.0
WARM_GOAL_MS = 30.0
ROUNDS = 30
CELL = """%%woml --simulate
<step id="charge" retry="3" retry-delay="1s">
  <script>if (attempt.number < 3) throw new Error("busy"); return {ok: true};</script>
</step>"""


def _roundtrip(kc: Any, code: str) -> float:
    """Milliseconds from sending ``code`` to the kernel going idle for it (no errors)."""
    started = time.perf_counter()
    msg_id = kc.execute(code)
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=30)
        except queue.Empty as exc:
            raise RuntimeError(f"no answer to {code[:30]!r}") from exc
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "error":
            raise RuntimeError("\n".join(msg["content"]["traceback"]))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return (time.perf_counter() - started) * 1000


def measure() -> dict[str, float]:
    from jupyter_client.manager import start_new_kernel

    with tempfile.TemporaryDirectory() as cwd:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        km, kc = start_new_kernel(kernel_name="python3", cwd=cwd, env=env)
        try:
            _roundtrip(kc, "%load_ext woml_magic")
            first = _roundtrip(kc, CELL)
            warm = [_roundtrip(kc, CELL) for _ in range(ROUNDS)]
            base = [_roundtrip(kc, "print(1)") for _ in range(ROUNDS)]
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    return {"first": first, "warm": statistics.median(warm), "base": statistics.median(base)}


def results() -> list[dict[str, Any]]:
    """The figures as rows: name, value, unit, goal, ok (and the baseline ratio)."""
    m = measure()
    baseline = f"a print cell: {m['base']:.1f} ms"
    return [
        {
            "name": "first %%woml cell in a fresh kernel",
            "value": round(m["first"], 1),
            "unit": "ms",
            "goal": FIRST_GOAL_MS,
            "ok": m["first"] <= FIRST_GOAL_MS,
            "ratio_to_baseline": round(m["first"] / m["base"], 2),
            "baseline": baseline,
        },
        {
            "name": "warm %%woml cell, 3 simulated attempts (median)",
            "value": round(m["warm"], 1),
            "unit": "ms",
            "goal": WARM_GOAL_MS,
            "ok": m["warm"] <= WARM_GOAL_MS,
            "ratio_to_baseline": round(m["warm"] / m["base"], 2),
            "baseline": baseline,
        },
    ]


def main() -> int:
    rows = results()
    for row in rows:
        mark = "ok" if row["ok"] else "MISSED"
        print(f"{row['name']}: {row['value']} {row['unit']} (goal ≤ {row['goal']:g}, "
              f"{row['ratio_to_baseline']}× {row['baseline']}) {mark}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
