"""The linter's two rules and their messages (spec §3.5, §4.2, §4.3).

``per-attempt-key``
    an ``idempotency.value`` of a request (or an ``Idempotency-Key``-like entry of its
    ``headers``) is built from a construct that changes every attempt; the warning stands
    where that construct is written.
``unkeyed-post``
    a named call with method ``POST`` and no ``idempotency``: if its response is lost,
    the ambiguity guard (spec §4.2) fails the step closed.

A warning must be right: a request, a method or a header this reader cannot see gives
none.
"""

from __future__ import annotations

from typing import NamedTuple

from .calls import RequestCall, request_calls
from .values import ABSENT, BUDGET, UNKNOWN, Hit, Values

PER_ATTEMPT_KEY = "per-attempt-key"
UNKEYED_POST = "unkeyed-post"


class Finding(NamedTuple):
    """One warning in a script: where it stands (a script offset), its code, one sentence."""

    offset: int
    code: str
    message: str


def findings(script: Values) -> list[Finding]:
    """Every warning of the script, call by call."""
    out: list[Finding] = []
    for call in request_calls(script):
        script.budget = BUDGET
        out += _per_attempt_keys(script, call)
        if call.name and _unkeyed_post(script, call.requests):
            out.append(Finding(script.toks[call.start].start, UNKEYED_POST,
                               _unkeyed_message(f"call {call.name}")))
    return out


def _per_attempt_keys(script: Values, call: RequestCall) -> list[Finding]:
    label = f"call {call.name}" if call.name else "this request"
    span = (script.toks[call.start].start,
            script.toks[min(script.closer(call.open), script.n - 1)].end)
    found: list[Finding] = []
    seen: set[tuple[str, int]] = set()
    for via, hit in _key_hits(script, call.requests, call.request):
        if (hit.source, hit.offset) in seen:
            continue
        seen.add((hit.source, hit.offset))
        if span[0] <= hit.offset < span[1]:
            message = _per_attempt_message(hit.source, label, None, None)
        else:
            named = label if call.name else "the request"
            chain = (*via, *hit.via)
            message = _per_attempt_message(hit.source, named, script.line_of(call.start),
                                           chain[0] if chain else None)
        found.append(Finding(hit.offset, PER_ATTEMPT_KEY, message))
    return found


def _key_hits(script: Values, requests: list[int],
               arg: tuple[int, int]) -> list[tuple[tuple[str, ...], Hit]]:
    """Per-attempt constructs in each request's key: ``idempotency.value`` and any
    idempotency-like header. ``via`` names the request or key variable followed."""
    via_request = (script.toks[arg[0]].text,) if arg[1] - arg[0] == 1 else ()
    hits: list[tuple[tuple[str, ...], Hit]] = []
    for request in requests:
        idem = script.lookup(request, "idempotency", 0)
        if idem not in (ABSENT, UNKNOWN):
            via = via_request or ((script.toks[idem[0]].text,)
                                  if idem[1] - idem[0] == 1 else ())
            for key_object in script.objects(*idem, 0) or ():
                value = script.lookup(key_object, "value", 0)
                if value not in (ABSENT, UNKNOWN):
                    hits += [(via, h) for h in script.value_hits(*value, 0, ())]
        headers = script.lookup(request, "headers", 0)
        if headers not in (ABSENT, UNKNOWN):
            for header_object in script.objects(*headers, 0) or ():
                for prop in script.properties(header_object):
                    if prop.kind in ("keyed", "shorthand") and prop.key is not None \
                            and "idempotency" in prop.key.lower():
                        hits += [(via_request, h)
                                 for h in script.value_hits(prop.lo, prop.hi, 0, ())]
    return hits


def _unkeyed_post(script: Values, requests: list[int]) -> bool:
    """Every request the call may send is surely a POST with surely no key."""
    for request in requests:
        method = script.lookup(request, "method", 0)
        if method in (ABSENT, UNKNOWN):
            return False  # absent: GET
        text = script.string(*method)
        if text is None or text.upper() != "POST":
            return False
        idem = script.lookup(request, "idempotency", 0)
        if idem == UNKNOWN or (idem != ABSENT and not script.nullish(*idem)):
            return False
        headers = script.lookup(request, "headers", 0)
        if headers == UNKNOWN:
            return False
        if headers != ABSENT:
            for header_object in script.objects(*headers, 0) or ():
                if any(p.kind in ("spread", "other", "method") or (
                        p.key is not None and "idempotency" in p.key.lower())
                       for p in script.properties(header_object)):
                    return False  # a key the API reads may travel as a header
    return True


# --- messages: the construct, where it is, and the fix ---------------------------------

_FIX = (
    "so a retry sends a new key and the server cannot recognise the repeat; use "
    "attempt.idempotencyKey (the same for every attempt of this step), with a fixed "
    "suffix if the step makes several calls"
)


def _per_attempt_message(source: str, call: str, call_line: int | None, via: str | None) -> str:
    if call_line is None:  # the construct is written inside the call itself
        return f"the idempotency key of {call} is built from {source}, which changes every " \
               f"attempt, {_FIX}"
    through = f"comes from `{via}`, built here from" if via else "is built here from"
    return (f"the idempotency key of {call} on line {call_line} {through} {source}, which "
            f"changes every attempt, {_FIX}")


def _unkeyed_message(call: str) -> str:
    return (
        f"{call} is a POST without request.idempotency, so if its response is lost the step "
        "fails closed instead of retrying (a repeat could charge or create twice); add "
        'idempotency: { header: "Idempotency-Key", value: attempt.idempotencyKey } if the '
        "API accepts keys"
    )
