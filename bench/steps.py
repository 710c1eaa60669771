"""Steps benchmark (issue 12, spec §3.6, §4.5): the cost of a run is linear in its steps.

Prints the time of one run of 1,000 / 3,000 / 10,000 trivial steps on the simulated
clock (goal: 10,000 ≤ 15 s, and the time per step about the same at every size).
Each step reads the previous step's result through ``context.steps``, so the run
exercises what grows with the run: the steps' results.

Run: ``python bench/steps.py``. ``results()`` returns the figures for bench/run_all.py.
"""

from __future__ import annotations

import time
from typing import Any

import woml_magic as wm

SIZES = (1000, 3000, 10_000)
GOAL_10K_SECONDS = 15.0


def document(n: int) -> str:
    """``n`` steps; step k returns k plus what step k - 1 returned."""
    steps = ['<step id="s0"><script>return 0;</script></step>']
    steps += [
        f'<step id="s{k}"><script>return context.steps.s{k - 1} + 1;</script></step>'
        for k in range(1, n)
    ]
    return '<workflow id="steps">' + "".join(steps) + "</workflow>"


def measure(n: int) -> float:
    wf = wm.parse(document(n))
    start = time.perf_counter()
    run = wm.run(wf, clock="simulated")
    seconds = time.perf_counter() - start
    assert run.status == "succeeded", run.status
    assert run.steps[f"s{n - 1}"].result == n - 1
    return seconds


def results() -> list[dict[str, Any]]:
    wm.run(wm.parse(document(10)), clock="simulated")  # warm the worker
    rows = []
    timings = {n: measure(n) for n in SIZES}
    per_step = {n: timings[n] / n * 1000 for n in SIZES}
    for n in SIZES:
        goal = f"≤ {GOAL_10K_SECONDS:g}" if n == 10_000 else "—"
        ok = timings[n] <= GOAL_10K_SECONDS if n == 10_000 else True
        rows.append({"name": f"{n:,} trivial steps, simulated clock", "value": timings[n],
                     "unit": "s", "goal": goal, "ok": ok})
    ratio = per_step[10_000] / per_step[1000]
    rows.append({"name": "cost per step, 10,000 vs 1,000 steps", "value": ratio, "unit": "×",
                 "goal": "≤ 1.5 (linear)", "ok": ratio <= 1.5})
    return rows


def main() -> None:
    for row in results():
        mark = "ok" if row["ok"] else "MISS"
        print(f"{row['name']:<44} {row['value']:>8.2f} {row['unit']:<2} goal {row['goal']:<14} "
              f"{mark}")


if __name__ == "__main__":
    main()
