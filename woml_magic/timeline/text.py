"""The timeline as plain text, for terminals and ``text/plain`` (spec §6.3).

One block per step: id and status, the policy in words, the idempotency key in full;
then one row per attempt (number, outcome, start and end on the run's clock) followed
by its explanation and error with the cell line, its HTTP calls with the server's
verdict (and "injected: …" for a call whose fault was injected, spec §10.2) and the
first lines of its console output; the waits between attempts ("wait 2s") and, while
the run goes on, the attempts still planned. A step that made HTTP calls ends with its
key lineage (spec §10.3, ``lineage_text``): what the server did with each request that
carried the step's key, and the requests that carried none.

Long text wraps at ``WIDTH`` columns with a hanging indent instead of being cut, so an
explanation is always read whole; only very long untrusted text (an error message, a
log line, a URL) is bounded, at ``MAX_FIELD`` characters with a note of how much was
left out. Everything printed passes through ``clean``: terminal control characters
(ESC, BEL, backspace, carriage return, C1 controls, bidirectional overrides) are shown
as harmless text, so script output can never drive the user's terminal.
"""

from __future__ import annotations

import textwrap

from ..model import Attempt, Call, Run
from .axis import format_time
from .faults import fault_words, injected_of
from .lanes import Segment
from .layout import compute_layout, leading_lanes, left_out
from .lineage import KeyUse, StepLineage, step_lineage
from .markup import visible
from .verdicts import call_verdict, error_text

WIDTH = 100
MAX_FIELD = 4000
_MAX_LOG_LINES = 3
_ROW = "  {n:<3} {outcome:<13} {start:<9} {end:<9} "
_ROW_INDENT = " " * len(_ROW.format(n="", outcome="", start="", end=""))
_SUB = "      {what:<5} "
_SUB_INDENT = " " * len(_SUB.format(what=""))


def clean(text: str) -> str:
    """``text`` on one line and safe to print: line breaks become `` ⏎ ``, tabs a
    space, and control and format characters visible text (``ESC`` → ``^[``, U+202E →
    ``⟨U+202E⟩``: ``markup.visible``, as the HTML has them)."""
    flat = " ⏎ ".join(text.splitlines()) if ("\n" in text or "\r" in text) else text
    return visible(flat.replace("\t", " "))


def bounded(text: str, limit: int = MAX_FIELD) -> str:
    """``text`` cleaned and at most ``limit`` characters, with a note of what was cut."""
    flat = clean(text)
    if len(flat) <= limit:
        return flat
    return f"{flat[:limit]}… ({len(flat) - limit} more characters)"


def wrap(first: str, text: str, indent: str) -> list[str]:
    """``first`` then ``text`` wrapped at ``WIDTH`` columns, later lines at ``indent``."""
    return textwrap.wrap(
        text,
        width=WIDTH,
        initial_indent=first,
        subsequent_indent=indent,
        break_on_hyphens=False,
        drop_whitespace=True,
    ) or [first.rstrip()]


def call_text(call: Call) -> list[str]:
    """A call: method, URL, status or outcome, the server's verdict, the faults injected
    into it (spec §10.2), its name; then the idempotency header sent (spec §4.3, §6.3)."""
    result = str(call.status) if call.status is not None else call.outcome
    head = [f"{call.method} {bounded(call.url)} → {result}", call_verdict(call)]
    injected = injected_of(call)
    if injected is not None:
        head.append(f"injected: {clean(fault_words(injected))}")
    if call.name:
        head.append(f"name {clean(call.name)}")
    if call.error and call.status is None:
        head.append(bounded(call.error))
    lines = wrap(_SUB.format(what="call"), " · ".join(head), _SUB_INDENT)
    if call.idempotency_header:
        key = f"{clean(call.idempotency_header)}: {clean(call.idempotency_value or '')}"
    else:
        key = "no idempotency key sent"
    lines += wrap(_SUB_INDENT, key, _SUB_INDENT)
    return lines


def _attempt_rows(seg: Segment, attempt: Attempt | None) -> list[str]:
    if attempt is None:
        at = format_time(seg.start)
        return [_ROW.format(n=seg.number, outcome="planned", start=at, end="") + "not yet run"]
    end = "…" if attempt.ended_at is None else format_time(attempt.ended_at)
    first = _ROW.format(
        n=seg.number, outcome=seg.outcome, start=format_time(attempt.started_at), end=end
    )
    rows = wrap(first, bounded(attempt.explanation), _ROW_INDENT)
    if attempt.error is not None:
        e = attempt.error
        text = error_text(bounded(e.name, 200), bounded(e.message), e.line)
        if attempt.explanation:
            rows += wrap(_ROW_INDENT, text, _ROW_INDENT)
        else:
            rows = wrap(first, text, _ROW_INDENT)
    for c in attempt.calls:
        rows += call_text(c)
    for line in attempt.logs[:_MAX_LOG_LINES]:
        rows += wrap(_SUB.format(what="log"), bounded(line), _SUB_INDENT)
    if len(attempt.logs) > _MAX_LOG_LINES:
        rows.append(f"{_SUB.format(what='log')}… {len(attempt.logs) - _MAX_LOG_LINES} more lines")
    return rows


_LINEAGE = "  {what:<11} "
_LINEAGE_ROW = "    "
_LINEAGE_INDENT = " " * len(_LINEAGE.format(what=""))


def _use_text(use: KeyUse) -> list[str]:
    status = "" if use.status is None else f"{use.status} "
    name = f"{clean(use.name)} " if use.name else ""
    head = f"#{use.attempt} {name}{use.method} {bounded(use.url)} → {status}{use.words}"
    return wrap(_LINEAGE_ROW, f"{head} · {bounded(use.reason)}", _LINEAGE_INDENT)


def lineage_text(lin: StepLineage) -> list[str]:
    """A step's key lineage in a few lines (spec §10.3): the summary, one line per
    request that carried the key (attempt, call name, method, URL, status, the
    server's verdict, why), the requests that carried no key or another one, and
    warnings; cleaned for a terminal."""
    out = wrap(_LINEAGE.format(what="key lineage"), lin.summary(), _LINEAGE_INDENT)
    for use in lin.uses:
        out += _use_text(use)
    for what, line, uses in (
        ("no key", lin.unkeyed_summary(), lin.unkeyed),
        ("other key", lin.other_summary(), lin.other_keys),
    ):
        if line is not None:
            out += wrap(_LINEAGE.format(what=what), line, _LINEAGE_INDENT)
            for use in uses:
                out += _use_text(use)
    for warning in lin.warnings():
        out += wrap(_LINEAGE.format(what="warning"), warning, _LINEAGE_INDENT)
    return [clean(line) for line in out]


def render_text(run: Run, *, max_attempts: int | None = None) -> str:
    """The plain-text timeline of ``run`` (spec §6.3).

    With ``max_attempts`` (a saved output's ``text/plain``: ``layout.SHOWN_ATTEMPTS``)
    a big run shows its leading steps up to that many attempts, then a line naming
    what was left out and where the whole text is (``Run.to_text``)."""
    layout = compute_layout(run)
    lanes = layout.lanes
    shown = len(lanes) if max_attempts is None else leading_lanes(lanes, max_attempts)
    out = [
        f"workflow {layout.workflow_id} · run {layout.run_id} · {layout.clock} clock · "
        f"{layout.status} · t = {format_time(layout.now)}"
    ]
    out.extend(f"resumed at {format_time(t)}" for t in layout.resumes)
    for lane in lanes[:shown]:
        sr = run.steps[lane.step_id]
        out += [
            "",
            f"step {lane.step_id} · {lane.status_words}"
            + ("" if lane.count is None else f" · {lane.count}"),
            f"  policy  {lane.policy}",
            f"  key     {lane.key}",
        ]
        if not lane.segments:
            if lane.note is not None:
                out.append(f"  {lane.note}")
            continue
        out.append(f"  {'#':<3} {'outcome':<13} {'start':<9} {'end':<9} explanation · error")
        for seg in lane.segments:
            if not seg.is_bar:
                if seg.left is not None:
                    total = format_time(seg.end - seg.start)
                    out.append(f"      wait {total}, {seg.left:.1f}s left (waiting now)")
                else:
                    planned = " (planned)" if seg.kind == "planned-wait" else ""
                    out.append(f"      {seg.label}{planned}")
            else:
                attempt = None if seg.kind == "planned" else sr.attempt(seg.number)
                out.extend(_attempt_rows(seg, attempt))
        if any(a.calls for a in sr.attempts):
            out.extend(lineage_text(step_lineage(run, lane.step_id)))
    if shown < len(lanes):
        rest = (
            f"… and {left_out(lanes[shown:])} are left out of this text: run.to_text() has"
            " them all (%%woml --out NAME keeps the run in NAME)."
        )
        out += ["", *wrap("", rest, "  ")]
    # Step ids, run ids and policy words come from the document: clean them too.
    return "\n".join(clean(line) for line in out)
