"""The lab's plots as SVG text (spec §11): load, attempts, completion times, calls.

Drawn with matplotlib — the most widely used and best-kept Python plotting library —
rather than by hand: its SVG backend writes static, script-free SVG that renders the
same in a live notebook, in ``jupyter nbconvert --to html`` and on GitHub, and it
brings axes, ticks, legends and layout a hand-drawn chart would have to reinvent.
It is the optional ``lab`` extra, imported on first plot only (``import woml_magic``
stays cheap); figures are ``matplotlib.figure.Figure`` objects, so no pyplot, no
backend switch and no global figure state.

Every SVG is deterministic: a fixed ``svg.hashsalt`` (element ids), no date in its
metadata, text as ``<text>`` (``svg.fonttype = none``: small, selectable, searchable).
It reads in light and dark themes: the background is transparent, data colours are
mid-tones with at least 3:1 contrast on white and on a dark page, and all text,
axes and ticks are drawn in ``currentColor`` — the page's text colour where the SVG
is inline HTML (``LabFigure._repr_html_``), and a mid grey (``INK``, ≥ 4.2:1 on
both) where it is an image on its own. Colour is never the only cue: failures are
hatched, what-if scenarios dashed, and every panel is titled.

A what-if scenario is always titled with its label, which says "not WOML semantics".
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Any

from .simulate import SimResult
from .whatif import NOT_WOML

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: The colour of text, axes and ticks where the SVG stands alone (on white or dark).
INK = "#7a7a7a"
#: Drawn as this placeholder, then written as ``currentColor``.
_SENTINEL = "#0a0b0c"
OK_COLOR = "#2f9e44"
FAILED_COLOR = "#e8590c"
OUTAGE_COLOR = "#868e96"
#: One colour per scenario, in order: WOML's own first.
SCENARIO_COLORS = ("#1c7ed6", "#ae3ec9", "#d9480f", "#2f9e44", "#868e96", "#d6336c")

# dict[Any, Any]: matplotlib types the keys as a Literal of every rc name.
_RC: dict[Any, Any] = {
    "svg.hashsalt": "woml-lab",
    "svg.fonttype": "none",
    "figure.facecolor": "none",
    "axes.facecolor": "none",
    "savefig.facecolor": "none",
    "savefig.transparent": True,
    "text.color": _SENTINEL,
    "axes.edgecolor": _SENTINEL,
    "axes.labelcolor": _SENTINEL,
    "axes.titlecolor": _SENTINEL,
    "xtick.color": _SENTINEL,
    "ytick.color": _SENTINEL,
    "grid.color": _SENTINEL,
    "grid.alpha": 0.2,
    "legend.frameon": False,
    "legend.labelcolor": _SENTINEL,
    "hatch.color": FAILED_COLOR,
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}

_PANEL_WIDTH = 4.2  # inches per panel
_PANEL_HEIGHT = 2.8


@dataclass(frozen=True)
class LabFigure:
    """One plot for a notebook: ``image/svg+xml`` and inline HTML (``text/html``).

    Jupyter stores both in the output, so a saved notebook shows it in JupyterLab,
    Notebook 7, VS Code, an nbconvert export and GitHub, with no kernel and no
    JavaScript. Inline, its text takes the page's colour (light or dark theme).
    """

    svg: str
    title: str = ""

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        # Inline, drop the standalone ink colour so currentColor is the page's text
        # colour, and let the drawing shrink to the output's width.
        svg = self.svg.replace(f' color="{INK}"', "", 1).replace(
            "<svg ", '<svg style="max-width:100%;height:auto" ', 1)
        return f'<div class="woml-lab-figure">{svg}</div>'

    def save(self, path: str) -> None:
        """Write the standalone SVG to ``path``."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg)


def _results(results: Mapping[str, SimResult] | Sequence[SimResult]) -> list[
        tuple[str, SimResult]]:
    """``(title, result)`` pairs; a what-if's title always carries its label."""
    pairs = (list(results.items()) if isinstance(results, Mapping)
             else [(r.label, r) for r in results])
    if not pairs:
        raise ValueError("nothing to plot: give at least one SimResult")
    out = []
    for title, r in pairs:
        shown = title
        if r.overlay is not None and NOT_WOML not in title:
            shown = f"{title}\n{r.overlay.label}"
        out.append((shown, r))
    return out


def _wrap(title: str, width: int = 48) -> str:
    return "\n".join(textwrap.fill(line, width) for line in title.splitlines())


def _style_for(index: int, result: SimResult) -> dict[str, Any]:
    return {"color": SCENARIO_COLORS[index % len(SCENARIO_COLORS)],
            "linestyle": "--" if result.overlay is not None else "-"}


def _render(fig: Figure, alt: str) -> str:
    """The figure as standalone SVG text (module docstring: deterministic, themed)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg "):]  # no XML prolog or DOCTYPE: it is also inline HTML
    # matplotlib's global "*{stroke-linejoin…}" rule would leak into a page that
    # inlines the SVG: say it on the root element instead, where it is inherited.
    svg = re.sub(r"\s*<style type=\"text/css\">\*\{[^}]*\}</style>", "", svg, count=1)
    svg = svg.replace(_SENTINEL, "currentColor")
    root = (f'<svg role="img" aria-label="{escape(alt)}" color="{INK}" '
            f'stroke-linejoin="round" stroke-linecap="butt" ')
    svg = svg.replace("<svg ", root, 1)
    head_end = svg.index(">") + 1
    return f"{svg[:head_end]}\n <title>{escape(alt)}</title>{svg[head_end:]}"


def _figure(panels: int, *, columns: int = 3, width: float = _PANEL_WIDTH,
            height: float = _PANEL_HEIGHT) -> tuple[Figure, list[Axes]]:
    from matplotlib.figure import Figure

    cols = min(panels, columns)
    rows = math.ceil(panels / cols)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for extra in axes[panels:]:
        extra.set_visible(False)
    return fig, axes[:panels]


def _plot(draw: Any, *args: Any, **kwargs: Any) -> str:
    import matplotlib

    with matplotlib.rc_context(_RC):
        fig, alt = draw(*args, **kwargs)
        return _render(fig, alt)


def load_plot(
    results: Mapping[str, SimResult] | Sequence[SimResult],
    *,
    capacity: float | None = None,
    outage: tuple[float, float] | None = None,
    bin: float = 1.0,
    title: str = "Server load",
) -> str:
    """Requests/s over time, one panel per scenario side by side (shared axes):
    successes (green) under failures (orange, hatched), the capacity as a dashed
    line, the outage shaded. ``capacity`` and ``outage`` default to the first
    result's server."""
    return _plot(_draw_load, _results(results), capacity, outage, bin, title)


def _draw_load(pairs: list[tuple[str, SimResult]], capacity: float | None,
               outage: tuple[float, float] | None, bin: float,
               title: str) -> tuple[Figure, str]:
    server = pairs[0][1].server
    capacity = capacity if capacity is not None else server.capacity
    outage = outage if outage is not None else server.outage
    end = max(r.duration for _, r in pairs)
    fig, axes = _figure(len(pairs))
    top = 0.0
    for ax, (name, r) in zip(axes, pairs, strict=True):
        load = r.load(bin, until=end)
        edges = [*load.starts, load.starts[-1] + load.bin]
        total = load.total
        top = max(top, *total)
        ax.stairs(load.ok, edges, fill=True, color=OK_COLOR, label="successes", lw=0)
        ax.stairs(total, edges, baseline=load.ok, fill=True, facecolor="none",
                  edgecolor=FAILED_COLOR, hatch="////", lw=0.6, label="failures")
        if outage is not None:
            ax.axvspan(outage[0], outage[1], color=OUTAGE_COLOR, alpha=0.18, lw=0,
                       label="outage")
        if capacity is not None:
            ax.axhline(capacity, color=_SENTINEL, ls="--", lw=1,
                       label=f"capacity {capacity:g}/s")
        ax.set_title(_wrap(name), loc="left")
        ax.set_xlabel("time (s)")
        ax.set_xlim(0, edges[-1])
        ax.grid(axis="y")
    for ax in axes:
        ax.set_ylim(0, max(top, capacity or 0.0) * 1.08 or 1)
    axes[0].set_ylabel(f"requests/s ({bin:g} s bins)")
    axes[0].legend(loc="upper right", fontsize=8)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    names = "; ".join(name.replace("\n", " ") for name, _ in pairs)
    return fig, f"{title}: requests per second over time against capacity — {names}"


def attempts_plot(
    results: Mapping[str, SimResult] | Sequence[SimResult],
    *,
    title: str = "Attempts per client",
) -> str:
    """How many requests each client made: clients per attempt count, one bar group
    per scenario (what-ifs dashed and hatched)."""
    return _plot(_draw_attempts, _results(results), title)


def _draw_attempts(pairs: list[tuple[str, SimResult]], title: str) -> tuple[Figure, str]:
    fig, (ax,) = _figure(1, width=_PANEL_WIDTH * 1.6)
    most = max(max(r.attempts) for _, r in pairs)
    counts = range(1, most + 1)
    width = 0.8 / len(pairs)
    for i, (name, r) in enumerate(pairs):
        tally = [0] * (most + 1)
        for a in r.attempts:
            tally[a] += 1
        style = _style_for(i, r)
        xs = [k - 0.4 + width * (i + 0.5) for k in counts]
        ax.bar(xs, tally[1:], width=width * 0.92, color=style["color"],
               edgecolor=style["color"], linestyle=style["linestyle"],
               hatch="//" if r.overlay is not None else None,
               alpha=0.85 if r.overlay is None else 0.6,
               label=f"{_wrap(name, 60)} — {r.calls:,} calls")
    if most <= 30:
        ax.set_xticks(list(counts))
    ax.set_xlabel("requests made by one client (all layers)")
    ax.set_ylabel("clients")
    ax.grid(axis="y")
    ax.legend(fontsize=8)
    ax.set_title(title, loc="left", fontweight="bold")
    return fig, f"{title}: clients by number of requests made"


def completion_plot(
    results: Mapping[str, SimResult] | Sequence[SimResult],
    *,
    title: str = "Completion time",
) -> str:
    """The distribution of completion times (start to success) of the clients that
    succeeded, as a cumulative curve per scenario, with p50 and p99 marked."""
    return _plot(_draw_completion, _results(results), title)


def _draw_completion(pairs: list[tuple[str, SimResult]], title: str) -> tuple[Figure, str]:
    fig, (ax,) = _figure(1, width=_PANEL_WIDTH * 1.6)
    shortest, longest = math.inf, 0.0
    for i, (name, r) in enumerate(pairs):
        style = _style_for(i, r)
        times = sorted(r.completion_times)
        p = r.percentiles
        label = (f"{_wrap(name, 60)}\n{r.succeeded:,}/{r.clients:,} succeeded · "
                 f"● p50 {_seconds(p.p50)} · ▲ p99 {_seconds(p.p99)}")
        if not times:
            ax.plot([], [], label=label, **style)
            continue
        shortest, longest = min(shortest, times[0]), max(longest, times[-1])
        n = len(times)
        ax.step(times, [(k + 1) / n for k in range(n)], where="post", label=label,
                lw=1.6, **style)
        ax.plot([p.p50], [0.5], marker="o", color=style["color"], ms=6, ls="none")
        ax.plot([p.p99], [0.99], marker="^", color=style["color"], ms=6, ls="none")
    ax.axhline(0.5, color=_SENTINEL, lw=0.5, ls=":")
    ax.axhline(0.99, color=_SENTINEL, lw=0.5, ls=":")
    ax.set_ylim(0, 1.05)
    # Completion times span milliseconds to minutes once retries wait: a log axis
    # keeps both the fast and the slow clients readable.
    if shortest > 0 and longest / shortest > 50:
        from matplotlib.ticker import FuncFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _seconds(v)))
        ax.set_xlabel("seconds from a client's start to its success (log scale)")
    else:
        ax.set_xlim(left=0)
        ax.set_xlabel("seconds from a client's start to its success")
    ax.set_ylabel("share of succeeded clients done")
    ax.set_yticks([0, 0.25, 0.5, 0.75, 0.99], ["0", "25%", "p50", "75%", "p99"])
    ax.grid()
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title, loc="left", fontweight="bold")
    return fig, f"{title}: cumulative completion times with p50 and p99"


def calls_vs_clients_plot(
    points: Mapping[str, Iterable[tuple[int, float]]],
    *,
    title: str = "Total calls vs clients",
) -> str:
    """Total calls the server received against the number of clients, one line per
    scenario (``simulate.calls_vs_clients`` makes ``points``), with the one-call-per-
    client line for reference."""
    return _plot(_draw_calls, {k: sorted(v) for k, v in points.items()}, title)


def _draw_calls(points: dict[str, list[tuple[int, float]]], title: str) -> tuple[Figure, str]:
    if not points:
        raise ValueError("nothing to plot: give at least one scenario's points")
    fig, (ax,) = _figure(1, width=_PANEL_WIDTH * 1.6)
    most = 0
    for i, (name, pts) in enumerate(points.items()):
        xs = [x for x, _ in pts]
        ys = [y for _, y in pts]
        most = max(most, *xs)
        ax.plot(xs, ys, marker="o", ms=4, lw=1.6,
                color=SCENARIO_COLORS[i % len(SCENARIO_COLORS)],
                linestyle="--" if NOT_WOML in name else "-", label=_wrap(name, 60))
    ax.plot([0, most], [0, most], color=_SENTINEL, lw=0.8, ls=":",
            label="one call per client")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("clients")
    ax.set_ylabel("total calls to the server")
    ax.grid()
    ax.legend(fontsize=8)
    ax.set_title(title, loc="left", fontweight="bold")
    return fig, f"{title}: total calls against number of clients"


def _seconds(value: float) -> str:
    if math.isnan(value):
        return "—"
    if value < 1:
        return f"{value * 1000:.3g}ms"
    return f"{value:.3g}s"
