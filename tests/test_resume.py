"""Resume and reattach across real process deaths (spec §5.2, §5.3, §4.3 across resumes).

A child process (``tests/crash_child.py``) stands in for a notebook kernel: it runs a
real-clock workflow with a journal file against a ``DemoAPI`` served by *this* test
process, so the test counts every request and record the child caused. The test
kills the child with SIGKILL at a chosen instant — during a script, with a request
in flight, during a wait between attempts, between steps — or at seeded random
instants, then resumes the run here with ``wm.run(doc, journal=path, resume=run_id)``
and checks what spec §5.3 promises.

The child prints each event after the journal's ``append`` returned, so "no event
recorded before the kill is lost" is checked against what the child saw committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import woml_magic as wm
from woml_magic.demo import DemoAPI
from woml_magic.errors import WomlError
from woml_magic.events import CallStarted, RunResumed, WaitScheduled
from woml_magic.journal import Journal
from woml_magic.model import idempotency_key

REPO = Path(__file__).resolve().parents[1]
CHILD = REPO / "tests" / "crash_child.py"


def checkout_doc(retry_delay: str) -> str:
    """Two steps with named, keyed calls to the demo API (spec §4.1, §4.3).

    The payload steers the scripts so one document serves every crash instant, and a
    resumed run (which reuses the journaled payload, spec §5.3) behaves the same:
    ``throwFirst`` makes charge's attempt 1 throw after its call succeeded; ``spinOn``
    makes that attempt number busy-loop; ``customerSleep`` sleeps after the customer
    call; ``sleepAfterCharge`` sleeps after the charge call.
    """
    return f"""<workflow id="checkout">
  <step id="customer" retry="2" retry-delay="50ms">
    <script>
      const p = context.payload;
      const r = await services.http.request({{
        method: "POST", url: p.url + "/customers", json: {{email: "ada@example.com"}},
        idempotency: {{header: "Idempotency-Key", value: attempt.idempotencyKey}}
      }}, {{name: "create-customer"}});
      if (p.customerSleep) await services.sleep(p.customerSleep);
      return {{id: r.data.id}};
    </script>
  </step>
  <step id="charge" retry="3" retry-delay="{retry_delay}">
    <script>
      const p = context.payload;
      const r = await services.http.request({{
        method: "POST", url: p.url + "/charges",
        json: {{amount: 4200, currency: "usd", customer: context.steps.customer.id}},
        idempotency: {{header: "Idempotency-Key", value: attempt.idempotencyKey}}
      }}, {{name: "charge"}});
      if (p.sleepAfterCharge) await services.sleep(p.sleepAfterCharge);
      if (attempt.number === 1 && p.throwFirst) throw new Error("card declined, try again");
      if (attempt.number === p.spinOn) {{ while (true) {{}} }}
      return {{id: r.data.id, replayed: r.replayed, key: attempt.idempotencyKey}};
    </script>
  </step>
</workflow>"""


DOC = checkout_doc("100ms")
WAIT_DOC = checkout_doc("2s")

#: spec §5.3, verbatim: the error message of an attempt found open on resume.
INTERRUPTED_2 = (
    "attempt 2 of charge was interrupted; whether its effects happened is unknown. "
    "Check the external system, then resume with --retry-interrupted to run it again "
    "with the same idempotency key."
)
INTERRUPTED_1 = INTERRUPTED_2.replace("attempt 2 of", "attempt 1 of")


# -- the child process ------------------------------------------------------------------


class Child:
    """One ``crash_child.py`` process; the lines it prints arrive through a queue."""

    def __init__(self, tmp: Path, spec: dict[str, Any]) -> None:
        self.run_id: str = spec["run_id"]
        self.started = time.monotonic()
        self.started_wall = time.time()
        self._stderr_path = tmp / f"{self.run_id}.stderr"
        with self._stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(CHILD), json.dumps(spec)],
                stdout=subprocess.PIPE, stderr=err, cwd=REPO,
            )
        self.lines: list[dict[str, Any]] = []
        self._queue: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._closed = False

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            # Each line is one write() shorter than PIPE_BUF, so a kill cannot split it;
            # skip anything else rather than die in this thread.
            with contextlib.suppress(ValueError):
                self._queue.put(json.loads(raw))
        self._queue.put(None)

    def _take(self, timeout: float) -> dict[str, Any] | None:
        item = self._queue.get(timeout=timeout)
        if item is None:
            raise AssertionError(f"child {self.run_id} exited early: {self.stderr()}")
        self.lines.append(item)
        return item

    def wait_for(self, wanted: Callable[[dict[str, Any]], bool], timeout: float = 30.0
                 ) -> dict[str, Any]:
        """Consume lines until one satisfies ``wanted``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self._take(max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"child {self.run_id} never printed the awaited line; "
                                     f"it printed {self.lines}") from None
            if item is not None and wanted(item):
                return item

    def collect_until(self, deadline: float) -> None:
        """Consume lines until ``deadline`` (monotonic) or the end of output."""
        while (left := deadline - time.monotonic()) > 0:
            try:
                item = self._queue.get(timeout=left)
            except queue.Empty:
                return
            if item is None:
                self._queue.put(None)
                return
            self.lines.append(item)

    def worker_pids(self) -> set[int]:
        """The script worker processes this child started (read from /proc)."""
        kids: set[int] = set()
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            text = (task / "children").read_text()
            kids |= {int(p) for p in text.split()}
        return kids

    def kill(self) -> None:
        """SIGKILL the child, as `kill -9` of a kernel (spec §5.2)."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.close()

    def finish(self, timeout: float = 30.0) -> str:
        """Wait for the run to end on its own; return its status."""
        done = self.wait_for(lambda line: "done" in line, timeout)
        self.close()
        return str(done["done"])

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join(10)
        while True:
            item = self._queue.get_nowait() if not self._queue.empty() else None
            if item is None:
                break
            self.lines.append(item)
        assert self.proc.stdout is not None
        self.proc.stdout.close()

    def stderr(self) -> str:
        return self._stderr_path.read_text(errors="replace")[-3000:]

    @property
    def events(self) -> list[tuple[Any, ...]]:
        """(kind, step, number) of every event the child saw journaled."""
        return [(e["kind"], e["step"], e["number"]) for e in self.lines if "event" in e]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Child]]:
    children: list[Child] = []

    def start(run_id: str, doc: str, payload: dict[str, Any], journal: Path,
              pause_after_step: str | None = None) -> Child:
        child = Child(tmp_path, {"run_id": run_id, "doc": doc, "payload": payload,
                                 "journal": str(journal), "pause_after_step": pause_after_step})
        children.append(child)
        return child

    yield start
    for child in children:
        child.close()


@pytest.fixture
def api() -> Iterator[DemoAPI]:
    with DemoAPI() as demo:
        yield demo


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "journal.sqlite3"


# -- helpers ----------------------------------------------------------------------------


def journaled(path: Path, run_id: str) -> list[tuple[Any, ...]]:
    with Journal(path) as jr:
        return [(e.kind, getattr(e, "step_id", None), getattr(e, "number", None))
                for e in jr.events(run_id)]


def assert_nothing_lost(child: Child, path: Path) -> list[tuple[Any, ...]]:
    """spec §5.2: every event the child saw committed is in the journal, in order.

    The kill may land between an append and its print, so the journal may hold one
    event more than the child printed, never fewer.
    """
    printed = child.events
    stored = journaled(path, child.run_id) if printed or path.exists() else []
    assert stored[: len(printed)] == printed
    assert len(stored) - len(printed) in (0, 1)
    return stored


def requests_to(api: DemoAPI, path: str, key: str | None = None) -> int:
    return sum(1 for r in api.requests
               if r.path == path and (key is None or r.idempotency_key == key))


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def outcomes(run: wm.Run, step: str) -> list[str]:
    return [a.outcome for a in run.steps[step].attempts]


def events_after_last_resume(run: wm.Run) -> list[tuple[Any, ...]]:
    last = max(i for i, e in enumerate(run.events) if isinstance(e, RunResumed))
    return [(e.kind, getattr(e, "step_id", None), getattr(e, "number", None))
            for e in run.events[last:]]


def is_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (gone, or a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


# -- kill during a script ---------------------------------------------------------------


def test_kill_during_a_script_interrupts_that_attempt_and_fails_closed(
    spawn: Callable[..., Child], api: DemoAPI, journal_path: Path
) -> None:
    """spec §5.3: the open attempt becomes `interrupted` with the spec's message; the
    succeeded step is reattached, not re-run; the history from before is kept."""
    child = spawn("run-script", DOC, {"url": api.url, "throwFirst": True, "spinOn": 2},
                  journal_path)
    # Attempt 2 of charge reattached its call (spec §4.3), then busy-loops in the worker.
    child.wait_for(lambda e: e.get("kind") == "call-finished" and e["number"] == 2)
    workers = child.worker_pids()
    assert workers, "the script worker should be running the busy loop"
    child.kill()
    # spec §4.5: the worker dies with its kernel; no orphan keeps spinning.
    wait_until(lambda: all(is_gone(pid) for pid in workers))
    before = assert_nothing_lost(child, journal_path)
    assert requests_to(api, "/customers") == 1
    assert requests_to(api, "/charges") == 1

    run = wm.run(DOC, journal=str(journal_path), resume="run-script")

    assert run.status == "failed"
    assert run.steps["customer"].status == "reattached"
    assert run.steps["customer"].result == {"id": "cus_0001"}
    charge = run.steps["charge"]
    assert charge.status == "failed-closed"
    assert outcomes(run, "charge") == ["threw", "interrupted"]
    assert len(charge.waits) == 1  # the wait before attempt 2, from before the kill
    assert charge.waits[0] >= 0.1
    error = charge.attempts[1].error
    assert error is not None
    assert error.message == INTERRUPTED_2
    assert "--retry-interrupted" in charge.attempts[1].explanation
    # Nothing was sent again, and the journal still starts with the pre-kill history.
    assert requests_to(api, "/customers") == 1
    assert requests_to(api, "/charges") == 1
    assert journaled(journal_path, "run-script")[: len(before)] == before


def test_retry_interrupted_starts_the_next_attempt_at_once_with_the_same_key(
    spawn: Callable[..., Child], api: DemoAPI, journal_path: Path
) -> None:
    """spec §5.3: with --retry-interrupted the interrupted attempt counts as used and the
    next one starts at once (no wait), with the same idempotency key (spec §3.5)."""
    child = spawn("run-retry", DOC, {"url": api.url, "throwFirst": True, "spinOn": 2},
                  journal_path)
    child.wait_for(lambda e: e.get("kind") == "call-finished" and e["number"] == 2)
    child.kill()
    assert_nothing_lost(child, journal_path)
    first = wm.run(DOC, journal=str(journal_path), resume="run-retry")
    assert outcomes(first, "charge") == ["threw", "interrupted"]
    with Journal(journal_path) as jr:
        count = len(jr.events("run-retry"))

    # Resuming again without the flag changes nothing: the step stays failed closed.
    again = wm.run(DOC, journal=str(journal_path), resume="run-retry")
    assert again.steps["charge"].status == "failed-closed"
    with Journal(journal_path) as jr:
        assert len(jr.events("run-retry")) == count

    run = wm.run(DOC, journal=str(journal_path), resume="run-retry", retry_interrupted=True)

    assert run.status == "succeeded"
    charge = run.steps["charge"]
    assert outcomes(run, "charge") == ["threw", "interrupted", "succeeded"]
    assert [a.number for a in charge.attempts] == [1, 2, 3]
    assert events_after_last_resume(run)[:4] == [
        ("run-resumed", None, None),
        ("step-finished", "customer", None),
        ("step-started", "charge", None),
        ("attempt-started", "charge", 3),  # at once: no wait-scheduled before it
    ]
    key = idempotency_key("run-retry", "charge")
    assert {a.idempotency_key for a in charge.attempts} == {key}
    assert charge.result == {"id": "ch_0001", "replayed": True, "key": key}
    # spec §4.3: the charge's 2xx was journaled in attempt 1: reattached, never re-sent.
    assert charge.attempts[2].calls[0].replayed
    assert requests_to(api, "/charges") == 1
    assert len(api.records("charges")) == 1
    assert len(run.resumes) == 2  # the resume that changed nothing appended nothing


# -- kill with a request in flight ------------------------------------------------------


def test_kill_with_a_request_in_flight_resends_it_only_when_asked_and_with_the_same_key(
    spawn: Callable[..., Child], api: DemoAPI, journal_path: Path
) -> None:
    """spec §5.3 + §4.3: a call with no journaled response is not reattached; the
    interrupted attempt fails closed, and --retry-interrupted repeats the request with
    the same key, which the API's key contract turns into a replay (spec §8)."""
    api.delay_next(1, 0.0)  # the customer request: answered at once
    api.delay_next(1, 1.0)  # the charge request: held while the child is killed
    child = spawn("run-inflight", DOC, {"url": api.url}, journal_path)
    wait_until(lambda: requests_to(api, "/charges") == 1)
    child.kill()
    stored = assert_nothing_lost(child, journal_path)
    assert stored[-1] == ("call-started", "charge", 1)  # committed before the request left

    run = wm.run(DOC, journal=str(journal_path), resume="run-inflight")
    charge = run.steps["charge"]
    assert (run.status, charge.status) == ("failed", "failed-closed")
    assert outcomes(run, "charge") == ["interrupted"]
    error = charge.attempts[0].error
    assert error is not None
    assert error.message == INTERRUPTED_1
    call = charge.attempts[0].calls[0]
    assert (call.name, call.outcome, call.replayed) == ("charge", "ambiguous", False)
    assert requests_to(api, "/charges") == 1

    # The held request finishes on the server (its record exists); then retry.
    wait_until(lambda: all(r.answered for r in api.requests))
    run = wm.run(DOC, journal=str(journal_path), resume="run-inflight", retry_interrupted=True)

    assert run.status == "succeeded"
    assert outcomes(run, "charge") == ["interrupted", "succeeded"]
    key = idempotency_key("run-inflight", "charge")
    sent = [r for r in api.requests if r.path == "/charges"]
    assert [r.idempotency_key for r in sent] == [key, key]
    assert [r.outcome for r in sent] == ["executed", "replayed"]
    assert len(api.records("charges")) == 1  # one charge, despite two requests
    assert requests_to(api, "/customers") == 1  # the customer step was reattached


def test_retry_interrupted_also_runs_the_steps_an_earlier_resume_left_not_run(
    spawn: Callable[..., Child], api: DemoAPI, journal_path: Path
) -> None:
    """spec §5.3: after a resume that failed closed (later steps `not-run`), a resume with
    --retry-interrupted continues the interrupted step and then runs the later steps."""
    api.delay_next(1, 1.0)  # the customer request: held while the child is killed
    child = spawn("run-notrun", DOC, {"url": api.url}, journal_path)
    wait_until(lambda: requests_to(api, "/customers") == 1)
    child.kill()
    assert_nothing_lost(child, journal_path)
    first = wm.run(DOC, journal=str(journal_path), resume="run-notrun")
    assert (first.steps["customer"].status, first.steps["charge"].status) == (
        "failed-closed", "not-run")
    wait_until(lambda: all(r.answered for r in api.requests))

    run = wm.run(DOC, journal=str(journal_path), resume="run-notrun", retry_interrupted=True)

    assert run.status == "succeeded"
    assert outcomes(run, "customer") == ["interrupted", "succeeded"]
    assert outcomes(run, "charge") == ["succeeded"]
    assert [r.outcome for r in api.requests] == ["executed", "replayed", "executed"]
    assert len(api.records("customers")) == 1


# -- kill during a wait -----------------------------------------------------------------


def test_kill_during_a_wait_continues_the_schedule_without_a_new_full_wait(
    spawn: Callable[..., Child], api: DemoAPI, journal_path: Path
) -> None:
    """spec §5.3: a step that was in a wait continues the schedule — attempt 2 starts at
    the journaled due time on the run's real clock, which kept running while the
    process was dead; no wait is scheduled again and no attempt number repeats."""
    child = spawn("run-wait", WAIT_DOC, {"url": api.url, "throwFirst": True}, journal_path)
    child.wait_for(lambda e: e.get("kind") == "wait-scheduled")
    child.kill()
    assert_nothing_lost(child, journal_path)
    gap = 0.6
    time.sleep(gap)  # the process stays dead for a while: that time is part of the wait

    run = wm.run(WAIT_DOC, journal=str(journal_path), resume="run-wait")

    charge = run.steps["charge"]
    assert run.status == "succeeded"
    assert outcomes(run, "charge") == ["threw", "succeeded"]
    assert [a.number for a in charge.attempts] == [1, 2]
    waits = [e for e in run.events if isinstance(e, WaitScheduled)]
    assert len(waits) == 1
    assert (waits[0].after_attempt, waits[0].seconds) == (1, 2.0)
    resumed = next(e for e in run.events if isinstance(e, RunResumed))
    assert resumed.at >= waits[0].at + gap  # the dead time counted on the run's clock
    assert charge.attempts[1].started_at >= waits[0].due  # the schedule is kept
    assert charge.waits[0] >= 2.0
    assert charge.attempts[1].calls[0].replayed  # attempt 2 reattached the journaled 2xx
    assert requests_to(api, "/charges") == 1


# -- kill between steps -----------------------------------------------------------------


def test_kill_between_steps_reattaches_the_finished_step_and_runs_the_next(
    spawn: Callable[..., Child], api: DemoAPI, journal_path: Path
) -> None:
    """spec §5.3: a succeeded step's result comes from the journal (not re-run) and
    feeds `context.steps` of the steps that run after the resume (spec §3.6)."""
    child = spawn("run-between", DOC, {"url": api.url}, journal_path, "customer")
    child.wait_for(lambda line: line.get("paused") == "customer")
    child.kill()
    stored = assert_nothing_lost(child, journal_path)
    assert stored[-1] == ("step-finished", "customer", None)

    run = wm.run(DOC, journal=str(journal_path), resume="run-between")

    assert run.status == "succeeded"
    assert run.steps["customer"].status == "reattached"
    assert outcomes(run, "customer") == ["succeeded"]
    assert outcomes(run, "charge") == ["succeeded"]
    assert requests_to(api, "/customers") == 1
    assert requests_to(api, "/charges") == 1
    assert api.records("charges")[0]["customer"] == run.steps["customer"].result["id"]


# -- finished runs, wrong documents, unknown ids -----------------------------------------


def test_resuming_a_finished_run_re_executes_nothing_and_appends_nothing(
    api: DemoAPI, journal_path: Path
) -> None:
    """spec §5.3: every step of a finished run is already decided."""
    done = wm.run(DOC, payload={"url": api.url, "throwFirst": True}, run_id="run-done",
                  journal=str(journal_path))
    assert done.status == "succeeded"
    with Journal(journal_path) as jr:
        count = len(jr.events("run-done"))
    sent = len(api.requests)

    for retry in (False, True):
        again = wm.run(DOC, journal=str(journal_path), resume="run-done",
                       retry_interrupted=retry)
        assert again.status == "succeeded"
        assert again.steps["charge"].result == done.steps["charge"].result
        assert outcomes(again, "charge") == ["threw", "succeeded"]
        # spec §5.3, §7: a step whose result comes from the journal is `reattached`.
        assert {s.status for s in again.steps.values()} == {"reattached"}
    assert len(api.requests) == sent
    with Journal(journal_path) as jr:
        assert len(jr.events("run-done")) == count


def test_resuming_with_a_changed_document_names_the_run(
    api: DemoAPI, journal_path: Path
) -> None:
    """spec §5.3, §7: a document whose fingerprint differs raises `WomlError`."""
    wm.run(DOC, payload={"url": api.url}, run_id="run-fp", journal=str(journal_path))
    changed = DOC.replace("amount: 4200", "amount: 4300")
    with pytest.raises(WomlError, match="run-fp"):
        wm.run(changed, journal=str(journal_path), resume="run-fp")
    # Formatting outside scripts is not part of the fingerprint (model.Workflow).
    reformatted = "<!-- the same workflow -->\n" + DOC.replace('retry="2" ', 'retry="2"  ')
    assert wm.run(reformatted, journal=str(journal_path), resume="run-fp").status == "succeeded"


def test_resuming_an_unknown_run_id_is_a_clear_error(journal_path: Path) -> None:
    """spec §5.3: an unknown run id is an error that names it and how to list runs."""
    with pytest.raises(WomlError, match=r"no run 'run-nope'.*runs"):
        wm.run(DOC, journal=str(journal_path), resume="run-nope")


# -- secrets ----------------------------------------------------------------------------


SECRET_DOC = """<step id="secret">
  <script>
    // Built at run time, so only the request (never the document) holds the secret.
    const token = ["sk", "live", "SECRET"].join("_");
    const r = await services.http.request({
      method: "POST", url: context.payload.url + "/customers",
      headers: {Authorization: "Bearer " + token}, json: {email: "ada@example.com"}
    }, {name: "create"});
    return r.status;
  </script>
</step>"""


def test_secrets_sent_in_headers_never_reach_the_journal_files(
    api: DemoAPI, journal_path: Path
) -> None:
    """spec §4.1, §5.2: sensitive headers are journaled as •••, in the db and its -wal."""
    wm.run(SECRET_DOC, payload={"url": api.url}, run_id="run-secret", journal=str(journal_path))
    # A reader connection keeps the -wal from being folded away on the writer's close.
    reader = sqlite3.connect(journal_path)
    try:
        reader.execute("SELECT COUNT(*) FROM events").fetchone()
        run = wm.run(SECRET_DOC, payload={"url": api.url}, run_id="run-secret-2",
                     journal=str(journal_path))
        assert run.status == "succeeded"
        sent = [{k.lower(): v for k, v in r.headers.items()} for r in api.requests]
        assert [h["authorization"] for h in sent] == ["Bearer sk_live_SECRET"] * 2
        wal = Path(f"{journal_path}-wal")
        assert wal.stat().st_size > 0
        for path in (journal_path, wal, Path(f"{journal_path}-shm")):
            assert b"sk_live_SECRET" not in path.read_bytes(), path.name
    finally:
        reader.close()
    with Journal(journal_path) as jr:
        started = [e for e in jr.events("run-secret-2") if isinstance(e, CallStarted)]
    assert started[0].request_headers["Authorization"] == "•••"


# -- concurrency on one journal file ---------------------------------------------------


def test_two_runs_at_once_in_one_process_share_the_journal_safely(
    api: DemoAPI, journal_path: Path
) -> None:
    """spec §5.2: concurrent runs on one file interleave their events without damage."""
    payload = {"url": api.url, "customerSleep": "100ms", "throwFirst": True}

    async def both() -> list[wm.Run]:
        return list(await asyncio.gather(
            wm.run_async(DOC, payload, run_id="run-x", journal=str(journal_path)),
            wm.run_async(DOC, payload, run_id="run-y", journal=str(journal_path)),
        ))

    runs = asyncio.run(both())
    assert [r.status for r in runs] == ["succeeded", "succeeded"]
    with Journal(journal_path) as jr:
        jr.check()
        assert {s.run_id: s.status for s in jr.runs()} == {
            "run-x": "succeeded", "run-y": "succeeded"}
        for live in runs:
            loaded = jr.load(live.id)
            assert [e.to_dict() for e in loaded.events] == [e.to_dict() for e in live.events]


def test_two_processes_on_one_journal_file_never_corrupt_it(
    spawn: Callable[..., Child], api: DemoAPI, journal_path: Path
) -> None:
    """spec §5.2: two kernels journaling to one file at once."""
    payload = {"url": api.url, "customerSleep": "100ms", "throwFirst": True}
    children = [spawn(f"run-proc-{i}", DOC, payload, journal_path) for i in range(2)]
    assert [c.finish() for c in children] == ["succeeded", "succeeded"]
    with Journal(journal_path) as jr:
        jr.check()
        for child in children:
            assert jr.load(child.run_id).status == "succeeded"
    for child in children:
        assert journaled(journal_path, child.run_id) == child.events


# -- SIGKILL at random instants ---------------------------------------------------------

RANDOM_KILLS = 50
RANDOM_PAYLOAD_KEYS = {"throwFirst": True, "customerSleep": "80ms", "sleepAfterCharge": "60ms"}


def _reattachable(run: wm.Run) -> list[tuple[str, str]]:
    """(idempotency key, path) of every named call whose 2xx response is journaled."""
    found = []
    for sr in run.steps.values():
        for attempt in sr.attempts:
            for call in attempt.calls:
                if call.name and call.status is not None and 200 <= call.status < 300:
                    found.append((sr.idempotency_key, call.url.rsplit("/", 1)[1]))
    return found


def test_sigkill_at_random_instants_never_loses_or_duplicates_anything(
    spawn: Callable[..., Child], api: DemoAPI, tmp_path: Path
) -> None:
    """spec §5.2, §5.3, §4.3 at 50 seeded random instants across the whole workflow:
    the journal opens and every run loads; no event the child saw committed is lost; a
    resume never re-sends a named call whose 2xx response was journaled; and with
    --retry-interrupted every run ends succeeded with exactly one customer and one
    charge executed per run (its idempotency keys absorb the rest)."""
    payload = {"url": api.url, **RANDOM_PAYLOAD_KEYS}
    calibrate = spawn("run-calibrate", DOC, payload, tmp_path / "calibrate.sqlite3")
    assert calibrate.finish() == "succeeded"
    span = time.monotonic() - calibrate.started
    # Start the window a little before run-started, so kills also land while the
    # journal file is being created; earlier instants only repeat "nothing happened".
    first_event = next(line for line in calibrate.lines if "event" in line)
    opening = max(0.0, first_event["wall"] - calibrate.started_wall - 0.05)
    rng = random.Random(20240605)
    killed_in: Counter[str] = Counter()
    for i in range(RANDOM_KILLS):
        rid = f"run-rand-{i}"
        path = tmp_path / f"rand-{i}.sqlite3"
        child = spawn(rid, DOC, payload, path)
        child.collect_until(child.started + rng.uniform(opening, span))
        child.kill()
        if not path.exists():
            killed_in["before the journal"] += 1
            continue
        with Journal(path) as jr:
            jr.check()
            runs = [s.run_id for s in jr.runs()]
            for run_id in runs:
                jr.load(run_id)
        if rid not in runs:
            killed_in["before the run started"] += 1
            continue
        assert_nothing_lost(child, path)
        with Journal(path) as jr:
            before = jr.load(rid)
        killed_in[_where(before)] += 1
        keyed = _reattachable(before)
        sent = Counter((r.idempotency_key, r.path.lstrip("/")) for r in api.requests)

        run = wm.run(DOC, journal=str(path), resume=rid, retry_interrupted=True)

        assert run.status == "succeeded", (i, _where(before))
        after = Counter((r.idempotency_key, r.path.lstrip("/")) for r in api.requests)
        for key_path in keyed:
            assert after[key_path] == sent[key_path], (i, key_path)
        for step, path_name in (("customer", "customers"), ("charge", "charges")):
            key = idempotency_key(rid, step)
            executed = [r for r in api.requests
                        if r.idempotency_key == key and r.outcome == "executed"]
            assert len(executed) == 1, (i, step, path_name)
    # The seeded instants really spread over the workflow.
    assert len(killed_in) >= 4, killed_in


def _where(run: wm.Run) -> str:
    """Where a run stood when it was killed: the last event's kind and step."""
    last = run.events[-1]
    return f"{last.kind} {getattr(last, 'step_id', '')}".strip()



KILLED_WHILE_CREATING = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("VACUUM")  # an empty database with its header, as after the WAL switch began
conn.execute("PRAGMA cache_size = 1")  # spill pages to the file before the commit
conn.execute("BEGIN")
conn.execute("CREATE TABLE filler(x)")
for _ in range(200):
    conn.execute("INSERT INTO filler VALUES (randomblob(2000))")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_journal_whose_creator_was_killed_before_its_first_commit_opens(
    journal_path: Path,
) -> None:
    """spec §5.2: `kill -9` at any instant — even while a new file is still in rollback
    mode (as while it switches to WAL) — leaves a journal that opens. Found by the
    random kills above: a hot `-journal` made the read-only inspection fail."""
    child = subprocess.run([sys.executable, "-c", KILLED_WHILE_CREATING, str(journal_path)],
                           check=False)
    assert child.returncode == -signal.SIGKILL
    assert Path(f"{journal_path}-journal").exists()  # a hot journal was left behind
    with journal_path.open("rb") as fh:
        assert fh.read(16) == b"SQLite format 3\x00"

    with Journal(journal_path) as jr:
        jr.check()
        assert jr.runs() == []
    run = wm.run('<step id="s"><script>return 1;</script></step>', run_id="run-after",
                 journal=str(journal_path), clock="simulated")
    assert run.status == "succeeded"
    with Journal(journal_path) as jr:
        assert jr.load("run-after").steps["s"].result == 1
