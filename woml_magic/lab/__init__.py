"""The retry lab (spec §11): N virtual clients of one workflow on one simulated clock.

    import woml_magic as wm
    result = wm.lab(text, clients=1000, seed=1, capacity=20, outage="10s..40s",
                    what_if=["jitter=full", "budget=10%"])
    result                      # summary table, plots, sampled clients' timelines
    result.runs[0]              # a client's real Run (its timeline, its attempts)
    result.traffic              # every request the server received, in time order
    result.overlays             # what-if: … (not WOML semantics) → model-only SimResult

Every client really runs the cell's scripts — the same engine, the same outcome rules
(spec §3.2) — as run ``lab-<seed>-<n>`` (its idempotency keys are §3.5's); its
``services.http.request`` calls go to the server model in this process, without
sockets (``server.ModelServer``: capacity, an outage window, throttling with 429 and
``Retry-After``, optimistic concurrency), or over HTTP to an API on this machine
(``server=api`` with a running ``woml_magic.demo.DemoAPI``, or its URL; scripts may
then reach only that host and port). With the model the lab is deterministic from
``seed`` (``runner``'s docstring says how). What-if overlays (``whatif.WhatIf``:
jitter kinds, retry budgets) are not WOML semantics: each is a model-only simulation
(``simulate``) beside the real runs, labelled so, and never touches them.

Modules: ``runner`` (the real clients), ``server`` (the model), ``simulate`` (the
model path), ``whatif`` (overlays), ``plots`` (SVG). This module stays light: the
engine loads on the first lab.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from ..errors import LabArgumentError, LabModelError, WomlError, quote
from ..limits import MAX_CLIENTS
from .result import (
    AMPLE,
    REAL_LABEL,
    LabResult,
    _model_policy,
)
from .server import (
    PRESETS,
    Cause,
    ModelServer,
    Request,
    outage_window,
    server_model,
)
from .simulate import (
    WOML_LABEL,
    Arrivals,
)
from .whatif import WhatIf

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..engine.config import Fault, Secrets
    from ..model import Run, Workflow

__all__ = [
    "LabArgumentError",
    "LabModelError",
    "LabOptions",
    "LabResult",
    "ModelServer",
    "WhatIf",
    "lab",
    "lab_async",
]



#: The hosts a lab may send real requests to: this machine only (spec §8's demo API).
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class RealAPI(Protocol):
    """A running API on this machine, as the lab needs it (``demo.DemoAPI`` is one)."""

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        ...


@dataclass(frozen=True)
class _Plan:
    """A lab's arguments, checked before anything runs."""

    workflow: Workflow
    clients: int
    seed: int
    model: ModelServer | None
    url: str | None  # a real API's base URL, when there is no model
    arrivals: Arrivals
    overlays: tuple[WhatIf, ...]
    sample: int
    payload: Callable[[int], Any] | None
    workers: int
    secrets: Secrets | None = dataclasses.field(default=None, repr=False)
    faults: tuple[Fault, ...] = ()


class LabOptions(TypedDict, total=False):
    """How to run a lab (spec §11): the keyword arguments of ``lab`` and ``lab_async``
    beside ``clients`` (see ``lab`` for each)."""

    seed: int
    server: ModelServer | str | RealAPI | None
    capacity: float | None
    outage: str | tuple[float | str, float | str] | None
    throttle: bool | None
    occ: bool | None
    start_spread: float
    arrivals: Arrivals | str | None
    what_if: str | WhatIf | Sequence[str | WhatIf]
    sample: int
    payload: Any
    workers: int | None
    secrets: Secrets | Mapping[str, str] | None
    faults: Iterable[str | Fault]


def lab(
    text_or_workflow: str | Workflow, *, clients: int, **options: Unpack[LabOptions]
) -> LabResult:
    """Run ``clients`` real clients of a workflow against a server and return what
    happened (spec §11); blocks until every client's run has ended.

    ``server``: a ``ModelServer``, a preset's name (``server.PRESETS``: unlimited,
    capacity, throttle, occ), or a real API on this machine — a running ``DemoAPI``
    or its URL (scripts may reach only its host and port); default: a model with
    ample capacity. ``capacity``
    (requests/s), ``outage`` (one window: ``"10s..40s"``, or ``(start, end)`` in seconds
    or durations), ``throttle`` (429 with
    ``Retry-After``) and ``occ`` (write conflicts) change the model's fields.
    ``start_spread``: clients start at uniform random times in ``[0, start_spread)``
    seconds (0: all at once); or ``arrivals`` (``"poisson:20/s"``, ``simulate.Arrivals``).
    ``what_if``: overlays such as ``"jitter=full"`` or ``"budget=10%"``, each computed
    by the model path beside the real runs (not WOML semantics). ``sample``: how many
    clients' timelines the display shows. ``payload``: each client's ``context.payload``
    — a value, or a function of the client number; default ``{"client": n, "api": URL}``
    with the URL its requests should go to. ``workers``: warm script workers (default
    ``labclock.DEFAULT_WORKERS``). ``secrets`` and ``faults`` are ``wm.run``'s (spec
    §10.1, §10.2): every client's calls go through the one HTTP service, so a fault acts
    on each client's call by name and attempt, and secrets are sent, never shown. (The
    model path beside the real runs, overlays included, knows no faults.) A kernel
    interrupt cancels every client's run.
    """
    from ..runloop import run_loop

    plan = _plan(text_or_workflow, clients, dict(options))
    loop = run_loop()
    if loop.is_current():
        raise WomlError(
            "wm.lab() was called from the run loop itself; await "
            "woml_magic.lab.lab_async(...) there instead"
        )
    task = loop.submit(_lab(plan))
    task.wait_interruptibly(task.cancel)  # the one blocking wait (runloop)
    return task.result()


async def lab_async(
    text_or_workflow: str | Workflow, *, clients: int, **options: Unpack[LabOptions]
) -> LabResult:
    """``lab`` for a running event loop, with the same arguments: the lab runs on the
    package's run loop (spec §6.3) while this awaits; cancelling cancels the lab."""
    from ..runloop import run_loop

    plan = _plan(text_or_workflow, clients, dict(options))
    loop = run_loop()
    if loop.is_current():
        return await _lab(plan)
    task = loop.submit(_lab(plan))
    return await task.wait_cancellably(task.cancel)  # the one awaiting wait (runloop)


def _plan(text_or_workflow: str | Workflow, clients: int, options: dict[str, Any]) -> _Plan:
    unknown = sorted(set(options) - set(LabOptions.__annotations__))
    if unknown:
        raise LabArgumentError(
            f"lab() got an unexpected keyword argument "
            f"{quote(unknown[0], 40)}; it takes clients and "
            f"{', '.join(LabOptions.__annotations__)}"
        )
    seed = options.get("seed", 0)
    sample = options.get("sample", 3)
    workers = options.get("workers")
    start_spread = options.get("start_spread", 0.0)
    arrivals = options.get("arrivals")
    payload = options.get("payload")
    from ..engine.config import Secrets, parse_faults
    from ..model import Workflow
    from ..parse import parse
    from .labclock import DEFAULT_WORKERS

    if isinstance(text_or_workflow, Workflow):
        workflow = text_or_workflow
    elif isinstance(text_or_workflow, str):
        workflow = parse(text_or_workflow)
    else:
        raise LabArgumentError(
            f"lab() takes WOML text or a Workflow, not {type(text_or_workflow).__name__}"
        )
    if isinstance(clients, bool) or not isinstance(clients, int) or not 1 <= clients <= MAX_CLIENTS:
        raise LabModelError(
            f"clients must be a whole number from 1 to {MAX_CLIENTS:,} (limits.MAX_CLIENTS), "
            f"got {clients!r} (the model path, simulate, takes more)"
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise LabModelError(f"seed must be a whole number, got {seed!r}")
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise LabModelError(f"sample must be a whole number of clients, 0 or more, got {sample!r}")
    workers = DEFAULT_WORKERS if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 16:
        raise LabModelError(f"workers must be a whole number from 1 to 16, got {workers!r}")
    model, url = _server(
        options.get("server"),
        options.get("capacity"),
        options.get("outage"),
        options.get("throttle"),
        options.get("occ"),
    )
    overlays = _overlays(options.get("what_if", ()))
    if overlays and model is None:
        raise LabModelError(
            "what-if overlays are model-only simulations: give a model "
            "server (server=None, a preset or a ModelServer), not a real "
            "API"
        )
    return _Plan(
        workflow,
        clients,
        seed,
        model,
        url,
        _arrivals(start_spread, arrivals),
        overlays,
        sample,
        _payload(payload),
        workers,
        Secrets.of(options.get("secrets")),
        parse_faults(options.get("faults")),
    )


def _server(
    server: ModelServer | str | RealAPI | None,
    capacity: float | None,
    outage: object,
    throttle: bool | None,
    occ: bool | None,
) -> tuple[ModelServer | None, str | None]:
    """The model (with the given fields changed), or a real API's base URL."""
    changes: dict[str, Any] = {}
    if capacity is not None:
        changes["capacity"] = capacity
    if outage is not None:
        changes["outage"] = outage_window(outage)
    for flag, value in (("throttle", throttle), ("occ", occ)):
        if value is not None and not isinstance(value, bool):
            raise LabModelError(f"{flag} must be True, False or None, got {quote(value, 30)}")
        if value is not None:
            changes[flag] = value
    url: object = None
    if isinstance(server, str) and "://" in server:
        url = server
    elif server is not None and not isinstance(server, (str, ModelServer)):
        url = getattr(server, "url", None)
    if url is None:
        if isinstance(server, str):
            if server == "demo":
                raise LabModelError(
                    "the lab does not start the demo API itself: start it and give it, "
                    "`with DemoAPI() as api: wm.lab(..., server=api)`"
                )
            model = server_model(server)
        elif isinstance(server, ModelServer) or server is None:
            model = server if server is not None else AMPLE
        else:
            raise LabModelError(
                f"server must be a ModelServer, one of {', '.join(PRESETS)}, "
                f"a running DemoAPI or its URL, not {quote(server)}"
            )
        return (dataclasses.replace(model, **changes) if changes else model), None
    if changes:
        raise LabModelError(
            f"{', '.join(changes)} describe a server model; {url} is a real "
            f"API (use a model: server=None or one of {', '.join(PRESETS)})"
        )
    return None, loopback_url(str(url))


def loopback_url(url: str) -> str:
    """``url`` without a trailing slash, if it is an http URL of this machine: a lab's
    thousand clients never leave it (spec §8: the demo API listens on 127.0.0.1)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or parts.hostname not in LOOPBACK:
        raise LabModelError(
            f"a lab sends real requests only to this machine "
            f"({', '.join(LOOPBACK)}), not to {quote(url)}; start the demo API "
            f"(`with DemoAPI() as api:`) or use a server model"
        )
    return url.rstrip("/")


def _overlays(what_if: str | WhatIf | Sequence[str | WhatIf]) -> tuple[WhatIf, ...]:
    items: Sequence[object] = [what_if] if isinstance(what_if, (str, WhatIf)) else what_if
    if not isinstance(items, (list, tuple)) or not all(isinstance(w, (str, WhatIf)) for w in items):
        raise LabModelError(
            f'what_if must be an overlay such as "jitter=full", a WhatIf, '
            f"or a list of them, not {quote(what_if)}"
        )
    return tuple(w if isinstance(w, WhatIf) else WhatIf.parse(w) for w in items)


def _arrivals(start_spread: float, arrivals: Arrivals | str | None) -> Arrivals:
    if arrivals is not None:
        if start_spread:
            raise LabModelError("give start_spread or arrivals, not both")
        if not isinstance(arrivals, (str, Arrivals)):
            raise LabModelError(
                f'arrivals must be "at-once", "uniform:60s", '
                f'"poisson:20/s" or an Arrivals, not {quote(arrivals)}'
            )
        return Arrivals.parse(arrivals) if isinstance(arrivals, str) else arrivals
    if (
        isinstance(start_spread, bool)
        or not isinstance(start_spread, (int, float))
        or not (math.isfinite(start_spread) and start_spread >= 0)
    ):
        raise LabModelError(f"start_spread must be zero or more seconds, got {start_spread!r}")
    return Arrivals.uniform(float(start_spread)) if start_spread else Arrivals.at_once()


def _payload(payload: Any) -> Callable[[int], Any] | None:
    if payload is None:
        return None
    if callable(payload):
        return payload  # type: ignore[no-any-return]  # a function of the client number
    return lambda _n: payload


async def _lab(plan: _Plan) -> LabResult:
    """The lab itself, on the run loop: the real clients, then the model path."""
    from ..engine import EngineConfig
    from .labclock import MODEL_URL, stream
    from .runner import run_clients

    starts = plan.arrivals.times(plan.clients, stream(plan.seed, "arrivals"))
    state = plan.model.start() if plan.model is not None else None
    allow = None
    if plan.url is not None:
        from urllib.parse import urlsplit

        # Scripts reach only the API under test (its host and port), nothing else.
        allow = (urlsplit(plan.url).netloc,)
    config = EngineConfig(http_allow=allow, secrets=plan.secrets, faults=plan.faults)
    done = await run_clients(
        plan.workflow,
        starts,
        seed=plan.seed,
        server=state,
        base_url=plan.url or MODEL_URL,
        payload=plan.payload,
        workers=plan.workers,
        config=config,
    )
    runs = tuple(c.run for c in done.clients)
    result = LabResult(
        workflow=plan.workflow,
        seed=plan.seed,
        server=plan.model,
        server_label=plan.model.describe() if plan.model is not None else f"the API at {plan.url}",
        arrivals=plan.arrivals,
        runs=runs,
        starts=tuple(starts),
        traffic=tuple(state.traffic) if state is not None else _recorded_traffic(runs, starts),
        sample=plan.sample,
        workers=done.workers,
        late=done.late,
        stalls=done.stalls,
        seconds=done.seconds,
    )
    if plan.model is not None:
        _add_model_path(result, plan)
    return result


def _add_model_path(result: LabResult, plan: _Plan) -> None:
    """The overlays, and calls against clients, by the model path (spec §11: what-if
    overlays are model-only). The real clients hear the model at once (``runner``), so
    the model path runs without latency too, and with the same arrivals (same seed)."""
    from .simulate import calls_vs_clients, simulate, simulate_many

    assert plan.model is not None
    model = dataclasses.replace(plan.model, latency=0.0, latency_sd=0.0)
    policy = _model_policy(plan.workflow)
    for overlay in plan.overlays:
        result.overlays[overlay.label] = simulate(
            policy, plan.clients, model, seed=plan.seed, arrivals=plan.arrivals, overlay=overlay
        )
    counts = sorted({max(1, plan.clients * k // 8) for k in (1, 2, 4, 8)})
    points = calls_vs_clients(
        simulate_many(
            policy,
            counts,
            model,
            seed=plan.seed,
            arrivals=plan.arrivals,
            overlays=[None, *plan.overlays],
        )
    )
    model_label = f"{WOML_LABEL}, model only"
    result.calls_vs_clients = {
        REAL_LABEL: [(result.clients, result.calls)],
        **{(model_label if label == WOML_LABEL else label): pts for label, pts in points.items()},
    }


def _recorded_traffic(runs: Sequence[Run], starts: Sequence[float]) -> tuple[Request, ...]:
    """Every call the runs recorded, as the model's traffic log has it (against the
    demo API, which keeps no such log on the lab's clock)."""
    out = []
    for n, (run, start) in enumerate(zip(runs, starts, strict=True)):
        for step in run.steps.values():
            for attempt in step.attempts:
                for call in attempt.calls:
                    status = call.status or 0
                    out.append(
                        Request(
                            start + call.started_at,
                            n,
                            attempt.number,
                            status,
                            _cause(status),
                            attempt.number,
                        )
                    )
    out.sort(key=lambda r: (r.time, r.client))
    return tuple(out)


def _cause(status: int) -> Cause:
    """The model's word for a status the demo API gave (only the status is plotted)."""
    if 0 < status < 400:
        return "ok"
    if status == 409:
        return "conflict"
    return "throttled" if status == 429 else "overloaded"
