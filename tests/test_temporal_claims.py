"""On Temporal too a run id runs once (spec §5.2, §9).

A second *new* run under a run id Temporal already holds — finished or running — is
refused with a sentence naming the run, and Temporal keeps exactly one execution of
it: the same idempotency keys are never sent by a second run. (A resume is the one
deliberate second execution, spec §5.3: tests/test_temporal.py resumes on Temporal.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import woml_magic as wm
from woml_magic.demo import DemoAPI
from woml_magic.errors import WomlRunError
from woml_magic.runloop import RunTask, run_loop

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

temporal_server = pytest.importorskip("woml_magic.temporal.server")

QUEUE = "claims"


@pytest.fixture(scope="module")
def where() -> Iterator[dict[str, str]]:
    """A dev server and a worker for the queue, in this process (as in a kernel)."""
    from woml_magic.temporal.options import TemporalOptions
    from woml_magic.temporal.worker import serve

    with temporal_server.DevServer() as dev:
        options = TemporalOptions(target=dev.address, task_queue=QUEUE)
        ready = threading.Event()
        task: RunTask[None] = run_loop().submit(serve(options, ready=ready.set))
        assert ready.wait(30), "the in-process worker did not start"
        yield {"target": dev.address, "task_queue": QUEUE}
        task.cancel()
        task.wait(10)


def charge(url: str) -> str:
    return f"""<workflow id="pay"><step id="charge"><script>
      const r = await services.http.request({{method: "POST", url: "{url}/charges",
        json: {{amount: 100, currency: "usd"}},
        idempotency: {{header: "Idempotency-Key", value: attempt.idempotencyKey}}}});
      return r.data.id;
    </script></step></workflow>"""


def executions(where: dict[str, str], run_id: str) -> int:
    from temporalio.client import Client

    async def count() -> int:
        client = await Client.connect(where["target"])
        return len([w async for w in client.list_workflows(f"WorkflowId = '{run_id}'")])

    return run_loop().submit(count()).result()


def test_a_finished_run_id_is_refused_not_run_again_with_the_same_keys(
    where: dict[str, str],
) -> None:
    run_id = f"once-{time.monotonic_ns()}"
    with DemoAPI() as api:
        first = wm.run(charge(api.url), run_id=run_id, engine="temporal", temporal=where)
        assert first.status == "succeeded"
        sent = len(api.requests)
        with pytest.raises(WomlRunError) as refused:
            wm.run(charge(api.url), run_id=run_id, engine="temporal", temporal=where)
        assert len(api.requests) == sent  # nothing was sent again under its keys
    message = str(refused.value)
    assert message.startswith(
        f"run {run_id!r} already ran on Temporal (namespace default, completed); a run id runs once"
    )
    assert f"resume={run_id!r}" in message
    assert executions(where, run_id) == 1


def test_a_running_run_id_is_refused_as_running(where: dict[str, str]) -> None:
    run_id = f"busy-{time.monotonic_ns()}"
    doc = (
        '<workflow id="w"><step id="s"><script>await services.sleep("2s"); return 1;'
        "</script></step></workflow>"
    )
    handle = wm.start(doc, run_id=run_id, engine="temporal", temporal=where)
    try:
        deadline = time.monotonic() + 20
        while not handle.run.events and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(
            WomlRunError,
            match=rf"^run {run_id!r} is already running on "
            r"Temporal \(namespace default\)",
        ):
            wm.run(doc, run_id=run_id, engine="temporal", temporal=where)
    finally:
        assert handle.result(timeout=30).status == "succeeded"
    assert executions(where, run_id) == 1


def test_a_run_journaled_from_temporal_passes_the_journals_checks(
    where: dict[str, str], tmp_path: Path
) -> None:
    """spec §5.2: what the Temporal engine journals is an order that can happen."""
    from woml_magic.journal import Journal

    path = tmp_path / "j.sqlite3"
    doc = (
        '<workflow id="w"><step id="s" retry="3" retry-delay="50ms"><script>'
        "console.log('try', attempt.number);"
        "if (attempt.number < 3) throw new Error('busy'); return attempt.number;"
        "</script></step></workflow>"
    )
    run = wm.run(doc, engine="temporal", temporal=where, journal=str(path))
    assert run.status == "succeeded"
    with Journal(path) as jr:
        loaded = jr.load(run.id)
    assert [(a.number, a.outcome) for a in loaded.steps["s"].attempts] == [
        (1, "threw"),
        (2, "threw"),
        (3, "succeeded"),
    ]
