"""The worker process's two commands: run one attempt, check one script (spec §2.3, §3.2,
§3.3, §4.5).

The script cannot speak on the channel (spec §4.5): every message is built and encoded
here, in Python, from primitives that the prelude hands over (see prelude.js); a
result travels as the text of a string field, which the kernel parses and checks
again; each message carries the id of the attempt or check it belongs to. Nothing a
script does makes this code raise: everything is caught and reported.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from typing import Any

import _quickjs as quickjs  # the extension, not its package: binding.py says why

from woml_magic.javascript import engine_line_count
from woml_magic.limits import JSONLimitError, loads_limited
from woml_magic.outcomes import CRASH, INVALID_JSON, OVERSIZED, SUCCEEDED, THREW, Outcome

from ._channel import Channel
from ._contexts import Contexts
from ._instrument import instrument_catches
from .protocol import (
    LEVELS,
    MAX_ERROR_CHARS,
    MAX_STEP_NAME_CHARS,
    REPLY,
    STEP,
    CallMessage,
    CheckCommand,
    CheckedMessage,
    FailedMessage,
    LogMessage,
    NeedMessage,
    RunCommand,
    StalledMessage,
    SucceededMessage,
    settle_arguments,
)
from .wrapper import (
    CLOSES_EARLY,
    FIRST_LINE,
    function_length,
    last_line,
    padding,
    reach_of,
    wrap,
)

#: After this many `context.steps` reads in one attempt, all steps are fetched at once.
MAX_STEP_QUESTIONS = 256
#: How the child tells the prelude that step results were refused (prelude-steps.js).
REFUSED = "!"
_LOCATION = re.compile(r"^(\w+): (.*?)\n\s*at <input>:(\d+):(\d+)", re.DOTALL)


def _is_out_of_memory(error: BaseException) -> bool:
    text = str(error)
    return "out of memory" in text or text.strip() == "null"


_encode = json.JSONEncoder().encode


@functools.lru_cache(maxsize=16)
def _encode_names(names: tuple[str, ...]) -> str:
    """A list of names as JSON: the same few lists (``services``, ``secrets``) come with
    every attempt."""
    return _encode(list(names))


@functools.lru_cache(maxsize=64)
def _expected_length(script: str) -> int:
    """``toString().length`` of the function ``wrap(script)`` defines: a retried step's
    script is measured once."""
    return function_length(wrap(script))


def _bounded(text: Any) -> str:
    """An error's name or message as sent: a string of at most ``MAX_ERROR_CHARS``."""
    value = text if isinstance(text, str) else str(text)
    return value if len(value) <= MAX_ERROR_CHARS else value[:MAX_ERROR_CHARS] + "…"


class AttemptRunner:
    """Runs one attempt in a fresh context and reports its outcome (spec §3.2, §3.3)."""

    def __init__(self, channel: Channel, command: RunCommand, contexts: Contexts) -> None:
        self.channel = channel
        self.command = command
        self.contexts = contexts
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
        self.ctx: quickjs.Context | None = None

    # -- what the prelude hands over (primitives only; see prelude.js) ------------------
    def emit(self, kind: Any, a: Any, b: Any, c: Any) -> str:
        if kind == "log":
            return self._log(a, b)
        if kind == "call":
            return self._call(a, b, c)
        if kind == "need":
            return self._need(a)
        if kind == "part":
            return "" if self.ctx is not None and self.contexts.part(self.ctx, a, b) else "!"
        return "!"

    def _send_log(self, level: str, text: str) -> None:
        self.channel.send(LogMessage(type="log", id=self.id, level=level, text=text))

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
            self._send_log(level, text)
            return ""
        self.log_cut = True
        kept = data[:max(0, room_bytes)].decode("utf-8", "ignore")
        kept = "\n".join(kept.split("\n")[:max(0, room_lines)])
        if kept:
            self._send_log(level, kept)
        self._send_log("warn", f"… console output truncated: an attempt may print at most "
                               f"{self.max_log_lines} lines or {self.max_log_bytes} bytes "
                               "(max_log_lines, max_log_bytes)")
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
            CallMessage(type="call", id=self.id, call=call, service=service, args=args)
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
            every, refused = self._ask("")
            if every and refused is None:
                values = json.loads(every)
                self._every_step = {key: json.dumps(value) for key, value in values.items()}
                return self._every_step.get(name, "")
        text, refused = self._ask(name)
        # One string is all a callable hands to JavaScript: prelude-steps.js reads a
        # leading REFUSED as the refusal's reason (a JSON text never starts with it).
        return text if refused is None else REFUSED + refused

    def _ask(self, name: str) -> tuple[str, str | None]:
        """The kernel's ``step`` reply: the JSON text (or ""), and why it was refused."""
        self.channel.send(NeedMessage(type="need", id=self.id, step=name))
        reply = self.channel.receive_matching(STEP, self.id)
        if reply is None:
            os._exit(0)  # the kernel is gone, or ended this attempt
        text, refused = reply.get("text"), reply.get("refused")
        return (text if isinstance(text, str) else "",
                refused if isinstance(refused, str) else None)

    # -- reporting -------------------------------------------------------------------
    def _done(self, outcome: Outcome, name: Any, message: Any, line: Any) -> None:
        self.channel.send(FailedMessage(
            type="done", id=self.id, outcome=outcome, name=_bounded(name),
            message=_bounded(message),
            line=line if isinstance(line, int) and not isinstance(line, bool) else None,
        ))

    def _crash_oom(self) -> None:
        self._done(CRASH, "InternalError",
                   f"the script ran out of memory (limit {self.limit} bytes)", None)

    def run(self) -> None:
        try:
            self._run()
        except Exception as error:  # the worker reports, never dies (spec §4.5)
            if _is_out_of_memory(error):
                self._crash_oom()
            else:
                self._done(CRASH, type(error).__name__,
                           f"internal error in the script runtime: {error}", None)
        finally:
            self.ctx = None  # the context is freed now, as the attempt ends

    def _run(self) -> None:
        command = self.command
        contexts = self.contexts
        script = command["script"]
        hook = contexts.hook
        lines = engine_line_count(script)  # QuickJS's lines: LS and PS may end one
        instrumented = instrument_catches(script, hook)
        reach = reach_of(script)
        prepared = contexts.take(lines)
        contexts.router.current = self
        ctx = self.ctx = prepared.ctx
        ctx.set_memory_limit(self.limit)
        host = prepared.host
        steps = int(command["stepCount"])
        # Configured before the script is even compiled: the prelude deletes the global
        # it was fetched by, so code of a script that breaks out of its function never
        # finds it.
        host(
            "configure",
            last_line(lines),
            len(padding(lines)),
            command["nowMs"],
            _encode(command["context"]),
            _encode(command["attempt"]) if reach.attempt else None,
            command["payload"],
            _encode_names(tuple(command["services"])) if reach.services else None,
            _encode_names(tuple(command.get("secrets", ()))),
            reach.console,
            self.max_log_lines,
            # Only keeps huge strings in the context; the bytes are counted here.
            self.max_log_bytes,
            self.max_depth,
            steps,
        )
        main, evaluated = None, script
        if instrumented != script:
            # Fall back to the script as written if the instrumentation misread it.
            host("arm", hook)
            main = contexts.scripts.evaluate(ctx, instrumented, hook)
            if main is not None:
                evaluated = instrumented
            host("disarm", hook)
        if main is None:
            evaluated = script
            try:
                main = contexts.scripts.evaluate(ctx, script, None, strict=True)
            except quickjs.JSException as error:
                # Only a script that breaks out of its function gets here: check_syntax
                # refuses every other script that does not compile.
                detail = str(error).split("\n", 1)[0]
                self._done(THREW, "SyntaxError", f"{CLOSES_EARLY} ({detail})", None)
                return
        host("start", main, _expected_length(evaluated))
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
                self._send_log("warn", "the script awaits a promise that nothing will settle; "
                                       "the attempt will end at its timeout")
                self.channel.send(StalledMessage(type="stalled", id=self.id))
                while self.channel.receive() is not None:
                    pass
                sys.exit(0)
            if pending == 0:
                break
            reply = self.channel.receive_matching(REPLY, self.id)
            if reply is None:
                sys.exit(0)
            host("settle", *settle_arguments(reply))
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
            self._done(THREW, name, message, line)
            return
        if invalid is not None:
            self._done(INVALID_JSON, "TypeError", invalid, None)
            return
        text = host("result")
        if not isinstance(text, str):
            self._done(CRASH, "InternalError",
                       "internal error in the script runtime: the result was not text", None)
            return
        size = len(text.encode("utf-8", "surrogatepass"))
        limit = int(self.command["maxResultBytes"])
        if size > limit:
            self._done(OVERSIZED, "RangeError",
                       f"the result's JSON text is {size} bytes; the limit is {limit} bytes",
                       None)
            return
        self.channel.send(
            SucceededMessage(type="done", id=self.id, outcome=SUCCEEDED, result=text)
        )


def check(channel: Channel, command: CheckCommand) -> None:
    """Compile (never run) the wrapped script; report a syntax error's JS position."""
    source = wrap(command["script"])
    # The outer function is never called, so compiling runs none of the script.
    probe = (
        "(f => typeof f === 'function' ? f().toString().length : -1)(function () { return "
        + source
        + "; })"
    )
    error: list[Any] | None = None
    ctx = quickjs.Context()
    ctx.set_memory_limit(int(command["memoryLimit"]))
    try:
        length = ctx.eval(probe)
        if length != function_length(source):
            error = [CLOSES_EARLY, FIRST_LINE, 1]
    except quickjs.JSException as exc:
        match = _LOCATION.match(str(exc))
        if match is None:
            error = [str(exc).splitlines()[0] if str(exc) else "invalid script", FIRST_LINE, 1]
        else:
            error = [match.group(2), int(match.group(3)), int(match.group(4))]
    except Exception as exc:  # reported; the worker stays up
        error = [f"the script could not be compiled: {exc}", FIRST_LINE, 1]
    if error is not None:
        error[0] = _bounded(error[0])
    channel.send(CheckedMessage(type="checked", id=command["id"], error=error))
