"""The engine with real scripts in the real worker (spec §3.2–§3.6, §4.4, §4.5, §5.1)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

import woml_magic as wm
from woml_magic.events import AttemptFinished, AttemptStarted, Event, WaitScheduled
from woml_magic.model import idempotency_key

CLOCKS = ["simulated", "real"]


def step(body: str, *, sid: str = "s", attrs: str = "") -> str:
    return f'<step id="{sid}" {attrs}><script>{body}</script></step>'


def outcomes(run: wm.Run, sid: str = "s") -> list[str]:
    return [a.outcome for a in run.steps[sid].attempts]


# -- spec §3.2: outcome classes ---------------------------------------------------------

FAIL_CLOSED_CASES = [
    ("timeout", 'while (true) {}', 'timeout="300ms"'),
    ("timeout", 'await services.sleep("1ms"); for (;;) {}', 'timeout="300ms"'),
    ("timeout", "await new Promise(() => {});", 'timeout="300ms"'),
    ("invalid-json", "return NaN;", ""),
    ("invalid-json", "return {a: [1, Infinity]};", ""),
    ("invalid-json", "return 10n;", ""),
    ("invalid-json", "return () => 1;", ""),
    ("invalid-json", "return Symbol('x');", ""),
    ("invalid-json", "return new Map();", ""),
    ("invalid-json", "return new Set([1]);", ""),
    ("invalid-json", "const a = {}; a.self = a; return a;", ""),
    ("invalid-json", "return '\\ud800';", ""),
    ("oversized", "return 'x'.repeat(300 * 1024);", ""),
    ("crash", "const a = []; while (true) a.push(new Array(1e6).fill(1.5));", ""),
    ("crash", "const parts = []; while (true) parts.push('x'.repeat(1e5) + parts.length);", ""),
    ("crash", "const m = {}; for (let i = 0; ; i++) m['k' + i] = {i, a: [i, i]};", ""),
    ("crash", "try { new Array(2**27).fill(1.5); } catch (e) {} return 1;", ""),
]


@pytest.mark.parametrize(("expected", "body", "attrs"), FAIL_CLOSED_CASES)
def test_fail_closed_outcomes_run_exactly_one_attempt(expected: str, body: str, attrs: str) -> None:
    """spec §3.2: only `threw` retries; every other failure fails closed at once."""
    run = wm.run(step(body, attrs=f'retry="5" {attrs}'), clock="simulated")
    assert outcomes(run) == [expected]
    assert run.steps["s"].status == "failed-closed"
    assert run.status == "failed"
    attempt = run.steps["s"].attempts[0]
    assert attempt.error is not None
    assert "not retried" in attempt.explanation
    # spec §3.2: after any fail-closed outcome the next run works normally.
    again = wm.run(step("return 1;"), clock="simulated")
    assert again.steps["s"].result == 1


def test_invalid_json_names_the_path() -> None:
    """spec §3.3: the message names the path of the bad value."""
    run = wm.run(step("return {items: [0, 1, 2, {amount: NaN}]};"), clock="simulated")
    error = run.steps["s"].attempts[0].error
    assert error is not None
    assert "result.items[3].amount is NaN" in error.message


def test_sleep_past_the_timeout_ends_timeout_at_once_on_the_simulated_clock() -> None:
    """spec §5.1: `await services.sleep("1h")` with `timeout="30s"` ends `timeout` at once."""
    wall = time.monotonic()
    run = wm.run(step('await services.sleep("1h"); return 1;', attrs='timeout="30s" retry="3"'),
                 clock="simulated")
    assert time.monotonic() - wall < 10
    attempt = run.steps["s"].attempts[0]
    assert outcomes(run) == ["timeout"]
    assert attempt.ended_at is not None
    assert 30 <= attempt.ended_at - attempt.started_at < 31


def test_a_worker_killed_from_outside_is_a_crash() -> None:
    """spec §3.2: the worker process died → `crash`, fail closed."""
    pids: list[int] = []

    def kill_worker(event: Event) -> None:
        if isinstance(event, AttemptStarted):
            threading.Timer(0.3, lambda: os.kill(pids[0], signal.SIGKILL)).start()

    from woml_magic.api import default_pool

    async def main() -> wm.Run:
        pool = default_pool()
        async with pool.worker() as w:
            await w.start()
            assert w.pid is not None
            pids.append(w.pid)
        return await wm.run_async(step("while (true) {}", attrs='retry="3" timeout="20s"'),
                                  clock="real", sinks=[kill_worker])

    run = asyncio.run(main())
    assert outcomes(run) == ["crash"]
    assert "died" in (run.steps["s"].attempts[0].error or wm.AttemptError("", "")).message
    assert wm.run(step("return 2;"), clock="simulated").steps["s"].result == 2


# -- spec §3.1 / §3.2: retries -------------------------------------------------------------

@pytest.mark.parametrize("clock", CLOCKS)
def test_threw_retries_on_schedule_and_then_succeeds(clock: str) -> None:
    body = "if (attempt.number < 3) throw new Error('flaky ' + attempt.number); return 'ok';"
    attrs = 'retry="4" retry-backoff="exponential" retry-delay="100ms"'
    events: list[Event] = []
    run = wm.run(step(body, attrs=attrs), clock=clock, sinks=[events.append])
    sr = run.steps["s"]
    assert outcomes(run) == ["threw", "threw", "succeeded"]
    assert sr.status == "succeeded"
    assert sr.result == "ok"
    waits = [e.seconds for e in events if isinstance(e, WaitScheduled)]
    assert waits == [0.1, 0.2]
    a1, a2, a3 = sr.attempts
    assert a1.ended_at is not None
    assert a2.ended_at is not None
    slack = 0.02 if clock == "simulated" else 0.2  # real waits may overshoot on a busy machine
    assert 0.1 <= a2.started_at - a1.ended_at <= 0.1 + slack
    assert 0.2 <= a3.started_at - a2.ended_at <= 0.2 + slack
    assert sr.waits[0] == pytest.approx(0.1, abs=slack)
    assert sr.waits[1] == pytest.approx(0.2, abs=slack)
    assert "retries after waiting 100ms" in a1.explanation


@pytest.mark.parametrize("clock", CLOCKS)
def test_exhausted_retries_fail_the_step_and_later_steps_do_not_run(clock: str) -> None:
    doc = (
        "<workflow id='wf'>"
        + step("throw new TypeError('nope');", sid="a", attrs='retry="2" retry-delay="50ms"')
        + step("return 1;", sid="b")
        + "</workflow>"
    )
    run = wm.run(doc, clock=clock)
    assert outcomes(run, "a") == ["threw", "threw"]
    assert run.steps["a"].status == "failed"
    assert run.steps["b"].status == "not-run"
    assert run.status == "failed"
    last = run.steps["a"].attempts[-1]
    assert last.error is not None
    assert last.error.name == "TypeError"
    assert "last allowed attempt" in last.explanation


def test_simulated_waits_take_no_real_time() -> None:
    wall = time.monotonic()
    run = wm.run(step("throw new Error('x');", attrs='retry="10" retry-backoff="exponential" '
                                                     'retry-delay="1s" retry-max-delay="30s"'),
                 clock="simulated")
    assert time.monotonic() - wall < 20
    assert [round(w) for w in run.steps["s"].waits] == [1, 2, 4, 8, 16, 30, 30, 30, 30]


def test_real_clock_waits_really_elapse() -> None:
    """spec §5.1: retry 3, fixed 200ms takes at least 0.4 s of wall time."""
    wall = time.monotonic()
    run = wm.run(step("throw new Error('x');", attrs='retry="3" retry-delay="200ms"'),
                 clock="real")
    assert time.monotonic() - wall >= 0.4
    assert len(run.steps["s"].attempts) == 3


# -- spec §2.3: compile before run -----------------------------------------------------------

def test_a_javascript_syntax_error_stops_everything_before_it_runs() -> None:
    doc = "<workflow id='wf'>\n" + step("return 1;", sid="a") + "\n" + \
        '<step id="b"><script>\nconst x = 1;\nreturn x +;\n</script></step>\n</workflow>'
    events: list[Event] = []
    with pytest.raises(wm.WomlSyntaxError) as info:
        wm.run(doc, clock="simulated", sinks=[events.append])
    assert info.value.line == 5
    assert "step 'b'" in info.value.message
    assert events == []


# -- spec §3.4–§3.6: what a script sees -----------------------------------------------------

@pytest.mark.parametrize("clock", CLOCKS)
def test_attempt_and_context_objects(clock: str) -> None:
    doc = (
        "<workflow id='orders'>"
        + step("return 41;", sid="first")
        + step(
            "if (attempt.number === 1) throw new Error('again');"
            "return {n: attempt.number, max: attempt.maxAttempts, key: attempt.idempotencyKey,"
            " payload: context.payload, prev: context.steps.first, run: context.run,"
            " frozen: Object.isFrozen(attempt) && Object.isFrozen(context)};",
            sid="second",
            attrs='retry="2" retry-delay="10ms"',
        )
        + "</workflow>"
    )
    run = wm.run(doc, clock=clock, payload={"order": 7}, run_id="run-1")
    result = run.steps["second"].result
    assert result == {
        "n": 2, "max": 2, "key": idempotency_key("run-1", "second"),
        "payload": {"order": 7}, "prev": 41, "run": {"id": "run-1", "workflow": "orders"},
        "frozen": True,
    }


def test_idempotency_key_follows_the_spec_formula() -> None:
    """spec §3.5: uuid5 of f"{run_id}/{step_id}" in the WOML namespace."""
    namespace = uuid.uuid5(uuid.NAMESPACE_URL, "urn:woml:idempotency-key")
    assert str(namespace) == "b7c33995-d21b-55a8-81d6-82ec4d685111"
    assert idempotency_key("run-1", "charge") == "4e3b1916-7901-53c2-9575-f70651305d8b"
    body = "if (attempt.number < 3) throw new Error('x'); return attempt.idempotencyKey;"
    run = wm.run(step(body, sid="charge", attrs='retry="3" retry-delay="0s"'),
                 clock="simulated", run_id="run-1")
    keys = {a.idempotency_key for a in run.steps["charge"].attempts}
    assert keys == {"4e3b1916-7901-53c2-9575-f70651305d8b"}
    assert run.steps["charge"].result == "4e3b1916-7901-53c2-9575-f70651305d8b"
    other = wm.run(step(body, sid="charge", attrs='retry="3" retry-delay="0s"'),
                   clock="simulated")
    assert other.steps["charge"].idempotency_key != run.steps["charge"].idempotency_key


def test_errors_carry_name_message_and_cell_line() -> None:
    doc = ('<step id="s">\n<script>\nconst a = 1;\nthrow new RangeError("too far");\n'
           "</script>\n</step>")
    run = wm.run(doc, clock="simulated")
    error = run.steps["s"].attempts[0].error
    assert error is not None
    assert (error.name, error.message, error.line) == ("RangeError", "too far", 4)


def test_console_output_is_captured_per_attempt() -> None:
    body = "console.log('try', attempt.number); console.warn({a: 1});" \
           "if (attempt.number === 1) throw new Error('x'); return null;"
    run = wm.run(step(body, attrs='retry="2" retry-delay="0s"'), clock="simulated")
    a1, a2 = run.steps["s"].attempts
    assert a1.logs[0] == "try 1"
    assert "[warn]" in a1.logs[1]
    assert a2.logs[0] == "try 2"


@pytest.mark.parametrize(("body", "expected"), [
    ("const x = 1;", None),
    ("return undefined;", None),
    ("return new Date(Date.UTC(2020, 0, 2));", "2020-01-02T00:00:00.000Z"),
    ("return {a: [1, 'two', true, null, {b: 2.5}]};", {"a": [1, "two", True, None, {"b": 2.5}]}),
])
def test_results_are_json_values(body: str, expected: object) -> None:
    """spec §3.3: top-level undefined → null; toJSON values are converted."""
    run = wm.run(step(body), clock="simulated")
    assert run.steps["s"].status == "succeeded"
    assert run.steps["s"].result == expected


def test_simulated_clock_drives_date_now_in_scripts() -> None:
    """spec §4.4: on the simulated clock Date.now() and new Date() read the run's clock."""
    body = "const a = Date.now(); await services.sleep('1h'); const b = new Date().getTime();" \
           "return b - a;"
    run = wm.run(step(body, attrs='timeout="2h"'), clock="simulated")
    assert 3600_000 <= run.steps["s"].result < 3600_000 + 5_000


# -- cancellation (spec §3.2, §7) ----------------------------------------------------------

def test_start_cancel_ends_the_running_attempt_cancelled() -> None:
    handle = wm.start(step("while (true) {}", attrs='retry="3" timeout="60s"'), clock="real")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        sr = handle.run.steps["s"]
        if sr.attempts and sr.attempts[0].outcome == "running":
            break
        time.sleep(0.02)
    handle.cancel()
    run = handle.result(timeout=10)
    assert outcomes(run) == ["cancelled"]
    assert handle.run.steps["s"].status == "failed-closed"
    assert run.status == "failed"
    assert handle.done()


def test_cancelling_run_async_records_cancelled_then_raises() -> None:
    events: list[Event] = []

    async def main() -> None:
        task = asyncio.ensure_future(wm.run_async(step("while (true) {}", attrs='timeout="60s"'),
                                                  clock="real", sinks=[events.append]))
        while not any(isinstance(e, AttemptStarted) for e in events):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    finished = [e for e in events if isinstance(e, AttemptFinished)]
    assert [e.outcome for e in finished] == ["cancelled"]


def test_wm_run_works_inside_a_running_event_loop() -> None:
    """spec §7: wm.run works inside a running loop (a notebook cell)."""

    async def main() -> object:
        return wm.run(step("return 5;"), clock="simulated").steps["s"].result

    assert asyncio.run(main()) == 5


def test_wm_run_inside_a_running_loop_never_re_enters_it() -> None:
    """spec §6.3: a run never re-enters the caller's loop (re-entry wedges ipykernel
    under Run All): work queued on that loop before the call runs only after it."""
    order: list[str] = []

    async def main() -> None:
        asyncio.get_running_loop().call_soon(order.append, "queued callback")
        run = wm.run(step("return 5;"), clock="simulated")
        order.append(f"run {run.status}")
        await asyncio.sleep(0)

    asyncio.run(main())
    assert order == ["run succeeded", "queued callback"]


# -- spec §4.5: no script can hurt the kernel -----------------------------------------------

CHAOS = [
    ("timeout", "while (true) {}", 'timeout="100ms"'),
    ("invalid-json", "return {a: NaN};", ""),
    ("oversized", "return 'x'.repeat(300 * 1024);", ""),
    ("crash", "const a = []; while (true) a.push(new Array(1e6).fill(1.5));", ""),
    ("crash", "try { new Array(2**27).fill(1.5); } catch (e) {} return 1;", ""),
    ("threw", "throw new Error('x');", ""),
]


@pytest.mark.slow
def test_chaos_leaves_the_kernel_small_and_no_worker_behind() -> None:
    """Every bad class 20 times: parent RSS grows < 50 MB; no stray worker processes."""
    from conftest import child_pids, rss_mb

    from woml_magic.api import default_pool

    wm.run(step("return 1;"), clock="simulated")  # warm up imports and the worker
    before = rss_mb()
    for _ in range(20):
        for expected, body, attrs in CHAOS:
            run = wm.run(step(body, attrs=attrs), clock="simulated")
            assert outcomes(run) == [expected]
            assert len(child_pids()) <= 2  # at most the pool's warm workers
    assert rss_mb() - before < 50
    asyncio.run(default_pool().aclose())
    assert child_pids() == set()


def test_a_script_that_runs_code_while_compiling_is_stopped_by_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """spec §2.3/§4.5: closing the function early cannot hang the compile step."""
    from woml_magic.engine import check

    monkeypatch.setattr(check, "CHECK_SECONDS", 1.0)
    with pytest.raises(wm.WomlSyntaxError, match="did not finish within 1s"):
        wm.run(step("}), (() => { while (true) {} })(), (async function () {"),
               clock="simulated")
    assert wm.run(step("return 3;"), clock="simulated").steps["s"].result == 3


def test_ctrl_c_during_a_blocking_run_ends_the_attempt_interrupted_then_reraises(
    tmp_path: Path,
) -> None:
    """spec §6.1/§7: SIGINT during wm.run → attempt `interrupted`, worker gone, then
    KeyboardInterrupt; the process stays usable for the next run."""
    code = (
        # As in a terminal, Ctrl-C raises KeyboardInterrupt: a child started from a
        # background job inherits SIGINT ignored, and Python then keeps it ignored.
        "import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import sys, woml_magic as wm\n"
        "events = []\n"
        "doc = '<step id=\"s\" retry=\"3\" timeout=\"60s\"><script>"
        "console.log(\"go\"); while (true) {}</script></step>'\n"
        "def ready(e):\n"
        "    events.append(e)\n"
        "    if e.kind == 'log': print('RUNNING', flush=True)\n"
        "try:\n"
        "    wm.run(doc, clock='real', sinks=[ready])\n"
        "except KeyboardInterrupt:\n"
        "    done = [e.outcome for e in events if e.kind == 'attempt-finished']\n"
        "    print('INTERRUPTED', done, flush=True)\n"
        "print('NEXT', wm.run(doc.replace('while (true) {}', 'return 7;'), clock='simulated')"
        ".steps['s'].result, flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "RUNNING"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert "INTERRUPTED ['interrupted']" in out
    assert "NEXT 7" in out
    assert proc.returncode == 0
    assert time.monotonic() - sent < 10


def test_cancelling_during_a_wait_says_why_the_step_failed_closed() -> None:
    """spec §3.2: a cancel between attempts retries nothing; the step carries the reason."""
    from woml_magic.timeline import render_text

    handle = wm.start(step("throw new Error('x');", attrs='retry="3" retry-delay="30s"'),
                      clock="real")
    deadline = time.monotonic() + 10
    while handle.run.steps["s"].status != "waiting" and time.monotonic() < deadline:
        time.sleep(0.02)
    handle.cancel()
    run = handle.result(timeout=10)
    sr = run.steps["s"]
    assert outcomes(run) == ["threw"]
    assert sr.status == "failed-closed"
    assert sr.reason == ("the run was cancelled during the wait before attempt 2; WOML does "
                         "not retry after that")
    assert sr.reason in render_text(run)


def test_a_script_that_compiled_is_not_compiled_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """spec §2.3: every script is checked before its run, once per text per process."""
    from woml_magic.engine import check_scripts
    from woml_magic.runtime import ScriptWorker
    from woml_magic.runtime.pool import WorkerPool

    checked: list[str] = []
    original = ScriptWorker.check_syntax

    async def counting(self: ScriptWorker, script: str, line: int, column: int) -> object:
        checked.append(script)
        return await original(self, script, line, column)

    monkeypatch.setattr(ScriptWorker, "check_syntax", counting)
    wf = wm.parse(step("return 1;"))
    broken = wm.parse(step("return 1 +;"))

    async def main() -> None:
        pool = WorkerPool()
        try:
            await check_scripts(wf, pool)
            await check_scripts(wf, pool)
            for _ in range(2):  # a script with an error is checked, and refused, each time
                with pytest.raises(wm.WomlSyntaxError):
                    await check_scripts(broken, pool)
        finally:
            await pool.aclose()

    asyncio.run(main())
    assert checked == ["return 1;", "return 1 +;", "return 1 +;"]


def test_one_recorder_ends_an_interrupted_attempt_on_either_engine() -> None:
    """spec §5.3, §9: what the attempt recorded that the run has not seen comes first (a
    dead Temporal worker's heartbeat), then each call in flight ends ``ambiguous``, then
    the attempt ``interrupted`` with §5.3's sentence as a typed error."""
    from woml_magic.engine.attempt import record_interrupted
    from woml_magic.events import AttemptError, CallFinished, CallStarted, RunStarted, StepStarted
    from woml_magic.parse import parse

    workflow = parse('<step id="charge" retry="2"><script>return 1;</script></step>')
    run = wm.Run(id="r", workflow=workflow, clock="simulated")
    seen: list[Event] = []

    def emit(event: Event) -> None:
        run.apply(event)
        seen.append(event)

    key = idempotency_key("r", "charge")
    emit(RunStarted(run_id="r", at=0.0, workflow_id=workflow.id))
    emit(StepStarted(run_id="r", at=0.0, step_id="charge", idempotency_key=key))
    emit(AttemptStarted(run_id="r", at=0.0, step_id="charge", number=1, idempotency_key=key))
    in_flight = CallStarted(run_id="r", at=0.2, step_id="charge", number=1, call_index=0,
                            name="pay", method="POST", url="http://127.0.0.1:9/charges")
    outcome = record_interrupted(run, workflow.steps[0], 1, 0.5, emit, who="the worker",
                                 recorded=[in_flight])
    assert outcome == "interrupted"
    assert [type(e).__name__ for e in seen[3:]] == [
        "CallStarted", "CallFinished", "AttemptFinished"]
    assert seen[3] is in_flight
    assert seen[4] == CallFinished(
        run_id="r", at=0.5, step_id="charge", number=1, call_index=0, name="pay",
        outcome="ambiguous", error="the worker stopped while the request was in flight; "
                                   "whether the server acted on it is unknown")
    finished = seen[5]
    assert isinstance(finished, AttemptFinished)
    assert (finished.at, finished.outcome) == (0.5, "interrupted")
    assert finished.error == AttemptError(
        "InterruptedError",
        "attempt 1 of charge was interrupted; whether its effects happened is unknown. Check "
        "the external system, then resume with --retry-interrupted to run it again with the "
        "same idempotency key.")
    attempt = run.steps["charge"].attempts[0]
    assert (attempt.outcome, attempt.error) == ("interrupted", finished.error)
    assert attempt.calls[0].outcome == "ambiguous"
