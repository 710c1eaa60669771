"""The idempotency-key linter: warnings about keys before a run (spec §3.4, §3.5, §4.1-§4.3).

An idempotency key is only worth sending if every attempt of the step sends the same one
(spec §3.5): a key built from something that changes per attempt makes the server see
each retry as a new request, which is exactly the duplicate the key was meant to stop.
``lint`` reads each step's script before anything runs and returns warnings — never
errors; the run goes ahead either way:

``per-attempt-key``
    an ``idempotency.value`` of a ``services.http.request`` call (or an
    ``Idempotency-Key``-like entry of its ``headers``) is built from ``attempt.number``,
    ``Date.now()``, ``new Date()`` (or ``Date()``), ``Math.random()`` or
    ``crypto.randomUUID()``. The warning stands where that construct is written, which
    may be a variable, a helper function or a reassignment earlier in the script.
``unkeyed-post``
    a named call (``options.name``, spec §4.3) with method ``POST`` and no
    ``idempotency``: if its response is lost, the ambiguity guard (spec §4.2) fails the
    step closed, and nothing could make a repeat safe.

The analysis is heuristic but careful: a warning must be right, so anything it cannot
follow (a request built by a function, an object mutated after it was written, a
spread it cannot see into) gives no warning rather than a guess. The script is
tokenized as JavaScript (strings, template literals with nested ``${}``, comments,
regular expression literals); calls are found through ``services.http`` and its
aliases (``const http = services.http``, ``const { http } = services``,
``const { request } = services.http``); a key is followed through ``const``/``let``/
``var`` bindings and reassignments (respecting block and function scopes), object
literals and their spreads, destructuring, and the ``return`` of helper functions, a
few levels deep. The result of another ``services.*`` call is data, not a construct:
its arguments are not part of a key built from it.

``not-linted``
    a note, not a warning: the cell's scripts are longer than the linter reads
    (``MAX_LINT_CHARS``, every step's script together), so the steps from this one on
    were not checked. Linting is linear in the script's size for any nesting; the
    limit keeps a cell from waiting on it (``bench/lint.py``).

Lines and columns are the cell's (spec §2.3): a step's script starts at
``Step.script_line``/``Step.script_column``.

The package, one layer on another: ``tokens`` (the tokenizer), ``syntax`` (tokens read
as expressions), ``scopes`` (bindings and the writes that reach a read), ``values``
(what an expression is built from), ``calls`` (the request calls and their requests),
``rules`` (the two rules and their messages).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Step, Workflow
from .rules import PER_ATTEMPT_KEY, UNKEYED_POST, findings
from .values import Values

__all__ = [
    "MAX_LINT_CHARS",
    "NOT_LINTED",
    "PER_ATTEMPT_KEY",
    "UNKEYED_POST",
    "LintWarning",
    "format_warning",
    "lint",
]

#: The most script text one ``lint`` reads, in characters, every step's together: at
#: the linter's pace on a shared 2-core machine (``bench/lint.py``) well under a second.
MAX_LINT_CHARS = 65_536
NOT_LINTED = "not-linted"


@dataclass(frozen=True)
class LintWarning:
    """One warning: the step, the cell's line and column, a code and one sentence."""

    step_id: str
    line: int
    column: int
    code: str
    message: str


def lint(workflow: Workflow, *, max_chars: int = MAX_LINT_CHARS) -> list[LintWarning]:
    """The idempotency-key warnings of every step, in document order, then by position.

    The steps' scripts are read until together they would pass ``max_chars``; the first
    step that does not fit gets a ``not-linted`` note instead, and it and the steps
    after it are not read."""
    warnings: list[LintWarning] = []
    left = max_chars
    for index, step in enumerate(workflow.steps):
        if len(step.script) > left:
            total = sum(len(s.script) for s in workflow.steps)
            warnings.append(_not_linted(step, len(workflow.steps) - index - 1, total, max_chars))
            break
        left -= len(step.script)
        warnings += _lint_step(step)
    return warnings


def _not_linted(step: Step, after: int, total: int, max_chars: int) -> LintWarning:
    """The note on the first step the linter did not read, and how many after it."""
    these = (
        "this step's script was"
        if not after
        else f"this step's script and the {after} after it were"
    )
    return LintWarning(
        step.id,
        step.script_line,
        step.script_column,
        NOT_LINTED,
        f"{these} not checked for idempotency keys: the cell's scripts are too large to "
        f"lint ({total:,} characters; the linter reads up to {max_chars:,} per cell)",
    )


def format_warning(warning: LintWarning) -> str:
    """``line 7: step 'charge': the idempotency key …`` — how the magic shows a warning."""
    return f"line {warning.line}: step {warning.step_id!r}: {warning.message}"


def _lint_step(step: Step) -> list[LintWarning]:
    script = Values(step.script, step.script_line, step.script_column)
    found: dict[tuple[int, str, str], LintWarning] = {}
    for offset, code, message in findings(script):
        line, column = script.position(offset)
        found.setdefault((offset, code, message), LintWarning(step.id, line, column, code, message))
    return sorted(found.values(), key=lambda w: (w.line, w.column, w.code, w.message))
