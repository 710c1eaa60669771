"""The diagnostics of a ``%%woml`` cell as it is typed (spec §2.5, §6.4, §10.3).

``diagnostics(cell)`` parses the document of a cell (its text after the ``%%woml``
line) exactly as the magic does — ``parse(document, line_offset=1)`` — and, when it
parses, runs the key linter over it. It gives the parser's error (at most one: the
parser reports the first) or the linter's warnings, each with its 1-based line and
column in the cell as the editor shows it (the ``%%woml`` line is line 1, spec §2.3),
an end where one is known, and the message the user sees when the cell runs: the
parser's sentence, and the linter's ``step '…': …`` line without its ``line N:``.

Only the parser and the linter run: no script is compiled or run, nothing touches the
network or the file system (spec §2.5). A cell over the parser's size limit (1 MiB)
gives that one error, at once. The linter reads steps in order until ``lint_budget_s``
has gone (at least one step): a cell of hundreds of steps keeps the kernel free for
the user, and running the cell still lints every step. Columns count code points, as
Jupyter's ``cursor_pos`` does.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import WomlSyntaxError
from ..lint import LintWarning, format_warning, lint
from ..parse import MAX_BYTES, parse
from .place import document_start, is_woml_cell

#: What a diagnostic underlines after its start: an XML name, a tag's ``<name``, or a
#: JavaScript name chain with an empty call (``Date.now()``, ``attempt.number``).
_XML_EXTENT = re.compile(r"</?[^\s<>/=\"']+|[^\s<>/=\"']+")
_JS_EXTENT = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?:\(\))?")
#: How long the linter may read steps as the user types (it takes ~1-3 ms a step).
LINT_BUDGET_S = 0.2


@dataclass(frozen=True)
class Diagnostic:
    """One underline: where (1-based, in the cell; the end is exclusive and may be
    unknown), how bad, the message, and who found it."""

    line: int
    column: int
    end_line: int | None
    end_column: int | None
    severity: Literal["error", "warning"]
    message: str
    source: Literal["parser", "lint"]

    def to_json(self) -> dict[str, Any]:
        """The diagnostic as the ``woml.diagnostics`` comm sends it (``magic.editor``)."""
        return {"line": self.line, "column": self.column, "endLine": self.end_line,
                "endColumn": self.end_column, "severity": self.severity,
                "message": self.message, "source": self.source}


def diagnostics(cell: str, *, lint_budget_s: float = LINT_BUDGET_S) -> list[Diagnostic]:
    """The parser's error or the key linter's warnings of ``cell`` (see the module
    docstring); [] for a cell that is not a ``%%woml`` cell."""
    if not is_woml_cell(cell):
        return []
    start = document_start(cell)
    document = cell[start:]
    try:
        workflow = parse(document, line_offset=1)
    except WomlSyntaxError as exc:
        return [_error(cell, exc, len(document) > MAX_BYTES)]
    lines = _Lines(cell)
    deadline = time.monotonic() + lint_budget_s
    found: list[Diagnostic] = []
    for step in workflow.steps:
        found += [_warning(lines, w) for w in lint(dataclasses.replace(workflow, steps=(step,)))]
        if time.monotonic() >= deadline:
            break
    return found


def _error(cell: str, exc: WomlSyntaxError, oversized: bool) -> Diagnostic:
    if oversized:  # nothing to look at in a document this large
        return Diagnostic(exc.line, exc.column, None, None, "error", exc.message, "parser")
    lines = _Lines(cell)
    if exc.line > len(lines.lines):  # a cell that is only its %%woml line: underline its end
        last = len(lines.lines)
        return Diagnostic(last, len(lines.lines[-1]) + 1, None, None, "error", exc.message,
                          "parser")
    end = lines.extent(exc.line, exc.column, _XML_EXTENT)
    return Diagnostic(exc.line, exc.column, *end, "error", exc.message, "parser")


def _warning(lines: _Lines, warning: LintWarning) -> Diagnostic:
    message = format_warning(warning).removeprefix(f"line {warning.line}: ")
    end = lines.extent(warning.line, warning.column, _JS_EXTENT)
    return Diagnostic(warning.line, warning.column, *end, "warning", message, "lint")


class _Lines:
    """The cell's lines, split as the parser counts them (``\\n``, ``\\r\\n``, ``\\r``)."""

    def __init__(self, cell: str) -> None:
        self.lines = re.split(r"\r\n|\r|\n", cell)

    def extent(self, line: int, column: int,
               pattern: re.Pattern[str]) -> tuple[int | None, int | None]:
        """The end (line, column) of what ``pattern`` matches at (line, column)."""
        if not 1 <= line <= len(self.lines):
            return None, None
        match = pattern.match(self.lines[line - 1], column - 1)
        if match is None or match.end() == match.start():
            return None, None
        return line, match.end() + 1
