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

Nothing the child says is taken on trust (spec §4.5): every line must be one JSON
object of a known shape (``_check_shape``) no longer than the attempt's limits allow,
carrying the id of the attempt or check that is waiting; a result is parsed again
here and its size and depth checked. Anything else ends the attempt ``crash`` with
the reason, and the process is replaced, as it is when it wrote anything between
attempts (``_fresh``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import itertools
import json
import os
import select
import signal
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

from woml_magic.errors import ServiceRejection, WomlRunError
from woml_magic.limits import JSONLimitError, json_depth, loads_limited
from woml_magic.runtime.attempt import (
    OUTCOMES,
    AttemptRequest,
    AttemptResult,
    LogSink,
    ServiceCall,
    StallSink,
    StepResults,
    encode,
)

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


_DEFAULT_MAX_LINE = 1 << 20
_LEVELS = frozenset(("log", "info", "warn", "error"))
# The exact fields of each message the child sends (see _child.py).
_LOG_KEYS = frozenset(("type", "id", "level", "text"))
_CALL_KEYS = frozenset(("type", "id", "call", "service", "args"))
_NEED_KEYS = frozenset(("type", "id", "step"))
_STALLED_KEYS = frozenset(("type", "id"))
_SUCCEEDED_KEYS = frozenset(("type", "id", "outcome", "result"))
_DONE_KEYS = frozenset(("type", "id", "outcome", "name", "message", "line"))
_CHECKED_KEYS = frozenset(("type", "id", "error"))
_READY_KEYS = frozenset(("type", "prelude"))
_MAX_NAME_CHARS = 8192


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder for every line: ``json.loads`` with a hook would build one per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_id(value: Any) -> bool:
    return _is_int(value) and value > 0


def _check_shape(message: dict[str, Any]) -> str | None:
    """None if ``message`` is one the child may send (see _child.py), else what is wrong."""
    kind = message.get("type")
    keys = message.keys()
    if kind == "log":
        if keys == _LOG_KEYS and _is_id(message["id"]) \
                and message["level"] in _LEVELS and isinstance(message["text"], str):
            return None
    elif kind == "call":
        if keys == _CALL_KEYS and _is_id(message["id"]) \
                and _is_id(message["call"]) and message["service"] in SERVICES \
                and isinstance(message["args"], list):
            return None
    elif kind == "need":
        if keys == _NEED_KEYS and _is_id(message["id"]) \
                and isinstance(message["step"], str) and len(message["step"]) <= _MAX_NAME_CHARS:
            return None
    elif kind == "stalled":
        if keys == _STALLED_KEYS and _is_id(message["id"]):
            return None
    elif kind == "done":
        outcome = message.get("outcome")
        if outcome == "succeeded":
            if keys == _SUCCEEDED_KEYS and _is_id(message["id"]) \
                    and isinstance(message["result"], str):
                return None
        elif outcome in OUTCOMES:
            line = message.get("line")
            if keys == _DONE_KEYS \
                    and _is_id(message["id"]) and isinstance(message["name"], str) \
                    and isinstance(message["message"], str) \
                    and len(message["name"]) <= _MAX_NAME_CHARS \
                    and len(message["message"]) <= _MAX_NAME_CHARS \
                    and (line is None or _is_int(line)):
                return None
        else:
            return f"a done message with the unknown outcome {str(outcome)[:80]!r}"
    elif kind == "checked":
        error = message.get("error")
        if keys == _CHECKED_KEYS and _is_id(message["id"]) and (
            error is None or (
                isinstance(error, list) and len(error) == 3 and isinstance(error[0], str)
                and _is_int(error[1]) and _is_int(error[2])
            )
        ):
            return None
    elif kind == "ready":
        if keys == _READY_KEYS and message["prelude"] in ("bytecode", "source"):
            return None
    else:
        return f"a message of the unknown type {str(kind)[:80]!r}"
    return f"a malformed {kind!r} message"


def _parse_message(line: bytes | bytearray) -> tuple[dict[str, Any] | None, str | None]:
    """One line from the child as a checked message, or what is wrong with it."""
    try:
        message = _DECODER.decode(line.decode("utf-8"))
    except RecursionError:
        return None, "a message nested too deeply"
    except ValueError:
        return None, "a line that is not JSON"
    if not isinstance(message, dict):
        return None, "a line that is not a JSON object"
    problem = _check_shape(message)
    return (message, None) if problem is None else (None, problem)


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
        self._faulted = False
        #: The longest line the child may send (see ``ScriptWorker._line_limit``).
        self.max_line = _DEFAULT_MAX_LINE

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
        data = json.dumps(message, allow_nan=False, separators=(",", ":")).encode("utf-8") + b"\n"
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
            message, problem = _parse_message(line)
            if problem is not None:
                self._fault(problem)
                return
            assert message is not None
            message["_bytes"] = len(line)
            self._deliver(message)
        if len(self._received) > self.max_line:
            self._fault(f"a message longer than {self.max_line} bytes")

    def _fault(self, problem: str) -> None:
        """The child said something that is not the protocol: stop listening to it.

        The attempt (or check) waiting on it ends, and the worker is replaced (spec §4.5).
        """
        self._faulted = True
        self._received.clear()
        sink = self._sink
        if sink is not None:
            if not sink[0].is_closed():
                sink[0].remove_reader(self._out)
            sink[1].put_nowait({"type": "violation", "problem": problem})

    def pending_output(self) -> bool:
        """Whether the child wrote anything since the last attempt ended (it must not)."""
        if self._received or self._faulted:
            return True
        try:
            readable, _, _ = select.select([self._out], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

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

    async def _fresh(self) -> _Process:
        """The warm process, replaced first if it holds output nobody asked for.

        Between attempts the child writes nothing; anything waiting in its pipe (or a
        line half read) belongs to no one, so the process is replaced rather than
        drained: the next attempt never reads what an earlier one left (spec §4.5).
        """
        await self.start()
        process = self._process
        assert process is not None
        if process.pending_output():
            self.kill()
            await self.start()
            process = self._process
            assert process is not None
        return process

    async def check_syntax(
        self, script: str, script_line: int, script_column: int
    ) -> tuple[str, int, int] | None:
        """None if ``script`` compiles as an async function body, else (message, cell line,
        cell column) of the first syntax error (spec §2.3). Runs none of the script."""
        self._enter()
        try:
            process = await self._fresh()
            process.max_line = _DEFAULT_MAX_LINE
            inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
            check_id = next(self._ids)
            process.attach(asyncio.get_running_loop(), inbox)
            try:
                process.send({"op": "check", "id": check_id, "script": script})
                message = await inbox.get()
            except BaseException:
                self.kill()
                raise
            finally:
                process.detach()
            if message.get("type") == "exit":
                self.kill()
                raise WomlRunError(_died(message.get("returncode")) + " while compiling a script")
            if message.get("type") != "checked" or message.get("id") != check_id:
                self.kill()
                raise WomlRunError(
                    "the script worker answered a syntax check with "
                    + _unexpected(message) + "; the worker was replaced"
                )
            error = message.get("error")
            if error is None:
                return None
            text, js_line, js_column = error
            line, column = cell_position(js_line, js_column, script, script_line, script_column)
            return str(text), line, column
        finally:
            self._busy = False

    async def run_attempt(
        self, request: AttemptRequest, services: ServiceCall, on_log: LogSink,
        on_stall: StallSink | None = None,
    ) -> AttemptResult:
        """Run one attempt in a fresh QuickJS context and report its outcome (spec §3.2).

        Cancelling the awaiting task kills the worker (so even ``while (true) {}``
        ends), cancels service calls in flight and re-raises ``CancelledError``.
        ``on_stall`` is called if the script awaits something nothing can settle: the
        attempt then only ends at its timeout (or cancellation).
        """
        self._enter()
        try:
            try:
                process = await self._fresh()
            except WomlRunError as error:
                return AttemptResult("crash", error_name="WorkerError", error_message=str(error))
            return await self._attempt(process, request, services, on_log, on_stall)
        finally:
            self._busy = False

    @staticmethod
    def _line_limit(request: AttemptRequest) -> int:
        """The longest line the child may send in this attempt.

        Messages are ASCII JSON, so one byte of script text may take up to six (a
        control character as ``\\u0001``); what a message carries is bounded by the
        attempt's limits.
        """
        largest = max(request.max_result_bytes, request.max_call_args_bytes,
                      request.max_log_bytes, 64 * 1024)
        return 6 * largest + 64 * 1024

    @staticmethod
    def _command(request: AttemptRequest, attempt_id: int) -> dict[str, Any]:
        context = request.context
        payload = request.payload_text
        if payload is None:
            payload = encode(context.get("payload"))
        rest = {key: value for key, value in context.items() if key not in ("payload", "steps")}
        return {
            "op": "run",
            "id": attempt_id,
            "script": request.script,
            "payload": payload,
            "context": rest,
            "stepCount": len(context.get("steps") or ()),
            "attempt": request.attempt,
            "nowMs": request.now_ms(),
            "memoryLimit": request.memory_limit_bytes,
            "maxResultBytes": request.max_result_bytes,
            "maxLogLines": request.max_log_lines,
            "maxLogBytes": request.max_log_bytes,
            "maxArgsBytes": request.max_call_args_bytes,
            "maxDepth": request.max_json_depth,
            "services": list(SERVICES),
        }

    async def _attempt(
        self, process: _Process, request: AttemptRequest, services: ServiceCall,
        on_log: LogSink, on_stall: StallSink | None,
    ) -> AttemptResult:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        attempt_id = next(self._ids)
        calls: set[asyncio.Task[None]] = set()
        seen_calls: set[int] = set()
        in_flight = [0]  # bytes of arguments of calls not yet answered
        log_lines = log_bytes = 0
        # The child adds at most two lines of its own (truncation, a stalled script).
        max_log_lines = request.max_log_lines + 2
        max_log_bytes = request.max_log_bytes + 1024
        process.max_line = self._line_limit(request)
        process.attach(loop, inbox)
        try:
            process.send(self._command(request, attempt_id))
            while True:
                message = await inbox.get()
                kind = message.get("type")
                if kind in ("exit", "violation", "bridge-failed"):
                    self.kill()
                    return self._failure(message)
                if message.get("id") != attempt_id:
                    self.kill()
                    return _fault(f"{_unexpected(message)} during attempt {attempt_id}")
                if kind == "log":
                    text = message["text"]
                    log_lines += text.count("\n") + 1
                    log_bytes += len(text.encode("utf-8", "replace"))
                    if log_lines > max_log_lines or log_bytes > max_log_bytes:
                        self.kill()
                        return _fault("console output past the limits the worker enforces")
                    on_log(message["level"], text)
                elif kind == "call":
                    call = message["call"]
                    size = int(message.get("_bytes", 0))
                    if call in seen_calls or json_depth(message["args"], request.max_json_depth) \
                            > request.max_json_depth:
                        self.kill()
                        return _fault("a services call that breaks the worker's own checks")
                    seen_calls.add(call)
                    if in_flight[0] + size > _MAX_IN_FLIGHT_BYTES:
                        process.send(self._refusal(attempt_id, call, request))
                        continue
                    in_flight[0] += size
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
                    task.add_done_callback(functools.partial(_release, in_flight, size))
                elif kind == "need":
                    process.send({"op": "step", "attempt": attempt_id,
                                  "text": _step_text(request, message["step"])})
                elif kind == "stalled":
                    if on_stall is not None:
                        on_stall()
                elif kind == "done":
                    return self._result(message, request)
                else:  # "ready" or "checked" in the middle of an attempt
                    self.kill()
                    return _fault(f"{_unexpected(message)} during attempt {attempt_id}")
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
    def _failure(message: dict[str, Any]) -> AttemptResult:
        kind = message.get("type")
        if kind == "exit":
            return AttemptResult("crash", error_name="WorkerDied",
                                 error_message=_died(message.get("returncode")))
        if kind == "violation":
            return _fault(str(message["problem"]))
        # bridge-failed: the child waits for a reply that will never come.
        return AttemptResult("crash", error_name="ServiceBridgeError",
                             error_message=str(message["message"]))

    @staticmethod
    def _refusal(attempt_id: int, call: int, request: AttemptRequest) -> dict[str, Any]:
        return {
            "op": "reply", "attempt": attempt_id, "call": call, "ok": False,
            "name": "RangeError",
            "message": f"too many services calls in flight: their arguments pass "
                       f"{_MAX_IN_FLIGHT_BYTES} bytes; await some before making more",
            "props": {}, "nowMs": request.now_ms(),
        }

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
        name = str(message["service"])
        args = message["args"]
        reply: dict[str, Any]
        try:
            value = await services(name, args)
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
        reply.update(op="reply", attempt=attempt_id, call=message["call"],
                     nowMs=request.now_ms())
        try:
            process.send(reply)
        except (TypeError, ValueError, RecursionError) as error:
            inbox.put_nowait(
                {
                    "type": "bridge-failed",
                    "message": f"services.{name} answered with a value that is not JSON: {error}",
                }
            )

    @staticmethod
    def _result(message: dict[str, Any], request: AttemptRequest) -> AttemptResult:
        """The attempt's outcome from the child's report, checked again here (spec §4.5)."""
        outcome = str(message["outcome"])
        if outcome == "succeeded":
            text = message["result"]
            limit = request.max_result_bytes
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > limit:
                return AttemptResult(
                    "oversized", error_name="RangeError",
                    error_message=f"the result's JSON text is {size} bytes; the limit is "
                                  f"{limit} bytes",
                )
            try:
                value = loads_limited(text, max_depth=request.max_json_depth, what="result")
            except JSONLimitError as error:
                return AttemptResult("invalid-json", error_name="TypeError",
                                     error_message=str(error))
            except ValueError as error:
                return AttemptResult("invalid-json", error_name="TypeError",
                                     error_message=f"the result is not JSON: {error}")
            return AttemptResult("succeeded", result=value)
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


def _release(in_flight: list[int], size: int, _: object) -> None:
    in_flight[0] -= size


#: The most bytes of arguments of ``services`` calls one attempt may have in flight.
_MAX_IN_FLIGHT_BYTES = 16 * 1024 * 1024


def _unexpected(message: dict[str, Any]) -> str:
    kind = message.get("type")
    if kind == "exit":
        return "its exit"
    if kind == "violation":
        return str(message.get("problem"))
    return f"an unexpected {str(kind)[:40]!r} message (id {str(message.get('id'))[:40]})"


def _fault(problem: str) -> AttemptResult:
    """A worker that broke the protocol: the attempt ends ``crash`` (spec §4.5)."""
    return AttemptResult(
        "crash",
        error_name="WorkerProtocolError",
        error_message=f"the script worker sent {problem}; the attempt fails closed and "
                      "the worker was replaced",
    )


def _step_text(request: AttemptRequest, name: str) -> str:
    """The answer to a ``context.steps`` read (spec §3.6): a result's JSON text, ``""``
    for none, or ``"!"`` and a reason when it cannot be given."""
    steps = request.context.get("steps") or {}
    if name:
        if isinstance(steps, StepResults):
            return steps.text(name) or ""
        return encode(steps[name]) if name in steps else ""
    texts = steps.texts() if isinstance(steps, StepResults) else \
        {key: encode(value) for key, value in steps.items()}
    size = sum(len(text) + len(key) + 4 for key, text in texts.items())
    if size > request.memory_limit_bytes:
        return (f"!context.steps holds {size} bytes of results, more than the attempt's "
                f"memory limit of {request.memory_limit_bytes} bytes; read the steps you "
                "need by name")
    return "{" + ",".join(f"{json.dumps(key)}:{text}" for key, text in texts.items()) + "}"
