"""The models: the parsed document and the run built from events (spec §7).

``Workflow``, ``Step`` and ``RetryPolicy`` are frozen and validated once by ``parse``.
``Run``, ``StepRun``, ``Attempt`` and ``Call`` are the live picture of one execution;
they change only through ``Run.apply(event)`` (STYLE 4), so a run rebuilt from the
journal is the same object the engine showed live.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .events import (
    JSON,
    AttemptError,
    AttemptFinished,
    AttemptStarted,
    CallFinished,
    CallStarted,
    Event,
    LogEmitted,
    RunFinished,
    RunResumed,
    RunStarted,
    StepFinished,
    WaitScheduled,
)
from .limits import DEFAULT_TIMEOUT_S
from .outcomes import (
    RUNNING,
    WAITING,
    AttemptState,
    CallOutcome,
    RunStatus,
    StepStatus,
    StopReason,
)
from .policy import RetryPolicy

if TYPE_CHECKING:
    import os
    from pathlib import Path

    from .clock import ClockKind
    from .timeline.theme import ThemeName

#: spec §3.5: uuid5(NAMESPACE_URL, "urn:woml:idempotency-key")
IDEMPOTENCY_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:woml:idempotency-key")


def idempotency_key(run_id: str, step_id: str) -> str:
    """The stable key of one logical step execution (spec §3.5).

    ``str(uuid5(NAMESPACE, f"{run_id}/{step_id}"))``: the same for every attempt and
    across resumes of the run, different in another run.
    """
    return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{run_id}/{step_id}"))


@dataclass(frozen=True)
class Step:
    """One ``<step>`` (spec §2.2, §2.3).

    ``script_line`` is the cell line on which the script text's first line stands and
    ``script_column`` the column where it starts, so engine errors map back to the cell.
    """

    id: str
    script: str
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    timeout: timedelta = timedelta(seconds=DEFAULT_TIMEOUT_S)
    line: int = 1
    script_line: int = 1
    script_column: int = 1


@dataclass(frozen=True)
class Workflow:
    """A parsed document: its id and its steps in document order (spec §2.1)."""

    id: str
    steps: tuple[Step, ...]
    source: str = ""
    line_offset: int = 0  # lines before ``source`` in the cell (the ``%%woml`` line)

    def cell_text(self) -> str:
        """``source`` padded so its line numbers are the cell's (for error carets)."""
        return "\n" * self.line_offset + self.source

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    @property
    def fingerprint(self) -> str:
        """A hash of what the run depends on: ids, policies, timeouts, scripts (spec §5.3).

        Comments and formatting outside scripts do not change it.
        """
        canon = {
            "id": self.id,
            "steps": [
                {
                    "id": s.id,
                    "attempts": s.policy.attempts,
                    "backoff": s.policy.backoff,
                    "delay": s.policy.delay.total_seconds(),
                    "max_delay": None
                    if s.policy.max_delay is None
                    else s.policy.max_delay.total_seconds(),
                    "timeout": s.timeout.total_seconds(),
                    "script": s.script,
                }
                for s in self.steps
            ],
        }
        text = json.dumps(canon, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Call:
    """One ``services.http.request`` made by an attempt (spec §4.1, §4.3).

    ``injected``: the injected faults that acted on it (spec §10.2), or None.
    """

    name: str | None
    method: str
    url: str
    request_headers: dict[str, str] = field(default_factory=dict)
    idempotency_header: str | None = None
    idempotency_value: str | None = None
    status: int | None = None
    replayed: bool = False
    outcome: CallOutcome = "running"
    response: JSON = None
    error: str | None = None
    started_at: float = 0.0
    ended_at: float | None = None
    injected: str | None = None


@dataclass
class Attempt:
    """One attempt of a step (spec §3.2, §7)."""

    number: int
    idempotency_key: str
    started_at: float
    outcome: AttemptState = "running"
    ended_at: float | None = None
    error: AttemptError | None = None
    explanation: str = ""
    result: JSON = None
    calls: list[Call] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)


@dataclass
class StepRun:
    """The execution of one step within a run (spec §7)."""

    step: Step
    idempotency_key: str
    status: StepStatus = "pending"
    result: JSON = None
    attempts: list[Attempt] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    wait_started_at: float | None = None
    wait_due: float | None = None
    reason: str | None = None  # set when the step ended with no attempt to explain it

    @property
    def id(self) -> str:
        return self.step.id

    def attempt(self, number: int) -> Attempt:
        for a in self.attempts:
            if a.number == number:
                return a
        raise KeyError(number)


@dataclass
class Run:
    """The live or journaled picture of one run (spec §7), changed only by ``apply``."""

    id: str
    workflow: Workflow
    clock: ClockKind = "real"
    payload: JSON = None
    status: RunStatus = "running"
    steps: dict[str, StepRun] = field(default_factory=dict)
    started_at: float = 0.0
    ended_at: float | None = None
    now: float = 0.0  # the latest time seen on the run's clock
    resumes: list[float] = field(default_factory=list)
    #: ``cancelled`` or ``interrupted`` when the user stopped the run (spec §3.2, §6.3:
    #: its header says so), else None.
    stopped: StopReason | None = None
    events: list[Event] = field(default_factory=list)
    #: Where else to see this run, by label (its engine's own UI, spec §9): not from
    #: events, so not journaled; the timeline's header links to each.
    links: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.steps:
            self.steps = {
                s.id: StepRun(step=s, idempotency_key=idempotency_key(self.id, s.id))
                for s in self.workflow.steps
            }

    @property
    def workflow_id(self) -> str:
        return self.workflow.id

    @classmethod
    def from_events(cls, workflow: Workflow, events: Iterable[Event]) -> Run:
        """Rebuild a run from its events (the journal's and ``%woml show``'s path)."""
        run: Run | None = None
        for event in events:
            if run is None:
                if not isinstance(event, RunStarted):
                    raise ValueError("a run's events must begin with run-started")
                run = cls(
                    id=event.run_id, workflow=workflow, clock=event.clock, payload=event.payload
                )
            run.apply(event)
        if run is None:
            raise ValueError("no events")
        return run

    def apply(self, event: Event) -> None:
        """Fold one event into the picture (STYLE 4)."""
        self.events.append(event)
        self.now = max(self.now, event.at)
        if isinstance(event, RunStarted):
            self.started_at = event.at
            self.status = "running"
        elif isinstance(event, RunResumed):
            self.resumes.append(event.at)
            self.status = "running"
            self.stopped = None
            self.ended_at = None
        elif isinstance(event, RunFinished):
            self.status = event.status
            self.stopped = event.stopped
            self.ended_at = event.at
        else:
            self._apply_step_event(event)

    def _apply_step_event(self, event: Event) -> None:
        step_id = getattr(event, "step_id", None)
        if step_id is None or step_id not in self.steps:
            return
        sr = self.steps[step_id]
        sr.status = step_status_after(sr.status, event.kind, getattr(event, "status", None))
        if isinstance(event, AttemptStarted):
            if sr.wait_started_at is not None:
                sr.waits.append(event.at - sr.wait_started_at)
            sr.wait_started_at = sr.wait_due = None
            sr.attempts.append(
                Attempt(
                    number=event.number, idempotency_key=event.idempotency_key, started_at=event.at
                )
            )
        elif isinstance(event, LogEmitted):
            sr.attempt(event.number).logs.append(event.text)
        elif isinstance(event, CallStarted):
            sr.attempt(event.number).calls.append(
                Call(
                    name=event.name,
                    method=event.method,
                    url=event.url,
                    request_headers=dict(event.request_headers),
                    idempotency_header=event.idempotency_header,
                    idempotency_value=event.idempotency_value,
                    started_at=event.at,
                )
            )
        elif isinstance(event, CallFinished):
            call = sr.attempt(event.number).calls[event.call_index]
            call.outcome = event.outcome
            call.status = event.status
            call.replayed = event.replayed
            call.response = event.response
            call.error = event.error
            call.ended_at = event.at
            call.injected = event.injected
        elif isinstance(event, AttemptFinished):
            a = sr.attempt(event.number)
            a.outcome = event.outcome
            a.ended_at = event.at
            a.result = event.result
            a.explanation = event.explanation
            a.error = event.error
        elif isinstance(event, WaitScheduled):
            sr.wait_started_at = event.at
            sr.wait_due = event.due
        elif isinstance(event, StepFinished):
            sr.result = event.result
            sr.reason = event.reason
            sr.wait_started_at = sr.wait_due = None

    # Rendering lives in woml_magic.timeline; imported lazily to keep the model light.
    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        from .timeline import mimebundle

        return mimebundle(self)

    def to_text(self) -> str:
        """The whole plain-text timeline (spec §6.3): every step, where a saved
        output's ``text/plain`` shows a big run's first steps only."""
        from .timeline import render_text

        return render_text(self)

    def to_svg(self, *, theme: ThemeName = "light", header: bool = True) -> str:
        """The timeline as a standalone SVG document (spec §6.3): the notebook's drawing
        in ``theme`` (``"light"`` or ``"dark"``), under its header line unless ``header``
        is false, with literal colours and fonts, so it looks the same in a browser, a
        slide or a Markdown page (``woml_magic.timeline.image``)."""
        from .timeline.image import to_svg

        return to_svg(self, theme=theme, header=header)

    def save(
        self,
        path: str | os.PathLike[str],
        *,
        theme: ThemeName = "light",
        scale: float = 2.0,
        header: bool = True,
    ) -> Path:
        """Write the timeline to ``path`` as ``.svg`` (``to_svg``) or ``.png`` (spec §6.3),
        and return the absolute path written. A PNG has ``scale`` pixels per drawing px
        (2: crisp on slides) and needs the ``png`` extra; the folder must exist. Anything
        else raises ``WomlImageError`` naming what is allowed."""
        from .timeline.image import save

        return save(self, path, theme=theme, scale=scale, header=header)

    def __repr__(self) -> str:
        return f"<Run {self.id} {self.workflow_id} {self.status}>"


#: The step status each kind of event leaves behind (spec §5.2); ``step-finished``
#: carries its own. Other kinds leave the status as it was.
STEP_STATUS_BY_KIND: dict[str, StepStatus] = {
    "step-started": RUNNING,
    "attempt-started": RUNNING,
    "wait-scheduled": WAITING,
}


def step_status_after(current: StepStatus, kind: str, status: str | None = None) -> StepStatus:
    """A step's status after an event of ``kind`` (with ``status`` for ``step-finished``).

    The one fold of step status: ``Run.apply`` and the journal's run summaries both use
    it, so ``%woml runs`` and the ``Run`` cannot disagree.
    """
    if kind == "step-finished" and status is not None:
        return status  # type: ignore[return-value]  # journaled by our own engine
    return STEP_STATUS_BY_KIND.get(kind, current)
