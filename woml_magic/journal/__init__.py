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

The package follows its concerns: ``storage`` opens the file safely and owns the
connection, ``sink`` appends (redaction, one commit per event), ``reader`` reads
(summaries, events, the rebuilt ``Run``), ``validate`` checks every row read before
it is trusted, and ``claim`` lets one execution at a time start or resume a run id
(spec §5.2). ``Journal`` ties them to one object.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager
from types import TracebackType

from ..events import Event
from ..model import Run, Workflow
from ..redaction import REDACTED, redact_names
from . import reader, sink
from .claim import Action, Claims, Holder
from .reader import UNFINISHED, RunSummary, SummaryStatus
from .storage import APP_NAME, BUSY_TIMEOUT_S, DEFAULT_PATH, MEMORY, SCHEMA_VERSION, Storage

__all__ = [
    "APP_NAME",
    "BUSY_TIMEOUT_S",
    "DEFAULT_PATH",
    "MEMORY",
    "REDACTED",
    "SCHEMA_VERSION",
    "SENSITIVE_HEADERS",
    "UNFINISHED",
    "Holder",
    "Journal",
    "RunSummary",
    "SummaryStatus",
]

#: Header names the journal never stores in clear (spec §4.1). The engine redacts
#: before it emits; the journal redacts again so no pipeline bug can leak a secret
#: to disk.
SENSITIVE_HEADERS = frozenset(redact_names())


class Journal:
    """An append-only SQLite event log (spec §5.2); also an ``EventSink``.

    ``path`` is a file (its parent directories are created, the file with mode 0600)
    or ``":memory:"`` for a throwaway journal. Opening a file that is not a journal,
    is corrupt, or was written by a newer schema raises ``WomlJournalError`` and
    leaves the file untouched. One ``Journal`` may be shared by threads (a lock
    guards its connection); several ``Journal`` objects and several processes may
    write one file at once. ``redact_headers`` names headers to hide besides
    ``SENSITIVE_HEADERS``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        *,
        redact_headers: Iterable[str] = (),
        busy_timeout: float = BUSY_TIMEOUT_S,
    ) -> None:
        self._redact = frozenset(redact_names(redact_headers))
        self._storage = Storage(path, busy_timeout=busy_timeout)
        self.path: str = self._storage.path
        self._claims = Claims(self.path)

    @property
    def connection(self) -> sqlite3.Connection:
        """The open SQLite connection, to inspect the file (read-only queries).

        ``WomlJournalError`` once the journal is closed. Write only through ``append``:
        the triggers refuse changes to events anyway.
        """
        return self._storage.connection

    # -- writing ---------------------------------------------------------------------

    def append(self, event: Event) -> None:
        """Append one event and commit it before returning (spec §5.2)."""
        sink.append(self._storage, event, self._redact)

    def __call__(self, event: Event) -> None:
        """``EventSink``: the same as ``append`` (spec §5.2)."""
        self.append(event)

    def claim(self, run_id: str, action: Action = "run") -> AbstractContextManager[Holder]:
        """Hold ``run_id``'s claim for a ``with`` block: start (``"run"``) or resume it
        (``"resume"``) inside it (spec §5.2).

        Of two claimants at once, in any processes or threads, exactly one gets it; the
        other gets ``WomlRunError`` at once, naming the run and its holder (pid, host,
        since when). The claim ends with the block, or with its holder's process.
        Check that an id is new, or load the run to resume, inside the block: nobody
        else can journal a start or a resume of the run while it is held.
        """
        return self._claims.hold(run_id, action)

    # -- reading ---------------------------------------------------------------------

    def runs(self, limit: int | None = None) -> list[RunSummary]:
        """Every journaled run, most recently started first (spec §6.2).

        ``limit`` keeps only the newest ``limit`` runs.
        """
        return reader.runs(self._storage, limit)

    def has_run(self, run_id: str) -> bool:
        """Whether any event of ``run_id`` is journaled."""
        return reader.has_run(self._storage, run_id)

    def events(self, run_id: str) -> list[Event]:
        """The run's events in append order, as the engine emitted them (spec §5.3)."""
        return reader.events(self._storage, run_id)

    def last_at(self, run_id: str) -> float:
        """The latest time on the run's clock of any journaled event (spec §5.3)."""
        return reader.latest(self._storage, run_id, "at")

    def last_wall(self, run_id: str) -> float:
        """The unix time the run's latest event was written (spec §5.3: real-clock resume)."""
        return reader.latest(self._storage, run_id, "wall")

    def load(self, run_id: str, workflow: Workflow | None = None) -> Run:
        """Rebuild the run's ``Run`` from its events (spec §5.3, §6.2 ``%woml show``).

        Without ``workflow`` the journaled document (``RunStarted.source``) is parsed.
        """
        return reader.load(self._storage, run_id, workflow)

    def check(self) -> None:
        """Run SQLite's full integrity check; raise ``WomlJournalError`` if it fails."""
        self._storage.check()

    # -- lifetime --------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; later calls raise ``WomlJournalError``. Idempotent."""
        self._storage.close()

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
        state = "closed" if self._storage.closed else "open"
        return f"<Journal {self.path!r} {state}>"
