"""The timeline as a plain-text table, for terminals and ``text/plain`` (spec §6.3).

One block per step: id and status, the policy in words, the idempotency key in full;
then one row per attempt (number, outcome, start and end on the run's clock,
explanation, error with its cell line), the waits between them ("wait 2s") and, while
the run goes on, the attempts still planned.
"""

from __future__ import annotations

from ..model import Attempt, Call, Run
from ..policy import format_duration
from ._layout import Segment, compute_layout, error_text, seconds

_MAX_FIELD = 200
_MAX_LOG_LINES = 3


def one_line(text: str, limit: int = _MAX_FIELD) -> str:
    """``text`` on one line, at most ``limit`` characters (a table cell must not wrap)."""
    flat = " ⏎ ".join(text.splitlines()) if "\n" in text or "\r" in text else text
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def call_text(call: Call) -> str:
    """A call in one line: method, URL, status or outcome, key header, replayed (spec §4.3)."""
    result = str(call.status) if call.status is not None else call.outcome
    parts = [f"{call.method} {one_line(call.url)} → {result}"]
    if call.idempotency_header:
        parts.append(f"{call.idempotency_header}: {call.idempotency_value or ''}")
    else:
        parts.append("no idempotency key")
    if call.replayed:
        parts.append("reattached (replayed from the journal)")
    if call.name:
        parts.append(f"name {call.name}")
    return " · ".join(parts)


def _attempt_row(seg: Segment, attempt: Attempt | None) -> list[str]:
    if attempt is None:
        return [f"  {seg.number:<3} {'planned':<13} {'':<19} not yet run"]
    end = "…" if attempt.ended_at is None else seconds(attempt.ended_at)
    words = [one_line(attempt.explanation)] if attempt.explanation else []
    if attempt.error is not None:
        e = attempt.error
        words.append(one_line(error_text(e.name, e.message, e.line)))
    rows = [
        f"  {seg.number:<3} {seg.outcome:<13} {seconds(attempt.started_at):<9} {end:<9} "
        f"{' · '.join(words)}".rstrip()
    ]
    rows.extend(f"      call  {call_text(c)}" for c in attempt.calls)
    rows.extend(f"      log   {one_line(line)}" for line in attempt.logs[:_MAX_LOG_LINES])
    if len(attempt.logs) > _MAX_LOG_LINES:
        rows.append(f"      log   … {len(attempt.logs) - _MAX_LOG_LINES} more lines")
    return rows


def render_text(run: Run) -> str:
    """The plain-text timeline of ``run`` (spec §6.3)."""
    layout = compute_layout(run)
    out = [
        f"workflow {layout.workflow_id} · run {layout.run_id} · {layout.clock} clock · "
        f"{layout.status} · t = {seconds(layout.now)}"
    ]
    out.extend(f"resumed at {seconds(t)}" for t in layout.resumes)
    for lane in layout.lanes:
        sr = run.steps[lane.step_id]
        out += [
            "",
            f"step {lane.step_id} · {lane.status_words}",
            f"  policy  {lane.policy}",
            f"  key     {lane.key}",
        ]
        if not lane.segments:
            continue
        out.append(f"  {'#':<3} {'outcome':<13} {'start':<9} {'end':<9} explanation · error")
        for seg in lane.segments:
            if seg.kind in ("wait", "planned-wait"):
                if seg.left is not None:
                    total = format_duration(seg.end - seg.start)
                    out.append(f"      wait {total}, {seg.left:.1f}s left (waiting now)")
                else:
                    planned = " (planned)" if seg.kind == "planned-wait" else ""
                    out.append(f"      {seg.label}{planned}")
            else:
                attempt = None if seg.kind == "planned" else sr.attempt(seg.number)
                out.extend(_attempt_row(seg, attempt))
    return "\n".join(out)
