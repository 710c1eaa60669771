"""Engine benchmark (issue "Execution core", spec §4.5, §5.1).

Prints:
- simulated attempts per second with a trivial throwing script (goal ≥ 2,000/s),
  and its cost per attempt against a bare worker round trip measured in the same
  run (goal ≤ 3×);
- worker cold start and restart after a kill (goal ≤ 100 ms), measured by
  bench/worker.py (whose throwing-attempt rate is also the bare round trip here);
- real-clock wait error over 200 waits of 50 ms (goal median ≤ 2 ms, p99 ≤ 10 ms).

Run: ``python bench/engine.py``. ``results()`` returns the figures for bench/run_all.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import time
from pathlib import Path
from typing import Any

import woml_magic as wm
from woml_magic.clock import RealClock
from woml_magic.runtime import ScriptWorker

ROUNDS = 5
RUNS = 30  # of 10 attempts each, per round
THROWING = (
    '<step id="s" retry="10" retry-delay="0s"><script>throw new Error("x");</script></step>'
)


def _worker_results() -> dict[str, dict[str, Any]]:
    """bench/worker.py's figures, by name (one measurement of the bare worker)."""
    spec = importlib.util.spec_from_file_location(
        "woml_bench_worker", Path(__file__).with_name("worker.py")
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {row["name"]: row for row in module.results()}


def _row(name: str, value: float, unit: str, goal: str, ok: bool) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "goal": goal, "ok": ok}


async def _wait_errors(n: int = 200, wait: float = 0.05) -> list[float]:
    clock = RealClock()
    errors = []
    for _ in range(n):
        t = time.perf_counter()
        await clock.sleep(wait)
        errors.append(time.perf_counter() - t - wait)
    return errors


def _measure() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The engine's figures, and the worker figures they are compared with."""
    wf = wm.parse(THROWING)
    wm.run(wf, clock="simulated")  # warm the worker
    # The median of ROUNDS rounds: one busy moment on a shared machine moves a single
    # round by 10-20 %.
    rounds = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(RUNS):
            wm.run(wf, clock="simulated")
        rounds.append((time.perf_counter() - start) / (RUNS * 10))
    per_attempt = statistics.median(rounds)
    worker = _worker_results()
    round_trip = 1 / worker["throwing attempts per second"]["value"]
    errors = sorted(asyncio.run(_wait_errors()))
    median_err = statistics.median(errors) * 1000
    p99_err = errors[int(len(errors) * 0.99) - 1] * 1000
    ratio = per_attempt / round_trip
    engine = [
        _row(f"simulated attempts per second (median of {ROUNDS})", 1 / per_attempt, "/s",
             "≥ 2000", 1 / per_attempt >= 2000),
        _row("simulated attempts per second, slowest round", 1 / max(rounds), "/s",
             "(spread)", True),
        _row("attempt cost vs bare worker round trip", ratio, "×", "≤ 3", ratio <= 3),
        _row("bare worker round trip (throwing script)", round_trip * 1000, "ms",
             "(baseline)", True),
        _row("real-clock wait error, median (50 ms waits)", median_err, "ms", "≤ 2",
             median_err <= 2),
        _row("real-clock wait error, p99", p99_err, "ms", "≤ 10", p99_err <= 10),
    ]
    restarts = [worker["worker cold start"], worker["worker restart after kill"]]
    return engine, restarts


def results() -> list[dict[str, Any]]:
    """The engine's figures for bench/run_all.py (which lists bench/worker.py's too)."""
    return _measure()[0]


def _prelude_mode() -> str | None:
    """How the worker gives each context its prelude (docs/runtime.md): a figure's context."""
    worker = ScriptWorker()
    try:
        asyncio.run(worker.start())
        return worker.prelude
    finally:
        asyncio.run(worker.aclose())


def main() -> None:
    engine, restarts = _measure()
    print(f"(contexts get the prelude as {_prelude_mode()}; WOML_PRELUDE_BYTECODE=0 "
          "compiles it instead)")
    for row in engine + restarts:
        mark = "ok" if row["ok"] else "MISS"
        print(f"{row['name']:<48} {row['value']:>10.2f} {row['unit']:<3} "
              f"goal {row['goal']:<8} {mark}")


if __name__ == "__main__":
    main()
