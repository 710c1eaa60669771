"""The key lineage for notebooks: ``lineage_table(run)`` (spec §10.3, §8).

What the details panel and the text timeline show per step (``lineage``), on its own:
an object that displays as HTML in Jupyter (``_repr_html_``) and as text in a terminal
(``__repr__``, ``__str__``), with the server's ledger beside it when given its records::

    with DemoAPI() as api:
        run = wm.run(doc, clock="simulated")
        lineage_table(run, records=api.records("charges"))   # … "1 charge recorded"

The HTML is ``div.woml-lineage-view[data-run]``: its own scoped ``<style>`` (the
timeline's rules, rooted here), ``p.woml-lineage-head``, per step a
``div.woml-step[data-step]`` holding the step's ``div.woml-lineage`` (see ``details``),
and ``p.woml-ledger`` when records were given. No script, no external assets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Run
from .details import lineage_html
from .html import scoped_style
from .lineage import StepLineage, ledger_line, step_lineage
from .markup import esc
from .text import clean, lineage_text

ROOT = "woml-lineage-view"


@dataclass(frozen=True)
class LineageTable:
    """The key lineage of some steps of a run, and the ledger line (spec §10.3).

    ``lineages`` holds one ``StepLineage`` per step shown; ``ledger`` is
    ``ledger_line(records, noun)`` when records were given, else ``None``.
    """

    run_id: str
    workflow_id: str
    lineages: tuple[StepLineage, ...]
    ledger: str | None = None

    def _repr_html_(self) -> str:
        parts = [
            f'<div class="{ROOT}" data-run="{esc(self.run_id)}">',
            scoped_style(f".{ROOT}"),
            f'<p class="woml-lineage-head">key lineage · workflow '
            f"<strong>{esc(self.workflow_id)}</strong> · run <code>{esc(self.run_id)}</code></p>",
        ]
        if not self.lineages:
            parts.append('<p class="woml-lineage-summary">no step made an HTTP call</p>')
        for lin in self.lineages:
            parts.append(
                f'<div class="woml-step" data-step="{esc(lin.step_id)}">'
                f"<div><strong>{esc(lin.step_id)}</strong> · idempotency key "
                f'<code class="woml-key">{esc(lin.key)}</code></div>'
                f"{lineage_html(lin)}</div>"
            )
        if self.ledger is not None:
            parts.append(f'<p class="woml-ledger">ledger: <strong>{esc(self.ledger)}</strong></p>')
        parts.append("</div>")
        return "".join(parts)

    def __str__(self) -> str:
        out = [clean(f"key lineage · workflow {self.workflow_id} · run {self.run_id}")]
        if not self.lineages:
            out.append("no step made an HTTP call")
        for lin in self.lineages:
            out += ["", clean(f"step {lin.step_id} · key {lin.key}"), *lineage_text(lin)]
        if self.ledger is not None:
            out += ["", clean(f"ledger: {self.ledger}")]
        return "\n".join(out)

    def __repr__(self) -> str:
        return str(self)


def lineage_table(
    run: Run,
    step_id: str | None = None,
    *,
    records: Sequence[object] | None = None,
    noun: str = "charge",
) -> LineageTable:
    """The key lineage of ``step_id`` of ``run`` — or of every step that made HTTP
    calls — for a notebook or a terminal (spec §10.3). With ``records`` (e.g.
    ``DemoAPI.records("charges")``) it ends with the ledger line, "1 charge recorded" or
    "2 charges recorded: a duplicate", counting ``noun``."""
    if step_id is not None and step_id not in run.steps:
        known = ", ".join(repr(s) for s in run.steps) or "none"
        raise ValueError(
            f"run {run.id} has no step {step_id!r}; its steps are: {known}"
        )
    ids = (
        [step_id]
        if step_id is not None
        else [s for s, sr in run.steps.items() if any(a.calls for a in sr.attempts)]
    )
    return LineageTable(
        run_id=run.id,
        workflow_id=run.workflow_id,
        lineages=tuple(step_lineage(run, s) for s in ids),
        ledger=None if records is None else ledger_line(records, noun),
    )
