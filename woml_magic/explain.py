"""One sentence per attempt: why it did or did not retry (spec §3.2).

A retried attempt and the last attempt read differently, and every fail-closed
outcome says why repeating it would be unsafe or meaningless (the seed's wording).
"""

from __future__ import annotations

from .errors import excerpt
from .model import Step
from .outcomes import (
    AMBIGUOUS,
    CANCELLED,
    CRASH,
    INTERRUPTED,
    INVALID_JSON,
    OVERSIZED,
    SUCCEEDED,
    THREW,
    TIMEOUT,
    Outcome,
)
from .policy import format_duration

#: An attempt found without an outcome on resume (spec §5.3).
_ON_RESUME = (
    "the process stopped during it and the journal has no outcome; whether its effects "
    "happened is unknown, so WOML fails closed until you resume with --retry-interrupted"
)

_FAIL_CLOSED: dict[Outcome, str] = {
    TIMEOUT: (
        "it ran past its {timeout} timeout; its effects may be partial or still under "
        "way, so WOML fails closed instead of retrying"
    ),
    INVALID_JSON: (
        "its result is not a JSON value{detail}; running the same code again would return "
        "the same kind of value, so WOML fails closed"
    ),
    OVERSIZED: (
        "its result is larger than the result limit{detail}; repeating it would produce the "
        "same result, so WOML fails closed"
    ),
    CRASH: (
        "the script worker or the host failed{detail}; that is not a definitive failure of "
        "the script, so WOML fails closed rather than repeat it"
    ),
    INTERRUPTED: (
        "the kernel was interrupted during it; whether its effects happened is unknown, so "
        "WOML fails closed"
    ),
    CANCELLED: "the run was cancelled during it; WOML never retries a cancelled attempt",
    AMBIGUOUS: (
        "it made an HTTP call without an idempotency key whose outcome is unknown and then "
        "failed{detail}; a retry could repeat that effect, so WOML fails closed"
    ),
}


def interrupted_message(step_id: str, number: int) -> str:
    """The error message of an attempt found open on resume (spec §5.3, verbatim)."""
    return (
        f"attempt {number} of {step_id} was interrupted; whether its effects happened is "
        "unknown. Check the external system, then resume with --retry-interrupted to run "
        "it again with the same idempotency key."
    )


def explain(
    outcome: Outcome,
    step: Step,
    number: int,
    *,
    original: Outcome | None = None,
    detail: str | None = None,
    error_name: str | None = None,
    keyed_ambiguity: bool = False,
    on_resume: bool = False,
) -> str:
    """The explanation of attempt ``number`` of ``step`` ending with ``outcome``;
    ``on_resume``: an ``interrupted`` attempt found without an outcome (spec §5.3)."""
    attempts = step.policy.attempts
    of = f"Attempt {number} of {attempts}"
    if outcome == SUCCEEDED:
        return f"{of} succeeded; no retry needed."
    if outcome == THREW:
        # The name is the script's (`e.name = …`): quoted as a window (STYLE 15).
        thrown = f"the script threw {excerpt(error_name, 0, 60)[0]}" if error_name \
            else "the script threw"
        if number < attempts:
            wait = format_duration(step.policy.wait(number))
            if keyed_ambiguity:
                return (
                    f"{of} failed because {thrown}; a call's outcome was unknown, but it "
                    f"carried an idempotency key, so the API's key contract makes a repeat "
                    f"safe and WOML retries after waiting {wait}."
                )
            return (
                f"{of} failed because {thrown}, a definitive script failure, so WOML retries "
                f"after waiting {wait}."
            )
        return (
            f"{of} failed because {thrown} on the last allowed attempt, so the step failed."
        )
    template = _ON_RESUME if on_resume and outcome == INTERRUPTED else _FAIL_CLOSED[outcome]
    extra = ""
    if outcome == AMBIGUOUS and original and original != THREW:
        extra = f" (the attempt itself ended {original})"
    elif detail and outcome in (INVALID_JSON, OVERSIZED, CRASH):
        extra = f" ({excerpt(detail.rstrip('.'), 0, 200)[0]})"
    text = template.format(timeout=format_duration(step.timeout), detail=extra)
    return f"{of} was not retried: {text}."
