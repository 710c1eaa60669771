"""The script worker process: runs scripts in QuickJS, one attempt at a time (spec §4.5).

Run as ``python -m woml_magic.runtime._child``. It reads newline-delimited JSON
commands on stdin and writes newline-delimited JSON messages on stdout:

    in:  {"op": "run", "id", "script", "payload" (JSON text), "context", "stepCount", "attempt",
          "nowMs", "memoryLimit", "maxResultBytes", "maxLogLines", "maxLogBytes",
          "maxArgsBytes", "maxDepth", "services"}              one attempt (spec §3.4, §3.6)
         {"op": "reply", "attempt", "call", "ok", "value" | "name", "message", "props",
          "nowMs"}                                             a services.* outcome (spec §4.1)
         {"op": "step", "attempt", "text"}                     a `context.steps` answer
         {"op": "check", "id", "script"}                       compile only (spec §2.3)
    out: {"type": "ready", "prelude": "bytecode" | "source"}    how contexts get the prelude
         {"type": "log", "id", "level", "text"}                console output (spec §4.4)
         {"type": "call", "id", "call", "service", "args"}     a services.* call (spec §4.1)
         {"type": "need", "id", "step"}                        read a step's result (§3.6)
         {"type": "stalled", "id"}                             nothing can settle the script
         {"type": "done", "id", "outcome", "name", "message", "line" | "result"}
         {"type": "checked", "id", "error"}                    null or [message, line, column]

The script cannot speak on this channel (spec §4.5): every message above is built and
encoded here, in Python, from primitives that the prelude hands over (see
prelude.js); a result travels as the text of a string field, which the kernel parses
and checks again; each message carries the id of the attempt or check it belongs to.
Messages are JSON with ASCII escapes, so a line holds exactly one message.

The process never dies of script misbehaviour: everything is caught and reported; the
parent kills it for timeouts and cancellation. It exits when stdin closes or when its
parent dies.
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

from woml_magic.limits import JSONLimitError, loads_limited
from woml_magic.runtime._bytecode import PreludeBytecode
from woml_magic.runtime._instrument import instrument_catches

# The wrapper puts the script on JS line 2, so cell line = JS line - 2 + script_line.
HEADER = '(async function (context, attempt, services, console) { "use strict";\n'
FOOTER = "\n})"
MAX_STACK_BYTES = 1024 * 1024
_CLOSES_EARLY = (
    "the script closes its own function body early (an unbalanced `}`); a script must be "
    "the body of one async function"
)
#: Longest error name or message a report carries, in characters.
MAX_ERROR_CHARS = 4096
LEVELS = ("log", "info", "warn", "error")
#: Longer names are never asked for: no step id is this long.
MAX_STEP_NAME_CHARS = 1024
#: After this many `context.steps` reads in one attempt, all steps are fetched at once.
MAX_STEP_QUESTIONS = 256
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
    return len(source.encode("utf-16-le", "surrogatepass")) // 2 - 2


def wrap(script: str) -> str:
    """The script as one async function expression, its line 1 on JS line 2."""
    return HEADER + script + FOOTER


def wrap_with_hook(script: str, hook: str) -> str:
    """``wrap(script)`` in a block that binds the catch hook (see _instrument.py) as
    the constant ``hook``, still on the header's one line. The prelude puts the hook
    on the global object under that name just before the block is evaluated; the
    block takes it and deletes the global, so a script never finds it there."""
    return (
        f"{{ const {hook} = globalThis.{hook}; delete globalThis.{hook}; "
        + wrap(script) + " }"
    )


def new_hook_name() -> str:
    """A name for the catch hook that no script can know in advance."""
    return "__womlCaught_" + os.urandom(8).hex()


# The catch hook's name in this worker process: fixed, so a script retried keeps the
# same text and its compiled form can be reused (see `_Scripts`). A script can learn
# it only by reading its own functions' source, and calling the hook can only make its
# attempt a `crash`, as `throw null` already does.
_HOOK = new_hook_name()


class Channel:
    """Newline-delimited JSON over the process's stdin and stdout.

    Commands that arrive while the worker waits for a particular one (a
    ``context.steps`` answer) are kept, in order, for later ``receive`` calls.
    """

    def __init__(self, inp: BinaryIO, out: BinaryIO) -> None:
        self._in = inp
        self._out = out
        self._held: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        """Write one message (ASCII JSON, one line); exit if the parent is gone."""
        try:
            text = json.dumps(message, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError):  # a bug here, never a script's doing: report it
            text = json.dumps({"type": "done", "id": message.get("id"), "outcome": "crash",
                               "name": "InternalError", "line": None,
                               "message": "internal error in the script runtime: a message "
                                          "could not be encoded"})
        try:
            self._out.write(text.encode("ascii") + b"\n")
            self._out.flush()
        except (BrokenPipeError, OSError):
            os._exit(0)

    def _read(self) -> dict[str, Any] | None:
        while True:
            line = self._in.readline()
            if not line:
                return None
            if line.strip():
                message = json.loads(line)
                if isinstance(message, dict):
                    return message

    def receive(self) -> dict[str, Any] | None:
        """The next command, or None at end of input (the parent closed the pipe)."""
        if self._held:
            return self._held.pop(0)
        return self._read()

    def receive_matching(self, op: str, attempt: int) -> dict[str, Any] | None:
        """The next ``op`` command of ``attempt``; others are held for ``receive``."""
        for i, message in enumerate(self._held):
            if message.get("op") == op and message.get("attempt") == attempt:
                return self._held.pop(i)
        while True:
            received = self._read()
            if received is None:
                return None
            if received.get("op") == op and received.get("attempt") == attempt:
                return received
            self._held.append(received)


def _is_out_of_memory(error: BaseException) -> bool:
    text = str(error)
    return "out of memory" in text or text.strip() == "null"


class _Router:
    """Routes the JS ``emit`` callable to the attempt being run (a context is made
    before its attempt is known)."""

    current: AttemptRunner | None = None

    def emit(self, kind: Any = None, a: Any = None, b: Any = None, c: Any = None) -> str:
        # Called from JavaScript: must never raise (a raising callable breaks the context).
        runner = self.current
        if runner is None:
            return "!"
        try:
            return runner.emit(kind, a, b, c)
        except Exception:
            return "!"


_router = _Router()


SPARE_LINES = 20_000
# The spare's prelude as bytecode, or None where it is compiled from source instead.
_bytecode = PreludeBytecode.build(prelude_source(SPARE_LINES, bytecode=True), keep_lines=False)
# `context.steps` (prelude-steps.js) apart: most attempts never need it, and reading
# bytecode costs time in proportion to its size.
_STEPS_SOURCE = (_HERE / "prelude-steps.js").read_text(encoding="utf-8")
_STEPS_GLOBAL = "__womlSteps"
_steps_bytecode = (
    None if _bytecode is None else PreludeBytecode.build(
        "\n" * (SPARE_LINES + 2) + f"globalThis.{_STEPS_GLOBAL} = {_STEPS_SOURCE};",
        keep_lines=False,
    )
)


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

    def steps_part(self, script_lines: int) -> Any:
        """prelude-steps.js's function in this context: read from bytecode when the
        spare's padding covers the script, else compiled (padded the same way)."""
        if script_lines <= SPARE_LINES and _steps_bytecode is not None \
                and _steps_bytecode.load(self.ctx):
            part = self.ctx.get(_STEPS_GLOBAL)
            self.ctx.eval(f"delete globalThis.{_STEPS_GLOBAL}")
            return part
        return self.ctx.eval("\n" * (script_lines + 2) + _STEPS_SOURCE)


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


class _Scripts:
    """Wrapped scripts evaluated into attempts' contexts, as bytecode once seen twice.

    A retried step runs the same script again (up to ten attempts, or a thousand runs
    of one cell); QuickJS compiles about 25 bytes per microsecond, so from its second
    attempt on a script of ``SMALL`` characters or more is read from bytecode made once
    (``_bytecode.py``), when bytecode is available. Keyed by the exact script text.
    """

    KEEP = 64
    #: Shorter scripts compile faster than their bytecode is read (≈ 15 µs).
    SMALL = 400
    _GLOBAL = "__womlMain"  # deleted by prelude.js `start`, before the script runs

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        self._compiled: dict[str, PreludeBytecode | None] = {}
        self._scratch: quickjs.Context | None = None

    def evaluate(
        self, ctx: quickjs.Context, script: str, hook: str | None, *, strict: bool = False
    ) -> Any:
        """The script's function in ``ctx``; None if it does not compile (``strict``:
        raise ``quickjs.JSException`` instead)."""
        direct = wrap(script) if hook is None else wrap_with_hook(script, hook)
        code = self._bytecode(script, hook)
        if code is not None and code.load(ctx):
            main = ctx.get(self._GLOBAL)  # the prelude's `start` deletes the global
            if main is not None:
                return main
        if strict:
            return ctx.eval(direct)
        try:
            return ctx.eval(direct)
        except quickjs.JSException:
            return None

    def _bytecode(self, script: str, hook: str | None) -> PreludeBytecode | None:
        if _bytecode is None or len(script) < self.SMALL:
            return None
        key = script if hook is None else hook + "\0" + script
        if key in self._compiled:
            return self._compiled[key]
        count = self._seen.get(key, 0) + 1
        self._seen[key] = count
        if len(self._seen) > 4 * self.KEEP:
            del self._seen[next(iter(self._seen))]
        if count < 2:
            return None
        if self._scratch is None:
            self._scratch = quickjs.Context()
        head = "" if hook is None else (
            f"{{ const {hook} = globalThis.{hook}; delete globalThis.{hook}; "
        )
        tail = ";" if hook is None else "; }"
        code = _bytecode.compile_more(
            head + f"globalThis.{self._GLOBAL} = " + wrap(script) + tail, self._scratch
        )
        self._compiled[key] = code
        if len(self._compiled) > self.KEEP:
            del self._compiled[next(iter(self._compiled))]
        return code


_scripts = _Scripts()


def _bounded(text: Any) -> str:
    """An error's name or message as sent: a string of at most ``MAX_ERROR_CHARS``."""
    value = text if isinstance(text, str) else str(text)
    return value if len(value) <= MAX_ERROR_CHARS else value[:MAX_ERROR_CHARS] + "…"


class AttemptRunner:
    """Runs one attempt in a fresh context and reports its outcome (spec §3.2, §3.3)."""

    def __init__(self, channel: Channel, command: dict[str, Any]) -> None:
        self.channel = channel
        self.command = command
        self.id = command["id"]
        self.limit = int(command["memoryLimit"])
        self.max_log_lines = int(command["maxLogLines"])
        self.max_log_bytes = int(command["maxLogBytes"])
        self.max_args_bytes = int(command["maxArgsBytes"])
        self.max_depth = int(command["maxDepth"])
        self.services = frozenset(command["services"])
        self.log_lines = 0
        self.log_bytes = 0
        self.log_cut = False
        self.calls: set[int] = set()
        self._asked = 0
        self._every_step: dict[str, str] | None = None

    # -- what the prelude hands over (primitives only; see prelude.js) ------------------
    def emit(self, kind: Any, a: Any, b: Any, c: Any) -> str:
        if kind == "log":
            return self._log(a, b)
        if kind == "call":
            return self._call(a, b, c)
        if kind == "need":
            return self._need(a)
        return "!"

    def _log(self, level: Any, text: Any) -> str:
        """One console line, counted in lines and UTF-8 bytes against the caps (§4.4)."""
        if self.log_cut:
            return "cut"
        if level not in LEVELS or not isinstance(text, str):
            return ""
        data = text.encode("utf-8", "replace")
        lines = text.count("\n") + 1
        room_lines = self.max_log_lines - self.log_lines
        room_bytes = self.max_log_bytes - self.log_bytes
        if lines <= room_lines and len(data) <= room_bytes:
            self.log_lines += lines
            self.log_bytes += len(data)
            self.channel.send({"type": "log", "id": self.id, "level": level, "text": text})
            return ""
        self.log_cut = True
        kept = data[:max(0, room_bytes)].decode("utf-8", "ignore")
        kept = "\n".join(kept.split("\n")[:max(0, room_lines)])
        if kept:
            self.channel.send({"type": "log", "id": self.id, "level": level, "text": kept})
        self.channel.send({
            "type": "log", "id": self.id, "level": "warn",
            "text": f"… console output truncated: an attempt may print at most "
                    f"{self.max_log_lines} lines or {self.max_log_bytes} bytes "
                    "(max_log_lines, max_log_bytes)",
        })
        return "cut"

    def _call(self, call: Any, service: Any, args_text: Any) -> str:
        """Check one services.* call's arguments and pass it on (spec §4.1, §4.5)."""
        if isinstance(call, float) and call.is_integer():
            call = int(call)
        if not isinstance(call, int) or isinstance(call, bool) or call in self.calls:
            return "Tinvalid call"
        if service not in self.services:
            return f"Tservices has no {service!r}"
        if not isinstance(args_text, str):
            return f"Tservices.{service} arguments must be JSON values"
        try:
            args = loads_limited(
                args_text, max_depth=self.max_depth, what=f"the arguments of services.{service}",
                max_bytes=self.max_args_bytes, bytes_limit_name="max_call_args_bytes",
            )
        except JSONLimitError as error:
            return "R" + str(error)
        except ValueError as error:
            return f"Tservices.{service} arguments must be JSON values: {error}"
        if not isinstance(args, list):
            return f"Tservices.{service} arguments must be JSON values"
        self.calls.add(call)
        self.channel.send(
            {"type": "call", "id": self.id, "call": call, "service": service, "args": args}
        )
        return ""

    def _need(self, name: Any) -> str:
        """A step's result (or all of them, for ``""``) from the kernel (spec §3.6)."""
        if not isinstance(name, str) or len(name) > MAX_STEP_NAME_CHARS:
            return ""  # no step has such a name (step ids are short XML names)
        if self._every_step is not None and name:
            return self._every_step.get(name, "")
        self._asked += 1
        if name and self._asked > MAX_STEP_QUESTIONS:
            # A script probing many names: fetch them all once rather than keep the
            # kernel answering one by one.
            every = self._ask("")
            if every and not every.startswith("!"):
                values = json.loads(every)
                self._every_step = {key: json.dumps(value) for key, value in values.items()}
                return self._every_step.get(name, "")
        return self._ask(name)

    def _ask(self, name: str) -> str:
        self.channel.send({"type": "need", "id": self.id, "step": name})
        reply = self.channel.receive_matching("step", self.id)
        if reply is None:
            os._exit(0)  # the kernel is gone, or ended this attempt
        text = reply.get("text")
        return text if isinstance(text, str) else ""

    # -- reporting -------------------------------------------------------------------
    def _done(self, outcome: str, name: Any, message: Any, line: Any) -> None:
        self.channel.send({
            "type": "done", "id": self.id, "outcome": outcome, "name": _bounded(name),
            "message": _bounded(message),
            "line": line if isinstance(line, int) and not isinstance(line, bool) else None,
        })

    def _crash_oom(self) -> None:
        self._done("crash", "InternalError",
                   f"the script ran out of memory (limit {self.limit} bytes)", None)

    def run(self) -> None:
        try:
            self._run()
        except Exception as error:  # the worker reports, never dies (spec §4.5)
            if _is_out_of_memory(error):
                self._crash_oom()
            else:
                self._done("crash", type(error).__name__,
                           f"internal error in the script runtime: {error}", None)

    def _run(self) -> None:
        command = self.command
        script: str = command["script"]
        lines = script.count("\n") + 1
        hook = _HOOK
        source = wrap(script)
        instrumented = instrument_catches(script, hook)
        prepared = _take_spare(lines) or Prepared(lines)
        _router.current = self
        ctx = prepared.ctx
        ctx.set_memory_limit(self.limit)
        main, evaluated = None, source
        if instrumented != script:
            # Fall back to the script as written if the instrumentation misread it.
            prepared.host("arm", hook)
            main = _scripts.evaluate(ctx, instrumented, hook)
            if main is not None:
                evaluated = wrap(instrumented)
            prepared.host("disarm", hook)
        if main is None:
            evaluated = source
            try:
                main = _scripts.evaluate(ctx, script, None, strict=True)
            except quickjs.JSException as error:
                # Only a script that breaks out of its function gets here: check_syntax
                # refuses every other script that does not compile.
                detail = str(error).split("\n", 1)[0]
                self._done("threw", "SyntaxError", f"{_CLOSES_EARLY} ({detail})", None)
                return
        steps = int(command["stepCount"])
        config = json.dumps(
            {
                "scriptLines": lines,
                "nowMs": command["nowMs"],
                "context": command["context"],
                "attempt": command["attempt"],
                "services": command["services"],
                "maxLogLines": self.max_log_lines,
                # Only keeps huge strings in the context; the bytes are counted here.
                "maxLogChars": self.max_log_bytes,
                "maxDepth": self.max_depth,
                "stepCount": steps,
                "expectedLength": function_length(evaluated),
            }
        )
        host = prepared.host
        part = prepared.steps_part(lines) if steps > 0 else None
        host("configure", config, command["payload"], part)
        host("start", main)
        while True:
            self._run_jobs(ctx)
            report = json.loads(host("finish"))
            state, oom, null_caught, pending = report[0], report[1], report[2], report[3]
            if state != "pending":
                break
            if pending == 0 and not (oom or null_caught):
                # Nothing can ever settle the script's promise (there are no timers): the
                # attempt ends by its timeout, judged by the kernel (spec §3.2 `timeout`),
                # which may let a simulated clock jump to it at once.
                self.channel.send({
                    "type": "log", "id": self.id, "level": "warn",
                    "text": "the script awaits a promise that nothing will settle; "
                            "the attempt will end at its timeout",
                })
                self.channel.send({"type": "stalled", "id": self.id})
                while self.channel.receive() is not None:
                    pass
                sys.exit(0)
            if pending == 0:
                break
            reply = self.channel.receive_matching("reply", self.id)
            if reply is None:
                sys.exit(0)
            self._settle(host, reply)
        self._report(host, report)

    def _run_jobs(self, ctx: quickjs.Context) -> None:
        """Run queued jobs; an error thrown by one (``queueMicrotask(() => { throw e })``)
        is the script's, not the runtime's: reported on the console, as a browser does."""
        while True:
            try:
                if not ctx.execute_pending_job():
                    return
            except quickjs.JSException as error:
                if _is_out_of_memory(error):
                    raise
                first = str(error).split("\n", 1)[0]
                self._log("error", f"uncaught in a queued job: {_bounded(first)}")

    def _settle(self, host: Any, reply: dict[str, Any]) -> None:
        ok = reply.get("ok") is True
        meta = json.dumps([reply.get("call"), ok, reply.get("nowMs"),
                           str(reply.get("name", "")), str(reply.get("message", ""))])
        body = json.dumps(reply.get("value") if ok else (reply.get("props") or {}))
        host("settle", meta, body)

    def _report(self, host: Any, report: list[Any]) -> None:
        state, oom, null_caught, _, invalid, name, message, line, is_null = report
        if oom or null_caught:
            self._crash_oom()
            return
        if state == "rejected":
            if is_null:
                # QuickJS throws null when it cannot even build the out-of-memory error.
                self._crash_oom()
                return
            self._done("threw", name, message, line)
            return
        if invalid is not None:
            self._done("invalid-json", "TypeError", invalid, None)
            return
        text = host("result")
        if not isinstance(text, str):
            self._done("crash", "InternalError",
                       "internal error in the script runtime: the result was not text", None)
            return
        size = len(text.encode("utf-8", "surrogatepass"))
        limit = int(self.command["maxResultBytes"])
        if size > limit:
            self._done("oversized", "RangeError",
                       f"the result's JSON text is {size} bytes; the limit is {limit} bytes",
                       None)
            return
        self.channel.send({"type": "done", "id": self.id, "outcome": "succeeded", "result": text})


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
            error = [_CLOSES_EARLY, 2, 1]
    except quickjs.JSException as exc:
        match = _LOCATION.match(str(exc))
        if match is None:
            error = [str(exc).splitlines()[0] if str(exc) else "invalid script", 2, 1]
        else:
            error = [match.group(2), int(match.group(3)), int(match.group(4))]
    except Exception as exc:  # reported; the worker stays up
        error = [f"the script could not be compiled: {exc}", 2, 1]
    if error is not None:
        error[0] = _bounded(error[0])
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
