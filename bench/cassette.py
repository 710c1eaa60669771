"""Replaying recorded calls against answering them live (spec §10.4).

The same N managed ``POST /charges`` calls (each with its own ``Idempotency-Key``) go
through ``HttpService`` three times in one run: answered by the demo API on 127.0.0.1
(the baseline), recorded into a cassette while the demo API answers, and answered from
that cassette with the demo API stopped. Each figure is the median of the per-call
times; the replay's goal is at most 1.5x the live call's.

Run: ``python bench/cassette.py [calls]`` (10,000 by default).
"""

from __future__ import annotations

import os
import sys

# Run from a checkout without an install: the repository root comes first.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import asyncio
import contextlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from woml_magic.demo.api import DemoAPI
from woml_magic.services import CallScope, HttpService, StepCalls
from woml_magic.services.cassette import Cassette

GOAL_RATIO = 1.5


def _scope() -> CallScope:
    return CallScope(run_id="bench", step_id="pay", attempt_number=1, step_calls=StepCalls(),
                     emit=lambda event: None, now=lambda: 0.0, busy=contextlib.nullcontext,
                     step_key="key-of-the-step")


async def _calls(url: str, n: int, cassette: Cassette | None) -> list[float]:
    service = HttpService(cassette=cassette)
    times: list[float] = []
    try:
        for i in range(n):
            request = {"method": "POST", "url": f"{url}/charges",
                       "json": {"amount": 100 + i % 50, "currency": "eur"},
                       "idempotency": {"header": "Idempotency-Key", "value": f"charge-{i}"}}
            t0 = time.perf_counter()
            await service.request(request, None, _scope())
            times.append(time.perf_counter() - t0)
    finally:
        await service.aclose()
    return times


def results(n: int = 10_000) -> list[dict[str, Any]]:
    """Measure and return figures as ``{name, value, unit, goal, ok}`` dicts."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.cassette"
        with DemoAPI() as api:
            url = api.url
            live = asyncio.run(_calls(url, n, None))
            api.reset()
            recording = asyncio.run(_calls(url, n, Cassette.record(path)))
        size = path.stat().st_size
        t0 = time.perf_counter()
        cassette = Cassette.replay(path)
        load = time.perf_counter() - t0
        replay = asyncio.run(_calls(url, n, cassette))  # the demo API is stopped
    live_ms, rec_ms, replay_ms = (statistics.median(t) * 1000 for t in (live, recording, replay))
    ratio = replay_ms / live_ms
    return [
        {"name": f"live call, median of {n}", "value": round(live_ms, 3), "unit": "ms",
         "goal": None, "ok": True},
        {"name": "recorded call, median", "value": round(rec_ms, 3), "unit": "ms",
         "goal": None, "ok": True},
        {"name": "replayed call, median", "value": round(replay_ms, 3), "unit": "ms",
         "goal": None, "ok": True},
        {"name": "replayed/live", "value": round(ratio, 3), "unit": "x",
         "goal": f"<= {GOAL_RATIO}", "ok": ratio <= GOAL_RATIO},
        {"name": f"replay total ({n} calls)", "value": round(sum(replay), 2), "unit": "s",
         "goal": None, "ok": True},
        {"name": "cassette load", "value": round(load * 1000, 1), "unit": "ms",
         "goal": None, "ok": True},
        {"name": "cassette size", "value": round(size / 1e6, 2), "unit": "MB",
         "goal": None, "ok": True},
    ]


def main() -> int:
    from figures import print_figures  # bench/ is the script's folder

    return print_figures(results(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000), 30)

if __name__ == "__main__":
    sys.exit(main())
