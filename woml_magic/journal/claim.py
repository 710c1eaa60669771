"""Claims: one process runs a run id at a time (spec §5.2).

Starting a run under an id and resuming a run both take the run's *claim* first and
hold it until the execution ends; of two processes (or two threads) that ask at once,
exactly one gets it, and the other is refused with a ``WomlRunError`` naming the run
and its holder. The check that an id is new, and the load a resume decides from, run
under the claim, so nobody can journal between them: there is no check-then-act.

A file journal's claim is an exclusive ``flock`` on a per-run lock file in the
``<journal>-claims/`` directory beside it (0700; files 0600, named by a hash of the
run id). The kernel drops the lock when its holder dies, ``kill -9`` included, so a
dead holder never blocks a resume. ``flock`` belongs to an open file, not to a
process, so two claims in one process conflict too. The holder writes who it is
(pid, host, since when, run or resume) into the file, for the loser's message; it
unlinks the file before it unlocks, and a claimant that locked a file someone else
had already unlinked tries again (the classic lock-file race). An in-memory journal
is private to one ``Journal``: its claims are a set held on it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import WomlJournalError, WomlRunError
from .storage import MEMORY

Action = Literal["run", "resume"]

if sys.platform == "win32":  # no flock: msvcrt's lock of the file's first byte
    import msvcrt

    _HELD = (errno.EACCES, errno.EDEADLOCK)

    def _try_lock(fd: int) -> None:
        """Lock ``fd`` at once, or raise ``OSError`` (``_HELD``) if another holds it."""
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)

else:
    import fcntl

    _HELD = (errno.EAGAIN, errno.EACCES)

    def _try_lock(fd: int) -> None:
        """Lock ``fd`` at once, or raise ``OSError`` (``_HELD``) if another holds it."""
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

#: How long a refused claimant waits for the holder to write who it is (seconds).
_HOLDER_WAIT_S = 0.2
#: The longest holder record read back (it is a few dozen bytes; a window, STYLE 15).
_HOLDER_MAX_BYTES = 1024
#: A holder's ``since`` beyond this unix time (year 5138) is not a record we wrote.
_LATEST_UNIX_TIME = 1e11


@dataclass(frozen=True)
class Holder:
    """Who holds a run's claim: a process on a host, since a unix time, doing what."""

    pid: int
    host: str
    since: float
    action: Action

    @classmethod
    def me(cls, action: Action) -> Holder:
        return cls(pid=os.getpid(), host=socket.gethostname(), since=time.time(), action=action)

    def describe(self) -> str:
        """``pid 123 on host h (a resume, since 2026-12-03 12:30:01 UTC)``."""
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since))
        what = "a resume" if self.action == "resume" else "a run"
        return f"pid {self.pid} on host {self.host[:64]!r} ({what}, since {when})"


def refusal(run_id: str, action: Action, holder: Holder | None) -> WomlRunError:
    """The loser's error: the run, its holder when known, and what to do (spec §5.2)."""
    who = holder.describe() if holder is not None else "another process or thread"
    if action == "run":
        todo = "pick another id, or wait until it ends and resume it"
    else:
        todo = "one process at a time runs a run; wait until it ends, then resume it again"
    return WomlRunError(f"run {run_id!r} is held by {who}; {todo}")


class Claims:
    """The claims of one journal: ``hold(run_id, action)`` is a context manager."""

    def __init__(self, journal_path: str) -> None:
        self._dir: Path | None = None
        if journal_path != MEMORY:
            self._dir = Path(os.path.abspath(f"{journal_path}-claims"))
        self._memory: dict[str, Holder] = {}

    @contextlib.contextmanager
    def hold(self, run_id: str, action: Action) -> Iterator[Holder]:
        """Hold ``run_id``'s claim for the block, or raise ``refusal(...)`` at once."""
        me = Holder.me(action)
        if self._dir is None:
            # dict.setdefault is atomic under the GIL: the first thread's holder stays.
            if self._memory.setdefault(run_id, me) is not me:
                raise refusal(run_id, action, self._memory.get(run_id))
            try:
                yield me
            finally:
                del self._memory[run_id]
            return
        path = self._dir / hashlib.sha256(run_id.encode()).hexdigest()[:32]
        fd = self._lock(path, run_id, action)
        try:
            record = json.dumps(
                {
                    "run_id": run_id,
                    "pid": me.pid,
                    "host": me.host,
                    "since": me.since,
                    "action": action,
                }
            ).encode()
            # Who holds it is for the loser's message only: a full disk must not stop
            # the run over it (the journal reports that itself).
            with contextlib.suppress(OSError):
                os.write(fd, record)
            yield me
        finally:
            # Unlink before unlocking: a claimant that opened this file meanwhile sees
            # it is gone once it gets the lock, and tries again on a new file.
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(fd)

    def _lock(self, path: Path, run_id: str, action: Action) -> int:
        assert self._dir is not None
        try:
            self._dir.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise WomlJournalError(
                f"cannot create the claims directory {str(self._dir)!r} beside the journal: "
                f"{exc.strerror or exc}"
            ) from exc
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                raise WomlJournalError(
                    f"cannot claim run {run_id!r} in {str(self._dir)!r}: {exc.strerror or exc}"
                ) from exc
            try:
                _try_lock(fd)
            except OSError as exc:
                holder = _read_holder(fd) if exc.errno in _HELD else None
                os.close(fd)
                if exc.errno not in _HELD:
                    raise WomlJournalError(
                        f"cannot claim run {run_id!r} in {str(self._dir)!r}: {exc.strerror or exc}"
                    ) from exc
                raise refusal(run_id, action, holder) from None
            if _same_file(fd, path):
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)  # a holder that died left its record
                return fd
            os.close(fd)  # its holder unlinked it as we locked it: take a fresh one


def _same_file(fd: int, path: Path) -> bool:
    try:
        now = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)


def _read_holder(fd: int) -> Holder | None:
    """The holder's record in the lock file ``fd``; None if it never appears."""
    deadline = time.monotonic() + _HOLDER_WAIT_S
    while True:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            data = json.loads(os.read(fd, _HOLDER_MAX_BYTES))
            holder = Holder(
                pid=int(data["pid"]),
                host=str(data["host"]),
                since=float(data["since"]),
                action="resume" if data["action"] == "resume" else "run",
            )
        except (OSError, ValueError, KeyError, TypeError):
            holder = None
        if holder is not None and 0 <= holder.since < _LATEST_UNIX_TIME:  # NaN fails too
            return holder
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)  # the holder locked the file and is writing its record
