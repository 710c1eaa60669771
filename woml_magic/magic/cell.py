"""The ``%%woml`` cell magic and the ``%woml`` line magic (spec §6.1, §6.2).

A thin adapter (STYLE 2): arguments (``arguments.CellArgs``) → ``parse(cell,
line_offset=1)`` → ``api.start`` → wait → display; ``%woml``'s subcommands are
``line``'s. Every run executes on the package's run loop (``runloop``); the cell's
thread only waits for it, so the kernel's own loop is never re-entered and every
queued cell runs (spec §6.3). Retry, XML and HTTP logic live below it and never
import IPython. Per-session state — open journals, background runs, live views, the
``Woml`` settings — lives on the ``WomlMagics`` instance, which closes it all in
``unload_ipython_extension`` (STYLE 7).

Display (see docs/magic.md): one output per cell. A finished run is its static
timeline; a run still going shows the live widget, with the static timeline as its
fallback, and becomes the static timeline when it ends (``magic.display.LiveView``).
"""

# IPython's magic decorators, argument parser and display are untyped (STYLE 8).
# mypy: disable-error-code="untyped-decorator,no-untyped-call"

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from .. import api
from ..api import MEMORY, Journal, Run, Workflow
from ..errors import LabModelError, WomlJournalError
from ..parse import parse
from . import options
from .arguments import CellArgs, cell_arguments
from .display import LiveView, display, show_lint, static_bundle
from .line import LineArgs, dispatch, line_arguments
from .settings import settings_for
from .support import (
    CANCEL_WAIT_S,
    CellInterrupted,
    as_usage_errors,
    parse_args,
    wait_done,
    widgets_work,
)

if TYPE_CHECKING:
    from ..lab import LabResult
    from .editor import Editor

#: A foreground run still going after this long gets the live timeline; a quicker one
#: shows only its static timeline (no widget to create, send and replace).
LIVE_AFTER_S = 0.25
#: How long a cell waits for a run's engine to start (checks, journal) before giving up.
_START_WAIT_S = 60.0


@magics_class
class WomlMagics(Magics):
    """``%%woml`` and ``%woml`` for one IPython shell (spec §6)."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._shell: Any = shell  # Magics types it Optional; ours always has one
        self.settings = settings_for(shell)
        self._journals: dict[str, Journal] = {}
        self.handles: dict[str, api.RunHandle] = {}  # background runs (`%woml cancel`)
        self._views: list[LiveView] = []
        # (id(run), execution_count) of the Run this cell already shows (one output).
        self._shown: tuple[int, int] | None = None
        # Secrets set with `%woml secret NAME`: kernel memory only (spec §10.1).
        self.secrets: dict[str, str] = {}
        # Completion, help and diagnostics of %%woml cells (spec §6.4), set on load.
        self.editor: Editor | None = None

    # -- %%woml ---------------------------------------------------------------------

    @cell_arguments
    # IPython 9 types its magic decorators so that no function fits (8.x is untyped).
    @cell_magic("woml")  # type: ignore[arg-type,unused-ignore]
    def woml_cell(self, line: str, cell: str) -> Run | LabResult:
        """Run the WOML document in this cell (spec §6.1); its value is the ``Run``."""
        args = CellArgs.of(parse_args(self.woml_cell, line))
        source = f"%%woml {line}\n{cell}"  # the cell as the editor shows it (spec §2.3)
        options.check_combinations(args)
        options.check_lab(args)
        payload = options.payload(args.payload, self.settings, self._shell)
        workflow = self._parse(cell, source)
        if args.lab.clients is not None:
            return self._lab(args, args.lab.clients, workflow, payload, source)
        journal = self.journal(args.journal)
        with as_usage_errors(None):
            api.check_journal(journal, run_id=args.run_id if args.resume is None else None,
                              resume=args.resume, flags=True)
        clock = options.clock(args, self.settings, journal)
        engine, temporal = options.engine(args.where, self.settings)
        secrets = options.secrets(self.settings, self.secrets, engine, workflow)
        if not args.no_lint:
            show_lint(workflow)
        live = not args.no_timeline and widgets_work(self._shell)
        with as_usage_errors(source):
            handle = api.start(
                workflow,
                payload=payload,
                clock=clock,
                run_id=args.run_id,
                journal=journal,
                resume=args.resume,
                retry_interrupted=args.retry_interrupted,
                config=self.settings.engine_config(),
                engine=engine,
                temporal=temporal,
                secrets=secrets,
                faults=args.faults,
                record=args.cassette.record,
                record_mode=args.cassette.record_mode,
                replay=args.cassette.replay,
            )
            if args.background:
                run = self._background(handle, live)
            else:
                run = self._foreground(handle, live, args.out)
        if args.out is not None:
            self._shell.user_ns[args.out] = run
        return run

    def _lab(self, args: CellArgs, clients: int, workflow: Workflow, payload: Any,
             source: str) -> LabResult:
        """``--clients N``: the retry lab of ``clients`` clients (spec §11), its flags
        checked by ``check_lab``; the cell's value is its result."""
        from ..lab import lab  # the lab's engine and plots load on first use

        if not args.no_lint:
            show_lint(workflow)
        flags = args.lab
        with as_usage_errors(source):
            try:
                result = lab(workflow, clients=clients, seed=flags.seed,
                             server=flags.server, capacity=flags.capacity, outage=flags.outage,
                             throttle=flags.throttle or None, what_if=flags.what_if,
                             payload=payload, faults=args.faults,
                             secrets=options.secrets(self.settings, self.secrets, "local",
                                                     workflow))
            except LabModelError as exc:  # flags that disagree (spec §11)
                raise UsageError(f"--clients: {exc}") from None
        if args.out is not None:
            self._shell.user_ns[args.out] = result
        return result

    def _foreground(self, handle: api.RunHandle, live: bool, out: str | None) -> Run:
        """Block the cell until the run ends (spec §6.1); the cell's thread only waits.

        A run still going after ``LIVE_AFTER_S`` gets the live timeline, which turns
        into the static one when it ends; a quicker run shows its static timeline only
        (as the cell's value). A kernel interrupt ends the attempt ``interrupted``.
        """
        view: LiveView | None = None
        try:
            if not handle.wait(LIVE_AFTER_S) and live and handle.wait_started(_START_WAIT_S):
                view = self._show_live(handle, cancellable=False)
            handle.wait()
        except KeyboardInterrupt:
            # spec §6.1: the attempt ended `interrupted`; keep the Run reachable, then
            # let IPython stop the notebook's "run all" as for any interrupt, shown as
            # one line (spec §6.3), not a traceback through the run loop.
            if view is not None:
                view.finish()
            run = handle.run if handle.started else None
            if out is not None and run is not None:
                self._shell.user_ns[out] = run
            raise CellInterrupted(run) from None
        run = handle.result()
        if view is not None:
            view.finish()
            self._shown = (id(run), self._shell.execution_count)
        return run

    def _background(self, handle: api.RunHandle, live: bool) -> Run:
        """A background run (spec §6.1): returns once it has started, with its live Run."""
        handle.wait_started(_START_WAIT_S)
        if not handle.started:
            return handle.result(timeout=CANCEL_WAIT_S)  # it ended before starting
        run = handle.run
        self.handles[run.id] = handle
        if live:
            self._show_live(handle, cancellable=True)
            self._shown = (id(run), self._shell.execution_count)
        return run

    def _show_live(self, handle: api.RunHandle, *, cancellable: bool) -> LiveView:
        """Display the live timeline of ``handle``'s run (spec §6.3); it becomes the
        static timeline when the run ends."""
        view = LiveView.show(handle, on_cancel=handle.cancel if cancellable else None)
        self._views.append(view)
        return view

    def settle_views(self, *_result: Any) -> None:
        """After every cell: repeat the final update of live views whose run has ended,
        under this cell's header, then forget them (see ``LiveView.settle``)."""
        self._views = [v for v in self._views if not v.settle()]

    # -- %woml ----------------------------------------------------------------------

    @line_arguments
    @line_magic("woml")  # type: ignore[arg-type,unused-ignore]
    def woml_line(self, line: str) -> Any:
        """``%woml runs``, ``%woml show RUN_ID``, ``%woml compare RUN_A RUN_B [...]
        [--labels A,B]`` (the runs on one time axis), ``%woml save RUN_ID FILE``,
        ``%woml cancel RUN_ID``, ``%woml secret NAME`` (spec §6.2, §6.3, §10.1, §10.4):
        the subcommands of ``magic.line``."""
        return dispatch(self, LineArgs.of(parse_args(self.woml_line, line)))

    def secret_names(self) -> list[str]:
        """The names of the secrets scripts may use in this session (spec §10.1): set
        with ``%woml secret`` or named in ``Woml.secrets`` and set in the environment."""
        return sorted({*self.secrets, *options.env_secret_names(self.settings)})

    # -- helpers ----------------------------------------------------------------------

    def _parse(self, cell: str, source: str) -> Workflow:
        with as_usage_errors(source):
            return parse(cell, line_offset=1, default_timeout=self.settings.timeout())

    def journal(self, path: str | None) -> Journal:
        """The session's open journal for ``path`` (default ``Woml.journal``), spec §5.2."""
        raw = self.settings.journal if path is None else path
        key = raw if raw == MEMORY else str(Path(os.path.expanduser(raw)).resolve())
        journal = self._journals.get(key)
        if journal is None:
            try:
                journal = Journal(key, redact_headers=self.settings.redact_headers)
            except WomlJournalError as exc:
                raise UsageError(str(exc)) from None
            self._journals[key] = journal
        return journal

    def display_run(self, run: Run) -> None:
        """Show ``run`` as one output (IPython's display hook for ``Run``, spec §6.3).

        A finished run is its static timeline (SVG, details and replay in the page); a
        background run still going is its live timeline, which becomes the static one
        when it ends. The value of the cell that already shows the run shows nothing more.
        """
        if self._shown == (id(run), self._shell.execution_count):
            self._shown = None
            return
        handle = self.handles.get(run.id)
        if (
            run.status == "running"
            and handle is not None
            and handle.started
            and handle.run is run
            and not handle.done()
            and widgets_work(self._shell)
        ):
            self._show_live(handle, cancellable=True)
            return
        display(static_bundle(run), raw=True)

    def close(self) -> None:
        """Cancel background runs, then close widgets, journals and the editor (STYLE 7)."""
        if self.editor is not None:
            self.editor.close()
            self.editor = None
        for handle in self.handles.values():
            if not handle.done():
                handle.cancel()
                wait_done(handle)
        self.handles.clear()
        for view in self._views:
            view.finish()
        self._views.clear()
        for journal in self._journals.values():
            journal.close()
        self._journals.clear()
