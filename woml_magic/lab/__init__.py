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

import asyncio
import contextlib
import dataclasses
import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from ..errors import WomlError
from ..policy import format_duration
from .server import (
    PRESETS,
    Cause,
    LabModelError,
    ModelServer,
    Request,
    parse_outage,
    server_model,
)
from .simulate import (
    WOML_LABEL,
    Arrivals,
    ClientOutcome,
    Percentiles,
    SimResult,
    percentile,
)
from .whatif import NOT_WOML, WhatIf

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..model import Run, Workflow
    from ..policy import RetryPolicy
    from .plots import LabFigure

__all__ = ["LabModelError", "LabOptions", "LabResult", "ModelServer", "WhatIf", "lab", "lab_async"]

#: The most real clients one lab runs (each is a real run; the model path,
#: ``simulate``, takes up to 100,000).
MAX_CLIENTS = 10_000

#: How each real client appears in the lab's plots, beside the what-if overlays.
REAL_LABEL = "WOML, real scripts"

#: The default server: a model that is never the bottleneck.
AMPLE = ModelServer()

#: The hosts a lab may send real requests to: this machine only (spec §8's demo API).
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class RealAPI(Protocol):
    """A running API on this machine, as the lab needs it (``demo.DemoAPI`` is one)."""

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        ...


@dataclass(frozen=True)
class ClientSummary:
    """One real client in a line: its run, when it started (seconds on the lab's
    clock), every attempt's outcome in order, its calls and when it ended."""

    client: int
    run_id: str
    status: str
    start: float
    duration: float
    outcomes: tuple[str, ...]
    calls: int

    @property
    def attempts(self) -> int:
        return len(self.outcomes)

    @property
    def end(self) -> float:
        return self.start + self.duration


@dataclass
class LabResult:
    """What a lab did (spec §11): the real runs, the server's traffic, the overlays.

    ``runs[n]`` is client ``n``'s real ``Run``; ``starts[n]`` when it started on the
    lab's clock. ``traffic``: every request the server received, in time order, on
    the lab's clock (against the demo API: every call the clients' runs recorded).
    ``overlays``: label (``what-if: … (not WOML semantics)``) → the model-only
    simulation of that overlay, beside the real runs and never instead of them.
    ``late``, ``stalls``, ``workers``, ``seconds``: how the lab went on this machine
    (``runner.ClientsRun``). In a notebook it shows a summary table, the plots and the
    timelines of ``sample`` clients.
    """

    workflow: Workflow
    seed: int
    server: ModelServer | None  # None: a real API over HTTP
    server_label: str
    arrivals: Arrivals
    runs: tuple[Run, ...] = field(repr=False)
    starts: tuple[float, ...] = field(repr=False)
    traffic: tuple[Request, ...] = field(repr=False)
    overlays: dict[str, SimResult] = field(default_factory=dict, repr=False)
    calls_vs_clients: dict[str, list[tuple[int, int]]] = field(default_factory=dict,
                                                                 repr=False)
    sample: int = 3
    workers: int = 0
    late: int = 0
    stalls: int = 0
    seconds: float = 0.0

    # -- the real runs ------------------------------------------------------------------
    @property
    def clients(self) -> int:
        return len(self.runs)

    @property
    def summaries(self) -> list[ClientSummary]:
        """Every client in a line, in client order."""
        return [_summary(n, start, run) for n, (start, run) in
                enumerate(zip(self.starts, self.runs, strict=True))]

    @property
    def calls(self) -> int:
        """Requests the server received."""
        return len(self.traffic)

    @property
    def succeeded(self) -> int:
        """Clients whose run succeeded."""
        return sum(1 for r in self.runs if r.status == "succeeded")

    @property
    def failed(self) -> int:
        """Clients whose run did not succeed."""
        return self.clients - self.succeeded

    @property
    def attempts(self) -> int:
        """Attempts of every client's run, all steps."""
        return sum(len(s.attempts) for r in self.runs for s in r.steps.values())

    @property
    def completion_times(self) -> list[float]:
        """Seconds from start to the end of the run, for each client that succeeded."""
        return [_duration(r) for r in self.runs if r.status == "succeeded"]

    @property
    def percentiles(self) -> Percentiles:
        """p50 and p99 of ``completion_times`` (nearest rank; NaN if none succeeded)."""
        times = self.completion_times
        return Percentiles(percentile(times, 50), percentile(times, 99))

    @property
    def deterministic(self) -> bool:
        """Whether the seed alone decided the lab: no script held the clock for long
        (``runner.STALL_S``), and the server was the model (not a real API)."""
        return self.stalls == 0 and self.server is not None

    def run(self, client: int) -> Run:
        """Client ``client``'s real ``Run``."""
        return self.runs[client]

    def as_sim(self) -> SimResult:
        """The real runs in the model's terms (``simulate.SimResult``), for the plots and
        for comparing with a model-only run: per client its requests, start, end and
        outcome."""
        calls = [0] * self.clients
        for r in self.traffic:
            calls[r.client] += 1
        outcomes: list[ClientOutcome] = ["succeeded" if r.status == "succeeded" else "gave-up"
                                         for r in self.runs]
        return SimResult(
            label=REAL_LABEL, policy=_model_policy(self.workflow),
            server=self.server or AMPLE, clients=self.clients, seed=self.seed,
            arrivals=self.arrivals, layers=1, overlay=None, traffic=list(self.traffic),
            starts=list(self.starts), attempts=calls,
            ends=[s + _duration(r) for s, r in zip(self.starts, self.runs, strict=True)],
            outcomes=outcomes,
        )

    # -- display ------------------------------------------------------------------------
    def figures(self) -> list[LabFigure]:
        """The lab's plots as SVG (``plots``): server load, requests per client and
        completion times of the real runs beside each overlay, and total calls against
        clients (the model path, with the real lab's point)."""
        from . import plots

        scenarios = {REAL_LABEL: self.as_sim(), **self.overlays}
        figures = [
            plots.LabFigure(plots.load_plot(scenarios), "Server load"),
            plots.LabFigure(plots.attempts_plot(scenarios, title="Requests per client"),
                            "Requests per client"),
            plots.LabFigure(plots.completion_plot(scenarios), "Completion time"),
        ]
        if self.calls_vs_clients:
            figures.append(plots.LabFigure(plots.calls_vs_clients_plot(self.calls_vs_clients),
                                           "Total calls vs clients"))
        return figures

    def sampled(self) -> list[Run]:
        """The ``sample`` clients whose timelines the display shows: the fastest to the
        slowest, evenly spread, one that failed included when any did."""
        return [self.runs[n] for n in _sample(self.summaries, self.sample)]

    def table(self) -> list[tuple[str, str, str, str, str, str, str]]:
        """The summary rows: scenario, clients, calls, succeeded, failed, p50, p99 (the
        real runs first, then each overlay)."""
        p = self.percentiles
        rows = [(f"{REAL_LABEL} · {self.server_label}", f"{self.clients:,}",
                 f"{self.calls:,}", f"{self.succeeded:,}", f"{self.failed:,}",
                 _seconds(p.p50), _seconds(p.p99))]
        for label, sim in self.overlays.items():
            q = sim.percentiles
            rows.append((f"{label} · model only", f"{sim.clients:,}", f"{sim.calls:,}",
                         f"{sim.succeeded:,}", f"{sim.gave_up:,}", _seconds(q.p50),
                         _seconds(q.p99)))
        return rows

    def notes(self) -> list[str]:
        """What a reader must know to read the lab right."""
        out = [f"{self.clients:,} real runs of workflow {self.workflow.id!r} "
               f"({self.attempts:,} attempts) on one simulated clock, seed {self.seed}, "
               f"clients starting {self.arrivals.describe()}; {self.workers} script workers, "
               f"{self.seconds:.1f}s of real time."]
        if self.overlays:
            out.append(f"What-if rows and panels are model-only simulations of the first "
                       f"calling step's policy against the same server and arrivals: "
                       f"{NOT_WOML}; they never change the real runs.")
        if self.server is None:
            out.append("Against a real API over HTTP on this machine: the traffic is what "
                       "the clients' runs recorded, and the lab is not deterministic.")
        if self.late:
            out.append(f"{self.late:,} attempts waited for a script worker while the clock "
                       f"moved on (every worker held a script waiting on the clock), so "
                       f"their scripts ran late; give the lab more workers.")
        if self.stalls:
            out.append(f"The clock moved on {self.stalls:,} times before the lab had "
                       f"settled (a script held it for a second of real time, or the event "
                       f"loop never went idle): this lab is not deterministic.")
        return out

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/plain": self._text(), "text/html": self._html()}

    def _text(self) -> str:
        head = ("scenario", "clients", "calls", "succeeded", "failed", "p50", "p99")
        rows = [head, *self.table()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        lines = [f"lab · {self.clients:,} clients · seed {self.seed}"]
        for row in rows:
            cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in
                                                 zip(row[1:], widths[1:], strict=True)]
            lines.append("  ".join(cells).rstrip())
        lines += ["", *self.notes()]
        sampled = self.sampled()
        if sampled:
            lines += ["", "sampled clients:"]
            lines += [f"  {r.id}: {r.status} after {_plural(_attempt_count(r), 'attempt')}, "
                      f"{_seconds(_duration(r))}" for r in sampled]
        return "\n".join(lines)

    def _html(self) -> str:
        from ..timeline import render_html

        esc = html.escape
        head = ("scenario", "clients", "calls", "succeeded", "failed", "p50", "p99")
        th = "".join(f"<th>{esc(h)}</th>" for h in head)
        body = "".join(
            "<tr>" + f'<td style="text-align:left">{esc(row[0])}</td>'
            + "".join(f"<td>{esc(c)}</td>" for c in row[1:]) + "</tr>"
            for row in self.table())
        parts = [
            '<div class="woml-lab">',
            f"<h4>Lab · {self.clients:,} clients · seed {self.seed}</h4>",
            f'<table style="text-align:right"><thead><tr>{th}</tr></thead>'
            f"<tbody>{body}</tbody></table>",
            *(f"<p>{esc(note)}</p>" for note in self.notes()),
        ]
        try:
            parts += [figure._repr_html_() for figure in self.figures()]
        except ImportError:
            parts.append("<p>Plots need matplotlib: pip install 'woml-magic[lab]'.</p>")
        for run in self.sampled():
            parts.append(f"<h5>{esc(run.id)}</h5>")
            parts.append(render_html(run))
        parts.append("</div>")
        return "\n".join(parts)

    def __repr__(self) -> str:
        return (f"<LabResult {self.clients} clients seed={self.seed} calls={self.calls} "
                f"succeeded={self.succeeded} failed={self.failed}>")


# -- running a lab ------------------------------------------------------------------------
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


class LabOptions(TypedDict, total=False):
    """How to run a lab (spec §11): the keyword arguments of ``lab`` and ``lab_async``
    beside ``clients`` (see ``lab`` for each)."""

    seed: int
    server: ModelServer | str | RealAPI | None
    capacity: float | None
    outage: str | tuple[float, float] | None
    throttle: bool | None
    occ: bool | None
    start_spread: float
    arrivals: Arrivals | str | None
    what_if: str | WhatIf | Sequence[str | WhatIf]
    sample: int
    payload: Any
    workers: int | None


def lab(
    text_or_workflow: str | Workflow, *, clients: int, **options: Unpack[LabOptions]
) -> LabResult:
    """Run ``clients`` real clients of a workflow against a server and return what
    happened (spec §11); blocks until every client's run has ended.

    ``server``: a ``ModelServer``, a preset's name (``server.PRESETS``: unlimited,
    capacity, throttle, occ), or a real API on this machine — a running ``DemoAPI``
    or its URL (scripts may reach only its host and port); default: a model with
    ample capacity. ``capacity``
    (requests/s), ``outage`` (``"10s..40s"`` or seconds), ``throttle`` (429 with
    ``Retry-After``) and ``occ`` (write conflicts) change the model's fields.
    ``start_spread``: clients start at uniform random times in ``[0, start_spread)``
    seconds (0: all at once); or ``arrivals`` (``"poisson:20/s"``, ``simulate.Arrivals``).
    ``what_if``: overlays such as ``"jitter=full"`` or ``"budget=10%"``, each computed
    by the model path beside the real runs (not WOML semantics). ``sample``: how many
    clients' timelines the display shows. ``payload``: each client's ``context.payload``
    — a value, or a function of the client number; default ``{"client": n, "api": URL}``
    with the URL its requests should go to. ``workers``: warm script workers (default
    ``runner.DEFAULT_WORKERS``). A kernel interrupt cancels every client's run.
    """
    from ..runloop import run_loop

    plan = _plan(text_or_workflow, clients, dict(options))
    loop = run_loop()
    if loop.is_current():
        raise WomlError("wm.lab() was called from the run loop itself; await "
                        "woml_magic.lab.lab_async(...) there instead")
    task = loop.submit(_lab(plan))
    try:
        task.wait()
    except KeyboardInterrupt:
        task.cancel()
        task.wait(10.0)
        raise
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
    try:
        return await asyncio.shield(task.wait_async())
    except asyncio.CancelledError:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task.wait_async()
        raise


def _plan(text_or_workflow: str | Workflow, clients: int, options: dict[str, Any]) -> _Plan:
    unknown = sorted(set(options) - set(LabOptions.__annotations__))
    if unknown:
        raise TypeError(f"lab() got an unexpected keyword argument {unknown[0]!r}; it takes "
                        f"clients and {', '.join(LabOptions.__annotations__)}")
    seed = options.get("seed", 0)
    sample = options.get("sample", 3)
    workers = options.get("workers")
    start_spread = options.get("start_spread", 0.0)
    arrivals = options.get("arrivals")
    payload = options.get("payload")
    from ..model import Workflow
    from ..parse import parse
    from .runner import DEFAULT_WORKERS

    if isinstance(text_or_workflow, Workflow):
        workflow = text_or_workflow
    elif isinstance(text_or_workflow, str):
        workflow = parse(text_or_workflow)
    else:
        raise TypeError(f"lab() takes WOML text or a Workflow, not "
                        f"{type(text_or_workflow).__name__}")
    if isinstance(clients, bool) or not isinstance(clients, int) \
            or not 1 <= clients <= MAX_CLIENTS:
        raise LabModelError(f"clients must be a whole number from 1 to {MAX_CLIENTS:,}, got "
                            f"{clients!r} (the model path, simulate, takes more)")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise LabModelError(f"seed must be a whole number, got {seed!r}")
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise LabModelError(f"sample must be a whole number of clients, 0 or more, "
                            f"got {sample!r}")
    workers = DEFAULT_WORKERS if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 16:
        raise LabModelError(f"workers must be a whole number from 1 to 16, got {workers!r}")
    model, url = _server(options.get("server"), options.get("capacity"),
                         options.get("outage"), options.get("throttle"), options.get("occ"))
    overlays = _overlays(options.get("what_if", ()))
    if overlays and model is None:
        raise LabModelError("what-if overlays are model-only simulations: give a model "
                            "server (server=None, a preset or a ModelServer), not a real "
                            "API")
    return _Plan(workflow, clients, seed, model, url,
                 _arrivals(start_spread, arrivals), overlays, sample, _payload(payload),
                 workers)


def _server(
    server: ModelServer | str | RealAPI | None, capacity: float | None,
    outage: str | tuple[float, float] | None, throttle: bool | None, occ: bool | None,
) -> tuple[ModelServer | None, str | None]:
    """The model (with the given fields changed), or a real API's base URL."""
    changes: dict[str, Any] = {}
    if capacity is not None:
        changes["capacity"] = capacity
    if outage is not None:
        changes["outage"] = parse_outage(outage) if isinstance(outage, str) else tuple(outage)
    if throttle is not None:
        changes["throttle"] = bool(throttle)
    if occ is not None:
        changes["occ"] = bool(occ)
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
                    "`with DemoAPI() as api: wm.lab(..., server=api)`")
            model = server_model(server)
        elif isinstance(server, ModelServer) or server is None:
            model = server if server is not None else AMPLE
        else:
            raise LabModelError(f"server must be a ModelServer, one of {', '.join(PRESETS)}, "
                                f"a running DemoAPI or its URL, not {server!r}")
        return (dataclasses.replace(model, **changes) if changes else model), None
    if changes:
        raise LabModelError(f"{', '.join(changes)} describe a server model; {url} is a real "
                            f"API (use a model: server=None or one of {', '.join(PRESETS)})")
    return None, _loopback(str(url))


def _loopback(url: str) -> str:
    """``url`` without a trailing slash, if it is an http URL of this machine: a lab's
    thousand clients never leave it (spec §8: the demo API listens on 127.0.0.1)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or parts.hostname not in LOOPBACK:
        raise LabModelError(f"a lab sends real requests only to this machine "
                            f"({', '.join(LOOPBACK)}), not to {url!r}; start the demo API "
                            f"(`with DemoAPI() as api:`) or use a server model")
    return url.rstrip("/")


def _overlays(what_if: str | WhatIf | Sequence[str | WhatIf]) -> tuple[WhatIf, ...]:
    items: Sequence[str | WhatIf] = [what_if] if isinstance(what_if, (str, WhatIf)) \
        else what_if
    return tuple(w if isinstance(w, WhatIf) else WhatIf.parse(w) for w in items)


def _arrivals(start_spread: float, arrivals: Arrivals | str | None) -> Arrivals:
    if arrivals is not None:
        if start_spread:
            raise LabModelError("give start_spread or arrivals, not both")
        return Arrivals.parse(arrivals) if isinstance(arrivals, str) else arrivals
    if isinstance(start_spread, bool) or not isinstance(start_spread, (int, float)) \
            or not (math.isfinite(start_spread) and start_spread >= 0):
        raise LabModelError(f"start_spread must be zero or more seconds, got "
                            f"{start_spread!r}")
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
    from .runner import MODEL_URL, run_clients, stream

    starts = plan.arrivals.times(plan.clients, stream(plan.seed, "arrivals"))
    state = plan.model.start() if plan.model is not None else None
    config = None
    if plan.url is not None:
        from urllib.parse import urlsplit

        # Scripts reach only the API under test (its host and port), nothing else.
        config = EngineConfig(http_allow=(urlsplit(plan.url).netloc,))
    done = await run_clients(
        plan.workflow, starts, seed=plan.seed, server=state,
        base_url=plan.url or MODEL_URL, payload=plan.payload, workers=plan.workers,
        config=config)
    runs = tuple(c.run for c in done.clients)
    result = LabResult(
        workflow=plan.workflow, seed=plan.seed, server=plan.model,
        server_label=plan.model.describe() if plan.model is not None
        else f"the API at {plan.url}",
        arrivals=plan.arrivals, runs=runs, starts=tuple(starts),
        traffic=tuple(state.traffic) if state is not None
        else _recorded_traffic(runs, starts),
        sample=plan.sample, workers=done.workers, late=done.late, stalls=done.stalls,
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
            policy, plan.clients, model, seed=plan.seed, arrivals=plan.arrivals,
            overlay=overlay)
    counts = sorted({max(1, plan.clients * k // 8) for k in (1, 2, 4, 8)})
    points = calls_vs_clients(simulate_many(
        policy, counts, model, seed=plan.seed, arrivals=plan.arrivals,
        overlays=[None, *plan.overlays]))
    model_label = f"{WOML_LABEL}, model only"
    result.calls_vs_clients = {
        REAL_LABEL: [(result.clients, result.calls)],
        **{(model_label if label == WOML_LABEL else label): pts
           for label, pts in points.items()},
    }


def _model_policy(workflow: Workflow) -> RetryPolicy:
    """The policy the model path simulates: the first step that calls
    ``services.http``, else the first step."""
    for step in workflow.steps:
        if "services.http" in step.script:
            return step.policy
    return workflow.steps[0].policy


def _recorded_traffic(runs: Sequence[Run], starts: Sequence[float]) -> tuple[Request, ...]:
    """Every call the runs recorded, as the model's traffic log has it (against the
    demo API, which keeps no such log on the lab's clock)."""
    out = []
    for n, (run, start) in enumerate(zip(runs, starts, strict=True)):
        for step in run.steps.values():
            for attempt in step.attempts:
                for call in attempt.calls:
                    status = call.status or 0
                    out.append(Request(start + call.started_at, n, attempt.number, status,
                                       _cause(status), attempt.number))
    out.sort(key=lambda r: (r.time, r.client))
    return tuple(out)


def _cause(status: int) -> Cause:
    """The model's word for a status the demo API gave (only the status is plotted)."""
    if 0 < status < 400:
        return "ok"
    if status == 409:
        return "conflict"
    return "throttled" if status == 429 else "overloaded"


def _summary(n: int, start: float, run: Run) -> ClientSummary:
    return ClientSummary(
        client=n, run_id=run.id, status=run.status, start=start, duration=_duration(run),
        outcomes=tuple(a.outcome for s in run.steps.values() for a in s.attempts),
        calls=sum(len(a.calls) for s in run.steps.values() for a in s.attempts))


def _duration(run: Run) -> float:
    return run.ended_at if run.ended_at is not None else run.now


def _attempt_count(run: Run) -> int:
    return sum(len(s.attempts) for s in run.steps.values())


def _sample(summaries: Sequence[ClientSummary], k: int) -> list[int]:
    """``k`` clients from the fastest to the slowest, evenly spread; if any failed and
    none of those did, the middle pick is the first client that failed."""
    if k <= 0 or not summaries:
        return []
    ordered = sorted(summaries, key=lambda s: (s.duration, s.client))
    n = len(ordered)
    k = min(k, n)
    picks = [ordered[round(i * (n - 1) / (k - 1))].client if k > 1 else ordered[-1].client
             for i in range(k)]
    picks = list(dict.fromkeys(picks))
    failed = [s.client for s in summaries if s.status != "succeeded"]
    if failed and not set(failed) & set(picks):
        picks[len(picks) // 2] = failed[0]
    return picks


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _seconds(value: float) -> str:
    return "—" if math.isnan(value) else format_duration(value)
