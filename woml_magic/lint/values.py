"""What an expression is built from: the per-attempt constructs (``attempt.number``,
``Date.now()``, ``new Date()``, ``Date()``, ``Math.random()``, ``crypto.randomUUID()``)
it reaches through bindings, aliases, destructuring, object literals and their spreads,
and the ``return`` of helper functions, a few levels deep (spec §3.5).

The result of another ``services.*`` call is data, not a construct: its arguments are
not part of a value built from it. Anything that cannot be followed gives nothing rather
than a guess (``UNKNOWN`` for a property, None for an object or a string).
"""

from __future__ import annotations

from typing import NamedTuple

from ..javascript import NAME, STR, TPL
from .scopes import MAX_DEPTH, Scopes, Write
from .tokens import KEYWORDS

#: Token visits allowed per call while following a key: a bound on pathological scripts
#: (hundreds of variables each built from all the others), never reached by real ones.
BUDGET = 50_000

#: The per-attempt constructs as member paths, and how a message names them.
_SOURCES: dict[tuple[str, ...], str] = {
    ("attempt", "number"): "attempt.number",
    ("Date", "now"): "Date.now()",
    ("Math", "random"): "Math.random()",
    ("crypto", "randomUUID"): "crypto.randomUUID()",
}
_GLOBAL_OBJECTS = frozenset({"globalThis", "self", "window"})


class Hit(NamedTuple):
    """A per-attempt construct a value is built from."""

    source: str  # how the message names the construct
    offset: int  # where it is written in the script
    via: tuple[str, ...]  # the bindings followed to reach it, outermost first


#: What ``Values.lookup`` answers for a property an object surely lacks, or may have.
ABSENT = (-1, -1)
UNKNOWN = (-2, -2)


class Values(Scopes):
    """One script, with its values followed: the linter's whole view of it."""

    def __init__(self, source: str, first_line: int = 1, first_column: int = 1) -> None:
        super().__init__(source, first_line, first_column)
        self.budget = BUDGET

    def canonical(self, names: tuple[str, ...], at: int) -> tuple[str, ...] | None:
        """The member path ``names`` stands for, aliases replaced (`http.request` →
        `services.http.request`); None if an alias has another or an unknown value."""
        for _ in range(MAX_DEPTH):
            root = names[0]
            b = self.resolve(root, at)
            if b is None:
                if root in _GLOBAL_OBJECTS and len(names) > 1:
                    names = names[1:]
                    continue
                return names
            paths: set[tuple[str, ...]] = set()
            where = at
            for w in self.reaching(b, at):
                path = w.path if w.kind == "path" else (
                    self.pure_chain(w.lo, w.hi) if w.kind == "expr" and not w.compound
                    else None)
                if path is None:
                    return None
                paths.add(path)
                where = w.site
            if len(paths) != 1:
                return None
            names, at = (*paths.pop(), *names[1:]), where
        return None

    def value_hits(self, lo: int, hi: int, depth: int, via: tuple[str, ...]) -> list[Hit]:
        """The per-attempt constructs the expression ``lo..hi`` is built from."""
        toks, hits, i = self.toks, [], lo
        while i < hi and self.budget > 0:
            self.budget -= 1
            t = toks[i]
            if t.kind != NAME:
                if self.is_punct(i, "=>") and self.is_punct(i + 1, "{"):
                    hits += self.return_hits(i + 1, depth + 1, via)
                    i = self.closer(i + 1) + 1
                else:
                    i += 1
                continue
            if self.after_dot(i) or i in self.declared or self._is_key(i):
                i += 1
            elif t.text == "function":
                j = i + 1
                while j < hi and not self.is_punct(j, "("):
                    j += 1
                body = self.closer(j) + 1 if j < hi else -1
                if body in self.function_bodies:
                    hits += self.return_hits(body, depth + 1, via)
                    i = self.closer(body) + 1
                else:
                    i += 1
            elif t.text == "new" and self.is_name(i + 1, "Date") \
                    and self.resolve("Date", i + 1) is None:
                if self.is_punct(i + 2, "(") and self.match[i + 2] != i + 3:
                    i += 2  # new Date(something): a fixed date; its argument is read on
                else:
                    hits.append(Hit("new Date()", t.start, via))
                    i += 4 if self.is_punct(i + 2, "(") else 2
            elif t.text in KEYWORDS:
                i += 1
            else:
                names, end = self.chain(i)
                call = self.call_open(end)
                canon = self.canonical(names, i)
                if canon is not None and canon[0] == "services":
                    # Another service's answer is data: its arguments build no key.
                    i = self.closer(call) + 1 if call is not None else end
                    continue
                if canon == ("Date",) and call is not None and self.match[call] == call + 1:
                    hits.append(Hit("Date()", t.start, via))
                else:
                    hits += self.path_hits(names, i, depth, via, t.start, call is not None)
                i = end
        return hits

    def _is_key(self, i: int) -> bool:
        """A property name in an object literal (`{ key: …}`), not a reference."""
        return self.is_punct(i + 1, ":") and self.is_punct(i - 1, "{", ",") \
            and self.is_punct(self.parent[i], "{")

    def path_hits(self, names: tuple[str, ...], at: int, depth: int, via: tuple[str, ...],
                  offset: int, called: bool) -> list[Hit]:
        root = names[0]
        b = self.resolve(root, at)
        if b is None:
            if root in _GLOBAL_OBJECTS and len(names) > 1:
                names = names[1:]
            source = _SOURCES.get(names[:2])
            return [Hit(source, offset, via)] if source else []
        if depth >= MAX_DEPTH:
            return []
        hits: list[Hit] = []
        for w in self.reaching(b, at):
            hits += self.write_hits(w, names[1:], depth + 1, (*via, root), offset, called)
        return hits

    def write_hits(self, w: Write, props: tuple[str, ...], depth: int,
                   via: tuple[str, ...], offset: int, called: bool) -> list[Hit]:
        if w.kind == "path":
            start = offset if props else self.toks[w.site].start
            return self.path_hits((*w.path, *props), w.site, depth, via, start, called)
        if w.kind == "function":
            return self.return_hits(w.body, depth, via) if called and not props else []
        if w.kind != "expr":
            return []
        hits = self.path_hits((w.name,), w.site, depth, via, offset, False) \
            if w.compound else []
        return hits + self.member_hits(w.lo, w.hi, () if w.compound else props, depth, via)

    def member_hits(self, lo: int, hi: int, props: tuple[str, ...], depth: int,
                    via: tuple[str, ...]) -> list[Hit]:
        """What ``(lo..hi).props`` is built from: a property of an object literal is just
        that property's value; a member of anything else is built from all of it."""
        if not props:
            return self.value_hits(lo, hi, depth, via)
        if self.group_is(lo, hi, "{"):
            found = self.lookup(lo, props[0], depth)
            if found in (ABSENT, UNKNOWN) or depth >= MAX_DEPTH:
                return []
            return self.member_hits(*found, props[1:], depth + 1, via)
        names = self.pure_chain(lo, hi)
        if names is not None:
            return self.path_hits((*names, *props), lo, depth, via, self.toks[lo].start, False)
        return self.value_hits(lo, hi, depth, via)

    def return_hits(self, body: int, depth: int, via: tuple[str, ...]) -> list[Hit]:
        if depth >= MAX_DEPTH:
            return []
        hits: list[Hit] = []
        for r in self.returns.get(body, ()):
            nxt = r + 1
            if nxt < self.n and not self.toks[nxt].newline \
                    and not self.is_punct(nxt, ";", "}"):
                hits += self.value_hits(nxt, self.expr_end(nxt), depth, via)
        return hits

    def objects(self, lo: int, hi: int, depth: int) -> list[int] | None:
        """The object literals (their `{`) the expression may be, or None if unknown."""
        if self.group_is(lo, hi, "{"):
            return [lo]
        if hi - lo != 1 or not self.is_name(lo) or self.toks[lo].text in KEYWORDS \
                or depth >= MAX_DEPTH:
            return None
        b = self.resolve(self.toks[lo].text, lo)
        if b is None or self.mutated(b):
            return None
        writes = self.reaching(b, lo)
        found: list[int] = []
        for w in writes:
            inner = self.objects(w.lo, w.hi, depth + 1) \
                if w.kind == "expr" and not w.compound else None
            if inner is None:
                return None
            found += inner
        return found or None

    def lookup(self, obj: int, key: str, depth: int) -> tuple[int, int]:
        """The value tokens of ``obj[key]``, ``ABSENT`` or ``UNKNOWN``; later properties
        and spreads win, as in JavaScript."""
        result = ABSENT
        for prop in self.properties(obj):
            if prop.kind == "spread":
                inner = self.objects(prop.lo, prop.hi, depth + 1)
                if inner is None or len(inner) != 1 or depth >= MAX_DEPTH:
                    if not self.nullish(prop.lo, prop.hi):
                        result = UNKNOWN
                    continue
                found = self.lookup(inner[0], key, depth + 1)
                if found != ABSENT:
                    result = found
            elif prop.kind == "other":
                result = UNKNOWN
            elif prop.key == key:
                result = (prop.lo, prop.hi) if prop.kind != "method" else UNKNOWN
        return result

    def nullish(self, lo: int, hi: int) -> bool:
        text = [t.text for t in self.toks[lo:hi]]
        return text in (["undefined"], ["null"], ["void", "0"])

    def string(self, lo: int, hi: int, depth: int = 0) -> str | None:
        """The string the expression surely is (a literal, or a binding of one)."""
        if hi - lo == 1 and self.toks[lo].kind in (STR, TPL):
            return self.toks[lo].text
        if hi - lo != 1 or not self.is_name(lo) or depth >= MAX_DEPTH:
            return None
        b = self.resolve(self.toks[lo].text, lo)
        if b is None:
            return None
        values = {self.string(w.lo, w.hi, depth + 1) if w.kind == "expr" and not w.compound
                  else None for w in self.reaching(b, lo)}
        return values.pop() if len(values) == 1 else None
