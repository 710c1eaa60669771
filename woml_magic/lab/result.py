"""``LabResult``: what a lab did, and how it shows in a notebook (spec §11): the real
runs, the server's traffic, the what-if overlays beside them, a summary table, the
plots and a few sampled clients' timelines."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import WomlExtraMissing
from ..policy import format_duration
from .server import ModelServer, Request
from .simulate import Arrivals, ClientOutcome, Percentiles, SimResult, percentile
from .whatif import NOT_WOML

if TYPE_CHECKING:
    from ..model import Run, Workflow
    from ..policy import RetryPolicy
    from .plots import LabFigure

#: How each real client appears in the lab's plots, beside the what-if overlays.
REAL_LABEL = "WOML, real scripts"

#: The default server: a model that is never the bottleneck.
AMPLE = ModelServer()


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
        (``labclock.STALL_S``), and the server was the model (not a real API)."""
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
        clients (the model path, with the real lab's point). The first two only when
        the server heard a request, or an overlay modelled some (``notes`` says so)."""
        try:
            import matplotlib  # noqa: F401 - the lab extra's presence, checked before drawing
        except ImportError:
            raise WomlExtraMissing(
                "the lab's plots need matplotlib, which is not installed; install it with: "
                'pip install "woml-magic[lab]"', extra="lab") from None
        from . import plots

        scenarios = {REAL_LABEL: self.as_sim(), **self.overlays}
        figures = []
        if self._drew_requests:
            figures += [
                plots.LabFigure(plots.load_plot(scenarios), "Server load"),
                plots.LabFigure(plots.attempts_plot(scenarios, title="Requests per client"),
                                "Requests per client"),
            ]
        figures.append(plots.LabFigure(plots.completion_plot(scenarios), "Completion time"))
        if self.calls_vs_clients:
            figures.append(plots.LabFigure(plots.calls_vs_clients_plot(self.calls_vs_clients),
                                           "Total calls vs clients"))
        return figures

    @property
    def _drew_requests(self) -> bool:
        """Whether there are requests to draw: the clients' or an overlay's."""
        return bool(self.calls or self.overlays)

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
        if not self._drew_requests:
            out.append("No client made a request to the server, so there is no server load "
                       "and no requests per client to draw: the completion times are the "
                       "retries' own.")
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
        except WomlExtraMissing as exc:
            parts.append(f"<p>{esc(str(exc))}.</p>")
        for run in self.sampled():
            parts.append(f"<h5>{esc(run.id)}</h5>")
            parts.append(render_html(run))
        parts.append("</div>")
        return "\n".join(parts)

    def __repr__(self) -> str:
        return (f"<LabResult {self.clients} clients seed={self.seed} calls={self.calls} "
                f"succeeded={self.succeeded} failed={self.failed}>")


# -- running a lab ------------------------------------------------------------------------

def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _seconds(value: float) -> str:
    return "—" if math.isnan(value) else format_duration(value)


def _model_policy(workflow: Workflow) -> RetryPolicy:
    """The policy the model path simulates: the first step that calls
    ``services.http``, else the first step."""
    for step in workflow.steps:
        if "services.http" in step.script:
            return step.policy
    return workflow.steps[0].policy


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
