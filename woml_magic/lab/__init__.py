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

Modules: ``plan`` (the arguments, checked), ``runner`` (the real clients), ``server``
(the model), ``simulate`` (the model path), ``whatif`` (overlays), ``plots`` (SVG). This
module stays light: the engine loads on the first lab.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import LabArgumentError, LabModelError, WomlError
from .plan import LabOptions, _Plan, _plan
from .result import (
    REAL_LABEL,
    LabResult,
    _model_policy,
)
from .server import (
    Cause,
    ModelServer,
    Request,
)
from .simulate import (
    WOML_LABEL,
)
from .whatif import WhatIf

if TYPE_CHECKING:
    from typing_extensions import Unpack

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
    the model path runs without latency too, and with the same arrivals (same seed).
    Calls against clients only when a script can call the server: the model path counts
    a request for every attempt."""
    from .labclock import can_call_services
    from .simulate import calls_vs_clients, simulate, simulate_many

    assert plan.model is not None
    model = dataclasses.replace(plan.model, latency=0.0, latency_sd=0.0)
    policy = _model_policy(plan.workflow)
    for overlay in plan.overlays:
        result.overlays[overlay.label] = simulate(
            policy, plan.clients, model, seed=plan.seed, arrivals=plan.arrivals, overlay=overlay
        )
    if not can_call_services(plan.workflow):
        return  # no script can call the server: the model path has no calls to count
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
