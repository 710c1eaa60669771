"""Reading the journal: run summaries, a run's events, its ``Run`` (spec §5.3, §6.2).

``runs`` lists what ``%woml runs`` shows; ``events`` and ``load`` give back a run as
the engine emitted it, the base of resume and ``%woml show``. Each read is one
snapshot (one read transaction), so it never sees half of a concurrent writer's work.
A step's status in a summary is folded by ``model.step_status_after``, the fold
``Run.apply`` uses, so ``%woml runs`` and the ``Run`` cannot disagree.
"""

from __future__ import annotations

import difflib
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..clock import CLOCKS, ClockKind, as_clock
from ..errors import WomlJournalError, WomlSyntaxError, quote
from ..events import Event, RunStarted, StepFinished
from ..model import STEP_STATUS_BY_KIND, Run, Workflow, step_status_after
from ..outcomes import FAILED, PENDING, STEP_STATUSES, SUCCEEDED, RunStatus, StepStatus
from ..scan import ID
from . import validate
from .storage import Storage

#: ``RunSummary.status`` of a run with no ``run-finished`` after its latest start or
#: resume: it is either still running somewhere or its process died (spec §5.3).
UNFINISHED: Final = "unfinished"
#: ``RunSummary.status`` of a run whose ``run-finished`` names no status.
_UNKNOWN: Final = "unknown"
#: ``RunSummary.status`` of a run whose summary columns fail their checks (spec §5.2):
#: ``RunSummary.problem`` says which and why, and nothing else of it is shown.
REFUSED: Final = "refused"

SummaryStatus = RunStatus | Literal["unfinished", "unknown", "refused"]
"""A run's status in the journal: its ``run-finished`` status, ``unfinished``, or
``refused`` when its rows cannot be summarised as they stand."""

_RUNS_SQL = """
WITH agg AS (
    SELECT run_id, COUNT(*) AS n, MAX(at) AS last_at, MAX(wall) AS last_wall,
           MIN(seq) AS first_seq, SUM(kind = 'run-resumed') AS resumes
    FROM events GROUP BY run_id
), started AS (
    SELECT run_id, MIN(seq) AS seq FROM events WHERE kind = 'run-started' GROUP BY run_id
), life AS (
    SELECT run_id, MAX(seq) AS seq FROM events
    WHERE kind IN ('run-started', 'run-resumed', 'run-finished') GROUP BY run_id
)
SELECT agg.run_id, agg.n, agg.last_at, agg.last_wall, agg.resumes,
       json_extract(s.data, '$.workflow_id'), json_extract(s.data, '$.clock'),
       json_extract(s.data, '$.fingerprint'), COALESCE(s.wall, f.wall),
       l.kind, json_extract(l.data, '$.status')
FROM agg
JOIN events f ON f.seq = agg.first_seq
LEFT JOIN started ON started.run_id = agg.run_id
LEFT JOIN events s ON s.seq = started.seq
LEFT JOIN life ON life.run_id = agg.run_id
LEFT JOIN events l ON l.seq = life.seq
ORDER BY agg.first_seq DESC
"""

# The kinds that change a step's status: the fold's table, plus step-finished with
# its own status. Folded in append order for the summary.
_STEP_KINDS = (*STEP_STATUS_BY_KIND, StepFinished.kind)
_STEP_STATUS_SQL = f"""
SELECT run_id, json_extract(data, '$.step_id'), kind, json_extract(data, '$.status')
FROM events
WHERE kind IN ({", ".join("?" * len(_STEP_KINDS))})
ORDER BY seq
"""  # noqa: S608 - only placeholders are interpolated; the kinds are bound parameters


@dataclass(frozen=True)
class RunSummary:
    """One journaled run as ``%woml runs`` lists it (spec §6.2).

    ``status`` is the last ``run-finished`` status (``"succeeded"`` or ``"failed"``),
    or ``"unfinished"`` when no ``run-finished`` follows the run's latest start or
    resume: the run is still going in some process, or that process died and the run
    can be resumed (spec §5.3). ``started_wall`` and ``last_wall`` are unix times the
    first and latest rows were written; ``last_at`` is the latest time on the run's
    clock (spec §5.1). ``steps`` maps each step that has started to its latest
    journaled status (``running`` / ``waiting`` while unfinished, else the
    ``step-finished`` status). ``problem`` is the sentence that refuses a run whose
    rows hold values woml-magic never writes (spec §5.2: read back, checked before it
    is trusted); such a summary has status ``refused`` and no other value from them.
    """

    run_id: str
    workflow_id: str
    status: SummaryStatus
    clock: ClockKind | None  # None: its run-started row names no clock (a forged row)
    fingerprint: str
    started_wall: float
    events: int
    last_at: float
    steps: dict[str, StepStatus] = field(default_factory=dict)
    last_wall: float = 0.0
    resumes: int = 0
    problem: str | None = None


def runs(storage: Storage, limit: int | None = None) -> list[RunSummary]:
    """Every journaled run, most recently started first; the newest ``limit`` if given."""
    with storage.snapshot("list the runs of") as conn:
        rows = conn.execute(_RUNS_SQL).fetchall()
        step_rows = conn.execute(_STEP_STATUS_SQL, _STEP_KINDS).fetchall() if rows else []
    if limit is not None:
        rows = rows[:limit]
    steps: dict[str, dict[str, StepStatus]] = {}
    for run_id, step_id, kind, status in step_rows:
        if step_id is not None:
            of_run = steps.setdefault(run_id, {})
            of_run[step_id] = step_status_after(of_run.get(step_id, PENDING), kind, status)
    return [_summary(storage.path, row, steps.get(row[0], {})) for row in rows]


def _summary(path: str, row: tuple[Any, ...], steps: dict[str, StepStatus]) -> RunSummary:
    """One ``_RUNS_SQL`` row as a ``RunSummary`` (columns in the query's order), each
    value checked (``_check_summary``); a run that fails is ``refused``, named."""
    run_id, n, last_at, last_wall, resumes, wf_id, clock, fp, started, life, status = row
    try:
        _check_summary(run_id, wf_id, fp, status if life == "run-finished" else None, steps)
        summary = RunSummary(
            run_id=run_id,
            workflow_id=wf_id or "",
            status=(status or _UNKNOWN) if life == "run-finished" else UNFINISHED,
            clock=as_clock(clock) if clock in CLOCKS else None,
            fingerprint=fp or "",
            started_wall=validate.check_wall(started),
            events=n,
            last_at=validate.check_time("latest time", last_at),
            steps=steps,
            last_wall=validate.check_wall(last_wall),
            resumes=resumes,
        )
    except validate.BadRow as exc:
        shown = run_id if isinstance(run_id, str) and run_id.isprintable() else quote(run_id)
        return RunSummary(
            run_id=shown, workflow_id="", status=REFUSED, clock=None, fingerprint="",
            started_wall=0.0, events=n, last_at=0.0,
            problem=f"run {quote(run_id)} in the journal {path!r} is refused: {exc}; it was "
                    "not written by woml-magic as it stands, so it is not summarised",
        )
    return summary


def _check_summary(run_id: Any, workflow_id: Any, fingerprint: Any, status: Any,
                   steps: dict[str, StepStatus]) -> None:
    """``BadRow`` unless the summary's text columns are values woml-magic writes: a
    printable run id (``api``'s rule), a document id (spec §2.2), a text fingerprint, a
    run status, and step ids with statuses of a step (spec §7). They are shown in a
    table and a terminal, so nothing else of a forged row reaches either."""
    if not isinstance(run_id, str) or not run_id.isprintable():
        raise validate.BadRow(f"its run id is {quote(run_id)}, not printable text")
    if workflow_id is not None and not (isinstance(workflow_id, str) and ID.fullmatch(workflow_id)):
        raise validate.BadRow(f"its run-started row names the workflow {quote(workflow_id)}, "
                              "not a document id")
    if fingerprint is not None and not (isinstance(fingerprint, str) and fingerprint.isprintable()):
        raise validate.BadRow(f"its run-started row's fingerprint is {quote(fingerprint)}")
    if status is not None and status not in (SUCCEEDED, FAILED):
        raise validate.BadRow(f"its run-finished row's status is {quote(status)}, not "
                              f"{SUCCEEDED!r} or {FAILED!r}")
    for step_id, step_status in steps.items():
        if not (isinstance(step_id, str) and ID.fullmatch(step_id)):
            raise validate.BadRow(f"a row names the step {quote(step_id)}, not a step id")
        if step_status not in STEP_STATUSES:
            raise validate.BadRow(f"step {step_id!r} ends with {quote(step_status)}, not a "
                                  "status of a step")


def has_run(storage: Storage, run_id: str) -> bool:
    """Whether any event of ``run_id`` is journaled."""
    with storage.snapshot("look up a run in") as conn:
        row = conn.execute("SELECT 1 FROM events WHERE run_id = ? LIMIT 1", (run_id,))
        return row.fetchone() is not None


def events(storage: Storage, run_id: str) -> list[Event]:
    """The run's events in append order, as the engine emitted them (spec §5.3)."""
    return [event for _, event in _rows(storage, run_id)]


def _rows(storage: Storage, run_id: str) -> list[tuple[int, Event]]:
    """The run's (seq, event) in append order, each row's values checked (spec §5.2)."""
    with storage.snapshot(f"read run {run_id!r} from") as conn:
        rows = conn.execute(
            "SELECT seq, kind, data FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
        if not rows:
            raise _unknown_run(storage, conn, run_id)
    out: list[tuple[int, Event]] = []
    for seq, kind, data in rows:
        try:
            out.append((seq, validate.decode(data, kind, run_id)))
        except validate.BadRow as exc:
            raise validate.refuse(storage.path, run_id, seq, str(kind), str(exc)) from None
    return out


def latest(storage: Storage, run_id: str, column: Literal["at", "wall"]) -> float:
    """The largest ``at`` (run clock) or ``wall`` (unix time) of the run's events."""
    assert column in ("at", "wall")  # a column name, never user input
    with storage.snapshot(f"read run {run_id!r} from") as conn:
        row = conn.execute(
            f"SELECT seq, kind, {column} FROM events WHERE run_id = ? "  # noqa: S608 - fixed names
            f"ORDER BY {column} DESC LIMIT 1",
            (run_id,),
        ).fetchone()
        if row is None:
            raise _unknown_run(storage, conn, run_id)
    seq, kind, value = row
    try:
        if column == "at":
            return validate.check_time("time", value)
        return validate.check_wall(value)
    except validate.BadRow as exc:
        raise validate.refuse(storage.path, run_id, seq, str(kind), str(exc)) from None


def load(storage: Storage, run_id: str, workflow: Workflow | None = None) -> Run:
    """Rebuild the run's ``Run`` from its events; without ``workflow``, from its
    journaled document (``RunStarted.source``)."""
    journaled = _rows(storage, run_id)
    first = journaled[0][1]
    if not isinstance(first, RunStarted):
        raise WomlJournalError(
            f"run {run_id!r} in the journal {storage.path!r} has no run-started event "
            f"(its first event is {first.kind}); it cannot be shown or resumed"
        )
    if workflow is None:
        workflow = _parse_source(run_id, first)
    try:
        return validate.checked_run(workflow, journaled, storage.path)
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise WomlJournalError(
            f"run {run_id!r} cannot be rebuilt from the journal {storage.path!r}: {exc!r}"
        ) from exc


def _parse_source(run_id: str, started: RunStarted) -> Workflow:
    # Lazy: the parser pulls in lxml, which listing or appending never needs.
    from ..parse import parse

    try:
        workflow: Workflow = parse(started.source)
    except WomlSyntaxError as exc:
        raise WomlJournalError(
            f"the document of run {run_id!r} no longer parses ({exc}); "
            "pass the workflow to Journal.load explicitly"
        ) from exc
    return workflow


def _unknown_run(storage: Storage, conn: sqlite3.Connection, run_id: str) -> WomlJournalError:
    known = [r[0] for r in conn.execute("SELECT DISTINCT run_id FROM events")]
    close = difflib.get_close_matches(run_id, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return WomlJournalError(
        f"no run {quote(run_id)} in the journal {storage.path!r}; {hint}"
        "`%woml runs` (or Journal.runs()) lists the journaled runs"
    )
