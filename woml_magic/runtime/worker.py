"""The kernel side of the script worker (spec §4.5).

A ``ScriptWorker`` owns at most one warm child process (``woml_magic.runtime._child``)
and talks to it with newline-delimited JSON over pipes. It runs one attempt at a
time; each attempt gets a fresh QuickJS context inside the child.

It works from any asyncio event loop, one after another (``asyncio.run`` per run,
nested loops in notebooks): the pipes are non-blocking ``Popen`` pipes, watched by
whichever loop is awaiting the child (``add_reader``/``add_writer``) for as long as
it awaits. No thread stands between the loop and the pipes: a thread handing each
message over cost ≈ 60 µs per round trip. Nothing the script does can block the
kernel's loop: writes never block, and timeouts, cancellation and interruption
(enforced by the engine) end an attempt by SIGKILLing the child.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

from woml_magic.errors import ServiceRejection, WomlRunError
from woml_magic.runtime.attempt import AttemptRequest, AttemptResult, LogSink, ServiceCall

SERVICES = ("sleep", "http.request")
"""The ``services.*`` stubs every script sees (spec §4.1, §4.4); adding one is adding a name."""

_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])
# The child imports only the runtime. A stand-in for the ``woml_magic`` package keeps
# the package's ``__init__`` (which loads the parser, for the kernel) from running,
# and ``-S`` skips site-packages' start-up hooks (``.pth`` files), so the folders
# holding quickjs are put on the path instead. Together they take ≈ 50 ms off every
# worker start and every restart after a kill.
_BOOTSTRAP = """\
import sys, types
package = types.ModuleType("woml_magic")
package.__path__ = [sys.argv[1]]
sys.modules["woml_magic"] = package
from woml_magic.runtime._child import main
main()
"""


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


_JOIN_SECONDS = 5.0

_Sink = tuple[asyncio.AbstractEventLoop, "asyncio.Queue[dict[str, Any]]"]


class _Process:
    """One child process; its pipes are served by the event loop attached to it.

    While attached, the loop reads the child's stdout (``add_reader``) and delivers
    each message to the inbox; between attempts nothing reads, and whatever the child
    writes waits in the pipe. Writes are non-blocking: what the pipe cannot take at
    once is queued and written when the attached loop finds the pipe writable, so a
    child busy in a script never blocks the kernel.
    """

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (*_child_path(), env.get("PYTHONPATH", "")) if p
        )
        env["WOML_PARENT_PID"] = str(os.getpid())
        # PR_SET_PDEATHSIG follows the thread that starts the child (see _child.py).
        from_main = threading.current_thread() is threading.main_thread()
        env["WOML_PARENT_SIGNAL"] = "1" if from_main else "0"
        self.popen = subprocess.Popen(
            [sys.executable, "-S", "-c", _BOOTSTRAP, _PACKAGE_DIR],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            # Its own session: a Ctrl-C aimed at the kernel's process group is the
            # kernel's to handle (the engine then kills the worker on purpose).
            start_new_session=True,
        )
        assert self.popen.stdin is not None
        assert self.popen.stdout is not None
        self._in = self.popen.stdin.fileno()
        self._out = self.popen.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        self._sink: _Sink | None = None
        self._received = bytearray()  # the start of a line not yet complete
        self._unsent = bytearray()  # bytes the pipe to the child has not taken yet
        self._exit: dict[str, Any] | None = None  # set once the child's stdout ends
        self._closed = False

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def attach(self, loop: asyncio.AbstractEventLoop, inbox: asyncio.Queue[dict[str, Any]]) -> None:
        """Serve the pipes from ``loop`` (the running loop) and deliver to ``inbox``."""
        self._sink = (loop, inbox)
        if self._exit is not None or self._closed:
            inbox.put_nowait(self._exit or {"type": "exit", "returncode": self.popen.poll()})
            return
        loop.add_reader(self._out, self._on_readable)
        if self._unsent:
            loop.add_writer(self._in, self._on_writable)

    def detach(self) -> None:
        sink, self._sink = self._sink, None
        if sink is not None and not self._closed and not sink[0].is_closed():
            sink[0].remove_reader(self._out)
            sink[0].remove_writer(self._in)

    def send(self, message: dict[str, Any]) -> None:
        """Queue one command; it is written now if the pipe has room."""
        data = json.dumps(message, allow_nan=False).encode("utf-8") + b"\n"
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
            if self._sink is not None:
                self._sink[0].add_writer(self._in, self._on_writable)

    def _on_writable(self) -> None:
        try:
            del self._unsent[: os.write(self._in, self._unsent)]
        except BlockingIOError:
            return
        except OSError:
            self._unsent.clear()
        if not self._unsent and self._sink is not None:
            self._sink[0].remove_writer(self._in)

    def _on_readable(self) -> None:
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
            return
        self._received += data
        *lines, rest = self._received.split(b"\n")
        self._received = bytearray(rest)
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                self._deliver(message)

    def _deliver(self, message: dict[str, Any]) -> None:
        if self._sink is not None:
            self._sink[1].put_nowait(message)

    def _ended(self) -> None:
        """The child closed its stdout: it is exiting (or was killed)."""
        try:
            returncode: int | None = self.popen.wait(_JOIN_SECONDS)
        except subprocess.TimeoutExpired:
            returncode = None
        self._exit = {"type": "exit", "returncode": returncode}
        sink = self._sink
        self.detach()
        self._close_pipes()
        if sink is not None:
            sink[1].put_nowait(self._exit)

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
        sink = self._sink
        if sink is not None and not sink[0].is_closed():
            try:
                current = asyncio.get_running_loop()
            except RuntimeError:
                current = None
            if current is not sink[0] and sink[0].is_running():
                return
            self.detach()
        self._close_pipes()


def _kill_all(holder: list[_Process]) -> None:
    # weakref.finalize / atexit safety net: no worker outlives its owner.
    while holder:
        holder.pop().kill()


def _died(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown"
        return f"the script worker process died (signal {-returncode}, {name})"
    return f"the script worker process died (exit code {returncode})"


def cell_position(
    js_line: int, js_column: int, script: str, script_line: int, script_column: int
) -> tuple[int, int]:
    """Map a position in the wrapped script to the cell (spec §2.3).

    The wrapper puts script line 1 on JS line 2, so script line = JS line − 1 and
    cell line = script line − 1 + ``script_line``. Only script line 1 is shifted
    right, by ``script_column`` − 1. Positions in the wrapper's own lines are
    clamped to the script's first or last line.
    """
    lines = script.split("\n")
    line = js_line - 1
    column = js_column
    if line < 1:
        line, column = 1, 1
    elif line > len(lines):
        line, column = len(lines), len(lines[-1]) + 1
    if line == 1:
        column += script_column - 1
    return line - 1 + script_line, max(1, column)


class ScriptWorker:
    """A warm script worker process, reused across attempts and runs (spec §4.5)."""

    def __init__(self) -> None:
        self._holder: list[_Process] = []
        self._busy = False
        self._ids = itertools.count(1)
        self._prelude: str | None = None
        self._finalizer = weakref.finalize(self, _kill_all, self._holder)

    @property
    def pid(self) -> int | None:
        """The child's process id, or None when no process is running."""
        process = self._process
        return process.popen.pid if process is not None and process.alive else None

    @property
    def prelude(self) -> str | None:
        """How the running child gives each context the prelude: ``"bytecode"`` (read) or
        ``"source"`` (compiled; see ``_bytecode.py``), or None before it started."""
        return self._prelude

    @property
    def _process(self) -> _Process | None:
        return self._holder[0] if self._holder else None

    async def start(self) -> None:
        """Spawn the warm process unless one is running (idempotent)."""
        process = self._process
        if process is not None and process.alive:
            return
        self.kill()
        try:
            process = _Process()
        except OSError as error:
            raise WomlRunError(f"the script worker could not start: {error}") from error
        self._holder.append(process)
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        process.attach(asyncio.get_running_loop(), inbox)
        try:
            message = await inbox.get()
        except BaseException:
            self.kill()
            raise
        finally:
            process.detach()
        if message.get("type") != "ready":
            self.kill()
            raise WomlRunError(
                "the script worker could not start: " + _died(message.get("returncode"))
            )
        self._prelude = str(message.get("prelude"))

    def kill(self) -> None:
        """SIGKILL and reap the process now; the next call starts a fresh one."""
        _kill_all(self._holder)

    async def aclose(self) -> None:
        """Stop the process (idempotent)."""
        self.kill()

    def _enter(self) -> None:
        if self._busy:
            raise RuntimeError("a ScriptWorker runs one attempt or check at a time")
        self._busy = True

    async def check_syntax(
        self, script: str, script_line: int, script_column: int
    ) -> tuple[str, int, int] | None:
        """None if ``script`` compiles as an async function body, else (message, cell line,
        cell column) of the first syntax error (spec §2.3). Runs none of the script."""
        self._enter()
        try:
            await self.start()
            process = self._process
            assert process is not None
            inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
            process.attach(asyncio.get_running_loop(), inbox)
            try:
                process.send({"op": "check", "id": next(self._ids), "script": script})
                message = await inbox.get()
            except BaseException:
                self.kill()
                raise
            finally:
                process.detach()
            if message.get("type") == "exit":
                self.kill()
                raise WomlRunError(_died(message.get("returncode")) + " while compiling a script")
            error = message.get("error")
            if error is None:
                return None
            text, js_line, js_column = error
            line, column = cell_position(js_line, js_column, script, script_line, script_column)
            return str(text), line, column
        finally:
            self._busy = False

    async def run_attempt(
        self, request: AttemptRequest, services: ServiceCall, on_log: LogSink
    ) -> AttemptResult:
        """Run one attempt in a fresh QuickJS context and report its outcome (spec §3.2).

        Cancelling the awaiting task kills the worker (so even ``while (true) {}``
        ends), cancels service calls in flight and re-raises ``CancelledError``.
        """
        self._enter()
        try:
            try:
                await self.start()
            except WomlRunError as error:
                return AttemptResult("crash", error_name="WorkerError", error_message=str(error))
            return await self._attempt(request, services, on_log)
        finally:
            self._busy = False

    async def _attempt(
        self, request: AttemptRequest, services: ServiceCall, on_log: LogSink
    ) -> AttemptResult:
        process = self._process
        assert process is not None
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        attempt_id = next(self._ids)
        calls: set[asyncio.Task[None]] = set()
        process.attach(loop, inbox)
        try:
            process.send(
                {
                    "op": "run",
                    "id": attempt_id,
                    "script": request.script,
                    "context": json.dumps(request.context, allow_nan=False),
                    "attempt": json.dumps(request.attempt, allow_nan=False),
                    "nowMs": request.now_ms(),
                    "memoryLimit": request.memory_limit_bytes,
                    "maxResultBytes": request.max_result_bytes,
                    "services": list(SERVICES),
                }
            )
            while True:
                message = await inbox.get()
                kind = message.get("type")
                if kind == "log":
                    on_log(str(message.get("level", "log")), str(message.get("text", "")))
                elif kind == "call":
                    task = loop.create_task(
                        self._serve(
                            message,
                            process=process,
                            attempt_id=attempt_id,
                            services=services,
                            request=request,
                            inbox=inbox,
                        )
                    )
                    calls.add(task)
                    task.add_done_callback(calls.discard)
                elif kind == "done" and message.get("id") == attempt_id:
                    return self._result(message, request)
                elif kind == "bridge-failed":
                    # The child waits for a reply that will never come: start afresh.
                    self.kill()
                    return AttemptResult(
                        "crash",
                        error_name="ServiceBridgeError",
                        error_message=str(message["message"]),
                    )
                elif kind == "exit":
                    self.kill()
                    return AttemptResult(
                        "crash",
                        error_name="WorkerDied",
                        error_message=_died(message.get("returncode")),
                    )
        except BaseException:
            self.kill()
            raise
        finally:
            process.detach()
            for task in calls:
                task.cancel()
            if calls:
                await asyncio.gather(*calls, return_exceptions=True)

    @staticmethod
    async def _serve(
        message: dict[str, Any],
        *,
        process: _Process,
        attempt_id: int,
        services: ServiceCall,
        request: AttemptRequest,
        inbox: asyncio.Queue[dict[str, Any]],
    ) -> None:
        """Perform one ``services.*`` call in the kernel and send its outcome back (spec §4.5)."""
        name = str(message.get("service"))
        args = message.get("args")
        reply: dict[str, Any]
        try:
            value = await services(name, args if isinstance(args, list) else [])
            reply = {"ok": True, "value": value}
        except ServiceRejection as rejection:
            reply = {
                "ok": False,
                "name": rejection.name,
                "message": rejection.message,
                "props": rejection.props,
            }
        except Exception as error:  # becomes the attempt's crash (spec §3.2)
            inbox.put_nowait(
                {
                    "type": "bridge-failed",
                    "message": f"services.{name} failed inside the kernel: "
                    f"{type(error).__name__}: {error}",
                }
            )
            return
        reply.update(op="reply", attempt=attempt_id, id=message.get("id"), nowMs=request.now_ms())
        try:
            process.send(reply)
        except (TypeError, ValueError) as error:
            inbox.put_nowait(
                {
                    "type": "bridge-failed",
                    "message": f"services.{name} answered with a value that is not JSON: {error}",
                }
            )

    @staticmethod
    def _result(message: dict[str, Any], request: AttemptRequest) -> AttemptResult:
        outcome = str(message["outcome"])
        if outcome == "succeeded":
            return AttemptResult("succeeded", result=message.get("result"))
        js_line = message.get("line")
        line = None
        if isinstance(js_line, int):
            line, _ = cell_position(
                js_line, 1, request.script, request.script_line, request.script_column
            )
        return AttemptResult(
            outcome,
            error_name=message.get("name"),
            error_message=message.get("message"),
            error_line=line,
        )
