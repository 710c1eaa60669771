"""A script's tokens read as JavaScript expressions: member chains (`a.b?.c["d"]`), calls,
bracketed groups and their comma-separated parts, object literals' properties, where an
expression ends, and the cell's line and column of a token (spec §2.3).

``Syntax`` is the first layer of the linter's view of one script; ``scopes.Scopes`` adds
its bindings, ``values.Values`` what an expression is built from.
"""

from __future__ import annotations

from typing import NamedTuple

from ..javascript import HEAD, MID, NAME, NUM, PUNCT, STR, TAIL, TPL, Lines, brackets, tokenize
from .tokens import KEYWORDS, OPENERS, ends_expression, starts_expression


class Prop(NamedTuple):
    """One part of an object literal: a property, a shorthand, a spread or a method."""

    kind: str  # "keyed", "shorthand", "spread", "method", "other"
    key: str | None
    key_at: int
    lo: int  # the value's (or the spread's) tokens
    hi: int


class Syntax:
    """One script's tokens and brackets, and how its expressions are read."""

    def __init__(self, source: str, first_line: int = 1, first_column: int = 1) -> None:
        self.source = source
        self.toks = tokenize(source)
        self.n = len(self.toks)
        self.match, self.parent = brackets(self.toks)
        self.lines = Lines(source, first_line, first_column)
        # expr_end's answers by (start, commas): nested arrows ask it once per level,
        # and a scan that reaches an answered start ends there, so all the asking
        # together reads each token once.
        self._ends: dict[tuple[int, bool], int] = {}

    def is_punct(self, i: int, *texts: str) -> bool:
        return 0 <= i < self.n and self.toks[i].kind == PUNCT and self.toks[i].text in texts

    def is_name(self, i: int, *texts: str) -> bool:
        return (
            0 <= i < self.n
            and self.toks[i].kind == NAME
            and (not texts or self.toks[i].text in texts)
        )

    def after_dot(self, i: int) -> bool:
        return self.is_punct(i - 1, ".", "?.")

    def closer(self, opener: int) -> int:
        return min(self.match[opener], self.n)

    def group_is(self, lo: int, hi: int, opener: str) -> bool:
        """Whether tokens lo..hi are exactly one bracketed group opened by ``opener``."""
        return self.is_punct(lo, opener) and self.match[lo] == hi - 1

    def position(self, offset: int) -> tuple[int, int]:
        """The cell's line and column of a script offset (the first line starts at
        ``first_column``, later ones at column 1)."""
        return self.lines.position(offset)

    def line_of(self, token: int) -> int:
        return self.position(self.toks[token].start)[0]

    def expr_end(self, i: int, *, commas: bool = True) -> int:
        """The index after the expression starting at ``i``: at a `;`, a `,` (if
        ``commas``), the enclosing group's closer, or a line break that ends a statement.

        Linear in all: an expression that goes on past token ``j`` ends where the one
        starting at ``j`` ends (the line-break rule aside, checked at ``j`` first), so
        every start passed on the way gets the same answer, and a scan stops at the first
        start already answered."""
        toks, ends, j, prev = self.toks, self._ends, i, None
        passed: list[int] = []
        end: int | None = None
        while j < self.n:
            t = toks[j]
            if (
                j > i
                and t.newline
                and prev is not None
                and ends_expression(prev)
                and starts_expression(t)
            ):
                break
            if t.kind in (MID, TAIL) or (
                t.kind == PUNCT and (t.text in (";", ")", "]", "}") or (commas and t.text == ","))
            ):
                break
            end = ends.get((j, commas))
            if end is not None:
                break
            passed.append(j)
            if t.kind == HEAD or (t.kind == PUNCT and t.text in OPENERS):
                close = self.closer(j)
                prev = toks[close] if close < self.n else None
                j = close + 1
                continue
            prev, j = t, j + 1
        found = min(j if end is None else end, self.n)
        for k in passed:
            ends[(k, commas)] = found
        return found

    def chain(self, i: int) -> tuple[tuple[str, ...], int]:
        """The member path starting at name ``i`` (``a.b?.c["d"]``) and the index after it."""
        toks, names, k = self.toks, [self.toks[i].text], i + 1
        while k < self.n:
            if self.is_punct(k, ".", "?.") and self.is_name(k + 1):
                names.append(toks[k + 1].text)
                k += 2
                continue
            b = k + 1 if self.is_punct(k, "?.") else k
            if (
                self.is_punct(b, "[")
                and b + 2 < self.n
                and toks[b + 1].kind in (STR, TPL)
                and self.is_punct(b + 2, "]")
            ):
                names.append(toks[b + 1].text)
                k = b + 3
                continue
            break
        return tuple(names), k

    def call_open(self, k: int) -> int | None:
        """The `(` of a call right after a callee ending before ``k`` (`f(` or `f?.(`)."""
        if self.is_punct(k, "("):
            return k
        if self.is_punct(k, "?.") and self.is_punct(k + 1, "("):
            return k + 1
        return None

    def pure_chain(self, lo: int, hi: int) -> tuple[str, ...] | None:
        if not self.is_name(lo) or self.toks[lo].text in KEYWORDS:
            return None
        names, end = self.chain(lo)
        return names if end == hi else None

    def split(self, opener: int) -> list[tuple[int, int]]:
        """The comma-separated parts of a bracketed group, empty parts dropped."""
        close, parts = self.closer(opener), []
        start = j = opener + 1
        while j < close:
            t = self.toks[j]
            if t.kind == PUNCT and t.text == ",":
                parts.append((start, j))
                start = j + 1
            elif t.kind == HEAD or (t.kind == PUNCT and t.text in OPENERS):
                j = self.closer(j)
                continue
            j += 1
        parts.append((start, close))
        return [(lo, hi) for lo, hi in parts if lo < hi]

    def properties(self, opener: int) -> list[Prop]:
        toks, props = self.toks, []
        for lo, hi in self.split(opener):
            t = toks[lo]
            if self.is_punct(lo, "..."):
                props.append(Prop("spread", None, lo, lo + 1, hi))
            elif t.kind in (NAME, STR, NUM, TPL) and self.is_punct(lo + 1, ":"):
                props.append(Prop("keyed", t.text, lo, lo + 2, hi))
            elif t.kind == NAME and lo + 1 == hi:
                props.append(Prop("shorthand", t.text, lo, lo, hi))
            elif t.kind in (NAME, STR, NUM) and self.is_punct(lo + 1, "("):
                props.append(Prop("method", t.text, lo, lo, hi))
            elif (
                self.is_name(lo, "get", "set", "async")
                and lo + 1 < hi
                and toks[lo + 1].kind in (NAME, STR, NUM)
            ):
                props.append(Prop("method", toks[lo + 1].text, lo + 1, lo, hi))
            else:  # a computed key, `*gen() {}`, or something this reader does not know
                props.append(Prop("other", None, lo, lo, hi))
        return props
