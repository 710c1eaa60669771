"""The key linter's words for JavaScript tokens (spec §4.5: a step's script is
JavaScript): which names are keywords, which open a control statement, which punctuators
assign, and ``ends_expression``/``starts_expression``, the rough automatic-semicolon-
insertion test the readers above use at a line break. The tokens come from the
package's one lexer, ``woml_magic.javascript``.
"""

from __future__ import annotations

from ..javascript import BEFORE_EXPRESSION, HEAD, NAME, NUM, PUNCT, REGEX, STR, TAIL, TPL, Token

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
#: Where a statement ends at a line break (automatic semicolon insertion, roughly): the
#: line so far is a complete expression and the next line cannot continue it.
_NOT_CONTINUING = frozenset({"{", "!", "~", "++", "--"})


def ends_expression(t: Token) -> bool:
    """Whether a line ending with ``t`` may be a complete expression."""
    if t.kind == NAME:
        return t.text not in BEFORE_EXPRESSION and t.text not in (
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
