"""The lab's speed (issue "The retry lab", spec §11).

Prints:
- real scripts: 1,000 clients × 10 attempts of a trivial throwing script (10,000
  attempts in the QuickJS worker, the local engine's rules, one simulated clock),
  the whole ``wm.lab`` call (goal ≤ 5 s), median of ROUNDS rounds;
- the same clients with a script that calls the server model through an outage
  (context: attempts per second when every attempt makes a call);
- the model path: 10,000 clients of a 10-attempt exponential policy against a
  20/s server with an outage, WOML's schedule and two what-if overlays
  (``simulate_many``, goal ≤ 10 s).

Run: ``python bench/lab.py``. ``results()`` returns the figures for bench/run_all.py.
"""

from __future__ import annotations

import os
import sys

# Run from a checkout without an install: the repository root comes first.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import statistics
import time
from typing import Any

import woml_magic as wm
from woml_magic.lab.labclock import DEFAULT_WORKERS
from woml_magic.lab.server import ModelServer
from woml_magic.lab.simulate import simulate_many

ROUNDS = 3
CLIENTS = 1_000
MODEL_CLIENTS = 10_000
REAL_GOAL_S = 5.0
MODEL_GOAL_S = 10.0

THROWING = ('<step id="s" retry="10" retry-delay="1s"><script>throw new Error("x");'
            "</script></step>")
CALLING = """<step id="s" retry="10" retry-delay="1s" retry-backoff="exponential"
  retry-max-delay="30s"><script>
const r = await services.http.request({method: "POST", url: context.payload.api + "/x"});
return r.status;
</script></step>"""


def _row(name: str, value: float, unit: str, goal: str, ok: bool) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "goal": goal, "ok": ok}


def _lab_seconds(doc: str, **options: Any) -> tuple[float, int]:
    start = time.perf_counter()
    result = wm.lab(doc, clients=CLIENTS, seed=1, sample=0, **options)
    return time.perf_counter() - start, result.attempts


def _measure() -> list[dict[str, Any]]:
    wm.lab(THROWING, clients=3, seed=0, sample=0)  # start the run loop, load the engine
    rounds = []
    for _ in range(ROUNDS):
        seconds, attempts = _lab_seconds(THROWING)
        assert attempts == CLIENTS * 10
        rounds.append(seconds)
    real = statistics.median(rounds)
    calling, calling_attempts = _lab_seconds(CALLING, capacity=50, outage="0s..10s")

    policy = wm.parse(CALLING).steps[0].policy
    server = ModelServer(capacity=20, outage=(10.0, 40.0))
    start = time.perf_counter()
    sims = simulate_many(policy, [MODEL_CLIENTS], server, seed=1, arrivals="uniform:60s",
                         overlays=[None, "jitter=full", "budget=10%"])
    model = time.perf_counter() - start
    requests = sum(s.calls for s in sims)
    return [
        _row(f"real scripts: {CLIENTS:,} clients × 10 attempts, median of {ROUNDS}", real,
             "s", f"≤ {REAL_GOAL_S:g}", real <= REAL_GOAL_S),
        _row("real scripts: the same, slowest round", max(rounds), "s", "(spread)", True),
        _row(f"real scripts: attempts per second ({DEFAULT_WORKERS} workers)",
             CLIENTS * 10 / real, "/s", "(context)", True),
        _row(f"real scripts calling the model: {calling_attempts:,} attempts", calling, "s",
             "(context)", True),
        _row(f"model path: {MODEL_CLIENTS:,} clients × 3 scenarios "
             f"({requests:,} requests)", model, "s", f"≤ {MODEL_GOAL_S:g}",
             model <= MODEL_GOAL_S),
    ]


def results() -> list[dict[str, Any]]:
    """The lab's figures for bench/run_all.py."""
    return _measure()


def main() -> None:
    for row in _measure():
        mark = "ok" if row["ok"] else "MISS"
        print(f"{row['name']:<62} {row['value']:>10.2f} {row['unit']:<3} "
              f"goal {row['goal']:<9} {mark}")


if __name__ == "__main__":
    main()
