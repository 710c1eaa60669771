"""Timeline speed (spec §6.3): a live widget update and a big static render.

Goals: one live update (event → widget refresh) of a run with 100 attempts within
20 ms; ``render_html`` of a 1,000-step × 3-attempt run within 500 ms; the true-to-time
layout, SVG and text of spec §3.1's example (``retry="10"``, waits 1 s … 30 s) within
10 ms. Each figure is
printed with a ratio against a baseline measured in the same run on the same machine:
for the widget, building a fresh widget for the same run (what an update would cost
without reusing widgets); for the HTML, serialising the run's events to JSON (the
least any renderer must do: touch every event once).

    python bench/timeline.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

# Run from a checkout without an install: the repository root comes first.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from woml_magic.events import (
    AttemptError,
    AttemptFinished,
    AttemptStarted,
    LogEmitted,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    WaitScheduled,
)
from woml_magic.model import Run, Step, Workflow
from woml_magic.policy import RetryPolicy
from woml_magic.timeline import render_html, render_text

LIVE_GOAL_MS = 20.0
HTML_GOAL_MS = 500.0
SPEC_GOAL_MS = 10.0
#: What a live view may add to the kernel while an attempt runs: 2 % of one core.
RUNNING_TICK_GOAL_MS = 20.0


def build_run(steps: int, attempts: int, *, finish: bool) -> Run:
    """A run whose every step throws ``attempts - 1`` times and then succeeds.

    With ``finish=False`` the last step's last attempt is still running.
    """
    policy = RetryPolicy(attempts=attempts, backoff="fixed", delay=timedelta(seconds=1))
    wf = Workflow("bench", tuple(Step(f"s{i}", "return 1;", policy) for i in range(steps)))
    run = Run("bench-run", wf, clock="simulated")
    rid, t = run.id, 0.0
    run.apply(RunStarted(rid, t, workflow_id=wf.id, clock="simulated"))
    for i, sr in enumerate(run.steps.values()):
        sid, key = sr.id, sr.idempotency_key
        run.apply(StepStarted(rid, t, step_id=sid, idempotency_key=key))
        for n in range(1, attempts + 1):
            run.apply(AttemptStarted(rid, t, step_id=sid, number=n, idempotency_key=key))
            run.apply(LogEmitted(rid, t + 0.01, step_id=sid, number=n, text=f"try {n}"))
            last = n == attempts
            if last and i == steps - 1 and not finish:
                return run
            outcome = "succeeded" if last else "threw"
            error = None if last else AttemptError("Error", "flaky", 3)
            run.apply(
                AttemptFinished(
                    rid,
                    t + 0.2,
                    step_id=sid,
                    number=n,
                    outcome=outcome,
                    error=error,
                    result={"ok": True} if last else None,
                    explanation="retrying" if not last else "succeeded",
                )
            )
            t += 0.2
            if not last:
                run.apply(WaitScheduled(rid, t, step_id=sid, after_attempt=n, seconds=1, due=t + 1))
                t += 1
        run.apply(StepFinished(rid, t, step_id=sid, status="succeeded", result={"ok": True}))
    run.apply(RunFinished(rid, t, status="succeeded"))
    return run


def spec_example_run() -> Run:
    """spec §3.1's example: ``retry="10"`` exponential 1s, max 30s; every attempt (6 ms)
    throws, so the waits are 1, 2, 4, 8, 16, 30, 30, 30, 30 s."""
    policy = RetryPolicy(
        attempts=10,
        backoff="exponential",
        delay=timedelta(seconds=1),
        max_delay=timedelta(seconds=30),
    )
    wf = Workflow("bench", (Step("charge", "throw 1;", policy),))
    run = Run("spec-run", wf, clock="simulated")
    sr = run.steps["charge"]
    rid, sid, key, t = run.id, sr.id, sr.idempotency_key, 0.0
    run.apply(RunStarted(rid, t, workflow_id=wf.id, clock="simulated"))
    run.apply(StepStarted(rid, t, step_id=sid, idempotency_key=key))
    for n in range(1, 11):
        run.apply(AttemptStarted(rid, t, step_id=sid, number=n, idempotency_key=key))
        t += 0.006
        error = AttemptError("Error", "card network busy", 1)
        run.apply(
            AttemptFinished(
                rid, t, step_id=sid, number=n, outcome="threw", error=error, explanation="x"
            )
        )
        if n < 10:
            wait = policy.wait(n).total_seconds()
            run.apply(
                WaitScheduled(rid, t, step_id=sid, after_attempt=n, seconds=wait, due=t + wait)
            )
            t += wait
    run.apply(StepFinished(rid, t, step_id=sid, status="failed"))
    run.apply(RunFinished(rid, t, status="failed"))
    return run


def bench_spec_example(repeat: int = 50) -> dict[str, Any]:
    """Median ms of ``render_html`` + ``render_text`` of spec §3.1's example."""
    run = spec_example_run()
    times = _time_ms(lambda: (render_html(run), render_text(run)), repeat)
    base = _time_ms(lambda: json.dumps([e.to_dict() for e in run.events]), repeat)
    return {"median": statistics.median(times), "baseline": statistics.median(base)}


def _time_ms(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def bench_live_update(repeat: int = 60) -> dict[str, Any]:
    """Median ms of one live update (apply a log event, the widget re-renders)."""
    from woml_magic.timeline.widget import TimelineWidget

    run = build_run(10, 10, finish=False)  # 10 steps × 10 attempts = 100 attempts
    widget = TimelineWidget(run, max_rate_hz=1000.0)
    running = list(run.steps.values())[-1]
    state = {"t": run.now}

    def update() -> None:
        state["t"] += 0.05  # the running bar grows, as it does live
        event = LogEmitted(run.id, state["t"], step_id=running.id, number=10, text="tick")
        run.apply(event)
        widget(event)  # no running loop here: the widget renders at once

    times = _time_ms(update, repeat)

    def rescale() -> None:
        # Jump past the axis end: the scale changes, so every bar and gap resizes.
        state["t"] = widget_axis_end(run) * 1.5
        event = LogEmitted(run.id, state["t"], step_id=running.id, number=10, text="later")
        run.apply(event)
        widget(event)

    rescales = _time_ms(rescale, 5)
    fresh: list[float] = []
    for _ in range(5):
        t0 = time.perf_counter()
        other = TimelineWidget(run)
        fresh.append((time.perf_counter() - t0) * 1000)
        other.close()
    widget.close()
    return {
        "median": statistics.median(times),
        "max": max(times),
        "rescale": statistics.median(rescales),
        "baseline": statistics.median(fresh),
    }


def bench_running_tick(seconds: float = 4.0) -> dict[str, Any]:
    """CPU the live view costs while an attempt runs with no event (spec §6.3: the bar
    grows and t advances at least twice a second): the process's CPU seconds during a
    real-clock attempt that sleeps, watched by a live widget, against the same run
    unwatched; and how often the widget redrew."""
    import woml_magic as wm
    from woml_magic.timeline.widget import TimelineWidget

    doc = (f'<step id="slow" timeout="1m"><script>await services.sleep("{seconds}s");'
           "return 1;</script></step>")
    wm.run(doc, clock="simulated")  # start the worker: not part of either figure

    def measure(watched: bool) -> tuple[float, int]:
        handle = wm.start(doc, clock="real")
        handle.wait_started(10)
        widget = handle.watch(lambda run: TimelineWidget(run, clock_now=handle.now)) \
            if watched else None
        t0 = time.process_time()
        handle.result(timeout=seconds + 30)
        cpu = time.process_time() - t0
        renders = 0
        if widget is not None:
            renders = widget.renders
            widget.close()
        return cpu, renders

    plain, _ = measure(False)
    watched, renders = measure(True)
    return {"cpu_per_s": (watched - plain) / seconds, "renders_per_s": renders / seconds,
            "baseline_cpu_per_s": plain / seconds}


def widget_axis_end(run: Run) -> float:
    from woml_magic.timeline.layout import compute_layout

    return compute_layout(run).axis_end


def bench_static_html(repeat: int = 3) -> dict[str, Any]:
    """Median ms of ``render_html`` for 1,000 steps × 3 attempts, and its size."""
    run = build_run(1000, 3, finish=True)
    times = _time_ms(lambda: render_html(run), repeat)
    base = _time_ms(lambda: json.dumps([e.to_dict() for e in run.events]), repeat)
    return {
        "median": statistics.median(times),
        "baseline": statistics.median(base),
        "bytes": len(render_html(run).encode()),
    }


def results() -> list[dict[str, Any]]:
    """The figures as rows: name, value, unit, goal, ok (and the baseline ratio)."""
    live = bench_live_update()
    page = bench_static_html()
    spec = bench_spec_example()
    tick = bench_running_tick()
    return [
        {
            "name": "live view while an attempt runs: redraws per second",
            "value": round(tick["renders_per_s"], 1),
            "unit": "/s",
            "goal": None,
            "ok": tick["renders_per_s"] >= 2,  # spec §6.3: at least twice a second
            "ratio_to_baseline": round(tick["renders_per_s"] / 2, 2),
            "baseline": "spec §6.3's least: 2 per second",
        },
        {
            "name": "live view while an attempt runs: kernel CPU it adds",
            "value": round(tick["cpu_per_s"] * 1000, 1),
            "unit": "ms CPU/s",
            "goal": RUNNING_TICK_GOAL_MS,
            "ok": tick["cpu_per_s"] * 1000 <= RUNNING_TICK_GOAL_MS,
            "ratio_to_baseline": round(tick["cpu_per_s"] / max(tick["baseline_cpu_per_s"],
                                                               1e-6), 2),
            "baseline": "the same run unwatched: "
                        f"{tick['baseline_cpu_per_s'] * 1000:.1f} ms CPU/s",
        },
        {
            "name": "widget live update, 100 attempts (median)",
            "value": round(live["median"], 2),
            "unit": "ms",
            "goal": LIVE_GOAL_MS,
            "ok": live["median"] <= LIVE_GOAL_MS,
            "ratio_to_baseline": round(live["median"] / live["baseline"], 3),
            "baseline": f"building a fresh widget: {live['baseline']:.1f} ms",
        },
        {
            "name": "widget live update, 100 attempts (worst)",
            "value": round(live["max"], 2),
            "unit": "ms",
            "goal": None,
            "ok": True,
            "ratio_to_baseline": round(live["max"] / live["baseline"], 3),
            "baseline": f"building a fresh widget: {live['baseline']:.1f} ms",
        },
        {
            "name": "widget live update that rescales the axis, 100 attempts (median)",
            "value": round(live["rescale"], 2),
            "unit": "ms",
            "goal": LIVE_GOAL_MS,
            "ok": live["rescale"] <= LIVE_GOAL_MS,
            "ratio_to_baseline": round(live["rescale"] / live["baseline"], 3),
            "baseline": f"building a fresh widget: {live['baseline']:.1f} ms",
        },
        {
            "name": "render_html, 1000 steps x 3 attempts",
            "value": round(page["median"], 1),
            "unit": "ms",
            "goal": HTML_GOAL_MS,
            "ok": page["median"] <= HTML_GOAL_MS,
            "ratio_to_baseline": round(page["median"] / page["baseline"], 2),
            "baseline": f"json.dumps of the run's events: {page['baseline']:.1f} ms; "
            f"page {page['bytes'] / 1e6:.2f} MB",
        },
        {
            "name": "render_html + render_text of spec 3.1's retry=10 example (median)",
            "value": round(spec["median"], 2),
            "unit": "ms",
            "goal": SPEC_GOAL_MS,
            "ok": spec["median"] <= SPEC_GOAL_MS,
            "ratio_to_baseline": round(spec["median"] / spec["baseline"], 2),
            "baseline": f"json.dumps of the run's events: {spec['baseline']:.3f} ms",
        },
    ]


def main() -> None:
    for row in results():
        goal = "" if row["goal"] is None else f" (goal ≤ {row['goal']:g} {row['unit']})"
        verdict = "ok" if row["ok"] else "MISSED"
        print(
            f"{row['name']}: {row['value']} {row['unit']}{goal} {verdict}; "
            f"{row['ratio_to_baseline']}x baseline ({row['baseline']})"
        )


if __name__ == "__main__":
    main()
