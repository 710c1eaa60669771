"""The JavaScript tokenizer of the key linter: names, numbers, punctuators, strings,
template literals, comments and regular expression literals (spec §4.5: a step's script
is JavaScript).

``tokenize`` never fails: the linter reads scripts before anything runs, so unterminated
text runs to the end and a character JavaScript has no token for is skipped. ``brackets``
pairs the openers with their closers; ``ends_expression``/``starts_expression`` are the
rough automatic-semicolon-insertion test the readers above use at a line break.
"""

from __future__ import annotations

import re
from typing import NamedTuple

NAME, NUM, STR, PUNCT, REGEX = "name", "num", "str", "punct", "regex"
# A template literal: whole (no substitution), or head `…${, middle }…${ and tail }…`.
TPL, HEAD, MID, TAIL = "tpl", "head", "mid", "tail"


class Token(NamedTuple):
    """One token: its kind (the constants above), text and place in the script."""

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
_ESCAPE_RE = re.compile(
    r"\\(u\{[0-9a-fA-F]{1,8}\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|\n|.)", re.DOTALL
)
_SIMPLE_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "0": "\0",
    "\n": "",
}
#: After these words a `/` starts a regular expression, not a division.
_BEFORE_EXPRESSION = frozenset(
    {
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
    }
)
#: Words that are never a reference to a binding.
KEYWORDS = frozenset(
    {
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "debugger",
        "default",
        "delete",
        "do",
        "else",
        "export",
        "extends",
        "finally",
        "for",
        "function",
        "if",
        "import",
        "in",
        "instanceof",
        "let",
        "new",
        "return",
        "super",
        "switch",
        "this",
        "throw",
        "try",
        "typeof",
        "var",
        "void",
        "while",
        "with",
        "yield",
        "await",
        "async",
        "of",
        "null",
        "true",
        "false",
        "undefined",
        "NaN",
        "Infinity",
        "static",
        "get",
        "set",
        "arguments",
    }
)
#: `KEYWORD (…) {` opens a block, not a function body.
CONTROL = frozenset(
    {
        "if",
        "for",
        "while",
        "switch",
        "catch",
        "with",
        "await",
        "return",
        "typeof",
        "void",
        "delete",
        "in",
        "of",
        "new",
        "instanceof",
        "do",
        "else",
        "case",
        "throw",
        "yield",
    }
)
ASSIGN = frozenset(
    {
        "=",
        "+=",
        "-=",
        "*=",
        "/=",
        "%=",
        "**=",
        "<<=",
        ">>=",
        ">>>=",
        "&=",
        "|=",
        "^=",
        "&&=",
        "||=",
        "??=",
    }
)
OPENERS = frozenset({"(", "[", "{"})
_CLOSERS = {")": "(", "]": "[", "}": "{"}
#: Where a statement ends at a line break (automatic semicolon insertion, roughly): the
#: line so far is a complete expression and the next line cannot continue it.
_NOT_CONTINUING = frozenset({"{", "!", "~", "++", "--"})


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


def tokenize(src: str) -> list[Token]:
    """JavaScript tokens, without comments; never fails (unterminated text runs to the end).

    Template literals are split as JavaScript parsers do (head, middles, tail) with the
    substitutions' tokens in between, so nesting needs no recursion.
    """
    toks: list[Token] = []
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
        start, kind = i, PUNCT
        if c in "'\"":
            kind, (text, i) = STR, _string(src, i)
        elif c == "`" or (c == "}" and braces and braces[-1]):
            if c == "}":
                braces.pop()
            kind, text, i = _template_piece(src, i + 1, first=c == "`")
            if kind in (HEAD, MID):
                braces.append(True)
        elif c == "/" and _regex_allowed(toks) and (stop := _regex_end(src, i)) is not None:
            kind, text, i = REGEX, src[i:stop], stop
        elif m := _NAME_RE.match(src, i):
            kind, text, i = NAME, m.group(), m.end()
        elif (c.isdigit() or c == ".") and (m := _NUM_RE.match(src, i)):
            kind, text, i = NUM, m.group(), m.end()
        elif m := _PUNCT_RE.match(src, i):
            text, i = m.group(), m.end()
            if text == "{":
                braces.append(False)
            elif text == "}" and braces:
                braces.pop()
        else:  # a character JavaScript has no token for (`\`, a stray symbol): skip it
            i += 1
            continue
        toks.append(Token(kind, text, start, i, newline))
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
            return (TPL if first else TAIL), _cook(src[begin:j]), j + 1
        elif ch == "$" and src.startswith("{", j + 1):
            return (HEAD if first else MID), _cook(src[begin:j]), j + 2
        else:
            j += 1
    return (TPL if first else TAIL), _cook(src[begin:n]), n


def _regex_allowed(toks: list[Token]) -> bool:
    if not toks:
        return True
    prev = toks[-1]
    if prev.kind == NAME:
        return prev.text in _BEFORE_EXPRESSION
    if prev.kind == PUNCT:
        return prev.text not in (")", "]", "}", "++", "--")
    return prev.kind in (HEAD, MID)


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
        if t.kind == HEAD or (t.kind == PUNCT and t.text in OPENERS):
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
        for unclosed in reversed(stack[depth + 1 :]):  # closed by this closer, unmatched
            match[unclosed] = i
            depths[kind(unclosed)].pop()
        del stack[depth + 1 :]
        if t.kind == MID:
            parent[i] = stack[-1]
        else:
            opener = stack.pop()
            depths[want].pop()
            match[opener], match[i] = i, opener
            parent[i] = parent[opener]
    return match, parent


def ends_expression(t: Token) -> bool:
    """Whether a line ending with ``t`` may be a complete expression."""
    if t.kind == NAME:
        return t.text not in _BEFORE_EXPRESSION and t.text not in (
            "const",
            "let",
            "var",
            "function",
            "async",
            "class",
            "extends",
        )
    if t.kind == PUNCT:
        return t.text in (")", "]", "}", "++", "--")
    return t.kind in (NUM, STR, TPL, TAIL, REGEX)


def starts_expression(t: Token) -> bool:
    """Whether ``t``, first on its line, starts a new statement (roughly: ASI)."""
    if t.kind == NAME:
        return t.text not in ("in", "instanceof", "of")
    if t.kind == PUNCT:
        return t.text in _NOT_CONTINUING
    return t.kind in (NUM, STR, TPL, HEAD, REGEX)
