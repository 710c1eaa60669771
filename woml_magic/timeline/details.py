"""The timeline's details panel: per step its words, per attempt what selecting it shows
(spec §6.3: outcome and explanation, error with the cell line, HTTP calls, console
output, a result preview).

It is ``div.woml-steps`` of the static page (see ``html``): a listing that reads
without JavaScript, one ``details.woml-attempt-details`` per attempt, which the
widget's script also opens when an attempt is selected, then, for a step that made
HTTP calls, its key lineage (spec §10.3, ``lineage``): ``div.woml-lineage``, a small
table of every request that carried the step's key and the server's verdict. A call
whose fault was injected (spec §10.2) says so in a ``span.woml-injected`` badge.

Each step also shows its retry policy in other engines (spec §11, ``policy_targets``):
``details.woml-policy-targets``, closed, with one ``div.woml-policy-target`` per target
(its name, whether its waits are WOML's, the waits, the snippet and the warnings). They
read one after another; the widget's script makes them tabs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable

from ..model import Attempt, Call, Run
from ..outcomes import SUCCEEDED
from ..policy import RetryPolicy
from ..policy_targets import Translation, translate_all
from .axis import format_time
from .faults import fault_words, injected_of
from .lanes import Lane
from .lineage import KeyUse, StepLineage, step_lineage
from .markup import esc
from .outcome_styles import outcome_style
from .verdicts import call_verdict, error_text

RESULT_PREVIEW_CHARS = 1000
LOG_LINES_SHOWN = 200


def result_preview(value: object, limit: int = RESULT_PREVIEW_CHARS) -> str:
    """The result as JSON, cut to ``limit`` characters with a note of what was cut."""
    text = json.dumps(value, ensure_ascii=False, indent=1, default=str)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def _call_row(call: Call) -> str:
    if call.status is not None:
        result = str(call.status)
    else:
        result = call.outcome + (f": {call.error}" if call.error else "")
    key = (
        f"{call.idempotency_header}: {call.idempotency_value or ''}"
        if call.idempotency_header
        else "none sent"
    )
    headers = "; ".join(f"{k}: {v}" for k, v in call.request_headers.items()) or "none"
    cells = [
        _td(esc(call.name or "(unnamed)")),
        _td(esc(call.method)),
        _td(esc(call.url), long=True),
        _td(esc(result), long=True),
        _td(esc(key), long=True),
        _td(esc(call_verdict(call)) + injected_badge(injected_of(call))),
        _td(esc(headers), long=True),
    ]
    return "<tr>" + "".join(cells) + "</tr>"


#: The HTTP table's column widths in percent: name, method, URL, status, idempotency
#: header, the server's verdict, headers (the URL and headers wrap; spec §6.3).
CALL_COLUMN_WIDTHS = (10, 7, 24, 7, 18, 16, 18)


def _td(markup: str, *, long: bool = False) -> str:
    """A table cell; ``long`` for long untrusted text that may break anywhere."""
    return f'<td class="woml-long">{markup}</td>' if long else f"<td>{markup}</td>"


def injected_badge(injected: str | None) -> str:
    """``span.woml-injected`` "injected: drop-response" (its whole description in the
    tooltip) after a call's verdict, or nothing (spec §10.2: the timeline marks injected
    faults as injected)."""
    if injected is None:
        return ""
    return (
        f' <span class="woml-injected" title="{esc(injected)}">'
        f"injected: {esc(fault_words(injected))}</span>"
    )


def attempt_details_html(step_id: str, attempt: Attempt) -> str:
    """What selecting an attempt shows (spec §6.3): outcome and explanation, the error
    with its cell line, HTTP calls (with the server's verdict), console output and a
    result preview."""
    style = outcome_style(attempt.outcome)
    end = "still running" if attempt.ended_at is None else format_time(attempt.ended_at)
    out = [
        '<div class="woml-details-body">',
        f"<p><strong>{esc(step_id)} · attempt {attempt.number} · {esc(style.label)}</strong>"
        f" · {esc(format_time(attempt.started_at))} → {esc(end)}</p>",
        f"<p>idempotency key <code>{esc(attempt.idempotency_key)}</code></p>",
    ]
    if attempt.explanation:
        out.append(f'<p class="woml-explanation">{esc(attempt.explanation)}</p>')
    if attempt.error is not None:
        e = attempt.error
        out.append(
            f'<p class="woml-error">error <code>{esc(error_text(e.name, e.message, e.line))}'
            "</code></p>"
        )
    if attempt.calls:
        head = (
            "name",
            "method",
            "URL",
            "status",
            "idempotency header sent",
            "server's verdict",
            "headers",
        )
        out.append(
            '<table class="woml-calls">'
            + columns(CALL_COLUMN_WIDTHS)
            + "<tr>"
            + "".join(f"<th>{h}</th>" for h in head)
            + "</tr>"
            + "".join(_call_row(c) for c in attempt.calls)
            + "</table>"
        )
    if attempt.logs:
        shown = attempt.logs[:LOG_LINES_SHOWN]
        more = len(attempt.logs) - len(shown)
        text = "\n".join(shown) + (f"\n… {more} more lines" if more else "")
        out.append(f'<p>console output</p><pre class="woml-logs">{esc(text)}</pre>')
    if attempt.outcome == SUCCEEDED:
        out.append(
            f'<p>result</p><pre class="woml-result">{esc(result_preview(attempt.result))}</pre>'
        )
    out.append("</div>")
    return "".join(out)


def step_details_html(
    run: Run,
    lane: Lane,
    shown: dict[RetryPolicy, str] | None = None,
    deferred: dict[str, str] | None = None,
) -> Iterable[str]:
    """One step's ``div.woml-step``: its status and policy in words, its full idempotency
    key (selectable), its policy in other engines, one ``details`` per attempt and the
    attempts still planned.

    ``shown`` maps each policy whose translations an earlier step of the page showed to
    that step: a step with the same policy refers to it (``policy_targets_html``)
    instead of repeating them; this step's policy is added if it is new. With
    ``deferred`` (a big saved timeline, see ``html``) the attempts' ``details`` go into
    it, under the step's id, and the page gets ``p.woml-attempt-lines[data-step]`` in
    their place: one line per attempt, their summaries, for readers without scripts."""
    sr = run.steps[lane.step_id]
    yield (
        f'<div class="woml-step" data-step="{esc(lane.ref)}">'
        f"<div><strong>{esc(lane.step_id)}</strong> · "
        f'<span class="woml-step-status">{esc(lane.status_words)}</span> · '
        f'<span class="woml-policy">{esc(lane.summary)}</span></div>'
        f'<div>idempotency key <code class="woml-key" style="user-select:all">'
        f"{esc(lane.key)}</code></div>"
    )
    policy = sr.step.policy
    first = shown.get(policy) if shown is not None else None
    if shown is not None and first is None:
        shown[policy] = lane.step_id
    yield policy_targets_html(lane.ref, policy, same_as=first)
    attempts, lines = [], []
    for a in sorted(sr.attempts, key=lambda a: a.number):
        label = outcome_style(a.outcome).label
        end = "…" if a.ended_at is None else format_time(a.ended_at)
        line = f"#{a.number} {esc(label)} · {esc(format_time(a.started_at))} → {esc(end)}"
        lines.append(line)
        attempts.append(
            f'<details class="woml-attempt-details woml-outcome-{esc(label)}"'
            f' data-step="{esc(lane.ref)}" data-n="{a.number}"><summary>{line}</summary>'
            f"{attempt_details_html(lane.step_id, a)}</details>"
        )
    if deferred is None or not attempts:
        yield from attempts
    else:
        deferred[lane.ref] = "".join(attempts)
        yield (
            f'<p class="woml-attempt-lines" data-step="{esc(lane.ref)}">'
            + "<br/>".join(lines)
            + "</p>"
        )
    planned = [s.number for s in lane.segments if s.kind == "planned"]
    if planned:
        yield f"<div>planned, not yet run: {', '.join(f'#{n}' for n in planned)}</div>"
    if any(a.calls for a in sr.attempts):
        yield lineage_html(dataclasses.replace(step_lineage(run, lane.step_id), step_id=lane.ref))
    yield "</div>"


#: How the details panel names the engines of ``policy_targets.TARGETS`` (spec §11).
TARGET_NAMES: dict[str, str] = {
    "temporal": "Temporal",
    "stepfunctions": "AWS Step Functions",
    "tenacity": "tenacity",
    "stamina": "stamina",
}


def policy_targets_html(step_id: str, policy: RetryPolicy, *, same_as: str | None = None) -> str:
    """A step's retry policy in other engines (spec §11): ``details.woml-policy-targets
    [data-step]``, summary "Retry policy in other engines", then per target of
    ``translate_all`` a ``div.woml-policy-target[data-target, data-same]`` (see
    ``target_html``).

    With ``same_as`` (an earlier step of the page with the same policy, whose box shows
    the translations) the box holds only ``p.woml-policy-same-as`` naming that step, and
    carries ``data-same-as``: a run of 1,000 steps of one policy says it once, not 1,000
    times (issue 21: the translations were most of a big timeline's bytes)."""
    head = (
        f'<details class="woml-policy-targets" data-step="{esc(step_id)}"'
        + ("" if same_as is None else f' data-same-as="{esc(same_as)}"')
        + "><summary>Retry policy in other engines</summary>"
    )
    if same_as is not None:
        return (
            f'{head}<p class="woml-policy-same-as">The same policy as step '
            f"<strong>{esc(same_as)}</strong>: its translations are shown there.</p></details>"
        )
    return head + "".join(target_html(t) for t in translate_all(policy).values()) + "</details>"


def target_html(t: Translation) -> str:
    """One target's ``div.woml-policy-target[data-target, data-same]``:
    ``p.woml-target-head`` (``strong.woml-target-name``, ``span.woml-same`` "same
    schedule" or ``span.woml-differs`` "differs", ``span.woml-target-waits``: the
    target's waits and, where they differ, WOML's), ``pre.woml-target-code > code``
    (the snippet) and ``ul.woml-target-warnings`` (one ``li`` per warning, if any)."""
    mark = (
        '<span class="woml-same">same schedule</span>'
        if t.same
        else ('<span class="woml-differs">differs</span>')
    )
    waits = _waits_words(t.delays) + (
        ", as WOML" if t.same else f"; WOML {_waits_words(t.woml_delays)}"
    )
    out = [
        f'<div class="woml-policy-target" data-target="{esc(t.target)}"'
        f' data-same="{"true" if t.same else "false"}">'
        f'<p class="woml-target-head"><strong class="woml-target-name">'
        f"{esc(TARGET_NAMES.get(t.target, t.target))}</strong> · {mark} · "
        f'<span class="woml-target-waits">{esc(waits)}</span></p>'
        f'<pre class="woml-target-code"><code>{esc(t.code)}</code></pre>'
    ]
    if t.warnings:
        out.append(
            '<ul class="woml-target-warnings">'
            + "".join(f"<li>{esc(w)}</li>" for w in t.warnings)
            + "</ul>"
        )
    out.append("</div>")
    return "".join(out)


def _waits_words(delays: tuple[float, ...]) -> str:
    """ "waits 1s, 2s, 4s" as the axis writes times, or "no retry"."""
    return "waits " + ", ".join(format_time(d) for d in delays) if delays else "no retry"


#: The key lineage table's columns (spec §10.3).
LINEAGE_HEAD = ("attempt", "call", "method", "URL", "status", "server's verdict", "why")
#: Their widths in percent (the URL and the why wrap; spec §6.3: fits any output).
LINEAGE_COLUMN_WIDTHS = (8, 10, 8, 26, 7, 16, 25)


def columns(widths: tuple[int, ...]) -> str:
    """A table's ``col`` elements: fixed widths in percent, so it fits its output."""
    return "".join(f'<col style="width:{w}%"/>' for w in widths)


def _lineage_row(step_id: str, use: KeyUse) -> str:
    status = "—" if use.status is None else str(use.status)
    cells = [
        _td(f"#{use.attempt}"),
        _td(esc(use.name or "(unnamed)")),
        _td(esc(use.method)),
        _td(esc(use.url), long=True),
        _td(status),
        _td(esc(use.words) + injected_badge(use.injected)),
        _td(esc(use.reason), long=True),
    ]
    return (
        f'<tr class="woml-lineage-row woml-verdict-{use.verdict}" data-step="{esc(step_id)}"'
        f' data-n="{use.attempt}" data-verdict="{use.verdict}">' + "".join(cells) + "</tr>"
    )


def _request_list(uses: Iterable[KeyUse]) -> str:
    return "; ".join(
        f"#{u.attempt} {u.method} {u.url} → "
        + ("" if u.status is None else f"{u.status} ")
        + f"{u.words}"
        + (f" (injected: {fault_words(u.injected)})" if u.injected else "")
        for u in uses
    )


def lineage_html(lin: StepLineage) -> str:
    """A step's ``div.woml-lineage[data-step]`` (spec §10.3): ``strong`` "Key lineage"
    and the summary of what the server did with the key, then
    ``table.woml-lineage-table`` (one ``tr.woml-lineage-row[data-step, data-n,
    data-verdict]`` per request that carried the key: attempt, call name, method, URL,
    status, the server's verdict, why), ``p.woml-lineage-unkeyed`` and
    ``p.woml-lineage-other`` for the requests that carried no key or another one,
    and ``p.woml-lineage-warning`` per warning."""
    out = [
        f'<div class="woml-lineage" data-step="{esc(lin.step_id)}">'
        f'<p class="woml-lineage-summary"><strong>Key lineage</strong> · '
        f"{esc(lin.summary())}</p>"
    ]
    if lin.uses:
        out.append(
            '<table class="woml-lineage-table">'
            + columns(LINEAGE_COLUMN_WIDTHS)
            + "<tr>"
            + "".join(f"<th>{h}</th>" for h in LINEAGE_HEAD)
            + "</tr>"
            + "".join(_lineage_row(lin.step_id, u) for u in lin.uses)
            + "</table>"
        )
    for cls, line, uses in (
        ("woml-lineage-unkeyed", lin.unkeyed_summary(), lin.unkeyed),
        ("woml-lineage-other", lin.other_summary(), lin.other_keys),
    ):
        if line is not None:
            out.append(f'<p class="{cls}">{esc(line)}: {esc(_request_list(uses))}</p>')
    out.extend(f'<p class="woml-lineage-warning">⚠ {esc(w)}</p>' for w in lin.warnings())
    out.append("</div>")
    return "".join(out)
