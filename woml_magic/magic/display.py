"""What the magics display: live timelines and the ``%woml runs`` table (spec §6.2, §6.3).

Kept apart from ``magic.cell`` so the adapter stays thin; nothing here runs a workflow.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from html import escape
from typing import Any

from IPython.display import display as _display

from ..api import Run, RunHandle, RunSummary, Workflow


def display(obj: Any, *, display_id: bool = False, raw: bool = False) -> Any:
    """``IPython.display.display`` with a type (IPython's is untyped)."""
    return _display(obj, display_id=display_id, raw=raw)  # type: ignore[no-untyped-call]


def static_bundle(run: Run) -> dict[str, Any]:
    """The static timeline of ``run`` as a mime bundle (text/html with its replay
    script, and text/plain), for every output that must not depend on a widget."""
    from ..timeline import mimebundle

    return mimebundle(run)


class LiveView:
    """One displayed output that shows a run going on (spec §6.3).

    Its bundle is the live ``TimelineWidget`` with the static timeline as its fallback.
    When the run ends, ``finish`` replaces the whole output by the static timeline and
    closes the widget: a saved notebook or an nbconvert export then holds no widget
    view that would need the widget's state (which front ends do not keep by default,
    so a reopened notebook would show "Error displaying widget: model not found").
    """

    def __init__(self, widget: Any, output: Any, run: Run) -> None:
        self.widget, self.output, self.run = widget, output, run
        self._lock = threading.Lock()
        self._finished = False
        self._settled = False
        self._final: dict[str, Any] = {}  # the static bundle, once the run has ended

    @classmethod
    def show(cls, handle: RunHandle, *, on_cancel: Callable[[], None] | None) -> LiveView:
        """Display ``handle``'s run live; the view finishes itself when the run ends."""
        from ..timeline import TimelineWidget  # ipywidgets loads only here, on first use

        assert handle.started, "show() needs a started run"
        widget = handle.watch(
            lambda run: TimelineWidget(run, on_cancel=on_cancel, clock_now=handle.now)
        )
        shown: Any = widget._repr_mimebundle_() or {}
        # ipywidgets returns the bundle, anywidget (data, metadata)
        bundle = dict(shown[0] if isinstance(shown, tuple) else shown)
        bundle.update(static_bundle(handle.run))
        output = display(bundle, display_id=True, raw=True)
        view = cls(widget, output, handle.run)
        handle.add_done_callback(lambda _h: view.finish())
        return view

    def finish(self) -> None:
        """Replace the output by the static timeline and close the widget (once)."""
        with self._lock:
            if self._finished:
                return
            # The run has ended, so its static timeline is final: rendered once here,
            # sent again by ``settle`` if need be.
            self._final = static_bundle(self.run)
            self._finished = True
            # From the kernel's main thread the update already carries the header of
            # the cell executing now; from the run loop it may not (see ``settle``).
            self._settled = threading.current_thread() is threading.main_thread()
        self.output.update(self._final, raw=True)
        self.widget.close()

    def settle(self) -> bool:
        """Send the final update once more from the kernel's main thread, after a cell.

        ``finish`` runs on the run loop when a background run ends, and its update
        carries the parent header of the cell that *started* the run. JupyterLab
        applies it, but a client that only follows the cell executing now (nbclient,
        hence ``nbconvert --execute``) drops it, and its saved output would keep the
        widget view with no static timeline offline. Called after each cell (IPython's
        ``post_run_cell``), this repeats the update under that cell's header.
        Returns whether the view is finished and settled (nothing more to do).
        """
        if not self._finished:
            return False
        if not self._settled:
            self._settled = True
            self.output.update(self._final, raw=True)
        return True


class RunTable:
    """``%woml runs``: the journaled runs as an HTML table and as text (spec §6.2)."""

    COLUMNS = ("run", "workflow", "status", "clock", "started", "steps")

    def __init__(self, path: str, runs: list[RunSummary]) -> None:
        self.path = path
        self.runs = runs

    def rows(self) -> list[tuple[str, ...]]:
        """One row of strings per run, newest first (the journal's order); a run the
        journal refuses (``RunSummary.problem``) shows its id and ``refused`` only."""
        return [
            (
                r.run_id,
                r.workflow_id,
                r.status,
                r.clock or "",
                "" if r.problem else
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started_wall)),
                ", ".join(f"{k}: {v}" for k, v in r.steps.items()),
            )
            for r in self.runs
        ]

    def problems(self) -> list[str]:
        """The sentences of the runs the journal refuses, in the table's order."""
        return [r.problem for r in self.runs if r.problem]

    def __repr__(self) -> str:
        if not self.runs:
            return f"no runs in the journal {self.path}"
        rows = [self.COLUMNS, *self.rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(self.COLUMNS))]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
        ]
        return "\n".join([f"{len(self.runs)} run(s) in the journal {self.path}", *lines,
                          *self.problems()])

    def _repr_html_(self) -> str:
        caption = f"{len(self.runs)} run(s) in the journal {escape(self.path)}"
        head = "".join(f"<th>{c}</th>" for c in self.COLUMNS)
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(v)}</td>" for v in row) + "</tr>" for row in self.rows()
        )
        notes = "".join(f"<p>{escape(problem)}</p>" for problem in self.problems())
        return (f'<table class="woml-runs"><caption>{caption}</caption><tr>{head}</tr>{body}'
                f"</table>{notes}")


def show_lint(workflow: Workflow) -> None:
    """Show the key linter's warnings above the run's output (spec §10, ``--no-lint``
    silences them); nothing when there are none."""
    from ..lint import format_warning, lint

    warnings = lint(workflow)
    if not warnings:
        return
    lines = [format_warning(w) for w in warnings]
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    display({
        "text/plain": "\n".join(["idempotency-key warnings (--no-lint hides them):", *lines]),
        "text/html": '<div class="woml-lint" style="border-left:3px solid '
                     'var(--jp-warn-color0,#b45309);padding:2px 8px;margin:4px 0">'
                     "<strong>idempotency-key warnings</strong> "
                     "<small>(<code>--no-lint</code> hides them)</small>"
                     f"<ul style=\"margin:2px 0\">{items}</ul></div>",
    }, raw=True)
