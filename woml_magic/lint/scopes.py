"""A script's bindings: what a name refers to where it is read, and which of its writes may
give the value it has there (spec §3.5: a key is followed to where it is built).

Every ``const``/``let``/``var`` declaration, function declaration, parameter,
destructuring pattern and assignment becomes a ``Write`` of a ``Binding`` in its block or
function scope. ``resolve`` finds the binding a name refers to, ``reaching`` the writes
that may reach a read (the last one that surely ran, and every later one), ``mutated``
whether an object in a binding may change after it was written. Anything this reader
cannot see into (a parameter, ``for … of``, a pattern it does not know) is an ``opaque``
write: its value is unknown, never guessed.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from ..javascript import NAME, PUNCT
from .syntax import Syntax
from .tokens import ASSIGN, CONTROL, KEYWORDS

#: How many bindings, helpers and object literals a key is followed through.
MAX_DEPTH = 8


@dataclass
class Write:
    """One value a binding gets: an expression, a destructured member path, a function
    declaration's body, or something unknown (a parameter, ``for … of``, a pattern)."""

    at: int  # token index that orders the writes (a hoisted function: its scope's start)
    site: int  # token index of the statement, for dominance and locations
    name: str
    kind: str  # "expr", "path", "function", "opaque"
    lo: int = 0
    hi: int = 0
    path: tuple[str, ...] = ()
    body: int = -1
    compound: bool = False  # `x += …`: the old value is part of the new one


@dataclass
class Binding:
    """A name declared in one scope, and every value written to it there."""

    name: str
    lo: int  # the scope: tokens strictly between lo and hi
    hi: int
    writes: list[Write] = field(default_factory=list)
    ats: list[int] = field(default_factory=list)  # each write's ``at``, once sorted


class Scopes(Syntax):
    """One script's scopes and bindings, collected once."""

    def __init__(self, source: str, first_line: int = 1, first_column: int = 1) -> None:
        super().__init__(source, first_line, first_column)
        self.function_bodies: set[int] = set()
        self.declared: set[int] = set()  # name tokens that declare (not read) a binding
        self.bindings: dict[str, list[Binding]] = {}
        self._scoped: dict[tuple[str, int, int], Binding] = {}  # the same, by scope
        # Per name, where each of its bindings is the innermost (``resolve``).
        self._innermost: dict[str, tuple[list[int], list[Binding | None]]] = {}
        self.returns: dict[int, list[int]] = {}
        self.mutations: dict[int, bool] = {}
        self._collect()

    # -- scopes --

    def enclosing(self, i: int, *, function: bool) -> int:
        """The innermost `{` around token ``i`` (a function body if ``function``), or -1."""
        p = self.parent[i]
        while p >= 0:
            if self.is_punct(p, "{") and (not function or p in self.function_bodies):
                return p
            p = self.parent[p]
        return -1

    def scope(self, opener: int) -> tuple[int, int]:
        return (-1, self.n) if opener < 0 else (opener, self.closer(opener))

    def binding(self, name: str, scope: tuple[int, int]) -> Binding:
        key = (name, scope[0], scope[1])
        b = self._scoped.get(key)
        if b is None:
            b = self._scoped[key] = Binding(name, *scope)
            self.bindings.setdefault(name, []).append(b)
            self._innermost.pop(name, None)
        return b

    def resolve(self, name: str, at: int) -> Binding | None:
        """The binding ``name`` refers to at token ``at``: the innermost scope holding it
        (the first declared, of two with the same start). A lookup in ``_segments``, so a
        name declared in every one of thousands of nested blocks costs no more per read."""
        table = self._innermost.get(name)
        if table is None:
            table = self._innermost[name] = self._segments(self.bindings.get(name, []))
        starts, found = table
        k = bisect_right(starts, at) - 1
        return found[k] if k >= 0 else None

    @staticmethod
    def _segments(bindings: list[Binding]) -> tuple[list[int], list[Binding | None]]:
        """Token positions where the innermost of ``bindings`` holding them changes, and
        which it is from there on (None: none holds them). A binding holds the tokens
        strictly between its ``lo`` and ``hi``; one sweep with a heap of the open ones."""
        opening = sorted(range(len(bindings)), key=lambda j: bindings[j].lo)
        points = sorted({p for b in bindings for p in (b.lo + 1, b.hi)})
        heap: list[tuple[int, int]] = []  # (-lo, order declared): the innermost on top
        starts: list[int] = []
        found: list[Binding | None] = []
        k = 0
        for p in points:
            while k < len(opening) and bindings[opening[k]].lo + 1 <= p:
                heapq.heappush(heap, (-bindings[opening[k]].lo, opening[k]))
                k += 1
            while heap and bindings[heap[0][1]].hi <= p:
                heapq.heappop(heap)  # closed: below the top they wait to come up
            starts.append(p)
            found.append(bindings[heap[0][1]] if heap else None)
        return starts, found

    def reaching(self, b: Binding, at: int) -> list[Write]:
        """The writes of ``b`` that may give its value at ``at``: the last one that surely
        ran before ``at`` (same block or an enclosing one) and every write after it."""
        found: list[Write] = []
        for k in range(bisect_left(b.ats, at) - 1, -1, -1):
            w = b.writes[k]
            if self.runs_before(w, at):
                found.append(w)
                if w.kind == "function" or self.dominates(w.site, at):
                    break
        return found[::-1]

    def runs_before(self, w: Write, at: int) -> bool:
        """Whether ``w`` can run before ``at`` without a call we cannot see: a write inside
        a function that does not hold ``at`` happens only if that function is called."""
        if w.kind == "function":
            return True  # hoisted
        if self.is_punct(w.site - 1, "=>"):
            return False  # `() => x = …`: the assignment is an arrow's whole body
        body = self.enclosing(w.site, function=True)
        return body < 0 or body < at <= self.closer(body)

    def dominates(self, site: int, at: int) -> bool:
        p = self.parent[site]
        while True:
            if p < 0:
                return True
            if not self.is_punct(p, "{"):
                return False  # inside parentheses, an argument, a template: maybe not run
            if p < at <= self.closer(p):
                return True
            before = p - 1
            if not (
                before < 0
                or self.is_name(before, "try", "finally", "do")
                or self.is_punct(before, ";", "{", "}")
            ):
                return False  # a branch or a loop body that may not run, or a function
            p = self.parent[p]

    # -- collecting bindings --

    def _collect(self) -> None:
        toks = self.toks
        for k in range(self.n):
            if self.is_punct(k, "{") and self._is_function_body(k):
                self.function_bodies.add(k)
        for k in range(self.n):
            if self.is_punct(k, "{") and k in self.function_bodies:
                self._parameters(k)
            elif self.is_punct(k, "=>") and not self.is_punct(k + 1, "{"):
                self._bind_parameters(self._arrow_parameters(k), (k, self.expr_end(k + 1)))
            elif self.is_name(k, "catch") and self.is_punct(k + 1, "("):
                close = self.closer(k + 1)
                if self.is_punct(close + 1, "{"):
                    self._bind_parameters((k + 1, close), self.scope(close + 1))
        for k in range(self.n):
            if not self.is_name(k) or self.after_dot(k):
                continue
            if toks[k].text in ("const", "let", "var"):
                self._declaration(k)
            elif toks[k].text == "function":
                self._function_declaration(k)
            elif toks[k].text == "return":
                self.returns.setdefault(self.enclosing(k, function=True), []).append(k)
        for k in range(self.n):
            self._assignment(k)
        for bindings in self.bindings.values():
            for b in bindings:
                b.writes.sort(key=lambda w: w.at)
                b.ats = [w.at for w in b.writes]

    def _is_function_body(self, k: int) -> bool:
        if self.is_punct(k - 1, "=>"):
            return True
        if not self.is_punct(k - 1, ")"):
            return False
        o = self.match[k - 1]
        if o <= 0:
            return False
        before = self.toks[o - 1]
        if before.kind == NAME:
            return before.text not in CONTROL
        return self.is_punct(o - 1, "*", "]")

    def _arrow_parameters(self, arrow: int) -> tuple[int, int] | int:
        """The `(…)` group before `=>`, or the index of a single parameter `x =>`."""
        if self.is_punct(arrow - 1, ")") and self.match[arrow - 1] >= 0:
            return self.match[arrow - 1], arrow - 1
        return arrow - 1

    def _parameters(self, body: int) -> None:
        if self.is_punct(body - 1, "=>"):
            group = self._arrow_parameters(body - 1)
        else:
            group = (self.match[body - 1], body - 1)
        self._bind_parameters(group, self.scope(body))

    def _bind_parameters(self, group: tuple[int, int] | int, scope: tuple[int, int]) -> None:
        """Parameters shadow outer bindings; their values are unknown."""
        lo, hi = (group - 1, group + 1) if isinstance(group, int) else group
        for k in range(max(lo + 1, 0), hi):
            t = self.toks[k]
            if t.kind != NAME or t.text in KEYWORDS:
                continue
            if isinstance(group, int) or (
                self.is_punct(k - 1, "(", ",", "{", "[", "...", ":")
                and self.is_punct(k + 1, ",", ")", "=", "}", "]")
            ):
                self.declared.add(k)
                self.binding(t.text, scope).writes.append(Write(scope[0], k, t.text, "opaque"))

    def _declaration(self, k: int) -> None:
        word = self.toks[k].text
        if word == "var":
            scope = self.scope(self.enclosing(k, function=True))
        else:
            p = self.parent[k]
            if self.is_punct(p, "(") and self.is_name(p - 1, "for"):
                close = self.closer(p)
                end = (
                    self.closer(close + 1)
                    if self.is_punct(close + 1, "{")
                    else self.expr_end(close + 1, commas=False)
                )
                scope = (p, end)
            else:
                scope = self.scope(self.enclosing(k, function=False))
        j = k + 1
        while j < self.n:
            if self.is_name(j) and self.toks[j].text not in KEYWORDS:
                target_end = j + 1
            elif self.is_punct(j, "{", "["):
                target_end = self.closer(j) + 1
            else:
                return
            init: tuple[int, int] | None = None
            end = target_end
            if self.is_punct(target_end, "="):
                init = (target_end + 1, self.expr_end(target_end + 1))
                end = init[1]
            if self.is_name(j):
                self.declared.add(j)
                name = self.toks[j].text
                # A write takes effect once its expression is evaluated: `x = x + 1`
                # reads the previous x.
                write = (
                    Write(init[1], j, name, "expr", *init) if init else Write(j, j, name, "opaque")
                )
                self.binding(name, scope).writes.append(write)
            else:
                base = self.pure_chain(*init) if init else None
                self._pattern(j, base, scope, 0)
            if not self.is_punct(end, ","):
                return
            j = end + 1

    def _pattern(
        self, opener: int, base: tuple[str, ...] | None, scope: tuple[int, int], depth: int
    ) -> None:
        """Destructuring: `{ a, b: c, d: { e } } = x.y` binds `a` to the path `x.y.a`,
        `c` to `x.y.b`, `e` to `x.y.d.e`; everything else gets an unknown value."""
        known = base is not None and depth < MAX_DEPTH and self.is_punct(opener, "{")
        for prop in self.properties(opener) if known else ():
            path = (*base, prop.key) if base is not None and prop.key is not None else None
            if prop.kind == "shorthand" and path:
                self._bind_path(prop.key_at, path, scope)
            elif prop.kind == "keyed" and path and self.is_name(prop.lo) and prop.hi == prop.lo + 1:
                self._bind_path(prop.lo, path, scope)
            elif (
                prop.kind == "keyed"
                and path
                and self.is_punct(prop.lo, "{", "[")
                and self.closer(prop.lo) == prop.hi - 1
            ):
                self._pattern(prop.lo, path, scope, depth + 1)
            else:
                self._opaque_names(prop.lo, prop.hi, scope)
        if not known:
            self._opaque_names(opener + 1, self.closer(opener), scope)

    def _bind_path(self, k: int, path: tuple[str, ...], scope: tuple[int, int]) -> None:
        self.declared.add(k)
        name = self.toks[k].text
        self.binding(name, scope).writes.append(Write(k, k, name, "path", path=path))

    def _opaque_names(self, lo: int, hi: int, scope: tuple[int, int]) -> None:
        for k in range(lo, hi):
            if (
                self.is_name(k)
                and self.toks[k].text not in KEYWORDS
                and self.is_punct(k - 1, "{", ",", "[", ":", "...")
                and self.is_punct(k + 1, ",", "}", "]", "=")
            ):
                self.declared.add(k)
                name = self.toks[k].text
                self.binding(name, scope).writes.append(Write(k, k, name, "opaque"))

    def _function_declaration(self, k: int) -> None:
        j = k + 2 if self.is_punct(k + 1, "*") else k + 1
        if not self.is_name(j) or not self.is_punct(j + 1, "("):
            return
        body = self.closer(j + 1) + 1
        if body not in self.function_bodies:
            return
        self.declared.add(j)
        name = self.toks[j].text
        scope = self.scope(self.enclosing(k, function=False))
        self.binding(name, scope).writes.append(Write(scope[0], k, name, "function", body=body))

    def _assignment(self, k: int) -> None:
        """`x = …`, `x += …` and destructuring assignments `({ x } = …)`, `[x] = …`."""
        if self.is_punct(k, "=") and self.is_punct(k - 1, "}", "]") and self.match[k - 1] >= 0:
            opener = self.match[k - 1]
            # `({ x } = …)`: the statement is the parenthesis around the pattern.
            site = self.parent[opener] if self.is_punct(self.parent[opener], "(") else opener
            for j in range(opener + 1, k - 1):
                if (
                    self.is_name(j)
                    and j not in self.declared
                    and self.toks[j].text not in KEYWORDS
                    and self.is_punct(j - 1, "{", ",", "[", ":", "...")
                    and self.is_punct(j + 1, ",", "}", "]", "=")
                ):
                    b = self.resolve(self.toks[j].text, j)
                    if b is not None:
                        b.writes.append(Write(k, site, b.name, "opaque"))
            return
        t = self.toks[k]
        if (
            t.kind != NAME
            or t.text in KEYWORDS
            or k in self.declared
            or self.after_dot(k)
            or not (
                k + 1 < self.n
                and self.toks[k + 1].kind == PUNCT
                and self.toks[k + 1].text in ASSIGN
            )
        ):
            return
        b = self.resolve(t.text, k)
        if b is not None:
            op, end = self.toks[k + 1].text, self.expr_end(k + 2)
            b.writes.append(Write(end, k, t.text, "expr", k + 2, end, compound=op != "="))

    def mutated(self, b: Binding) -> bool:
        """Whether the object in ``b`` may change after it was written: a member is
        assigned or deleted, or it is the target of ``Object.assign``."""
        key = id(b)
        if key not in self.mutations:
            self.mutations[key] = any(
                self._mutates(k)
                for k in range(self.n)
                if self.is_name(k, b.name)
                and not self.after_dot(k)
                and self.resolve(b.name, k) is b
            )
        return self.mutations[key]

    def _mutates(self, k: int) -> bool:
        j = k + 1
        while j < self.n:
            if self.is_punct(j, ".", "?.") and self.is_name(j + 1):
                j += 2
            elif self.is_punct(j, "["):
                j = self.closer(j) + 1
            else:
                break
        if j > k + 1 and (
            self.is_punct(j, "++", "--")
            or (j < self.n and self.toks[j].kind == PUNCT and self.toks[j].text in ASSIGN)
        ):
            return True
        if j > k + 1 and self.is_name(k - 1, "delete"):
            return True
        if self.is_punct(k - 1, "(") and self.is_name(k - 2) and self.after_dot(k - 2):
            callee = self.chain(k - 4)[0] if self.is_name(k - 4) else ()
            return callee in (
                ("Object", "assign"),
                ("Object", "defineProperty"),
                ("Reflect", "set"),
            )
        return False
