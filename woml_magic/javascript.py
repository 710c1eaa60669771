"""The JavaScript lexer: a step's script as tokens, and its lines (spec §2.3, §4.5: a step's
script is JavaScript; lines in every message are the cell's).

The package's one reader of JavaScript text: the key linter reads its tokens (``lint/``),
the worker rewrites catch clauses at them (``runtime/_instrument.py``), the parser asks
whether a script ends inside a literal (``unclosed``), the editor whether the cursor is
in a comment, and every position QuickJS reports is mapped back to the cell through
``Lines``.

``tokenize`` never fails: the linter reads scripts before anything runs, so unterminated
text runs to the end and a character JavaScript has no token for is skipped. A ``/``
starts a regular expression literal where ECMAScript's grammar expects an operand (its
lexical grammar's InputElementRegExp goal): at the start; after a punctuator that leaves an
operand to come (``(``, ``,``, ``=``, ``=>``, ``?``, ``:``, operators, …) or a keyword
that precedes an expression (``return``, ``typeof``, ``in``, …, not as a property name
after ``.``); after a ``)`` that closes the head of ``if``, ``for``, ``while`` or
``with``; after a ``}`` that closes a block (not an object literal); after a prefix
``++``/``--``; after a template's ``${``. Anywhere else (after a name, a literal, ``]``,
another ``)``, an object literal's ``}``, a postfix ``++``) it divides.

``brackets`` pairs the openers with their closers.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import NamedTuple

NAME, NUM, STR, PUNCT, REGEX = "name", "num", "str", "punct", "regex"
# A template literal: whole (no substitution), or head `…${, middle }…${ and tail }…`.
TPL, HEAD, MID, TAIL = "tpl", "head", "mid", "tail"
#: Only with ``tokenize(src, comments=True)``.
COMMENT = "comment"


class Token(NamedTuple):
    """One token: its kind (the constants above), text and place in the script."""

    kind: str
    text: str  # the source text; for strings and template pieces the (roughly) cooked value
    start: int
    end: int
    newline: bool  # a line break stands between the previous token and this one


#: ECMAScript's LineTerminator: LF, CR (CR LF is one), LS and PS.
LINE_TERMINATORS = frozenset("\n\r\u2028\u2029")
_NAME_RE = re.compile(r"(?:[^\W\d]|\$)(?:\w|\$)*")
_NUM_RE = re.compile(
    r"0[xXoObB][0-9a-fA-F_]*n?|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?n?"
)
_PUNCT_RE = re.compile(
    r">>>=|\.\.\.|===|!==|\*\*=|<<=|>>=|>>>|&&=|\|\|=|\?\?=|=>|==|!=|<=|>=|&&|\|\||\?\?"
    r"|\?\.(?!\d)|\+\+|--|[-+*/%&|^]=|\*\*|<<|>>|[{}()\[\];,<>+\-*/%&|^!~?:=.@#]"
)
_ESCAPE_RE = re.compile(
    r"\\(u\{[0-9a-fA-F]{1,8}\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|\r\n|[\n\r\u2028\u2029]|.)",
    re.DOTALL,
)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}
#: After these words a `/` starts a regular expression, not a division.
BEFORE_EXPRESSION = frozenset(
    [
        "return",
        "typeof",
        "case",
        "do",
        "else",
        "in",
        "of",
        "new",
        "delete",
        "void",
        "throw",
        "instanceof",
        "yield",
        "await",
    ]
)
#: `KEYWORD (…)`: after its `)` a statement starts.
_CONTROL_HEADS = frozenset({"if", "for", "while", "with"})
#: After these a `{` opens a block, not an object literal.
_BEFORE_BLOCK = frozenset({";", "{", "}", ")", "=>", "else", "do", "try", "finally"})
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_TEMPLATE, _BLOCK, _OBJECT = 0, 1, 2  # what an open `{` is


def _cook(raw: str) -> str:
    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if e in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[e]
        if e[0] in LINE_TERMINATORS:  # a line continuation
            return ""
        if e[0] in "ux" and len(e) > 1:
            code = int(e.strip("u{}x"), 16)
            return chr(code) if code <= 0x10FFFF else e
        return e

    return _ESCAPE_RE.sub(one, raw) if "\\" in raw else raw


def tokenize(src: str, *, comments: bool = False) -> list[Token]:
    """JavaScript tokens (and, with ``comments``, comments); never fails.

    Template literals are split as JavaScript parsers do (head, middles, tail) with the
    substitutions' tokens in between, so nesting needs no recursion. Between two tokens
    stand only white space and (without ``comments``) comments.
    """
    toks: list[Token] = []
    braces: list[int] = []  # per open `{`: _TEMPLATE (a `${`), _BLOCK or _OBJECT
    parens: list[bool] = []  # per open `(`: whether it is a control statement's head
    operand = True  # whether an operand may come next: a `/` starts a regular expression
    prev: Token | None = None  # the last token, comments aside
    n, i, newline = len(src), 0, False
    while i < n:
        c = src[i]
        if c in LINE_TERMINATORS:
            newline, i = True, i + 1
            continue
        if c.isspace():
            i += 1
            continue
        if c == "/" and src.startswith(("//", "/*"), i):
            start = i
            if src[i + 1] == "/":
                while i < n and src[i] not in LINE_TERMINATORS:
                    i += 1
            else:
                close = src.find("*/", i + 2)
                i = n if close < 0 else close + 2
                newline = newline or any(ch in LINE_TERMINATORS for ch in src[start:i])
            if comments:
                toks.append(Token(COMMENT, src[start:i], start, i, False))
            continue
        start, kind, was = i, PUNCT, operand
        if c in "'\"":
            kind, text, i, _ = _string(src, i)
            operand = False
        elif c == "`" or (c == "}" and braces and braces[-1] == _TEMPLATE):
            if c == "}":
                braces.pop()
            kind, text, i, _ = _template_piece(src, i + 1, first=c == "`")
            if kind in (HEAD, MID):
                braces.append(_TEMPLATE)
            operand = kind in (HEAD, MID)
        elif c == "/" and operand and (stop := _regex_end(src, i)) is not None:
            kind, text, i, operand = REGEX, src[i:stop], stop, False
        elif m := _NAME_RE.match(src, i):
            kind, text, i = NAME, m.group(), m.end()
            property_name = prev is not None and prev.kind == PUNCT and prev.text in (".", "?.")
            operand = text in BEFORE_EXPRESSION and not property_name
        elif (c.isdigit() or c == ".") and (m := _NUM_RE.match(src, i)):
            kind, text, i, operand = NUM, m.group(), m.end(), False
        elif m := _PUNCT_RE.match(src, i):
            text, i = m.group(), m.end()
            operand = _punctuator(text, prev, was, newline, braces, parens)
        else:  # a character JavaScript has no token for (`\`, a stray symbol): skip it
            i += 1
            continue
        prev = Token(kind, text, start, i, newline)
        toks.append(prev)
        newline = False
    return toks


def _punctuator(
    text: str,
    prev: Token | None,
    operand: bool,
    newline: bool,
    braces: list[int],
    parens: list[bool],
) -> bool:
    """Whether an operand may follow the punctuator ``text`` (see the module doc);
    keeps the stacks of open ``{`` and ``(``."""
    if text == "(":
        parens.append(prev is not None and prev.kind == NAME and prev.text in _CONTROL_HEADS)
        return True
    if text == ")":
        return parens.pop() if parens else False
    if text == "{":
        block = (
            prev is None
            or not operand
            or (prev.kind in (PUNCT, NAME) and prev.text in _BEFORE_BLOCK)
        )
        braces.append(_BLOCK if block else _OBJECT)
        return True
    if text == "}":
        return braces.pop() == _BLOCK if braces else True
    if text in ("++", "--"):
        return operand or newline  # prefix (no line break may stand before a postfix one)
    return text != "]"


def _string(src: str, i: int) -> tuple[str, str, int, bool]:
    """(STR, cooked text, end, whether the closing quote was found)."""
    quote, j, n = src[i], i + 1, len(src)
    while j < n:
        ch = src[j]
        if ch == "\\":
            j += 3 if src.startswith("\r\n", j + 1) else 2
        elif ch == quote:
            return STR, _cook(src[i + 1 : j]), j + 1, True
        elif ch in "\n\r":  # unterminated: the string ends with its line
            break
        else:
            j += 1
    j = min(j, n)
    return STR, _cook(src[i + 1 : j]), j, False


def _template_piece(src: str, j: int, *, first: bool) -> tuple[str, str, int, bool]:
    """(kind, cooked text, end, whether it was closed by a backtick or ``${``)."""
    begin, n = j, len(src)
    while j < n:
        ch = src[j]
        if ch == "\\":
            j += 2
        elif ch == "`":
            return (TPL if first else TAIL), _cook(src[begin:j]), j + 1, True
        elif ch == "$" and src.startswith("{", j + 1):
            return (HEAD if first else MID), _cook(src[begin:j]), j + 2, True
        else:
            j += 1
    return (TPL if first else TAIL), _cook(src[begin:n]), n, False


def _regex_end(src: str, i: int) -> int | None:
    j, n, in_class = i + 1, len(src), False
    while j < n:
        ch = src[j]
        if ch in LINE_TERMINATORS:
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


def unclosed(src: str) -> str | None:
    """What ``src`` ends inside: ``COMMENT``, ``STR`` or ``TPL`` (a template literal or
    one of its ``${…}``); None if it ends in code. A string ends at a line break."""
    toks = tokenize(src, comments=True)
    last = toks[-1] if toks else None
    if last is None:
        return None
    if last.kind == COMMENT:
        if last.text.startswith("//"):
            return COMMENT if last.end == len(src) else None
        return None if len(last.text) >= 4 and last.text.endswith("*/") else COMMENT
    if last.kind == STR:
        return None if _string(src, last.start)[3] or last.end < len(src) else STR
    if last.kind in (TPL, TAIL) and not _template_piece(src, last.start + 1, first=True)[3]:
        return TPL
    code = [t for t in toks if t.kind != COMMENT]
    match, _ = brackets(code)
    open_head = any(t.kind == HEAD and m == len(code) for t, m in zip(code, match, strict=True))
    return TPL if open_head else None


def brackets(toks: list[Token]) -> tuple[list[int], list[int]]:
    """``match``: an opener's closer (``len(toks)`` if never closed) and a closer's opener
    (-1 if stray); ``parent``: the innermost opener around each token (-1 at top level).

    A template head is an opener closed by its tail; its middles belong to it."""
    n = len(toks)
    match, parent = [-1] * n, [-1] * n
    stack: list[int] = []
    # Per kind of opener (HEAD, "(", "[", "{"), the depths in ``stack`` of those open:
    # a closer finds its opener at once, and a stray one (nothing of its kind open) costs
    # nothing, so `((((…]]]]` is linear too. Every opener is pushed and popped once.
    depths: dict[str, list[int]] = {HEAD: [], "(": [], "[": [], "{": []}

    def kind(o: int) -> str:
        return HEAD if toks[o].kind == HEAD else toks[o].text

    for i, t in enumerate(toks):
        parent[i] = stack[-1] if stack else -1
        if t.kind == HEAD or (t.kind == PUNCT and t.text in "([{"):
            match[i] = n
            depths[HEAD if t.kind == HEAD else t.text].append(len(stack))
            stack.append(i)
            continue
        want = (
            HEAD if t.kind in (MID, TAIL) else (_CLOSERS.get(t.text) if t.kind == PUNCT else None)
        )
        if want is None or not depths[want]:
            continue
        depth = depths[want][-1]
        for unclosed_at in reversed(stack[depth + 1 :]):  # closed by this closer, unmatched
            match[unclosed_at] = i
            depths[kind(unclosed_at)].pop()
        del stack[depth + 1 :]
        if t.kind == MID:
            parent[i] = stack[-1]
        else:
            opener = stack.pop()
            depths[want].pop()
            match[opener], match[i] = i, opener
            parent[i] = parent[opener]
    return match, parent


_CELL_BREAK = re.compile(r"\r\n|\r|\n")
_ENGINE_BREAK = re.compile(r"\r\n|[\n\r\u2028\u2029]")
_TEMPLATE_BREAK = re.compile(r"\r\n|[\n\r]")
_CONTINUATION = re.compile(r"\\(?:\r\n|[\s\S])")


class Lines:
    """A script's lines as the cell shows them, and as QuickJS numbers them.

    The cell's (spec §2.3, as the editor and XML count them): a line ends at LF, CR or
    CR LF; ``position`` gives the cell's line and column of an offset, the script's first
    line standing at ``first_line`` from ``first_column``. QuickJS's (quickjs-ng, checked
    against the engine in tests/test_javascript.py): a line ends at LF, CR or CR LF and,
    between tokens, at LS or PS (U+2028, U+2029); not at an LS or PS inside a string, a
    template literal or a comment (nor at one that ends a ``//`` comment), nor at a CR
    inside a block comment, though columns after such a CR count from it. Its columns
    count UTF-8 bytes. ``engine_offset`` turns its line and column into an offset.
    """

    def __init__(self, src: str, first_line: int = 1, first_column: int = 1) -> None:
        self.src = src
        self.first_line, self.first_column = first_line, first_column
        self.starts = [0, *(m.end() for m in _CELL_BREAK.finditer(src))]
        self._engine: tuple[list[int], list[tuple[int, int]]] | None = None

    def position(self, offset: int) -> tuple[int, int]:
        """The cell's line and column of the offset ``offset``."""
        index = bisect_right(self.starts, offset) - 1
        column = offset - self.starts[index] + 1
        return self.first_line + index, column + (self.first_column - 1 if index == 0 else 0)

    @property
    def engine_starts(self) -> list[int]:
        """The offset at which each of QuickJS's lines starts."""
        return self._engine_lines()[0]

    def _engine_lines(self) -> tuple[list[int], list[tuple[int, int]]]:
        if self._engine is None:
            src = self.src
            if "\r" in src or "\u2028" in src or "\u2029" in src:
                self._engine = _engine_lines(src)
            else:  # LF alone: the cell's lines are QuickJS's
                self._engine = self.starts, []
        return self._engine

    def engine_offset(self, line: int, column: int) -> int:
        """The offset of QuickJS's ``line`` (1 for the script's first) and ``column``
        (1-based, in UTF-8 bytes), clamped to the script."""
        (starts, bases), src = self._engine_lines(), self.src
        if line < 1:
            return 0
        if line > len(starts):
            return len(src)
        end = starts[line] if line < len(starts) else len(src)
        # Columns count from the line's start or, past a block comment holding a CR on
        # the line, from that CR: the last such base whose comment the column passes.
        candidates = [b for b in bases if starts[line - 1] < b[0] < end]
        for base, after in [*reversed(candidates), (starts[line - 1], 0)]:
            at, left = base, column - 1
            while left > 0 and at < end:
                left -= len(src[at].encode("utf-8", "surrogatepass"))
                at += 1
            if at >= after:
                return at
        return at  # pragma: no cover - the line's own start always passes


def engine_line_count(src: str) -> int:
    """How many lines QuickJS numbers in ``src`` (see ``Lines``)."""
    if "\r" in src or "\u2028" in src or "\u2029" in src:
        return len(_engine_lines(src)[0])
    return src.count("\n") + 1


def _engine_lines(src: str) -> tuple[list[int], list[tuple[int, int]]]:
    """QuickJS's line starts, and its other column bases: (after a CR in a block
    comment, the comment's end)."""
    starts, bases, at, after_line_comment = [0], [], 0, False
    for t in [*tokenize(src, comments=True), Token(COMMENT, "", len(src), len(src), False)]:
        starts += [
            m.end()
            for m in _ENGINE_BREAK.finditer(src, at, t.start)
            if not (after_line_comment and m.start() == at and m.group() in "\u2028\u2029")
        ]
        piece = src[t.start : t.end]
        after_line_comment = t.kind == COMMENT and piece.startswith("//")
        if t.kind == COMMENT and not after_line_comment:
            for m in _TEMPLATE_BREAK.finditer(piece):
                if m.group() == "\r":
                    bases.append((t.start + m.end(), t.end))
                else:
                    starts.append(t.start + m.end())
        elif t.kind == STR:
            starts += [
                t.start + m.end() for m in _CONTINUATION.finditer(piece) if m.group()[1] in "\r\n"
            ]
        elif t.kind in (TPL, HEAD, MID, TAIL):
            starts += [t.start + m.end() for m in _TEMPLATE_BREAK.finditer(piece)]
        at = t.end
    return starts, bases
