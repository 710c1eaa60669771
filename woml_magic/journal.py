"""The durable journal: an append-only SQLite log of a run's events (spec §5.2).

The engine emits frozen event records (``woml_magic.events``); a ``Journal`` is one of
their subscribers (an ``EventSink``). Each event is one row, committed before
``append`` returns, so ``attempt-started`` and ``call-started`` are durable before the
script or the request proceeds. The read side — ``runs()``, ``events()``, ``load()`` —
is the base of resume (spec §5.3), ``%woml runs`` and ``%woml show`` (spec §6.2).

Storage (schema 1)::

    events(seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, kind TEXT,
           at REAL, wall REAL, data TEXT)   -- data = JSON of Event.to_dict()
    meta(key TEXT PRIMARY KEY, value TEXT)  -- schema_version, app

``at`` is the event's time on the run's clock (spec §5.1); ``wall`` is the unix time
the row was written. Triggers refuse every UPDATE and DELETE on ``events``: the log
only grows.

Durability: WAL with ``synchronous=NORMAL``. Every committed event survives the death
of the writing process at any instant (``kill -9``); only an operating-system crash or
power loss can drop the last few commits. ``busy_timeout`` lets several processes
and several ``Journal`` objects write one file at once.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from .errors import WomlJournalError, WomlSyntaxError
from .events import JSON, CallFinished, CallStarted, Event, RunStarted, event_from_dict
from .model import Run, Workflow
from .redaction import DEFAULT_REDACTED, REDACTED, redact_headers

DEFAULT_PATH = ".woml/journal.sqlite3"
SCHEMA_VERSION = 1
APP_NAME = "woml-magic"
MEMORY = ":memory:"

#: How long a writer waits for another writer's lock before giving up (seconds).
BUSY_TIMEOUT_S = 10.0

#: ``RunSummary.status`` of a run with no ``run-finished`` after its latest start or
#: resume: it is either still running somewhere or its process died (spec §5.3).
UNFINISHED = "unfinished"

#: Header names the journal never stores in clear (spec §4.1). The engine redacts
#: before it emits; the journal redacts again so no pipeline bug can leak a secret
#: to disk.
SENSITIVE_HEADERS = frozenset(DEFAULT_REDACTED)

_SQLITE_MAGIC = b"SQLite format 3\x00"
# The bytes of an empty in-memory journal, made by the first one (see
# ``Journal._start_empty_in_memory``); immutable once set.
_EMPTY_IMAGE: dict[str, bytes] = {}

# S608: only our own constants are interpolated, never user input.
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    at REAL NOT NULL,
    wall REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_run ON events(run_id);
CREATE INDEX IF NOT EXISTS events_kind ON events(kind);
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'the woml journal is append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'the woml journal is append-only'); END;
INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '{SCHEMA_VERSION}');
INSERT OR IGNORE INTO meta(key, value) VALUES ('app', '{APP_NAME}');
PRAGMA user_version = {SCHEMA_VERSION};
"""  # noqa: S608

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

# Events that change a step's status, folded in append order for the summary.
_STEP_STATUS_SQL = """
SELECT run_id, json_extract(data, '$.step_id'), kind, json_extract(data, '$.status')
FROM events
WHERE kind IN ('step-started', 'attempt-started', 'wait-scheduled', 'step-finished')
ORDER BY seq
"""
_STEP_STATUS_BY_KIND = {
    "step-started": "running",
    "attempt-started": "running",
    "wait-scheduled": "waiting",
}


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
    ``step-finished`` status).
    """

    run_id: str
    workflow_id: str
    status: str
    clock: str
    fingerprint: str
    started_wall: float
    events: int
    last_at: float
    steps: dict[str, str] = field(default_factory=dict)
    last_wall: float = 0.0
    resumes: int = 0


def _summary(row: tuple[Any, ...], steps: dict[str, str]) -> RunSummary:
    """One ``_RUNS_SQL`` row as a ``RunSummary`` (columns in the query's order)."""
    run_id, n, last_at, last_wall, resumes, wf_id, clock, fp, started, life, status = row
    return RunSummary(
        run_id=run_id,
        workflow_id=wf_id or "",
        status=(status or "unknown") if life == "run-finished" else UNFINISHED,
        clock=clock or "",
        fingerprint=fp or "",
        started_wall=started,
        events=n,
        last_at=last_at,
        steps=steps,
        last_wall=last_wall,
        resumes=resumes,
    )


class Journal:
    """An append-only SQLite event log (spec §5.2); also an ``EventSink``.

    ``path`` is a file (its parent directories are created, the file with mode 0600)
    or ``":memory:"`` for a throwaway journal. Opening a file that is not a journal,
    is corrupt, or was written by a newer schema raises ``WomlJournalError`` and
    leaves the file untouched. One ``Journal`` may be shared by threads (a lock
    guards its connection); several ``Journal`` objects and several processes may
    write one file at once.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        *,
        redact_headers: Iterable[str] = (),
        busy_timeout: float = BUSY_TIMEOUT_S,
    ) -> None:
        self.path: str = os.fspath(path)
        self._redact = SENSITIVE_HEADERS | {h.lower() for h in redact_headers}
        self._lock = threading.Lock()
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        if self.path == MEMORY:
            self._conn = self._connect(self.path)
            self._start_empty_in_memory()
        else:
            self._open_file(Path(self.path))

    # -- opening -------------------------------------------------------------------

    def _connect(self, target: str, *, uri: bool = False) -> sqlite3.Connection:
        try:
            # isolation_level=None: each INSERT is its own transaction, committed when
            # execute() returns (spec §5.2); reads open explicit snapshots.
            conn = sqlite3.connect(
                target,
                uri=uri,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise WomlJournalError(f"cannot open the journal {self.path!r}: {exc}") from exc
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
        return conn

    def _open_file(self, path: Path) -> None:
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Create the file ourselves so it is born 0600 (spec §5.2); an existing
            # file is neither truncated nor re-moded.
            os.close(os.open(path, os.O_RDONLY | os.O_CREAT, 0o600))
            with path.open("rb") as fh:
                header = fh.read(100)
        except OSError as exc:
            raise WomlJournalError(
                f"cannot create or read the journal {self.path!r}: {exc.strerror or exc}"
            ) from exc
        if header and (len(header) < 100 or not header.startswith(_SQLITE_MAGIC)):
            raise WomlJournalError(
                f"{self.path!r} is not a woml journal (not an SQLite database); "
                "choose another journal path (--journal) or move the file aside"
            )
        complete = bool(header) and self._check_existing(path)
        conn = self._connect(str(path))
        self._conn = conn
        try:
            self._enable_wal(conn)
            if not complete:
                self._create_schema()
        except BaseException:
            self._conn = None
            conn.close()
            raise
        self._tighten_sidecars(path)

    def _check_existing(self, path: Path) -> bool:
        """Inspect an existing file read-only; raise if we must not write to it.

        True when it already holds this schema: it was created in one transaction,
        so the version says all of it is there, and opening skips the write
        transaction that would create it (half the cost of opening a journal).
        """
        self._roll_back_hot_journal(path)
        ro = self._connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            version = ro.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in ro.execute("SELECT name FROM sqlite_master")}
            app = None
            if "meta" in tables:
                row = ro.execute("SELECT value FROM meta WHERE key = 'app'").fetchone()
                app = None if row is None else row[0]
        except sqlite3.DatabaseError as exc:
            raise WomlJournalError(
                f"the journal {self.path!r} is corrupt or unreadable ({exc}); "
                "move it aside and start a new journal"
            ) from exc
        finally:
            ro.close()
        if version > SCHEMA_VERSION:
            raise WomlJournalError(
                f"the journal {self.path!r} was written by schema {version}; this "
                f"woml-magic reads up to schema {SCHEMA_VERSION}; upgrade woml-magic"
            )
        if tables and app != APP_NAME:
            raise WomlJournalError(
                f"{self.path!r} is an SQLite database but not a woml journal "
                "(no woml-magic meta table); choose another journal path (--journal)"
            )
        return bool(version == SCHEMA_VERSION and app == APP_NAME)

    def _roll_back_hot_journal(self, path: Path) -> None:
        """Let SQLite roll back a transaction left by a killed writer (spec §5.2).

        A writer killed while the file was still in rollback mode (while it switched a
        new journal to WAL) leaves a hot ``-journal``; a read-only connection cannot
        roll it back and fails with "attempt to write a readonly database". Rolling
        back restores the last committed state, as any SQLite client does on open.
        """
        if not Path(f"{path}-journal").exists():
            return
        conn = self._connect(str(path))
        try:
            with contextlib.suppress(sqlite3.DatabaseError):  # the inspection reports it
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
            except sqlite3.OperationalError as exc:
                # Switching to WAL needs a moment of exclusive access, and SQLite
                # does not always apply the busy handler to it.
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise self._error("enable write-ahead logging in", exc) from exc
                time.sleep(0.01)
            else:
                return

    def _start_empty_in_memory(self) -> None:
        """Give a new in-memory journal the schema (spec §5.2).

        ``wm.run`` opens one per run, so this is part of every run's cost: loading the
        image of an empty journal (``deserialize``, Python 3.11+) takes ≈ 20 µs where
        creating the schema takes ≈ 170 µs. The image is made here once per process.
        """
        conn = self._live()
        image = _EMPTY_IMAGE.get("image")
        if image is None or not hasattr(conn, "deserialize"):
            self._create_schema()
            if hasattr(conn, "serialize"):
                _EMPTY_IMAGE["image"] = conn.serialize()
            return
        with self._guard("initialise"):
            conn.deserialize(image)

    def _create_schema(self) -> None:
        # One IMMEDIATE transaction: two processes opening a new file at once both
        # run this, one after the other, and the second changes nothing.
        conn = self._live()
        with self._guard("initialise"):
            try:
                conn.executescript(f"BEGIN IMMEDIATE;{_SCHEMA}COMMIT;")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _tighten_sidecars(self, path: Path) -> None:
        # SQLite gives -wal/-shm the main file's mode, but a sidecar left by an older
        # process may be looser; never let them be more open than the journal itself.
        allowed = stat.S_IMODE(path.stat().st_mode)
        for suffix in ("-wal", "-shm"):
            side = Path(f"{path}{suffix}")
            with contextlib.suppress(OSError):
                mode = stat.S_IMODE(side.stat().st_mode)
                if mode & ~allowed:
                    side.chmod(mode & allowed)

    # -- writing ---------------------------------------------------------------------

    def append(self, event: Event) -> None:
        """Append one event and commit it before returning (spec §5.2)."""
        data = self._encode(event)
        try:
            with self._lock:
                self._live().execute(
                    "INSERT INTO events(run_id, kind, at, wall, data) VALUES (?, ?, ?, ?, ?)",
                    (event.run_id, event.kind, float(event.at), time.time(), data),
                )
        except sqlite3.Error as exc:  # `_guard`, inline: this runs for every event
            raise self._error(f"append {event.kind} of run {event.run_id!r} to", exc) from exc

    def __call__(self, event: Event) -> None:
        """``EventSink``: the same as ``append`` (spec §5.2)."""
        self.append(event)

    def _encode(self, event: Event) -> str:
        record = self._redacted(event).to_dict()
        try:
            return json.dumps(record, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise WomlJournalError(
                f"cannot journal {event.kind} of run {event.run_id!r}: {exc}; "
                "events carry JSON values only (null, booleans, finite numbers, "
                "strings, arrays, objects)"
            ) from exc

    def _redacted(self, event: Event) -> Event:
        if isinstance(event, CallStarted):
            headers = self._redact_headers(event.request_headers)
            return event if headers is None else replace(event, request_headers=headers)
        if isinstance(event, CallFinished) and isinstance(event.response, dict):
            inner = event.response.get("headers")
            headers = self._redact_headers(inner) if isinstance(inner, dict) else None
            if headers is not None:
                return replace(event, response={**event.response, "headers": headers})
        return event

    def _redact_headers(self, headers: dict[str, Any]) -> dict[str, Any] | None:
        """A copy with sensitive values replaced, or None when nothing needs it."""
        if not any(k.lower() in self._redact and v != REDACTED for k, v in headers.items()):
            return None
        return redact_headers(headers, self._redact)

    # -- reading ---------------------------------------------------------------------

    def runs(self, limit: int | None = None) -> list[RunSummary]:
        """Every journaled run, most recently started first (spec §6.2).

        ``limit`` keeps only the newest ``limit`` runs.
        """
        with self._snapshot("list the runs of") as conn:
            rows = conn.execute(_RUNS_SQL).fetchall()
            step_rows = conn.execute(_STEP_STATUS_SQL).fetchall() if rows else []
        if limit is not None:
            rows = rows[:limit]
        steps: dict[str, dict[str, str]] = {}
        for run_id, step_id, kind, status in step_rows:
            if step_id is not None:
                steps.setdefault(run_id, {})[step_id] = (
                    _STEP_STATUS_BY_KIND.get(kind) or status or "unknown"
                )
        return [_summary(row, steps.get(row[0], {})) for row in rows]

    def has_run(self, run_id: str) -> bool:
        """Whether any event of ``run_id`` is journaled."""
        with self._snapshot("look up a run in") as conn:
            row = conn.execute("SELECT 1 FROM events WHERE run_id = ? LIMIT 1", (run_id,))
            return row.fetchone() is not None

    def events(self, run_id: str) -> list[Event]:
        """The run's events in append order, as the engine emitted them (spec §5.3)."""
        with self._snapshot(f"read run {run_id!r} from") as conn:
            rows = conn.execute(
                "SELECT seq, data FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
            if not rows:
                raise self._unknown_run(conn, run_id)
        out: list[Event] = []
        for seq, data in rows:
            try:
                record: dict[str, JSON] = json.loads(data)
                out.append(event_from_dict(record))
            except (ValueError, TypeError, KeyError) as exc:
                raise WomlJournalError(
                    f"event {seq} of run {run_id!r} in the journal {self.path!r} cannot "
                    f"be read ({exc}); it may come from a newer woml-magic"
                ) from exc
        return out

    def last_at(self, run_id: str) -> float:
        """The latest time on the run's clock of any journaled event (spec §5.3)."""
        return self._latest(run_id, "at")

    def last_wall(self, run_id: str) -> float:
        """The unix time the run's latest event was written (spec §5.3: real-clock resume)."""
        return self._latest(run_id, "wall")

    def _latest(self, run_id: str, column: str) -> float:
        assert column in ("at", "wall")  # a column name, never user input
        with self._snapshot(f"read run {run_id!r} from") as conn:
            (value,) = conn.execute(
                f"SELECT MAX({column}) FROM events WHERE run_id = ?",  # noqa: S608 - fixed names
                (run_id,),
            ).fetchone()
            if value is None:
                raise self._unknown_run(conn, run_id)
            return float(value)

    def load(self, run_id: str, workflow: Workflow | None = None) -> Run:
        """Rebuild the run's ``Run`` from its events (spec §5.3, §6.2 ``%woml show``).

        Without ``workflow`` the journaled document (``RunStarted.source``) is parsed.
        """
        events = self.events(run_id)
        first = events[0]
        if not isinstance(first, RunStarted):
            raise WomlJournalError(
                f"run {run_id!r} in the journal {self.path!r} has no run-started event "
                f"(its first event is {first.kind}); it cannot be shown or resumed"
            )
        if workflow is None:
            workflow = self._parse_source(run_id, first)
        try:
            return Run.from_events(workflow, events)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise WomlJournalError(
                f"run {run_id!r} cannot be rebuilt from the journal {self.path!r}: {exc!r}"
            ) from exc

    def _parse_source(self, run_id: str, started: RunStarted) -> Workflow:
        # Lazy: the parser pulls in lxml, which listing or appending never needs.
        from .parse import parse

        try:
            workflow: Workflow = parse(started.source)
        except WomlSyntaxError as exc:
            raise WomlJournalError(
                f"the document of run {run_id!r} no longer parses ({exc}); "
                "pass the workflow to Journal.load explicitly"
            ) from exc
        return workflow

    def check(self) -> None:
        """Run SQLite's full integrity check; raise ``WomlJournalError`` if it fails."""
        with self._snapshot("check") as conn:
            result = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        if result != ["ok"]:
            raise WomlJournalError(f"the journal {self.path!r} is corrupt: {'; '.join(result[:3])}")

    # -- plumbing --------------------------------------------------------------------

    def _unknown_run(self, conn: sqlite3.Connection, run_id: str) -> WomlJournalError:
        known = [r[0] for r in conn.execute("SELECT DISTINCT run_id FROM events")]
        close = difflib.get_close_matches(run_id, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return WomlJournalError(
            f"no run {run_id!r} in the journal {self.path!r}; {hint}"
            "`%woml runs` (or Journal.runs()) lists the journaled runs"
        )

    def _live(self) -> sqlite3.Connection:
        if self._conn is None:
            raise WomlJournalError(f"the journal {self.path!r} is closed")
        return self._conn

    @contextlib.contextmanager
    def _snapshot(self, action: str) -> Iterator[sqlite3.Connection]:
        """Hold the lock and one read transaction: a consistent view across queries."""
        with self._guard(action), self._lock:
            conn = self._live()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    @contextlib.contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise self._error(action, exc) from exc

    def _error(self, action: str, exc: sqlite3.Error) -> WomlJournalError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            why = f"another writer held it for more than {self._busy_timeout:g} s"
        elif "malformed" in text or "not a database" in text:
            why = "the file is corrupt; move it aside and start a new journal"
        else:
            why = text
        return WomlJournalError(f"cannot {action} the journal {self.path!r}: {why}")

    def close(self) -> None:
        """Close the connection; later calls raise ``WomlJournalError``. Idempotent."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"<Journal {self.path!r} {state}>"
