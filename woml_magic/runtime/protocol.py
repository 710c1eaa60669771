"""The messages between the kernel and the script worker process (spec §4.5).

Newline-delimited JSON over the child's stdin and stdout, one message a line::

    kernel → child
      {"op": "run", "id", "script", "payload" (JSON text), "context", "stepCount",
       "attempt", "nowMs", "memoryLimit", "maxResultBytes", "maxLogLines", "maxLogBytes",
       "maxArgsBytes", "maxDepth", "services", "secrets"}
                                                       one attempt (spec §3.4, §3.6);
                                                       "secrets": names only (§10.1)
      {"op": "reply", "attempt", "call", "ok", "value" | "name", "message", "props",
       "nowMs"}                                        a services.* outcome (spec §4.1)
      {"op": "step", "attempt", "text", "refused"}     a ``context.steps`` answer (§3.6):
                                                       JSON text or "", or null text and
                                                       why the results cannot be given
      {"op": "check", "id", "script", "memoryLimit"}   compile only (spec §2.3)
      {"op": "exit"}                                   stop serving
    child → kernel
      {"type": "ready", "prelude": "bytecode" | "source" [, "reason"]}
                                                       how contexts get the prelude
                                                       (and why not as bytecode)
      {"type": "log", "id", "level", "text"}          console output (spec §4.4)
      {"type": "call", "id", "call", "service", "args"}
                                                       a services.* call (spec §4.1)
      {"type": "need", "id", "step"}                  read a step's result (§3.6)
      {"type": "stalled", "id"}                       nothing can settle the script
      {"type": "done", "id", "outcome": "succeeded", "result"}
      {"type": "done", "id", "outcome", "name", "message", "line"}
      {"type": "checked", "id", "error"}              null or [message, line, column]

Each shape is a ``TypedDict`` below, so both sides build and read the same field
names under ``mypy --strict``; ``check_shape`` holds a line from the child to exactly
these shapes. Messages are JSON with ASCII escapes (``encode_line``), so a line holds
exactly one message. Both processes import this module: it imports nothing but the
standard library and the outcome vocabulary.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any, Final, Literal, TypedDict

from woml_magic.outcomes import SUCCEEDED, WORKER_OUTCOMES, Outcome

# The message types the child sends and the operations the kernel asks for.
READY: Final = "ready"
LOG: Final = "log"
CALL: Final = "call"
NEED: Final = "need"
STALLED: Final = "stalled"
DONE: Final = "done"
CHECKED: Final = "checked"
RUN: Final = "run"
REPLY: Final = "reply"
STEP: Final = "step"
CHECK: Final = "check"
EXIT: Final = "exit"

PreludeWay = Literal["bytecode", "source"]
"""How the child gives each fresh context the prelude (see _bytecode.py)."""
PRELUDE_WAYS: Final[tuple[PreludeWay, ...]] = ("bytecode", "source")
#: The console levels a script can print at (spec §4.4).
LEVELS: Final = ("log", "info", "warn", "error")

#: Longest error name or message the child sends, in characters (then "…").
MAX_ERROR_CHARS = 4096
#: Longest step name the child asks for: no step id is this long.
MAX_STEP_NAME_CHARS = 1024
#: Longest error name, message, step name or reason the kernel accepts: above what an
#: honest child sends, so only a broken one meets it.
MAX_TEXT_CHARS = 8192
#: The longest line the child may send outside an attempt (see ``line_limit``).
DEFAULT_MAX_LINE = 1 << 20


# ---- child → kernel ---------------------------------------------------------------


class _ReadyFields(TypedDict):
    type: Literal["ready"]
    prelude: PreludeWay


class ReadyMessage(_ReadyFields, total=False):
    reason: str  # why the prelude is compiled from source rather than read


class LogMessage(TypedDict):
    type: Literal["log"]
    id: int
    level: str
    text: str


class CallMessage(TypedDict):
    type: Literal["call"]
    id: int
    call: int
    service: str
    args: list[Any]


class NeedMessage(TypedDict):
    type: Literal["need"]
    id: int
    step: str


class StalledMessage(TypedDict):
    type: Literal["stalled"]
    id: int


class SucceededMessage(TypedDict):
    type: Literal["done"]
    id: int
    outcome: Literal["succeeded"]
    result: str  # the result's JSON text, parsed and checked again by the kernel


class FailedMessage(TypedDict):
    type: Literal["done"]
    id: int
    outcome: Outcome
    name: str
    message: str
    line: int | None  # the JS line of the first script frame, if any


class CheckedMessage(TypedDict):
    type: Literal["checked"]
    id: int
    error: list[Any] | None  # [message, JS line, JS column]


# ---- kernel → child ---------------------------------------------------------------


class RunAttempt(TypedDict):
    """The fields of a ``run`` command that change from one attempt to the next."""

    op: Literal["run"]
    id: int
    payload: str
    context: dict[str, Any]
    stepCount: int
    attempt: dict[str, Any]
    nowMs: float


class RunStep(TypedDict):
    """The fields of a ``run`` command that a step's attempts share (``run_line``)."""

    script: str
    memoryLimit: int
    maxResultBytes: int
    maxLogLines: int
    maxLogBytes: int
    maxArgsBytes: int
    maxDepth: int
    services: list[str]
    secrets: list[str]  # the names services.secret knows; never a value (spec §10.1)


class RunCommand(RunAttempt, RunStep):
    """One attempt (spec §3.4, §3.6): what the child reads."""


class ReplyOk(TypedDict):
    op: Literal["reply"]
    attempt: int
    call: int
    ok: Literal[True]
    value: Any
    nowMs: float


class ReplyError(TypedDict):
    op: Literal["reply"]
    attempt: int
    call: int
    ok: Literal[False]
    name: str
    message: str
    props: dict[str, Any]
    nowMs: float


class StepCommand(TypedDict):
    op: Literal["step"]
    attempt: int
    text: str  # a result's JSON text, "" for none (and when refused)
    refused: str | None  # why the results cannot be given to this attempt; else None


class CheckCommand(TypedDict):
    op: Literal["check"]
    id: int
    script: str
    memoryLimit: int


# ---- encoding ---------------------------------------------------------------------


# One encoder for every line: ``json.dumps`` with options builds one per call (≈ 4 µs of
# a run command's ≈ 50 µs, on both sides of every message).
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def encode_line(message: Mapping[str, Any]) -> bytes:
    """One message as one line of ASCII JSON. Raises ``TypeError``/``ValueError`` (as
    ``json.dumps`` does) for a value that is not JSON."""
    return _ENCODER.encode(message).encode("ascii") + b"\n"


def run_line(attempt: RunAttempt, step: bytes) -> bytes:
    """A ``run`` command's line from its attempt's fields and ``step``, its step's fields
    as ``encode_line`` gave them: one JSON object, the step's part encoded once for all
    its attempts (the script and the limits: ≈ 3 % of the kernel's CPU per attempt)."""
    return encode_line(attempt)[:-2] + b"," + step[1:]


def line_limit(max_result_bytes: int, max_call_args_bytes: int, max_log_bytes: int) -> int:
    """The longest line the child may send in an attempt with these limits.

    Messages are ASCII JSON, so one byte of script text may take up to six (a control
    character as ``\\u0001``); what a message carries is bounded by the limits.
    """
    largest = max(max_result_bytes, max_call_args_bytes, max_log_bytes, 64 * 1024)
    return 6 * largest + 64 * 1024


def settle_arguments(reply: Mapping[str, Any]) -> tuple[str, str]:
    """A ``reply`` as the prelude's ``settle`` takes it (prelude-services.js): the meta
    ``[call, ok, nowMs, name, message]`` and the value's JSON text when ok, else the
    rejection's props as a JSON object text."""
    ok = reply.get("ok") is True
    meta = json.dumps([reply.get("call"), ok, reply.get("nowMs"),
                       str(reply.get("name", "")), str(reply.get("message", ""))])
    body = json.dumps(reply.get("value") if ok else (reply.get("props") or {}))
    return meta, body


# ---- checking what the child says -------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder for every line: ``json.loads`` with a hook would build one per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)

_READY_KEYS = ReadyMessage.__required_keys__
_READY_WITH_REASON = _READY_KEYS | ReadyMessage.__optional_keys__
_LOG_KEYS = LogMessage.__required_keys__
_CALL_KEYS = CallMessage.__required_keys__
_NEED_KEYS = NeedMessage.__required_keys__
_STALLED_KEYS = StalledMessage.__required_keys__
_SUCCEEDED_KEYS = SucceededMessage.__required_keys__
_FAILED_KEYS = FailedMessage.__required_keys__
_CHECKED_KEYS = CheckedMessage.__required_keys__


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_id(value: Any) -> bool:
    return _is_int(value) and value > 0


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_TEXT_CHARS


def check_shape(message: dict[str, Any], services: Collection[str]) -> str | None:
    """None if ``message`` is one the child may send (a ``call`` naming one of
    ``services``), else what is wrong with it."""
    kind = message.get("type")
    keys = message.keys()
    if kind == LOG:
        if keys == _LOG_KEYS and _is_id(message["id"]) \
                and message["level"] in LEVELS and isinstance(message["text"], str):
            return None
    elif kind == CALL:
        if keys == _CALL_KEYS and _is_id(message["id"]) \
                and _is_id(message["call"]) and message["service"] in services \
                and isinstance(message["args"], list):
            return None
    elif kind == NEED:
        if keys == _NEED_KEYS and _is_id(message["id"]) and _is_text(message["step"]):
            return None
    elif kind == STALLED:
        if keys == _STALLED_KEYS and _is_id(message["id"]):
            return None
    elif kind == DONE:
        outcome = message.get("outcome")
        if outcome == SUCCEEDED:
            if keys == _SUCCEEDED_KEYS and _is_id(message["id"]) \
                    and isinstance(message["result"], str):
                return None
        elif outcome in WORKER_OUTCOMES:
            line = message.get("line")
            if keys == _FAILED_KEYS and _is_id(message["id"]) \
                    and _is_text(message["name"]) and _is_text(message["message"]) \
                    and (line is None or _is_int(line)):
                return None
        else:
            return f"a done message with the unknown outcome {str(outcome)[:80]!r}"
    elif kind == CHECKED:
        error = message.get("error")
        if keys == _CHECKED_KEYS and _is_id(message["id"]) and (
            error is None or (
                isinstance(error, list) and len(error) == 3 and isinstance(error[0], str)
                and _is_int(error[1]) and _is_int(error[2])
            )
        ):
            return None
    elif kind == READY:
        if (keys == _READY_KEYS or (keys == _READY_WITH_REASON and _is_text(message["reason"]))) \
                and message["prelude"] in PRELUDE_WAYS:
            return None
    else:
        return f"a message of the unknown type {str(kind)[:80]!r}"
    return f"a malformed {kind!r} message"


def parse_message(
    line: bytes | bytearray, services: Collection[str]
) -> tuple[dict[str, Any] | None, str | None]:
    """One line from the child as a checked message, or what is wrong with it."""
    try:
        message = _DECODER.decode(line.decode("utf-8"))
    except RecursionError:
        return None, "a message nested too deeply"
    except ValueError:
        return None, "a line that is not JSON"
    if not isinstance(message, dict):
        return None, "a line that is not a JSON object"
    problem = check_shape(message, services)
    return (message, None) if problem is None else (None, problem)
