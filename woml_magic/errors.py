"""The exceptions woml_magic raises on purpose (spec §2.5, §7): the whole tree, each
defined here (the modules that raise them import them).

    WomlError                 base of every error the package raises on purpose
    ├── WomlSyntaxError       a malformed document (spec §2.5): line, column, message
    ├── WomlRunError          a run cannot start or resume (unknown run id, fingerprint
    │   │                     mismatch, bad payload or clock) (spec §5.3, §6.1)
    │   ├── WomlLimitError    something crossing into the kernel breaks a limit (§4.5):
    │   │                     .limit, .value, .allowed
    │   ├── CassetteError     a cassette to record or replay that cannot be used
    │   │                     (§10.4): missing, malformed at a line, or in the way
    │   └── WomlExtraMissing  an optional feature's extra is not installed (also an
    │                         ImportError): the message says what to pip install
    ├── WomlJournalError      the journal cannot be opened or read (spec §5.2)
    ├── WomlImageError        an image of a run cannot be made as asked (spec §6.3):
    │                         unknown theme or file type, bad scale, no such folder
    │                         (also a ValueError)
    ├── LabModelError         the retry lab cannot be built as asked (spec §11): a
    │   │                     server model, outage, capacity or client count (also a
    │   │                     ValueError)
    │   ├── LabArgumentError  lab() given a keyword it does not take, or no document
    │   │                     (also a TypeError)
    │   └── WhatIfError       a what-if overlay that cannot be read (spec §11)
    ├── TargetError           policy.to(target) with a target it does not know (§11)
    │                         (also a ValueError)
    └── DemoAPIError          misuse of the demo API (spec §8): a bad argument or a
                              call in the wrong state (also a ValueError)

``ServiceRejection`` is not a ``WomlError``: it never reaches the user as a Python
exception, but rejects a script's ``services.*`` promise (spec §4.1).

A document error renders in a notebook as its sentence, the offending line and a
caret (``_render_traceback_``), never as a Python traceback; the line is a window of at
most ``EXCERPT`` characters around the column (``excerpt``), and a message that names a
bad value quotes a window of it (``quote``).
"""

from __future__ import annotations

from collections.abc import Iterable

#: The most characters of its input a message quotes (STYLE 15): a window of it.
EXCERPT = 120


def excerpt(text: str, at: int = 0, width: int = EXCERPT) -> tuple[str, int]:
    """A window of at most ``width`` characters of ``text`` around index ``at``, with
    ``…`` where it was cut, and where ``at`` stands in the window (for a caret).

    The one function that bounds what a message quotes (spec §2.5: the offending line
    and a caret): the CLI's and the notebook's document errors, and every message that
    names a bad value. ``text`` shorter than ``width`` is shown whole; ``at`` past its
    end stands just after it."""
    n = len(text)
    at = max(0, min(at, n))
    if n <= width:
        return text, at
    lo = max(0, min(at - width // 2, n - width))
    hi = lo + width
    if lo > 0:
        lo += 1  # room for the leading "…"
    if hi < n:
        hi -= 1  # and the trailing one
    shown = ("…" if lo > 0 else "") + text[lo:hi] + ("…" if hi < n else "")
    return shown, at - lo + (1 if lo > 0 else 0)


def quote(value: object, width: int = 60) -> str:
    """How a message names a bad value it was given: text as its ``repr`` (quoted),
    anything else as its ``repr``; either the first ``width`` characters or so
    (``excerpt``)."""
    if isinstance(value, str):
        return repr(excerpt(value, 0, width)[0])
    return excerpt(repr(value), 0, width)[0]


def one_of(names: Iterable[str]) -> str:
    """The allowed names as a message offers them: ``'a' or 'b'``, ``'a', 'b' or 'c'``
    (each registry's names, read when the message is written, STYLE 14)."""
    shown = [repr(name) for name in names]
    if len(shown) < 2:
        return "".join(shown) or "(none)"
    return f"{', '.join(shown[:-1])} or {shown[-1]}"


class WomlError(Exception):
    """Base class of every error woml_magic raises on purpose (spec §7)."""


class WomlSyntaxError(WomlError):
    """A malformed WOML document (spec §2.5).

    ``line`` and ``column`` are 1-based positions in the cell's own text; ``message``
    is one sentence naming the bad value and what is allowed. ``source_line`` is the
    offending line's text when known, for the caret display.
    """

    def __init__(
        self, message: str, line: int, column: int = 1, source_line: str | None = None
    ) -> None:
        self.message = message
        self.line = line
        self.column = max(1, column)
        self.source_line = source_line
        super().__init__(f"line {line}, column {self.column}: {message}")

    def with_source(self, text: str) -> WomlSyntaxError:
        """Attach the offending line of ``text`` (the whole cell) for display."""
        lines = text.splitlines()
        if self.source_line is None and 1 <= self.line <= len(lines):
            self.source_line = lines[self.line - 1]
        return self

    def pretty(self) -> str:
        """The sentence, the offending line and a caret under the column (spec §2.5)."""
        out = [f"WomlSyntaxError: {self.message}", f"  line {self.line}, column {self.column}"]
        if self.source_line is not None:
            # A window of the line around the column (a minified script is one line of
            # megabytes), the caret under the same character in it.
            shown, caret = excerpt(self.source_line.expandtabs(1), self.column - 1)
            number = f"{self.line:>4}"
            out.append(f"  {number} | {shown}")
            out.append(f"  {' ' * len(number)} | {' ' * caret}^")
        return "\n".join(out)

    def _render_traceback_(self) -> list[str]:
        # IPython calls this instead of printing a traceback (STYLE 6).
        return self.pretty().splitlines()


class WomlRunError(WomlError):
    """A run cannot start or resume: unknown run id, fingerprint mismatch, bad payload."""

    def _render_traceback_(self) -> list[str]:
        return [f"WomlRunError: {self}"]


class CassetteError(WomlRunError):
    """A cassette that cannot be used (spec §10.4): a replay's file missing or malformed
    (the message names the line), a recording's file in the way without a record mode,
    or a record mode that is not one."""


class WomlExtraMissing(WomlRunError, ImportError):
    """An optional feature needs an extra that is not installed: the Temporal engine
    (``temporal``, spec §9) or the lab's plots (``lab``, spec §11). The message names
    the feature, what is missing and the ``pip install "woml-magic[EXTRA]"`` line;
    ``extra`` is the extra's name. An ``ImportError`` too, so code that treats the
    feature as optional (``except ImportError``) keeps working."""

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra

    def _render_traceback_(self) -> list[str]:
        return [f"WomlExtraMissing: {self}"]


class WomlJournalError(WomlError):
    """The journal cannot be opened, read or written (spec §5.2)."""

    def _render_traceback_(self) -> list[str]:
        return [f"WomlJournalError: {self}"]


class WomlImageError(WomlError, ValueError):
    """``Run.to_svg`` or ``Run.save`` was asked for what it cannot make (spec §6.3): a
    theme or file type it does not know, a scale out of range, a folder that does not
    exist, a file it cannot write. The message names the value and what is allowed."""

    def _render_traceback_(self) -> list[str]:
        return [f"WomlImageError: {self}"]


class ServiceRejection(Exception):
    """A ``services.*`` call that rejects its promise inside the script (spec §4.1).

    Not a ``WomlError``: it never reaches the user as a Python exception. The script
    worker turns it into a JavaScript ``Error`` whose ``name`` is ``name``, whose
    ``message`` is ``message`` and which carries ``props`` as own properties
    (e.g. ``status``, ``data``, ``headers`` for ``HttpError``; ``ambiguous: true``).
    """

    def __init__(self, name: str, message: str, props: dict[str, object] | None = None) -> None:
        self.name = name
        self.message = message
        self.props = dict(props or {})
        super().__init__(f"{name}: {message}")


class WomlLimitError(WomlRunError):
    """Something crossing into the kernel breaks a limit (spec §4.5, §6.1).

    ``limit`` names the setting (``max_payload_bytes``, ``max_json_depth``, …),
    ``value`` is what was found and ``allowed`` the limit's value. Raised before
    anything runs (a payload); breaches inside an attempt end the attempt instead.
    """

    def __init__(self, message: str, *, limit: str, value: int, allowed: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value
        self.allowed = allowed

    def _render_traceback_(self) -> list[str]:
        return [f"WomlLimitError: {self}"]


class LabModelError(WomlError, ValueError):
    """A retry lab that cannot be built or run as asked (spec §11): a server model, an
    outage window, a capacity or a client count; the message names the bad value."""


class LabArgumentError(LabModelError, TypeError):
    """``lab()`` called with a keyword it does not take, or with neither WOML text nor a
    ``Workflow``: a ``WomlError`` like every bad lab argument, and the ``TypeError``
    Python gives a wrong call."""


class WhatIfError(LabModelError):
    """A ``--what-if`` overlay text that cannot be read (spec §11); the message says what
    is allowed. A ``LabModelError``: one ``except`` catches every refused lab input."""


class TargetError(WomlError, ValueError):
    """``policy.to(target)`` with a target that is not one of ``policy_targets.TARGETS``
    (spec §11)."""


class DemoAPIError(WomlError, ValueError):
    """Misuse of ``DemoAPI`` (or ``DemoApp``, spec §8): a bad argument or a call in the
    wrong state."""
