"""The kernel's end of the pipes to a script worker process (spec §4.5).

A ``ChildProcess`` starts one worker process (``_child.py``) and serves its pipes
from whichever asyncio event loop is awaiting it (``add_reader``/``add_writer``), for
as long as it awaits: ``asyncio.run`` per run and nested loops in notebooks work one
after another. No thread stands between the loop and the pipes: a thread handing each
message over cost ≈ 60 µs per round trip. Writes never block: what the pipe cannot
take at once waits until the loop finds it writable, so a child busy in a script never
blocks the kernel. Every line the child writes is parsed and checked here
(``protocol.parse_message``); anything else stops the listening (a ``violation``).

The child's end of the pipes is ``_channel.py``: the child must not import asyncio.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import importlib.util
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from woml_magic.services.registry import SERVICE_NAMES

from .binding import installed_version
from .protocol import DEFAULT_MAX_LINE, encode_line, parse_message

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
# The child imports only the runtime's child-side modules. Stand-ins for the
# ``woml_magic`` and ``woml_magic.runtime`` packages keep their ``__init__`` files (the
# parser, the kernel side) from running, and ``-S`` skips site-packages' start-up hooks
# (``.pth`` files), so the folders holding quickjs are put on the path instead. Together
# they take ≈ 50 ms off every worker start and every restart after a kill.
_BOOTSTRAP = """\
import sys, types
for name, folder in (("woml_magic", sys.argv[1]), ("woml_magic.runtime", sys.argv[2])):
    package = types.ModuleType(name)
    package.__path__ = [folder]
    sys.modules[name] = package
from woml_magic.runtime._child import main
main(sys.argv[3])
"""

_JOIN_SECONDS = 5.0

#: The events a ``ChildProcess`` delivers besides the child's messages.
EXITED = "exit"  # {"type": "exit", "returncode"}: the child's output ended
VIOLATION = "violation"  # {"type": "violation", "problem"}: the child broke the protocol



class Received(NamedTuple):
    """One thing for an inbox: a checked message from the child and ``size``, the bytes
    of its line (what a call's arguments weigh against the bridge's in-flight budget),
    or an event of the transport's or the bridge's own (``size`` 0)."""

    message: dict[str, Any]
    size: int = 0


class Receiver(Protocol):
    """Where a ``ChildProcess`` delivers what it reads: an ``Inbox``, or the ``Line`` of
    attempts sent ahead to it (``pipeline.py``), which hands each on to its own."""

    def put_nowait(self, item: Received) -> None: ...


class Inbox:
    """Where a ``ChildProcess`` delivers: the attempt's (or check's) messages and events
    in order, awaited by the one task that runs it. An ``asyncio.Queue`` without what a
    single reader never needs (its size, ``join``, a list of getters): it made up ≈ 5 %
    of the kernel's CPU per lab attempt."""

    def __init__(self) -> None:
        self._items: collections.deque[Received] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Received) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Received:
        """The next item, once there is one."""
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()


@functools.cache
def _child_path() -> tuple[str, ...]:
    """Folders the child needs on its path: where quickjs and its C module are installed.

    Looked up once per process: every worker start and restart needs them.
    """
    folders: list[str] = []
    for name in ("quickjs", "_quickjs"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin is not None:
            origin = Path(spec.origin)
            folder = origin.parent.parent if origin.name == "__init__.py" else origin.parent
            if str(folder) not in folders:
                folders.append(str(folder))
    return tuple(folders)


def as_batch_work(pid: int) -> bool:
    """Have Linux schedule process ``pid`` as batch work (``SCHED_BATCH``, no privilege
    needed): it never preempts a running task when it wakes. For a lab's workers, which
    are fed by the kernel: a command written to a sleeping worker no longer hands the
    kernel's core to the worker in the middle of the kernel's turn (one write in 30
    waited over 0.1 ms for its core), and the lab took ≈ 4 % less time (bench/lab.py,
    docs/performance.md). Whether it took; elsewhere, or if refused, nothing changes."""
    setscheduler = getattr(os, "sched_setscheduler", None)
    policy = getattr(os, "SCHED_BATCH", None)
    if setscheduler is None or policy is None:
        return False
    try:
        setscheduler(pid, policy, os.sched_param(0))
    except OSError:
        return False
    return True


def died(returncode: int | None) -> str:
    """How a worker process ended, in words."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown"
        return f"the script worker process died (signal {-returncode}, {name})"
    return f"the script worker process died (exit code {returncode})"


class ChildProcess:
    """One worker process; its pipes are served by the event loop attached to it.

    While attached, the loop reads the child's stdout (``add_reader``) and delivers
    each checked message to the inbox, then an ``EXITED`` event when the child's output
    ends or a ``VIOLATION`` when it breaks the protocol; between attempts nothing
    reads, and whatever the child writes waits in the pipe — unless the owner keeps the
    loop listening (``detach(keep=True)``): then a line between attempts is a fault,
    and ``pending_output`` says so.
    """

    def __init__(self, argv: Sequence[str] | None = None, *, batch: bool = False) -> None:
        """Start the worker child, or ``argv`` instead (another program speaking the
        protocol, for tests). ``batch``: scheduled as batch work (``as_batch_work``)."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (*_child_path(), env.get("PYTHONPATH", "")) if p
        )
        env["WOML_PARENT_PID"] = str(os.getpid())
        # PR_SET_PDEATHSIG follows the thread that starts the child (_channel.die_with_parent).
        from_main = threading.current_thread() is threading.main_thread()
        env["WOML_PARENT_SIGNAL"] = "1" if from_main else "0"
        self.popen = subprocess.Popen(
            list(argv) if argv is not None else
            [sys.executable, "-S", "-c", _BOOTSTRAP, str(_PACKAGE_DIR),
             str(_PACKAGE_DIR / "runtime"), installed_version() or ""],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            # Its own session: a Ctrl-C aimed at the kernel's process group is the
            # kernel's to handle (the engine then kills the worker on purpose).
            start_new_session=True,
        )
        if batch:
            as_batch_work(self.popen.pid)
        assert self.popen.stdin is not None
        assert self.popen.stdout is not None
        self._in = self.popen.stdin.fileno()
        self._out = self.popen.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop serving the pipes
        self._inbox: Receiver | None = None  # where messages go while attached
        self._received = bytearray()  # the start of a line not yet complete
        self._unsent = bytearray()  # bytes the pipe to the child has not taken yet
        self._exit: dict[str, Any] | None = None  # set once the child's stdout ends
        self._closed = False
        self._faulted = False
        #: The longest line the child may send (see ``protocol.line_limit``).
        self.max_line = DEFAULT_MAX_LINE

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def attach(self, loop: asyncio.AbstractEventLoop, inbox: Receiver) -> None:
        """Serve the pipes from ``loop`` (the running loop) and deliver to ``inbox``."""
        self._inbox = inbox
        if self._exit is not None or self._closed:
            inbox.put_nowait(Received(self._exit or {"type": EXITED,
                                                     "returncode": self.popen.poll()}))
            return
        if self._loop is not loop:  # else still listening since the last ``detach(keep=True)``
            self._unregister()
            self._loop = loop
            loop.add_reader(self._out, self._on_readable)
        if self._unsent:
            loop.add_writer(self._in, self._on_writable)

    def detach(self, *, keep: bool = False) -> None:
        """Stop delivering to the inbox. ``keep``: the loop goes on reading the child's
        stdout (its owner drives this process from that loop only, ``ScriptWorker``'s
        ``keep_listening``); anything read until the next ``attach`` is a fault."""
        self._inbox = None
        if not keep:
            self._unregister()

    def _unregister(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and not self._closed and not loop.is_closed():
            loop.remove_reader(self._out)
            loop.remove_writer(self._in)

    def send(self, message: Mapping[str, Any]) -> None:
        """Queue one command; it is written now if the pipe has room. Raises
        ``TypeError``/``ValueError`` for a value that is not JSON."""
        self.send_line(encode_line(message))

    def send_line(self, data: bytes) -> None:
        """Queue one command already encoded as one line (``protocol.encode_line``)."""
        if self._closed:
            return
        if not self._unsent:
            try:
                data = data[os.write(self._in, data):]
            except BlockingIOError:
                pass
            except OSError:  # the child is gone; reading its stdout reports the exit
                return
        if data:
            self._unsent += data
            if self._loop is not None:
                self._loop.add_writer(self._in, self._on_writable)

    def _on_writable(self) -> None:
        try:
            del self._unsent[: os.write(self._in, self._unsent)]
        except BlockingIOError:
            return
        except OSError:
            self._unsent.clear()
        if not self._unsent and self._loop is not None:
            self._loop.remove_writer(self._in)

    def _on_readable(self) -> None:
        if self._faulted:
            return
        try:
            data = os.read(self._out, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._ended()
            return
        if b"\n" not in data:
            self._received += data
            if len(self._received) > self.max_line:
                self._fault(f"a message longer than {self.max_line} bytes")
            return
        self._received += data
        *lines, rest = self._received.split(b"\n")
        self._received = bytearray(rest)
        for line in lines:
            if len(line) > self.max_line:
                self._fault(f"a message longer than {self.max_line} bytes")
                return
            message, problem = parse_message(line, SERVICE_NAMES)
            if problem is not None:
                self._fault(problem)
                return
            assert message is not None
            self._deliver(Received(message, len(line)))
        if len(self._received) > self.max_line:
            self._fault(f"a message longer than {self.max_line} bytes")

    def _fault(self, problem: str) -> None:
        """The child said something that is not the protocol: stop listening to it.

        The attempt (or check) waiting on it ends, and the worker is replaced (spec §4.5).
        """
        self._faulted = True
        self._received.clear()
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._out)
        if self._inbox is not None:
            self._inbox.put_nowait(Received({"type": VIOLATION, "problem": problem}))

    def pending_output(self) -> bool:
        """Whether the child wrote anything since the last attempt ended (it must not)."""
        if self._received or self._faulted:
            return True
        try:
            readable, _, _ = select.select([self._out], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def _deliver(self, received: Received) -> None:
        if self._inbox is not None:
            self._inbox.put_nowait(received)
        else:  # a loop kept listening between attempts heard a line nobody asked for
            self._fault("output between attempts")

    def _ended(self) -> None:
        """The child closed its stdout: it is exiting (or was killed)."""
        try:
            returncode: int | None = self.popen.wait(_JOIN_SECONDS)
        except subprocess.TimeoutExpired:
            returncode = None
        self._exit = {"type": EXITED, "returncode": returncode}
        inbox = self._inbox
        self.detach()
        self._close_pipes()
        if inbox is not None:
            inbox.put_nowait(Received(self._exit))

    def _close_pipes(self) -> None:
        self._closed = True
        for pipe in (self.popen.stdin, self.popen.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def kill(self) -> None:
        """SIGKILL, reap and close the pipes (idempotent).

        Pipes still watched by a loop of another thread are closed by that loop, when it
        reads the end of the child's output; a loop may only be changed from its thread.
        """
        with contextlib.suppress(ProcessLookupError):
            self.popen.kill()
        self.popen.wait()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                current = asyncio.get_running_loop()
            except RuntimeError:
                current = None
            if current is not loop and loop.is_running():
                return
            self.detach()
        self._close_pipes()


def kill_all(holder: list[ChildProcess]) -> None:
    """Kill every process in ``holder`` and empty it: the ``weakref.finalize`` /
    atexit safety net of a worker, so no process outlives its owner."""
    while holder:
        holder.pop().kill()
