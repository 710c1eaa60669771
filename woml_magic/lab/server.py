"""The lab's server model (spec §11): capacity, an outage window, throttling, contention.

A ``ModelServer`` is a frozen description of a server; ``ModelServer.start()`` gives a
``ServerState`` — the mutable part (what it has admitted, the last write, the traffic
log) — so one description serves many simulated runs. Every answer is decided from the
simulated time ``now`` (seconds, a float) alone: no sockets, no wall clock, no
randomness (the simulation's seed lives in ``simulate``).

A request at ``now`` is answered by the first rule that applies:

1. **outage** — ``outage = (start, end)``: every request in ``[start, end)`` gets 503.
2. **overloaded** — ``capacity`` requests/s: the server admits at most
   ``capacity × window`` requests in any sliding ``window`` (default 1 s); one more is
   overloaded and gets 503, or 429 with ``Retry-After`` when ``throttle`` is set.
   Rejected requests cost nothing (the server sheds them before doing work), so the
   server always serves up to its capacity: overload shows as failed calls, not as a
   collapse.
3. **conflict** — ``occ``: optimistic concurrency on one shared record, as in the
   simulation behind Marc Brooker's "Exponential Backoff And Jitter" (AWS Architecture
   Blog, 2015): a client reads the record's version and writes it back, and the write
   succeeds only if no other client's write succeeded in between. Here the read
   happened ``conflict_window`` seconds before the write, so a write gets 409 if
   another client's write succeeded in ``(now − conflict_window, now]``. Reads
   (``GET``, ``HEAD``, ``OPTIONS``) never conflict. A conflicting write was served, so
   it counts against the capacity.
4. **ok** — 201 for a write, 200 for a read, with a small demo-API-like JSON body.

``latency`` (and ``latency_sd``, the spread of a normal distribution folded at zero,
as in that simulation's network model) is how long an answer takes to reach the
client; ``simulate`` draws it, the server only states it.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from ..errors import LabModelError, quote
from ..policy import DurationError, format_duration, parse_duration

Cause = Literal["ok", "outage", "overloaded", "throttled", "conflict"]

#: Every cause, in the order the rules apply (the plots' legend order for failures).
CAUSES: tuple[Cause, ...] = ("ok", "outage", "overloaded", "throttled", "conflict")

#: Methods that only read: they never conflict under ``occ``.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_TITLES = {503: "Service Unavailable", 429: "Too Many Requests", 409: "Conflict"}
_PROBLEM_BASE = "https://woml-magic.invalid/lab/problems/"


_OUTAGE_ALLOWED = "write the outage as <start>..<end>, two durations such as 10s..40s"


def parse_outage(text: str) -> tuple[float, float]:
    """``"10s..40s"`` → ``(10.0, 40.0)``: an outage window in seconds (spec §11).

    Both ends are spec §2.4 durations from the start of the simulation; the window is
    ``[start, end)`` and must not be empty. One window per lab.
    """
    if not isinstance(text, str):
        raise LabModelError(f"invalid outage {quote(text)}: not text; {_OUTAGE_ALLOWED}")
    start_text, sep, end_text = text.strip().partition("..")
    if not sep:
        raise LabModelError(
            f"invalid outage {quote(text)}: no '..' between start and end; {_OUTAGE_ALLOWED}"
        )
    try:
        start = parse_duration(start_text).total_seconds()
        end = parse_duration(end_text).total_seconds()
    except DurationError as exc:
        raise LabModelError(f"invalid outage {quote(text)} ({_OUTAGE_ALLOWED}): {exc}") from None
    if end <= start:
        raise LabModelError(
            f"invalid outage {quote(text)}: it ends at {format_duration(end)}, not after it "
            f"starts at {format_duration(start)}; {_OUTAGE_ALLOWED}"
        )
    return (start, end)


def outage_window(value: object) -> tuple[float, float]:
    """An outage as ``lab(outage=…)`` takes it: ``"10s..40s"``, or ``(start, end)`` with
    each end seconds or a spec §2.4 duration (``(10, 40)``, ``("10s", "40s")``). One
    window: a list of several is refused (the model has one outage)."""
    allowed = (
        'give outage as "10s..40s" or (start, end), each end seconds or a '
        'duration such as "10s"; one window per lab'
    )
    if isinstance(value, str):
        return parse_outage(value)
    if isinstance(value, (tuple, list)) and any(
        isinstance(v, (tuple, list)) or (isinstance(v, str) and ".." in v) for v in value
    ):
        raise LabModelError(
            f"outage {quote(value)} gives {len(value)} windows; the lab's "
            f"model has one outage window: {allowed}"
        )
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise LabModelError(f"invalid outage {quote(value)}; {allowed}")
    ends: list[float] = []
    for end in value:
        if isinstance(end, str):
            try:
                ends.append(parse_duration(end).total_seconds())
            except DurationError as exc:
                raise LabModelError(f"invalid outage {quote(value)}: {exc}") from None
        elif isinstance(end, (int, float)) and _is_number(end):
            ends.append(float(end))
        else:
            raise LabModelError(
                f"invalid outage {quote(value)}: {quote(end, 20)} is "
                f"neither seconds nor a duration; {allowed}"
            )
    return (ends[0], ends[1])


def _is_number(value: object) -> bool:
    """A finite int or float (not a bool, not text)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class Request(NamedTuple):
    """One request the server received, as its traffic log keeps it.

    ``attempt`` is the attempt number the caller gave (the innermost layer's, 1-based;
    0 when not given) and ``outer`` the outermost layer's attempt (equal to
    ``attempt`` with one retrying layer).
    """

    time: float
    client: int
    attempt: int
    status: int
    cause: Cause
    outer: int


@dataclass(frozen=True)
class ModelResponse:
    """The server's answer: ``status``, ``headers``, JSON-like ``data`` and its ``cause``."""

    status: int
    headers: dict[str, str]
    data: Any
    cause: Cause

    @property
    def ok(self) -> bool:
        """True for a 2xx answer."""
        return 200 <= self.status < 300


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise LabModelError(message)


@dataclass(frozen=True)
class ModelServer:
    """A server model (spec §11); the module docstring gives the rules it answers by.

    ``capacity`` is in requests per second (``None``: unlimited), over a sliding
    ``window`` of seconds; ``outage`` is ``(start, end)`` in seconds; ``throttle``
    answers overload with 429 and ``Retry-After: retry_after`` (whole seconds) instead
    of 503; ``occ`` turns on write conflicts within ``conflict_window`` seconds;
    ``latency``/``latency_sd`` are seconds from the server to the client's answer.
    """

    capacity: float | None = None
    outage: tuple[float, float] | None = None
    throttle: bool = False
    retry_after: float = 1.0
    occ: bool = False
    conflict_window: float = 0.02
    latency: float = 0.05
    latency_sd: float = 0.0
    window: float = 1.0

    def __post_init__(self) -> None:
        finite = _is_number  # not finite or not a number at all: one sentence alike
        for flag in ("throttle", "occ"):
            _check(
                isinstance(getattr(self, flag), bool),
                f"{flag} must be True or False, got {quote(getattr(self, flag), 30)}",
            )

        _check(
            self.capacity is None or (finite(self.capacity) and self.capacity > 0),
            f"capacity must be a positive number of requests per second or None, "
            f"got {quote(self.capacity, 30)}",
        )
        if self.outage is not None:
            window = self.outage
            _check(
                isinstance(window, tuple)
                and len(window) == 2
                and finite(window[0])
                and finite(window[1])
                and 0 <= window[0] < window[1],
                f"outage must be (start, end) seconds with 0 <= start < end, "
                f"got {quote(self.outage, 40)}",
            )
        _check(
            finite(self.retry_after) and self.retry_after >= 0,
            f"retry_after must be zero or more seconds, got {self.retry_after!r}",
        )
        _check(
            finite(self.conflict_window) and self.conflict_window >= 0,
            f"conflict_window must be zero or more seconds, got {self.conflict_window!r}",
        )
        _check(
            finite(self.latency) and self.latency >= 0,
            f"latency must be zero or more seconds, got {self.latency!r}",
        )
        _check(
            finite(self.latency_sd) and self.latency_sd >= 0,
            f"latency_sd must be zero or more seconds, got {self.latency_sd!r}",
        )
        _check(
            finite(self.window) and self.window > 0,
            f"window must be a positive number of seconds, got {self.window!r}",
        )
        if self.capacity is not None:
            _check(
                self.capacity * self.window >= 1,
                f"capacity × window must admit at least one request, got "
                f"{self.capacity!r}/s × {self.window!r}s",
            )

    def start(self) -> ServerState:
        """A fresh state of this server: nothing admitted, an empty traffic log."""
        return ServerState(self)

    def describe(self) -> str:
        """The model in words, for plot titles: ``capacity 20/s · outage 10s..40s``."""
        parts = ["unlimited capacity" if self.capacity is None else f"capacity {self.capacity:g}/s"]
        if self.outage is not None:
            parts.append(
                f"outage {format_duration(self.outage[0])}..{format_duration(self.outage[1])}"
            )
        if self.throttle:
            parts.append(f"429 + Retry-After {_retry_after_header(self.retry_after)}s")
        if self.occ:
            parts.append(f"optimistic concurrency ({format_duration(self.conflict_window)} window)")
        return " · ".join(parts)


def _retry_after_header(seconds: float) -> str:
    # RFC 9110 §10.2.3: delay-seconds is a non-negative integer; round up, never to 0
    # for a positive wait.
    return str(math.ceil(seconds))


@dataclass
class ServerState:
    """The mutable half of a ``ModelServer``: admissions, the last write, ``traffic``.

    Requests must come in time order (one simulated clock); ``decide`` is the fast
    path ``simulate`` uses, ``handle`` the HTTP-like one (both log the request).
    """

    server: ModelServer
    traffic: list[Request] = field(default_factory=list)
    _admitted: deque[float] = field(default_factory=deque, repr=False)
    _last_write: float = field(default=-math.inf, repr=False)
    _last_writer: int = field(default=-1, repr=False)
    _now: float = field(default=-math.inf, repr=False)

    def decide(
        self,
        now: float,
        client: int,
        *,
        write: bool = True,
        attempt: int = 0,
        outer: int | None = None,
    ) -> tuple[int, Cause]:
        """The status and cause of a request at ``now`` (module docstring's rules)."""
        if now < self._now:
            raise LabModelError(
                f"requests must come in time order: got t={now!r} after t={self._now!r}"
            )
        self._now = now
        server = self.server
        status: int
        cause: Cause
        outage = server.outage
        capacity = server.capacity
        if outage is not None and outage[0] <= now < outage[1]:
            status, cause = 503, "outage"
        else:
            overloaded = False
            if capacity is not None:
                admitted = self._admitted
                horizon = now - server.window
                while admitted and admitted[0] <= horizon:
                    admitted.popleft()
                # A tiny tolerance: 20/s × 1 s must admit 20, not 19, after rounding.
                overloaded = len(admitted) + 1 > capacity * server.window + 1e-9
            if overloaded:
                status, cause = (429, "throttled") if server.throttle else (503, "overloaded")
            else:
                if capacity is not None:
                    self._admitted.append(now)
                if (
                    write
                    and server.occ
                    and self._last_writer != client
                    and now - self._last_write < server.conflict_window
                ):
                    status, cause = 409, "conflict"
                else:
                    status, cause = (201, "ok") if write else (200, "ok")
                    if write:
                        self._last_write, self._last_writer = now, client
        self.traffic.append(
            Request(now, client, attempt, status, cause, attempt if outer is None else outer)
        )
        return status, cause

    def handle(
        self,
        now: float,
        client: int,
        method: str = "POST",
        path: str = "/",
        body: Any = None,
        *,
        attempt: int = 0,
    ) -> ModelResponse:
        """Answer one HTTP-like request at simulated time ``now`` and log it.

        2xx data is demo-API-like (spec §8): ``{"ok": true, "client": n, "id": k}`` with
        ``k`` the request's number; errors are problem documents (RFC 9457) as dicts.
        ``body`` is accepted for the caller's convenience and not inspected.
        """
        method = method.upper()
        status, cause = self.decide(now, client, write=method not in READ_METHODS, attempt=attempt)
        headers = {"Content-Type": "application/json"}
        if status < 300:
            data: Any = {
                "ok": True,
                "client": client,
                "id": len(self.traffic),
                "method": method,
                "path": path,
            }
            return ModelResponse(status, headers, data, cause)
        headers["Content-Type"] = "application/problem+json"
        if cause == "throttled":
            headers["Retry-After"] = _retry_after_header(self.server.retry_after)
        data = {
            "type": _PROBLEM_BASE + cause,
            "title": _TITLES[status],
            "status": status,
            "detail": self._detail(cause),
        }
        return ModelResponse(status, headers, data, cause)

    def _detail(self, cause: Cause) -> str:
        server = self.server
        if cause == "outage" and server.outage is not None:
            start, end = server.outage
            return (
                f"the server is down from {format_duration(start)} to "
                f"{format_duration(end)} (the model's outage window)"
            )
        if cause == "conflict":
            return (
                "another client's write landed within the last "
                f"{format_duration(server.conflict_window)}; read again and retry"
            )
        return (
            f"the server is over its capacity of {server.capacity:g} requests/s "
            f"(the model's sliding {format_duration(server.window)} window)"
        )


#: Ready-made models by name (the magic's ``--server MODEL``); each is one
#: ``ModelServer`` whose fields can be changed with ``dataclasses.replace``.
PRESETS: dict[str, ModelServer] = {
    # A server that is never the bottleneck: only the policy shapes the traffic.
    "unlimited": ModelServer(),
    # The outage scenario's server: 20 requests/s, sheds the rest with 503.
    "capacity": ModelServer(capacity=20.0),
    # The same, throttling politely (429 + Retry-After: 1).
    "throttle": ModelServer(capacity=20.0, throttle=True),
    # The AWS article's contention: one record, 10 ms ± 2 ms network each way, a
    # 20 ms read-to-write window (its Net(10, 2) and read-then-write client).
    "occ": ModelServer(occ=True, conflict_window=0.02, latency=0.01, latency_sd=0.002),
}


def server_model(name: str) -> ModelServer:
    """The preset called ``name`` (``PRESETS``); the error lists the names."""
    try:
        return PRESETS[name]
    except KeyError:
        names = ", ".join(PRESETS)
        raise LabModelError(f"unknown server model {name!r}; choose one of {names}") from None
