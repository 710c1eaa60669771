"""What the magics display: live timelines and the ``%woml runs`` table (spec §6.2, §6.3).

Kept apart from ``magic.py`` so the adapter stays thin; nothing here runs a workflow.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from html import escape
from typing import Any

from IPython.display import display as _display

from .journal import RunSummary
from .model import Run


def display(obj: Any, *, display_id: bool = False) -> Any:
    """``IPython.display.display`` with a type (IPython's is untyped)."""
    return _display(obj, display_id=display_id)  # type: ignore[no-untyped-call]


def timeline_widget(
    run: Run,
    *,
    on_cancel: Callable[[], None] | None = None,
    live: bool = True,
    clock_now: Callable[[], float] | None = None,
) -> Any:
    """A ``TimelineWidget`` of ``run`` (ipywidgets loads only here, on first use)."""
    from .timeline import TimelineWidget  # here, so ipywidgets loads only on first use

    return TimelineWidget(run, on_cancel=on_cancel, live=live, clock_now=clock_now)


class LiveView:
    """A displayed live widget; ``finish`` adds the static timeline as its fallback."""

    def __init__(self, widget: Any, handle: Any, run: Run) -> None:
        self.widget, self.handle, self.run = widget, handle, run

    def finish(self) -> None:
        """Give the output the static timeline beside the widget view (spec §6.3).

        Saved notebooks opened without a widget manager (GitHub, nbconvert) show the
        richest output they can render; a widget front end still shows the widget.
        """
        if self.handle is None:
            return
        bundle = dict(self.widget._repr_mimebundle_() or {})
        bundle.update(self.run._repr_mimebundle_())
        self.handle.update(bundle, raw=True)


class RunTable:
    """``%woml runs``: the journaled runs as an HTML table and as text (spec §6.2)."""

    COLUMNS = ("run", "workflow", "status", "clock", "started", "steps")

    def __init__(self, path: str, runs: list[RunSummary]) -> None:
        self.path = path
        self.runs = runs

    def rows(self) -> list[tuple[str, ...]]:
        """One row of strings per run, newest first (the journal's order)."""
        return [
            (
                r.run_id,
                r.workflow_id,
                r.status,
                r.clock,
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started_wall)),
                ", ".join(f"{k}: {v}" for k, v in r.steps.items()),
            )
            for r in self.runs
        ]

    def __repr__(self) -> str:
        if not self.runs:
            return f"no runs in the journal {self.path}"
        rows = [self.COLUMNS, *self.rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(self.COLUMNS))]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
        ]
        return "\n".join([f"{len(self.runs)} run(s) in the journal {self.path}", *lines])

    def _repr_html_(self) -> str:
        caption = f"{len(self.runs)} run(s) in the journal {escape(self.path)}"
        head = "".join(f"<th>{c}</th>" for c in self.COLUMNS)
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(v)}</td>" for v in row) + "</tr>" for row in self.rows()
        )
        return f'<table class="woml-runs"><caption>{caption}</caption><tr>{head}</tr>{body}</table>'
