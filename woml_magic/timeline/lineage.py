"""A step's key lineage: every request that carried its idempotency key and what the
server did with it (spec §10.3, §3.5, §4.1–§4.3, §8).

``step_lineage(run, step_id)`` reads the step's calls, attempt by attempt in the order
they started, and sorts them three ways: the requests that carried the step's key
(``uses``, also ``lineage(run, step_id)``), the ones that carried no key (``unkeyed``:
they matter, a repeated unkeyed ``POST`` can duplicate its effect) and the ones that
carried another key or a hidden one (``other_keys``). Each is a ``KeyUse`` with the
server's verdict and a short reason:

- ``executed`` — a non-error answer that is not a replay: the server acted;
- ``replayed`` — the answer carried ``Idempotent-Replayed: true`` (any case), or is a
  2xx whose body is identical to the first executed answer for the key: the server
  returned its stored response and did not act again;
- ``rejected-409`` — the key was still in flight (a request with it was being
  processed); ``rejected-422`` — the key was reused with a different body;
  ``rejected-400`` — the key was missing (or refused as malformed);
- ``error`` — any other error answer (a 503, a 404, a 400 that judged the body): not a
  verdict on the key;
- ``no-answer`` — no answer arrived: effect unknown (ambiguous), not delivered (network
  error), still in flight, or not sent because a fault was injected (spec §10.2);
- ``reattached`` — not sent: WOML returned the journaled 2xx answer of a named call
  (spec §4.3).

A request with no answer is re-read in the light of later ones: if a later request
with the key was replayed or refused as reused, the server had stored the key, so the
lost one executed. ``ledger_line`` says what a server's ledger shows (``DemoAPI.records``,
spec §8): "1 charge recorded", "2 charges recorded: a duplicate".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..events import JSON
from ..model import Call, Run
from ..outcomes import AMBIGUOUS, NETWORK_ERROR, RESPONSE, RUNNING
from ..redaction import REDACTED
from .faults import DISCARDING_FAULTS, NOT_SENT_FAULTS, fault_kinds, fault_words, injected_of
from .verdicts import server_replayed

KeyVerdict = Literal[
    "executed",
    "replayed",
    "rejected-409",
    "rejected-422",
    "rejected-400",
    "error",
    "no-answer",
    "reattached",
]

#: Each verdict in words, as the details panel and the text timeline say it.
VERDICT_WORDS: dict[KeyVerdict, str] = {
    "executed": "executed",
    "replayed": "replayed",
    "rejected-409": "rejected 409 (in flight)",
    "rejected-422": "rejected (key reused with a different body)",
    "rejected-400": "rejected 400 (key missing)",
    "error": "error answer",
    "no-answer": "no answer",
    "reattached": "reattached (not sent)",
}

#: Each verdict in the summary's counts ("2 errors, 1 executed"), one and several.
_SHORT: dict[str, str] = {
    "rejected-409": "rejected 409",
    "rejected-422": "rejected as reused",
    "rejected-400": "rejected 400",
    "no-answer": "no answer",
}
_SHORTS: dict[str, str] = {**_SHORT, "error": "errors"}

#: Methods that are not idempotent by HTTP's own rules (RFC 9110 §9.2.2): repeating
#: one without a key can do its effect twice.
UNSAFE_METHODS = frozenset({"POST", "PATCH"})

#: A record's own fields, which differ between two otherwise identical records.
RECORD_IDENTITY_FIELDS = frozenset({"id", "object", "created"})

_REASON_CHARS = 160

@dataclass(frozen=True)
class KeyUse:
    """One request of a step and the server's verdict on it (spec §10.3).

    ``attempt`` is the attempt's number and ``index`` the call's place in it (in the
    order the calls started); ``key`` is the idempotency value sent (``None``: no key);
    ``status`` the answer's status, if any (a reattached call's is the journaled one);
    ``injected`` the fault injected into it, if any (spec §10.2).
    """

    attempt: int
    index: int
    name: str | None
    method: str
    url: str
    status: int | None
    verdict: KeyVerdict
    reason: str
    key: str | None = None
    injected: str | None = None

    @property
    def words(self) -> str:
        """The verdict in words ("rejected 409 (in flight)")."""
        return VERDICT_WORDS[self.verdict]


@dataclass(frozen=True)
class StepLineage:
    """A step's requests, sorted by the key they carried (spec §10.3).

    ``uses``: the requests that carried the step's key ``key``; ``unkeyed``: the ones
    that carried none; ``other_keys``: the ones that carried another key, or one whose
    value is hidden because its header is configured as sensitive.
    """

    step_id: str
    key: str
    uses: tuple[KeyUse, ...]
    unkeyed: tuple[KeyUse, ...]
    other_keys: tuple[KeyUse, ...]

    @property
    def requests(self) -> int:
        """How many requests the step's attempts made, reattached ones included."""
        return len(self.uses) + len(self.unkeyed) + len(self.other_keys)

    def summary(self) -> str:
        """One line: how many requests carried the key and their verdicts, e.g. "2
        requests carried the key: 1 no answer, 1 replayed"."""
        n = len(self.uses)
        if not n:
            return "no request carried the key"
        counts = Counter(u.verdict for u in self.uses)  # in the order first seen
        parts = [f"{k} {_SHORT.get(v, v) if k == 1 else _SHORTS.get(v, v)}"
                 for v, k in counts.items()]
        return f"{_count(n, 'request')} carried the key: {', '.join(parts)}"

    def unkeyed_summary(self) -> str | None:
        """"2 requests carried no key", and why that matters for a ``POST`` or ``PATCH``
        (a repeat can duplicate its effect); ``None`` when every request had a key."""
        if not self.unkeyed:
            return None
        line = f"{_count(len(self.unkeyed), 'request')} carried no key"
        unsafe = sorted({u.method.upper() for u in self.unkeyed} & UNSAFE_METHODS)
        if unsafe:
            line += f" (a repeated unkeyed {' or '.join(unsafe)} can duplicate its effect)"
        return line

    def other_summary(self) -> str | None:
        """"1 request carried another key" (or a hidden one), or ``None``."""
        if not self.other_keys:
            return None
        return f"{_count(len(self.other_keys), 'request')} carried another key"

    def warnings(self) -> list[str]:
        """What the lineage warns about: the key executed more than once (the server did
        not replay it, so the effect may have happened twice)."""
        executed = sum(1 for u in self.uses if u.verdict == "executed")
        if executed < 2:
            return []
        return [
            f"the key was executed {executed} times: the server did not replay it (it may "
            "not honour keys, or the key expired), so the effect may be duplicated"
        ]


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def step_lineage(run: Run, step_id: str) -> StepLineage:
    """The key lineage of step ``step_id`` of ``run`` (spec §10.3): every request of its
    attempts, sorted by the key it carried, each with the server's verdict."""
    sr = run.steps[step_id]
    key = sr.idempotency_key
    calls = [
        (a.number, i, c)
        for a in sorted(sr.attempts, key=lambda a: a.number)
        for i, c in enumerate(a.calls)
    ]
    keyed = [(n, i, c) for n, i, c in calls if c.idempotency_header and c.idempotency_value == key]
    unkeyed = [(n, i, c) for n, i, c in calls if not c.idempotency_header]
    others = [
        (n, i, c)
        for n, i, c in calls
        if c.idempotency_header and c.idempotency_value != key
    ]
    return StepLineage(
        step_id=step_id,
        key=key,
        uses=tuple(_judge_keyed(keyed)),
        unkeyed=tuple(_use(n, i, c, *_verdict(c, keyed=False)) for n, i, c in unkeyed),
        other_keys=tuple(_other(n, i, c) for n, i, c in others),
    )


def lineage(run: Run, step_id: str) -> list[KeyUse]:
    """Every request of step ``step_id``'s attempts that carried the step's key, in the
    order they started, with the server's verdict (spec §10.3)."""
    return list(step_lineage(run, step_id).uses)


def _use(number: int, index: int, call: Call, verdict: KeyVerdict, reason: str) -> KeyUse:
    injected = injected_of(call)
    if injected is not None:
        reason = f"{reason} (injected: {fault_words(injected)})"
    return KeyUse(
        attempt=number,
        index=index,
        name=call.name,
        method=call.method,
        url=call.url,
        status=call.status,
        verdict=verdict,
        reason=reason,
        key=call.idempotency_value if call.idempotency_header else None,
        injected=injected,
    )


def _other(number: int, index: int, call: Call) -> KeyUse:
    verdict, reason = _verdict(call, keyed=True)
    if call.idempotency_value == REDACTED:
        reason = f"the key's value is hidden (its header is configured as sensitive); {reason}"
    else:
        reason = f"another key; {reason}"
    return _use(number, index, call, verdict, reason)


def _judge_keyed(calls: Sequence[tuple[int, int, Call]]) -> Iterable[KeyUse]:
    """The verdicts of the requests that carried one key, each read against the ones
    before it (a 2xx body identical to the first executed one is a replay) and the
    ones after it (``_in_hindsight``)."""
    judged: list[tuple[int, int, Call, KeyVerdict, str]] = []
    first_body: JSON = None
    first_at: str | None = None
    for n, i, call in calls:
        verdict, reason = _verdict(call, keyed=True)
        if verdict == "executed" and _is_2xx(call.status):
            data = _data(call)
            if first_at is not None and data not in (None, "") and data == first_body:
                verdict = "replayed"
                reason = f"its body is identical to the first executed answer ({first_at})"
            elif first_at is None:
                first_body, first_at = data, f"attempt {n}"
        judged.append((n, i, call, verdict, reason))
    for pos, (n, i, call, verdict, reason) in enumerate(judged):
        yield _use(n, i, call, verdict, _in_hindsight(judged, pos, reason))


#: Later verdicts that show the server had stored a request with the key, and in words.
_KEY_KNOWN: dict[KeyVerdict, str] = {
    "replayed": "was replayed",
    "rejected-422": "was refused as reused",
    "rejected-409": "was refused as in flight",
}


def _in_hindsight(
    judged: Sequence[tuple[int, int, Call, KeyVerdict, str]], pos: int, reason: str
) -> str:
    """``reason`` for the request at ``pos``, with what later requests tell about it: a
    request that got no answer, followed (before anything executed) by one the server
    replayed or refused as reused or in flight, had reached the server and executed; an
    error answer followed by an execution was not stored under the key."""
    call, verdict = judged[pos][2], judged[pos][3]
    if verdict == "error":
        after = next((judged[j][3] for j in range(pos + 1, len(judged))), None)
        if after == "executed":
            return f"{reason}; the next request with the key executed afresh: this was not stored"
        return reason
    if verdict != "no-answer" or call.outcome != AMBIGUOUS or _not_sent(call):
        return reason
    evidence = next((j for j in range(pos + 1, len(judged)) if judged[j][3] in _KEY_KNOWN), None)
    if evidence is None or any(judged[j][3] == "executed" for j in range(evidence)):
        return reason
    lost = [
        j for j in range(evidence)
        if judged[j][3] == "no-answer" and judged[j][2].outcome == AMBIGUOUS
        and not _not_sent(judged[j][2])
    ]
    later = f"a later request with the key {_KEY_KNOWN[judged[evidence][3]]}"
    if len(lost) == 1:
        return f"{reason}; {later}, so the server executed this one and its answer was lost"
    return f"{reason}; {later}: one of the {len(lost)} unanswered requests before it executed"


def _is_2xx(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


def _data(call: Call) -> JSON:
    response = call.response
    return response.get("data") if isinstance(response, dict) else None


def _header(call: Call, name: str) -> str | None:
    response = call.response
    headers = response.get("headers") if isinstance(response, dict) else None
    if not isinstance(headers, dict):
        return None
    for k, v in headers.items():
        if str(k).lower() == name:
            return str(v)
    return None


def _not_sent(call: Call) -> bool:
    injected = injected_of(call)
    return injected is not None and any(
        kind.startswith(NOT_SENT_FAULTS) for kind in fault_kinds(injected)
    )


def _answer_discarded(call: Call) -> bool:
    """Whether a fault sent ``call``, read its answer and then dropped it (spec §10.2)."""
    injected = injected_of(call)
    return injected is not None and any(
        kind in DISCARDING_FAULTS for kind in fault_kinds(injected)
    )


def _problem(call: Call) -> str:
    """The server's own words for an error answer: a problem's ``detail`` or ``title``
    (RFC 9457), or a ``message``/``error`` string, cut short."""
    data = _error_object(call)
    if data:
        for field in ("detail", "title", "message", "error"):
            value = data.get(field)
            if isinstance(value, str) and value.strip():
                text = " ".join(value.split())
                return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS] + "…"
    return ""


def _error_object(call: Call) -> dict[str, Any]:
    """The answer's problem fields: RFC 9457 at the top level, or nested under
    ``error`` as the payment-API family answers (``{"error": {"type", "message"}}``)."""
    data = _data(call)
    if not isinstance(data, dict):
        return {}
    nested = data.get("error")
    return nested if isinstance(nested, dict) else data


def _about_the_key(call: Call) -> bool:
    """Whether an error answer is about the idempotency key (its problem says so)."""
    problem = _error_object(call)
    text = " ".join(str(problem.get(f, "")) for f in ("type", "code", "title", "detail"))
    return "idempotency" in text.lower()


def _key_reused(call: Call) -> bool:
    """A 400 that says the key was used before with other parameters (the payment-API
    family's ``idempotency_error``; the demo API answers 422 for the same)."""
    return _error_object(call).get("type") == "idempotency_error"


def _with_words(reason: str, call: Call) -> str:
    words = _problem(call)
    return f"{reason}: “{words}”" if words else reason


def _verdict(call: Call, *, keyed: bool) -> tuple[KeyVerdict, str]:
    """What the server did with one request, judged alone, and why we say so."""
    if call.replayed:
        what = f"named call {call.name!r}" if call.name else "the call"
        return "reattached", f"not sent: the journaled 2xx answer of {what} was returned"
    if _not_sent(call):
        return "no-answer", "not sent: the fault was injected before sending"
    if call.outcome == RUNNING:
        return "no-answer", "in flight: no answer yet"
    if call.outcome == NETWORK_ERROR:
        return "no-answer", "not delivered (network error): nothing reached the server"
    if call.outcome != RESPONSE or call.status is None:
        if _answer_discarded(call):
            return "no-answer", (
                "sent and answered, but the injected fault discarded the answer: to the "
                "script its effect is unknown (ambiguous)"
            )
        return "no-answer", "effect unknown (ambiguous): the request may have reached the server"
    status = call.status
    if server_replayed(call):
        return "replayed", "answered Idempotent-Replayed: true: its stored answer, not run again"
    if keyed and status == 409:
        retry = _header(call, "retry-after")
        after = f" (Retry-After: {retry})" if retry else ""
        return "rejected-409", _with_words(
            f"a request with the key was still in flight{after}", call
        )
    if keyed and (status == 422 or (status == 400 and _key_reused(call))):
        return "rejected-422", _with_words(
            f"the key was reused with a different body (answered {status})", call)
    if status == 400 and _about_the_key(call):
        if keyed:
            return "rejected-400", _with_words("the server refused the key", call)
        return "rejected-400", _with_words("the server requires a key and none was sent", call)
    if status >= 400:
        return "error", _with_words("not a verdict on the key", call)
    if not keyed:
        return "executed", f"answered {status}: the server acted; nothing stops a repeat"
    return "executed", f"answered {status}: the server acted on the key"


def ledger_line(
    records: Sequence[object], noun: str = "charge", *, plural: str | None = None
) -> str:
    """What a server's ledger shows, in one line: "0 charges recorded", "1 charge
    recorded", "2 charges recorded: a duplicate", "3 charges recorded: 2 duplicates"
    (spec §8, §10.3; for ``DemoAPI.records("charges")``).

    A duplicate is a record alike an earlier one in everything but its own fields
    (``id``, ``object``, ``created``); ``plural`` defaults to ``noun + "s"``.
    """
    line = f"{_count(len(records), noun, plural)} recorded"
    seen = Counter(_record_fingerprint(r) for r in records)
    duplicates = sum(n - 1 for n in seen.values())
    if duplicates == 1:
        return f"{line}: a duplicate"
    if duplicates > 1:
        return f"{line}: {duplicates} duplicates"
    return line


def _record_fingerprint(record: object) -> str:
    if isinstance(record, dict):
        record = {k: v for k, v in record.items() if k not in RECORD_IDENTITY_FIELDS}
    return json.dumps(record, sort_keys=True, default=repr)
