"""Engine benchmark (issue "Execution core", spec §4.5, §5.1).

Prints:
- simulated attempts per second with a trivial throwing script (goal ≥ 2,000/s),
  and its cost per attempt against a bare worker round trip measured in the same
  run (goal ≤ 3×);
- worker cold start and restart after a kill (goal ≤ 100 ms);
- real-clock wait error over 200 waits of 50 ms (goal median ≤ 2 ms, p99 ≤ 10 ms).

Run: ``python bench/engine.py``. ``results()`` returns the figures for bench/run_all.py.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import woml_magic as wm
from woml_magic.clock import RealClock
from woml_magic.runtime import AttemptRequest, ScriptWorker

THROWING = (
    '<step id="s" retry="10" retry-delay="0s"><script>throw new Error("x");</script></step>'
)


def _row(name: str, value: float, unit: str, goal: str, ok: bool) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "goal": goal, "ok": ok}


async def _round_trips(worker: ScriptWorker, n: int) -> float:
    async def no_services(name: str, args: list[Any]) -> Any:
        return None

    request = AttemptRequest(
        script="throw new Error('x');", script_line=1, script_column=1,
        context={"payload": None, "steps": {}, "run": {"id": "b", "workflow": "b"}},
        attempt={"number": 1, "maxAttempts": 1, "idempotencyKey": "k"},
        now_ms=lambda: time.time() * 1000,
    )
    start = time.perf_counter()
    for _ in range(n):
        await worker.run_attempt(request, no_services, lambda level, text: None)
    return (time.perf_counter() - start) / n


async def _cold_and_restart() -> tuple[float, float]:
    worker = ScriptWorker()
    t = time.perf_counter()
    await worker.start()
    cold = time.perf_counter() - t
    restarts = []
    for _ in range(5):
        worker.kill()
        t = time.perf_counter()
        await worker.start()
        restarts.append(time.perf_counter() - t)
    await worker.aclose()
    return cold, statistics.median(restarts)


async def _wait_errors(n: int = 200, wait: float = 0.05) -> list[float]:
    clock = RealClock()
    errors = []
    for _ in range(n):
        t = time.perf_counter()
        await clock.sleep(wait)
        errors.append(time.perf_counter() - t - wait)
    return errors


def results() -> list[dict[str, Any]]:
    wf = wm.parse(THROWING)
    wm.run(wf, clock="simulated")  # warm the worker
    runs = 30
    start = time.perf_counter()
    for _ in range(runs):
        wm.run(wf, clock="simulated")
    per_attempt = (time.perf_counter() - start) / (runs * 10)

    async def bare() -> float:
        worker = ScriptWorker()
        try:
            await _round_trips(worker, 20)
            return await _round_trips(worker, 300)
        finally:
            await worker.aclose()

    round_trip = asyncio.run(bare())
    cold, restart = asyncio.run(_cold_and_restart())
    errors = sorted(asyncio.run(_wait_errors()))
    median_err = statistics.median(errors) * 1000
    p99_err = errors[int(len(errors) * 0.99) - 1] * 1000
    ratio = per_attempt / round_trip
    return [
        _row("simulated attempts per second", 1 / per_attempt, "/s", "≥ 2000",
             1 / per_attempt >= 2000),
        _row("attempt cost vs bare worker round trip", ratio, "×", "≤ 3", ratio <= 3),
        _row("bare worker round trip", round_trip * 1000, "ms", "(baseline)", True),
        _row("worker cold start", cold * 1000, "ms", "≤ 100", cold <= 0.1),
        _row("worker restart after kill", restart * 1000, "ms", "≤ 100", restart <= 0.1),
        _row("real-clock wait error, median (50 ms waits)", median_err, "ms", "≤ 2",
             median_err <= 2),
        _row("real-clock wait error, p99", p99_err, "ms", "≤ 10", p99_err <= 10),
    ]


def main() -> None:
    for row in results():
        mark = "ok" if row["ok"] else "MISS"
        print(f"{row['name']:<48} {row['value']:>10.2f} {row['unit']:<3} "
              f"goal {row['goal']:<8} {mark}")


if __name__ == "__main__":
    main()
