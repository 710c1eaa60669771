"""Events are data (spec §5.2, STYLE 4): what an event must say is checked where it is made."""

from __future__ import annotations

import dataclasses
import json

import pytest

from woml_magic.events import (
    EVENT_TYPES,
    AttemptError,
    AttemptEvent,
    AttemptFinished,
    StepEvent,
    event_from_dict,
)

STEP_KINDS = sorted(k for k, cls in EVENT_TYPES.items() if issubclass(cls, StepEvent))
ATTEMPT_KINDS = sorted(k for k, cls in EVENT_TYPES.items() if issubclass(cls, AttemptEvent))


def required(cls: type) -> dict[str, object]:
    """The fields an event of ``cls`` cannot be made without, beyond run_id and at."""
    extra: dict[str, object] = {}
    if issubclass(cls, StepEvent):
        extra["step_id"] = "charge"
    if issubclass(cls, AttemptEvent):
        extra["number"] = 2
    return extra


def test_every_event_of_a_step_is_a_step_event() -> None:
    assert sorted([
        "attempt-finished", "attempt-started", "call-finished", "call-started", "log",
        "step-finished", "step-started", "wait-scheduled",
    ]) == STEP_KINDS


@pytest.mark.parametrize("kind", STEP_KINDS)
def test_a_step_event_without_its_step_id_is_an_error_where_it_is_made(kind: str) -> None:
    cls = EVENT_TYPES[kind]
    with pytest.raises(TypeError, match="step_id"):
        cls(run_id="r", at=0.0)  # type: ignore[call-arg]
    event = cls(run_id="r", at=0.0, **required(cls))
    assert event.step_id == "charge"


def test_every_event_of_an_attempt_is_an_attempt_event() -> None:
    assert sorted(
        ["attempt-finished", "attempt-started", "call-finished", "call-started", "log"]
    ) == ATTEMPT_KINDS


@pytest.mark.parametrize("kind", ATTEMPT_KINDS)
def test_an_attempt_event_without_its_number_is_an_error_where_it_is_made(kind: str) -> None:
    cls = EVENT_TYPES[kind]
    with pytest.raises(TypeError, match="number"):
        cls(run_id="r", at=0.0, step_id="s")
    assert cls(run_id="r", at=0.0, **required(cls)).number == 2


@pytest.mark.parametrize("kind", sorted(EVENT_TYPES))
def test_fields_after_run_id_and_at_are_keyword_only_and_round_trip(kind: str) -> None:
    cls = EVENT_TYPES[kind]
    extra = required(cls)
    if extra:
        with pytest.raises(TypeError):
            cls("r", 0.5, "s")  # type: ignore[misc]
    event = cls("r", 0.5, **extra)
    assert event_from_dict(event.to_dict()) == event


def test_run_finished_carries_why_a_stopped_run_ended_and_old_journals_read_none() -> None:
    # spec §3.2, §6.3: a cancelled or interrupted run's header says so; a journal written
    # before the field existed reads back as a run that ended by itself.
    from woml_magic.events import RunFinished, event_from_dict

    event = RunFinished(run_id="r", at=1.0, status="failed", stopped="cancelled")
    assert event_from_dict(event.to_dict()) == event
    old = {k: v for k, v in event.to_dict().items() if k != "stopped"}
    assert event_from_dict(old) == RunFinished(run_id="r", at=1.0, status="failed")


# -- an attempt's error is a record of its own (spec §3.2) -------------------------------


def test_an_attempt_error_travels_as_a_record_and_reads_back_as_one() -> None:
    error = AttemptError("HttpError", "503 busy", 7)
    event = AttemptFinished(run_id="r", at=1.5, step_id="charge", number=2, outcome="threw",
                            error=error, explanation="retried")
    data = event.to_dict()
    assert data["error"] == {"name": "HttpError", "message": "503 busy", "line": 7}
    back = event_from_dict(json.loads(json.dumps(data)))
    assert isinstance(back, AttemptFinished)
    assert back == event
    assert isinstance(back.error, AttemptError)
    assert event_from_dict({**data, "error": None}) == dataclasses.replace(event, error=None)


@pytest.mark.parametrize(
    "error",
    [
        {"name": "E"},
        {"name": 1, "message": "m"},
        {"name": "E", "message": "m", "line": "3"},
        {"name": "E", "message": "m", "line": True},
        {"name": "E", "message": "m", "stack": "…"},
        ["E", "m", 3],
    ],
    ids=["no-message", "name-not-text", "line-text", "line-bool", "extra-key", "a-list"],
)
def test_an_error_that_is_not_name_message_line_is_refused(error: object) -> None:
    data = AttemptFinished(run_id="r", at=0.0, step_id="s", number=1, outcome="threw").to_dict()
    with pytest.raises(ValueError, match=r"its error is not \{name, message, line\}"):
        event_from_dict({**data, "error": error})
