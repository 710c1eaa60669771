"""A child process that dies with its owner: how the local Temporal dev server runs
(``server.py``, spec §9).

``spawn(command, env=...)`` starts a ``Child`` that outlives nothing it should not:

- it runs in its own session, so a Ctrl-C to the kernel (SIGINT to its process group)
  does not reach it; the kernel interrupts a run, not the server under it;
- it dies with the process that started it, even one killed with SIGKILL (a kernel
  restart): on Linux through the parent-death signal (``PR_SET_PDEATHSIG``, set between
  fork and exec, from the one long-lived thread that forks every child: ``_Spawner``),
  elsewhere through a tiny watcher process that kills the child's group when its pipe
  from the owner closes without a goodbye.

A ``Child`` keeps the last lines of its stderr (``Tail``) for its owner's errors
(``last_words``), and ``Child.end`` stops it: SIGTERM to its group, SIGKILL after a
grace period, then the watcher is dismissed.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TypeVar

#: Lines of the child's stderr kept for the error of a failed start.
STDERR_LINES = 20

_T = TypeVar("_T")

# <linux/prctl.h>: deliver a signal to this process when its parent thread ends.
_PR_SET_PDEATHSIG = 1


class Tail:
    """The last lines a process writes to a pipe, read by a daemon thread (a pipe
    nobody reads fills up and blocks the writer)."""

    def __init__(self, stream: IO[bytes] | None) -> None:
        assert stream is not None
        self._stream = stream
        self._lines: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._thread = threading.Thread(target=self._read, name="woml-temporal-stderr",
                                        daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # closed under us by close()
            for raw in iter(self._stream.readline, b""):
                self._lines.append(raw.decode("utf-8", "replace").rstrip())

    def lines(self) -> list[str]:
        return list(self._lines)

    def drain(self, timeout: float = 1.0) -> None:
        """Wait for the end of the stream (after the process exited)."""
        self._thread.join(timeout)

    def close(self) -> None:
        self.drain()
        if not self._thread.is_alive():  # else a grandchild holds the pipe: leave it
            self._stream.close()


def last_words(lines: list[str]) -> str:
    """A child's last stderr lines (``Tail.lines``) for an error message, JSON log
    records (the dev server's ``--log-format json``) made readable (``level msg: error``)."""
    if not lines:
        return " (it wrote nothing to stderr)"
    return "; its last output:\n" + "\n".join(f"  {_readable(line)}" for line in lines)


def _readable(line: str) -> str:
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict) or "msg" not in record:
        return line
    text = f"{record.get('level', '')} {record['msg']}".strip()
    return f"{text}: {record['error']}" if "error" in record else text


@dataclass(frozen=True)
class Child:
    """A started child: its process, the tail of its stderr, and its watcher (None
    where the parent-death signal guards it, or on Windows)."""

    proc: subprocess.Popen[bytes]
    tail: Tail
    watcher: subprocess.Popen[bytes] | None

    def end(self, *, grace: float) -> None:
        """SIGTERM the child's process group, SIGKILL it after ``grace`` s, reap it, then
        dismiss the watcher (it would otherwise kill the group once more)."""
        proc, watcher = self.proc, self.watcher
        if proc.poll() is None:
            _signal_group(proc, terminate=True)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc, terminate=False)
                proc.wait()
        self.tail.close()
        if watcher is not None:
            with contextlib.suppress(OSError):  # BrokenPipe: it is gone already
                assert watcher.stdin is not None
                watcher.stdin.write(b"bye")
                watcher.stdin.close()
            watcher.wait()


def spawn(command: list[str], *, env: dict[str, str]) -> Child:
    """Start ``command`` from the spawner thread, in its own session, guarded to die with
    this process. Its stdout is discarded (the dev server's is a banner of addresses
    its owner already knows); its stderr is kept in the child's ``tail``."""
    return _SPAWNER.call(functools.partial(_spawn, command, env))


def _spawn(command: list[str], env: dict[str, str]) -> Child:
    """Exec the child (on the spawner thread, see ``_Spawner``) and its guard."""
    guard = _pdeathsig_guard()
    proc = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,  # out of the kernel's process group: Ctrl-C spares it
        preexec_fn=guard,  # noqa: PLW1509 -- two system calls prepared in the parent, see guard
    )
    tail = Tail(proc.stderr)
    watcher = None if guard is not None or sys.platform == "win32" else _watch(proc.pid)
    return Child(proc, tail, watcher)


def _signal_group(proc: subprocess.Popen[bytes], *, terminate: bool) -> None:
    if sys.platform == "win32":
        proc.terminate() if terminate else proc.kill()
        return
    # The child leads its own group (start_new_session), and is not reaped yet, so the
    # group id cannot belong to anyone else.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM if terminate else signal.SIGKILL)


# -- dying with the owner ------------------------------------------------------------


def _pdeathsig_guard() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has Linux SIGKILL the child when its parent thread ends,
    or None where ``prctl`` is not available (then ``_watch`` guards it).

    It runs between fork and exec, so it only makes two system calls (the ctypes
    function is looked up here, in the parent). SIGKILL rather than SIGTERM: nobody
    waits for a graceful stop of an orphan, and SQLite's transactions survive a kill.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    option, sig = ctypes.c_int(_PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL)

    def guard() -> None:
        prctl(option, sig)
        if os.getppid() != parent:  # the owner died before prctl: nobody will signal us
            os._exit(1)

    return guard


#: The watcher's program: wait for the owner's pipe to close; without a goodbye (the
#: owner died), kill the child's process group.
_WATCHER = """\
import os, signal, sys
if not sys.stdin.buffer.read(1):
    try:
        os.killpg(int(sys.argv[1]), signal.SIGKILL)
    except OSError:
        pass
"""


def _watch(pid: int) -> subprocess.Popen[bytes]:
    """A watcher process for ``pid``'s group (where there is no ``PR_SET_PDEATHSIG``)."""
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _WATCHER, str(pid)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


class _Spawner:
    """The one thread that forks every child.

    Linux sends the parent-death signal when the *thread* that forked the child ends,
    not its process: a server forked from ``asyncio.to_thread``'s pool would be killed
    when that pool shuts down. This daemon thread lives as long as the process.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[], object], concurrent.futures.Future[object]]
        ] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def call(self, fn: Callable[[], _T]) -> _T:
        """``fn()`` on the spawner thread; its result or its exception."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="woml-temporal-spawn",
                                                daemon=True)
                self._thread.start()
        future: concurrent.futures.Future[object] = concurrent.futures.Future()
        self._jobs.put((fn, future))
        return future.result()  # type: ignore[return-value]  # fn's own result

    def _serve(self) -> None:
        while True:
            fn, future = self._jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # handed to the caller, who re-raises it
                    future.set_exception(exc)


_SPAWNER = _Spawner()
if hasattr(os, "register_at_fork"):
    # A forked child has no spawner thread, and the lock may have been held at fork.
    os.register_at_fork(after_in_child=_SPAWNER._reset)
