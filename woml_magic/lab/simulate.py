"""The lab's model path: N clients, one policy, one server model, one clock (spec §11).

``simulate`` is a discrete-event simulation (a ``heapq`` of the clients' next
requests) on simulated seconds. Each client is one run of a one-step workflow whose
attempt is one request: a 2xx answer succeeds the step, anything else throws and is
retried by WOML's schedule (spec §3.1, §3.2: a thrown failure retries while attempts
remain). The wait before attempt ``k + 1`` is the policy's ``wait(k)`` exactly — the
schedule is precomputed once — counted from the moment the failed answer reaches
the client (``latency`` after the request). ``Retry-After`` is not read: WOML's
schedule does not (its wait is the policy's).

``layers=2`` nests two retrying callers: each attempt of the outer layer is a whole
retried call of the inner one (both with the same policy), the amplification of
retries at every layer (*Site Reliability Engineering* ch. 22, "Addressing Cascading
Failures"): with every call failing, a client makes ``attempts ** layers`` requests.

An ``overlay`` (``whatif.WhatIf``) replaces the waits by jittered ones and/or gates
retries by a budget, for a separate scenario labelled as not WOML semantics. All the
randomness comes from the seed through separate streams — arrivals, the order of
simultaneous requests, latencies, jitter — so a WOML run and an overlay run of the
same seed see the same arrivals, and computing one never changes the other.
"""

from __future__ import annotations

import heapq
import math
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from ..errors import LabModelError, quote
from ..limits import MAX_MODEL_CLIENTS, clients_allowed
from ..policy import DurationError, RetryPolicy, format_duration, parse_duration
from .server import ModelServer, Request
from .whatif import RetryBudget, WhatIf

ClientOutcome = Literal["succeeded", "gave-up", "budget-denied"]
ArrivalKind = Literal["at-once", "uniform", "poisson"]

MAX_LAYERS = 3

#: The label of the WOML scenario, beside every overlay's "what-if: … (not WOML
#: semantics)".
WOML_LABEL = "WOML schedule (no jitter)"


@dataclass(frozen=True)
class Arrivals:
    """When the clients start: all at ``t = 0``, spread uniformly over ``value``
    seconds, or as a Poisson process of ``value`` clients per second."""

    kind: ArrivalKind = "at-once"
    value: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("at-once", "uniform", "poisson"):
            raise LabModelError(f"unknown arrivals {self.kind!r}; {_ARRIVALS_ALLOWED}")
        if self.kind != "at-once" and not (math.isfinite(self.value) and self.value > 0):
            what = "window" if self.kind == "uniform" else "rate"
            raise LabModelError(f"{self.kind} arrivals need a positive {what}, got {self.value!r}")

    @classmethod
    def at_once(cls) -> Arrivals:
        """Every client starts at ``t = 0`` (the AWS article's contention case)."""
        return cls("at-once", 0.0)

    @classmethod
    def uniform(cls, over: float) -> Arrivals:
        """Each client starts at a uniform random time in ``[0, over)`` seconds."""
        return cls("uniform", over)

    @classmethod
    def poisson(cls, rate: float) -> Arrivals:
        """Clients start as a Poisson process of ``rate`` per second from ``t = 0``."""
        return cls("poisson", rate)

    @classmethod
    def parse(cls, text: str) -> Arrivals:
        """``"at-once"``, ``"uniform:60s"`` or ``"poisson:20/s"``."""
        kind, _, value = text.strip().partition(":")
        if kind == "at-once" and not value:
            return cls.at_once()
        if kind == "uniform" and value:
            try:
                return cls.uniform(parse_duration(value).total_seconds())
            except DurationError as exc:
                raise LabModelError(
                    f"invalid arrivals {quote(text)} ({_ARRIVALS_ALLOWED}): {exc}"
                ) from None
        # ASCII digits only: float() would take "２0" and "٥" as well.
        if kind == "poisson" and re.fullmatch(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)/s", value):
            return cls.poisson(float(value[:-2]))
        raise LabModelError(f"invalid arrivals {quote(text)}; {_ARRIVALS_ALLOWED}")

    def times(self, n: int, rng: random.Random) -> list[float]:
        """The start times of ``n`` clients (client ``i`` starts at ``times[i]``)."""
        if self.kind == "at-once":
            return [0.0] * n
        if self.kind == "uniform":
            return [rng.uniform(0.0, self.value) for _ in range(n)]
        t, out = 0.0, []
        for _ in range(n):
            t += rng.expovariate(self.value)
            out.append(t)
        return out

    def describe(self) -> str:
        """``"all at t=0"``, ``"uniform over 1m40s"`` or ``"Poisson 10/s"``."""
        if self.kind == "at-once":
            return "all at t=0"
        if self.kind == "uniform":
            return f"uniform over {format_duration(self.value)}"
        return f"Poisson {self.value:g}/s"


_ARRIVALS_ALLOWED = "write at-once, uniform:<duration> (uniform:60s) or poisson:<rate>/s"


class Load(NamedTuple):
    """Requests per second in bins of ``bin`` seconds: bin ``i`` is
    ``[starts[i], starts[i] + bin)``; ``ok`` and ``failed`` split ``total``."""

    bin: float
    starts: list[float]
    ok: list[float]
    failed: list[float]

    @property
    def total(self) -> list[float]:
        """All requests per second in each bin."""
        return [a + b for a, b in zip(self.ok, self.failed, strict=True)]

    def peak_to_mean(self) -> float:
        """The busiest bin's rate over the mean rate: 1 for flat load, high for waves."""
        total = self.total
        mean = sum(total) / len(total) if total else 0.0
        return max(total) / mean if mean else 0.0

    def busiest_share(self, fraction: float = 0.1) -> float:
        """The share of all requests that fall in the busiest ``fraction`` of the bins:
        near 1 when the calls come in a few synchronized waves, lower when spread."""
        total = sorted(self.total, reverse=True)
        calls = sum(total)
        if not calls:
            return 0.0
        return sum(total[: max(1, int(len(total) * fraction))]) / calls


class Percentiles(NamedTuple):
    """Completion-time percentiles (seconds from a client's start to its success)."""

    p50: float
    p99: float


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile of ``values`` (``q`` in (0, 100]): the
    smallest value with at least ``q``% of the values at or below it."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class SimResult:
    """One scenario of the lab: every request, and what became of every client.

    ``traffic`` is every request in time order; per client ``i``: ``starts[i]``,
    ``attempts[i]`` (requests it made, all layers), ``ends[i]`` (when its last answer
    reached it) and ``outcomes[i]`` (``succeeded``, ``gave-up`` after its last allowed
    attempt, or ``budget-denied``: a retry the overlay's budget did not allow).
    """

    label: str
    policy: RetryPolicy
    server: ModelServer
    clients: int
    seed: int
    arrivals: Arrivals
    layers: int
    overlay: WhatIf | None
    traffic: list[Request] = field(repr=False)
    starts: list[float] = field(repr=False)
    attempts: list[int] = field(repr=False)
    ends: list[float] = field(repr=False)
    outcomes: list[ClientOutcome] = field(repr=False)

    @property
    def calls(self) -> int:
        """Requests the server received."""
        return len(self.traffic)

    @property
    def successes(self) -> int:
        """Requests answered 2xx."""
        return sum(1 for r in self.traffic if r.status < 300)

    @property
    def failures(self) -> int:
        """Requests answered with an error."""
        return self.calls - self.successes

    @property
    def succeeded(self) -> int:
        """Clients whose workflow succeeded."""
        return self.outcomes.count("succeeded")

    @property
    def gave_up(self) -> int:
        """Clients that did not succeed (their attempts ran out, or the budget)."""
        return self.clients - self.succeeded

    @property
    def amplification(self) -> float:
        """Requests per client: 1 with no retries, up to ``attempts ** layers``."""
        return self.calls / self.clients

    @property
    def completion_times(self) -> list[float]:
        """Seconds from start to success, for each client that succeeded."""
        return [
            end - start
            for start, end, outcome in zip(self.starts, self.ends, self.outcomes, strict=True)
            if outcome == "succeeded"
        ]

    @property
    def percentiles(self) -> Percentiles:
        """p50 and p99 of ``completion_times`` (nearest rank; NaN if none succeeded)."""
        times = self.completion_times
        return Percentiles(percentile(times, 50), percentile(times, 99))

    @property
    def duration(self) -> float:
        """When the last answer reached its client (0 with no clients)."""
        return max(self.ends, default=0.0)

    def load(self, bin: float = 1.0, until: float | None = None) -> Load:
        """Requests per second in bins of ``bin`` seconds from ``t = 0`` to the last
        request (or ``until``), split into successes and failures."""
        if not (math.isfinite(bin) and bin > 0):
            raise LabModelError(f"bin must be a positive number of seconds, got {bin!r}")
        last = self.traffic[-1].time if self.traffic else 0.0
        end = max(last, until or 0.0)
        n = int(end // bin) + 1
        ok = [0.0] * n
        failed = [0.0] * n
        for r in self.traffic:
            i = int(r.time // bin)
            if i < n:
                if r.status < 300:
                    ok[i] += 1
                else:
                    failed[i] += 1
        return Load(
            bin, [i * bin for i in range(n)], [c / bin for c in ok], [c / bin for c in failed]
        )

    def recovered_at(
        self, after: float, *, capacity: float | None = None, hold: float = 5.0, bin: float = 1.0
    ) -> float:
        """When the server recovered: the start of the first bin at or after ``after``
        from which the offered load (all requests/s) stays at or below ``capacity``
        (default: the server's) for ``hold`` seconds, or until the traffic ends.

        ``after`` is typically the outage's end; an already-calm server recovers at
        the first bin there. Returns the end of the traffic if it never calms down
        (it always does: attempts are bounded).
        """
        limit = capacity if capacity is not None else self.server.capacity
        if limit is None:
            raise LabModelError("recovered_at needs a capacity: this server has none")
        load = self.load(bin, until=after)
        total = load.total
        need = max(1, math.ceil(hold / bin))
        first = int(after // bin)
        run = 0
        for i in range(first, len(total)):
            if total[i] <= limit + 1e-9:
                run += 1
                if run >= need or i == len(total) - 1:
                    return load.starts[i - run + 1]
            else:
                run = 0
        return len(total) * bin


def simulate(
    policy: RetryPolicy,
    clients: int,
    server: ModelServer | None = None,
    *,
    seed: int = 0,
    arrivals: Arrivals | str = "at-once",
    overlay: WhatIf | str | None = None,
    layers: int = 1,
) -> SimResult:
    """Run ``clients`` clients of one retried request against ``server`` (module
    docstring); deterministic from ``seed``."""
    if isinstance(arrivals, str):
        arrivals = Arrivals.parse(arrivals)
    if isinstance(overlay, str):
        overlay = WhatIf.parse(overlay)
    server = server if server is not None else ModelServer()
    if not (isinstance(clients, int) and 1 <= clients <= MAX_MODEL_CLIENTS):
        raise LabModelError(
            f"clients must be a whole number from {clients_allowed(model_only=True)}; got "
            f"{quote(clients)}"
        )
    if not (isinstance(layers, int) and 1 <= layers <= MAX_LAYERS):
        raise LabModelError(f"layers must be 1..{MAX_LAYERS}, got {layers!r}")

    # A simulation, not cryptography: seeded streams are the point (S311).
    starts = arrivals.times(clients, random.Random(f"woml-lab:{seed}:arrivals"))  # noqa: S311
    latency_rng = random.Random(f"woml-lab:{seed}:latency")  # noqa: S311
    jitter_rng = random.Random(f"woml-lab:{seed}:jitter")  # noqa: S311
    # Requests at the same instant reach the server in no particular order: a draw
    # from the seed breaks ties (not the client number, which would favour client 0).
    tiebreak = random.Random(f"woml-lab:{seed}:order").random  # noqa: S311
    n_attempts = policy.attempts
    # The precomputed policy path: WOML's wait after attempt k is waits[k].
    waits = [0.0, *(w.total_seconds() for w in policy.waits())]
    mean, sd = server.latency, server.latency_sd
    gauss = latency_rng.gauss
    jitter = overlay is not None and overlay.jitter is not None
    budgets = (
        [RetryBudget(overlay.budget) for _ in range(layers)]
        if overlay is not None and overlay.budget is not None
        else None
    )
    base = policy.delay.total_seconds()

    state = server.start()
    decide = state.decide
    # Per client, per layer (0 = outermost): the current attempt number, and the
    # previous jittered wait (decorrelated jitter's memory).
    counters = [[1] * layers for _ in range(clients)]
    previous = [[base] * layers for _ in range(clients)] if jitter else []
    made = [0] * clients
    ends = [0.0] * clients
    outcomes: list[ClientOutcome] = ["gave-up"] * clients

    queue: list[tuple[float, float, int]] = [(t, tiebreak(), c) for c, t in enumerate(starts)]
    heapq.heapify(queue)
    pop, push = heapq.heappop, heapq.heappush
    inner = layers - 1
    while queue:
        now, _, c = pop(queue)
        counts = counters[c]
        if budgets is not None:
            # A request that is attempt 1 of a layer's call (and of every layer below
            # it) is that layer's first attempt: it deposits.
            for level in range(inner, -1, -1):
                if counts[level] != 1:
                    break
                budgets[level].deposit()
        status, _ = decide(now, c, attempt=counts[inner], outer=counts[0])
        made[c] += 1
        answered = now + (abs(gauss(mean, sd)) if sd else mean)
        if status < 300:
            ends[c] = answered
            outcomes[c] = "succeeded"
            continue
        # Find the innermost layer with an attempt left; deeper layers start over.
        level = inner
        while level >= 0 and counts[level] >= n_attempts:
            level -= 1
        if level < 0:
            ends[c] = answered
            continue
        if budgets is not None and not budgets[level].withdraw():
            ends[c] = answered
            outcomes[c] = "budget-denied"
            continue
        k = counts[level]
        if jitter:
            assert overlay is not None  # for mypy: jitter implies an overlay
            wait = overlay.wait(policy, k, previous[c][level], jitter_rng)
            previous[c][level] = wait
        else:
            wait = waits[k]
        counts[level] = k + 1
        for deeper in range(level + 1, layers):  # a fresh call of each layer below
            counts[deeper] = 1
            if jitter:
                previous[c][deeper] = base
        push(queue, (answered + wait, tiebreak(), c))

    return SimResult(
        label=overlay.label if overlay is not None else WOML_LABEL,
        policy=policy,
        server=server,
        clients=clients,
        seed=seed,
        arrivals=arrivals,
        layers=layers,
        overlay=overlay,
        traffic=state.traffic,
        starts=starts,
        attempts=made,
        ends=ends,
        outcomes=outcomes,
    )


def simulate_many(
    policy: RetryPolicy,
    clients: Iterable[int],
    server: ModelServer | None = None,
    *,
    seed: int = 0,
    arrivals: Arrivals | str = "at-once",
    overlays: Sequence[WhatIf | str | None] = (None,),
    layers: int = 1,
) -> list[SimResult]:
    """``simulate`` for every client count × every overlay (``None`` is WOML's own
    schedule), in that order: the bench's unit of work and ``calls_vs_clients``'s
    input."""
    parsed = [WhatIf.parse(o) if isinstance(o, str) else o for o in overlays]
    return [
        simulate(policy, n, server, seed=seed, arrivals=arrivals, overlay=o, layers=layers)
        for n in clients
        for o in parsed
    ]


def calls_vs_clients(results: Iterable[SimResult]) -> dict[str, list[tuple[int, int]]]:
    """Scenario label → ``[(clients, calls), …]`` sorted by clients, for the plot."""
    points: dict[str, list[tuple[int, int]]] = {}
    for r in results:
        points.setdefault(r.label, []).append((r.clients, r.calls))
    return {label: sorted(p) for label, p in points.items()}
