"""The kernel's commands for one attempt, as sent to the worker process (spec §3.4,
§3.6, §4.5): its ``run`` line, the fields every attempt of a step shares encoded once,
and the answer to a ``context.steps`` read."""

from __future__ import annotations

import functools
import json

from woml_magic.limits import Limits
from woml_magic.services.registry import SERVICE_NAMES

from .attempt import AttemptRequest, StepResults, encode
from .protocol import RunAttempt, RunStep, StepCommand, encode_line
from .protocol import run_line as protocol_run_line


def run_line(request: AttemptRequest, attempt_id: int) -> bytes:
    """The ``run`` command of one attempt, as the line sent to the child."""
    context = request.context
    payload = request.payload_text
    if payload is None:
        payload = encode(context.get("payload"))
    rest = {key: value for key, value in context.items() if key not in ("payload", "steps")}
    return protocol_run_line(RunAttempt(
        op="run",
        id=attempt_id,
        payload=payload,
        context=rest,
        stepCount=len(context.get("steps") or ()),
        attempt=request.attempt,
        nowMs=request.now_ms(),
    ), _step_fields(request.script, request.limits, request.secret_names))


@functools.lru_cache(maxsize=256)
def _step_fields(script: str, limits: Limits, secret_names: tuple[str, ...]) -> bytes:
    """The fields of a ``run`` command every attempt of a step shares, encoded once."""
    return encode_line(RunStep(
        script=script,
        memoryLimit=limits.memory_limit_bytes,
        maxResultBytes=limits.max_result_bytes,
        maxLogLines=limits.max_log_lines,
        maxLogBytes=limits.max_log_bytes,
        maxArgsBytes=limits.max_call_args_bytes,
        maxDepth=limits.max_json_depth,
        services=list(SERVICE_NAMES),
        secrets=list(secret_names),
    ))


def step_reply(request: AttemptRequest, attempt_id: int, name: str) -> StepCommand:
    """The answer to a ``context.steps`` read of step ``name``, or of all of them for
    ``""`` (spec §3.6): a result's JSON text, ``""`` for none, or ``refused`` with the
    reason when the results cannot be given."""
    steps = request.context.get("steps") or {}
    reply = StepCommand(op="step", attempt=attempt_id, text="", refused=None)
    if name:
        if isinstance(steps, StepResults):
            reply["text"] = steps.text(name) or ""
        elif name in steps:
            reply["text"] = encode(steps[name])
        return reply
    texts = steps.texts() if isinstance(steps, StepResults) else \
        {key: encode(value) for key, value in steps.items()}
    size = sum(len(text) + len(key) + 4 for key, text in texts.items())
    if size > request.limits.memory_limit_bytes:
        reply["refused"] = (f"context.steps holds {size} bytes of results, more than the "
                            f"attempt's memory limit of {request.limits.memory_limit_bytes} bytes; "
                            "read the steps you need by name")
    else:
        reply["text"] = "{" + ",".join(f"{json.dumps(key)}:{text}"
                                       for key, text in texts.items()) + "}"
    return reply
