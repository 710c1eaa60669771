"""Catch-clause instrumentation that lets a caught out-of-memory still count (spec §3.2).

When QuickJS runs out of memory so completely that it cannot build the
``InternalError``, it throws ``null``. A script that catches that ``null`` and
returns normally would otherwise hide the out-of-memory ``crash``. So the worker
rewrites ``catch (e) {`` to ``catch (e) {__womlCaught(e);`` (and ``catch {`` to
``catch (__womlE) {__womlCaught(__womlE);``); the hook notes a caught ``null``. The
worker gives the hook a random name (one per worker process) and binds it as a
constant of a block around the script, so no global name exists for a script to
call. Insertions stay on the same line, so error lines do not move.

This is a small JavaScript lexer, not a parser: it skips strings, template
literals, comments and regular expression literals and rewrites ``catch`` only in
code. Destructuring catch parameters are left alone. If the rewritten script does
not compile, the worker runs the script as written.
"""

from __future__ import annotations

import re

_IDENT_START = re.compile(r"[A-Za-z_$\u0080-\uffff]")
_IDENT = re.compile(r"[A-Za-z0-9_$\u0080-\uffff]*")
_SPACE = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.DOTALL)
_GAP = r"(?:\s+|/\*.*?\*/)*"
_BINDING = re.compile(rf"\({_GAP}([A-Za-z_$][A-Za-z0-9_$]*){_GAP}\)", re.DOTALL)
# After these a `/` starts a regular expression literal rather than a division.
_REGEX_AFTER_WORDS = frozenset(
    {"return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case"}
    | {"do", "else", "yield", "await"}
)
_REGEX_AFTER_PUNCT = frozenset("(,=:[!&|?{};+-*%<>~^")
_CALL = "__womlCaught"


def _ident_end(src: str, i: int) -> int:
    match = _IDENT.match(src, i)
    return match.end() if match else i


def _skip_space(src: str, i: int) -> int:
    """Index of the first character at or after ``i`` that is not space or a comment."""
    match = _SPACE.match(src, i)
    return match.end() if match else i


def _skip_string(src: str, i: int, quote: str) -> int:
    """Index just after the string literal starting at ``src[i] == quote``."""
    i += 1
    while i < len(src):
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c in (quote, "\n"):
            return i + 1
        i += 1
    return i


def _skip_regex(src: str, i: int) -> int:
    i += 1
    in_class = False
    while i < len(src):
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == "\n":
            return i
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "/":
            i += 1
            return _ident_end(src, i)
        i += 1
    return i


def instrument_catches(src: str, hook: str = _CALL) -> str:
    """``src`` with every simple ``catch`` clause reporting its caught value to ``hook``
    (see module doc)."""
    if "catch" not in src:
        return src
    out: list[str] = []
    last = 0  # src[last:] is not yet copied to out
    i = 0
    prev = ""  # previous significant token, for the regex-or-division decision
    # Each entry is the brace depth at which a template `${` substitution closes.
    templates: list[int] = []
    depth = 0
    n = len(src)
    in_template = False
    while i < n:
        if in_template:
            c = src[i]
            if c == "\\":
                i += 2
            elif c == "`":
                in_template = False
                prev = "`"
                i += 1
            elif src.startswith("${", i):
                templates.append(depth)
                depth += 1
                in_template = False
                prev = "{"
                i += 2
            else:
                i += 1
            continue
        c = src[i]
        if c.isspace():
            i += 1
        elif src.startswith("//", i) or src.startswith("/*", i):
            i = max(_skip_space(src, i), i + 1)
        elif c in "'\"":
            i = _skip_string(src, i, c)
            prev = "str"
        elif c == "`":
            in_template = True
            i += 1
        elif c == "/":
            if prev == "" or prev in _REGEX_AFTER_PUNCT or prev in _REGEX_AFTER_WORDS:
                i = _skip_regex(src, i)
                prev = "regex"
            else:
                i += 1
                prev = "/"
        elif c == "{":
            depth += 1
            prev = "{"
            i += 1
        elif c == "}":
            depth -= 1
            i += 1
            if templates and templates[-1] == depth:
                templates.pop()
                in_template = True
            prev = "}"
        elif _IDENT_START.match(c):
            end = _ident_end(src, i)
            word = src[i:end]
            if word == "catch" and prev != ".":
                rewritten = _rewrite_catch(src, end, hook)
                if rewritten is not None:
                    replacement, resume = rewritten
                    out.append(src[last:end])
                    out.append(replacement)
                    last = resume
                    depth += 1
                    prev = "{"
                    i = resume
                    continue
            prev = word
            i = end
        elif c.isdigit():
            i = _ident_end(src, i + 1)
            prev = "num"
        else:
            prev = c
            i += 1
    out.append(src[last:])
    return "".join(out)


def _rewrite_catch(src: str, i: int, hook: str) -> tuple[str, int] | None:
    """Rewrite the clause after ``catch`` at ``i``: (new text, index after its ``{``)."""
    j = _skip_space(src, i)
    if src.startswith("{", j):
        return src[i:j] + f"(__womlE) {{{hook}(__womlE);", j + 1
    binding = _BINDING.match(src, j)
    if binding is None:
        return None
    k = _skip_space(src, binding.end())
    if not src.startswith("{", k):
        return None
    name = binding.group(1)
    return src[i : k + 1] + f"{hook}({name});", k + 1
