"""Events are data (spec §5.2, STYLE 4).

The engine emits these frozen records, in order; ``Run`` is built from them, and the
journal, the timeline and tests are subscribers. Every ``at`` is seconds since the run
started, on the run's clock (spec §5.1). Each event serialises to a JSON-able dict
(``to_dict``) and back (``event_from_dict``) so the journal stores exactly what the
engine emitted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from .outcomes import CallOutcome, Outcome, RunStatus, StepStatus, StopReason

if TYPE_CHECKING:
    from .clock import ClockKind  # the clock module loads asyncio; a name is enough

JSON = Any  # a JSON value: None, bool, int, float, str, list, dict


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


@dataclass(frozen=True)
class AttemptError:
    """Why an attempt failed (spec §3.2): the error's name and message and the cell line
    where it was thrown (None when no script frame was on the stack: a timeout, a cancel,
    an interrupted attempt, a crash of the worker)."""

    name: str
    message: str
    line: int | None = None

    def to_dict(self) -> dict[str, JSON]:
        return {"name": self.name, "message": self.message, "line": self.line}

    @classmethod
    def from_dict(cls, data: object) -> AttemptError:
        """The error of a ``to_dict`` (the journal's read path, spec §5.2), checked: a
        ``name`` and a ``message`` that are strings, a ``line`` that is an integer or
        null (or absent, as journals before lines had it), nothing else."""
        if not (
            isinstance(data, dict)
            and set(data) <= {"name", "message", "line"}
            and isinstance(data.get("name"), str)
            and isinstance(data.get("message"), str)
            and (data.get("line") is None
                 or (isinstance(data["line"], int) and not isinstance(data["line"], bool)))
        ):
            raise ValueError("its error is not {name, message, line}")
        return cls(name=data["name"], message=data["message"], line=data.get("line"))


@dataclass(frozen=True)
class Event:
    """Base of every event: which run, and when on the run's clock."""

    kind: ClassVar[str] = "event"
    run_id: str
    at: float

    def to_dict(self) -> dict[str, JSON]:
        """The event as a dict of its fields plus ``kind``.

        Shallow: nested JSON values are the event's own, which nothing changes after the
        event is emitted. (``dataclasses.asdict`` deep-copies them, which was most of
        the journal's cost per event.)
        """
        data: dict[str, JSON] = {name: getattr(self, name) for name in _field_names(type(self))}
        data["kind"] = self.kind
        return data

    @classmethod
    def _decoded(cls, data: dict[str, JSON]) -> dict[str, JSON]:
        """``to_dict``'s values as the fields take them (``event_from_dict``): as they
        are, unless a field holds a record of its own."""
        return data


@dataclass(frozen=True, kw_only=True)
class StepEvent(Event):
    """An event of one step: it always names the step (keyword-only, no default, so an
    event without its step id is an error where it is made, not a silent ``""``)."""

    step_id: str


@dataclass(frozen=True, kw_only=True)
class AttemptEvent(StepEvent):
    """An event of one attempt of a step: it always names the attempt (1-based)."""

    number: int


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    """A new run: the document it runs and how (spec §5.2)."""

    kind: ClassVar[str] = "run-started"
    workflow_id: str = ""
    fingerprint: str = ""
    clock: ClockKind = "real"
    payload: JSON = None
    source: str = ""  # the document text, so a past run can be shown from the journal


@dataclass(frozen=True, kw_only=True)
class RunResumed(Event):
    """A journaled run is executed again (spec §5.3)."""

    kind: ClassVar[str] = "run-resumed"
    retry_interrupted: bool = False


@dataclass(frozen=True, kw_only=True)
class StepStarted(StepEvent):
    kind: ClassVar[str] = "step-started"
    idempotency_key: str = ""


@dataclass(frozen=True, kw_only=True)
class AttemptStarted(AttemptEvent):
    """Committed before the script proceeds (spec §5.2)."""

    kind: ClassVar[str] = "attempt-started"
    idempotency_key: str = ""


@dataclass(frozen=True, kw_only=True)
class LogEmitted(AttemptEvent):
    """One line of ``console`` output from a running attempt (spec §4.4)."""

    kind: ClassVar[str] = "log"
    level: str = "log"
    text: str = ""


@dataclass(frozen=True, kw_only=True)
class CallStarted(AttemptEvent):
    """A ``services.http.request`` call leaves; committed before the request (spec §5.2).

    ``request_headers`` are already redacted (spec §4.1).
    """

    kind: ClassVar[str] = "call-started"
    call_index: int = 0
    name: str | None = None
    method: str = "GET"
    url: str = ""
    request_headers: dict[str, str] = field(default_factory=dict)
    idempotency_header: str | None = None
    idempotency_value: str | None = None


@dataclass(frozen=True, kw_only=True)
class CallFinished(AttemptEvent):
    """A call ended: a response, a network error, or an ambiguous outcome (spec §4.1).

    For a response, ``response`` holds ``{status, headers, data}`` (headers redacted)
    so a named 2xx call can be reattached later (spec §4.3). ``injected`` says which
    injected faults acted on the call (spec §10.2), e.g. ``drop-response (--fault
    create-charge@1=drop-response)``; None for a call no fault touched.
    """

    kind: ClassVar[str] = "call-finished"
    call_index: int = 0
    name: str | None = None
    outcome: CallOutcome = "response"  # never "running": the call ended
    status: int | None = None
    replayed: bool = False
    response: JSON = None
    error: str | None = None
    injected: str | None = None


@dataclass(frozen=True, kw_only=True)
class AttemptFinished(AttemptEvent):
    """An attempt's single outcome (spec §3.2) and why it did or did not retry."""

    kind: ClassVar[str] = "attempt-finished"
    outcome: Outcome = "succeeded"
    result: JSON = None
    error: AttemptError | None = None
    explanation: str = ""

    def to_dict(self) -> dict[str, JSON]:
        data = super().to_dict()
        if self.error is not None:
            data["error"] = self.error.to_dict()
        return data

    @classmethod
    def _decoded(cls, data: dict[str, JSON]) -> dict[str, JSON]:
        error = data.get("error")
        return data if error is None else {**data, "error": AttemptError.from_dict(error)}


@dataclass(frozen=True, kw_only=True)
class WaitScheduled(StepEvent):
    """The engine waits before the next attempt (spec §3.1); ``due`` is on the run's clock."""

    kind: ClassVar[str] = "wait-scheduled"
    after_attempt: int = 1
    seconds: float = 0.0
    due: float = 0.0


@dataclass(frozen=True, kw_only=True)
class StepFinished(StepEvent):
    kind: ClassVar[str] = "step-finished"
    status: StepStatus = "succeeded"  # an ending one: never pending, running or waiting
    result: JSON = None
    reason: str | None = None  # why it ended without an attempt saying so (a cancelled wait)


@dataclass(frozen=True, kw_only=True)
class RunFinished(Event):
    kind: ClassVar[str] = "run-finished"
    status: RunStatus = "succeeded"  # never "running": the run ended
    #: Why a run that did not end by itself ended (spec §3.2): the user cancelled it or
    #: the kernel was interrupted; None when it ran to its end. (Journals written before
    #: this field read back as None.)
    stopped: StopReason | None = None


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        RunStarted,
        RunResumed,
        StepStarted,
        AttemptStarted,
        LogEmitted,
        CallStarted,
        CallFinished,
        AttemptFinished,
        WaitScheduled,
        StepFinished,
        RunFinished,
    )
}


def event_from_dict(data: dict[str, JSON]) -> Event:
    """Rebuild an event from ``Event.to_dict`` output (the journal's read path)."""
    data = dict(data)
    kind = data.pop("kind")
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}")
    names = set(_field_names(cls))
    return cls(**cls._decoded({k: v for k, v in data.items() if k in names}))


class EventSink(Protocol):
    """Anything that receives the engine's events in order: Run, journal, timeline."""

    def __call__(self, event: Event) -> None: ...
