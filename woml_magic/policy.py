"""Durations and the retry policy (spec §2.2, §2.4, §3.1).

A policy is one frozen object per step; ``waits()`` is the whole planned schedule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .policy_translation import Translation

Backoff = Literal["fixed", "exponential"]

MAX_DURATION = timedelta(hours=24)
MIN_ATTEMPTS, MAX_ATTEMPTS = 1, 10

_UNIT_MS = {"h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}
_UNIT_ORDER = ("h", "m", "s", "ms")
# ASCII digits only: ``\d`` would also accept digits such as "١" (Arabic-Indic one).
_GROUP = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)")


class DurationError(ValueError):
    """A duration string that breaks spec §2.4; the message says what is allowed."""


def parse_duration(text: str) -> timedelta:
    """Parse ``<number><unit>`` groups in decreasing unit order, each unit once (spec §2.4).

    Examples: ``250ms``, ``1s``, ``1.5s``, ``2m``, ``1m30s``, ``1h``. No sign, no
    spaces, no bare numbers.
    """
    allowed = "write one or more <number><unit> groups such as 250ms, 1.5s, 1m30s or 1h"
    shown = text if len(text) <= 40 else text[:39] + "…"
    if text == "":
        raise DurationError(f"empty duration; {allowed}")
    pos = 0
    total_ms = 0.0
    last_rank = -1
    while pos < len(text):
        m = _GROUP.match(text, pos)
        if m is None:
            rest = text[pos:]
            if rest[0].isspace() or " " in text:
                why = "durations contain no spaces"
            elif rest[0] in "+-":
                why = "durations have no sign"
            elif re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", rest):
                why = f"the number {rest} has no unit (h, m, s or ms)"
            else:
                why = f"cannot read {rest[:20]!r}"
            raise DurationError(f"invalid duration {shown!r}: {why}; {allowed}")
        number, unit = m.group(1), m.group(2)
        rank = _UNIT_ORDER.index(unit)
        if rank <= last_rank:
            raise DurationError(
                f"invalid duration {shown!r}: units must appear once each, in the order "
                f"h, m, s, ms; {allowed}"
            )
        last_rank = rank
        total_ms += float(number) * _UNIT_MS[unit]
        pos = m.end()
    try:
        return timedelta(milliseconds=total_ms)
    except OverflowError:
        # float("1" * 400) is inf; timedelta also stops at 999,999,999 days.
        raise DurationError(f"invalid duration {shown!r}: it is far too long; {allowed}") from None


def format_duration(value: timedelta | float) -> str:
    """Render a duration the way a person writes it: ``250ms``, ``1s``, ``1.5s``, ``1m30s``."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    ms = round(seconds * 1000)
    if ms == 0:
        # A nonzero wait below half a millisecond must not read as no wait at all.
        return "0s" if seconds == 0 else f"{seconds * 1000:.3g}ms"
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        text = f"{ms / 1000:.3f}".rstrip("0").rstrip(".")
        return f"{text}s"
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s = rem / 1000
    parts = []
    if h:
        parts.append(f"{h}h")
    if m:
        parts.append(f"{m}m")
    if s:
        parts.append(f"{s:.3f}".rstrip("0").rstrip(".") + "s")
    return "".join(parts)


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts a step gets and how long to wait between them (spec §3.1).

    ``attempts`` counts total attempts (``retry="4"`` is four attempts, not four
    retries after the first). No jitter.
    """

    attempts: int = 1
    backoff: Backoff = "fixed"
    delay: timedelta = timedelta(seconds=1)
    max_delay: timedelta | None = None

    def __post_init__(self) -> None:
        if not MIN_ATTEMPTS <= self.attempts <= MAX_ATTEMPTS:
            raise ValueError(f"attempts must be 1..10, got {self.attempts}")
        if self.backoff not in ("fixed", "exponential"):
            raise ValueError(f"backoff must be fixed or exponential, got {self.backoff!r}")
        if self.delay < timedelta(0) or self.delay > MAX_DURATION:
            raise ValueError(f"delay must be between 0 and 24h, got {self.delay}")
        if self.max_delay is not None and not self.delay <= self.max_delay <= MAX_DURATION:
            raise ValueError("max_delay must be at least delay and at most 24h")

    def wait(self, k: int) -> timedelta:
        """The wait after a retryable failure of attempt ``k`` (1-based), spec §3.1.

        fixed: ``wait(k) = delay``; exponential:
        ``wait(k) = min(delay × 2^(k−1), max_delay)``, uncapped without ``max_delay``.
        """
        if self.backoff == "fixed":
            return self.delay
        factor: int = 2 ** (k - 1)  # int ** int is typed Any because k - 1 could be < 0
        grown = self.delay * factor
        if self.max_delay is not None and grown > self.max_delay:
            return self.max_delay
        return grown

    def waits(self) -> list[timedelta]:
        """Every planned wait, before attempts 2..n: ``len == attempts - 1``."""
        return [self.wait(k) for k in range(1, self.attempts)]

    def describe(self) -> str:
        """The policy in words (spec §6.3): ``4 attempts · exponential 1s → max 10s``."""
        n = f"{self.attempts} attempt" + ("" if self.attempts == 1 else "s")
        return f"{n} · {self.describe_waits()}"

    def describe_waits(self) -> str:
        """The schedule in words, without the attempt count: ``no retry``,
        ``fixed 1s``, ``exponential 1s → max 10s`` (a step's header says the count
        itself, as attempts used of allowed, spec §6.3)."""
        if self.attempts == 1:
            return "no retry"
        if self.backoff == "fixed":
            text = f"fixed {format_duration(self.delay)}"
            if self.max_delay is not None:
                text += " (retry-max-delay has no effect with fixed backoff)"
            return text
        cap = "uncapped" if self.max_delay is None else f"max {format_duration(self.max_delay)}"
        return f"exponential {format_duration(self.delay)} → {cap}"

    def to(self, target: str) -> Translation:
        """This policy in another engine (spec §11): ``"temporal"``, ``"stepfunctions"``,
        ``"tenacity"`` or ``"stamina"``; see ``policy_targets.translate``."""
        # Imported here: policy_targets builds on this module.
        from .policy_targets import translate

        return translate(self, target)


def attempts_used(used: int, allowed: int) -> str | None:
    """Attempts used against allowed, for a step's header (spec §6.3): ``3 of 4
    attempts``; None for a step that made no attempt (not run, pending): it shows no
    count."""
    if used == 0:
        return None
    return f"{used} of {allowed} attempt{'' if allowed == 1 else 's'}"
