"""A journal nobody can forge into a crash or a hang (spec §5.2).

Each test journals a real run (simulated clock, real QuickJS worker), copies its rows
into a new journal file with one row changed or added — as anyone with access to the
file could — and checks that reading it back refuses the row with a sentence naming
its seq and kind, that a resume of it appends nothing, and that drawing any ``Run``,
however extreme its times, ends quickly.
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import woml_magic as wm
from woml_magic.errors import WomlJournalError
from woml_magic.events import event_from_dict
from woml_magic.journal import Journal
from woml_magic.model import Run
from woml_magic.parse import parse
from woml_magic.timeline import render_html, render_text
from woml_magic.timeline.axis import axis_ticks, format_time
from woml_magic.timeline.geometry import BREAK_W, LABEL_W, TRACK_W

DOC = """<workflow id="forged">
  <step id="first" retry="3" retry-delay="1s">
    <script>
      if (attempt.number === 1) throw new Error("not yet");
      return {n: attempt.number};
    </script>
  </step>
  <step id="second"><script>return context.steps.first.n + 1;</script></step>
</workflow>"""
WORKFLOW = parse(DOC)

Rows = list[dict[str, Any]]


@pytest.fixture(scope="module")
def real_rows(tmp_path_factory: pytest.TempPathFactory) -> Rows:
    """The event rows of one real run: first threw, waited 1 s, succeeded; then second."""
    path = tmp_path_factory.mktemp("real") / "journal.sqlite3"
    run = wm.run(DOC, clock="simulated", journal=str(path), run_id="r")
    assert run.status == "succeeded"
    with Journal(path) as jr:
        return [e.to_dict() for e in jr.events("r")]


def kinds(rows: Rows) -> list[str]:
    return [r["kind"] for r in rows]


def write(path: Path, rows: Rows, wall: Callable[[int], float] = lambda _: time.time()) -> Path:
    """A journal holding exactly ``rows`` (seq 1, 2, …), written as any SQLite tool could."""
    Journal(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for i, row in enumerate(rows):
            at = row["at"] if isinstance(row["at"], float | int) else 0.0
            conn.execute(
                "INSERT INTO events(run_id, kind, at, wall, data) VALUES (?, ?, ?, ?, ?)",
                (row["run_id"], row["kind"], at, wall(i), json.dumps(row)),
            )
    finally:
        conn.close()
    return path


def refused(path: Path, seq: int, kind: str) -> str:
    """Load and resume both refuse row ``seq``; nothing is appended. The message."""
    with Journal(path) as jr:
        before = jr.connection.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        with pytest.raises(WomlJournalError) as shown:
            jr.load("r")
        message = str(shown.value)
        assert message.startswith(f"event {seq} of run 'r' ({kind}) in the journal "), message
        assert "nothing is appended" in message
        with pytest.raises(WomlJournalError, match=rf"^event {seq} of run 'r' \({kind}\)"):
            wm.run(DOC, journal=jr, resume="r", retry_interrupted=True)
        after = jr.connection.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    assert after == before
    return message


def test_the_real_rows_are_what_the_forgeries_change(real_rows: Rows) -> None:
    assert kinds(real_rows) == [
        "run-started",
        "step-started",
        "attempt-started",
        "attempt-finished",
        "wait-scheduled",
        "attempt-started",
        "attempt-finished",
        "step-finished",
        "step-started",
        "attempt-started",
        "attempt-finished",
        "step-finished",
        "run-finished",
    ]


def test_an_untouched_copy_loads_and_resumes_as_the_original(
    real_rows: Rows, tmp_path: Path
) -> None:
    path = write(tmp_path / "j.sqlite3", real_rows)
    with Journal(path) as jr:
        assert jr.load("r").status == "succeeded"
        assert wm.run(DOC, journal=jr, resume="r").status == "succeeded"


@pytest.mark.parametrize("at", [1e308, -1e308, -0.5, 2e10])
def test_a_time_outside_the_run_is_refused(real_rows: Rows, tmp_path: Path, at: float) -> None:
    rows = json.loads(json.dumps(real_rows))
    rows[5]["at"] = at
    message = refused(write(tmp_path / "j.sqlite3", rows), 6, "attempt-started")
    assert f"its at is {at!r} s, outside 0 … 1e+10 s" in message


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_json_without_nan_or_infinity(real_rows: Rows, tmp_path: Path, text: str) -> None:
    """The issue's NaN row: a resume used to append run-resumed, then fail."""
    data = json.dumps(real_rows[6]).replace('"result": {"n": 2}', f'"result": {{"n": {text}}}')
    assert text in data
    path = write(tmp_path / "j.sqlite3", real_rows[:6])  # killed during first's attempt 2
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO events(run_id, kind, at, wall, data) VALUES (?, ?, ?, ?, ?)",
            ("r", "attempt-finished", 1.0, time.time(), data),
        )
    finally:
        conn.close()
    assert text in refused(path, 7, "attempt-finished")


def test_a_run_on_a_clock_that_does_not_exist_is_refused(real_rows: Rows, tmp_path: Path) -> None:
    """spec §5.1: a run's clock is one of clock.CLOCKS; a resume would have to make it."""
    rows = json.loads(json.dumps(real_rows))
    rows[0]["clock"] = "sundial"
    message = refused(write(tmp_path / "j.sqlite3", rows), 1, "run-started")
    assert "its clock 'sundial' is not a clock; one of 'real' or 'simulated'" in message


def test_a_wait_longer_than_the_policy_is_refused(real_rows: Rows, tmp_path: Path) -> None:
    rows = json.loads(json.dumps(real_rows))
    rows[4]["seconds"], rows[4]["due"] = 1e300, 1e300
    message = refused(write(tmp_path / "j.sqlite3", rows), 5, "wait-scheduled")
    assert "1e+300" in message


def test_a_wait_of_another_length_than_the_policys_is_refused(
    real_rows: Rows, tmp_path: Path
) -> None:
    rows = json.loads(json.dumps(real_rows))
    rows[4]["seconds"] = 30.0
    rows[4]["due"] = rows[4]["at"] + 30.0
    message = refused(write(tmp_path / "j.sqlite3", rows), 5, "wait-scheduled")
    assert "it waits 30.0 s where the policy waits 1 s after attempt 1 (spec §3.1)" in message


def test_a_step_finished_for_a_step_that_never_started_is_refused(
    real_rows: Rows, tmp_path: Path
) -> None:
    """The forgery of the issue: resuming would have reattached second's forged result."""
    rows = json.loads(json.dumps(real_rows[:6]))  # killed during first's attempt 2
    rows.append({**real_rows[11], "result": 999, "at": rows[-1]["at"]})
    message = refused(write(tmp_path / "j.sqlite3", rows), 7, "step-finished")
    assert "step 'second' is pending: no step-started precedes it" in message


def test_a_succeeded_step_needs_the_attempt_that_returned_its_result(
    real_rows: Rows, tmp_path: Path
) -> None:
    rows = json.loads(json.dumps(real_rows))
    rows[7]["result"] = {"n": 999}
    message = refused(write(tmp_path / "j.sqlite3", rows), 8, "step-finished")
    assert "no succeeded attempt of 'first' returned this result" in message


def test_a_failed_step_needs_its_last_allowed_attempt_to_have_thrown(
    real_rows: Rows, tmp_path: Path
) -> None:
    rows = json.loads(json.dumps(real_rows[:4]))
    rows.append({**real_rows[7], "status": "failed", "result": None, "at": rows[-1]["at"]})
    message = refused(write(tmp_path / "j.sqlite3", rows), 5, "step-finished")
    assert "'first' has attempts left, so it has not failed" in message


@pytest.mark.parametrize(
    ("number", "why"),
    [
        (3, "step 'first' has used 1 of its 3 attempts, so its next is not attempt 3"),
        (1, "step 'first' has used 1 of its 3 attempts, so its next is not attempt 1"),
    ],
)
def test_attempts_are_numbered_in_turn(
    real_rows: Rows, tmp_path: Path, number: int, why: str
) -> None:
    rows = json.loads(json.dumps(real_rows[:6]))
    rows[5]["number"] = number
    assert why in refused(write(tmp_path / "j.sqlite3", rows), 6, "attempt-started")


def test_an_attempt_beyond_the_policy_is_refused(real_rows: Rows, tmp_path: Path) -> None:
    rows = json.loads(json.dumps(real_rows[:5]))
    for number in (2, 3, 4):
        rows += [{**real_rows[5], "number": number}, {**real_rows[3], "number": number}]
    message = refused(write(tmp_path / "j.sqlite3", rows), 10, "attempt-started")
    assert "used 3 of its 3 attempts, so its next is not attempt 4" in message


def test_an_outcome_for_an_attempt_that_is_not_running_is_refused(
    real_rows: Rows, tmp_path: Path
) -> None:
    rows = json.loads(json.dumps(real_rows[:4]))
    rows.append(dict(real_rows[3]))  # attempt 1 finishes twice
    message = refused(write(tmp_path / "j.sqlite3", rows), 5, "attempt-finished")
    assert "attempt 1 of 'first' is not the one running" in message


def test_a_step_the_document_does_not_have_is_refused(real_rows: Rows, tmp_path: Path) -> None:
    rows = json.loads(json.dumps(real_rows[:2]))
    rows.append({**real_rows[1], "step_id": "ghost"})
    message = refused(write(tmp_path / "j.sqlite3", rows), 3, "step-started")
    assert "it names step 'ghost', which the document does not have" in message


def test_events_after_the_run_finished_need_a_resume(real_rows: Rows, tmp_path: Path) -> None:
    rows = json.loads(json.dumps(real_rows))
    rows.append({**real_rows[1], "at": rows[-1]["at"]})
    message = refused(write(tmp_path / "j.sqlite3", rows), 14, "step-started")
    assert "the run had finished and was not resumed" in message


def test_a_second_run_started_is_refused(real_rows: Rows, tmp_path: Path) -> None:
    rows = json.loads(json.dumps(real_rows[:3]))
    rows.append(dict(real_rows[0]))
    assert "the run already started" in refused(
        write(tmp_path / "j.sqlite3", rows), 4, "run-started"
    )


def test_a_run_finished_that_its_steps_contradict_is_refused(
    real_rows: Rows, tmp_path: Path
) -> None:
    rows = json.loads(json.dumps(real_rows))
    rows[-1]["status"] = "failed"
    message = refused(write(tmp_path / "j.sqlite3", rows), 13, "run-finished")
    assert "the run's steps do not make it 'failed'" in message


def test_a_row_whose_data_names_another_run_is_refused(real_rows: Rows, tmp_path: Path) -> None:
    path = write(tmp_path / "j.sqlite3", real_rows[:3])
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO events(run_id, kind, at, wall, data) VALUES (?, ?, ?, ?, ?)",
            (
                "r",
                "attempt-finished",
                1.0,
                time.time(),
                json.dumps({**real_rows[3], "run_id": "other"}),
            ),
        )
    finally:
        conn.close()
    assert "its data names another kind or run than its row" in refused(path, 4, "attempt-finished")


def test_a_forged_write_time_is_refused_by_a_real_clock_resume(
    real_rows: Rows, tmp_path: Path
) -> None:
    """spec §5.3: a real-clock resume continues from the wall time of the last row."""
    rows = json.loads(json.dumps(real_rows[:6]))
    for row in rows:
        if row["kind"] == "run-started":
            row["clock"] = "real"
    path = write(tmp_path / "j.sqlite3", rows, wall=lambda i: 1e300 if i == 5 else time.time())
    with Journal(path) as jr:
        jr.load("r")  # the events themselves are sound
        before = len(jr.events("r"))
        with pytest.raises(
            WomlJournalError, match=r"^event 6 of run 'r' \(attempt-started\) .* unix time 1e\+300"
        ):
            wm.run(DOC, journal=jr, resume="r", retry_interrupted=True)
        assert len(jr.events("r")) == before


# -- drawing is bounded, whatever the Run ----------------------------------------------


def extreme(real_rows: Rows, change: Callable[[Rows], None]) -> Run:
    """A ``Run`` folded from changed events without the journal's checks (as any caller
    holding events could build one)."""
    rows = json.loads(json.dumps(real_rows))
    change(rows)
    return Run.from_events(WORKFLOW, [event_from_dict(r) for r in rows])


def _at(index: int, value: float) -> Callable[[Rows], None]:
    def change(rows: Rows) -> None:
        rows[index]["at"] = value

    return change


def _long_wait(rows: Rows) -> None:
    rows[4]["seconds"] = rows[4]["due"] = 1e300
    for row in rows[5:]:
        row["at"] = 1e300


@pytest.mark.parametrize(
    "change",
    [
        _at(5, 1e308),
        _at(5, -1e308),
        _at(5, math.inf),
        _at(5, math.nan),
        _at(12, 1e308),
        _long_wait,
    ],
    ids=["1e308", "-1e308", "inf", "nan", "end-1e308", "wait-1e300"],
)
def test_drawing_any_run_ends_quickly(real_rows: Rows, change: Callable[[Rows], None]) -> None:
    run = extreme(real_rows, change)
    started = time.monotonic()
    html = render_html(run)
    text = render_text(run)
    assert time.monotonic() - started < 5.0
    assert "<svg" in html
    assert "first" in text
    assert len(html) < 200_000


def test_the_tick_loop_ends_where_floats_cannot_advance() -> None:
    """A piece of axis at 1e300 s: adding a 1 s step gives the same float (it looped)."""
    knots = ((0.0, LABEL_W), (1e300, LABEL_W + BREAK_W), (1e300, LABEL_W + TRACK_W))
    started = time.monotonic()
    ticks = axis_ticks(knots, [(0.0, 1e300)], 1.0)
    assert time.monotonic() - started < 1.0
    assert len(ticks) <= 1


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (math.inf, "∞s"),
        (-math.inf, "-∞s"),
        (math.nan, "?s"),
        (3600.0, "1h"),
        (59.9996, "1m"),
    ],
)
def test_format_time_is_total(seconds: float, text: str) -> None:
    assert format_time(seconds) == text


def test_format_time_of_the_largest_float_is_hours() -> None:
    text = format_time(1.7e308)  # it overflowed: 1.7e308 × 1000 is infinite
    assert text.split("h")[0].isdigit()
    assert len(text) < 400


# -- a full disk is a full disk ----------------------------------------------------------

_OPEN_UNDER_LIMIT = """
import resource, signal, sys
from woml_magic.journal import Journal
from woml_magic.errors import WomlJournalError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
try:
    Journal(sys.argv[1]).close()
except WomlJournalError as exc:
    print(exc)
"""


@pytest.mark.parametrize("limit", [0, 4096])
def test_an_intact_journal_opened_on_a_full_disk_is_not_called_corrupt(
    real_rows: Rows, tmp_path: Path, limit: int
) -> None:
    """The issue: RLIMIT_FSIZE at open read "corrupt … move it aside" (spec §5.2)."""
    path = write(tmp_path / "j.sqlite3", real_rows)
    before = path.read_bytes()
    assert not Path(f"{path}-shm").exists()
    done = subprocess.run(
        [sys.executable, "-c", _OPEN_UNDER_LIMIT, str(path), str(limit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    message = done.stdout.strip()
    assert message.startswith(
        f"cannot open the journal {str(path)!r}: the disk is full for "
        f"this process: it may write files of at most {limit:,} bytes"
    )
    assert "corrupt" not in message
    assert "move it aside" not in message
    assert message.endswith("the journal was left as it was")
    assert path.read_bytes() == before
    with Journal(path) as jr:
        jr.check()
        assert jr.load("r").status == "succeeded"


_APPEND_UNDER_LIMIT = """
import os, resource, signal, sys
from woml_magic.journal import Journal
from woml_magic.events import LogEmitted
from woml_magic.errors import WomlJournalError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
jr = Journal(sys.argv[1])
size = max(os.path.getsize(sys.argv[1] + "-wal"), os.path.getsize(sys.argv[1]))
resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))
try:
    for i in range(10_000):
        jr.append(LogEmitted(run_id="big", at=0.0, step_id="s", number=1, text="x" * 4000))
except WomlJournalError as exc:
    print(exc)
"""


def test_a_write_on_a_full_disk_says_the_disk_is_full(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    Journal(path).close()
    done = subprocess.run(
        [sys.executable, "-c", _APPEND_UNDER_LIMIT, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    message = done.stdout.strip()
    assert message.startswith(
        f"cannot append log of run 'big' to the journal {str(path)!r}: "
        "the disk is full for this process"
    ), message
    assert "corrupt" not in message


# --- %woml runs: the summary columns are checked too (spec §5.2, §6.2) ----------------

@pytest.mark.parametrize(
    ("change", "wall", "why"),
    [
        ({(0, "workflow_id"): 5}, None, "names the workflow 5, not a document id"),
        ({(0, "workflow_id"): "\x1b[2Jowned\n\nfake row"}, None,
         "names the workflow '\\x1b[2Jowned\\n\\nfake row', not a document id"),
        ({(-1, "status"): "\x1b[31mRED"}, None,
         "run-finished row's status is '\\x1b[31mRED', not 'succeeded' or 'failed'"),
        ({(-2, "status"): [1, 2]}, None, "ends with '[1,2]', not a status of a step"),
        ({(-2, "step_id"): "a b"}, None, "names the step 'a b', not a step id"),
        ({}, "yesterday", "it was written at unix time 'yesterday', which is not a time"),
        ({}, math.inf, "it was written at unix time inf, which is not a time"),
    ],
)
def test_runs_refuses_a_run_whose_summary_holds_what_no_run_writes(
    real_rows: Rows, tmp_path: Path, change: dict[tuple[int, str], Any], wall: Any, why: str
) -> None:
    """`%woml runs` used to raise (TypeError, OverflowError) on such a row, or print a
    forged workflow id's terminal escapes and line breaks as they were. Now the run is
    listed as refused, with a sentence naming it; other runs are listed as before."""
    from woml_magic.magic.display import RunTable

    path = write(tmp_path / "j.sqlite3", _forged(real_rows, change),
                 (lambda _: time.time()) if wall is None else (lambda _: wall))
    good = wm.run(DOC, clock="simulated", journal=str(path), run_id="good")
    with Journal(path) as jr:
        summaries = {s.run_id: s for s in jr.runs()}
    assert summaries["good"].status == good.status == "succeeded"
    assert summaries["good"].problem is None
    bad = summaries["r"]
    assert bad.status == "refused"
    assert bad.problem is not None
    assert why in bad.problem, bad.problem
    assert bad.problem.startswith(f"run 'r' in the journal {str(path)!r} is refused: ")
    table = RunTable(str(path), list(summaries.values()))
    text, html = repr(table), table._repr_html_()
    assert bad.problem in text
    assert "\x1b" not in text
    assert "\x1b" not in html
    assert "fake row\n" not in text
    rows = text.splitlines()
    assert [line.split()[:3] for line in rows[2:4]] == [["good", "forged", "succeeded"],
                                                        ["r", "refused"]]


def _forged(rows: Rows, change: dict[tuple[int, str], Any]) -> Rows:
    rows = json.loads(json.dumps(rows))
    for (index, key), value in change.items():
        rows[index][key] = value
    return rows
