"""The kernel side of the script worker (spec §4.5).

A ``ScriptWorker`` owns at most one warm child process (``transport.ChildProcess``)
and drives it through the protocol (``protocol.py``): one attempt or syntax check at
a time, each attempt in a fresh QuickJS context inside the child. It works from any
asyncio event loop, one after another. Nothing the script does can block the
kernel's loop: timeouts, cancellation and interruption (enforced by the engine) end
an attempt by SIGKILLing the child.

Nothing the child says is taken on trust (spec §4.5): every line is checked by the
transport, every message must carry the id of the attempt or check that is waiting,
and a result is checked again (``report.py``). Anything else ends the attempt
``crash`` with the reason, and the process is replaced, as it is when it wrote
anything between attempts (``_fresh``).
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Final, cast

from woml_magic.errors import WomlRunError
from woml_magic.limits import Limits
from woml_magic.outcomes import CRASH, TIMEOUT
from woml_magic.services.registry import SERVICE_NAMES

from .attempt import AttemptRequest, AttemptResult, LogSink, ServiceCall, StallSink
from .bridge import ServiceBridge
from .commands import run_line, step_reply
from .pipeline import RESEND, Deadline, Line, Slot
from .protocol import (
    CALL,
    CHECKED,
    DEFAULT_MAX_LINE,
    DONE,
    LOG,
    NEED,
    READY,
    STALLED,
    CallMessage,
    CheckCommand,
    CheckedMessage,
    LogMessage,
    NeedMessage,
    ReadyMessage,
    line_limit,
)
from .report import FAILURES, attempt_result, failure, protocol_fault, unexpected
from .transport import EXITED, ChildProcess, Inbox, Received, died, kill_all
from .wrapper import cell_position

SERVICES: Final = SERVICE_NAMES
"""The ``services.*`` stubs every script sees (spec §4.1, §4.4): the registry's names."""


class ScriptWorker:
    """A warm script worker process, reused across attempts and runs (spec §4.5)."""

    def __init__(
        self, *, start_process: Callable[[], ChildProcess] = ChildProcess,
        keep_listening: bool = False, depth: int = 1,
    ) -> None:
        """``start_process`` makes the child process (a test may start another program
        that speaks the protocol, to see how the kernel takes what it says).

        ``keep_listening``: the loop that served an attempt goes on reading the child's
        stdout between attempts instead of dropping it and adding it again at the next
        (two ``epoll_ctl`` calls and their bookkeeping, ≈ 10 % of the kernel's CPU per
        lab attempt). Only for an owner that drives the worker from one loop and closes
        it there (the lab's pool): a loop may only be changed from its own thread, and
        the process's shared pool serves loops of several threads. Whatever the child
        writes between attempts still replaces the process (``_fresh``).

        ``depth``: how many attempts may be under way at once, sent ahead to the one
        process (``pipeline.py``); more than 1 only for an owner that keeps listening
        and sends only attempts that never wait on the kernel (the lab, for scripts
        that cannot reach ``services``)."""
        self._start_process = start_process
        self._keep_listening = keep_listening
        self._holder: list[ChildProcess] = []
        self._running = 0  # attempts (or a check) under way
        self._line = Line(self.kill)
        self._depth = 1
        self.set_depth(depth)
        self._line_loop: asyncio.AbstractEventLoop | None = None  # the loop serving it
        self._starting: asyncio.Future[None] | None = None  # a start under way
        self._ids = itertools.count(1)
        self._prelude: str | None = None
        self._prelude_reason: str | None = None
        self._finalizer = weakref.finalize(self, kill_all, self._holder)

    def set_depth(self, depth: int) -> None:
        """Take up to ``depth`` attempts at once from now on: only while none is under
        way, and more than 1 only for a worker whose loop keeps listening."""
        if self._running:
            raise RuntimeError("a ScriptWorker's depth changes only between attempts")
        if depth < 1 or (depth > 1 and not self._keep_listening):
            raise ValueError("a worker sends attempts ahead (depth > 1) only while its "
                             "loop keeps listening")
        self._depth = depth

    @property
    def idle(self) -> bool:
        """Whether its process is running with no attempt or check under way on it."""
        return self.pid is not None and not self._running and not len(self._line)

    @property
    def pid(self) -> int | None:
        """The child's process id, or None when no process is running."""
        process = self.process
        return process.popen.pid if process is not None and process.alive else None

    @property
    def prelude(self) -> str | None:
        """How the running child gives each context the prelude: ``"bytecode"`` (read) or
        ``"source"`` (compiled; see ``_bytecode.py``), or None before it started."""
        return self._prelude

    @property
    def prelude_reason(self) -> str | None:
        """Why the running child compiles the prelude from source (its bytecode was
        refused: an unverified quickjs-ng, ``WOML_PRELUDE_BYTECODE=0``, a failed
        self-check), or None."""
        return self._prelude_reason

    @property
    def process(self) -> ChildProcess | None:
        """The child process, or None before the first start and after a kill."""
        return self._holder[0] if self._holder else None

    async def start(self) -> None:
        """Spawn the warm process unless one is running (idempotent; attempts sent
        again after a kill wait for one start)."""
        while self._starting is not None:
            await asyncio.shield(self._starting)
        process = self.process
        if process is not None and process.alive:
            return
        self.kill()
        self._starting = asyncio.get_running_loop().create_future()
        try:
            await self._spawn()
        finally:
            starting, self._starting = self._starting, None
            starting.set_result(None)

    async def _spawn(self) -> None:
        try:
            process = self._start_process()
        except OSError as error:
            raise WomlRunError(f"the script worker could not start: {error}") from error
        self._holder.append(process)
        message = await self._first_message(process, None)
        if message.get("type") != READY:
            self.kill()
            raise WomlRunError(
                "the script worker could not start: " + died(message.get("returncode"))
            )
        ready = cast(ReadyMessage, message)
        self._prelude = ready["prelude"]
        self._prelude_reason = ready.get("reason")

    def kill(self) -> None:
        """SIGKILL and reap the process now; the next call starts a fresh one. Attempts
        sent ahead that had not started are sent again to it (``Line.requeue``) — at
        once on the loop that sent them, else when that loop reads the process's end."""
        kill_all(self._holder)
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is not None and here is self._line_loop:
            self._line.requeue()

    async def aclose(self) -> None:
        """Stop the process (idempotent)."""
        self.kill()

    def _enter(self, *, check: bool = False) -> None:
        if self._running >= self._depth or (check and self._running):
            raise RuntimeError("a ScriptWorker runs one attempt or check at a time"
                               if self._depth == 1 else
                               f"a ScriptWorker runs a check alone, or up to {self._depth} "
                               "attempts at a time")
        self._running += 1

    async def _fresh(self) -> ChildProcess:
        """The warm process, replaced first if it holds output nobody asked for.

        Between attempts the child writes nothing; anything waiting in its pipe (or a
        line half read) belongs to no one, so the process is replaced rather than
        drained: the next attempt never reads what an earlier one left (spec §4.5).
        (While attempts sent ahead are under way, what it writes is theirs.)
        """
        await self.start()
        process = self.process
        assert process is not None
        if not len(self._line) and process.pending_output():
            self.kill()
            await self.start()
            process = self.process
            assert process is not None
        return process

    async def _first_message(
        self, process: ChildProcess, command: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """Send ``command`` (if any) and await the first message or event back; the
        process is killed if the wait ends any other way."""
        inbox = Inbox()
        process.attach(asyncio.get_running_loop(), inbox)
        try:
            if command is not None:
                process.send(command)
            return (await inbox.get()).message
        except BaseException:
            self.kill()
            raise
        finally:
            process.detach(keep=self._keep_listening)

    async def check_syntax(
        self, script: str, script_line: int, script_column: int
    ) -> tuple[str, int, int] | None:
        """None if ``script`` compiles as an async function body, else (message, cell line,
        cell column) of the first syntax error (spec §2.3). Runs none of the script."""
        self._enter(check=True)
        try:
            process = await self._fresh()
            process.max_line = DEFAULT_MAX_LINE
            check_id = next(self._ids)
            message = await self._first_message(process, CheckCommand(
                op="check", id=check_id, script=script, memoryLimit=Limits().memory_limit_bytes,
            ))
            if message.get("type") == EXITED:
                self.kill()
                raise WomlRunError(died(message.get("returncode")) + " while compiling a script")
            if message.get("type") != CHECKED or message.get("id") != check_id:
                self.kill()
                raise WomlRunError(
                    "the script worker answered a syntax check with "
                    + unexpected(message) + "; the worker was replaced"
                )
            error = cast(CheckedMessage, message)["error"]
            if error is None:
                return None
            text, js_line, js_column = error
            line, column = cell_position(js_line, js_column, script, script_line, script_column)
            return str(text), line, column
        finally:
            self._running -= 1

    async def run_attempt(
        self, request: AttemptRequest, services: ServiceCall, on_log: LogSink,
        on_stall: StallSink | None = None, *, deadline: Deadline = None,
    ) -> AttemptResult:
        """Run one attempt in a fresh QuickJS context and report its outcome (spec §3.2).

        Cancelling the awaiting task kills the worker (so even ``while (true) {}``
        ends), cancels service calls in flight and re-raises ``CancelledError``.
        ``on_stall`` is called if the script awaits something nothing can settle: the
        attempt then only ends at its timeout (or cancellation), and the process, which
        can do nothing more for it, is replaced.
        ``deadline`` (the step's timeout on the run's clock, ``Clock.alarm``), or how to
        arm it, when the attempt starts: when it completes first, the worker is killed
        the same way and the attempt ends ``timeout`` — the engine's race of script and
        timeout without a task for each. An attempt sent ahead (``depth``) starts when
        those before it have ended (``pipeline.py``).
        """
        self._enter()
        inbox = Inbox()

        def ring(alarm: asyncio.Future[None]) -> None:
            if not alarm.cancelled():  # a deadline called off ends nothing
                inbox.put_nowait(Received({"type": TIMEOUT}))

        slot = Slot(next(self._ids), inbox, deadline, ring)
        if not len(self._line):
            slot.arm()  # nothing ahead: its time runs from now, a start included
        try:
            while True:
                process = self.process
                # With attempts under way on it, the process is alive as far as anyone can
                # know (if it goes, the line hears it), and what it writes is theirs.
                if process is None or self._starting is not None or (
                        not len(self._line)
                        and (not process.alive or process.pending_output())):
                    try:
                        process = await self._until(self._fresh(), slot.deadline)
                    except WomlRunError as error:
                        return AttemptResult(CRASH, error_name="WorkerError",
                                             error_message=str(error))
                    if process is None:
                        return AttemptResult(TIMEOUT)
                result = await self._attempt(process, slot, request, services, on_log,
                                             on_stall)
                if result is not None:
                    return result
                # None: the process went before the attempt started; sent again.
        finally:
            slot.end()
            if not slot.abandoned:
                self._line.remove(slot)
            process = self.process
            if process is not None and not len(self._line):
                process.detach(keep=self._keep_listening)
            self._running -= 1

    async def _until(
        self, starting: Coroutine[Any, Any, ChildProcess], deadline: asyncio.Future[None] | None,
    ) -> ChildProcess | None:
        """``starting``'s process, or None (the start killed) if ``deadline`` comes first."""
        if deadline is None:
            return await starting
        start = asyncio.ensure_future(starting)
        racing: set[asyncio.Future[Any]] = {start, deadline}
        try:
            await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
            if not start.done() and deadline.cancelled():  # called off: start as usual
                return await start
        finally:
            if not start.done():
                start.cancel()
                self.kill()
        return start.result() if start.done() else None  # not done: the deadline came

    def _end_run_of(self, slot: Slot) -> None:
        """Kill the process if it is running ``slot``'s attempt (not if the attempt has
        left it already, or has not started); the attempts behind it are sent again."""
        if self._line.first() is slot and slot.started:
            kill_all(self._holder)
            self._line.requeue(ending=slot)

    async def _attempt(
        self, process: ChildProcess, slot: Slot, request: AttemptRequest,
        services: ServiceCall, on_log: LogSink, on_stall: StallSink | None,
    ) -> AttemptResult | None:
        """The attempt on ``process``; None if the process went before it started."""
        attempt_id = slot.id
        inbox = slot.inbox
        bridge: ServiceBridge | None = None  # made at the first call: most attempts make none
        log_lines = log_bytes = 0
        # The child adds at most two lines of its own (truncation, a stalled script).
        limits = request.limits
        max_log_lines = limits.max_log_lines + 2
        max_log_bytes = limits.max_log_bytes + 1024
        longest = line_limit(
            limits.max_result_bytes, limits.max_call_args_bytes, limits.max_log_bytes
        )
        line = self._line
        process.max_line = max(process.max_line, longest) if len(line) else longest
        line.add(slot)
        self._line_loop = asyncio.get_running_loop()
        process.attach(self._line_loop, line)
        try:
            process.send_line(run_line(request, attempt_id))
            while True:
                message, size = await inbox.get()
                kind = message.get("type")
                if kind == RESEND:
                    return None
                if kind in FAILURES:
                    self._end_run_of(slot)
                    return failure(message)
                if kind == TIMEOUT:  # the deadline (run_attempt): never the child's
                    self._end_run_of(slot)
                    return AttemptResult(TIMEOUT)
                if message.get("id") != attempt_id:
                    self._end_run_of(slot)
                    return protocol_fault(f"{unexpected(message)} during attempt {attempt_id}")
                if kind == LOG:
                    log = cast(LogMessage, message)
                    log_lines += log["text"].count("\n") + 1
                    log_bytes += len(log["text"].encode("utf-8", "replace"))
                    if log_lines > max_log_lines or log_bytes > max_log_bytes:
                        self._end_run_of(slot)
                        return protocol_fault("console output past the limits the worker "
                                              "enforces")
                    on_log(log["level"], log["text"])
                elif kind == CALL:
                    # The line's size counts against the budget of calls in flight.
                    if bridge is None:
                        bridge = ServiceBridge(process, attempt_id, services, request, inbox)
                    problem = bridge.call(cast(CallMessage, message), size)
                    if problem is not None:
                        self._end_run_of(slot)
                        return protocol_fault(problem)
                elif kind == NEED:
                    step = cast(NeedMessage, message)["step"]
                    process.send(step_reply(request, attempt_id, step))
                elif kind == STALLED:
                    if on_stall is not None:
                        on_stall()
                    # The child reads nothing more until it is killed: replaced now, so
                    # attempts sent after this one go to a fresh process.
                    self._end_run_of(slot)
                elif kind == DONE:
                    return attempt_result(message, request)
                else:  # "ready" or "checked" in the middle of an attempt
                    self._end_run_of(slot)
                    return protocol_fault(f"{unexpected(message)} during attempt {attempt_id}")
        except BaseException:
            if slot.started:
                self._end_run_of(slot)
            else:
                slot.abandoned = True  # replaced when its turn comes (``Line``)
            raise
        finally:
            if bridge is not None:
                await bridge.aclose()
