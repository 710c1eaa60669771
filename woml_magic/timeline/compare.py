"""Runs compared on one time axis (spec §10.4: ``wm.compare(run, …)``, ``%woml compare
RUN…``).

A lesson is usually a comparison — fixed and exponential backoff, with a key and
without — and two timelines one under the other, each on its own axis, hide it: equal
waits are drawn unequal. ``compare(run_a, run_b, *more, labels=None)`` returns a
``Comparison``: a timeline whose lanes come from several runs. Each run's lanes are
built as its own timeline builds them (``layout.run_lanes``), then all of them are laid
out together on one true-to-time axis (``layout.lay_out``: one scale, one set of axis
breaks), grouped by run under a row with the run's label (``layout.RunBand``). Times are
each run's own, seconds from its start, and the drawing says so in its corner
(``svg.COMPARE_AXIS``).

It displays like a finished ``Run``: ``text/plain`` (each run's text table under its
label) and the static HTML with its picture (spec §6.5) and the inline script, which
gives it the same zoom, pan, selection and Play as one run's timeline — Play advances
one shared ``t`` across every lane. ``to_svg`` and ``save`` make the same image a run
makes (``image``). The DOM is one run's (``html``'s docstring) with these differences:
the root's ``data-status`` is ``compared`` and ``data-run`` the runs' ids, space
separated; each lane's ``data-step`` is ``N/STEP`` (``Lane.ref``: the run's place,
1-based, and the step id), in the drawing and in the details panel; the SVG has one
``g.woml-run[data-run=N]`` per run (a rule and ``text.woml-run-label``) above its lanes
and ``text.woml-axis-note``; the details panel has one ``div.woml-run-details[data-run]``
per run, headed by its label.

Only finished runs compare: a run still going has no end to draw to, so ``compare``
refuses it and says to wait for it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import WomlError
from ..model import Run
from ..outcomes import RUNNING
from ..policy import RetryPolicy
from .axis import format_time
from .details import step_details_html
from .html import SHARED_NOTE, scoped_style
from .lanes import Lane
from .layout import RunBand, TimelineLayout, bounded, lay_out, run_lanes
from .markup import data_time, esc
from .picture import picture
from .svg import COMPARE_AXIS, render_svg
from .text import render_text

#: The longest label shown whole (STYLE 15); a longer one is cut with an ellipsis.
MAX_LABEL = 40
#: The most runs one comparison draws: more lanes than a lesson reads side by side.
MAX_RUNS = 12


class Comparison:
    """Several finished runs on one time axis, labelled by run (spec §10.4).

    ``runs`` and ``labels`` are in the order given; ``compare`` builds it and checks
    its arguments.
    """

    def __init__(self, runs: Sequence[Run], labels: Sequence[str]) -> None:
        self.runs: tuple[Run, ...] = tuple(runs)
        self.labels: tuple[str, ...] = tuple(labels)

    def layout(self) -> TimelineLayout:
        """Every run's lanes on one axis, each run's under its band (``lay_out``)."""
        groups = [
            (_band(i, run, label), run_lanes(run, str(i)))
            for i, (run, label) in enumerate(zip(self.runs, self.labels, strict=True), 1)
        ]
        clocks = sorted({run.clock for run in self.runs})
        return lay_out(
            groups,
            now=max(bounded(_end(run)) for run in self.runs),
            run_id=" ".join(run.id for run in self.runs),
            workflow_id=", ".join(dict.fromkeys(run.workflow_id for run in self.runs)),
            clock=" and ".join(clocks),
            status="compared",
        )

    def to_text(self) -> str:
        """The plain-text comparison: a line naming the runs, then each run's text
        timeline (``text.render_text``) under its label."""
        out = [f"compare {len(self.runs)} runs · " + " · ".join(self.labels) + f" · {COMPARE_AXIS}"]
        for i, (run, label) in enumerate(zip(self.runs, self.labels, strict=True), 1):
            out += ["", f"== {i}. {label} " + "=" * max(3, 60 - len(label)), render_text(run)]
        return "\n".join(out)

    def to_html(self, *, as_picture: bool = False) -> str:
        """The static comparison (the DOM of the module docstring); ``as_picture`` as a
        saved output's picture (spec §6.5), as ``html.render_html`` does."""
        return self._page(f"woml-tl-{secrets.token_hex(6)}", as_picture)

    def _page(self, rid: str, as_picture: bool) -> str:
        layout = self.layout()
        svg = render_svg(layout, rid)
        who = " · ".join(
            f"<strong>{esc(label)}</strong> (<code>{esc(run.id)}</code>, {esc(_status(run))}, "
            f"{esc(format_time(_end(run)))})"
            for run, label in zip(self.runs, self.labels, strict=True)
        )
        parts = [
            f'<div class="woml-timeline woml-compare" id="{rid}"'
            f' data-run="{esc(layout.run_id)}" data-status="compared"'
            f' data-end="{data_time(layout.now)}">',
            scoped_style(),
            f'<div class="woml-header">compare {who} · {esc(layout.clock)} clock · '
            f"{esc(COMPARE_AXIS)}</div>",
            *([f'<p class="woml-shared-note">{esc(SHARED_NOTE)}</p>'] if as_picture else []),
            '<div class="woml-scroll" style="overflow-x:auto">'
            + (picture(svg, layout.title) if as_picture else svg)
            + "</div>",
            '<div class="woml-replay"></div>',
            '<div class="woml-steps">',
        ]
        by_run: dict[str, list[Lane]] = {}
        for lane in layout.lanes:
            by_run.setdefault(lane.run_ref, []).append(lane)
        for band, run in zip(layout.bands, self.runs, strict=True):
            parts.append(
                f'<div class="woml-run-details" data-run="{esc(band.ref)}">'
                f"<p><strong>{esc(band.label)}</strong> · {esc(band.words)}</p>"
            )
            shown: dict[RetryPolicy, str] = {}  # per run: "same policy as step …" of it
            for lane in by_run.get(band.ref, []):
                parts.extend(step_details_html(run, lane, shown))
            parts.append("</div>")
        parts.append("</div></div>")
        return "".join(parts)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # The same bundle a finished run shows (timeline.mimebundle): its picture and
        # the script that makes it live, and the text.
        from . import inline_script

        rid = f"woml-tl-{secrets.token_hex(6)}"
        html = self._page(rid, as_picture=True) + inline_script(rid)
        return {"text/plain": self.to_text(), "text/html": html}

    def to_svg(self, *, theme: str = "light", header: bool = True) -> str:
        """The comparison as a standalone SVG document, as ``Run.to_svg`` (spec §6.3)."""
        from .image import to_svg

        return to_svg(self, theme=theme, header=header)

    def save(
        self,
        path: str | os.PathLike[str],
        *,
        theme: str = "light",
        scale: float = 2.0,
        header: bool = True,
    ) -> Path:
        """Write the comparison to ``path`` as ``.svg`` or ``.png``, as ``Run.save``."""
        from .image import save

        return save(self, path, theme=theme, scale=scale, header=header)

    def __repr__(self) -> str:
        return f"<Comparison {' | '.join(self.labels)}>"


def compare(run_a: Run, run_b: Run, *more: Run, labels: Sequence[str] | None = None) -> Comparison:
    """``run_a``, ``run_b`` and ``more`` on one time axis, labelled by run (spec §10.4).

    ``labels``: one per run (default: each run's workflow id and run id). Each run must
    be a finished ``Run`` (the value of a ``%%woml`` cell, ``wm.run``, a journal's
    ``load``); anything else is a ``TypeError``, a run still going a ``WomlError``, both
    naming what is allowed.
    """
    runs = (run_a, run_b, *more)
    for i, run in enumerate(runs, 1):
        if not isinstance(run, Run):
            raise TypeError(
                f"compare() takes runs: argument {i} is a {type(run).__name__}, not a Run "
                "(a %%woml cell's value, wm.run(...), or Journal(path).load(run_id))"
            )
        if run.status == RUNNING:
            raise WomlError(
                f"compare() takes finished runs: run {run.id!r} (argument {i}) is still "
                "running; wait for it (handle.wait() or await handle) and compare its Run"
            )
    if len(runs) > MAX_RUNS:
        raise TypeError(f"compare() takes 2 to {MAX_RUNS} runs, got {len(runs)}")
    return Comparison(runs, _labels(runs, labels))


def _labels(runs: Sequence[Run], labels: Sequence[str] | None) -> list[str]:
    if labels is None:
        return [_bounded(f"{run.workflow_id} · {run.id}") for run in runs]
    if isinstance(labels, str) or not all(isinstance(label, str) for label in labels):
        raise TypeError(
            f"compare() labels must be a list of strings, one per run, got {labels!r:.80}"
        )
    if len(labels) != len(runs):
        raise TypeError(
            f"compare() got {len(labels)} label{'s' * (len(labels) != 1)} for "
            f"{len(runs)} runs: give one label per run, in the runs' order"
        )
    if any(not label.strip() for label in labels):
        raise TypeError("compare() labels must not be empty: each names its run")
    return [_bounded(" ".join(label.split())) for label in labels]


def _bounded(label: str) -> str:
    return label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "…"


def _end(run: Run) -> float:
    return run.ended_at if run.ended_at is not None else run.now


def _status(run: Run) -> str:
    return run.stopped or run.status


def _band(i: int, run: Run, label: str) -> RunBand:
    return RunBand(
        ref=str(i),
        label=label,
        words=f"run {run.id} · {_status(run)} · ended at t = {format_time(_end(run))}",
    )
