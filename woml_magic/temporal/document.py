"""A parsed WOML document as plain data, for Temporal payloads (spec §9).

The workflow and its activities get the document as the kernel parsed it — with the
cell's line numbers and the magic's default timeout — not as text to parse again, so
scripts' error lines, timeouts and the fingerprint are the kernel's exactly.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..model import Step, Workflow
from ..policy import RetryPolicy


def to_data(workflow: Workflow) -> dict[str, Any]:
    """``workflow`` as JSON-able data (``from_data`` inverts it)."""
    return {
        "id": workflow.id,
        "source": workflow.source,
        "line_offset": workflow.line_offset,
        "steps": [
            {
                "id": s.id,
                "script": s.script,
                "timeout_s": s.timeout.total_seconds(),
                "line": s.line,
                "script_line": s.script_line,
                "script_column": s.script_column,
                "attempts": s.policy.attempts,
                "backoff": s.policy.backoff,
                "delay_s": s.policy.delay.total_seconds(),
                "max_delay_s": None if s.policy.max_delay is None
                else s.policy.max_delay.total_seconds(),
            }
            for s in workflow.steps
        ],
    }


def from_data(data: dict[str, Any]) -> Workflow:
    """The ``Workflow`` ``to_data`` described."""
    steps = tuple(
        Step(
            id=s["id"],
            script=s["script"],
            timeout=timedelta(seconds=s["timeout_s"]),
            line=s["line"],
            script_line=s["script_line"],
            script_column=s["script_column"],
            policy=RetryPolicy(
                attempts=s["attempts"],
                backoff=s["backoff"],
                delay=timedelta(seconds=s["delay_s"]),
                max_delay=None if s["max_delay_s"] is None
                else timedelta(seconds=s["max_delay_s"]),
            ),
        )
        for s in data["steps"]
    )
    return Workflow(id=data["id"], steps=steps, source=data["source"],
                    line_offset=data["line_offset"])
