"""What a ``services.*`` call needs to know about the attempt that makes it (spec §4.1-§4.3).

``StepCalls`` lives as long as one logical step (all its attempts, and across a resume);
``CallScope`` lives for one attempt. The engine builds both; services only read and
update them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from ..events import CallFinished, Event


def is_reattachable(status: int | None) -> bool:
    """A named call's response is kept for reattaching only when it is 2xx (spec §4.3)."""
    return status is not None and 200 <= status < 300


@dataclass(frozen=True)
class CallTag:
    """Which managed call a request is, for a transport that answers it itself (the
    lab's server model, spec §11): sent as the request's ``CALL_EXTENSION`` extension,
    which httpx's own transports ignore."""

    run_id: str
    step_id: str
    attempt: int
    index: int
    name: str | None


#: The httpx request extension that carries a request's ``CallTag``.
CALL_EXTENSION = "woml.call"


@dataclass
class StepCalls:
    """Named calls of one logical step whose 2xx response is known (spec §4.3).

    ``reattach`` maps a call name to ``{"status", "headers", "data"}`` with headers
    already redacted: exactly what the journal holds, so a call reattached after a
    resume answers the same as one reattached within the run.
    """

    reattach: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_events(cls, events: Iterable[Event], step_id: str) -> StepCalls:
        """Rebuild from journaled events, for a resumed run (spec §4.3, §5.3).

        Every ``CallFinished`` of ``step_id`` with a name, outcome ``response`` and a
        2xx status contributes its journaled response; later events win.
        """
        return cls.by_step(events).get(step_id) or cls()

    @classmethod
    def by_step(cls, events: Iterable[Event]) -> dict[str, StepCalls]:
        """``from_events`` for every step at once: one pass over the run's events, so a
        run of many steps does not read its whole history once per step (spec §4.5)."""
        steps: dict[str, StepCalls] = {}
        for event in events:
            if (
                isinstance(event, CallFinished)
                and event.name is not None
                and event.outcome == "response"
                and is_reattachable(event.status)
                and isinstance(event.response, dict)
            ):
                calls = steps.get(event.step_id)
                if calls is None:
                    calls = steps[event.step_id] = cls()
                calls.reattach[event.name] = dict(event.response)
        return steps


@dataclass
class CallScope:
    """One attempt's view for services (spec §4.1, §4.2, §5.2).

    ``emit`` publishes events synchronously: the journal commits inside it, so a
    ``CallStarted`` is durable before the request leaves (spec §5.2). ``now`` is the
    run's clock in seconds since the run started. ``busy`` is entered while a request
    is in flight so a simulated clock knows real work is happening (spec §5.1).
    ``unkeyed_ambiguity`` becomes True when a call without ``idempotency`` ended
    ambiguous; the engine reads it after the attempt (spec §4.2). ``sleep`` waits on
    the run's clock (an injected ``delay`` fault, spec §10.2); None where no clock is
    given, and then a delay fault is an error. ``durable``, where ``emit`` alone does
    not make a ``CallStarted`` durable (a Temporal activity, spec §9), is awaited with it
    before the request leaves.
    """

    run_id: str
    step_id: str
    attempt_number: int
    step_calls: StepCalls
    emit: Callable[[Event], None]
    now: Callable[[], float]
    busy: Callable[[], AbstractContextManager[None]]
    names_used: set[str] = field(default_factory=set)
    calls_made: int = 0
    unkeyed_ambiguity: bool = False
    sleep: Callable[[float], Awaitable[None]] | None = None
    durable: Callable[[Event], Awaitable[None]] | None = None
    #: The step's ``attempt.idempotencyKey`` in this run (spec §3.5): a cassette reads
    #: it by its role, since it differs from run to run (spec §10.4).
    step_key: str = ""
