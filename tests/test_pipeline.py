"""Attempts sent ahead to one worker process (``runtime/pipeline.py``, spec §4.5) and
the lab that sends them (``labclock.pipeline_depth``, spec §11): each attempt gets its
own answer; one that spins, stalls, crashes or is cancelled ends only itself; an
attempt's deadline starts when it does. Real worker processes throughout."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import woml_magic as wm
from woml_magic.lab import labclock
from woml_magic.lab.labclock import PIPELINE_DEPTH, LabPool, pipeline_depth
from woml_magic.runtime import AttemptRequest, AttemptResult, ScriptWorker
from woml_magic.runtime.wrapper import reach_of


def request(script: str, n: int = 0) -> AttemptRequest:
    return AttemptRequest(script=script, script_line=1, script_column=1,
                          context={"payload": {"n": n}, "steps": {}, "run": {"id": f"r{n}"}},
                          attempt={"number": 1, "maxAttempts": 1, "idempotencyKey": "k"},
                          now_ms=lambda: 0.0)


async def no_services(name: str, args: list[Any]) -> Any:
    raise AssertionError(f"unexpected service call {name}")


class Deadlines:
    """Deadlines armed when their attempts start (``run_attempt(deadline=callable)``),
    each ringing ``seconds`` of real time later; records the order they were armed in."""

    def __init__(self) -> None:
        self.armed: list[str] = []

    def arm(self, name: str, seconds: float) -> Callable[[], asyncio.Future[None]]:
        def arming() -> asyncio.Future[None]:
            self.armed.append(name)
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[None] = loop.create_future()

            def ring() -> None:
                if not fut.done():
                    fut.set_result(None)

            loop.call_later(seconds, ring)
            return fut
        return arming


def pipelined(depth: int = 3) -> ScriptWorker:
    return ScriptWorker(keep_listening=True, depth=depth)


async def attempt(worker: ScriptWorker, script: str, n: int = 0, *,
                  logs: list[tuple[int, str]] | None = None,
                  deadline: Callable[[], asyncio.Future[None]] | None = None,
                  stalls: list[int] | None = None) -> AttemptResult:
    return await worker.run_attempt(
        request(script, n), no_services,
        lambda level, text: logs.append((n, text)) if logs is not None else None,
        (lambda: stalls.append(n)) if stalls is not None else None,
        deadline=deadline)


def run_on(worker: ScriptWorker, main: Callable[[], Any]) -> Any:
    async def go() -> Any:
        try:
            return await main()
        finally:
            await worker.aclose()
    return asyncio.run(go())


# ---- the worker ----------------------------------------------------------------------


def test_attempts_sent_ahead_each_get_their_own_result_and_logs() -> None:
    worker = pipelined(depth=9)
    logs: list[tuple[int, str]] = []
    script = "console.log('n=' + context.payload.n); return context.payload.n * 10;"

    async def main() -> list[AttemptResult]:
        await worker.start()
        return list(await asyncio.gather(*(attempt(worker, script, n, logs=logs)
                                           for n in range(9))))

    results = run_on(worker, main)
    assert [(r.outcome, r.result) for r in results] == [("succeeded", n * 10) for n in range(9)]
    assert sorted(logs) == [(n, f"n={n}") for n in range(9)]


def test_more_attempts_than_the_depth_at_once_is_refused() -> None:
    worker = pipelined(depth=2)

    async def main() -> None:
        await worker.start()
        first = asyncio.ensure_future(attempt(worker, "return 1"))
        second = asyncio.ensure_future(attempt(worker, "return 2"))
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="up to 2 attempts"):
            await attempt(worker, "return 3")
        with pytest.raises(RuntimeError, match="check alone"):
            await worker.check_syntax("return 1", 1, 1)
        assert [r.result for r in await asyncio.gather(first, second)] == [1, 2]

    run_on(worker, main)


def test_sending_ahead_needs_a_loop_that_keeps_listening() -> None:
    with pytest.raises(ValueError, match="keeps listening"):
        ScriptWorker(depth=2)
    with pytest.raises(ValueError):
        ScriptWorker(keep_listening=True, depth=0)


def test_a_spinning_attempt_ends_only_itself_and_the_deadlines_behind_it_start_late() -> None:
    """The spinner's deadline kills its process; the attempts sent behind it had not
    started, so they run in a fresh process with their whole time."""
    worker = pipelined()
    deadlines = Deadlines()

    async def main() -> list[AttemptResult]:
        await worker.start()
        spin = asyncio.ensure_future(attempt(worker, "while (true) {}", 0,
                                             deadline=deadlines.arm("spin", 0.4)))
        await asyncio.sleep(0)
        behind = [asyncio.ensure_future(attempt(worker, f"return {n};", n,
                                                deadline=deadlines.arm(f"b{n}", 0.4)))
                  for n in (1, 2)]
        await asyncio.sleep(0.2)
        assert deadlines.armed == ["spin"]  # those behind have not started
        return [await spin, *await asyncio.gather(*behind)]

    started = time.monotonic()
    spin, *behind = run_on(worker, main)
    assert spin.outcome == "timeout"
    assert [(r.outcome, r.result) for r in behind] == [("succeeded", 1), ("succeeded", 2)]
    assert deadlines.armed[0] == "spin"
    assert sorted(deadlines.armed[1:]) == ["b1", "b2"]
    assert time.monotonic() - started < 10


def test_a_stalled_attempt_waits_for_its_deadline_while_those_behind_it_run() -> None:
    """Nothing can settle the script: it reports it, its process is replaced at once,
    and it ends ``timeout`` at its deadline; the attempts behind it run meanwhile."""
    worker = pipelined()
    deadlines = Deadlines()
    stalls: list[int] = []

    async def main() -> tuple[AttemptResult, list[AttemptResult], float, float]:
        await worker.start()
        began = time.monotonic()
        stalled = asyncio.ensure_future(attempt(
            worker, "await new Promise(() => {});", 0, stalls=stalls,
            deadline=deadlines.arm("stalled", 1.5)))
        await asyncio.sleep(0)
        behind = await asyncio.gather(*(attempt(worker, f"return {n};", n,
                                                deadline=deadlines.arm(f"b{n}", 5))
                                        for n in (1, 2)))
        behind_at = time.monotonic() - began
        return await stalled, list(behind), behind_at, time.monotonic() - began

    stalled, behind, behind_at, stalled_at = run_on(worker, main)
    assert stalls == [0]
    assert stalled.outcome == "timeout"
    assert [(r.outcome, r.result) for r in behind] == [("succeeded", 1), ("succeeded", 2)]
    assert behind_at < 1.5 <= stalled_at  # they did not wait for the stalled one's end


def test_an_attempt_behind_one_whose_process_dies_runs_in_a_fresh_one() -> None:
    worker = pipelined()

    async def main() -> tuple[AttemptResult, list[AttemptResult]]:
        await worker.start()
        logs: list[tuple[int, str]] = []
        dying = asyncio.ensure_future(attempt(
            worker, "console.log('spinning'); while (true) {}", 0, logs=logs))
        await asyncio.sleep(0)
        behind = [asyncio.ensure_future(attempt(worker, f"return {n};", n)) for n in (1, 2)]
        while not logs:
            await asyncio.sleep(0.01)
        killer = threading.Thread(target=worker.kill)  # as if the process died
        killer.start()
        result = await dying
        killer.join()
        return result, list(await asyncio.gather(*behind))

    dying, behind = run_on(worker, main)
    assert (dying.outcome, dying.error_name) == ("crash", "WorkerDied")
    assert [(r.outcome, r.result) for r in behind] == [("succeeded", 1), ("succeeded", 2)]


def test_cancelling_an_attempt_that_has_not_started_ends_only_it() -> None:
    """The attempt ahead finishes; the cancelled one never reports (its process is
    replaced when its turn comes); the one after it runs."""
    worker = pipelined()
    logs: list[tuple[int, str]] = []

    async def main() -> tuple[AttemptResult, AttemptResult]:
        await worker.start()
        slow = "let n = 0; for (let i = 0; i < 3e6; i++) n += i; return 'ahead';"
        ahead = asyncio.ensure_future(attempt(worker, slow, 0, logs=logs))
        await asyncio.sleep(0)
        doomed = asyncio.ensure_future(attempt(
            worker, "console.log('ran'); return 'doomed';", 1, logs=logs))
        await asyncio.sleep(0)
        after = asyncio.ensure_future(attempt(worker, "return 'after';", 2, logs=logs))
        await asyncio.sleep(0.01)
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        return await ahead, await after

    ahead, after = run_on(worker, main)
    assert (ahead.outcome, ahead.result) == ("succeeded", "ahead")
    assert (after.outcome, after.result) == ("succeeded", "after")
    assert (1, "ran") not in logs


# ---- the lab -------------------------------------------------------------------------


@pytest.mark.parametrize(("script", "depth"), [
    ("throw new Error('x');", PIPELINE_DEPTH),
    ("return context.payload.client;", PIPELINE_DEPTH),
    ("return await services.http.request({url: 'http://x/'});", 1),
    ("return arguments[2];", 1),
    ("return eval('serv' + 'ices');", 1),
    ("return s\\u0065rvices;", 1),
])
def test_a_lab_sends_attempts_ahead_only_when_no_script_can_reach_services(
        script: str, depth: int) -> None:
    doc = (f'<step id="a"><script>return 1;</script></step>'
           f'<step id="b"><script>{script}</script></step>')
    assert pipeline_depth(wm.parse(doc)) == depth
    assert reach_of(script).services == (depth == 1)


STALLING = ('<step id="s" retry="3" retry-delay="1s" timeout="5s"><script>'
            'if (context.payload.client % 3 === 0) await new Promise(() => {});'
            'throw new Error("x" + context.payload.client);</script></step>')


def test_a_pipelined_lab_with_stalled_scripts_is_deterministic() -> None:
    """Every third client's script waits for a promise nothing settles: its worker's
    process is replaced and its attempts end at their timeouts, holding their places
    as a script waiting on the clock does (spec §11); the attempts sent behind them run
    in the fresh process. The same seed gives the same lab."""
    first = wm.lab(STALLING, clients=30, seed=4, sample=0)
    second = wm.lab(STALLING, clients=30, seed=4, sample=0)
    assert first.stalls == second.stalls == 0
    for a, b in zip(first.runs, second.runs, strict=True):
        assert [(x.outcome, x.started_at, x.ended_at) for x in a.steps["s"].attempts] == \
            [(x.outcome, x.started_at, x.ended_at) for x in b.steps["s"].attempts]
    for n, run in enumerate(first.runs):
        outcomes = {x.outcome for x in run.steps["s"].attempts}
        assert outcomes == ({"timeout"} if n % 3 == 0 else {"threw"})


def test_a_spinning_client_in_a_pipelined_lab_ends_only_its_own_attempts() -> None:
    """A misbehaving script ends its own attempt, never another client's: the attempts
    sent behind the spinner run in a fresh process, none of them times out."""
    doc = ('<step id="s" retry="2" retry-delay="1s" timeout="3s"><script>'
           'if (context.payload.client === 0) while (true) {}'
           'throw new Error("x");</script></step>')
    result = wm.lab(doc, clients=12, seed=2, sample=0)
    assert {x.outcome for x in result.runs[0].steps["s"].attempts} == {"timeout"}
    for run in result.runs[1:]:
        assert {x.outcome for x in run.steps["s"].attempts} == {"threw"}


def test_sending_attempts_ahead_changes_nothing_a_client_sees(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same lab with one attempt per worker at a time and with attempts sent ahead:
    the same outcomes, times, errors and console lines for every client."""
    doc = ('<step id="s" retry="4" retry-delay="2s" retry-backoff="exponential"><script>'
           'console.log("client " + context.payload.client);'
           'if (context.payload.client % 4 === 1) return context.payload.client;'
           'throw new Error("x" + context.payload.client);</script></step>')

    def seen(result: Any) -> list[Any]:
        return [[(a.outcome, a.started_at, a.ended_at, a.error, a.result, a.logs)
                 for a in run.steps["s"].attempts] for run in result.runs]

    sent_ahead = wm.lab(doc, clients=40, seed=9, sample=0)
    monkeypatch.setattr(labclock, "PIPELINE_DEPTH", 1)
    one_at_a_time = wm.lab(doc, clients=40, seed=9, sample=0)
    assert seen(sent_ahead) == seen(one_at_a_time)
    assert sent_ahead.attempts == one_at_a_time.attempts == 10 * 1 + 30 * 4


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux's scheduling policies")
def test_a_labs_workers_are_batch_work_and_a_plain_worker_is_not() -> None:
    """A lab's worker processes (spec §4.5, §11) never preempt the kernel that feeds
    them (``transport.as_batch_work``), also once restarted after a kill; a plain run's
    worker keeps the ordinary policy (its one attempt is what the user waits for)."""
    pool = LabPool(1, random.Random(0), depth=2)

    async def main() -> tuple[int, int]:
        await pool.warm()
        (worker,) = pool.idle
        assert worker.pid is not None
        first = os.sched_getscheduler(worker.pid)
        worker.kill()
        await worker.start()
        assert worker.pid is not None
        again = os.sched_getscheduler(worker.pid)
        await pool.aclose()
        return first, again

    assert asyncio.run(main()) == (os.SCHED_BATCH, os.SCHED_BATCH)
    plain = ScriptWorker()
    asyncio.run(plain.start())
    try:
        assert plain.pid is not None
        assert os.sched_getscheduler(plain.pid) == os.SCHED_OTHER
    finally:
        plain.kill()



def test_a_pool_that_sends_ahead_gives_free_places_at_once() -> None:
    """spec §11: with attempts sent ahead no script can reach ``services``, so which
    client runs first changes nothing: a client takes a free place the moment it asks,
    without waiting for a settled step, and otherwise queues in the order it asked."""
    pool = LabPool(1, random.Random(0), depth=2)

    async def main() -> list[str]:
        await pool.warm()
        a, b, c, d = (pool.worker() for _ in range(4))
        await a.__aenter__()  # returns at once: no settled step ever ran
        await b.__aenter__()
        given: list[str] = []
        waiting = {name: asyncio.ensure_future(lease.__aenter__())
                   for name, lease in (("c", c), ("d", d))}
        for name, fut in waiting.items():
            fut.add_done_callback(lambda _, name=name: given.append(name))
        await asyncio.sleep(0)
        assert given == []  # both places are taken
        assert not pool.settle()  # nothing for a settled step to give
        await a.__aexit__(None, None, None)
        for _ in range(3):  # the request's future, its task, the task's callback
            await asyncio.sleep(0)
        assert given == ["c"]  # the place given back goes to the first to ask
        await b.__aexit__(None, None, None)
        await asyncio.gather(*waiting.values())
        for lease in (c, d):
            await lease.__aexit__(None, None, None)
        await pool.aclose()
        return given

    assert asyncio.run(main()) == ["c", "d"]


def test_a_pool_of_one_attempt_per_worker_gives_places_at_the_settled_step() -> None:
    """spec §11: scripts that may call ``services`` meet the server and the clock, so
    the order of clients is the seed's: a request waits for the next settled step even
    with a place free."""
    pool = LabPool(1, random.Random(0), depth=1)

    async def main() -> None:
        await pool.warm()
        lease = pool.worker()
        asked = asyncio.ensure_future(lease.__aenter__())
        await asyncio.sleep(0)
        assert not asked.done()
        assert pool.settle()
        await asyncio.sleep(0)
        assert asked.done()
        await lease.__aexit__(None, None, None)
        await pool.aclose()

    asyncio.run(main())
