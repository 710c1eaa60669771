"""What the Temporal engine's process-level tests need (spec §9), without mocks:

- ``WorkerProcess``: one ``woml worker`` process, started, awaited until it polls,
  stopped with SIGTERM (or killed with SIGKILL), its output kept in files;
- ``inet_sockets``, ``SocketSampler``, ``not_loopback``: the TCP/UDP sockets a process
  holds, read from /proc (the Temporal SDK and server open theirs from Rust and Go, where
  no Python audit hook sees them);
- ``AuditLog`` and ``AUDIT_SITE``: Python's ``socket.*`` audit events, in this process
  and in a worker (through a ``sitecustomize`` on its ``PYTHONPATH``);
- ``HoldServer``: a loopback HTTP server that can hold a request open;
- ``history_identities``: which worker started which activity and workflow task.

Linux only (/proc), like the dev server's own guards.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from procs import alive, descendants

ROOT = Path(__file__).resolve().parents[1]

#: How long a ``woml worker`` may take to print its ready line.
READY_TIMEOUT = 60.0
#: How long a SIGTERMed worker may take to exit before it is killed.
STOP_TIMEOUT = 15.0
#: How long a worker's script workers may outlive it (they die with their parent).
ORPHAN_GRACE = 3.0


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until it holds (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


# -- processes -------------------------------------------------------------------------


class WorkerProcess:
    """One ``python -m woml_magic worker --temporal ADDRESS --task-queue QUEUE``.

    Its stdout and stderr go to files in ``folder`` (a pipe nobody reads would block
    it); ``wait_ready`` waits for the ready line ``woml worker`` prints once it polls.
    """

    def __init__(self, address: str, task_queue: str, folder: Path, name: str,
                 env: dict[str, str] | None = None) -> None:
        self.address, self.task_queue, self.name = address, task_queue, name
        self.stdout_path = folder / f"{name}.out"
        self.stderr_path = folder / f"{name}.err"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "woml_magic", "worker", "--temporal", address,
                 "--task-queue", task_queue],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=ROOT,
                env=env if env is not None else dict(os.environ),
            )
        self.children_seen: set[int] = set()
        #: Descendants still alive after the worker ended (then killed by ``finish``).
        self.orphans: set[int] = set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def ready_line(self) -> str:
        return (f"woml worker: polling task queue {self.task_queue} on {self.address} "
                "(namespace default)\n")

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Return once the worker polls its task queue; else fail with its stderr."""
        if not wait_for(lambda: self.stdout().startswith(self.ready_line)
                        or self.proc.poll() is not None, timeout):
            raise AssertionError(f"{self.name} printed no ready line in {timeout:g} s: "
                                 f"{self.stderr()[-2000:]}")
        if not self.stdout().startswith(self.ready_line):
            raise AssertionError(f"{self.name} exited with {self.proc.returncode} before "
                                 f"polling: {self.stdout()!r} {self.stderr()[-2000:]}")

    def note_children(self) -> set[int]:
        """Remember (and return) the worker's live descendants: its script workers."""
        kids = descendants(self.pid) if self.proc.poll() is None else set()
        self.children_seen |= kids
        return kids

    def kill(self) -> None:
        """``kill -9`` the worker (a crash: nothing of it runs after this)."""
        self.note_children()
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.note_children()
            self.proc.send_signal(signal.SIGTERM)

    def finish(self, timeout: float = STOP_TIMEOUT) -> int:
        """Wait for the worker to exit (SIGKILL after ``timeout``); its exit status.
        Also kills any script worker it left behind, which a test then reports."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        wait_for(lambda: not any(alive(pid) for pid in self.children_seen), ORPHAN_GRACE)
        self.orphans = {pid for pid in self.children_seen if alive(pid)}
        for pid in self.orphans:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return self.proc.returncode


def stop_workers(workers: Iterable[WorkerProcess]) -> dict[str, int]:
    """SIGTERM every worker at once, then wait for each: ``{name: exit status}``."""
    workers = list(workers)
    for worker in workers:
        worker.terminate()
    return {worker.name: worker.finish() for worker in workers}


def pid_of(identity: str) -> int:
    """The process id in a Temporal worker identity (the SDK's default, ``PID@host``)."""
    return int(identity.split("@", 1)[0])


# -- sockets ---------------------------------------------------------------------------

_TCP_LISTEN = "0A"
_TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
               "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
               "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


@dataclass(frozen=True)
class Socket:
    """One inet socket of a process, as /proc/net shows it."""

    table: str  # tcp, tcp6, udp, udp6
    local: tuple[str, int]
    remote: tuple[str, int]
    state: str

    @property
    def listening(self) -> bool:
        return self.table.startswith("tcp") and self.state == "LISTEN"

    def __str__(self) -> str:
        return (f"{self.table} {self.local[0]}:{self.local[1]} -> "
                f"{self.remote[0]}:{self.remote[1]} {self.state}")


def _address(text: str) -> tuple[str, int]:
    hex_ip, hex_port = text.split(":")
    raw = bytes.fromhex(hex_ip)
    if sys.byteorder == "little":  # the kernel prints each 32-bit word in host order
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(raw)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(hex_port, 16)


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    return inodes


def inet_sockets(pid: int) -> set[Socket]:
    """Every TCP and UDP socket (IPv4 and IPv6) that ``pid`` holds open; empty if
    ``pid`` has gone."""
    try:
        inodes = _socket_inodes(pid)
    except OSError:
        return set()
    found: set[Socket] = set()
    for table in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                lines = f.readlines()[1:]
        except OSError:
            return found
        for line in lines:
            fields = line.split()
            if fields[9] not in inodes:
                continue
            state = _TCP_STATES.get(fields[3], fields[3]) if table.startswith("tcp") \
                else fields[3]
            found.add(Socket(table, _address(fields[1]), _address(fields[2]), state))
    return found


_LOOPBACK = {"127.0.0.1", "::1"}
_NOWHERE = ("0.0.0.0", 0)  # a socket not (yet) bound or connected


def not_loopback(sock: Socket) -> str | None:
    """Why ``sock`` breaks the loopback rule, or None: a listener binds 127.0.0.1 (or
    ::1), never a wildcard; any other socket's local and remote ends are loopback
    (or not yet bound/connected)."""
    if sock.listening:
        ip = sock.local[0]
        return None if ip in _LOOPBACK else f"listens on {ip}"
    for end, (ip, port) in (("local", sock.local), ("remote", sock.remote)):
        if ip in _LOOPBACK or (ip, port) == _NOWHERE or (ip == "::" and port == 0):
            continue
        return f"its {end} end is {ip}:{port}"
    return None


class SocketSampler:
    """Samples the inet sockets of some processes (and their descendants) every
    ``interval`` seconds on a thread, from ``with`` to its end: ``seen`` maps each
    process to every socket it was seen holding."""

    def __init__(self, pids: Callable[[], Iterable[int]], interval: float = 0.02) -> None:
        self._pids, self._interval = pids, interval
        self.seen: dict[int, set[Socket]] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="socket-sampler", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)
        self.sample()

    def sample(self) -> None:
        targets: set[int] = set()
        for pid in self._pids():
            targets |= {pid, *descendants(pid)}
        for pid in targets:
            self.seen.setdefault(pid, set()).update(inet_sockets(pid))
        self.samples += 1

    def __enter__(self) -> SocketSampler:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def violations(self) -> list[str]:
        return sorted(f"pid {pid}: {sock} ({why})" for pid, socks in self.seen.items()
                      for sock in socks if (why := not_loopback(sock)) is not None)


# -- audit hooks -----------------------------------------------------------------------

#: The audit events that reveal where a process sends or resolves anything.
AUDITED = ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
           "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex",
           "socket.gethostbyaddr")


def _audit_target(event: str, args: tuple[Any, ...]) -> object:
    """The address (or host name) an audited socket event is about."""
    if event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
        return args[1] if len(args) > 1 else None
    return args[0] if args else None


class AuditLog:
    """Python's ``socket.*`` audit events in this process while ``active``.

    ``sys.addaudithook`` cannot be undone: the hook is installed once per process and
    records only inside ``with audit:`` (a cheap test when inactive)."""

    _installed: AuditLog | None = None

    def __init__(self) -> None:
        self.records: list[tuple[str, object]] = []
        self.active = False

    @classmethod
    def instance(cls) -> AuditLog:
        if cls._installed is None:
            log = cls()

            def hook(event: str, args: tuple[Any, ...]) -> None:
                if log.active and event in AUDITED:
                    log.records.append((event, _audit_target(event, args)))

            sys.addaudithook(hook)
            cls._installed = log
        return cls._installed

    def __enter__(self) -> AuditLog:
        self.records.clear()
        self.active = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.active = False


def audit_not_loopback(event: str, target: object) -> str | None:
    """Why an audited event left the loopback, or None. A ``str``/``bytes`` address of
    connect/bind is a Unix socket's path (local by nature)."""
    if event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex",
                 "socket.gethostbyaddr"):
        host = target.decode() if isinstance(target, bytes) else target
        return None if host in ("127.0.0.1", "localhost", "::1") else f"resolves {host!r}"
    if isinstance(target, (str, bytes)):
        return None
    if isinstance(target, tuple) and target and target[0] in ("127.0.0.1", "localhost", "::1"):
        return None
    return f"{event} to {target!r}"


#: A ``sitecustomize`` for a worker's ``PYTHONPATH``: appends ``pid event target`` for
#: every audited socket event to the file named by ``WOML_TEST_AUDIT``.
AUDIT_SITE = f'''\
import os, sys
_PATH = os.environ.get("WOML_TEST_AUDIT")
if _PATH:
    _OUT = open(_PATH, "a", buffering=1, encoding="utf-8")
    _EVENTS = {AUDITED!r}
    _ADDRESSED = ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg")

    def _hook(event, args):
        if event in _EVENTS:
            target = (args[1] if len(args) > 1 else None) if event in _ADDRESSED \\
                else (args[0] if args else None)
            _OUT.write(f"{{os.getpid()}}\\t{{event}}\\t{{target!r}}\\n")

    sys.addaudithook(_hook)
'''


def read_audit_file(path: Path) -> list[tuple[int, str, object]]:
    """The records ``AUDIT_SITE`` wrote: ``(pid, event, target)``."""
    import ast

    records: list[tuple[int, str, object]] = []
    if not path.exists():
        return records
    for line in path.read_text(encoding="utf-8").splitlines():
        pid, event, target = line.split("\t", 2)
        try:
            value: object = ast.literal_eval(target)
        except (ValueError, SyntaxError):
            value = target  # an object without a literal repr: reported as text
        records.append((int(pid), event, value))
    return records


# -- a loopback HTTP server ------------------------------------------------------------


@dataclass
class HoldServer:
    """An HTTP server on 127.0.0.1 in a thread. ``POST /hold`` is held open until
    ``release`` is set (a call in flight); ``GET /slow`` answers after ``delay``
    seconds; anything else answers at once. Every request is recorded in ``requests``
    as it arrives (``arrived`` is set on the first)."""

    delay: float = 0.3
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                owner.requests.append((self.command, self.path, dict(self.headers)))
                owner.arrived.set()
                if self.path.startswith("/hold"):
                    owner.release.wait(60)
                elif self.path.startswith("/slow"):
                    time.sleep(owner.delay)
                body = b'{"ok": true}'
                # The client may be dead (a killed worker): its socket is gone.
                with contextlib.suppress(OSError):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the test reads ``requests``

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="hold-server")
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> HoldServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


# -- histories -------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryEvent:
    """The parts of a workflow history event these tests read."""

    event_id: int
    kind: str  # activity-started, activity-timed-out, workflow-task-started, …
    identity: str = ""
    detail: str = ""


async def history_events(client: Any, run_id: str) -> list[HistoryEvent]:
    """The history of workflow ``run_id`` as ``HistoryEvent``s (the kinds tests need)."""
    from temporalio.api.enums.v1 import TimeoutType

    history = await client.get_workflow_handle(run_id).fetch_history()
    out: list[HistoryEvent] = []
    for event in history.events:
        if event.HasField("activity_task_started_event_attributes"):
            attrs = event.activity_task_started_event_attributes
            out.append(HistoryEvent(event.event_id, "activity-started", attrs.identity))
        elif event.HasField("activity_task_completed_event_attributes"):
            attrs_c = event.activity_task_completed_event_attributes
            out.append(HistoryEvent(event.event_id, "activity-completed", attrs_c.identity))
        elif event.HasField("activity_task_timed_out_event_attributes"):
            failure = event.activity_task_timed_out_event_attributes.failure
            kind = TimeoutType.Name(failure.timeout_failure_info.timeout_type)
            out.append(HistoryEvent(event.event_id, "activity-timed-out", detail=kind))
        elif event.HasField("workflow_task_started_event_attributes"):
            attrs_w = event.workflow_task_started_event_attributes
            out.append(HistoryEvent(event.event_id, "workflow-task-started", attrs_w.identity))
        elif event.HasField("workflow_task_completed_event_attributes"):
            attrs_d = event.workflow_task_completed_event_attributes
            out.append(HistoryEvent(event.event_id, "workflow-task-completed", attrs_d.identity))
        elif event.HasField("workflow_task_timed_out_event_attributes"):
            out.append(HistoryEvent(event.event_id, "workflow-task-timed-out"))
    return out
