"""The ``%%woml`` cell magic and the ``%woml`` line magic (spec §6.1, §6.2).

A thin adapter (STYLE 2): arguments → ``parse(cell, line_offset=1)`` → ``api.start``
→ wait → display. Every run executes on the package's run loop (``runloop``); the
cell's thread only waits for it, so the kernel's own loop is never re-entered and
every queued cell runs (spec §6.3). Retry, XML and HTTP logic live below it and never
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

import getpass
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from .. import api
from ..api import MEMORY, Journal, Run, Workflow
from ..errors import WomlExtraMissing, WomlImageError, WomlJournalError, excerpt, quote
from ..parse import parse
from ..timeline.theme import PALETTES
from . import options
from .display import LiveView, RunTable, display, show_lint, static_bundle
from .settings import CLOCKS, ENGINES, settings_for

if TYPE_CHECKING:
    from ..lab import LabResult
    from .editor import Editor
from .support import (
    CANCEL_WAIT_S,
    CellInterrupted,
    as_usage_errors,
    parse_args,
    stopped_at,
    wait_done,
    widgets_work,
)

SUBCOMMANDS = (
    "runs [--journal PATH] | show RUN_ID [--journal PATH] | save RUN_ID FILE "
    f"[--theme {'|'.join(PALETTES)}] [--scale N] | cancel RUN_ID | secret NAME"
)
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
        self._handles: dict[str, api.RunHandle] = {}
        self._views: list[LiveView] = []
        # (id(run), execution_count) of the Run this cell already shows (one output).
        self._shown: tuple[int, int] | None = None
        # Secrets set with `%woml secret NAME`: kernel memory only (spec §10.1).
        self._secrets: dict[str, str] = {}
        # Completion, help and diagnostics of %%woml cells (spec §6.4), set on load.
        self.editor: Editor | None = None

    # -- %%woml ---------------------------------------------------------------------

    @magic_arguments()
    @argument(
        "--clock",
        choices=CLOCKS,
        default=None,
        help="The run's clock (spec §5.1); default Woml.clock, itself 'real'.",
    )
    @argument("--simulate", action="store_true", help="Short for --clock simulated.")
    @argument(
        "--payload",
        metavar="EXPR",
        default=None,
        help="A Python expression, evaluated in the notebook's namespace, whose "
        "JSON value is context.payload (quote it if it has spaces).",
    )
    @argument(
        "--run-id",
        metavar="ID",
        default=None,
        help="Pin the run id (it determines the idempotency keys, spec §3.5).",
    )
    @argument(
        "--resume",
        metavar="ID",
        default=None,
        help="Re-execute journaled run ID with the same document (spec §5.3).",
    )
    @argument(
        "--retry-interrupted",
        action="store_true",
        help="With --resume: run an interrupted attempt's step again (spec §5.3).",
    )
    @argument(
        "--journal",
        metavar="PATH",
        default=None,
        help="The journal file, or :memory:; default Woml.journal (spec §5.2).",
    )
    @argument("--out", metavar="VAR", default=None, help="Also bind the Run to this variable.")
    @argument(
        "--background",
        action="store_true",
        help="Return at once; the run goes on in the kernel's event loop, with a "
        "live timeline and a Cancel button (`%%woml cancel RUN_ID` also works).",
    )
    @argument(
        "--no-timeline",
        action="store_true",
        help="Show no live timeline; the cell's value still renders the Run.",
    )
    @argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help="Which engine runs the cell (spec §9); default Woml.engine, itself 'local'.",
    )
    @argument(
        "--temporal",
        metavar="HOST:PORT",
        default=None,
        help="With --engine temporal: this cluster instead of a local dev server "
        "(default Woml.temporal).",
    )
    @argument("--namespace", metavar="NS", default=None, help="The Temporal namespace.")
    @argument("--task-queue", metavar="Q", default=None, help="The Temporal task queue.")
    @argument(
        "--fault",
        metavar="CALL@ATTEMPT=KIND",
        action="append",
        default=None,
        help="Inject a fault into a named call (spec §10.2), e.g. "
        "create-charge@1=drop-response; repeatable; ATTEMPT may be *.",
    )
    @argument("--no-lint", action="store_true", help="Show no idempotency-key warnings.")
    @argument("--clients", metavar="N", type=options.whole_number, action=options.Once,
              default=None,
              help="The retry lab (spec §11): N virtual clients of this workflow on one "
              "simulated clock against a server model; the value is a LabResult.")
    @argument("--seed", metavar="S", type=options.whole_number, action=options.Once, default=0,
              help="With --clients: the seed.")
    @argument("--server", metavar="MODEL|URL", action=options.Once, default=None,
              help="With --clients: a model (unlimited, capacity, throttle, occ) or the URL "
              "of an API on this machine; default a model with ample capacity.")
    @argument("--capacity", metavar="R", type=options.decimal, action=options.Once, default=None,
              help="With --clients: the model's capacity in requests/s.")
    @argument("--outage", metavar="A..B", action=options.Once, default=None,
              help="With --clients: every request in this window fails (e.g. 10s..40s).")
    @argument("--throttle", action="store_true",
              help="With --clients: over capacity, answer 429 with Retry-After.")
    @argument("--what-if", metavar="OVERLAY", action="append", default=None,
              help="With --clients: jitter=full|equal|decorrelated, budget=10%% — beside "
              "WOML's schedule, never WOML semantics (repeatable).")
    # IPython 9 types its magic decorators so that no function fits (8.x is untyped).
    @cell_magic("woml")  # type: ignore[arg-type,unused-ignore]
    def woml_cell(self, line: str, cell: str) -> Run | LabResult:
        """Run the WOML document in this cell (spec §6.1); its value is the ``Run``."""
        args = parse_args(self.woml_cell, line)
        source = f"%%woml {line}\n{cell}"  # the cell as the editor shows it (spec §2.3)
        options.check_combinations(args)
        options.check_lab(args)
        payload = options.payload(args.payload, self.settings, self._shell)
        workflow = self._parse(cell, source)
        if args.clients is not None:
            return self._lab(args, workflow, payload, source)
        journal = self._journal(args.journal)
        with as_usage_errors(None):
            api.check_journal(journal, run_id=args.run_id if args.resume is None else None,
                              resume=args.resume, flags=True)
        clock = options.clock(args, self.settings, journal)
        engine, temporal = options.engine(args, self.settings)
        secrets = options.secrets(self.settings, self._secrets, engine, workflow)
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
                faults=args.fault or [],
            )
            if args.background:
                run = self._background(handle, live)
            else:
                run = self._foreground(handle, live, args.out)
        if args.out is not None:
            self._shell.user_ns[args.out] = run
        return run

    def _lab(self, args: Any, workflow: Workflow, payload: Any, source: str) -> LabResult:
        """``--clients N``: the retry lab (spec §11); the cell's value is its result."""
        from ..lab import lab  # the lab's engine and plots load on first use

        options.check_lab(args)
        if not args.no_lint:
            show_lint(workflow)
        from ..lab.server import LabModelError
        from ..lab.whatif import WhatIfError

        with as_usage_errors(source):
            try:
                result = lab(workflow, clients=args.clients, seed=args.seed,
                             server=args.server, capacity=args.capacity, outage=args.outage,
                             throttle=args.throttle or None, what_if=args.what_if or (),
                             payload=payload, faults=args.fault or [],
                             secrets=options.secrets(self.settings, self._secrets, "local",
                                                     workflow))
            except (LabModelError, WhatIfError) as exc:  # flags that disagree (spec §11)
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
        self._handles[run.id] = handle
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

    @magic_arguments()
    @argument("subcommand", nargs="?", default=None, help="runs, show, save, cancel or secret")
    @argument(
        "run_id",
        nargs="?",
        default=None,
        help="the run, for show, save and cancel; the secret's name, for secret",
    )
    @argument(
        "file",
        nargs="?",
        default=None,
        help="save: the image to write, FILE.svg or FILE.png (spec §6.3)",
    )
    @argument(
        "--theme",
        choices=tuple(PALETTES),
        default=None,
        help="save: the image's colours, JupyterLab's light or dark; default light.",
    )
    @argument(
        "--scale",
        metavar="N",
        type=float,
        default=None,
        help="save: a PNG's pixels per drawing px; default 2 (crisp on slides).",
    )
    @argument(
        "--journal", metavar="PATH", default=None, help="The journal to read; default Woml.journal."
    )
    @argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help="show, save: read the run from this engine (temporal: the workflow's history).",
    )
    @argument("--temporal", metavar="HOST:PORT", default=None, help="show, save: the cluster.")
    @argument("--namespace", metavar="NS", default=None, help="show, save: the namespace.")
    @line_magic("woml")  # type: ignore[arg-type,unused-ignore]
    def woml_line(self, line: str) -> Any:
        """``%woml runs``, ``%woml show RUN_ID``, ``%woml save RUN_ID FILE``,
        ``%woml cancel RUN_ID`` (spec §6.2, §6.3)."""
        args = parse_args(self.woml_line, line)
        command = args.subcommand
        if args.file is not None and command != "save":
            raise UsageError(
                f"%woml {command} takes no file (got {args.file!r}); only "
                "%woml save RUN_ID FILE does"
            )
        if command == "secret":
            self._secret(args.run_id)
            return None
        if command not in ("runs", "show", "save", "cancel"):
            what = "needs a subcommand" if command is None else f"has no subcommand {command!r}"
            raise UsageError(f"%woml {what}; use one of: {SUBCOMMANDS}")
        if command == "runs":
            if args.run_id is not None:
                raise UsageError(f"%woml runs takes no run id (got {quote(args.run_id)})")
            journal = self._journal(args.journal)
            with as_usage_errors(None):
                return RunTable(journal.path, journal.runs())
        if args.run_id is None:
            raise UsageError(f"%woml {command} needs a run id: %woml {command} RUN_ID")
        if command == "show":
            return self._load(args, command)
        if command == "save":
            self._save(args)
            return None
        if args.journal is not None:
            raise UsageError("%woml cancel takes no --journal; it cancels a background run")
        self._cancel(args.run_id)
        return None

    def _load(self, args: Any, command: str) -> Run:
        """The run ``%woml show`` or ``save`` names: from the journal, or from its
        Temporal workflow's history (spec §9)."""
        if (args.engine or self.settings.engine) == "temporal" and args.journal is None:
            _, temporal = options.engine(args, self.settings, "temporal")
            with as_usage_errors(None):
                return api.fetch_run(args.run_id, engine="temporal", temporal=temporal)
        journal = self._journal(args.journal)
        if not journal.has_run(args.run_id):
            raise UsageError(
                f"%woml {command} {excerpt(args.run_id, 0, 60)[0]}: no run"
                f" {quote(args.run_id)} in the journal "
                f"{journal.path}; `%woml runs` lists the runs it holds"
            )
        with as_usage_errors(None):
            return journal.load(args.run_id)

    def _save(self, args: Any) -> None:
        """``%woml save RUN_ID FILE``: the run's timeline as an image (spec §6.3), the
        same drawing as the notebook's; prints where it went."""
        if args.file is None:
            raise UsageError(
                f"%woml save {args.run_id} needs a file: %woml save "
                f"{args.run_id} FILE.svg (or FILE.png)"
            )
        run = self._load(args, "save")
        chosen = {"theme": args.theme, "scale": args.scale}
        given = {name: value for name, value in chosen.items() if value is not None}
        try:
            path = run.save(args.file, **given)
        except (WomlImageError, WomlExtraMissing) as exc:
            raise UsageError(f"%woml save {args.run_id}: {exc}") from None
        print(f"saved the timeline of run {run.id} ({run.status}) to {path}")

    def _secret(self, name: str | None) -> None:
        """``%woml secret NAME``: ask for a value with a password prompt and keep it in
        this kernel's memory only (spec §10.1); without a name, list the names set."""
        if name is None:
            names = self.secret_names()
            print("secrets set: " + (", ".join(names) if names else "none") +
                  " (set one with %woml secret NAME)")
            return
        if not name.isidentifier():
            raise UsageError(
                f"%woml secret {name}: a secret's name is letters, digits and _ "
                "(not starting with a digit), e.g. STRIPE_KEY"
            )
        value = getpass.getpass(f"value of secret {name} (hidden): ")
        if not value:
            raise UsageError(f"%woml secret {name}: nothing was entered; {name} is unchanged")
        self._secrets[name] = value
        print(f"secret {name} set for this session, in kernel memory only; a script reads "
              f'it as services.secret("{name}")')

    def secret_names(self) -> list[str]:
        """The names of the secrets scripts may use in this session (spec §10.1): set
        with ``%woml secret`` or named in ``Woml.secrets`` and set in the environment."""
        return sorted({*self._secrets, *options.env_secret_names(self.settings)})

    def _cancel(self, run_id: str) -> None:
        handle = self._handles.get(run_id)
        if handle is None:
            known = ", ".join(sorted(self._handles)) or "none"
            raise UsageError(
                f"%woml cancel {run_id}: no background run {run_id!r} in this session "
                f"(background runs: {known})"
            )
        if handle.done():
            raise UsageError(
                f"%woml cancel {run_id}: run {run_id!r} has already finished "
                f"({stopped_at(handle)}); there is nothing to cancel"
            )
        handle.cancel()
        wait_done(handle)
        print(f"run {run_id} cancelled: {stopped_at(handle)}")

    # -- helpers ----------------------------------------------------------------------

    def _parse(self, cell: str, source: str) -> Workflow:
        with as_usage_errors(source):
            return parse(cell, line_offset=1, default_timeout=self.settings.timeout())

    def _journal(self, path: str | None) -> Journal:
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
        handle = self._handles.get(run.id)
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
        for handle in self._handles.values():
            if not handle.done():
                handle.cancel()
                wait_done(handle)
        self._handles.clear()
        for view in self._views:
            view.finish()
        self._views.clear()
        for journal in self._journals.values():
            journal.close()
        self._journals.clear()
