"""How long the kernel takes to complete inside a 200-line ``%%woml`` cell (spec §6.4).

Measured through ``jupyter_client`` as JupyterLab asks: a ``complete_request`` with the
whole cell and ``cursor_pos``, timed from sending it to the ``complete_reply``. The
cursor goes round three places in the middle of the cell — an attribute name in a
``<step>`` tag (``retry-b``), a member after ``services.`` and a key of a
``services.http.request({…})`` — and every reply is checked. Goal: median and p90 within
50 ms. The baseline, in the same kernel and run: a completion in a 200-line Python cell
(IPython's Jedi), and the ratio of the two medians.

    python bench/completion.py
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOAL_MS = 50.0
ROUNDS = 45  # requests per cell: 15 at each of the three places
LINES = 200

_STEP = """  <step id="step{i}" retry="3" retry-backoff="exponential" retry-delay="1s">
    <script>
      const res = await services.http.request({{ method: "POST", url: `${{context.payload.u}}/{i}`,
        idempotency: {{ header: "Idempotency-Key", value: attempt.idempotencyKey }} }},
        {{ name: "call-{i}" }});
      return res.data;
    </script>
  </step>
"""
_PY = """def handler_{i}(event, context):
    total = sum(item["amount"] for item in event.get("items", []))
    if total > {i}:
        return json.dumps({{"status": "large", "total": total}})
    return {{"status": "small", "total": total}}

"""


def woml_cell() -> tuple[str, list[tuple[int, str]]]:
    """A ``%%woml`` cell of ``LINES`` lines and three cursors in its middle, each with
    the completion it must offer."""
    steps = [_STEP.format(i=i) for i in range(-(-(LINES - 3) // _STEP.count("\n")))]
    middle = len(steps) // 2
    steps[middle] = steps[middle].replace('retry-backoff="exponential"', 'retry-b', 1)
    steps[middle + 1] = steps[middle + 1].replace("return res.data;", "services.", 1)
    steps[middle + 2] = steps[middle + 2].replace('{ method: "POST"', '{ me', 1)
    body = "".join(steps)
    cell = f"%%woml --simulate\n<workflow id=\"bench\">\n{body}</workflow>\n"
    body_at = cell.index(body)
    cursors = [
        (body_at + len("".join(steps[:middle])) + steps[middle].index("retry-b") + 7,
         "retry-backoff"),
        (body_at + len("".join(steps[: middle + 1])) + steps[middle + 1].index("services.")
         + 9, "http"),
        (body_at + len("".join(steps[: middle + 2])) + steps[middle + 2].index("{ me") + 4,
         "method"),
    ]
    return cell, cursors


def python_cell() -> tuple[str, int]:
    """A 200-line Python cell and a cursor after ``json.du`` in its middle."""
    funcs = [_PY.format(i=i) for i in range(LINES // _PY.count("\n"))]
    cell = "import json\n\n" + "".join(funcs)
    at = cell.index("json.dumps", len(cell) // 2) + len("json.du")
    return cell, at


def _complete(kc: Any, code: str, cursor: int) -> tuple[float, list[str]]:
    started = time.perf_counter()
    reply = kc.complete(code, cursor, reply=True, timeout=30)
    elapsed = (time.perf_counter() - started) * 1000
    return elapsed, list(reply["content"]["matches"])


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def measure() -> dict[str, float]:
    from jupyter_client.manager import start_new_kernel

    cell, cursors = woml_cell()
    assert cell.count("\n") >= LINES, cell.count("\n")
    code, py_cursor = python_cell()
    with tempfile.TemporaryDirectory() as cwd:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        km, kc = start_new_kernel(kernel_name="python3", cwd=cwd, env=env)
        try:
            kc.execute_interactive("%load_ext woml_magic", timeout=60)
            for cursor, _ in cursors:  # warm: the first request imports the request keys
                _complete(kc, cell, cursor)
            woml: list[float] = []
            for n in range(ROUNDS):
                cursor, expected = cursors[n % len(cursors)]
                elapsed, matches = _complete(kc, cell, cursor)
                if expected not in matches:
                    raise RuntimeError(f"no {expected!r} at {cursor}: {matches}")
                woml.append(elapsed)
            _complete(kc, code, py_cursor)  # Jedi's first look at the cell
            python: list[float] = []
            for _ in range(ROUNDS):
                elapsed, matches = _complete(kc, code, py_cursor)
                if "dumps" not in matches:
                    raise RuntimeError(f"no 'dumps' in the Python cell: {matches}")
                python.append(elapsed)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    return {"median": statistics.median(woml), "p90": _p90(woml),
            "base": statistics.median(python), "base_p90": _p90(python),
            "lines": float(cell.count("\n"))}


def results() -> list[dict[str, Any]]:
    """The figures as rows: name, value, unit, goal, ok (and the baseline ratio)."""
    m = measure()
    baseline = f"a 200-line Python cell: median {m['base']:.1f} ms, p90 {m['base_p90']:.1f} ms"
    return [
        {
            "name": f"completion in a {m['lines']:.0f}-line %%woml cell (median)",
            "value": round(m["median"], 1),
            "unit": "ms",
            "goal": GOAL_MS,
            "ok": m["median"] <= GOAL_MS,
            "ratio_to_baseline": round(m["median"] / m["base"], 2),
            "baseline": baseline,
        },
        {
            "name": f"completion in a {m['lines']:.0f}-line %%woml cell (p90)",
            "value": round(m["p90"], 1),
            "unit": "ms",
            "goal": GOAL_MS,
            "ok": m["p90"] <= GOAL_MS,
            "ratio_to_baseline": round(m["p90"] / m["base_p90"], 2),
            "baseline": baseline,
        },
        {
            "name": "completion in a 200-line Python cell (median, baseline)",
            "value": round(m["base"], 1),
            "unit": "ms",
            "goal": None,
            "ok": True,
        },
    ]


def main() -> int:
    rows = results()
    for row in rows:
        mark = "ok" if row["ok"] else "MISSED"
        goal = "baseline" if row["goal"] is None else f"goal ≤ {row['goal']:g}"
        ratio = (f", {row['ratio_to_baseline']}× {row['baseline']}"
                 if "ratio_to_baseline" in row else "")
        print(f"{row['name']}: {row['value']} {row['unit']} ({goal}{ratio}) {mark}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
