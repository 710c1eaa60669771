"""Injected faults: make a managed call fail on purpose (spec §10.2).

A fault is written ``CALL@ATTEMPT=KIND``::

    create-charge@1=drop-response       attempt 1 of the call named create-charge
    create-charge@*=status=503          every attempt

    KIND                  what happens to the call                  the script sees
    drop-response         sent; the response is read, then dropped  AmbiguousError
    timeout-after-send    sent; the response is read, then dropped  AmbiguousError (as
                          (no time passes for the timeout itself)   a read timeout)
    network-error         not sent                                  NetworkError
    status=NNN            not sent; answered here with NNN          HttpError (NNN is
                                                                    400-599)
    delay=DURATION        waits DURATION on the run's clock, then   what the call gives
                          sends as usual

A fault acts on a managed call (one with ``{name}``) by its name, in the attempt
numbers it names; calls without a name, and names no call uses, are left alone. A call
that is reattached (spec §4.3) or refused by ``http_allow`` is not sent, so no fault
acts on it. Per call at most one ``delay`` (the first that matches, in the order
given) and then at most one other fault (likewise) apply. Every fault that acted is
recorded on the call's ``call-finished`` event (``injected``), so the timeline marks it
and the attempt's explanation says so.

``parse_fault``/``parse_faults`` read faults; ``CallFaults`` applies them to one call of
``HttpService.request``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final, Literal

from ..errors import ServiceRejection, WomlRunError, quote
from ..policy import MAX_ATTEMPTS, MAX_DURATION, DurationError, format_duration, parse_duration
from ..redaction import redact_headers

if TYPE_CHECKING:
    from .http_request import HttpRequest

#: Records how a call finished (``HttpService``'s ``call-finished`` event), by keyword.
Finish = Callable[..., None]

FaultKind = Literal["drop-response", "timeout-after-send", "network-error", "status", "delay"]
#: The kinds, as written after ``=``.
KINDS: Final = (
    "drop-response",
    "timeout-after-send",
    "network-error",
    "status=NNN",
    "delay=DURATION",
)
# Digits are ASCII (as everywhere in WOML): `[0-9]`, never `\d` or `str.isdigit`, which
# take ² and ٥ too.
_SHAPE = re.compile(r"(?P<call>.*)@(?P<attempt>\*|[0-9]+)=(?P<kind>.+)", re.DOTALL)
_STATUS = re.compile(r"[0-9]{3}")
_ALLOWED = (
    "write CALL@ATTEMPT=KIND, e.g. create-charge@1=drop-response: CALL is a managed call's "
    "name, ATTEMPT an attempt number or * for every attempt, KIND one of " + ", ".join(KINDS)
)


@dataclass(frozen=True)
class Fault:
    """One parsed fault (spec §10.2). ``attempt`` None means every attempt; ``status``
    is set for ``status``, ``seconds`` for ``delay``. ``spec`` is its canonical text."""

    call: str
    attempt: int | None
    kind: FaultKind
    status: int | None = None
    seconds: float | None = None

    @property
    def effect(self) -> str:
        """The kind as written: ``drop-response``, ``status=503``, ``delay=2s``."""
        if self.kind == "status":
            return f"status={self.status}"
        if self.kind == "delay":
            return f"delay={format_duration(self.seconds or 0.0)}"
        return self.kind

    @property
    def spec(self) -> str:
        """``CALL@ATTEMPT=KIND``, as ``parse_fault`` reads it back."""
        return f"{self.call}@{'*' if self.attempt is None else self.attempt}={self.effect}"

    @property
    def injected(self) -> str:
        """How a call records it: ``drop-response (--fault create-charge@1=drop-response)``."""
        return f"{self.effect} (--fault {self.spec})"

    def matches(self, name: str | None, attempt: int) -> bool:
        """Does this fault act on the call ``name`` in attempt ``attempt``?"""
        return name == self.call and (self.attempt is None or self.attempt == attempt)

    def __str__(self) -> str:
        return self.spec


def parse_fault(text: str) -> Fault:
    """Read one ``CALL@ATTEMPT=KIND``; ``WomlRunError`` naming the bad part and what is
    allowed otherwise (the fault quoted as a window of it, ``errors.quote``)."""
    if not isinstance(text, str):
        raise WomlRunError(f"a fault must be a string, not {type(text).__name__}; {_ALLOWED}")
    shown = quote(text)
    match = _SHAPE.fullmatch(text.strip())
    if match is None:
        raise WomlRunError(f"the fault {shown} is not CALL@ATTEMPT=KIND; {_ALLOWED}")
    call, attempt_text, kind = match["call"].strip(), match["attempt"], match["kind"].strip()
    if not call:
        raise WomlRunError(f"the fault {shown} names no call; {_ALLOWED}")
    # A step makes at most MAX_ATTEMPTS attempts (spec §2.2); checked on the text first,
    # so 5,000 digits are refused before int() would be asked to read them.
    attempt = (
        None
        if attempt_text == "*"
        else (int(attempt_text) if len(attempt_text) <= 6 else MAX_ATTEMPTS + 1)
    )
    if attempt is not None and not 1 <= attempt <= MAX_ATTEMPTS:
        raise WomlRunError(
            f"the fault {shown} names attempt {quote(attempt_text, 12)[1:-1]}; attempts "
            f"are numbered from 1 to {MAX_ATTEMPTS} (a step makes at most {MAX_ATTEMPTS}), "
            "or * for every attempt"
        )
    if kind in ("drop-response", "timeout-after-send", "network-error"):
        return Fault(call, attempt, kind)  # type: ignore[arg-type]  # one of the three
    name, sep, value = kind.partition("=")
    if sep and name.strip() == "status":
        value = value.strip()
        if not _STATUS.fullmatch(value) or not 400 <= int(value) <= 599:
            raise WomlRunError(
                f"the fault {shown} answers with status {quote(value, 12)}; status=NNN "
                "takes an error status from 400 to 599 in ASCII digits (e.g. status=503)"
            )
        return Fault(call, attempt, "status", status=int(value))
    if sep and name.strip() == "delay":
        try:
            seconds = parse_duration(value.strip()).total_seconds()
        except DurationError as exc:
            raise WomlRunError(f"the fault {shown}: {exc}") from None
        if seconds > MAX_DURATION.total_seconds():
            raise WomlRunError(f"the fault {shown} delays more than 24h; use a shorter delay")
        return Fault(call, attempt, "delay", seconds=seconds)
    raise WomlRunError(
        f"the fault {shown} has the unknown kind {quote(kind, 30)}; KIND is one of "
        f"{', '.join(KINDS)}"
    )


def parse_faults(items: Iterable[str | Fault | Mapping[str, Any]] | None) -> tuple[Fault, ...]:
    """Faults from strings, ``Fault``s or their ``dataclasses.asdict`` dicts (how an
    ``EngineConfig`` travels to a Temporal activity)."""
    if items is None:
        return ()
    if isinstance(items, (str, Fault, Mapping)):
        items = [items]
    elif not isinstance(items, Iterable):
        raise WomlRunError(
            f"faults must be a list of CALL@ATTEMPT=KIND strings, not "
            f"{type(items).__name__}; {_ALLOWED}"
        )
    faults: list[Fault] = []
    for item in items:
        if isinstance(item, Fault):
            faults.append(item)
        elif isinstance(item, Mapping):
            faults.append(_from_dict(item))
        else:
            faults.append(parse_fault(item))
    return tuple(faults)


def _from_dict(data: Mapping[str, Any]) -> Fault:
    attempt = data.get("attempt")
    head = f"{data.get('call')}@{'*' if attempt is None else attempt}="
    if data.get("kind") == "delay":
        # The seconds as parsed: a round trip through their text could round them.
        checked = parse_fault(head + "delay=0s")
        given = data.get("seconds") or 0.0
        seconds = float(given) if isinstance(given, (int, float)) else math.nan
        if not 0 <= seconds <= MAX_DURATION.total_seconds():
            raise WomlRunError(
                f"the fault {quote(checked.spec)} delays {quote(given, 20)} "
                "seconds; a number of seconds from 0 to 24h is allowed"
            )
        return dataclasses.replace(checked, seconds=seconds)
    kind = data.get("kind")
    return parse_fault(head + (f"status={data.get('status')}" if kind == "status" else str(kind)))


def matching(
    faults: Iterable[Fault], name: str | None, attempt: int
) -> tuple[Fault | None, Fault | None]:
    """The delay and the other fault that act on call ``name`` in ``attempt``: the first
    of each that matches, in the order given."""
    delay: Fault | None = None
    other: Fault | None = None
    if name is None:
        return None, None
    for fault in faults:
        if not fault.matches(name, attempt):
            continue
        if fault.kind == "delay":
            delay = delay or fault
        else:
            other = other or fault
    return delay, other


# -- applying faults to a call ----------------------------------------------------------


@dataclass
class CallFaults:
    """The injected faults that act on one call (``matching``) and, in ``applied``, how
    each that acted is recorded; ``injected`` goes on the call's ``call-finished``.

    ``HttpService`` asks twice: ``before_send`` (the delay, then a ``network-error`` or
    a ``status``, nothing sent) and, once the answer is read, ``dropped``.
    """

    delay: Fault | None = None
    other: Fault | None = None
    applied: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls, faults: Iterable[Fault], name: str | None, attempt: int, *, has_clock: bool
    ) -> CallFaults:
        """The faults acting on call ``name`` in ``attempt``; a delay needs a clock."""
        delay, other = matching(faults, name, attempt)
        if delay is not None and not has_clock:
            raise RuntimeError("a delay fault needs the run's clock (CallScope.sleep)")
        return cls(delay, other)

    @property
    def injected(self) -> str | None:
        """The faults that acted, as the call records them; None if none did."""
        return "; ".join(self.applied) or None

    async def before_send(
        self,
        req: HttpRequest,
        sleep: Callable[[float], Awaitable[None]] | None,
        finish: Finish,
        redact: Iterable[str],
    ) -> None:
        """Wait out a ``delay`` on the run's clock; then raise the rejection of a
        ``network-error`` or of a ``status`` answered here, recorded with ``finish``."""
        delay, fault = self.delay, self.other
        if delay is not None and sleep is not None:
            self.applied.append(delay.injected)
            try:
                await sleep(delay.seconds or 0.0)
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    finish(
                        outcome="network-error",
                        error="the attempt ended during the injected delay, before the "
                        "request was sent; nothing was sent",
                    )
                raise
        if fault is not None and fault.kind == "network-error":
            self.applied.append(fault.injected)
            message = (
                f"{req.method} {req.shown_url}: could not connect (an injected "
                "network-error); nothing was sent"
            )
            finish(outcome="network-error", error=message)
            raise ServiceRejection("NetworkError", message)
        if fault is not None and fault.kind == "status":
            self.applied.append(fault.injected)
            raise _answered_here(req, fault, finish, redact)

    def dropped(self, req: HttpRequest, status: int, finish: Finish) -> str | None:
        """An injected ``drop-response`` or ``timeout-after-send``: the request was sent
        and answered ``status``; the answer is discarded and the call, recorded with
        ``finish``, is ambiguous. The ``AmbiguousError``'s message, or None when no such
        fault acts (spec §10.2)."""
        fault = self.other
        if fault is None or fault.kind not in ("drop-response", "timeout-after-send"):
            return None
        self.applied.append(fault.injected)
        if fault.kind == "drop-response":
            reason = (
                "the connection was closed after the request was sent, before a "
                "complete response arrived"
            )
        else:
            reason = (
                f"no response arrived within {format_duration(req.timeout)} after the "
                "request was sent"
            )
        message = (
            f"{req.method} {req.shown_url}: {reason} (an injected {fault.kind}); "
            "whether the server acted on it is unknown"
        )
        finish(
            outcome="ambiguous",
            error=f"{message} (the server answered {status}; the injected "
            "fault discarded the response)",
        )
        return message


def _answered_here(
    req: HttpRequest, fault: Fault, finish: Finish, redact: Iterable[str]
) -> ServiceRejection:
    """An injected ``status=NNN``: answered here as an API answers errors (RFC 9457
    problem details), nothing sent (spec §10.2)."""
    # Here, not at the top: the engine's config reads faults without loading httpx.
    import httpx

    from .http_outcome import http_error_message

    status = fault.status or 503
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:  # a status the standard library does not name (e.g. 599)
        phrase = ""
    data = {
        "type": "about:blank",
        "title": phrase or f"Status {status}",
        "status": status,
        "detail": f"answered by the injected fault {fault.spec}; the request was not sent",
    }
    response = httpx.Response(
        status,
        headers={"content-type": "application/problem+json"},
        content=json.dumps(data).encode(),
    )
    headers = redact_headers({name: response.headers[name] for name in response.headers}, redact)
    record = {"status": status, "headers": headers, "data": data}
    message = http_error_message(req.method, req.shown_url, response, data)
    finish(outcome="response", status=status, response=record, error=message)
    return ServiceRejection("HttpError", message, dict(record))
