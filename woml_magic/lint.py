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

Lines and columns are the cell's (spec §2.3): a step's script starts at
``Step.script_line``/``Step.script_column``.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import NamedTuple

from .model import Step, Workflow

PER_ATTEMPT_KEY = "per-attempt-key"
UNKEYED_POST = "unkeyed-post"

#: How many bindings, helpers and object literals a key is followed through.
MAX_DEPTH = 8
#: Token visits allowed per call while following a key: a bound on pathological scripts
#: (hundreds of variables each built from all the others), never reached by real ones.
_BUDGET = 50_000


@dataclass(frozen=True)
class LintWarning:
    """One warning: the step, the cell's line and column, a code and one sentence."""

    step_id: str
    line: int
    column: int
    code: str
    message: str


def lint(workflow: Workflow) -> list[LintWarning]:
    """The idempotency-key warnings of every step, in document order, then by position."""
    warnings: list[LintWarning] = []
    for step in workflow.steps:
        warnings += _lint_step(step)
    return warnings


def format_warning(warning: LintWarning) -> str:
    """``line 7: step 'charge': the idempotency key …`` — how the magic shows a warning."""
    return f"line {warning.line}: step {warning.step_id!r}: {warning.message}"


def _lint_step(step: Step) -> list[LintWarning]:
    script = _Script(step.script, step.script_line, step.script_column)
    found: dict[tuple[int, str, str], LintWarning] = {}
    for offset, code, message in script.findings():
        line, column = script.position(offset)
        found.setdefault((offset, code, message),
                         LintWarning(step.id, line, column, code, message))
    return sorted(found.values(), key=lambda w: (w.line, w.column, w.code, w.message))


# --- messages ---------------------------------------------------------------------------

_FIX = (
    "so a retry sends a new key and the server cannot recognise the repeat; use "
    "attempt.idempotencyKey (the same for every attempt of this step), with a fixed "
    "suffix if the step makes several calls"
)


def _per_attempt_message(source: str, call: str, call_line: int | None, via: str | None) -> str:
    if call_line is None:  # the construct is written inside the call itself
        return f"the idempotency key of {call} is built from {source}, which changes every " \
               f"attempt, {_FIX}"
    through = f"comes from `{via}`, built here from" if via else "is built here from"
    return (f"the idempotency key of {call} on line {call_line} {through} {source}, which "
            f"changes every attempt, {_FIX}")


def _unkeyed_message(call: str) -> str:
    return (
        f"{call} is a POST without request.idempotency, so if its response is lost the step "
        "fails closed instead of retrying (a repeat could charge or create twice); add "
        'idempotency: { header: "Idempotency-Key", value: attempt.idempotencyKey } if the '
        "API accepts keys"
    )


# --- tokens -----------------------------------------------------------------------------

_NAME, _NUM, _STR, _PUNCT, _REGEX = "name", "num", "str", "punct", "regex"
# A template literal: whole (no substitution), or head `…${, middle }…${ and tail }…`.
_TPL, _HEAD, _MID, _TAIL = "tpl", "head", "mid", "tail"


class _Token(NamedTuple):
    kind: str
    text: str  # the source text; for strings and template pieces the (roughly) cooked value
    start: int
    end: int
    newline: bool  # a line break stands between the previous token and this one


_LINE_BREAKS = frozenset("\n\r\u2028\u2029")
_NAME_RE = re.compile(r"(?:[^\W\d]|\$)(?:\w|\$)*")
_NUM_RE = re.compile(
    r"0[xXoObB][0-9a-fA-F_]*n?|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?n?"
)
_PUNCT_RE = re.compile(
    r">>>=|\.\.\.|===|!==|\*\*=|<<=|>>=|>>>|&&=|\|\|=|\?\?=|=>|==|!=|<=|>=|&&|\|\||\?\?"
    r"|\?\.(?!\d)|\+\+|--|[-+*/%&|^]=|\*\*|<<|>>|[{}()\[\];,<>+\-*/%&|^!~?:=.@#]"
)
_ESCAPE_RE = re.compile(r"\\(u\{[0-9a-fA-F]{1,8}\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|\n|.)",
                        re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v",
                   "0": "\0", "\n": ""}
#: After these words a `/` starts a regular expression, not a division.
_BEFORE_EXPRESSION = frozenset({
    "return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void", "throw",
    "instanceof", "yield", "await",
})
#: Words that are never a reference to a binding.
_KEYWORDS = frozenset({
    "break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete",
    "do", "else", "export", "extends", "finally", "for", "function", "if", "import", "in",
    "instanceof", "let", "new", "return", "super", "switch", "this", "throw", "try", "typeof",
    "var", "void", "while", "with", "yield", "await", "async", "of", "null", "true",
    "false", "undefined", "NaN", "Infinity", "static", "get", "set", "arguments",
})
#: `KEYWORD (…) {` opens a block, not a function body.
_CONTROL = frozenset({"if", "for", "while", "switch", "catch", "with", "await", "return",
                      "typeof", "void", "delete", "in", "of", "new", "instanceof", "do",
                      "else", "case", "throw", "yield"})
_ASSIGN = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "**=", "<<=", ">>=", ">>>=", "&=",
                     "|=", "^=", "&&=", "||=", "??="})
_OPENERS = frozenset({"(", "[", "{"})
_CLOSERS = {")": "(", "]": "[", "}": "{"}
#: Where a statement ends at a line break (automatic semicolon insertion, roughly): the
#: line so far is a complete expression and the next line cannot continue it.
_NOT_CONTINUING = frozenset({"{", "!", "~", "++", "--"})
#: The per-attempt constructs as member paths, and how a message names them.
_SOURCES: dict[tuple[str, ...], str] = {
    ("attempt", "number"): "attempt.number",
    ("Date", "now"): "Date.now()",
    ("Math", "random"): "Math.random()",
    ("crypto", "randomUUID"): "crypto.randomUUID()",
}
_GLOBAL_OBJECTS = frozenset({"globalThis", "self", "window"})
_REQUEST_PATH = ("services", "http", "request")


def _cook(raw: str) -> str:
    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if e in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[e]
        if e[0] in "ux" and len(e) > 1:
            code = int(e.strip("u{}x"), 16)
            return chr(code) if code <= 0x10FFFF else e
        return e

    return _ESCAPE_RE.sub(one, raw)


def _tokenize(src: str) -> list[_Token]:
    """JavaScript tokens, without comments; never fails (unterminated text runs to the end).

    Template literals are split as JavaScript parsers do (head, middles, tail) with the
    substitutions' tokens in between, so nesting needs no recursion.
    """
    toks: list[_Token] = []
    braces: list[bool] = []  # per open `{`: True for a template's `${`
    n, i, newline = len(src), 0, False
    while i < n:
        c = src[i]
        if c in _LINE_BREAKS:
            newline, i = True, i + 1
            continue
        if c.isspace():
            i += 1
            continue
        if src.startswith("//", i):
            while i < n and src[i] not in _LINE_BREAKS:
                i += 1
            continue
        if src.startswith("/*", i):
            close = src.find("*/", i + 2)
            end = n if close < 0 else close + 2
            newline = newline or any(ch in _LINE_BREAKS for ch in src[i:end])
            i = end
            continue
        start, kind = i, _PUNCT
        if c in "'\"":
            kind, (text, i) = _STR, _string(src, i)
        elif c == "`" or (c == "}" and braces and braces[-1]):
            if c == "}":
                braces.pop()
            kind, text, i = _template_piece(src, i + 1, first=c == "`")
            if kind in (_HEAD, _MID):
                braces.append(True)
        elif c == "/" and _regex_allowed(toks) and (stop := _regex_end(src, i)) is not None:
            kind, text, i = _REGEX, src[i:stop], stop
        elif m := _NAME_RE.match(src, i):
            kind, text, i = _NAME, m.group(), m.end()
        elif (c.isdigit() or c == ".") and (m := _NUM_RE.match(src, i)):
            kind, text, i = _NUM, m.group(), m.end()
        elif m := _PUNCT_RE.match(src, i):
            text, i = m.group(), m.end()
            if text == "{":
                braces.append(False)
            elif text == "}" and braces:
                braces.pop()
        else:  # a character JavaScript has no token for (`\`, a stray symbol): skip it
            i += 1
            continue
        toks.append(_Token(kind, text, start, i, newline))
        newline = False
    return toks


def _string(src: str, i: int) -> tuple[str, int]:
    quote, j, n = src[i], i + 1, len(src)
    while j < n:
        ch = src[j]
        if ch == "\\":
            j += 2
        elif ch == quote:
            return _cook(src[i + 1 : j]), j + 1
        elif ch in "\n\r":  # unterminated: the string ends with its line
            break
        else:
            j += 1
    j = min(j, n)
    return _cook(src[i + 1 : j]), j


def _template_piece(src: str, j: int, *, first: bool) -> tuple[str, str, int]:
    begin, n = j, len(src)
    while j < n:
        ch = src[j]
        if ch == "\\":
            j += 2
        elif ch == "`":
            return (_TPL if first else _TAIL), _cook(src[begin:j]), j + 1
        elif ch == "$" and src.startswith("{", j + 1):
            return (_HEAD if first else _MID), _cook(src[begin:j]), j + 2
        else:
            j += 1
    return (_TPL if first else _TAIL), _cook(src[begin:n]), n


def _regex_allowed(toks: list[_Token]) -> bool:
    if not toks:
        return True
    prev = toks[-1]
    if prev.kind == _NAME:
        return prev.text in _BEFORE_EXPRESSION
    if prev.kind == _PUNCT:
        return prev.text not in (")", "]", "}", "++", "--")
    return prev.kind in (_HEAD, _MID)


def _regex_end(src: str, i: int) -> int | None:
    j, n, in_class = i + 1, len(src), False
    while j < n:
        ch = src[j]
        if ch in _LINE_BREAKS:
            return None
        if ch == "\\":
            j += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "/":
            j += 1
            while j < n and (src[j].isalnum() or src[j] in "_$"):
                j += 1
            return j
        j += 1
    return None


def _brackets(toks: list[_Token]) -> tuple[list[int], list[int]]:
    """``match``: an opener's closer (``len(toks)`` if never closed) and a closer's opener
    (-1 if stray); ``parent``: the innermost opener around each token (-1 at top level).

    A template head is an opener closed by its tail; its middles belong to it."""
    n = len(toks)
    match, parent = [-1] * n, [-1] * n
    stack: list[int] = []
    for i, t in enumerate(toks):
        parent[i] = stack[-1] if stack else -1
        if t.kind == _HEAD or (t.kind == _PUNCT and t.text in _OPENERS):
            match[i] = n
            stack.append(i)
            continue
        want = _HEAD if t.kind in (_MID, _TAIL) else (
            _CLOSERS.get(t.text) if t.kind == _PUNCT else None)
        if want is None:
            continue
        for depth in range(len(stack) - 1, -1, -1):
            o = toks[stack[depth]]
            if (o.kind == _HEAD) if want == _HEAD else (o.kind == _PUNCT and o.text == want):
                for unclosed in stack[depth + 1 :]:
                    match[unclosed] = i
                del stack[depth + 1 :]
                if t.kind == _MID:
                    parent[i] = stack[-1]
                else:
                    opener = stack.pop()
                    match[opener], match[i] = i, opener
                    parent[i] = parent[opener]
                break
    return match, parent


# --- the script's bindings --------------------------------------------------------------

@dataclass
class _Write:
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
class _Binding:
    name: str
    lo: int  # the scope: tokens strictly between lo and hi
    hi: int
    writes: list[_Write] = field(default_factory=list)
    ats: list[int] = field(default_factory=list)  # each write's ``at``, once sorted


class _Hit(NamedTuple):
    source: str  # how the message names the construct
    offset: int  # where it is written in the script
    via: tuple[str, ...]  # the bindings followed to reach it, outermost first


class _Prop(NamedTuple):
    kind: str  # "keyed", "shorthand", "spread", "method", "other"
    key: str | None
    key_at: int
    lo: int  # the value's (or the spread's) tokens
    hi: int


_ABSENT = (-1, -1)
_UNKNOWN = (-2, -2)


class _Script:
    """One script's tokens, brackets, scopes and bindings, and the analysis over them."""

    def __init__(self, source: str, first_line: int = 1, first_column: int = 1) -> None:
        self.source = source
        self.first_line, self.first_column = first_line, first_column
        self.toks = _tokenize(source)
        self.n = len(self.toks)
        self.match, self.parent = _brackets(self.toks)
        self.line_starts = [0, *(i + 1 for i, ch in enumerate(source) if ch == "\n")]
        self.function_bodies: set[int] = set()
        self.declared: set[int] = set()  # name tokens that declare (not read) a binding
        self.bindings: dict[str, list[_Binding]] = {}
        self.returns: dict[int, list[int]] = {}
        self.mutations: dict[int, bool] = {}
        self.budget = _BUDGET
        self._collect()

    # -- small token helpers --

    def is_punct(self, i: int, *texts: str) -> bool:
        return 0 <= i < self.n and self.toks[i].kind == _PUNCT and self.toks[i].text in texts

    def is_name(self, i: int, *texts: str) -> bool:
        return 0 <= i < self.n and self.toks[i].kind == _NAME and (
            not texts or self.toks[i].text in texts)

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
        index = bisect_right(self.line_starts, offset) - 1
        column = offset - self.line_starts[index] + 1
        return self.first_line + index, column + (self.first_column - 1 if index == 0 else 0)

    def line_of(self, token: int) -> int:
        return self.position(self.toks[token].start)[0]

    def expr_end(self, i: int, *, commas: bool = True) -> int:
        """The index after the expression starting at ``i``: at a `;`, a `,` (if
        ``commas``), the enclosing group's closer, or a line break that ends a statement."""
        toks, j, prev = self.toks, i, None
        while j < self.n:
            t = toks[j]
            if j > i and t.newline and prev is not None and _ends_expression(prev) \
                    and _starts_expression(t):
                break
            if t.kind in (_MID, _TAIL) or (t.kind == _PUNCT and (
                    t.text in (";", ")", "]", "}") or (commas and t.text == ","))):
                break
            if t.kind == _HEAD or (t.kind == _PUNCT and t.text in _OPENERS):
                close = self.closer(j)
                prev = toks[close] if close < self.n else None
                j = close + 1
                continue
            prev, j = t, j + 1
        return min(j, self.n)

    def chain(self, i: int) -> tuple[tuple[str, ...], int]:
        """The member path starting at name ``i`` (``a.b?.c["d"]``) and the index after it."""
        toks, names, k = self.toks, [self.toks[i].text], i + 1
        while k < self.n:
            if self.is_punct(k, ".", "?.") and self.is_name(k + 1):
                names.append(toks[k + 1].text)
                k += 2
                continue
            b = k + 1 if self.is_punct(k, "?.") else k
            if self.is_punct(b, "[") and b + 2 < self.n and toks[b + 1].kind in (_STR, _TPL) \
                    and self.is_punct(b + 2, "]"):
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
        if not self.is_name(lo) or self.toks[lo].text in _KEYWORDS:
            return None
        names, end = self.chain(lo)
        return names if end == hi else None

    def split(self, opener: int) -> list[tuple[int, int]]:
        """The comma-separated parts of a bracketed group, empty parts dropped."""
        close, parts = self.closer(opener), []
        start = j = opener + 1
        while j < close:
            t = self.toks[j]
            if t.kind == _PUNCT and t.text == ",":
                parts.append((start, j))
                start = j + 1
            elif t.kind == _HEAD or (t.kind == _PUNCT and t.text in _OPENERS):
                j = self.closer(j)
                continue
            j += 1
        parts.append((start, close))
        return [(lo, hi) for lo, hi in parts if lo < hi]

    def properties(self, opener: int) -> list[_Prop]:
        toks, props = self.toks, []
        for lo, hi in self.split(opener):
            t = toks[lo]
            if self.is_punct(lo, "..."):
                props.append(_Prop("spread", None, lo, lo + 1, hi))
            elif t.kind in (_NAME, _STR, _NUM, _TPL) and self.is_punct(lo + 1, ":"):
                props.append(_Prop("keyed", t.text, lo, lo + 2, hi))
            elif t.kind == _NAME and lo + 1 == hi:
                props.append(_Prop("shorthand", t.text, lo, lo, hi))
            elif t.kind in (_NAME, _STR, _NUM) and self.is_punct(lo + 1, "("):
                props.append(_Prop("method", t.text, lo, lo, hi))
            elif self.is_name(lo, "get", "set", "async") and lo + 1 < hi \
                    and toks[lo + 1].kind in (_NAME, _STR, _NUM):
                props.append(_Prop("method", toks[lo + 1].text, lo + 1, lo, hi))
            else:  # a computed key, `*gen() {}`, or something this reader does not know
                props.append(_Prop("other", None, lo, lo, hi))
        return props

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

    def binding(self, name: str, scope: tuple[int, int]) -> _Binding:
        found = self.bindings.setdefault(name, [])
        for b in found:
            if (b.lo, b.hi) == scope:
                return b
        b = _Binding(name, *scope)
        found.append(b)
        return b

    def resolve(self, name: str, at: int) -> _Binding | None:
        """The binding ``name`` refers to at token ``at``: the innermost scope holding it."""
        best = None
        for b in self.bindings.get(name, ()):
            if b.lo < at < b.hi and (best is None or b.lo > best.lo):
                best = b
        return best

    def reaching(self, b: _Binding, at: int) -> list[_Write]:
        """The writes of ``b`` that may give its value at ``at``: the last one that surely
        ran before ``at`` (same block or an enclosing one) and every write after it."""
        found: list[_Write] = []
        for k in range(bisect_left(b.ats, at) - 1, -1, -1):
            w = b.writes[k]
            if self.runs_before(w, at):
                found.append(w)
                if w.kind == "function" or self.dominates(w.site, at):
                    break
        return found[::-1]

    def runs_before(self, w: _Write, at: int) -> bool:
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
            if not (before < 0 or self.is_name(before, "try", "finally", "do")
                    or self.is_punct(before, ";", "{", "}")):
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
        if before.kind == _NAME:
            return before.text not in _CONTROL
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
            if t.kind != _NAME or t.text in _KEYWORDS:
                continue
            if isinstance(group, int) or (
                    self.is_punct(k - 1, "(", ",", "{", "[", "...", ":")
                    and self.is_punct(k + 1, ",", ")", "=", "}", "]")):
                self.declared.add(k)
                self.binding(t.text, scope).writes.append(
                    _Write(scope[0], k, t.text, "opaque"))

    def _declaration(self, k: int) -> None:
        word = self.toks[k].text
        if word == "var":
            scope = self.scope(self.enclosing(k, function=True))
        else:
            p = self.parent[k]
            if self.is_punct(p, "(") and self.is_name(p - 1, "for"):
                close = self.closer(p)
                end = (self.closer(close + 1) if self.is_punct(close + 1, "{")
                       else self.expr_end(close + 1, commas=False))
                scope = (p, end)
            else:
                scope = self.scope(self.enclosing(k, function=False))
        j = k + 1
        while j < self.n:
            if self.is_name(j) and self.toks[j].text not in _KEYWORDS:
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
                write = (_Write(init[1], j, name, "expr", *init) if init
                         else _Write(j, j, name, "opaque"))
                self.binding(name, scope).writes.append(write)
            else:
                base = self.pure_chain(*init) if init else None
                self._pattern(j, base, scope, 0)
            if not self.is_punct(end, ","):
                return
            j = end + 1

    def _pattern(self, opener: int, base: tuple[str, ...] | None, scope: tuple[int, int],
                 depth: int) -> None:
        """Destructuring: `{ a, b: c, d: { e } } = x.y` binds `a` to the path `x.y.a`,
        `c` to `x.y.b`, `e` to `x.y.d.e`; everything else gets an unknown value."""
        known = base is not None and depth < MAX_DEPTH and self.is_punct(opener, "{")
        for prop in (self.properties(opener) if known else ()):
            path = (*base, prop.key) if base is not None and prop.key is not None else None
            if prop.kind == "shorthand" and path:
                self._bind_path(prop.key_at, path, scope)
            elif prop.kind == "keyed" and path and self.is_name(prop.lo) \
                    and prop.hi == prop.lo + 1:
                self._bind_path(prop.lo, path, scope)
            elif prop.kind == "keyed" and path and self.is_punct(prop.lo, "{", "[") \
                    and self.closer(prop.lo) == prop.hi - 1:
                self._pattern(prop.lo, path, scope, depth + 1)
            else:
                self._opaque_names(prop.lo, prop.hi, scope)
        if not known:
            self._opaque_names(opener + 1, self.closer(opener), scope)

    def _bind_path(self, k: int, path: tuple[str, ...], scope: tuple[int, int]) -> None:
        self.declared.add(k)
        name = self.toks[k].text
        self.binding(name, scope).writes.append(_Write(k, k, name, "path", path=path))

    def _opaque_names(self, lo: int, hi: int, scope: tuple[int, int]) -> None:
        for k in range(lo, hi):
            if self.is_name(k) and self.toks[k].text not in _KEYWORDS \
                    and self.is_punct(k - 1, "{", ",", "[", ":", "...") \
                    and self.is_punct(k + 1, ",", "}", "]", "="):
                self.declared.add(k)
                name = self.toks[k].text
                self.binding(name, scope).writes.append(_Write(k, k, name, "opaque"))

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
        self.binding(name, scope).writes.append(
            _Write(scope[0], k, name, "function", body=body))

    def _assignment(self, k: int) -> None:
        """`x = …`, `x += …` and destructuring assignments `({ x } = …)`, `[x] = …`."""
        if self.is_punct(k, "=") and self.is_punct(k - 1, "}", "]") and self.match[k - 1] >= 0:
            opener = self.match[k - 1]
            # `({ x } = …)`: the statement is the parenthesis around the pattern.
            site = self.parent[opener] if self.is_punct(self.parent[opener], "(") else opener
            for j in range(opener + 1, k - 1):
                if self.is_name(j) and j not in self.declared \
                        and self.toks[j].text not in _KEYWORDS \
                        and self.is_punct(j - 1, "{", ",", "[", ":", "...") \
                        and self.is_punct(j + 1, ",", "}", "]", "="):
                    b = self.resolve(self.toks[j].text, j)
                    if b is not None:
                        b.writes.append(_Write(k, site, b.name, "opaque"))
            return
        t = self.toks[k]
        if t.kind != _NAME or t.text in _KEYWORDS or k in self.declared or self.after_dot(k) \
                or not (k + 1 < self.n and self.toks[k + 1].kind == _PUNCT
                        and self.toks[k + 1].text in _ASSIGN):
            return
        b = self.resolve(t.text, k)
        if b is not None:
            op, end = self.toks[k + 1].text, self.expr_end(k + 2)
            b.writes.append(_Write(end, k, t.text, "expr", k + 2, end, compound=op != "="))

    def mutated(self, b: _Binding) -> bool:
        """Whether the object in ``b`` may change after it was written: a member is
        assigned or deleted, or it is the target of ``Object.assign``."""
        key = id(b)
        if key not in self.mutations:
            self.mutations[key] = any(
                self._mutates(k) for k in range(self.n)
                if self.is_name(k, b.name) and not self.after_dot(k)
                and self.resolve(b.name, k) is b)
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
        if j > k + 1 and (self.is_punct(j, "++", "--") or (
                j < self.n and self.toks[j].kind == _PUNCT and self.toks[j].text in _ASSIGN)):
            return True
        if j > k + 1 and self.is_name(k - 1, "delete"):
            return True
        if self.is_punct(k - 1, "(") and self.is_name(k - 2) and self.after_dot(k - 2):
            callee = self.chain(k - 4)[0] if self.is_name(k - 4) else ()
            return callee in (("Object", "assign"), ("Object", "defineProperty"),
                              ("Reflect", "set"))
        return False

    # -- following values --

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

    def value_hits(self, lo: int, hi: int, depth: int, via: tuple[str, ...]) -> list[_Hit]:
        """The per-attempt constructs the expression ``lo..hi`` is built from."""
        toks, hits, i = self.toks, [], lo
        while i < hi and self.budget > 0:
            self.budget -= 1
            t = toks[i]
            if t.kind != _NAME:
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
                    hits.append(_Hit("new Date()", t.start, via))
                    i += 4 if self.is_punct(i + 2, "(") else 2
            elif t.text in _KEYWORDS:
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
                    hits.append(_Hit("Date()", t.start, via))
                else:
                    hits += self.path_hits(names, i, depth, via, t.start, call is not None)
                i = end
        return hits

    def _is_key(self, i: int) -> bool:
        """A property name in an object literal (`{ key: …}`), not a reference."""
        return self.is_punct(i + 1, ":") and self.is_punct(i - 1, "{", ",") \
            and self.is_punct(self.parent[i], "{")

    def path_hits(self, names: tuple[str, ...], at: int, depth: int, via: tuple[str, ...],
                  offset: int, called: bool) -> list[_Hit]:
        root = names[0]
        b = self.resolve(root, at)
        if b is None:
            if root in _GLOBAL_OBJECTS and len(names) > 1:
                names = names[1:]
            source = _SOURCES.get(names[:2])
            return [_Hit(source, offset, via)] if source else []
        if depth >= MAX_DEPTH:
            return []
        hits: list[_Hit] = []
        for w in self.reaching(b, at):
            hits += self.write_hits(w, names[1:], depth + 1, (*via, root), offset, called)
        return hits

    def write_hits(self, w: _Write, props: tuple[str, ...], depth: int,
                   via: tuple[str, ...], offset: int, called: bool) -> list[_Hit]:
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
                    via: tuple[str, ...]) -> list[_Hit]:
        """What ``(lo..hi).props`` is built from: a property of an object literal is just
        that property's value; a member of anything else is built from all of it."""
        if not props:
            return self.value_hits(lo, hi, depth, via)
        if self.group_is(lo, hi, "{"):
            found = self.lookup(lo, props[0], depth)
            if found in (_ABSENT, _UNKNOWN) or depth >= MAX_DEPTH:
                return []
            return self.member_hits(*found, props[1:], depth + 1, via)
        names = self.pure_chain(lo, hi)
        if names is not None:
            return self.path_hits((*names, *props), lo, depth, via, self.toks[lo].start, False)
        return self.value_hits(lo, hi, depth, via)

    def return_hits(self, body: int, depth: int, via: tuple[str, ...]) -> list[_Hit]:
        if depth >= MAX_DEPTH:
            return []
        hits: list[_Hit] = []
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
        if hi - lo != 1 or not self.is_name(lo) or self.toks[lo].text in _KEYWORDS \
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
        """The value tokens of ``obj[key]``, ``_ABSENT`` or ``_UNKNOWN``; later properties
        and spreads win, as in JavaScript."""
        result = _ABSENT
        for prop in self.properties(obj):
            if prop.kind == "spread":
                inner = self.objects(prop.lo, prop.hi, depth + 1)
                if inner is None or len(inner) != 1 or depth >= MAX_DEPTH:
                    if not self.nullish(prop.lo, prop.hi):
                        result = _UNKNOWN
                    continue
                found = self.lookup(inner[0], key, depth + 1)
                if found != _ABSENT:
                    result = found
            elif prop.kind == "other":
                result = _UNKNOWN
            elif prop.key == key:
                result = (prop.lo, prop.hi) if prop.kind != "method" else _UNKNOWN
        return result

    def nullish(self, lo: int, hi: int) -> bool:
        text = [t.text for t in self.toks[lo:hi]]
        return text in (["undefined"], ["null"], ["void", "0"])

    def string(self, lo: int, hi: int, depth: int = 0) -> str | None:
        """The string the expression surely is (a literal, or a binding of one)."""
        if hi - lo == 1 and self.toks[lo].kind in (_STR, _TPL):
            return self.toks[lo].text
        if hi - lo != 1 or not self.is_name(lo) or depth >= MAX_DEPTH:
            return None
        b = self.resolve(self.toks[lo].text, lo)
        if b is None:
            return None
        values = {self.string(w.lo, w.hi, depth + 1) if w.kind == "expr" and not w.compound
                  else None for w in self.reaching(b, lo)}
        return values.pop() if len(values) == 1 else None

    # -- the rules --

    def findings(self) -> list[tuple[int, str, str]]:
        """``(offset, code, message)`` of every warning in the script."""
        out: list[tuple[int, str, str]] = []
        for i in range(self.n):
            if not self.is_name(i) or self.after_dot(i) or i in self.declared \
                    or self.toks[i].text in _KEYWORDS:
                continue
            names, end = self.chain(i)
            call = self.call_open(end)
            if call is not None and self.canonical(names, i) == _REQUEST_PATH:
                self.budget = _BUDGET
                out += self._request(i, call)
        return out

    def _request(self, start: int, call: int) -> list[tuple[int, str, str]]:
        args = self.split(call)
        if not args or any(self.is_punct(lo, "...") for lo, _ in args[:2]):
            return []
        requests = self.objects(*args[0], 0)
        if requests is None:
            return []
        options = args[1] if len(args) > 1 else None
        name = self._call_name(options) if options is not None else None
        label = f"call {name}" if name else "this request"
        span = (self.toks[start].start, self.toks[min(self.closer(call), self.n - 1)].end)
        found: list[tuple[int, str, str]] = []
        seen: set[tuple[str, int]] = set()
        for via, hit in self._key_hits(requests, args[0]):
            if (hit.source, hit.offset) in seen:
                continue
            seen.add((hit.source, hit.offset))
            if span[0] <= hit.offset < span[1]:
                message = _per_attempt_message(hit.source, label, None, None)
            else:
                named = label if name else "the request"
                chain = (*via, *hit.via)
                message = _per_attempt_message(hit.source, named, self.line_of(start),
                                               chain[0] if chain else None)
            found.append((hit.offset, PER_ATTEMPT_KEY, message))
        if name and self._unkeyed_post(requests):
            found.append((self.toks[start].start, UNKEYED_POST,
                          _unkeyed_message(f"call {name}")))
        return found

    def _key_hits(self, requests: list[int],
                  arg: tuple[int, int]) -> list[tuple[tuple[str, ...], _Hit]]:
        """Per-attempt constructs in each request's key: ``idempotency.value`` and any
        idempotency-like header. ``via`` names the request or key variable followed."""
        via_request = (self.toks[arg[0]].text,) if arg[1] - arg[0] == 1 else ()
        hits: list[tuple[tuple[str, ...], _Hit]] = []
        for request in requests:
            idem = self.lookup(request, "idempotency", 0)
            if idem not in (_ABSENT, _UNKNOWN):
                via = via_request or ((self.toks[idem[0]].text,)
                                      if idem[1] - idem[0] == 1 else ())
                for key_object in self.objects(*idem, 0) or ():
                    value = self.lookup(key_object, "value", 0)
                    if value not in (_ABSENT, _UNKNOWN):
                        hits += [(via, h) for h in self.value_hits(*value, 0, ())]
            headers = self.lookup(request, "headers", 0)
            if headers not in (_ABSENT, _UNKNOWN):
                for header_object in self.objects(*headers, 0) or ():
                    for prop in self.properties(header_object):
                        if prop.kind in ("keyed", "shorthand") and prop.key is not None \
                                and "idempotency" in prop.key.lower():
                            hits += [(via_request, h)
                                     for h in self.value_hits(prop.lo, prop.hi, 0, ())]
        return hits

    def _call_name(self, options: tuple[int, int]) -> str | None:
        """The call's name as a message shows it (`'create-charge'`, or the template
        that builds it); None when unnamed or when this reader cannot tell."""
        objects = self.objects(*options, 0)
        if objects is None:
            return None
        shown: str | None = None
        for obj in objects:
            found = self.lookup(obj, "name", 0)
            if found in (_ABSENT, _UNKNOWN) or self.nullish(*found):
                return None
            text = self.string(*found)
            if text is not None:
                shown = repr(text) if text.strip() else None
            elif self.toks[found[0]].kind == _HEAD and self.match[found[0]] == found[1] - 1:
                shown = self.source[self.toks[found[0]].start : self.toks[found[1] - 1].end]
            else:
                return None
            if shown is None:
                return None
        return shown

    def _unkeyed_post(self, requests: list[int]) -> bool:
        """Every request the call may send is surely a POST with surely no key."""
        for request in requests:
            method = self.lookup(request, "method", 0)
            if method in (_ABSENT, _UNKNOWN):
                return False  # absent: GET
            text = self.string(*method)
            if text is None or text.upper() != "POST":
                return False
            idem = self.lookup(request, "idempotency", 0)
            if idem == _UNKNOWN or (idem != _ABSENT and not self.nullish(*idem)):
                return False
            headers = self.lookup(request, "headers", 0)
            if headers == _UNKNOWN:
                return False
            if headers != _ABSENT:
                for header_object in self.objects(*headers, 0) or ():
                    if any(p.kind in ("spread", "other", "method") or (
                            p.key is not None and "idempotency" in p.key.lower())
                           for p in self.properties(header_object)):
                        return False  # a key the API reads may travel as a header
        return True


def _ends_expression(t: _Token) -> bool:
    if t.kind == _NAME:
        return t.text not in _BEFORE_EXPRESSION and t.text not in (
            "const", "let", "var", "function", "async", "class", "extends")
    if t.kind == _PUNCT:
        return t.text in (")", "]", "}", "++", "--")
    return t.kind in (_NUM, _STR, _TPL, _TAIL, _REGEX)


def _starts_expression(t: _Token) -> bool:
    if t.kind == _NAME:
        return t.text not in ("in", "instanceof", "of")
    if t.kind == _PUNCT:
        return t.text in _NOT_CONTINUING
    return t.kind in (_NUM, _STR, _TPL, _HEAD, _REGEX)
