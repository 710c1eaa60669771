"""How the kernel ends and keeps a worker between attempts (spec §3.2, §4.5): the
attempt's deadline (its timeout on the run's clock, ``run_attempt(deadline=...)``), and
a worker whose loop keeps listening to it between attempts (``keep_listening``, the
lab's workers)."""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from typing import Any

from conftest import child_pids

from woml_magic.lab.runner import collector_paused
from woml_magic.runtime import AttemptRequest, AttemptResult, ScriptWorker
from woml_magic.runtime.commands import run_line
from woml_magic.runtime.protocol import RunCommand
from woml_magic.runtime.transport import ChildProcess
from woml_magic.services.registry import SERVICE_NAMES


def request(script: str) -> AttemptRequest:
    return AttemptRequest(script=script, script_line=1, script_column=1,
                          context={"payload": {"n": 1}, "steps": {}, "run": {"id": "r"}},
                          attempt={"number": 1, "maxAttempts": 1, "idempotencyKey": "k"},
                          now_ms=lambda: 0.0)


async def no_services(name: str, args: list[Any]) -> Any:
    raise AssertionError(f"unexpected service call {name}")


async def run(worker: ScriptWorker, script: str,
              deadline: asyncio.Future[None] | None = None) -> AttemptResult:
    return await worker.run_attempt(request(script), no_services, lambda level, text: None,
                                    deadline=deadline)


# ---- the deadline ------------------------------------------------------------------


def test_a_deadline_ends_an_endless_script_timeout_and_kills_only_its_process() -> None:
    """spec §4.5: the kernel enforces the timeout; ``while (true) {}`` ends, the process
    is killed, and the next attempt runs in a fresh one."""
    worker = ScriptWorker()

    async def main() -> tuple[AttemptResult, int | None, int | None, AttemptResult]:
        await worker.start()
        first_pid = worker.pid
        deadline = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.3, deadline.set_result, None)
        ended = await run(worker, "while (true) {}", deadline)
        killed = worker.pid
        after = await run(worker, "return 2")
        assert worker.pid not in (None, first_pid)
        return ended, first_pid, killed, after

    try:
        ended, first_pid, killed, after = asyncio.run(main())
    finally:
        worker.kill()
    assert ended.outcome == "timeout"
    assert first_pid is not None
    assert killed is None  # SIGKILLed at the deadline
    assert (after.outcome, after.result) == ("succeeded", 2)


def test_an_attempt_that_ends_first_leaves_its_deadline_unheard() -> None:
    worker = ScriptWorker()

    async def main() -> tuple[AttemptResult, AttemptResult, bool]:
        deadline = asyncio.get_running_loop().create_future()
        result = await run(worker, "return 1", deadline)
        pid = worker.pid
        deadline.set_result(None)  # rings after the attempt: nothing listens any more
        await asyncio.sleep(0.05)
        second = await run(worker, "return 3")
        return result, second, worker.pid == pid

    try:
        result, second, same = asyncio.run(main())
    finally:
        worker.kill()
    assert (result.outcome, result.result) == ("succeeded", 1)
    assert (second.outcome, second.result) == ("succeeded", 3)
    assert same  # the late deadline killed nothing


def test_a_deadline_called_off_mid_attempt_ends_nothing() -> None:
    worker = ScriptWorker()

    async def main() -> AttemptResult:
        deadline = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.05, deadline.cancel)
        script = "let n = 0; for (let i = 0; i < 5e6; i++) n += i; return 5;"
        return await run(worker, script, deadline)

    try:
        result = asyncio.run(main())
    finally:
        worker.kill()
    assert (result.outcome, result.result) == ("succeeded", 5)


def test_a_deadline_during_the_workers_start_ends_the_attempt_and_the_start() -> None:
    before = set(child_pids())
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]  # never says ready
    worker = ScriptWorker(start_process=lambda: ChildProcess(slow))

    async def main() -> AttemptResult:
        deadline = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.2, deadline.set_result, None)
        return await run(worker, "return 1", deadline)

    try:
        assert asyncio.run(main()).outcome == "timeout"
        assert worker.pid is None
        assert not (set(child_pids()) - before)
    finally:
        worker.kill()


# ---- a worker kept listening between attempts ------------------------------------------


def test_a_worker_kept_listening_runs_attempts_and_survives_a_kill() -> None:
    """The lab's workers: one loop keeps the child's stdout between attempts; a kill
    (a timeout, a cancel) replaces the process and the loop listens to the new one."""
    worker = ScriptWorker(keep_listening=True)

    async def main() -> list[tuple[str, Any, int | None]]:
        seen = []
        for script in ("return 1", "return 2"):
            result = await run(worker, script)
            seen.append((result.outcome, result.result, worker.pid))
        worker.kill()
        result = await run(worker, "return 3")
        seen.append((result.outcome, result.result, worker.pid))
        await worker.aclose()
        return seen

    seen = asyncio.run(main())
    assert [(o, r) for o, r, _ in seen] == [("succeeded", 1), ("succeeded", 2), ("succeeded", 3)]
    assert seen[0][2] == seen[1][2]  # the same warm process
    assert seen[2][2] not in (None, seen[0][2])  # a fresh one after the kill
    assert worker.pid is None


# Answers each run, then writes one more line a moment later: between attempts.
LATE_LINE_CHILD = """\
import json, sys, time
sys.stdout.write(json.dumps({"type": "ready", "prelude": "source"}) + "\\n")
sys.stdout.flush()
for raw in sys.stdin:
    command = json.loads(raw)
    done = {"type": "done", "id": command["id"], "outcome": "succeeded", "result": "1"}
    sys.stdout.write(json.dumps(done) + "\\n")
    sys.stdout.flush()
    time.sleep(0.1)
    late = {"type": "log", "id": command["id"], "level": "log", "text": "late"}
    sys.stdout.write(json.dumps(late) + "\\n")
    sys.stdout.flush()
"""


def test_a_line_between_attempts_to_a_worker_kept_listening_replaces_it() -> None:
    """spec §4.5: nothing the child says is trusted; heard between attempts, a line is
    no attempt's, and the process is replaced before the next attempt."""
    argv = [sys.executable, "-c", LATE_LINE_CHILD]
    worker = ScriptWorker(start_process=lambda: ChildProcess(argv), keep_listening=True)

    async def main() -> tuple[AttemptResult, AttemptResult, int | None, int | None]:
        first = await run(worker, "return 1")
        pid = worker.pid
        process = worker.process
        assert process is not None
        for _ in range(200):  # the late line arrives while no attempt runs
            await asyncio.sleep(0.05)
            if process.pending_output():
                break
        second = await run(worker, "return 1")
        return first, second, pid, worker.pid

    try:
        first, second, pid, after = asyncio.run(main())
    finally:
        worker.kill()
    assert first.outcome == second.outcome == "succeeded"
    assert pid is not None
    assert after not in (None, pid)


# ---- the run command, its step's fields encoded once ------------------------------------


def test_the_run_line_holds_exactly_the_run_commands_fields() -> None:
    line = run_line(request('throw new Error("\\u00e9")'), 7)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    command = json.loads(line)
    assert command.keys() == RunCommand.__required_keys__
    assert (command["op"], command["id"], command["script"]) == \
        ("run", 7, 'throw new Error("\\u00e9")')
    assert json.loads(command["payload"]) == {"n": 1}
    assert command["context"] == {"run": {"id": "r"}}
    assert command["services"] == list(SERVICE_NAMES)
    # A second attempt of the same step: its own id and attempt, the same step fields.
    again = json.loads(run_line(request('throw new Error("\\u00e9")'), 8))
    assert again["id"] == 8
    assert {k: v for k, v in again.items() if k != "id"} == \
        {k: v for k, v in command.items() if k != "id"}


# ---- the lab pauses the cyclic collector ---------------------------------------------------


def test_the_collector_is_paused_while_clients_run_and_restored_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()


def test_the_collector_comes_back_when_the_lab_fails() -> None:
    try:
        with collector_paused():
            raise RuntimeError("a lab that failed")
    except RuntimeError:
        pass
    assert gc.isenabled()

