"""One request to the demo API: its public record and its plan (spec §8).

``DemoRequest`` is what ``DemoAPI.requests`` shows: frozen, one per request received.
``RequestLog`` is its mutable twin, filled in as the request proceeds. ``Exchange`` is
what ``DemoApp.begin`` decides for one request — the response, the fault to apply,
the idempotency entry still in flight — and what ``DemoApp.finish`` completes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

from .idempotency import Entry, StoreKey
from .problems import Response, problem

RequestOutcome = Literal[
    "pending",  # internal: decided under the lock, so never seen through ``requests``
    "executed",  # the endpoint ran: a record was created or listed, or its validation failed
    "replayed",  # a stored response was returned; nothing ran
    "conflict",  # 409: the same key was still in flight
    "mismatch",  # 422: the same key came with a different body
    "rejected",  # answered before execution: 404, 405, 415, bad JSON, bad or missing key
    "failed-injected",  # answered by fail_next() before anything else
    "dropped",  # executed or replayed, then closed without a response (drop_response_next)
]
"""What the demo API did with one request: the server's side of it, not an attempt's
or a call's outcome (those are ``outcomes.py``'s)."""

QueuedFaultKind = Literal["fail", "drop", "delay"]
"""A fault queued on the demo API (``fail_next`` …), not an injected one (spec §10.2)."""
Fault = tuple[QueuedFaultKind, float]
"""A queued fault and its value: the status for ``fail``, the seconds for ``delay``."""


@dataclass(frozen=True)
class DemoRequest:
    """One request the demo API received, and what happened to it (spec §8).

    ``status`` is the status the server answered — or would have answered, for a
    ``dropped`` request. ``answered`` turns true once the response is being sent; it
    stays false while a delayed response is held and for a dropped one. ``record_id``
    is the id of the record the request created, if any. ``fault`` names the injected
    fault it consumed and ``delay`` the seconds its response was held.
    """

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    idempotency_key: str | None
    outcome: RequestOutcome
    status: int | None = None
    record_id: str | None = None
    fault: QueuedFaultKind | None = None
    delay: float = 0.0
    answered: bool = False


@dataclass
class RequestLog:
    """The mutable twin of ``DemoRequest``, filled in as the request proceeds."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any = None
    idempotency_key: str | None = None
    outcome: RequestOutcome = "pending"
    status: int | None = None
    record_id: str | None = None
    fault: QueuedFaultKind | None = None
    delay: float = 0.0
    answered: bool = False

    def freeze(self) -> DemoRequest:
        """A ``DemoRequest`` that later changes to this log (or to its body) never reach."""
        return DemoRequest(
            **{**vars(self), "headers": dict(self.headers), "json": copy.deepcopy(self.json)}
        )

    def line(self) -> str:
        """The line ``DemoAPI(log=...)`` receives for this request."""
        # ASCII only ("->"): a terminal with a narrow encoding must not break a response.
        key = f" key={self.idempotency_key}" if self.idempotency_key else ""
        return f"{self.method} {self.path} -> {self.status} {self.outcome}{key}"


@dataclass
class Exchange:
    """One request's plan: the response, the fault to apply, the key entry to complete.

    ``delay`` is how long the HTTP layer holds the response (the key still in flight)
    and ``drop`` whether it closes the connection instead of answering.
    """

    log: RequestLog
    response: Response = field(default_factory=lambda: problem(500, "not yet decided"))
    delay: float = 0.0
    drop: bool = False
    pending: tuple[StoreKey, Entry] | None = field(default=None)
