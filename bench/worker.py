"""Script worker speed (spec §4.5): start, restart after kill, round trip, throughput.

Run ``python bench/worker.py``. Prints each figure with its goal and, for the round
trip, its ratio to a baseline measured in the same run (one bare QuickJS eval in
this process), so numbers from different machines compare. ``results()`` returns
the same figures as dicts for ``bench/run_all.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from typing import Any

import quickjs

from woml_magic.runtime import AttemptRequest, AttemptResult, ScriptWorker
from woml_magic.runtime._bytecode import Bytecode, BytecodeUnavailable
from woml_magic.runtime._contexts import Contexts
from woml_magic.runtime._runner import AttemptRunner
from woml_magic.runtime.binding import installed_version
from woml_magic.runtime.commands import run_line
from woml_magic.runtime.protocol import encode_line

ROUNDS = 7
TRIVIAL = 200


def _request(script: str) -> AttemptRequest:
    return AttemptRequest(
        script=script, script_line=1, script_column=1, context={}, attempt={}, now_ms=time.time
    )


async def _no_services(name: str, args: list[Any]) -> Any:
    raise AssertionError(name)


async def _attempt(worker: ScriptWorker, script: str) -> AttemptResult:
    return await worker.run_attempt(_request(script), _no_services, lambda level, text: None)


async def _throwing_round_trips(worker: ScriptWorker, attempts: int) -> float:
    """Seconds per throwing attempt, one after another on a warm worker."""
    start = time.perf_counter()
    for _ in range(attempts):
        result = await _attempt(worker, "throw new Error('x')")
        assert result.outcome == "threw"
    return (time.perf_counter() - start) / attempts


def bare_round_trip_s(attempts: int = TRIVIAL) -> float:
    """A bare worker round trip of a throwing script, in seconds (the lab's baseline,
    bench/lab.py): one warm worker, no engine, attempts one after another."""
    return bare_round_trip(attempts)[0]


def _process_cpu_s(pid: int | None) -> float | None:
    """CPU seconds process ``pid`` has used (Linux ``/proc``), or None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def bare_round_trip(attempts: int = TRIVIAL) -> tuple[float, float, float | None]:
    """``bare_round_trip_s``'s seconds per attempt, with the CPU seconds per attempt the
    kernel (this process) and the worker process spent on it (None where the worker's
    CPU cannot be read): under load the round trip waits for a core, its CPU does not."""

    async def measure() -> tuple[float, float, float | None]:
        worker = ScriptWorker()
        try:
            await worker.start()
            await _attempt(worker, "throw new Error('x')")  # warm the pipes
            child, kernel = _process_cpu_s(worker.pid), time.process_time()
            seconds = await _throwing_round_trips(worker, attempts)
            kernel = time.process_time() - kernel
            child_end = _process_cpu_s(worker.pid)
            used = None if child is None or child_end is None else child_end - child
            return seconds, kernel / attempts, None if used is None else used / attempts
        finally:
            await worker.aclose()

    return asyncio.run(measure())


class _Pipe:
    """The worker's end of its pipes, left out: each message encoded, then dropped."""

    def send(self, message: Any) -> None:
        encode_line(message)

    def receive(self) -> None:
        return None


def attempt_cpu_in_process(script: str = "throw new Error('x')", attempts: int = 3000) -> float:
    """Thread CPU seconds the worker process's own classes spend on one attempt of
    ``script``, the median of ``attempts`` (issue 23 item 9): ``AttemptRunner`` runs it
    in the spare context, then ``Contexts.prepare_spare`` makes the next, in this
    process, as the child does between reading a command and reading the next; the
    pipes and the command's JSON are left out. The same script every time, as a retried
    step's attempts (from the second on it is read from bytecode)."""
    try:
        contexts = Contexts(Bytecode.open(installed_version()))
    except BytecodeUnavailable as refusal:
        contexts = Contexts(None, str(refusal))
    command = json.loads(run_line(_request(script), 1))  # what the child reads
    pipe = _Pipe()
    contexts.prepare_spare()
    spent = []
    for _ in range(attempts):
        start = time.thread_time()
        AttemptRunner(pipe, command, contexts).run()  # type: ignore[arg-type]
        contexts.router.current = None
        contexts.prepare_spare()
        spent.append(time.thread_time() - start)
    return statistics.median(spent)


def _baseline_eval_ms() -> float:
    """One fresh QuickJS context plus ``return 1`` in this process: the floor."""
    start = time.perf_counter()
    for _ in range(TRIVIAL):
        ctx = quickjs.Context()
        ctx.eval("(async function () { return 1; })()")
    return (time.perf_counter() - start) * 1000 / TRIVIAL


async def _measure() -> list[dict[str, Any]]:
    cold: list[float] = []
    restart: list[float] = []
    for _ in range(ROUNDS):
        worker = ScriptWorker()
        start = time.perf_counter()
        await worker.start()
        cold.append((time.perf_counter() - start) * 1000)
        worker.kill()
        start = time.perf_counter()
        await worker.start()
        restart.append((time.perf_counter() - start) * 1000)
        await worker.aclose()

    worker = ScriptWorker()
    try:
        await worker.start()
        await _attempt(worker, "return 1")  # warm the pipes
        start = time.perf_counter()
        for _ in range(TRIVIAL):
            result = await _attempt(worker, "return 1")
            assert result.outcome == "succeeded"
        round_trip = (time.perf_counter() - start) * 1000 / TRIVIAL
        throwing_per_s = 1 / await _throwing_round_trips(worker, TRIVIAL)
    finally:
        await worker.aclose()

    baseline = _baseline_eval_ms()
    in_process_ms = attempt_cpu_in_process() * 1000
    cold_ms = statistics.median(cold)
    restart_ms = statistics.median(restart)
    return [
        {
            "name": "worker cold start",
            "value": cold_ms,
            "unit": "ms",
            "goal": "<= 100",
            "ok": cold_ms <= 100,
        },
        {
            "name": "worker restart after kill",
            "value": restart_ms,
            "unit": "ms",
            "goal": "<= 100",
            "ok": restart_ms <= 100,
        },
        {
            "name": "trivial attempt round trip",
            "value": round_trip,
            "unit": "ms",
            "goal": "<= 5",
            "ok": round_trip <= 5,
            "ratio_to_in_process_eval": round_trip / baseline if baseline else None,
        },
        {
            "name": "throwing attempts per second",
            "value": throwing_per_s,
            "unit": "1/s",
            "goal": ">= 200",
            "ok": throwing_per_s >= 200,
        },
        {
            "name": "worker CPU per throwing attempt, in-process",
            "value": in_process_ms,
            "unit": "ms",
            "goal": "-",
            "ok": True,
        },
        {
            "name": "in-process QuickJS context + eval (baseline)",
            "value": baseline,
            "unit": "ms",
            "goal": "-",
            "ok": True,
        },
    ]


def results() -> list[dict[str, Any]]:
    """The figures as ``{name, value, unit, goal, ok}`` dicts (for bench/run_all.py)."""
    return asyncio.run(_measure())


def main() -> None:
    for row in results():
        extra = ""
        if row.get("ratio_to_in_process_eval") is not None:
            extra = f"  ({row['ratio_to_in_process_eval']:.0f}x in-process eval)"
        mark = "ok" if row["ok"] else "MISSED"
        print(
            f"{row['name']:<46} {row['value']:>9.2f} {row['unit']:<4} goal {row['goal']:<7} "
            f"{mark}{extra}"
        )


if __name__ == "__main__":
    main()
