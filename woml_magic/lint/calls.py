"""Where a script sends requests: its ``services.http.request`` calls (spec §4.1, §4.3).

A call is found through ``services.http`` and its aliases (``const http = services.http``,
``const { http } = services``, ``const { request } = services.http``, ``globalThis.``…).
Only a call whose request this reader can see is kept: its first argument must be an
object literal, or a binding of one that nothing mutates afterwards; a spread among the
arguments, or a request built by a function, gives no call rather than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..javascript import HEAD
from .tokens import KEYWORDS
from .values import ABSENT, UNKNOWN, Values

_REQUEST_PATH = ("services", "http", "request")


@dataclass(frozen=True)
class RequestCall:
    """One ``services.http.request(request, options)`` call, as token indexes."""

    start: int  # the callee's first token
    open: int  # the call's `(`
    request: tuple[int, int]  # the first argument's tokens
    requests: list[int]  # the object literals (their `{`) the request may be
    name: str | None  # ``options.name`` as a message shows it; None if unnamed or unknown


def request_calls(script: Values) -> list[RequestCall]:
    """Every request call of the script whose request can be read, in order."""
    calls: list[RequestCall] = []
    for i in range(script.n):
        if not script.is_name(i) or script.after_dot(i) or i in script.declared \
                or script.toks[i].text in KEYWORDS:
            continue
        names, end = script.chain(i)
        call = script.call_open(end)
        if call is not None and script.canonical(names, i) == _REQUEST_PATH:
            found = _request_call(script, i, call)
            if found is not None:
                calls.append(found)
    return calls


def _request_call(script: Values, start: int, call: int) -> RequestCall | None:
    args = script.split(call)
    if not args or any(script.is_punct(lo, "...") for lo, _ in args[:2]):
        return None
    requests = script.objects(*args[0], 0)
    if requests is None:
        return None
    name = _call_name(script, args[1]) if len(args) > 1 else None
    return RequestCall(start, call, args[0], requests, name)


def _call_name(script: Values, options: tuple[int, int]) -> str | None:
    """The call's name as a message shows it (`'create-charge'`, or the template
    that builds it); None when unnamed or when this reader cannot tell."""
    objects = script.objects(*options, 0)
    if objects is None:
        return None
    shown: str | None = None
    for obj in objects:
        found = script.lookup(obj, "name", 0)
        if found in (ABSENT, UNKNOWN) or script.nullish(*found):
            return None
        text = script.string(*found)
        if text is not None:
            shown = repr(text) if text.strip() else None
        elif script.toks[found[0]].kind == HEAD and script.match[found[0]] == found[1] - 1:
            shown = script.source[script.toks[found[0]].start : script.toks[found[1] - 1].end]
        else:
            return None
        if shown is None:
            return None
    return shown
