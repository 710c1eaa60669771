"""One run per id, one resume at a time (spec §5.2): claims across real processes.

Two ``tests/race_child.py`` processes share one journal file. Each round the test
sends both the same command with the same ``go`` instant: run a pinned id, or resume
the same interrupted run. In every round exactly one of them executes it; the other
is refused with an error naming the run (and, while the winner still holds it, the
winner's pid), or — when it came after the winner had finished — finds nothing to do
and journals nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import woml_magic as wm
from woml_magic.errors import WomlRunError
from woml_magic.events import AttemptStarted, RunStarted, StepStarted
from woml_magic.journal import Journal
from woml_magic.model import idempotency_key
from woml_magic.parse import parse

REPO = Path(__file__).resolve().parents[1]
CHILD = REPO / "tests" / "race_child.py"
ROUNDS = 20

#: The step sleeps on the real clock, so the two racers' executions overlap.
DOC = """<workflow id="race">
  <step id="work" retry="2" retry-delay="10ms">
    <script>await services.sleep("30ms"); return {n: attempt.number};</script>
  </step>
</workflow>"""


class Racer:
    """One long-lived ``race_child.py``: a command in, one reply out."""

    def __init__(self, tmp: Path, name: str) -> None:
        self._err = (tmp / f"{name}.stderr").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            cwd=REPO,
            text=True,
        )

    def send(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the racer died: {self.proc.wait()}"
        reply: dict[str, Any] = json.loads(line)
        return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self._err.close()


@pytest.fixture
def racers(tmp_path: Path) -> Iterator[tuple[Racer, Racer]]:
    pair = (Racer(tmp_path, "a"), Racer(tmp_path, "b"))
    try:
        yield pair
    finally:
        for racer in pair:
            racer.close()


def race(racers: tuple[Racer, Racer], command: dict[str, Any]) -> list[dict[str, Any]]:
    go = time.time() + 0.05
    for racer in racers:
        racer.send({**command, "go": go})
    return [racer.reply() for racer in racers]


def kinds(journal: Path, run_id: str) -> Counter[str]:
    with Journal(journal) as jr:
        return Counter(e.kind for e in jr.events(run_id))


def test_two_processes_racing_one_pinned_id_run_it_exactly_once(
    racers: tuple[Racer, Racer], tmp_path: Path
) -> None:
    journal = tmp_path / "journal.sqlite3"
    Journal(journal).close()  # created before the race, as a kernel's would be
    held = 0
    for i in range(ROUNDS):
        run_id = f"pinned-{i}"
        replies = race(racers, {"op": "run", "run_id": run_id, "journal": str(journal), "doc": DOC})
        ran = [r for r in replies if "status" in r]
        refused = [r for r in replies if "error" in r]
        assert len(ran) == 1, (i, replies)
        assert len(refused) == 1, (i, replies)
        assert ran[0]["status"] == "succeeded"
        assert ran[0]["emitted"] > 0
        message = refused[0]["message"]
        assert refused[0]["error"] == "WomlRunError", message
        assert repr(run_id) in message, message
        if "is held by" in message:
            held += 1
            assert f"pid {ran[0]['pid']} on host" in message, message
        else:
            assert "already in the journal" in message, message
        counted = kinds(journal, run_id)
        assert counted["run-started"] == 1, (i, counted)
        assert counted["attempt-started"] == 1, (i, counted)
        assert counted["run-finished"] == 1
    assert held > 0  # the races did overlap: the claim, not the late check, decided


def interrupted_run(journal: Path, run_id: str) -> None:
    """Journal what a kernel killed during attempt 1 leaves behind (spec §5.3)."""
    workflow = parse(DOC)
    key = idempotency_key(run_id, "work")
    with Journal(journal) as jr:
        for event in (
            RunStarted(
                run_id=run_id,
                at=0.0,
                workflow_id=workflow.id,
                fingerprint=workflow.fingerprint,
                clock="real",
                source=DOC,
            ),
            StepStarted(run_id=run_id, at=0.001, step_id="work", idempotency_key=key),
            AttemptStarted(run_id=run_id, at=0.002, step_id="work", number=1, idempotency_key=key),
        ):
            jr.append(event)


def test_two_processes_racing_one_resume_resume_it_exactly_once(
    racers: tuple[Racer, Racer], tmp_path: Path
) -> None:
    journal = tmp_path / "journal.sqlite3"
    held = 0
    for i in range(ROUNDS):
        run_id = f"resumed-{i}"
        interrupted_run(journal, run_id)
        replies = race(
            racers, {"op": "resume", "run_id": run_id, "journal": str(journal), "doc": DOC}
        )
        executed = [r for r in replies if r.get("emitted")]
        others = [r for r in replies if not r.get("emitted")]
        assert len(executed) == 1, (i, replies)
        assert len(others) == 1, (i, replies)
        assert executed[0]["status"] == "succeeded"
        other = others[0]
        if "error" in other:
            held += 1
            assert other["error"] == "WomlRunError"
            assert f"run {run_id!r} is held by pid {executed[0]['pid']} on host" in other["message"]
        else:  # it came after the winner had finished: nothing to do, nothing journaled
            assert other == {"pid": other["pid"], "status": "succeeded", "emitted": 0}
        with Journal(journal) as jr:
            run = jr.load(run_id)
        assert Counter(e.kind for e in run.events)["run-resumed"] == 1, i
        assert [(a.number, a.outcome) for a in run.steps["work"].attempts] == [
            (1, "interrupted"),
            (2, "succeeded"),
        ]
        assert run.status == "succeeded"
    assert held > 0


def test_two_threads_starting_one_pinned_id_run_it_once(tmp_path: Path) -> None:
    """spec §5.2: the claim holds between threads of one process, on one Journal."""
    with Journal(":memory:") as jr:
        first = wm.start(DOC, run_id="twice", journal=jr)
        second = wm.start(DOC, run_id="twice", journal=jr)
        outcomes: list[str] = []
        for handle in (first, second):
            try:
                outcomes.append(handle.result(timeout=30).status)
            except WomlRunError as exc:
                outcomes.append(str(exc))
        assert outcomes.count("succeeded") == 1, outcomes
        refused = [o for o in outcomes if o != "succeeded"]
        assert len(refused) == 1
        assert (
            refused[0].startswith("run 'twice' is held by pid")
            or "already in the journal" in refused[0]
        )
        assert Counter(e.kind for e in jr.events("twice"))["run-started"] == 1


_HOLDER = """
import sys, time
from woml_magic.journal import Journal
jr = Journal(sys.argv[1])
with jr.claim("held-run", "resume"):
    print("holding", flush=True)
    time.sleep(600)
"""


def test_a_held_claim_names_its_holder_and_dies_with_it(tmp_path: Path) -> None:
    """spec §5.2: the loser learns who holds the run; a killed holder blocks nobody."""
    path = tmp_path / "journal.sqlite3"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "holding\n"
        with Journal(path) as jr:
            with pytest.raises(WomlRunError) as refused, jr.claim("held-run", "resume"):
                pass
            message = str(refused.value)
            assert message.startswith(f"run 'held-run' is held by pid {holder.pid} on host")
            assert "(a resume, since " in message
            assert "UTC)" in message
            assert message.endswith("wait until it ends, then resume it again")
            holder.send_signal(signal.SIGKILL)
            holder.wait(timeout=10)
            with jr.claim("held-run", "resume") as me:
                assert me.pid == os.getpid()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert list((tmp_path / "journal.sqlite3-claims").iterdir()) == []  # nothing left


def test_claims_of_different_runs_do_not_conflict(tmp_path: Path) -> None:
    with (
        Journal(tmp_path / "j.sqlite3") as jr,
        jr.claim("a"),
        jr.claim("b"),
        pytest.raises(WomlRunError, match="run 'a' is held by pid"),
        jr.claim("a"),
    ):
        pass


def test_claims_directory_and_files_are_private(tmp_path: Path) -> None:
    seen: list[int] = []
    with Journal(tmp_path / "j.sqlite3") as jr, jr.claim("x"):
        claims = tmp_path / "j.sqlite3-claims"
        seen.append(claims.stat().st_mode & 0o777)
        seen.extend(f.stat().st_mode & 0o777 for f in claims.iterdir())
    assert seen == [0o700, 0o600]


def test_a_resume_refused_by_a_held_claim_journals_nothing(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    interrupted_run(path, "busy")
    with Journal(path) as jr, jr.claim("busy", "resume"):
        before = len(jr.events("busy"))
        done = threading.Event()
        errors: list[BaseException] = []

        def resume() -> None:
            try:
                wm.run(DOC, journal=str(path), resume="busy", retry_interrupted=True)
            except BaseException as exc:
                errors.append(exc)
            done.set()

        thread = threading.Thread(target=resume)
        thread.start()
        thread.join(30)
        assert done.is_set()
        assert len(errors) == 1
        assert isinstance(errors[0], WomlRunError)
        assert "run 'busy' is held by pid" in str(errors[0])
        assert len(jr.events("busy")) == before
