"""Scripts written to break the bridge, not to do work (spec §4.5, issue 12).

Spec §4.5: no script "can hang, slow or kill the kernel; the worst it can do is end its
own attempt", and "the script cannot speak on the bridge". Each test below is an
attack; each asserts what the spec promises: the attempt's outcome is what really
happened, the kernel's memory stays within a stated bound, the next run is
unaffected and no worker is leaked. Everything runs for real: QuickJS worker
processes, and an HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import child_pids

import woml_magic as wm
from woml_magic.errors import WomlLimitError, WomlRunError
from woml_magic.limits import LIMIT_RANGES, Limits, check_payload_limits, json_depth
from woml_magic.runtime import AttemptRequest, AttemptResult, ScriptWorker
from woml_magic.runtime import worker as worker_module
from woml_magic.runtime.protocol import StepCommand
from woml_magic.runtime.transport import ChildProcess

SPEC_OUTCOMES = {
    "succeeded", "threw", "timeout", "invalid-json", "oversized", "crash", "interrupted",
    "cancelled", "ambiguous",
}
#: The bound on the kernel's peak memory growth while it survives one attack.
RSS_BOUND_MIB = 20
HONEST = 'throw new Error("real")'


# ---- helpers -----------------------------------------------------------------------


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field}")


class PeakRss:
    """The kernel's peak RSS growth (KiB → MiB) over a block: VmHWM after, reset before."""

    def __enter__(self) -> PeakRss:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        self.before = _status("VmRSS")
        return self

    def __exit__(self, *exc: object) -> None:
        self.growth_mib = (_status("VmHWM") - self.before) / 1024


async def no_services(name: str, args: list[Any]) -> Any:
    if name == "sleep":
        return None
    raise AssertionError(f"unexpected service {name}")


def request(script: str, **kw: Any) -> AttemptRequest:
    """An attempt of ``script``; keywords named as limits set the request's ``limits``."""
    context = kw.pop("context", {"payload": None, "steps": {"first": {"n": 1}},
                                 "run": {"id": "r", "workflow": "w"}})
    limits = Limits(**{name: kw.pop(name) for name in list(kw) if name in LIMIT_RANGES})
    return AttemptRequest(
        script=script, script_line=1, script_column=1, context=context,
        attempt={"number": 1, "maxAttempts": 1, "idempotencyKey": "k"},
        now_ms=lambda: 1_000_000.0, limits=limits, **kw,
    )


def attempt(
    worker: ScriptWorker, script: str, services: Any = no_services, timeout: float = 20.0,
    **kw: Any,
) -> tuple[AttemptResult, list[tuple[str, str]]]:
    logs: list[tuple[str, str]] = []

    async def go() -> AttemptResult:
        return await asyncio.wait_for(
            worker.run_attempt(request(script, **kw), services,
                               lambda level, text: logs.append((level, text))),
            timeout,
        )

    return asyncio.run(go()), logs


@pytest.fixture(scope="module")
def worker() -> Iterator[ScriptWorker]:
    w = ScriptWorker()
    yield w
    w.kill()


def honest_next(worker: ScriptWorker) -> None:
    """The attempt after an attack ends as it really does (spec §4.5: the next run is
    unaffected)."""
    result, logs = attempt(worker, HONEST)
    assert (result.outcome, result.error_name, result.error_message) == ("threw", "Error", "real")
    assert logs == []
    ok, _ = attempt(worker, "return context.steps.first.n + 1")
    assert (ok.outcome, ok.result) == ("succeeded", 2)


def step(script: str, **attrs: str) -> str:
    extra = "".join(f' {k}="{v}"' for k, v in attrs.items())
    return f'<step id="s"{extra}><script>{script}</script></step>'


# ---- 1. a script cannot forge its outcome --------------------------------------------

FORGED_DONE = (
    '{"type":"done","id":%d,"outcome":"succeeded","result":{"forged":true}}'
)

# Each patches what a bridge might use, then fails honestly: the outcome must be the
# honest one.
PATCHES = {
    "Object.prototype.toJSON": (
        "Object.defineProperty(Object.prototype, 'toJSON', {value() {"
        " return {type: 'done', id: 1, outcome: 'succeeded', result: {forged: true}}; },"
        " configurable: true});"
    ),
    "Array.prototype.toJSON": (
        "Array.prototype.toJSON = function () { return 'forged'; };"
    ),
    "String.prototype.toJSON": "String.prototype.toJSON = function () { return 'forged'; };",
    "JSON.stringify": (
        "JSON.stringify = () => '{\"type\":\"done\",\"id\":1,\"outcome\":\"succeeded\"}';"
    ),
    "JSON.parse": "JSON.parse = () => ({state: 'fulfilled', ok: true});",
    "Array.prototype.join": "Array.prototype.join = function () { return 'forged'; };",
    "Object.prototype getters": (
        "for (const k of ['text', 'ok', 'state', 'outcome', 'message', 'error', 'oom',"
        " 'pendingCalls', 'nullCaught', 'id', 'value', 'props', 'result', 'part'])"
        " Object.defineProperty(Object.prototype, k, {__proto__: null,"
        " get() { return 'forged'; }, configurable: true});"
    ),
    "descriptor fields on Object.prototype": (
        "Object.prototype.get = function () { return 'forged'; };"
        "Object.prototype.set = function (v) {}; Object.prototype.writable = true;"
    ),
    "Array.prototype index setters": (
        "for (let i = 0; i < 20; i++) Object.defineProperty(Array.prototype, i,"
        " {__proto__: null, set(v) {}, get() { return 'forged'; }, configurable: true});"
    ),
    "Promise.prototype.then": (
        "Promise.prototype.then = function (ok) { ok('forged'); };"
    ),
    "Promise species": (
        "try { Promise.prototype.constructor = function () {}; } catch {}"
        "try { Object.defineProperty(Promise, Symbol.species, {value: function () {}}); }"
        " catch {}"
    ),
    "Function.prototype.call/apply": (
        "Function.prototype.call = Function.prototype.apply = function () { return 'forged'; };"
        "Reflect.apply = () => 'forged';"
    ),
    "String.prototype methods": (
        "for (const k of ['slice', 'split', 'indexOf', 'isWellFormed', 'toWellFormed',"
        " 'repeat']) String.prototype[k] = () => 'forged';"
    ),
    "Object statics": (
        "Object.keys = () => ['forged']; Object.freeze = (x) => x;"
        " Object.defineProperty = () => { throw new Error('forged'); };"
    ),
    "Error.prepareStackTrace": (
        "try { Error.prepareStackTrace = () => 'forged'; } catch {}"
    ),
    # The lazy parts are read into the context while the script runs (prelude.js
    # `factory`): never through the global object, which these would intercept.
    "a proxy behind the global object": (
        "Object.setPrototypeOf(globalThis, new Proxy({}, {get() { return 'forged'; },"
        " set() { throw new Error('forged'); }, has(t, k) { return k !== 'console'; },"
        " defineProperty() { throw new Error('forged'); }}));"
    ),
    "a global object that cannot grow": "Object.preventExtensions(globalThis);",
}


@pytest.mark.parametrize("name", sorted(PATCHES))
def test_patched_intrinsics_cannot_forge_a_throw_into_success(
    worker: ScriptWorker, name: str
) -> None:
    script = PATCHES[name] + "\nconsole.log('x', {a: 1}, [1, 2]);\n" + HONEST
    result, logs = attempt(worker, script)
    assert (result.outcome, result.error_name, result.error_message) == ("threw", "Error", "real")
    assert result.error_line == 3
    assert len(logs) == 1
    honest_next(worker)


@pytest.mark.parametrize("name", sorted(PATCHES))
def test_patched_intrinsics_cannot_make_nan_valid_json(worker: ScriptWorker, name: str) -> None:
    result, _ = attempt(worker, PATCHES[name] + "\nreturn {bad: NaN};")
    # The script may throw over its own patches (its own doing); it never succeeds. (A
    # toJSON on every object converts each value into another object: never JSON.)
    assert result.outcome in ("invalid-json", "threw")
    if result.outcome == "invalid-json" and "toJSON" not in name:
        assert "NaN" in (result.error_message or "")
    honest_next(worker)


def test_a_forged_done_line_in_console_output_is_only_text(worker: ScriptWorker) -> None:
    forged = FORGED_DONE % 1
    script = (
        f"console.log({json.dumps(chr(10) + forged + chr(10))});\n"
        f"console.log('x'.repeat(70000) + {json.dumps(chr(10) + forged)});\n"
        + HONEST
    )
    result, logs = attempt(worker, script)
    assert (result.outcome, result.error_message) == ("threw", "real")
    assert forged in logs[0][1]
    honest_next(worker)


def test_a_result_holding_newlines_and_forged_lines_is_its_own_text(
    worker: ScriptWorker,
) -> None:
    forged = "\n".join(FORGED_DONE % n for n in range(1, 50))
    result, _ = attempt(worker, f"return {json.dumps(chr(10) + forged + chr(10))};")
    assert result.outcome == "succeeded"
    assert result.result == "\n" + forged + "\n"
    honest_next(worker)


def test_a_to_json_result_is_checked_by_size_after_conversion(worker: ScriptWorker) -> None:
    script = (
        "Object.prototype.toJSON = function () { return 'x'.repeat(1024 * 1024); };\n"
        "return {a: 1};"
    )
    result, _ = attempt(worker, script)
    assert result.outcome == "oversized"
    assert "262144" in (result.error_message or "")
    honest_next(worker)


def test_every_outcome_a_run_records_is_a_spec_outcome() -> None:
    scripts = [PATCHES[name] + "\n" + HONEST for name in sorted(PATCHES)]
    for script in scripts:
        run = wm.run(step(script), clock="simulated")
        for attempt_ in run.steps["s"].attempts:
            assert attempt_.outcome in SPEC_OUTCOMES
            assert attempt_.outcome == "threw"


# ---- 2. one run cannot decide a later run's outcome -----------------------------------


def test_output_padding_and_stray_lines_do_not_reach_the_next_run() -> None:
    attack = (
        "const pad = 'p'.repeat(70000);\n"
        "for (let i = 0; i < 5; i++) console.log(pad + '\\n' + "
        + json.dumps(FORGED_DONE % 2) + ");\n"
        "return 'a\\n' + " + json.dumps(FORGED_DONE % 3) + ";"
    )
    first = wm.run(step(attack), clock="simulated")
    assert first.steps["s"].attempts[0].outcome == "succeeded"
    second = wm.run(step(HONEST), clock="simulated")
    only = second.steps["s"].attempts[0]
    assert (only.outcome, only.error and only.error.message) == ("threw", "real")


# A stand-in child: speaks the protocol's start, then says what a test makes it say.
FAKE_CHILD = """\
import json, sys
lines = json.loads(open(sys.argv[2]).read())
sys.stdout.write(json.dumps({"type": "ready", "prelude": "source"}) + "\\n")
sys.stdout.flush()
for raw in sys.stdin:
    command = json.loads(raw)
    if command.get("op") in ("run", "check"):
        for line in lines:
            sys.stdout.write(line.replace("ID", str(command["id"])) + "\\n")
        sys.stdout.flush()
"""


def fake_worker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lines: list[str]
) -> ScriptWorker:
    script = tmp_path / "lines.json"
    script.write_text(json.dumps(lines))

    argv = [sys.executable, "-c", FAKE_CHILD, "-", str(script)]
    return ScriptWorker(start_process=lambda: ChildProcess(argv))


BROKEN_CHILDREN = {
    "unknown outcome": ['{"type":"done","id":ID,"outcome":"totally-fine","name":"","message":"",'
                        '"line":null}'],
    "another id": ['{"type":"done","id":999,"outcome":"succeeded","result":"1"}'],
    "stray line": ["hello"],
    "not an object": ["[1, 2]"],
    "extra field": ['{"type":"done","id":ID,"outcome":"succeeded","result":"1","x":1}'],
    "result is not text": ['{"type":"done","id":ID,"outcome":"succeeded","result":{"a":1}}'],
    "deep line": ["[" * 5000 + "]" * 5000],
    "NaN": ['{"type":"log","id":ID,"level":"log","text":NaN}'],
    "unknown type": ['{"type":"bridge-failed","id":ID,"message":"x"}'],
    "huge line": ["x" * (8 << 20)],
    "line that is not JSON": ["x" * (1 << 20)],
    "console past the caps": [
        '{"type":"log","id":ID,"level":"log","text":"' + "y" * 60000 + '"}'
    ] * 3,
}


@pytest.mark.parametrize("name", sorted(BROKEN_CHILDREN))
def test_anything_unexpected_from_the_worker_is_crash_and_replaces_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    fake = fake_worker(monkeypatch, tmp_path, BROKEN_CHILDREN[name])
    try:
        before = set(child_pids())
        result, _ = attempt(fake, "return 1")
        assert result.outcome == "crash", result
        assert result.error_name == "WorkerProtocolError"
        assert "fails closed" in (result.error_message or "")
        assert fake.pid is None  # killed, to be replaced on next use
        assert not (child_pids() - before)
    finally:
        fake.kill()


def test_a_syntax_check_answered_with_another_id_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    fake = fake_worker(monkeypatch, tmp_path, ['{"type":"checked","id":424242,"error":null}'])
    try:
        with pytest.raises(WomlRunError, match="unexpected 'checked' message"):
            asyncio.run(fake.check_syntax("return 1", 1, 1))
        assert fake.pid is None
    finally:
        fake.kill()


def test_output_left_in_the_pipe_replaces_the_worker(worker: ScriptWorker) -> None:
    async def leave_output() -> None:
        await worker.start()
        process = worker.process
        assert process is not None
        process.send({"op": "check", "id": 77, "script": "return 1"})  # answered, never read
        await asyncio.sleep(0.3)

    asyncio.run(leave_output())
    old = worker.pid
    honest_next(worker)
    assert worker.pid != old


# ---- 3. console output cannot grow the kernel -----------------------------------------


@pytest.mark.parametrize("trick", ["plain", "toJSON", "newlines", "utf8"])
def test_a_console_flood_is_capped_in_bytes_and_lines(worker: ScriptWorker, trick: str) -> None:
    floods = {
        "plain": "const big = 'x'.repeat(1 << 20); for (let i = 0; i < 200; i++) console.log(big);",
        "toJSON": (
            "Object.prototype.toJSON = function () { return 'x'.repeat(1 << 20); };"
            "for (let i = 0; i < 200; i++) console.log({});"
        ),
        "newlines": "for (let i = 0; i < 200; i++) console.log('\\n'.repeat(1 << 16));",
        "utf8": "const big = '€'.repeat(1 << 19); for (let i = 0; i < 200; i++) console.log(big);",
    }
    with PeakRss() as peak:
        result, logs = attempt(worker, floods[trick] + "\nreturn 'done';")
    assert (result.outcome, result.result) == ("succeeded", "done")
    body = logs[:-1]
    assert sum(len(text.encode()) for _, text in body) <= 64 * 1024
    assert sum(text.count("\n") + 1 for _, text in body) <= 1000
    assert logs[-1][0] == "warn"
    assert "truncated" in logs[-1][1]
    assert peak.growth_mib < RSS_BOUND_MIB, peak.growth_mib
    honest_next(worker)


def test_a_console_flood_through_a_run_keeps_the_run_small() -> None:
    script = (
        "Object.prototype.toJSON = function () { return 'x'.repeat(1 << 20); };"
        "for (let i = 0; i < 200; i++) console.log({});\n" + HONEST
    )
    with PeakRss() as peak:
        run = wm.run(step(script), clock="simulated")
    only = run.steps["s"].attempts[0]
    assert only.outcome == "threw"
    assert sum(len(line) for line in only.logs) < 70 * 1024
    assert peak.growth_mib < RSS_BOUND_MIB, peak.growth_mib


def test_console_caps_are_configurable(worker: ScriptWorker) -> None:
    result, logs = attempt(worker, "for (let i = 0; i < 10; i++) console.log(i);",
                           max_log_lines=3)
    assert result.outcome == "succeeded"
    assert [text for _, text in logs[:3]] == ["0", "1", "2"]
    assert "at most 3 lines" in logs[3][1]
    assert "max_log_lines" in logs[3][1]


# ---- 4. nesting depth ----------------------------------------------------------------


def deep(n: int) -> str:
    return f"let v = 1; for (let i = 0; i < {n}; i++) v = [v];"


def test_deep_service_arguments_are_refused_by_name_not_lost(worker: ScriptWorker) -> None:
    started = time.monotonic()
    result, _ = attempt(worker, deep(3000) + "\nawait services.sleep(v);")
    assert time.monotonic() - started < 10
    assert (result.outcome, result.error_name) == ("threw", "RangeError")
    assert "max_json_depth" in (result.error_message or "")
    assert result.error_line == 2
    honest_next(worker)


def test_large_service_arguments_are_refused_by_name(worker: ScriptWorker) -> None:
    result, _ = attempt(worker, "await services.sleep('x'.repeat(2 << 20));")
    assert (result.outcome, result.error_name) == ("threw", "RangeError")
    assert "max_call_args_bytes" in (result.error_message or "")
    honest_next(worker)


def test_a_deep_result_is_invalid_json_naming_the_limit(worker: ScriptWorker) -> None:
    for n in (65, 3000, 100_000):
        result, _ = attempt(worker, deep(n) + "\nreturn v;")
        assert result.outcome == "invalid-json", (n, result)
    result, _ = attempt(worker, deep(64) + "\nreturn v;")
    assert result.outcome == "succeeded"
    assert json_depth(result.result) == 64
    honest_next(worker)


@pytest.mark.parametrize("depth", [100, 3000, 100_000])
def test_a_deep_payload_is_refused_before_anything_runs(depth: int) -> None:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    with pytest.raises(WomlLimitError, match="max_json_depth") as caught:
        check_payload_limits(value, max_bytes=10 << 20, max_depth=64)
    assert caught.value.limit == "max_json_depth"


# ---- 5, 6. HTTP bodies and payload sizes ------------------------------------------------


class Server:
    """A real HTTP server on 127.0.0.1 answering by path."""

    def __init__(self, routes: dict[str, Callable[[], tuple[dict[str, str], bytes]]]) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                headers, body = routes[self.path]()
                self.send_response(200)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    bomb = gzip.compress(b"\0" * (256 << 20), compresslevel=9)
    assert len(bomb) < 300 * 1024
    deep_json = ("[" * 3000 + "]" * 3000).encode()
    s = Server({
        "/bomb": lambda: ({"Content-Type": "application/json", "Content-Encoding": "gzip"},
                          bomb),
        "/deep": lambda: ({"Content-Type": "application/json"}, deep_json),
        "/ok": lambda: ({"Content-Type": "application/json", "Content-Encoding": "gzip"},
                        gzip.compress(b'{"fine": [1, 2, 3]}')),
        "/br": lambda: ({"Content-Type": "text/plain", "Content-Encoding": "br"}, b"xx"),
    })
    yield s
    s.close()


def http_step(url: str) -> str:
    return step(
        "try { const r = await services.http.request({url: '" + url + "'}, {name: 'c'});"
        " return r.data; } catch (e) { return {name: e.name, message: e.message}; }"
    )


def test_a_gzip_bomb_is_stopped_at_the_cap_counted_after_inflating(server: Server) -> None:
    wm.run(http_step(server.url + "/ok"), clock="simulated")  # warm: client, imports
    with PeakRss() as peak:
        run = wm.run(http_step(server.url + "/bomb"), clock="simulated")
    only = run.steps["s"].attempts[0]
    assert only.outcome == "succeeded"
    assert only.result["name"] == "ResponseTooLargeError"
    assert only.calls[0].outcome == "response"  # journaled as finished
    assert peak.growth_mib < RSS_BOUND_MIB, peak.growth_mib


def test_a_gzip_body_within_the_cap_reads_as_before(server: Server) -> None:
    run = wm.run(http_step(server.url + "/ok"), clock="simulated")
    assert run.steps["s"].result == {"fine": [1, 2, 3]}


def test_a_too_deep_json_body_is_a_clear_error_and_the_call_is_finished(
    server: Server,
) -> None:
    started = time.monotonic()
    run = wm.run(http_step(server.url + "/deep"), clock="simulated")
    assert time.monotonic() - started < 10
    only = run.steps["s"].attempts[0]
    assert only.outcome == "succeeded"
    assert only.result["name"] == "ResponseTooDeepError"
    assert "max_json_depth" in only.result["message"]
    call = only.calls[0]
    assert call.outcome == "response"
    assert call.ended_at is not None
    assert "max_json_depth" in (call.error or "")


def test_a_body_in_an_encoding_not_asked_for_is_refused_unread(server: Server) -> None:
    run = wm.run(http_step(server.url + "/br"), clock="simulated")
    assert run.steps["s"].result["name"] == "ResponseDecodeError"


def test_a_100_mib_payload_is_refused_up_front() -> None:
    payload = {"blob": "x" * (100 << 20)}
    with PeakRss() as peak:
        started = time.monotonic()
        with pytest.raises(WomlLimitError, match="max_payload_bytes") as caught:
            check_payload_limits(payload, max_bytes=10 << 20, max_depth=64)
        seconds = time.monotonic() - started
    assert caught.value.limit == "max_payload_bytes"
    assert seconds < 1
    assert peak.growth_mib < RSS_BOUND_MIB, peak.growth_mib


def test_a_payload_within_the_limits_returns_its_text() -> None:
    assert check_payload_limits({"a": [1, "é"]}, 100, 3) == '{"a":[1,"é"]}'
    with pytest.raises(WomlLimitError, match="max_payload_bytes"):
        check_payload_limits({"a": "x" * 200}, 100, 3)
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="circular"):
        check_payload_limits(loop, 100, 3)


# ---- 7. smaller holes -----------------------------------------------------------------


def test_a_promise_nothing_settles_jumps_the_simulated_clock_to_the_timeout() -> None:
    started = time.monotonic()
    run = wm.run(step("await new Promise(() => {});", timeout="1h"), clock="simulated")
    assert time.monotonic() - started < 10
    only = run.steps["s"].attempts[0]
    assert only.outcome == "timeout"
    assert only.ended_at is not None
    assert only.ended_at >= 3600


def test_no_prelude_name_is_visible_to_scripts(worker: ScriptWorker) -> None:
    import quickjs

    bare = set(quickjs.Context().eval("JSON.stringify(Object.getOwnPropertyNames(globalThis))")
               .strip('[]').replace('"', "").split(","))
    result, _ = attempt(
        worker,
        "try { null.x } catch (e) {}\n"
        "return Object.getOwnPropertyNames(globalThis);",
    )
    assert result.outcome == "succeeded"
    assert set(result.result) - bare == set()
    scan, _ = attempt(worker, "return typeof __womlCaught + typeof __womlEmit + "
                              "typeof __womlPrelude;")
    assert scan.result == "undefined" * 3


def test_a_script_cannot_call_the_catch_hook_to_fake_out_of_memory(
    worker: ScriptWorker,
) -> None:
    result, _ = attempt(worker, "try { __womlCaught(null); } catch (e) {}\nreturn 1;")
    assert (result.outcome, result.result) == ("succeeded", 1)


def test_a_stack_overflow_is_threw_with_no_crash(worker: ScriptWorker) -> None:
    result, _ = attempt(worker, "function f(n) { return f(n + 1) + 1; }\nreturn f(0);")
    assert (result.outcome, result.error_name) == ("threw", "RangeError")
    honest_next(worker)


def test_context_steps_is_frozen_and_complete(worker: ScriptWorker) -> None:
    script = (
        "'use strict';\n"
        "const keys = Object.keys(context.steps);\n"
        "let wrote = false; try { context.steps.first = 2; wrote = true; } catch {}\n"
        "return {keys, frozen: Object.isFrozen(context.steps), wrote,"
        " has: 'first' in context.steps, missing: 'nope' in context.steps,"
        " all: {...context.steps}, json: JSON.parse(JSON.stringify(context.steps))};"
    )
    result, _ = attempt(worker, script)
    assert result.result == {
        "keys": ["first"], "frozen": True, "wrote": False, "has": True, "missing": False,
        "all": {"first": {"n": 1}}, "json": {"first": {"n": 1}},
    }


# ---- no worker is leaked ---------------------------------------------------------------


def test_no_worker_outlives_its_owner() -> None:
    before = child_pids()
    w = ScriptWorker()
    asyncio.run(w.start())
    pid = w.pid
    assert pid in child_pids()
    w.kill()
    assert pid not in child_pids()
    assert child_pids() - before == set()


# ---- more tricks ---------------------------------------------------------------------


class HeldServices:
    """Answers no call until none has arrived for ``quiet_s``: every call stays in flight
    while the script is still sending, so the kernel's in-flight budget is what bounds
    them, however slowly the machine sends (an answer after a fixed 0.3 s let the early
    calls finish before the budget filled when the machine was loaded)."""

    def __init__(self, quiet_s: float = 0.5) -> None:
        self.quiet_s = quiet_s
        self.last = time.monotonic()

    async def __call__(self, name: str, args: list[Any]) -> Any:
        self.last = time.monotonic()
        while time.monotonic() - self.last < self.quiet_s:
            await asyncio.sleep(0.05)
        return None


def test_many_large_calls_in_flight_are_bounded(worker: ScriptWorker) -> None:
    script = (
        "const big = 'x'.repeat(900 * 1024);\n"
        "const all = await Promise.allSettled("
        "Array.from({length: 60}, () => services.sleep(big)));\n"
        "return all.filter(r => r.status === 'rejected' && r.reason.name === 'RangeError')"
        ".length;"
    )
    with PeakRss() as peak:
        result, _ = attempt(worker, script, services=HeldServices())
    assert result.outcome == "succeeded"
    assert result.result > 0  # some were refused: more than 16 MiB in flight
    assert peak.growth_mib < 2 * RSS_BOUND_MIB, peak.growth_mib
    honest_next(worker)


def test_thousands_of_small_calls_all_work(worker: ScriptWorker) -> None:
    script = (
        "await Promise.all(Array.from({length: 3000}, (_, i) => services.sleep(i)));\n"
        "return 'ok';"
    )
    result, _ = attempt(worker, script)
    assert (result.outcome, result.result) == ("succeeded", "ok")


@pytest.mark.parametrize(
    ("script", "outcome", "name"),
    [
        ("throw {get name() { throw 1; }, get message() { throw 2; }};", "threw", "object"),
        ("throw new Proxy({}, {get() { throw new Error('trap'); }});", "threw", "object"),
        ("const e = new Error('m'); e.name = 'x'.repeat(1e6); throw e;", "threw", None),
        ("throw new Error('x'.repeat(5e6));", "threw", "Error"),
        ("return '\\ud800';", "invalid-json", "TypeError"),
        ("return new Proxy([1], {});", "succeeded", None),
        ("return context.steps['x'.repeat(1e6)] ?? 'none';", "succeeded", None),
        ("Object.setPrototypeOf(context.steps, null);", "threw", "TypeError"),
        ("return Reflect.ownKeys(context.steps);", "succeeded", None),
        ("queueMicrotask(() => { throw new Error('late'); }); return 1;", "succeeded", None),
        ("globalThis.Date = null; globalThis.performance = null; return 1;", "succeeded",
         None),
    ],
)
def test_odd_values_end_the_attempt_as_they_really_end(
    worker: ScriptWorker, script: str, outcome: str, name: str | None
) -> None:
    result, _ = attempt(worker, script)
    assert result.outcome == outcome, result
    if name is not None:
        assert result.error_name == name
    assert len(result.error_message or "") <= 4097
    assert len(result.error_name or "") <= 4097
    honest_next(worker)


def test_a_script_spinning_forever_ends_at_its_timeout_and_the_next_run_is_fine() -> None:
    before = child_pids()
    run = wm.run(step("console.log('spin'); while (true) {}", timeout="300ms"),
                 clock="simulated")
    assert run.steps["s"].attempts[0].outcome == "timeout"
    again = wm.run(step(HONEST), clock="simulated")
    assert again.steps["s"].attempts[0].outcome == "threw"
    assert len(child_pids() - before) <= 2  # the warm pool, nothing more


def test_reading_every_step_is_refused_past_the_memory_limit(worker: ScriptWorker) -> None:
    # Eight steps of 1.2 MiB: one fits the smallest heap allowed (8 MiB), all do not.
    steps = {f"s{i}": "x" * (1200 * 1024) for i in range(8)}
    context = {"payload": None, "steps": steps, "run": {"id": "r", "workflow": "w"}}
    one, _ = attempt(worker, "return context.steps.s3.length;", context=context,
                     memory_limit_mb=8)
    assert (one.outcome, one.result) == ("succeeded", 1200 * 1024)
    every, _ = attempt(worker, "return Object.keys(context.steps).length;", context=context,
                       memory_limit_mb=8)
    assert (every.outcome, every.error_name) == ("threw", "RangeError")
    assert "memory limit" in (every.error_message or "")
    honest_next(worker)


def test_limits_given_to_a_run_reach_its_attempts() -> None:
    from woml_magic.engine import EngineConfig
    from woml_magic.limits import Limits

    config = EngineConfig(limits=Limits(max_log_lines=2, max_json_depth=3))
    run = wm.run(step("for (let i = 0; i < 5; i++) console.log(i);\nreturn [[[[1]]]];"),
                 clock="simulated", config=config)
    only = run.steps["s"].attempts[0]
    assert only.outcome == "invalid-json"
    assert "max_json_depth" in (only.error.message if only.error else "")
    assert len(only.logs) == 3  # two lines and the truncation notice


def test_probing_many_step_names_costs_the_kernel_one_answer(worker: ScriptWorker) -> None:
    asked: list[str] = []
    original = worker_module.step_reply

    def counting(request: AttemptRequest, attempt_id: int, name: str) -> StepCommand:
        asked.append(name)
        return original(request, attempt_id, name)

    script = (
        "let found = 0;\n"
        "for (let i = 0; i < 20000; i++) if (context.steps['n' + i] !== undefined) found++;\n"
        "return [found, context.steps.first.n];"
    )
    mp = pytest.MonkeyPatch()
    mp.setattr(worker_module, "step_reply", counting)
    try:
        result, _ = attempt(worker, script)
    finally:
        mp.undo()
    assert (result.outcome, result.result) == ("succeeded", [0, 1])
    assert len(asked) <= 300


@pytest.mark.parametrize("catching", [False, True])
def test_a_long_script_run_again_behaves_the_same(worker: ScriptWorker, catching: bool) -> None:
    """From its second attempt a long script is read from bytecode (runtime._contexts.Scripts)."""
    filler = "// " + "x" * 500 + "\n"
    body = "try { null.x; } catch (e) { console.log(String(e)); }\n" if catching else ""
    script = filler + body + "const n = context.steps.first.n;\nthrow new Error('n=' + n);"
    seen = []
    for _ in range(4):
        result, logs = attempt(worker, script)
        seen.append((result.outcome, result.error_message, result.error_line, len(logs)))
    line = 4 if catching else 3
    assert seen == [("threw", "n=1", line, int(catching))] * 4
    breakout, _ = attempt(worker, filler + "return 1 }); (async function () {")
    again, _ = attempt(worker, filler + "return 1 }); (async function () {")
    assert breakout.error_name == again.error_name == "SyntaxError"
    honest_next(worker)


def test_a_long_script_that_catches_out_of_memory_is_crash_every_time(
    worker: ScriptWorker,
) -> None:
    filler = "// " + "x" * 500 + "\n"
    script = filler + (
        "try { let a = []; while (true) a.push(new Array(1000).fill(1.5)); } catch (e) { }\n"
        "return 'survived';"
    )
    for _ in range(3):
        result, _ = attempt(worker, script, memory_limit_mb=16)
        assert (result.outcome, result.error_name) == ("crash", "InternalError")
    honest_next(worker)
