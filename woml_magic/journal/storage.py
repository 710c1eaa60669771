"""Opening a journal safely: the SQLite file, its schema and its one connection (spec §5.2).

A ``Storage`` owns one connection and the lock that guards it. Opening checks before
it writes: the path's directories are created 0700 and the file 0600; a file that is
not SQLite, not a woml journal, corrupt, or of a newer schema is refused and left
byte-for-byte as it was; a hot rollback journal left by a killed writer is rolled
back first. Then WAL with ``synchronous=NORMAL`` and a busy timeout, so several
processes and several ``Journal`` objects can write one file at once.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import WomlJournalError

DEFAULT_PATH = ".woml/journal.sqlite3"
SCHEMA_VERSION = 1
APP_NAME = "woml-magic"
MEMORY = ":memory:"

#: How long a writer waits for another writer's lock before giving up (seconds).
BUSY_TIMEOUT_S = 10.0

_SQLITE_MAGIC = b"SQLite format 3\x00"
# SQLite's primary result codes for an I/O error and a full database or disk.
_SQLITE_IOERR = 10
_SQLITE_FULL = 13
#: Below this much free space an I/O error while writing is taken for a full disk.
_LOW_SPACE_BYTES = 1024 * 1024
# The bytes of an empty in-memory journal, made by the first one (see
# ``Storage._start_empty_in_memory``); immutable once set.
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


def _result_code(exc: sqlite3.Error) -> int | None:
    """SQLite's result code of ``exc``: its ``sqlite_errorcode`` (Python 3.11+), else
    read from SQLite's own words for the two codes that matter here (Python 3.10)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code
    text = str(exc)
    if "database or disk is full" in text:
        return _SQLITE_FULL
    if "disk I/O error" in text:
        return _SQLITE_IOERR
    return None


def _file_size_limit() -> int | None:
    """This process's largest file in bytes (``ulimit -f``), or None: no limit, or a
    system without one (Windows has no ``resource`` module)."""
    try:
        import resource
    except ImportError:
        return None
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if limit == resource.RLIM_INFINITY else int(limit)


def _free_bytes(directory: str) -> int | None:
    """Bytes an unprivileged writer may still use on ``directory``'s file system."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


class Storage:
    """One open journal: its SQLite connection, the lock guarding it, its errors.

    ``path`` is a file or ``":memory:"``. The connection is shared by threads under
    ``lock``; ``snapshot`` reads in one transaction, ``error`` words an SQLite failure
    as a ``WomlJournalError`` that names the file and what to do.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float) -> None:
        self.path: str = os.fspath(path)
        self.busy_timeout = busy_timeout
        self.lock = threading.Lock()
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
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise WomlJournalError(f"cannot open the journal {self.path!r}: {exc}") from exc
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
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
            room = self.no_room(exc)
            if room is not None:
                raise WomlJournalError(
                    f"cannot open the journal {self.path!r}: {room}; the journal was left as it was"
                ) from exc
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
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
            except sqlite3.OperationalError as exc:
                # Switching to WAL needs a moment of exclusive access, and SQLite
                # does not always apply the busy handler to it.
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise self.error("enable write-ahead logging in", exc) from exc
                time.sleep(0.01)
            else:
                return

    def _start_empty_in_memory(self) -> None:
        """Give a new in-memory journal the schema (spec §5.2).

        ``wm.run`` opens one per run, so this is part of every run's cost: loading the
        image of an empty journal (``deserialize``, Python 3.11+) takes ≈ 20 µs where
        creating the schema takes ≈ 170 µs. The image is made here once per process.
        """
        conn = self.connection
        image = _EMPTY_IMAGE.get("image")
        if image is None or not hasattr(conn, "deserialize"):
            self._create_schema()
            if hasattr(conn, "serialize"):
                _EMPTY_IMAGE["image"] = conn.serialize()
            return
        with self.guard("initialise"):
            conn.deserialize(image)

    def _create_schema(self) -> None:
        # One IMMEDIATE transaction: two processes opening a new file at once both
        # run this, one after the other, and the second changes nothing.
        conn = self.connection
        with self.guard("initialise"):
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

    # -- using the connection ------------------------------------------------------

    @property
    def connection(self) -> sqlite3.Connection:
        """The open connection; ``WomlJournalError`` once the journal is closed."""
        if self._conn is None:
            raise WomlJournalError(f"the journal {self.path!r} is closed")
        return self._conn

    @property
    def closed(self) -> bool:
        return self._conn is None

    @contextlib.contextmanager
    def snapshot(self, action: str) -> Iterator[sqlite3.Connection]:
        """Hold the lock and one read transaction: a consistent view across queries."""
        with self.guard(action), self.lock:
            conn = self.connection
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    @contextlib.contextmanager
    def guard(self, action: str) -> Iterator[None]:
        """Turn an ``sqlite3.Error`` inside the block into ``error(action, …)``."""
        try:
            yield
        except sqlite3.Error as exc:
            raise self.error(action, exc) from exc

    def error(self, action: str, exc: sqlite3.Error) -> WomlJournalError:
        """``exc`` as a ``WomlJournalError``: "cannot ``action`` the journal …: why"."""
        text = str(exc)
        room = self.no_room(exc)
        if room is not None:
            why = room
        elif "locked" in text or "busy" in text:
            why = f"another writer held it for more than {self.busy_timeout:g} s"
        elif "malformed" in text or "not a database" in text:
            why = "the file is corrupt; move it aside and start a new journal"
        else:
            why = text
        return WomlJournalError(f"cannot {action} the journal {self.path!r}: {why}")

    def no_room(self, exc: sqlite3.Error) -> str | None:
        """Why SQLite could not write, when it is a lack of room (spec §5.2): a full disk
        or a file-size limit, in words that keep SQLite's reason; None for other errors.

        SQLite reports a full disk as ``SQLITE_FULL`` when a database page does not fit,
        and as an I/O error when its shared-memory index (``-shm``) cannot grow; neither
        says anything about the journal's own bytes, which stay as they were.
        """
        code = _result_code(exc)
        if code is None or code & 0xFF not in (_SQLITE_IOERR, _SQLITE_FULL):
            return None
        reason = f"{exc} ({getattr(exc, 'sqlite_errorname', '')})".replace(" ()", "")
        limit = _file_size_limit()
        if limit is not None:
            return (
                f"the disk is full for this process: it may write files of at most "
                f"{limit:,} bytes (ulimit -f; SQLite: {reason}); raise the limit and "
                "try again"
            )
        free = _free_bytes(os.path.dirname(os.path.abspath(self.path)))
        if code & 0xFF == _SQLITE_FULL or (free is not None and free < _LOW_SPACE_BYTES):
            shown = "" if free is None else f", {free:,} bytes free"
            return f"the disk is full (SQLite: {reason}{shown}); free some space and try again"
        return None

    def check(self) -> None:
        """Run SQLite's full integrity check; raise ``WomlJournalError`` if it fails."""
        with self.snapshot("check") as conn:
            result = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        if result != ["ok"]:
            raise WomlJournalError(f"the journal {self.path!r} is corrupt: {'; '.join(result[:3])}")

    def close(self) -> None:
        """Close the connection; later use raises ``WomlJournalError``. Idempotent."""
        with self.lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
