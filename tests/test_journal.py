"""The durable journal (spec §5.2) and its reader (spec §5.3 resume, §6.2 runs/show).

Real SQLite files in tmp_path, real subprocesses for concurrency and ``kill -9``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from woml_magic.errors import WomlJournalError
from woml_magic.events import (
    EVENT_TYPES,
    AttemptError,
    AttemptFinished,
    AttemptStarted,
    CallFinished,
    CallStarted,
    Event,
    LogEmitted,
    RunFinished,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    WaitScheduled,
)
from woml_magic.journal import (
    REDACTED,
    SCHEMA_VERSION,
    SENSITIVE_HEADERS,
    UNFINISHED,
    Journal,
)
from woml_magic.model import Run, Step, Workflow, idempotency_key
from woml_magic.policy import RetryPolicy

REPO = Path(__file__).resolve().parents[1]
SECRET = "Bearer sk_live_4f9a8b7c6d5e"

WORKFLOW = Workflow(
    id="signup",
    steps=(
        Step(
            id="charge",
            script="return 1",
            policy=RetryPolicy(attempts=3, backoff="exponential", delay=timedelta(seconds=1)),
        ),
        Step(id="notify", script="return 2"),
    ),
    source="<workflow id='signup'>…</workflow>",
)


def scenario(run_id: str, *, finish: str | None = "succeeded") -> list[Event]:
    """A realistic run (spec §5.2): a retried step with calls, waits and logs."""
    k1 = idempotency_key(run_id, "charge")
    k2 = idempotency_key(run_id, "notify")
    events: list[Event] = [
        RunStarted(
            run_id=run_id,
            at=0.0,
            workflow_id=WORKFLOW.id,
            fingerprint=WORKFLOW.fingerprint,
            clock="simulated",
            payload={"email": "ada@example.com", "amount": 4200},
            source=WORKFLOW.source,
        ),
        StepStarted(run_id=run_id, at=0.0, step_id="charge", idempotency_key=k1),
        AttemptStarted(run_id=run_id, at=0.0, step_id="charge", number=1, idempotency_key=k1),
        LogEmitted(run_id=run_id, at=0.01, step_id="charge", number=1, text="charging ada"),
        CallStarted(
            run_id=run_id,
            at=0.02,
            step_id="charge",
            number=1,
            call_index=0,
            name="charge",
            method="POST",
            url="http://127.0.0.1:9/charges",
            request_headers={"Authorization": REDACTED, "Idempotency-Key": k1},
            idempotency_header="Idempotency-Key",
            idempotency_value=k1,
        ),
        CallFinished(
            run_id=run_id,
            at=0.5,
            step_id="charge",
            number=1,
            call_index=0,
            name="charge",
            outcome="response",
            status=503,
            response={"status": 503, "headers": {}, "data": {"title": "busy"}},
        ),
        AttemptFinished(
            run_id=run_id,
            at=0.5,
            step_id="charge",
            number=1,
            outcome="threw",
            error=AttemptError("HttpError", "503 busy", 7),
            explanation="attempt 1 of 3 threw; retrying after 1s",
        ),
        WaitScheduled(
            run_id=run_id, at=0.5, step_id="charge", after_attempt=1, seconds=1.0, due=1.5
        ),
        AttemptStarted(run_id=run_id, at=1.5, step_id="charge", number=2, idempotency_key=k1),
        CallStarted(
            run_id=run_id,
            at=1.51,
            step_id="charge",
            number=2,
            name="charge",
            method="POST",
            url="http://127.0.0.1:9/charges",
            idempotency_header="Idempotency-Key",
            idempotency_value=k1,
        ),
        CallFinished(
            run_id=run_id,
            at=1.7,
            step_id="charge",
            number=2,
            name="charge",
            status=201,
            response={
                "status": 201,
                "headers": {"content-type": "application/json"},
                "data": {"id": "ch_1"},
            },
        ),
        AttemptFinished(
            run_id=run_id,
            at=1.7,
            step_id="charge",
            number=2,
            result={"id": "ch_1"},
            explanation="attempt 2 of 3 succeeded",
        ),
        StepFinished(run_id=run_id, at=1.7, step_id="charge", result={"id": "ch_1"}),
        StepStarted(run_id=run_id, at=1.7, step_id="notify", idempotency_key=k2),
        AttemptStarted(run_id=run_id, at=1.7, step_id="notify", number=1, idempotency_key=k2),
    ]
    if finish is not None:
        events += [
            AttemptFinished(
                run_id=run_id,
                at=1.8,
                step_id="notify",
                number=1,
                result=2,
                explanation="attempt 1 of 1 succeeded",
            ),
            StepFinished(run_id=run_id, at=1.8, step_id="notify", result=2),
            RunFinished(run_id=run_id, at=1.8, status=finish),
        ]
    return events


# One instance of every event type, each field away from its default where it can be.
SAMPLES: list[Event] = [
    RunStarted(
        run_id="r",
        at=0.0,
        workflow_id="wf",
        fingerprint="sha256:ab",
        clock="simulated",
        payload={"n": [1, 2.5, None, True, "é"]},
        source="<step id='a'>…</step>",
    ),
    RunResumed(run_id="r", at=3.25, retry_interrupted=True),
    StepStarted(run_id="r", at=0.125, step_id="a", idempotency_key="k"),
    AttemptStarted(run_id="r", at=0.25, step_id="a", number=2, idempotency_key="k"),
    LogEmitted(run_id="r", at=0.3, step_id="a", number=2, level="warn", text="line\nnext ☃"),
    CallStarted(
        run_id="r",
        at=0.4,
        step_id="a",
        number=2,
        call_index=1,
        name="n",
        method="PUT",
        url="http://127.0.0.1:1/x?q=1",
        request_headers={"X": "1"},
        idempotency_header="Idempotency-Key",
        idempotency_value="k",
    ),
    CallFinished(
        run_id="r",
        at=0.5,
        step_id="a",
        number=2,
        call_index=1,
        name="n",
        outcome="ambiguous",
        status=None,
        replayed=True,
        response={"status": 200, "headers": {"a": "b"}, "data": "text"},
        error="connection reset",
    ),
    AttemptFinished(
        run_id="r",
        at=0.6,
        step_id="a",
        number=2,
        outcome="threw",
        result=[1, {"x": None}],
        error=AttemptError("E", "m", 3),
        explanation="why",
    ),
    WaitScheduled(run_id="r", at=0.7, step_id="a", after_attempt=2, seconds=2.5, due=3.2),
    StepFinished(run_id="r", at=0.8, step_id="a", status="failed-closed", result={"k": 1}),
    RunFinished(run_id="r", at=0.9, status="failed"),
]


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    with Journal(tmp_path / "journal.sqlite3") as j:
        yield j


def raw(path: Path) -> sqlite3.Connection:
    """A plain SQLite connection, to look at the file the way another tool would."""
    return sqlite3.connect(path, isolation_level=None)


def integrity(path: Path) -> list[str]:
    conn = raw(path)
    try:
        return [r[0] for r in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()


# -- the record: every event comes back exactly as emitted (spec §5.2) -------------


def test_samples_cover_every_event_type() -> None:
    assert {e.kind for e in SAMPLES} == set(EVENT_TYPES)


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.kind)
def test_every_event_type_round_trips_exactly(journal: Journal, event: Event) -> None:
    journal.append(event)
    (back,) = journal.events("r")
    assert type(back) is type(event)
    assert back == event


def test_events_come_back_in_append_order_per_run(journal: Journal) -> None:
    a, b = scenario("run-a"), scenario("run-b", finish="failed")
    for x, y in zip(a, b, strict=True):  # interleaved, as two concurrent runs would write
        journal(x)
        journal(y)
    assert journal.events("run-a") == a
    assert journal.events("run-b") == b


def test_rows_hold_kind_run_and_clock_time_beside_the_json(journal: Journal) -> None:
    journal(SAMPLES[0])
    conn = raw(Path(journal.path))
    try:
        row = conn.execute("SELECT run_id, kind, at, wall, data FROM events").fetchone()
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        (user_version,) = conn.execute("PRAGMA user_version").fetchone()
    finally:
        conn.close()
    assert row[:3] == ("r", "run-started", 0.0)
    assert abs(row[3] - time.time()) < 3600
    assert '"kind": "run-started"' in row[4]
    assert meta == {"schema_version": str(SCHEMA_VERSION), "app": "woml-magic"}
    assert user_version == SCHEMA_VERSION


def test_events_are_append_only_even_for_other_tools(journal: Journal) -> None:
    journal(SAMPLES[0])
    conn = raw(Path(journal.path))
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE events SET kind = 'x'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("DELETE FROM events")
    finally:
        conn.close()
    assert journal.events("r") == [SAMPLES[0]]


def test_an_event_that_is_not_json_is_refused_with_its_run_named(journal: Journal) -> None:
    bad = RunStarted(run_id="r", at=0.0, payload={"amount": float("nan")})
    with pytest.raises(WomlJournalError, match=r"run-started of run 'r'.*JSON values only"):
        journal(bad)
    assert not journal.has_run("r")


# -- reading: runs, statuses, load (spec §5.3, §6.2) --------------------------------


def test_runs_are_listed_newest_first_with_their_final_status(journal: Journal) -> None:
    for event in scenario("first"):
        journal(event)
    for event in scenario("second", finish="failed"):
        journal(event)
    for event in scenario("third", finish=None):
        journal(event)
    summaries = journal.runs()
    assert [(s.run_id, s.status) for s in summaries] == [
        ("third", UNFINISHED),
        ("second", "failed"),
        ("first", "succeeded"),
    ]
    assert [s.run_id for s in journal.runs(limit=2)] == ["third", "second"]


def test_a_resumed_run_is_unfinished_until_it_finishes_again(journal: Journal) -> None:
    for event in scenario("r1", finish="failed"):
        journal(event)
    journal(RunResumed(run_id="r1", at=5.0, retry_interrupted=True))
    (s,) = journal.runs()
    assert (s.status, s.resumes) == (UNFINISHED, 1)
    journal(RunFinished(run_id="r1", at=6.0, status="succeeded"))
    (s,) = journal.runs()
    assert (s.status, s.resumes, s.last_at) == ("succeeded", 1, 6.0)


def test_a_summary_of_a_run_whose_clock_is_not_a_clock_says_none(journal: Journal) -> None:
    """spec §5.1: a summary's clock is a ClockKind; a forged run-started row's is None
    (loading that run is refused, tests/test_journal_forged.py)."""
    journal(RunStarted(run_id="odd", at=0.0, workflow_id="w", clock="sundial"))  # type: ignore[arg-type]
    (s,) = journal.runs()
    assert s.clock is None


def test_run_summary_carries_what_runs_table_shows(journal: Journal) -> None:
    before = time.time()
    events = scenario("sum", finish=None)
    for event in events:
        journal(event)
    (s,) = journal.runs()
    assert s.run_id == "sum"
    assert s.workflow_id == "signup"
    assert s.clock == "simulated"
    assert s.fingerprint == WORKFLOW.fingerprint
    assert s.events == len(events)
    assert s.last_at == 1.7
    assert s.steps == {"charge": "succeeded", "notify": "running"}
    assert before <= s.started_wall <= s.last_wall <= time.time()


def test_a_step_in_a_wait_is_summarised_as_waiting(journal: Journal) -> None:
    for event in scenario("w")[:8]:  # up to and including wait-scheduled
        journal(event)
    assert journal.runs()[0].steps == {"charge": "waiting"}


def test_summary_step_statuses_are_the_runs_after_every_event(journal: Journal) -> None:
    # One fold (model.step_status_after): `%woml runs` and the Run never disagree.
    events = scenario("fold")
    for n, event in enumerate(events, 1):
        journal(event)
        run = Run.from_events(WORKFLOW, events[:n])
        started = {sid: sr.status for sid, sr in run.steps.items() if sr.status != "pending"}
        assert journal.runs()[0].steps == started, event.kind


def test_empty_journal_lists_no_runs(journal: Journal) -> None:
    assert journal.runs() == []
    assert not journal.has_run("x")


def test_load_rebuilds_the_run_seen_live(journal: Journal) -> None:
    live: Run | None = None
    for event in [
        *scenario("live", finish=None),
        RunResumed(run_id="live", at=9.0),
        AttemptFinished(
            run_id="live",
            at=9.0,
            step_id="notify",
            number=1,
            outcome="interrupted",
            error=AttemptError("Interrupted", "attempt 1 of notify was interrupted"),
            explanation="fail closed",
        ),
        StepFinished(run_id="live", at=9.0, step_id="notify", status="failed-closed"),
        RunFinished(run_id="live", at=9.0, status="failed"),
    ]:
        if live is None:
            assert isinstance(event, RunStarted)
            live = Run(id=event.run_id, workflow=WORKFLOW, clock=event.clock, payload=event.payload)
        live.apply(event)
        journal(event)
    assert live is not None
    back = journal.load("live", WORKFLOW)
    # The parts the timeline and resume read, then the whole picture.
    assert back.status == live.status == "failed"
    for sid in ("charge", "notify"):
        b, v = back.steps[sid], live.steps[sid]
        assert (b.status, b.idempotency_key, b.waits, b.result) == (
            v.status,
            v.idempotency_key,
            v.waits,
            v.result,
        )
        assert b.attempts == v.attempts
    assert back.steps["charge"].waits == [1.0]
    assert back.steps["charge"].attempts[0].calls[0].request_headers["Authorization"] == REDACTED
    assert back.resumes == [9.0]
    assert back == live


def test_load_parses_the_journaled_document_when_no_workflow_is_given(
    journal: Journal,
) -> None:
    parse_mod = pytest.importorskip("woml_magic.parse")
    text = '<step id="a" retry="2"><script>return 1</script></step>'
    wf = parse_mod.parse(text)
    journal(
        RunStarted(run_id="p", at=0.0, workflow_id=wf.id, fingerprint=wf.fingerprint, source=text)
    )
    journal(StepStarted(run_id="p", at=0.0, step_id="a", idempotency_key="k"))
    run = journal.load("p")
    assert run.workflow.fingerprint == wf.fingerprint
    assert run.steps["a"].status == "running"


def test_last_at_is_the_latest_time_on_the_runs_clock(journal: Journal) -> None:
    for event in scenario("t"):
        journal(event)
    assert journal.last_at("t") == 1.8


def test_last_wall_is_when_the_runs_latest_event_was_written(journal: Journal) -> None:
    """spec §5.3: a real-clock resume counts the time since the last event was written."""
    before = time.time()
    for event in scenario("t"):
        journal(event)
    assert before <= journal.last_wall("t") <= time.time()
    assert journal.last_wall("t") == next(s.last_wall for s in journal.runs() if s.run_id == "t")


@pytest.mark.parametrize("read", ["events", "last_at", "last_wall", "load"])
def test_unknown_run_names_it_and_says_how_to_list_runs(journal: Journal, read: str) -> None:
    journal(SAMPLES[0])
    journal(RunStarted(run_id="run-7f3a", at=0.0))
    with pytest.raises(WomlJournalError) as info:
        getattr(journal, read)("run-7f3b")
    message = str(info.value)
    assert "no run 'run-7f3b'" in message
    assert "did you mean 'run-7f3a'?" in message
    assert "%woml runs" in message


# -- the file: where, who may read it, and what it refuses (spec §5.2) ---------------


def test_file_is_created_0600_in_new_directories_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "a" / ".woml" / "journal.sqlite3"
    old = os.umask(0)
    try:
        with Journal(path) as j:
            j(SAMPLES[0])
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
    finally:
        os.umask(old)
    assert modes == {
        "journal.sqlite3": 0o600,
        "journal.sqlite3-wal": 0o600,
        "journal.sqlite3-shm": 0o600,
    }


def test_a_looser_leftover_sidecar_is_tightened_to_the_journals_mode(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    with Journal(path) as j:
        j(SAMPLES[0])
        # Another connection keeps the WAL alive while the first closes.
        keeper = raw(path)
        keeper.execute("SELECT COUNT(*) FROM events").fetchone()
    try:
        wal = Path(f"{path}-wal")
        wal.chmod(0o644)
        with Journal(path):
            assert stat.S_IMODE(wal.stat().st_mode) == 0o600
    finally:
        keeper.close()


def test_default_path_is_under_dot_woml_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Journal() as j:
        j(SAMPLES[0])
        assert j.path == ".woml/journal.sqlite3"
    assert (tmp_path / ".woml" / "journal.sqlite3").is_file()


def test_memory_journal_works_and_writes_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Journal(":memory:") as j:
        for event in scenario("m"):
            j(event)
        assert j.events("m") == scenario("m")
        assert j.runs()[0].status == "succeeded"
    assert list(tmp_path.iterdir()) == []


def test_each_memory_journal_is_its_own_with_the_whole_schema() -> None:
    # Later in-memory journals start from an image of the first one's empty schema.
    with Journal(":memory:") as first, Journal(":memory:") as second:
        for event in scenario("a"):
            first(event)
        with Journal(":memory:") as third:
            assert third.runs() == []
            assert not third.has_run("a")
            third(SAMPLES[0])
            conn = third.connection
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                conn.execute("DELETE FROM events")
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert second.runs() == []
        assert first.events("a") == scenario("a")


def test_opening_a_journal_that_holds_the_schema_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    with Journal(path) as j:
        j(SAMPLES[0])
    before = path.read_bytes()
    with Journal(path) as j:
        assert j.events("r") == [SAMPLES[0]]
    assert path.read_bytes() == before
    with Journal(path) as j:  # and it still takes appends
        j(SAMPLES[1])
        assert j.events("r") == SAMPLES[:2]


def test_an_empty_file_becomes_a_journal(tmp_path: Path) -> None:
    path = tmp_path / "touched.sqlite3"
    path.touch()
    with Journal(path) as j:
        j(SAMPLES[0])
    with Journal(path) as j:
        assert j.events("r") == [SAMPLES[0]]


def test_newer_schema_is_refused_and_the_file_left_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite3"
    with Journal(path) as j:
        j(SAMPLES[0])
    conn = raw(path)
    conn.execute("PRAGMA user_version = 3")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(WomlJournalError) as info:
        Journal(path)
    assert "written by schema 3; this woml-magic reads up to schema 1; upgrade woml-magic" in str(
        info.value
    )
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"just some notes\n" * 20, "not a woml journal (not an SQLite database)"),
        (b"SQLite format 3\x00", "not a woml journal (not an SQLite database)"),
        (b"\x00" * 4096, "not a woml journal (not an SQLite database)"),
    ],
    ids=["text", "truncated-header", "zeros"],
)
def test_a_file_that_is_not_sqlite_is_refused_untouched(
    tmp_path: Path, content: bytes, says: str
) -> None:
    path = tmp_path / "notes.sqlite3"
    path.write_bytes(content)
    with pytest.raises(WomlJournalError, match=re.escape(says)):
        Journal(path)
    assert path.read_bytes() == content


def test_another_apps_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = raw(path)
    conn.execute("CREATE TABLE users(id INTEGER)")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(WomlJournalError, match="an SQLite database but not a woml journal"):
        Journal(path)
    assert path.read_bytes() == before


def corrupt(path: Path, *, keep_pages: int) -> None:
    """Overwrite every page after the first ``keep_pages`` with garbage."""
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    cut = page_size * keep_pages
    data[cut:] = b"\xa5" * (len(data) - cut)
    path.write_bytes(bytes(data))


def test_a_journal_corrupt_beyond_its_first_page_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.sqlite3"
    with Journal(path) as j:
        for event in scenario("c"):
            j(event)
    corrupt(path, keep_pages=1)
    with pytest.raises(WomlJournalError, match="is corrupt or unreadable"):
        Journal(path)


def test_corrupt_event_pages_are_reported_by_reads_and_check(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.sqlite3"
    with Journal(path) as j:
        for n in range(40):  # enough rows that the table spans several pages
            j(LogEmitted(run_id="c", at=float(n), step_id="a", number=1, text="x" * 400))
    pages = path.stat().st_size // int.from_bytes(path.read_bytes()[16:18], "big")
    corrupt(path, keep_pages=pages - 1)
    with Journal(path) as j:
        with pytest.raises(WomlJournalError, match="corrupt"):
            j.check()
        with pytest.raises(WomlJournalError, match="corrupt"):
            j.events("c")


def test_a_closed_journal_says_so(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite3")
    j.close()
    j.close()  # idempotent
    with pytest.raises(WomlJournalError, match="is closed"):
        j(SAMPLES[0])
    with pytest.raises(WomlJournalError, match="is closed"):
        j.runs()


# -- secrets never reach the disk (spec §4.1) ----------------------------------------


def journal_bytes(path: Path) -> bytes:
    """The main file and the WAL, read while the journal is still open."""
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def test_redacted_headers_keep_the_secret_out_of_the_file_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    headers = {"Authorization": REDACTED, "Cookie": REDACTED, "X-Trace": "t-123"}
    with Journal(path) as j:
        j(CallStarted(run_id="s", at=0.0, step_id="a", number=1, request_headers=headers))
        j(
            CallFinished(
                run_id="s",
                at=0.1,
                step_id="a",
                number=1,
                status=200,
                response={"status": 200, "headers": {"set-cookie": REDACTED}, "data": None},
            )
        )
        stored = journal_bytes(path)
        assert j.events("s")[0] == CallStarted(
            run_id="s", at=0.0, step_id="a", number=1, request_headers=headers
        )
    # The bytes we searched are the right ones: the neighbouring header is there.
    assert b"t-123" in stored
    assert REDACTED.encode() in stored
    assert SECRET.encode() not in stored


def test_a_secret_that_slipped_through_the_pipeline_is_redacted_again(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    with Journal(path, redact_headers=["X-Session"]) as j:
        j(
            CallStarted(
                run_id="s",
                at=0.0,
                step_id="a",
                number=1,
                request_headers={
                    "authorization": SECRET,
                    "X-Session": "sess-99",
                    "X-Trace": "t-123",
                },
            )
        )
        j(
            CallFinished(
                run_id="s",
                at=0.1,
                step_id="a",
                number=1,
                status=200,
                response={
                    "status": 200,
                    "headers": {"Set-Cookie": "sid=abc123"},
                    "data": {"ok": True},
                },
            )
        )
        stored = journal_bytes(path)
        started, finished = j.events("s")
    assert b"t-123" in stored
    for secret in (SECRET, "sess-99", "sid=abc123"):
        assert secret.encode() not in stored
    assert isinstance(started, CallStarted)
    assert isinstance(finished, CallFinished)
    assert started.request_headers == {
        "authorization": REDACTED,
        "X-Session": REDACTED,
        "X-Trace": "t-123",
    }
    assert finished.response == {
        "status": 200,
        "headers": {"Set-Cookie": REDACTED},
        "data": {"ok": True},
    }


def test_journal_redacts_the_same_headers_as_the_http_service() -> None:
    """spec §4.1: one list of sensitive headers for recording and for journaling."""
    from woml_magic.services import DEFAULT_REDACTED

    assert set(DEFAULT_REDACTED) <= SENSITIVE_HEADERS


# -- concurrency: never corrupt, never lose an event ---------------------------------


def test_threads_and_two_journal_objects_on_one_file_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    per_thread = 150
    with Journal(path) as one, Journal(path) as two:

        def write(j: Journal, name: str) -> None:
            for i in range(per_thread):
                j(LogEmitted(run_id=name, at=float(i), step_id="a", number=1, text=str(i)))
                if i % 50 == 0:
                    j.runs()  # readers interleave with writers

        threads = [
            threading.Thread(target=write, args=(j, f"{tag}-{n}"))
            for tag, j in (("one", one), ("two", two))
            for n in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for tag in ("one", "two"):
            for n in range(2):
                texts = [e.text for e in one.events(f"{tag}-{n}") if isinstance(e, LogEmitted)]
                assert texts == [str(i) for i in range(per_thread)]
        assert sum(s.events for s in two.runs()) == 4 * per_thread
    assert integrity(path) == ["ok"]


WRITER = textwrap.dedent(
    """
    import sys
    from woml_magic.events import LogEmitted
    from woml_magic.journal import Journal

    path, run_id, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.stdin.readline()  # start together: the file does not exist yet
    with Journal(path) as j:
        for i in range(count):
            j(LogEmitted(run_id=run_id, at=float(i), step_id="a", number=1, text=str(i)))
    print("done", flush=True)
    """
)


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def test_two_processes_appending_500_each_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "new" / "j.sqlite3"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"proc-{n}", "500"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(),
            text=True,
        )
        for n in range(2)
    ]
    outputs = []
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        outputs.append(p.communicate(timeout=60))
        assert p.returncode == 0, outputs[-1][1]
    assert [o[0] for o in outputs] == ["done\n", "done\n"]
    assert integrity(path) == ["ok"]
    with Journal(path) as j:
        for n in range(2):
            texts = [e.text for e in j.events(f"proc-{n}") if isinstance(e, LogEmitted)]
            assert texts == [str(i) for i in range(500)]
        assert sorted(s.events for s in j.runs()) == [500, 500]


KILLED = textwrap.dedent(
    """
    import sys
    from woml_magic.events import LogEmitted
    from woml_magic.journal import Journal

    j = Journal(sys.argv[1])
    run_id = sys.argv[2]
    i = 0
    while True:
        j(LogEmitted(run_id=run_id, at=float(i), step_id="a", number=1, text=str(i)))
        sys.stdout.write(f"{i}\\n")  # only after append returned: i is committed
        sys.stdout.flush()
        i += 1
    """
)


def test_kill_9_at_any_instant_loses_no_committed_event(tmp_path: Path) -> None:
    """spec §5.2: whatever append returned for survives a SIGKILL of the writer."""
    path = tmp_path / "j.sqlite3"
    rng = random.Random(20240517)
    total = 0
    for round_ in range(10):
        with subprocess.Popen(
            [sys.executable, "-c", KILLED, str(path), f"kill-{round_}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(),
            text=True,
        ) as proc:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            assert first == "0\n", proc.stderr.read() if proc.stderr else first
            time.sleep(rng.uniform(0.0, 0.25))
            proc.send_signal(signal.SIGKILL)
            # Read through the same buffered reader: readline() may hold lines already.
            rest = proc.stdout.read()
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        lines = (first + rest).split("\n")
        printed = [int(x) for x in lines[:-1]]  # the last piece may be a torn line
        assert printed == list(range(len(printed)))
        total += len(printed)
        with Journal(path) as j:
            stored = [int(e.text) for e in j.events(f"kill-{round_}") if isinstance(e, LogEmitted)]
            j.check()
        assert stored[: len(printed)] == printed
        # At most the one event in flight when the kill landed was committed unprinted.
        assert len(stored) - len(printed) in (0, 1)
    assert integrity(path) == ["ok"]
    assert total >= 10


# -- the model of events is the one Run uses ------------------------------------------


def test_events_are_the_frozen_records_the_engine_emits(journal: Journal) -> None:
    for event in scenario("f"):
        journal(event)
    back = journal.events("f")
    with pytest.raises(dataclasses.FrozenInstanceError):
        back[0].at = 1.0  # type: ignore[misc]


def test_a_journaled_document_that_no_longer_parses_is_a_journal_error(
    journal: Journal,
) -> None:
    pytest.importorskip("woml_magic.parse")
    journal(RunStarted(run_id="old", at=0.0, source="<step id='a'><retry/></step>"))
    with pytest.raises(WomlJournalError, match=r"run 'old' no longer parses.*Journal.load"):
        journal.load("old")
    assert journal.load("old", WORKFLOW).id == "old"  # an explicit workflow still works


def test_an_event_kind_from_a_newer_version_is_named_when_read(journal: Journal) -> None:
    journal(SAMPLES[0])
    conn = raw(Path(journal.path))
    try:
        conn.execute(
            "INSERT INTO events(run_id, kind, at, wall, data) VALUES ('r', 'x', 1, 0, ?)",
            ('{"kind": "step-paused", "run_id": "r", "at": 1.0}',),
        )
    finally:
        conn.close()
    with pytest.raises(WomlJournalError, match=r"event 2 of run 'r'.*newer woml-magic"):
        journal.events("r")


# -- journals written before AttemptFinished.error was typed (spec §5.2, §5.3) -------------

#: Rows exactly as woml-magic wrote them when an attempt's error was a plain dict: one
#: step, attempt 1 threw (its error with a line), attempt 2 was interrupted by a dead
#: process (no line); and, older still, an error without a "line" key at all.
OLD_DOC = '<step id="charge" retry="3" retry-delay="1s"><script>return 1;</script></step>'
OLD_ROWS = [
    '{"run_id": "old", "at": 0.0, "workflow_id": "cell", "fingerprint": "%(fp)s", '
    '"clock": "simulated", "payload": null, "source": "%(src)s", "kind": "run-started"}',
    '{"run_id": "old", "at": 0.0, "step_id": "charge", "idempotency_key": "%(key)s", '
    '"kind": "step-started"}',
    '{"run_id": "old", "at": 0.0, "step_id": "charge", "number": 1, '
    '"idempotency_key": "%(key)s", "kind": "attempt-started"}',
    '{"run_id": "old", "at": 0.1, "step_id": "charge", "number": 1, "outcome": "threw", '
    '"result": null, "error": {"name": "HttpError", "message": "503 busy", "line": 7}, '
    '"explanation": "retried", "kind": "attempt-finished"}',
    '{"run_id": "old", "at": 0.1, "step_id": "charge", "after_attempt": 1, "seconds": 1.0, '
    '"due": 1.1, "kind": "wait-scheduled"}',
    '{"run_id": "old", "at": 1.1, "step_id": "charge", "number": 2, '
    '"idempotency_key": "%(key)s", "kind": "attempt-started"}',
    '{"run_id": "old", "at": 1.2, "step_id": "charge", "number": 2, "outcome": "interrupted", '
    '"result": null, "error": {"name": "InterruptedError", "message": "gone"}, '
    '"explanation": "fail closed", "kind": "attempt-finished"}',
    '{"run_id": "old", "at": 1.2, "step_id": "charge", "status": "failed-closed", '
    '"result": null, "reason": null, "kind": "step-finished"}',
    '{"run_id": "old", "at": 1.2, "status": "failed", "kind": "run-finished"}',
]


def test_a_journal_written_before_errors_were_typed_still_loads(tmp_path: Path) -> None:
    from woml_magic.events import AttemptError
    from woml_magic.parse import parse

    workflow = parse(OLD_DOC)
    values = {"fp": workflow.fingerprint, "src": OLD_DOC.replace('"', '\\"'),
              "key": idempotency_key("old", "charge")}
    path = tmp_path / "old.sqlite3"
    Journal(path).close()
    conn = raw(path)
    try:
        for data in OLD_ROWS:
            row = data % values  # the text as written then; its columns read from it
            fields = json.loads(row)
            conn.execute("INSERT INTO events(run_id, kind, at, wall, data) VALUES (?, ?, ?, ?, ?)",
                         ("old", fields["kind"], fields["at"], time.time(), row))
    finally:
        conn.close()
    with Journal(path) as jr:
        run = jr.load("old", workflow)
        again = jr.load("old")  # from its journaled document too
    first, second = run.steps["charge"].attempts
    assert first.error == AttemptError("HttpError", "503 busy", 7)
    assert second.error == AttemptError("InterruptedError", "gone", None)
    assert again.steps["charge"].attempts[1].error == second.error
    assert run.steps["charge"].status == "failed-closed"
