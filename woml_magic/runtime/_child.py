"""The script worker process: runs scripts in QuickJS, one attempt at a time (spec §4.5).

Run as ``python -m woml_magic.runtime._child``. It reads newline-delimited JSON
commands on stdin and writes newline-delimited JSON messages on stdout:

    in:  {"op": "run", "id", "script", "context", "attempt", "nowMs", "memoryLimit",
          "maxResultBytes", "services"}                        one attempt (spec §3.4, §3.6)
         {"op": "reply", "attempt", "id", "ok", "value" | "name", "message", "props",
          "nowMs"}                                             a services.* outcome (spec §4.1)
         {"op": "check", "id", "script"}                       compile only (spec §2.3)
    out: {"type": "ready", "prelude": "bytecode" | "source"}    how contexts get the prelude
         {"type": "log", "level", "text"}                      console output (spec §4.4)
         {"type": "call", "id", "service", "args"}             a services.* request
         {"type": "done", "id", "outcome", ...}                the attempt's outcome (spec §3.2)
         {"type": "checked", "id", "error": null | [message, js_line, js_column]}

Every attempt gets a fresh QuickJS context with the memory limit set (runtime facts:
a context that hit its limit can fail every later eval). The process never dies of
script misbehaviour: everything is caught and reported; the parent kills it for
timeouts and cancellation. It exits when stdin closes or when its parent dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

import quickjs

from woml_magic.runtime._bytecode import PreludeBytecode
from woml_magic.runtime._instrument import instrument_catches

# The wrapper puts the script on JS line 2, so cell line = JS line - 2 + script_line.
HEADER = '(async function (context, attempt, services, console) { "use strict";\n'
FOOTER = "\n})"
MAX_STACK_BYTES = 1024 * 1024
MAX_LOG_LINES = 1000
MAX_LOG_CHARS = 64 * 1024
_LOCATION = re.compile(r"^(\w+): (.*?)\n\s*at <input>:(\d+):(\d+)", re.DOTALL)
_HERE = Path(__file__).parent
_PRELUDE = (_HERE / "prelude.js").read_text(encoding="utf-8")
_PARTS = {
    name: (_HERE / f"prelude-{name}.js").read_text(encoding="utf-8")
    for name in ("console", "services", "results")
}
_PRELUDE_GLOBAL = "__womlPrelude"
# The lazy parts as one JS object literal of source strings (the compiled-from-source way).
_PARTS_SOURCE = json.dumps(_PARTS)


def prelude_source(pad: int, *, bytecode: bool) -> str:
    """The prelude as one function of the emit callable, padded by ``pad`` lines.

    For bytecode the lazy parts are function expressions compiled with the prelude
    and the script stores the function in a global; otherwise the parts are string
    literals, compiled in a context only if its attempt needs them (prelude.js
    ``lib``), and the script's value is the function.
    """
    if bytecode:
        parts = ", ".join(f"{json.dumps(name)}: {text}" for name, text in _PARTS.items())
        return (
            "\n" * (pad + 2) + f"globalThis.{_PRELUDE_GLOBAL} = function (emit) {{ return ("
            + _PRELUDE + f")(emit, {{{parts}}}); }};"
        )
    return (
        "\n" * (pad + 2) + "(function (emit) { return ("
        + _PRELUDE + f")(emit, {_PARTS_SOURCE}); }})"
    )


def function_length(source: str) -> int:
    """``fn.toString().length`` of the function that ``source`` (a wrapped script) defines.

    JavaScript counts UTF-16 code units; the wrapper's outer parentheses are not part
    of the function. A different length at run time means the script closed the
    function early and the wrapper's tail became code of its own.
    """
    return len(source.encode("utf-16-le")) // 2 - 2


def wrap(script: str) -> str:
    """The script as one async function expression, its line 1 on JS line 2."""
    return HEADER + script + FOOTER


class Channel:
    """Newline-delimited JSON over the process's stdin and stdout."""

    def __init__(self, inp: BinaryIO, out: BinaryIO) -> None:
        self._in = inp
        self._out = out

    def send_text(self, text: str) -> None:
        """Write one message already encoded as JSON text; exit if the parent is gone."""
        try:
            self._out.write(text.encode("utf-8", "surrogatepass") + b"\n")
            self._out.flush()
        except (BrokenPipeError, OSError):
            os._exit(0)

    def send(self, message: dict[str, Any]) -> None:
        self.send_text(json.dumps(message))

    def receive(self) -> dict[str, Any] | None:
        """The next command, or None at end of input (the parent closed the pipe)."""
        while True:
            line = self._in.readline()
            if not line:
                return None
            if line.strip():
                message: dict[str, Any] = json.loads(line)
                return message


def _is_out_of_memory(error: BaseException) -> bool:
    text = str(error)
    return "out of memory" in text or text.strip() == "null"


class _Router:
    """Routes the JS ``emit`` callable to the attempt being run (a context is made
    before its attempt is known)."""

    current: AttemptRunner | None = None

    def emit(self, text: str) -> None:
        # Called from JavaScript: must never raise (a raising callable breaks the context).
        if self.current is not None:
            self.current._emit(text)


_router = _Router()


SPARE_LINES = 20_000
# The spare's prelude as bytecode, or None where it is compiled from source instead.
_bytecode = PreludeBytecode.build(prelude_source(SPARE_LINES, bytecode=True))


class Prepared:
    """A fresh context with the prelude evaluated, not yet given to any attempt.

    Making one (a context, the prelude compiled and set up) is most of an attempt's
    cost, so the worker prepares the next one while it is idle, between attempts; the
    attempt itself only configures it (``host("configure", …)``) and runs the script.
    The prelude is padded with ``pad`` blank lines so its frames sit below every
    script line (see prelude.js); a spare is padded for scripts of up to
    ``SPARE_LINES`` lines.
    """

    def __init__(self, pad: int) -> None:
        self.lines = pad
        self.ctx = quickjs.Context()
        self.ctx.set_max_stack_size(MAX_STACK_BYTES)
        if pad == SPARE_LINES and _bytecode is not None and _bytecode.load(self.ctx):
            prelude = self.ctx.get(_PRELUDE_GLOBAL)
        else:
            prelude = self.ctx.eval(prelude_source(pad, bytecode=False))
        self.ctx.add_callable("__womlEmit", _router.emit)
        emit = self.ctx.eval("globalThis.__womlEmit")
        self.ctx.eval(f"delete globalThis.__womlEmit; delete globalThis.{_PRELUDE_GLOBAL}")
        self.host = prelude(emit)


_spare: list[Prepared] = []


def _prepare_spare() -> None:
    """Make the next attempt's context now, while nothing waits on this process."""
    if not _spare:
        with contextlib.suppress(Exception):  # a spare is an optimisation, never a failure
            _spare.append(Prepared(SPARE_LINES))


def _take_spare(lines: int) -> Prepared | None:
    if _spare and lines <= _spare[0].lines:
        return _spare.pop()
    return None


class AttemptRunner:
    """Runs one attempt in a fresh context and reports its outcome (spec §3.2, §3.3)."""

    def __init__(self, channel: Channel, command: dict[str, Any]) -> None:
        self.channel = channel
        self.command = command
        self.id = command["id"]
        self.limit = int(command["memoryLimit"])

    def _emit(self, text: str) -> None:
        # Called from JavaScript: must never raise (a raising callable breaks the context).
        with contextlib.suppress(Exception):
            self.channel.send_text(text)

    def _done(self, outcome: str, **fields: Any) -> None:
        self.channel.send({"type": "done", "id": self.id, "outcome": outcome, **fields})

    def _crash_oom(self) -> None:
        self._done(
            "crash",
            name="InternalError",
            message=f"the script ran out of memory (limit {self.limit} bytes)",
            line=None,
        )

    def run(self) -> None:
        try:
            self._run()
        except Exception as error:  # the worker reports, never dies (spec §4.5)
            if _is_out_of_memory(error):
                self._crash_oom()
            else:
                self._done(
                    "crash",
                    name=type(error).__name__,
                    message=f"internal error in the script runtime: {error}",
                    line=None,
                )

    def _run(self) -> None:
        command = self.command
        script: str = command["script"]
        lines = script.count("\n") + 1
        source = wrap(script)
        instrumented = instrument_catches(script)
        prepared = _take_spare(lines) or Prepared(lines)
        _router.current = self
        ctx = prepared.ctx
        ctx.set_memory_limit(self.limit)
        main, evaluated = None, source
        if instrumented != script:
            # Fall back to the script as written if the instrumentation misread it.
            with contextlib.suppress(quickjs.JSException):
                evaluated = wrap(instrumented)
                main = ctx.eval(evaluated)
        if main is None:
            evaluated = source
            main = ctx.eval(source)
        config = json.dumps(
            {
                "scriptLines": lines,
                "nowMs": command["nowMs"],
                "context": command["context"],
                "attempt": command["attempt"],
                "services": command["services"],
                "maxLogLines": MAX_LOG_LINES,
                "maxLogChars": MAX_LOG_CHARS,
                "expectedLength": function_length(evaluated),
            }
        )
        host = prepared.host
        host("configure", config)
        host("start", main)
        while True:
            while ctx.execute_pending_job():
                pass
            report = json.loads(host("finish"))
            if report["state"] != "pending":
                break
            if report["pendingCalls"] == 0 and not (report["oom"] or report["nullCaught"]):
                # Nothing can ever settle the script's promise (there are no timers): the
                # attempt ends by its timeout, judged by the kernel (spec §3.2 `timeout`).
                self.channel.send({
                    "type": "log", "id": self.id, "level": "warn",
                    "text": "the script awaits a promise that nothing will settle; "
                            "the attempt will end at its timeout",
                })
                while self.channel.receive() is not None:
                    pass
                sys.exit(0)
            if report["pendingCalls"] == 0:
                break
            reply = self._next_reply()
            if reply is None:
                sys.exit(0)
            host("settle", json.dumps(reply))
        self._report(host, report)

    def _next_reply(self) -> dict[str, Any] | None:
        while True:
            message = self.channel.receive()
            if message is None:
                return None
            if message.get("op") == "reply" and message.get("attempt") == self.id:
                return message

    def _report(self, host: Any, report: dict[str, Any]) -> None:
        if report["oom"] or report["nullCaught"]:
            self._crash_oom()
            return
        state = report["state"]
        if state == "rejected":
            error = report["error"]
            if error["isNull"]:
                # QuickJS throws null when it cannot even build the out-of-memory error.
                self._crash_oom()
                return
            self._done("threw", name=error["name"], message=error["message"], line=error["line"])
            return
        if not report["ok"]:
            self._done("invalid-json", name="TypeError", message=report["message"], line=None)
            return
        text: str = host("result")
        size = len(text.encode("utf-8"))
        limit = int(self.command["maxResultBytes"])
        if size > limit:
            self._done(
                "oversized",
                name="RangeError",
                message=f"the result's JSON text is {size} bytes; the limit is {limit} bytes",
                line=None,
            )
            return
        # The result text is already JSON: embed it rather than parse and re-encode it.
        head = json.dumps({"type": "done", "id": self.id, "outcome": "succeeded"})[:-1]
        self.channel.send_text(head + ', "result": ' + text + "}")


def check(channel: Channel, command: dict[str, Any]) -> None:
    """Compile (never run) the wrapped script; report a syntax error's JS position."""
    script: str = command["script"]
    source = wrap(script)
    # The outer function is never called, so compiling runs none of the script.
    probe = (
        "(f => typeof f === 'function' ? f().toString().length : -1)(function () { return "
        + source
        + "; })"
    )
    error: list[Any] | None = None
    ctx = quickjs.Context()
    ctx.set_memory_limit(int(command.get("memoryLimit", 128 * 1024 * 1024)))
    try:
        length = ctx.eval(probe)
        if length != function_length(source):
            error = [
                "the script closes its own function body early (an unbalanced `}`); a script "
                "must be the body of one async function",
                2,
                1,
            ]
    except quickjs.JSException as exc:
        match = _LOCATION.match(str(exc))
        if match is None:
            error = [str(exc).splitlines()[0] if str(exc) else "invalid script", 2, 1]
        else:
            error = [match.group(2), int(match.group(3)), int(match.group(4))]
    except Exception as exc:  # reported; the worker stays up
        error = [f"the script could not be compiled: {exc}", 2, 1]
    channel.send({"type": "checked", "id": command["id"], "error": error})


PARENT_POLL_SECONDS = 0.25


def _die_with_parent() -> None:
    """Exit when the kernel process dies, even mid-``while (true) {}``.

    Linux's ``PR_SET_PDEATHSIG`` kills us at once, but it fires when the *thread* that
    started us ends, so the kernel asks for it (``WOML_PARENT_SIGNAL``) only from its
    main thread: a worker started from a helper thread (``wm.start`` in plain Python)
    must outlive that thread. A watcher thread covers every case within
    ``PARENT_POLL_SECONDS``: scripts run with the GIL released, so it runs even while
    a script spins.
    """
    expected = os.environ.get("WOML_PARENT_PID")
    if os.environ.get("WOML_PARENT_SIGNAL") == "1":
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if expected is None:
        return
    if str(os.getppid()) != expected:
        os._exit(0)
    threading.Thread(
        target=_watch_parent, args=(int(expected),), name="woml-parent-watch", daemon=True
    ).start()


def _watch_parent(pid: int) -> None:
    while True:
        time.sleep(PARENT_POLL_SECONDS)
        if os.getppid() != pid:  # we were handed to another reaper: the kernel is gone
            os._exit(0)


def main() -> None:
    """Serve commands until stdin closes (spec §4.5)."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the kernel is the parent's to handle
    channel = Channel(sys.stdin.buffer, sys.stdout.buffer)
    _prepare_spare()
    channel.send({"type": "ready", "prelude": "source" if _bytecode is None else "bytecode"})
    while True:
        command = channel.receive()
        if command is None:
            return
        op = command.get("op")
        if op == "run":
            AttemptRunner(channel, command).run()
            _router.current = None
            _prepare_spare()
        elif op == "check":
            check(channel, command)
        elif op == "exit":
            return


if __name__ == "__main__":
    main()
