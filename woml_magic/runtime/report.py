"""What the kernel makes of a worker's report: the attempt's outcome, checked again, or
the ``crash`` of a worker that failed or broke the protocol (spec §3.2, §3.3, §4.5).

Nothing the child says is taken on trust: a result is parsed again here and its size
and depth checked, and an error line is mapped to the cell (``wrapper.cell_position``).
"""

from __future__ import annotations

import functools
from typing import Any, cast

from woml_magic.limits import JSONLimitError, loads_limited
from woml_magic.outcomes import CRASH, INVALID_JSON, OVERSIZED, SUCCEEDED

from .attempt import AttemptRequest, AttemptResult
from .protocol import FailedMessage, SucceededMessage
from .transport import EXITED, VIOLATION, died
from .wrapper import cell_position

#: The event of a ``services.*`` call the kernel could not answer (see bridge.py).
BRIDGE_FAILED = "bridge-failed"
#: The inbox events that end an attempt ``crash`` (``failure``).
FAILURES = frozenset((EXITED, VIOLATION, BRIDGE_FAILED))


def attempt_result(message: dict[str, Any], request: AttemptRequest) -> AttemptResult:
    """The attempt's outcome from the child's ``done`` message (spec §3.2, §3.3)."""
    if message["outcome"] == SUCCEEDED:
        return _succeeded(cast(SucceededMessage, message)["result"], request)
    failed = cast(FailedMessage, message)
    js_line = failed["line"]
    line = None
    if isinstance(js_line, int):
        line = _cell_line(js_line, request.script, request.script_line, request.script_column)
    return AttemptResult(
        failed["outcome"],
        error_name=failed["name"],
        error_message=failed["message"],
        error_line=line,
    )


@functools.lru_cache(maxsize=256)
def _cell_line(js_line: int, script: str, script_line: int, script_column: int) -> int:
    """The cell line of an error on ``js_line`` (``wrapper.cell_position``): once per
    script and line, not once per attempt (a lab's clients throw from the same line)."""
    return cell_position(js_line, 1, script, script_line, script_column)[0]


def _succeeded(text: str, request: AttemptRequest) -> AttemptResult:
    """A reported result, its size and depth checked again (spec §3.3, §4.5)."""
    limit = request.limits.max_result_bytes
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        return AttemptResult(
            OVERSIZED, error_name="RangeError",
            error_message=f"the result's JSON text is {size} bytes; the limit is "
                          f"{limit} bytes",
        )
    try:
        value = loads_limited(text, max_depth=request.limits.max_json_depth, what="result")
    except JSONLimitError as error:
        return AttemptResult(INVALID_JSON, error_name="TypeError", error_message=str(error))
    except ValueError as error:
        return AttemptResult(INVALID_JSON, error_name="TypeError",
                             error_message=f"the result is not JSON: {error}")
    return AttemptResult(SUCCEEDED, result=value)


def failure(event: dict[str, Any]) -> AttemptResult:
    """The ``crash`` of an attempt whose worker exited, broke the protocol or could not
    be answered (one of ``FAILURES``)."""
    kind = event.get("type")
    if kind == EXITED:
        return AttemptResult(CRASH, error_name="WorkerDied",
                             error_message=died(event.get("returncode")))
    if kind == VIOLATION:
        return protocol_fault(str(event["problem"]))
    # bridge-failed: the child waits for a reply that will never come.
    return AttemptResult(CRASH, error_name="ServiceBridgeError",
                         error_message=str(event["message"]))


def protocol_fault(problem: str) -> AttemptResult:
    """A worker that broke the protocol: the attempt ends ``crash`` (spec §4.5)."""
    return AttemptResult(
        CRASH,
        error_name="WorkerProtocolError",
        error_message=f"the script worker sent {problem}; the attempt fails closed and "
                      "the worker was replaced",
    )


def unexpected(message: dict[str, Any]) -> str:
    """A message or event nobody was waiting for, in words."""
    kind = message.get("type")
    if kind == EXITED:
        return "its exit"
    if kind == VIOLATION:
        return str(message.get("problem"))
    return f"an unexpected {str(kind)[:40]!r} message (id {str(message.get('id'))[:40]})"
