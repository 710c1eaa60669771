"""How each attempt outcome looks on the timeline (spec §6.3: colour is never the only
cue).

One ``OutcomeStyle`` per outcome of spec §3.2 (its legend words are ``RULES``'s), plus
the timeline's own states: ``running`` and ``planned`` (an attempt not yet run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from ..outcomes import (
    AMBIGUOUS,
    CANCELLED,
    CRASH,
    INTERRUPTED,
    INVALID_JSON,
    OVERSIZED,
    RULES,
    RUNNING,
    SUCCEEDED,
    THREW,
    TIMEOUT,
    Outcome,
)

Pattern = Literal["solid", "stripes", "cross", "dashed"]

#: The state of an attempt not yet run: drawn from the policy's schedule (spec §6.3).
PLANNED: Final = "planned"


@dataclass(frozen=True)
class OutcomeStyle:
    """How one outcome looks (spec §6.3: colour is never the only cue).

    ``color`` is the bar's fill; text inside a bar is always white (``BAR_TEXT``), and
    every fill is dark enough for white text to meet WCAG AA (4.5:1) in any theme.
    ``pattern`` is the second cue: ``solid`` for success and running, ``stripes`` for a
    retryable failure (``threw``), ``cross`` for fail-closed outcomes, ``dashed``
    outline for planned attempts. Labels also carry the outcome word.
    """

    label: str
    color: str
    pattern: Pattern
    meaning: str


#: The fixed colour of text inside a bar (every fill below is ≥ 4.5:1 against it).
BAR_TEXT = "#ffffff"


def _rule(outcome: Outcome, color: str, pattern: Pattern) -> OutcomeStyle:
    """The style of one of spec §3.2's outcomes; its meaning is the rule's legend."""
    return OutcomeStyle(outcome, color, pattern, RULES[outcome].legend)


#: spec §3.2's outcomes plus the live states, in legend order. ``threw`` is amber, not
#: red: a step that succeeded after retries must not read as a failure.
OUTCOME_STYLES: dict[str, OutcomeStyle] = {
    style.label: style
    for style in (
        _rule(SUCCEEDED, "#2e7d32", "solid"),
        _rule(THREW, "#b45309", "stripes"),
        _rule(TIMEOUT, "#c62828", "cross"),
        _rule(INVALID_JSON, "#ad1457", "cross"),
        _rule(OVERSIZED, "#7b1fa2", "cross"),
        _rule(CRASH, "#8e0000", "cross"),
        _rule(INTERRUPTED, "#4527a0", "cross"),
        _rule(CANCELLED, "#6d4c41", "cross"),
        _rule(AMBIGUOUS, "#c2185b", "cross"),
        OutcomeStyle(RUNNING, "#1565c0", "solid", "running now"),
        OutcomeStyle(PLANNED, "#616161", "dashed", "not yet run"),
    )
}


def outcome_style(outcome: str) -> OutcomeStyle:
    """The style of ``outcome``; an unknown outcome keeps its own name as its label."""
    return OUTCOME_STYLES.get(outcome) or OutcomeStyle(outcome, "#616161", "cross", outcome)
