"""What the magics share that is not a magic: argument parsing, errors as IPython's
``UsageError``, and waiting on a run (spec §6.1, §6.2)."""

# IPython's argument parser is untyped (STYLE 8).
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator
from typing import Any

from IPython.core.error import UsageError

from .. import api
from ..api import Run
from ..errors import WomlError, WomlRunError, WomlSyntaxError

#: How long ``%woml cancel`` and unloading wait for a cancelled run to close its books.
CANCEL_WAIT_S = 10.0


@contextlib.contextmanager
def as_usage_errors(source: str | None) -> Iterator[None]:
    """Misuse found below the magic becomes ``UsageError`` (STYLE 6).

    Document errors keep their type (they render as message, line and caret) but get
    the cell's full text, so the caret line counts the ``%%woml`` line (spec §2.3).
    """
    try:
        yield
    except WomlSyntaxError as exc:
        if source is not None:
            exc.source_line = None
            exc.with_source(source)
        raise
    except WomlRunError as exc:
        raise UsageError(str(exc)) from None


def parse_args(magic: Any, line: str) -> Any:
    """Parse a magic's line with shell quoting: quotes group words and are removed,
    so ``--payload '{"a": 1}'`` gives the expression ``{"a": 1}``. Bad arguments
    raise ``UsageError`` (IPython's MagicArgumentParser)."""
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"cannot split the arguments {line!r}: {exc}") from None
    return magic.parser.parse_args(argv)


def widgets_work(shell: Any) -> bool:
    """Whether a widget front end can exist: the shell belongs to a Jupyter kernel."""
    return getattr(shell, "kernel", None) is not None


def wait_done(handle: api.RunHandle) -> None:
    """Wait until a cancelled run has recorded its ``cancelled`` attempt (spec §3.2)."""
    # A run's own error is already shown by its Run; here we only wait.
    with contextlib.suppress(WomlError, TimeoutError):
        handle.result(timeout=CANCEL_WAIT_S)


class CellInterrupted(KeyboardInterrupt):
    """A kernel interrupt that ended a foreground run (spec §6.1, §6.3): still a
    ``KeyboardInterrupt``, so the front end stops a Run All as after any interrupt,
    but IPython shows it as its one line (``_render_traceback_``): what stopped and
    what to do next, never a traceback through the package."""

    def __init__(self, run: Run | None) -> None:
        self.run = run
        super().__init__(interrupted_line(run))

    def _render_traceback_(self) -> list[str]:
        return [f"Interrupted: {self}"]


def interrupted_line(run: Run | None) -> str:
    """One sentence: which attempt the interrupt ended, and how to go on (spec §5.3)."""
    if run is None:
        return "the run was stopped before it started; nothing ran."
    for sr in run.steps.values():
        if sr.attempts and sr.attempts[-1].outcome == "interrupted":
            return (f"run {run.id}: attempt {sr.attempts[-1].number} of {sr.id} ended "
                    "interrupted and its step failed closed; whether its effects happened "
                    "is unknown. Check, then resume it with: %%woml --resume "
                    f"{run.id} --retry-interrupted")
        if sr.reason is not None:  # stopped during a wait: no attempt says so
            return f"run {run.id}: {sr.reason}. Run the cell again to start a new run."
    return f"run {run.id} was interrupted ({run.status})."


def stopped_at(handle: api.RunHandle) -> str:
    try:
        run = handle.run
    except WomlError as exc:
        return str(exc)
    for sr in run.steps.values():
        if sr.attempts and sr.attempts[-1].outcome == "cancelled":
            return f"attempt {sr.attempts[-1].number} of {sr.id} ended cancelled"
    return f"the run is {run.status}"
