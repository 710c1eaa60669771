"""The script worker: real QuickJS in a real child process (spec §3.2-§3.6, §4.4, §4.5)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.metadata
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import quickjs

from woml_magic.errors import ServiceRejection
from woml_magic.limits import LIMIT_RANGES, Limits
from woml_magic.runtime import SERVICES, AttemptRequest, AttemptResult, ScriptWorker
from woml_magic.runtime._bytecode import ENV_SWITCH
from woml_magic.runtime.commands import step_reply
from woml_magic.runtime.protocol import CallMessage, StepCommand, check_shape
from woml_magic.runtime.transport import ChildProcess, Inbox, Received
from woml_magic.runtime.wrapper import FIRST_LINE, cell_position, wrap
from woml_magic.services.registry import SERVICE_NAMES

EPOCH_2001_MS = 978_307_200_000.0  # 2001-01-01T00:00:00Z
SCRIPT_LINE = 10
SCRIPT_COLUMN = 5
SMALL_MEMORY_MB = 16
SMALL_MEMORY = SMALL_MEMORY_MB * 1024 * 1024
INSTALLED_QUICKJS = importlib.metadata.version("quickjs-ng")


def request(script: str, now: float = EPOCH_2001_MS, **kw: Any) -> AttemptRequest:
    """An attempt of ``script``; keywords named as limits set the request's ``limits``."""
    limits = Limits(**{name: kw.pop(name) for name in list(kw) if name in LIMIT_RANGES})
    return AttemptRequest(
        script=script,
        script_line=SCRIPT_LINE,
        script_column=SCRIPT_COLUMN,
        context={
            "payload": {"amount": 5, "tags": ["a"]},
            "steps": {"s1": 1},
            "run": {"id": "r1", "workflow": "wf"},
        },
        attempt={"number": 2, "maxAttempts": 3, "idempotencyKey": "key-1"},
        now_ms=lambda: now,
        limits=limits,
        **kw,
    )


async def no_services(name: str, args: list[Any]) -> Any:
    raise AssertionError(f"unexpected service call {name}{args}")


def attempt(
    worker: ScriptWorker, script: str, services: Any = no_services, **kw: Any
) -> tuple[AttemptResult, list[tuple[str, str]]]:
    logs: list[tuple[str, str]] = []

    async def go() -> AttemptResult:
        return await worker.run_attempt(
            request(script, **kw), services, lambda lv, t: logs.append((lv, t))
        )

    return asyncio.run(go()), logs


def children() -> list[int]:
    """Live child processes of this process, from /proc."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module", params=["bytecode", "source"])
def worker(request: pytest.FixtureRequest) -> Iterator[ScriptWorker]:
    """A warm worker whose contexts get the prelude as bytecode or compile its source.

    Every test taking it runs both ways: the two must behave the same (``_bytecode.py``).
    The switch stays set while the worker lives, as a killed child is restarted.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_SWITCH, "1" if request.param == "bytecode" else "0")
        w = ScriptWorker()
        asyncio.run(w.start())
        if request.param == "bytecode" and w.prelude != "bytecode":
            asyncio.run(w.aclose())
            if INSTALLED_QUICKJS.split(".")[:2] != ["0", "17"]:  # the verified range
                pytest.skip(f"no prelude bytecode with quickjs-ng {INSTALLED_QUICKJS}, "
                            "outside the verified range")
            pytest.fail(f"the prelude bytecode is off on a verified quickjs-ng "
                        f"{INSTALLED_QUICKJS}: {w.prelude_reason}")
        assert w.prelude == request.param
        yield w
        asyncio.run(w.aclose())


# ---- results (spec §3.3) ----


def test_returned_json_value_succeeds_and_is_parsed(worker: ScriptWorker) -> None:
    result, _ = attempt(worker, 'return {a: [1, 2.5, "x", null, true], b: {c: -0}}')
    assert result.outcome == "succeeded"
    assert result.result == {"a": [1, 2.5, "x", None, True], "b": {"c": 0}}


def test_top_level_undefined_becomes_null(worker: ScriptWorker) -> None:
    result, _ = attempt(worker, "const x = 1;")
    assert (result.outcome, result.result) == ("succeeded", None)


def test_values_with_toJSON_are_converted_first(worker: ScriptWorker) -> None:
    result, _ = attempt(worker, "return {when: new Date(0), custom: {toJSON() { return [7]; }}}")
    assert result.result == {"when": "1970-01-01T00:00:00.000Z", "custom": [7]}


def test_proto_key_is_kept_as_plain_data(worker: ScriptWorker) -> None:
    result, _ = attempt(worker, 'return JSON.parse(\'{"__proto__": {"x": 1}}\')')
    assert result.result == {"__proto__": {"x": 1}}


INVALID = [
    ("return {items: [0, 0, 0, {amount: NaN}]}", "result.items[3].amount is NaN"),
    ("return {x: Infinity}", "result.x is Infinity"),
    ("return [-Infinity]", "result[0] is -Infinity"),
    ("return {n: 10n}", "result.n is a BigInt (10n)"),
    ("return {f() {}}", "result.f is a function"),
    ("return {s: Symbol('q')}", "result.s is a Symbol"),
    ("return {m: new Map()}", "result.m is a Map"),
    ("return new Set([1])", "result is a Set"),
    ("return {bytes: new Uint8Array(2)}", "result.bytes is a Uint8Array"),
    (
        "class Money {}; return {price: new Money()}",
        "result.price is an instance of Money, not a plain object",
    ),
    ("const o = {a: {}}; o.a.back = o; return o", "result.a.back is a cycle back to result"),
    ("return {a: [1, undefined]}", "result.a[1] is undefined"),
    ("return {'odd key': {u: undefined}}", 'result["odd key"].u is undefined'),
    ("return {t: 'ok\\uD800'}", "result.t contains a lone surrogate (U+D800) at index 2"),
    ("return {p: Promise.resolve(1)}", "result.p is a Promise (did you forget `await`?)"),
]


@pytest.mark.parametrize(("script", "message"), INVALID)
def test_non_json_results_are_invalid_json_naming_the_path(
    worker: ScriptWorker, script: str, message: str
) -> None:
    result, _ = attempt(worker, script)
    assert (result.outcome, result.error_message) == ("invalid-json", message)


def test_result_over_the_byte_limit_is_oversized_naming_size_and_limit(
    worker: ScriptWorker,
) -> None:
    # "é" is 2 UTF-8 bytes: 600 of them plus quotes is 1202 bytes, over a 1000-byte limit.
    result, _ = attempt(worker, "return 'é'.repeat(600)", max_result_bytes=1000)
    assert result.outcome == "oversized"
    assert result.error_message == "the result's JSON text is 1202 bytes; the limit is 1000 bytes"
    at_limit, _ = attempt(worker, "return 'é'.repeat(499)", max_result_bytes=1000)
    assert at_limit.outcome == "succeeded"


# ---- thrown errors and line mapping (spec §3.2) ----


def test_throw_on_script_line_3_maps_to_cell_line_plus_2(worker: ScriptWorker) -> None:
    result, _ = attempt(worker, "const a = 1;\nconst b = 2;\nthrow new TypeError('bad ' + a);")
    assert (result.outcome, result.error_name, result.error_message) == (
        "threw",
        "TypeError",
        "bad 1",
    )
    assert result.error_line == SCRIPT_LINE + 2


def test_error_thrown_in_a_nested_helper_maps_to_its_line(worker: ScriptWorker) -> None:
    script = "function check(x) {\n  if (!x) throw new RangeError('no x');\n}\ncheck(0);"
    result, _ = attempt(worker, script)
    assert (result.error_name, result.error_line) == ("RangeError", SCRIPT_LINE + 1)


def test_custom_error_name_is_reported(worker: ScriptWorker) -> None:
    script = (
        "class PaymentError extends Error {\n"
        "  constructor(m) { super(m); this.name = 'PaymentError'; } }\n"
        "throw new PaymentError('declined');"
    )
    result, _ = attempt(worker, script)
    assert (result.error_name, result.error_message, result.error_line) == (
        "PaymentError",
        "declined",
        SCRIPT_LINE + 2,  # the `throw` line, not the constructor's `super(m)` line
    )


def test_rejected_promise_is_threw(worker: ScriptWorker) -> None:
    result, _ = attempt(
        worker, "await Promise.resolve();\nreturn Promise.reject(new Error('later'));"
    )
    assert (result.outcome, result.error_message, result.error_line) == (
        "threw",
        "later",
        SCRIPT_LINE + 1,
    )


@pytest.mark.parametrize(
    ("script", "name", "message"),
    [
        ("throw 'boom'", "string", "boom"),
        ("throw 42", "number", "42"),
        ("throw {code: 7}", "object", '{"code":7}'),
    ],
)
def test_non_error_throws_are_named_by_their_type(
    worker: ScriptWorker, script: str, name: str, message: str
) -> None:
    result, _ = attempt(worker, script)
    assert (result.outcome, result.error_name, result.error_message) == ("threw", name, message)


def test_stack_overflow_is_threw_not_crash(worker: ScriptWorker) -> None:
    # Decision: QuickJS stops deep recursion cleanly with a RangeError; it is a script bug.
    result, _ = attempt(worker, "function f(n) { return f(n + 1) + 1; }\nreturn f(0);")
    assert (result.outcome, result.error_name) == ("threw", "RangeError")


def test_a_promise_nothing_can_settle_waits_for_the_engine_timeout(worker: ScriptWorker) -> None:
    """spec §3.2: a promise that never settles ends `timeout` — the kernel judges it."""
    logs: list[tuple[str, str]] = []

    async def go() -> None:
        job = asyncio.ensure_future(worker.run_attempt(
            request("await new Promise(() => {});"), no_services,
            lambda lv, t: logs.append((lv, t))))
        done, _ = await asyncio.wait({job}, timeout=0.5)
        assert not done  # still pending: only the engine's timeout can end it
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job

    asyncio.run(go())
    assert logs
    assert "nothing will settle" in logs[0][1]
    result, _ = attempt(worker, "return 1;")  # a fresh worker serves the next attempt
    assert result.result == 1


@pytest.mark.parametrize(
    "script",
    ["fetch('http://127.0.0.1/')", "setTimeout(() => 1, 1)", "require('fs')", "await import('fs')"],
)
def test_no_fetch_timers_or_module_loading(worker: ScriptWorker, script: str) -> None:
    result, _ = attempt(worker, script)
    assert result.outcome == "threw"
    assert result.error_name in {"ReferenceError", "TypeError"}


# ---- context, attempt, clock (spec §3.4, §3.6, §4.4) ----


def test_context_and_attempt_are_readable(worker: ScriptWorker) -> None:
    script = (
        "return [context.payload.amount, context.steps.s1, context.run.id, context.run.workflow,"
        " attempt.number, attempt.maxAttempts, attempt.idempotencyKey]"
    )
    result, _ = attempt(worker, script)
    assert result.result == [5, 1, "r1", "wf", 2, 3, "key-1"]


@pytest.mark.parametrize(
    "script",
    [
        "context.payload.amount = 6",
        "context.payload.tags.push('b')",
        "attempt.number = 1",
        "delete context.run.id",
        "context.extra = 1",
    ],
)
def test_context_and_attempt_are_deeply_frozen_and_writes_throw(
    worker: ScriptWorker, script: str
) -> None:
    # Decision: scripts run in strict mode, so writing to a frozen object throws a TypeError.
    result, _ = attempt(worker, script)
    assert (result.outcome, result.error_name, result.error_line) == (
        "threw",
        "TypeError",
        SCRIPT_LINE,
    )


# What a script can tell of its arguments: the same whichever way it reaches them (the
# worker builds `attempt`, `services` and `console` only for a script that can).
REACHED = ["object", 2, True, "function", "function", "function"]


@pytest.mark.parametrize(
    "script",
    [
        "return [typeof attempt, attempt.number, Object.isFrozen(services),"
        " typeof services.http.request, typeof services.secret, typeof console.log]",
        "const [c, a, s, k] = arguments;\n"
        "return [typeof a, a.number, Object.isFrozen(s), typeof s.http.request,"
        " typeof s.secret, typeof k.log]",
        "return eval('[typeof a' + 'ttempt, a' + 'ttempt.number, Object.isFrozen(s' +"
        " 'ervices), typeof s' + 'ervices.http.request, typeof s' + 'ervices.secret,"
        " typeof c' + 'onsole.log]')",
        "return [typeof \\u0061ttempt, \\u0061ttempt.number, Object.isFrozen(serv\\u0069ces),"
        " typeof serv\\u0069ces.http.request, typeof serv\\u0069ces.secret,"
        " typeof c\\u006fnsole.log]",
    ],
    ids=["by name", "through arguments", "through eval", "by escaped names"],
)
def test_a_script_finds_its_arguments_every_way_it_can_name_them(
    worker: ScriptWorker, script: str
) -> None:
    result, _ = attempt(worker, script)
    assert (result.outcome, result.result) == ("succeeded", REACHED)


def test_date_reads_the_runs_clock(worker: ScriptWorker) -> None:
    script = (
        "return [new Date().getUTCFullYear(), Date.now() - 978307200000 < 5000,"
        " typeof Date(), new Date(5).getTime()]"
    )
    result, _ = attempt(worker, script)
    assert result.result == [2001, True, "string", 5]


def test_date_follows_the_clock_sent_with_each_service_reply(worker: ScriptWorker) -> None:
    clock = [EPOCH_2001_MS]

    async def services(name: str, args: list[Any]) -> Any:
        clock[0] += 3_600_000.0  # the sleep advanced the run's clock by an hour
        return None

    logs: list[tuple[str, str]] = []

    async def go() -> AttemptResult:
        req = AttemptRequest(
            script=(
                "const a = Date.now(); await services.sleep('1h');"
                " return Math.round((Date.now() - a) / 60000);"
            ),
            script_line=1,
            script_column=1,
            context={},
            attempt={},
            now_ms=lambda: clock[0],
        )
        return await worker.run_attempt(req, services, lambda lv, t: logs.append((lv, t)))

    assert asyncio.run(go()).result == 60


# ---- console (spec §4.4) ----


def test_console_levels_and_browser_like_formatting(worker: ScriptWorker) -> None:
    script = (
        "console.log('a', 1, {b: [2]}, null, undefined); console.info('i');"
        " console.warn('w'); console.error(new TypeError('e'))"
    )
    result, logs = attempt(worker, script)
    assert result.outcome == "succeeded"
    assert logs == [
        ("log", 'a 1 {"b":[2]} null undefined'),
        ("info", "i"),
        ("warn", "w"),
        ("error", "TypeError: e"),
    ]


def test_console_output_is_capped_with_a_marker(worker: ScriptWorker) -> None:
    result, logs = attempt(
        worker, "for (let i = 0; i < 5000; i++) console.log('line ' + i); return 1"
    )
    assert result.outcome == "succeeded"
    assert len(logs) == 1001
    assert logs[999] == ("log", "line 999")
    assert logs[-1][0] == "warn"
    assert "truncated" in logs[-1][1]


# ---- services (spec §4.1, §4.4, §4.5) ----


def test_services_round_trip_with_json_args_and_results(worker: ScriptWorker) -> None:
    calls: list[tuple[str, list[Any]]] = []

    async def services(name: str, args: list[Any]) -> Any:
        calls.append((name, args))
        await asyncio.sleep(0)
        return {"status": 200, "data": {"echo": args[0]}} if name == "http.request" else None

    script = (
        "await services.sleep('2s');\n"
        "const r = await services.http.request("
        "{url: 'http://127.0.0.1:1/x', json: {n: 1}}, {name: 'c'});\n"
        "return r.data;"
    )
    result, _ = attempt(worker, script, services=services)
    assert result.result == {"echo": {"url": "http://127.0.0.1:1/x", "json": {"n": 1}}}
    assert calls == [
        ("sleep", ["2s"]),
        ("http.request", [{"url": "http://127.0.0.1:1/x", "json": {"n": 1}}, {"name": "c"}]),
    ]


def test_service_rejection_becomes_a_js_error_with_props(worker: ScriptWorker) -> None:
    async def services(name: str, args: list[Any]) -> Any:
        raise ServiceRejection(
            "HttpError",
            "POST /charges answered 503",
            {"status": 503, "data": {"e": 1}, "ambiguous": False},
        )

    script = (
        "try { await services.http.request({url: 'http://127.0.0.1:1/'}); } catch (e) {\n"
        "  return [e instanceof Error, e.name, e.message, e.status, e.data, e.ambiguous]; }"
    )
    result, _ = attempt(worker, script, services=services)
    assert result.result == [True, "HttpError", "POST /charges answered 503", 503, {"e": 1}, False]


def test_uncaught_service_rejection_reports_the_line_of_the_call(worker: ScriptWorker) -> None:
    async def services(name: str, args: list[Any]) -> Any:
        raise ServiceRejection("NetworkError", "connection refused")

    result, _ = attempt(
        worker,
        "const x = 1;\n\nawait services.http.request({url: 'http://127.0.0.1:1/'});",
        services=services,
    )
    assert (result.outcome, result.error_name, result.error_line) == (
        "threw",
        "NetworkError",
        SCRIPT_LINE + 2,
    )


def test_an_error_made_inside_a_lazy_prelude_part_maps_to_the_scripts_line(
    worker: ScriptWorker,
) -> None:
    # The services bridge is set up on first use; its own frames (here: the TypeError
    # for a BigInt argument) must never be read as script lines, even in a long script.
    script = "\n".join([f"const v{i} = {i};" for i in range(39)] + ["await services.sleep(10n);"])
    result, _ = attempt(worker, script)
    assert (result.outcome, result.error_name, result.error_line) == (
        "threw",
        "TypeError",
        SCRIPT_LINE + 39,
    )
    assert "arguments must be JSON values" in (result.error_message or "")


def test_a_failing_service_bridge_is_crash_and_the_worker_recovers(worker: ScriptWorker) -> None:
    async def services(name: str, args: list[Any]) -> Any:
        raise KeyError("journal gone")

    result, _ = attempt(worker, "await services.sleep('1s'); return 1", services=services)
    assert (result.outcome, result.error_name) == ("crash", "ServiceBridgeError")
    assert "KeyError" in (result.error_message or "")
    assert attempt(worker, "return 2")[0].result == 2


def test_service_calls_in_flight_are_cancelled_when_the_attempt_ends(worker: ScriptWorker) -> None:
    cancelled: list[str] = []

    async def services(name: str, args: list[Any]) -> Any:
        if name == "sleep":
            return None
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise

    # The awaited sleep is answered after the forgotten request's task has started.
    script = (
        "services.http.request({url: 'http://127.0.0.1:1/'});\n"
        "await services.sleep('1s');\n"
        "return 'left it';"
    )
    result, _ = attempt(worker, script, services=services)
    assert result.result == "left it"
    assert cancelled == ["http.request"]


# ---- out of memory is crash (spec §3.2) ----

BOMBS = {
    "array-fill": "let a = []; while (true) a.push(new Array(1000).fill(1.5));",
    "small-objects": "let a = []; while (true) a.push({x: 1, y: [1, 2]});",
    "string-doubling": "let s = 'x'; while (true) s = [s, s].join('');",
    "typed-arrays-2gb": "let a = []; while (true) a.push(new Uint8Array(2 ** 31 - 1));",
    "one-huge-array": "globalThis.q = new Array(2 ** 27).fill(1.5);",
}


@pytest.mark.parametrize("shape", sorted(BOMBS))
@pytest.mark.parametrize("caught", [False, True], ids=["uncaught", "caught-and-returned"])
def test_memory_bombs_are_crash_even_when_caught(
    worker: ScriptWorker, shape: str, caught: bool
) -> None:
    script = (
        f"try {{ {BOMBS[shape]} }} catch (e) {{ }}\nreturn 'survived';" if caught else BOMBS[shape]
    )
    result, _ = attempt(worker, script, memory_limit_mb=SMALL_MEMORY_MB)
    assert (result.outcome, result.error_name) == ("crash", "InternalError")
    assert str(SMALL_MEMORY) in (result.error_message or "")


def test_a_caught_bomb_is_crash_wherever_memory_runs_out(worker: ScriptWorker) -> None:
    # Where the last allocation fails moves with everything else in the context; payloads
    # of other sizes move it. At some points the engine's error object fits but not its
    # message or stack: the script then catches a bare InternalError (found at 5 of 240
    # such points, on main too, before prelude.js `isEngineOom`).
    script = "try { " + BOMBS["array-fill"] + " } catch (e) { }\nreturn 'survived';"

    async def go(tags: int) -> AttemptResult:
        request = AttemptRequest(
            script=script, script_line=1, script_column=1,
            context={"payload": {"tags": ["a"] * tags}, "steps": {"s1": 1}},
            attempt={"number": 1}, now_ms=lambda: 0.0,
            limits=Limits(memory_limit_mb=SMALL_MEMORY_MB),
        )
        return await worker.run_attempt(request, no_services, lambda lv, t: None)

    outcomes = {tags: asyncio.run(go(tags)).outcome for tags in range(0, 120, 3)}
    assert {tags: o for tags, o in outcomes.items() if o != "crash"} == {}


def test_a_bare_internal_error_thrown_on_purpose_is_crash(worker: ScriptWorker) -> None:
    # What a half-built engine error looks like (see above): a script can choose
    # `crash` with it, as with `throw null`.
    script = "try { throw Object.create(InternalError.prototype); } catch (e) { }\nreturn 1;"
    result, _ = attempt(worker, script)
    assert (result.outcome, result.error_name) == ("crash", "InternalError")
    result, _ = attempt(worker, "throw new InternalError('interrupted');")
    assert (result.outcome, result.error_name) == ("threw", "InternalError")


def test_bomb_at_the_default_128_mib_limit_is_crash(worker: ScriptWorker) -> None:
    result, _ = attempt(worker, "try { " + BOMBS["array-fill"] + " } catch { }\nreturn 1;")
    assert result.outcome == "crash"


def test_memory_bomb_caught_through_a_promise_handler_is_crash(worker: ScriptWorker) -> None:
    script = (
        "return await (async () => { " + BOMBS["small-objects"] + " })().catch(() => 'survived');"
    )
    result, _ = attempt(worker, script, memory_limit_mb=SMALL_MEMORY_MB)
    assert result.outcome == "crash"


def test_throwing_null_is_crash_because_quickjs_throws_null_when_out_of_memory(
    worker: ScriptWorker,
) -> None:
    # Decision (documented): a thrown null is indistinguishable from QuickJS's last-resort
    # out-of-memory value, so it fails closed.
    assert attempt(worker, "throw null")[0].outcome == "crash"


def test_worker_keeps_serving_after_a_memory_bomb(worker: ScriptWorker) -> None:
    attempt(worker, BOMBS["small-objects"], memory_limit_mb=SMALL_MEMORY_MB)
    assert attempt(worker, "return [1, 2, 3].length")[0].result == 3


# ---- the process: death, cancellation, loops, cleanup (spec §4.5) ----


def _spin_until_logged(worker: ScriptWorker, on_spinning: Any) -> AttemptResult:
    async def go() -> AttemptResult:
        spinning = asyncio.Event()
        task = asyncio.ensure_future(
            worker.run_attempt(
                request("console.log('spinning'); while (true) {}"),
                no_services,
                lambda lv, t: spinning.set(),
            )
        )
        await spinning.wait()
        return await on_spinning(task)

    return asyncio.run(go())


def test_worker_killed_from_outside_is_crash_and_the_next_attempt_starts_fresh(
    worker: ScriptWorker,
) -> None:
    async def kill_it(task: asyncio.Future[AttemptResult]) -> AttemptResult:
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)
        return await task

    result = _spin_until_logged(worker, kill_it)
    assert (result.outcome, result.error_name) == ("crash", "WorkerDied")
    assert result.error_message == "the script worker process died (signal 9, SIGKILL)"
    assert attempt(worker, "return 'fresh'")[0].result == "fresh"


def test_kill_from_another_thread_ends_the_attempt_of_a_loop_in_this_one(
    worker: ScriptWorker,
) -> None:
    # The pipes belong to the loop awaiting the attempt; a kill from elsewhere leaves
    # them to that loop, which sees the child's output end.
    async def kill_elsewhere(task: asyncio.Future[AttemptResult]) -> AttemptResult:
        killer = threading.Thread(target=worker.kill)
        killer.start()
        result = await task
        killer.join()
        return result

    result = _spin_until_logged(worker, kill_elsewhere)
    assert (result.outcome, result.error_name) == ("crash", "WorkerDied")
    assert attempt(worker, "return 'fresh'")[0].result == "fresh"


def test_the_child_imports_the_runtime_only(worker: ScriptWorker) -> None:
    # Neither the parser (lxml) nor site-packages' start-up hooks: a start or a
    # restart after a kill stays well under 100 ms (bench/worker.py).
    assert attempt(worker, "return 1")[0].result == 1
    assert worker.pid is not None
    maps = Path(f"/proc/{worker.pid}/maps").read_text()
    assert "_quickjs" in maps
    assert "lxml" not in maps


def test_cancelling_an_endless_loop_kills_the_worker_and_the_next_attempt_works(
    worker: ScriptWorker,
) -> None:
    pids: list[int] = []

    async def cancel_it(task: asyncio.Future[AttemptResult]) -> AttemptResult:
        assert worker.pid is not None
        pids.append(worker.pid)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return AttemptResult("cancelled")

    _spin_until_logged(worker, cancel_it)
    with pytest.raises(ChildProcessError):
        os.waitpid(pids[0], os.WNOHANG)  # already reaped by kill()
    assert worker.pid is None
    assert attempt(worker, "return 'after'")[0].result == "after"


def test_one_worker_serves_attempts_from_different_event_loops() -> None:
    w = ScriptWorker()
    try:
        first, _ = attempt(w, "return 1")
        pid = w.pid
        second, _ = attempt(w, "return 2")
        assert (first.result, second.result) == (1, 2)
        assert w.pid == pid  # warm process reused across loops
    finally:
        asyncio.run(w.aclose())


def test_aclose_and_kill_leave_no_process_behind() -> None:
    w = ScriptWorker()
    asyncio.run(w.start())
    pid = w.pid
    assert pid is not None
    assert pid in children()
    asyncio.run(w.aclose())
    asyncio.run(w.aclose())  # idempotent
    assert w.pid is None
    assert pid not in children()
    assert not Path(f"/proc/{pid}").exists()


def test_messages_larger_than_a_pipe_buffer_pass_both_ways(worker: ScriptWorker) -> None:
    # A pipe holds 64 KiB: the script goes out in several non-blocking writes and the
    # result comes back in several reads.
    big = "x" * 300_000
    result, _ = attempt(worker, f"const s = '{big}';\nreturn s.slice(0, 200_000) + '!';")
    assert result.outcome == "succeeded"
    assert result.result == "x" * 200_000 + "!"


# ---- compile check (spec §2.3) ----


def test_syntax_error_on_script_line_2_is_reported_at_the_cell_line(worker: ScriptWorker) -> None:
    found = asyncio.run(worker.check_syntax("const a = 1;\nconst b = ;\n", 7, 12))
    assert found is not None
    message, line, column = found
    assert (line, column) == (8, 11)
    assert "unexpected token" in message


def test_syntax_error_on_script_line_1_is_shifted_by_the_script_column(
    worker: ScriptWorker,
) -> None:
    found = asyncio.run(worker.check_syntax("return )", 3, 20))
    assert found is not None
    assert found[1:] == (3, 27)


def test_valid_script_compiles_without_running(worker: ScriptWorker) -> None:
    assert (
        asyncio.run(
            worker.check_syntax("while (true) {}\nreturn await services.sleep('1s');", 1, 1)
        )
        is None
    )


def test_script_that_closes_its_function_early_is_rejected(worker: ScriptWorker) -> None:
    found = asyncio.run(worker.check_syntax("return 1 }); (async function () {", 4, 9))
    assert found is not None
    assert "closes its own function body early" in found[0]
    result, _ = attempt(worker, "return 1 }); (async function () {")
    assert (result.outcome, result.error_name) == ("threw", "SyntaxError")


# ---- the wrapper and the protocol, shared by both processes (spec §2.3, §4.5) ----


def test_script_line_one_stands_on_the_wrappers_first_line_and_maps_back() -> None:
    script = "const a = 1;\n  throw new Error('here');"
    ctx = quickjs.Context()
    ctx.eval("(" + wrap(script) + ")().catch((e) => { globalThis.stack = e.stack; })")
    while ctx.execute_pending_job():
        pass
    assert f"<input>:{FIRST_LINE + 1}:" in ctx.get("stack")
    assert cell_position(FIRST_LINE + 1, 3, script, SCRIPT_LINE, SCRIPT_COLUMN) == (
        SCRIPT_LINE + 1, 3,
    )
    assert cell_position(FIRST_LINE, 1, script, SCRIPT_LINE, SCRIPT_COLUMN) == (
        SCRIPT_LINE, SCRIPT_COLUMN,
    )
    # The wrapper's own lines clamp to the script's first and last lines.
    assert cell_position(1, 9, script, SCRIPT_LINE, SCRIPT_COLUMN) == (
        SCRIPT_LINE, SCRIPT_COLUMN,
    )
    assert cell_position(FIRST_LINE + 2, 1, script, SCRIPT_LINE, SCRIPT_COLUMN) == (
        SCRIPT_LINE + 1, len("  throw new Error('here');") + 1,
    )


def test_the_services_are_the_registrys_names() -> None:
    assert SERVICES is SERVICE_NAMES


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ({"type": "ready", "prelude": "bytecode"}, None),
        ({"type": "ready", "prelude": "source", "reason": "why"}, None),
        ({"type": "ready", "prelude": "source", "reason": 1}, "a malformed 'ready' message"),
        ({"type": "ready", "prelude": "wasm"}, "a malformed 'ready' message"),
        ({"type": "call", "id": 1, "call": 1, "service": "sleep", "args": []}, None),
        ({"type": "call", "id": 1, "call": 1, "service": "fs.read", "args": []},
         "a malformed 'call' message"),
        ({"type": "done", "id": 1, "outcome": "timeout", "name": "", "message": "",
          "line": None}, "a done message with the unknown outcome 'timeout'"),
        ({"type": "done", "id": 1, "outcome": "threw", "name": "E", "message": "m",
          "line": 3}, None),
        ({"type": "need", "id": 1, "step": "x" * 9000}, "a malformed 'need' message"),
        ({"type": "hello"}, "a message of the unknown type 'hello'"),
    ],
)
def test_the_kernel_accepts_only_the_protocols_shapes(
    message: dict[str, Any], problem: str | None
) -> None:
    assert check_shape(message, SERVICES) == problem


def _with_big_steps(script: str) -> AttemptRequest:
    """An attempt whose earlier steps hold ~9 MB of results, over its 8 MiB memory (the
    least ``memory_limit_mb`` allows)."""
    big = {f"s{n}": "x" * 4500 for n in range(2000)}
    base = request(script)
    return dataclasses.replace(base, limits=dataclasses.replace(base.limits, memory_limit_mb=8),
                               context={"payload": None, "steps": big,
                                        "run": {"id": "r", "workflow": "w"}})


def test_a_step_reply_declares_a_refusal_in_its_own_field() -> None:
    """spec §3.6, §4.5: a ``step`` command is its declared fields (``StepCommand``); a
    refusal is ``refused``, not a marker inside ``text``."""
    req = _with_big_steps("return 1")
    one, every = step_reply(req, 7, "s1"), step_reply(req, 7, "")
    assert one == {"op": "step", "attempt": 7, "text": '"' + "x" * 4500 + '"', "refused": None}
    assert every["text"] == ""
    assert every["refused"] is not None
    assert every["refused"].startswith("context.steps holds 9")
    assert step_reply(req, 7, "nope") == {"op": "step", "attempt": 7, "text": "",
                                          "refused": None}
    for reply in (one, every):
        assert reply.keys() == StepCommand.__required_keys__


def test_a_refused_context_steps_read_throws_the_kernels_reason(worker: ScriptWorker) -> None:
    req = _with_big_steps("try { Object.keys(context.steps); return 'read'; } "
                          "catch (e) { return e.name + ': ' + e.message; }")
    result = asyncio.run(worker.run_attempt(req, no_services, lambda lv, t: None))
    assert result.outcome == "succeeded"
    assert result.result.startswith("RangeError: context.steps holds 9")
    assert "read the steps you need by name" in result.result


def test_the_transport_hands_over_each_line_and_its_size_apart() -> None:
    """The size a call weighs (the bridge's in-flight budget) travels beside the
    message, never inside it: the message holds exactly the protocol's fields."""
    line = b'{"type":"call","id":1,"call":1,"service":"sleep","args":[5]}'
    program = "import sys; sys.stdout.buffer.write(" + repr(line + b"\n") + ")"

    async def main() -> list[Received]:
        process = ChildProcess([sys.executable, "-c", program])
        inbox = Inbox()
        process.attach(asyncio.get_running_loop(), inbox)
        try:
            return [await inbox.get(), await inbox.get()]
        finally:
            process.kill()

    received, ended = asyncio.run(main())
    assert received == Received({"type": "call", "id": 1, "call": 1, "service": "sleep",
                                 "args": [5]}, len(line))
    assert received.message.keys() == CallMessage.__required_keys__
    assert ended.message["type"] == "exit"
    assert ended.size == 0


# ---- chaos (spec §4.5: no script can hang, slow or kill the kernel) ----


@pytest.mark.slow
def test_chaos_every_bad_class_twenty_times_keeps_the_kernel_healthy() -> None:
    async def bridge_fails(name: str, args: list[Any]) -> Any:
        raise RuntimeError("bridge")

    bad = [
        ("while (true) {}", "cancel", no_services),
        (BOMBS["small-objects"], "crash", no_services),
        ("try { " + BOMBS["array-fill"] + " } catch {} return 1", "crash", no_services),
        ("return {x: NaN}", "invalid-json", no_services),
        ("return 'x'.repeat(300000)", "oversized", no_services),
        ("throw new Error('x')", "threw", no_services),
        ("for (;;) console.log('flood')", "cancel", no_services),
        ("await services.sleep('1s')", "crash", bridge_fails),
    ]
    w = ScriptWorker()

    async def one(script: str, expected: str, services: Any) -> None:
        req = AttemptRequest(
            script=script,
            script_line=1,
            script_column=1,
            context={},
            attempt={},
            now_ms=lambda: 0.0,
            limits=Limits(memory_limit_mb=SMALL_MEMORY_MB),
        )
        if expected == "cancel":
            task = asyncio.ensure_future(w.run_attempt(req, services, lambda lv, t: None))
            await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return
        result = await w.run_attempt(req, services, lambda lv, t: None)
        assert result.outcome == expected, (script, result)

    async def all_rounds() -> None:
        for _ in range(20):
            for script, expected, services in bad:
                await one(script, expected, services)

    others = set(children())  # e.g. the module's shared worker
    before = rss_kib()
    try:
        asyncio.run(all_rounds())
        assert attempt(w, "return 'healthy'")[0].result == "healthy"
    finally:
        asyncio.run(w.aclose())
    growth_mb = (rss_kib() - before) / 1024
    assert growth_mb < 50, f"parent RSS grew {growth_mb:.1f} MB"
    assert set(children()) <= others


PARENT_DIES = """
import asyncio, os, sys
from woml_magic.runtime import AttemptRequest, ScriptWorker

async def main():
    worker = ScriptWorker()
    spinning = asyncio.Event()
    req = AttemptRequest(script="console.log('x'); while (true) {}", script_line=1,
                         script_column=1, context={}, attempt={}, now_ms=lambda: 0.0)
    async def services(name, args):
        return None
    task = asyncio.ensure_future(worker.run_attempt(req, services, lambda lv, t: spinning.set()))
    await spinning.wait()
    print(worker.pid, flush=True)
    os._exit(0)  # no cleanup at all, as if the kernel were killed

asyncio.run(main())
"""


THREAD_ENDS_THEN_PARENT_DIES = """
import asyncio, os, threading, time
from woml_magic.runtime import AttemptRequest, ScriptWorker

worker = ScriptWorker()

def request(script):
    return AttemptRequest(script=script, script_line=1, script_column=1, context={},
                          attempt={}, now_ms=lambda: 0.0)

async def services(name, args):
    return None

def first():
    asyncio.run(worker.run_attempt(request("return 1"), services, lambda lv, t: None))

helper = threading.Thread(target=first)
helper.start()
helper.join()
started_by_helper = worker.pid
time.sleep(0.5)  # PR_SET_PDEATHSIG would have killed it when the helper ended

async def main():
    spinning = asyncio.Event()
    task = asyncio.ensure_future(worker.run_attempt(
        request("console.log('x'); while (true) {}"), services, lambda lv, t: spinning.set()))
    await spinning.wait()
    print(started_by_helper, worker.pid, flush=True)
    os._exit(0)  # no cleanup at all, as if the kernel were killed

asyncio.run(main())
"""


def _exits_soon(pid: int, seconds: float = 10) -> bool:
    import time

    def alive() -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"  # a zombie has exited; only its reaper is pending

    deadline = time.monotonic() + seconds
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive()


def test_a_worker_outlives_the_thread_that_started_it_but_not_its_process() -> None:
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run(
        [sys.executable, "-c", THREAD_ENDS_THEN_PARENT_DIES],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": root},
        timeout=60,
        check=True,
    )
    started_by_helper, spinning = (int(p) for p in out.stdout.split())
    assert spinning == started_by_helper  # the same warm process served both attempts
    assert _exits_soon(spinning)


def test_worker_dies_with_its_parent_even_mid_loop() -> None:
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run(
        [sys.executable, "-c", PARENT_DIES],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    pid = int(out.stdout.strip())
    assert _exits_soon(pid)
