"""What-if overlays: jitter and retry budgets — NOT WOML semantics (spec §11).

WOML's schedule is deterministic: ``wait(k)`` exactly, no jitter (spec §3.1; the
seed document: exponential backoff "currently adds no jitter"). The lab shows what
other clients do *beside* it, never instead of it: an overlay is only ever given to
``simulate`` for a separate scenario, and everything it draws comes from its own random
stream, so the WOML scenario of the same seed is the same with or without it.

``WhatIf.parse("jitter=full,budget=10%")`` reads the magic's ``--what-if`` text:

- ``jitter=full|equal|decorrelated`` — the three strategies of Marc Brooker's
  "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015), with WOML's own
  ``wait(k)`` as the article's ``min(cap, base × 2^attempt)``;
- ``budget=<percent>`` — a retry budget: a token bucket shared by the clients of one
  layer; every first attempt deposits ``ratio`` tokens and every retry spends one; a
  retry without a whole token is not made and the client gives up. This is Finagle's
  ``RetryBudget`` (``percentCanRetry``; here without its TTL and minimum retry rate)
  and the per-client retry budget of *Site Reliability Engineering* ch. 21 ("a request
  will only be retried as long as this ratio is below 10%"). The lab's N virtual
  clients play one calling service, so they share one bucket per retrying layer: a
  bucket per virtual client, which makes one first attempt, could never afford a
  retry at 10%.
"""

from __future__ import annotations

import difflib
import math
import random
import re
from dataclasses import dataclass
from typing import Literal

from ..errors import WhatIfError, quote
from ..policy import RetryPolicy

Jitter = Literal["full", "equal", "decorrelated"]
JITTERS: tuple[Jitter, ...] = ("full", "equal", "decorrelated")
KEYS = ("jitter", "budget")

#: Every overlay's label ends with this, in plots and in ``str()``.
NOT_WOML = "not WOML semantics"

#: A percentage's number: ASCII digits (``float`` takes ``１0`` and ``٥`` too).
_PERCENT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)")


def _allowed() -> str:
    return (
        f"write jitter={'|'.join(JITTERS)} and/or budget=<percent> such as budget=10%, "
        f"separated by commas"
    )


@dataclass(frozen=True)
class WhatIf:
    """One overlay: a ``jitter`` kind, a retry ``budget`` ratio (0.1 = 10%), or both.

    ``str(overlay)`` and ``overlay.label`` always say it is not WOML semantics.
    """

    jitter: Jitter | None = None
    budget: float | None = None

    def __post_init__(self) -> None:
        if self.jitter is not None and self.jitter not in JITTERS:
            raise WhatIfError(f"unknown jitter {self.jitter!r}; {_allowed()}")
        if self.budget is not None and not (math.isfinite(self.budget) and 0 <= self.budget <= 10):
            raise WhatIfError(
                f"budget must be a ratio from 0 to 10 (0% to 1000%), got {self.budget!r}"
            )
        if self.jitter is None and self.budget is None:
            raise WhatIfError(f"an overlay needs jitter, budget or both; {_allowed()}")

    @classmethod
    def parse(cls, text: str) -> WhatIf:
        """Read ``"jitter=full"``, ``"budget=10%"`` or ``"jitter=equal,budget=5%"``."""
        if not isinstance(text, str):
            raise WhatIfError(f"a what-if is text, not {type(text).__name__}; {_allowed()}")
        jitter: Jitter | None = None
        budget: float | None = None
        seen: set[str] = set()
        items = [item.strip() for item in text.replace(" ", ",").split(",") if item.strip()]
        if not items:
            raise WhatIfError(f"empty what-if; {_allowed()}")
        for item in items:
            key, sep, value = (part.strip() for part in item.partition("="))
            if not sep:
                raise WhatIfError(f"what-if {quote(item)} has no '='; {_allowed()}")
            if key not in KEYS:
                near = difflib.get_close_matches(key, KEYS, n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                raise WhatIfError(f"unknown what-if {quote(key, 30)}{hint}; {_allowed()}")
            if key in seen:
                raise WhatIfError(
                    f"what-if {key} is given twice in {quote(text)}; one overlay has one {key} "
                    f"(compare two values as two overlays)"
                )
            seen.add(key)
            if key == "jitter":
                if value not in JITTERS:
                    near = difflib.get_close_matches(value, JITTERS, n=1)
                    hint = f" (did you mean {near[0]}?)" if near else ""
                    raise WhatIfError(
                        f"unknown jitter {quote(value, 30)}{hint}; choose one of "
                        f"{', '.join(JITTERS)}"
                    )
                jitter = value
            else:
                budget = _parse_percent(value)
        return cls(jitter=jitter, budget=budget)

    @property
    def label(self) -> str:
        """``"what-if: full jitter + retry budget 10% (not WOML semantics)"``."""
        parts = []
        if self.jitter is not None:
            parts.append(f"{self.jitter} jitter")
        if self.budget is not None:
            parts.append(f"retry budget {self.budget * 100:g}%")
        return f"what-if: {' + '.join(parts)} ({NOT_WOML})"

    def __str__(self) -> str:
        return self.label

    def wait(self, policy: RetryPolicy, k: int, previous: float, rng: random.Random) -> float:
        """The overlay's wait in seconds after failed attempt ``k`` (WOML's is ``wait(k)``).

        With ``w = policy.wait(k)`` (WOML's capped exponential or fixed wait), per the
        AWS article:

        - full jitter: ``U(0, w)``;
        - equal jitter: ``w/2 + U(0, w/2)``;
        - decorrelated jitter: ``min(cap, U(base, previous × 3))`` with
          ``base = retry-delay``, ``cap = retry-max-delay`` or, without one, the largest
          wait of WOML's schedule; ``previous`` is this client's last such wait
          (``base`` before the first). With fixed backoff the cap is the delay, so it
          draws nothing.

        Without ``jitter`` it is WOML's ``wait(k)`` (a budget alone changes no wait).
        """
        w = policy.wait(k).total_seconds()
        if self.jitter == "full":
            return rng.uniform(0.0, w)
        if self.jitter == "equal":
            return w / 2 + rng.uniform(0.0, w / 2)
        if self.jitter == "decorrelated":
            base = policy.delay.total_seconds()
            cap = decorrelated_cap(policy)
            if cap <= base:
                return cap
            return min(cap, rng.uniform(base, max(base, previous * 3)))
        return w


def decorrelated_cap(policy: RetryPolicy) -> float:
    """Decorrelated jitter's cap: ``retry-max-delay``, else the schedule's largest wait."""
    if policy.max_delay is not None and policy.backoff == "exponential":
        return policy.max_delay.total_seconds()
    waits = policy.waits()
    return max(waits).total_seconds() if waits else policy.delay.total_seconds()


def _parse_percent(value: str) -> float:
    if not value.endswith("%") or not _PERCENT.fullmatch(value[:-1]):
        raise WhatIfError(
            f"budget {quote(value, 30)} is not a percentage; write it with % and ASCII "
            "digits, such as budget=10%"
        )
    number = float(value[:-1])
    if not (math.isfinite(number) and 0 <= number <= 1000):
        raise WhatIfError(f"budget {quote(value, 30)} must be from 0% to 1000%")
    return number / 100


@dataclass
class RetryBudget:
    """A retry budget's token bucket (module docstring): deposit per first attempt,
    one token per retry."""

    ratio: float
    balance: float = 0.0

    def deposit(self) -> None:
        """A first attempt: ``ratio`` more tokens."""
        self.balance += self.ratio

    def withdraw(self) -> bool:
        """Spend one token for a retry; False (and nothing spent) when there is none."""
        # Tolerance: ten deposits of 0.1 must buy one retry despite float rounding.
        if self.balance + 1e-9 < 1.0:
            return False
        self.balance -= 1.0
        return True
