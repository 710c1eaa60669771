"""Catch-clause instrumentation that lets a caught out-of-memory still count (spec §3.2).

When QuickJS runs out of memory so completely that it cannot build the
``InternalError``, it throws ``null``. A script that catches that ``null`` and
returns normally would otherwise hide the out-of-memory ``crash``. So the worker
rewrites ``catch (e) {`` to ``catch (e) {__womlCaught(e);`` (and ``catch {`` to
``catch (__womlE) {__womlCaught(__womlE);``); the hook notes a caught ``null``. The
worker gives the hook a random name (one per worker process) and binds it as a
constant of a block around the script, so no global name exists for a script to
call. Insertions stay on the same line, so error lines do not move.

The script is read with the package's JavaScript lexer (``woml_magic.javascript``), so
strings, template literals, comments and regular expression literals are never
rewritten: a clause is a ``catch`` token right after the ``}`` of a ``try`` block (or of
a ``catch`` block's own ``try``), never a method or property named ``catch``.
Destructuring catch parameters are left alone. If the rewritten script does not
compile, the worker runs the script as written.
"""

from __future__ import annotations

import functools

from woml_magic.javascript import NAME, PUNCT, Token, brackets, tokenize

_CALL = "__womlCaught"


@functools.lru_cache(maxsize=16)
def instrument_catches(src: str, hook: str = _CALL) -> str:
    """``src`` with every simple ``catch`` clause reporting its caught value to ``hook``
    (see module doc). Kept for the last few scripts: a retried step's script is read
    once (the lexer takes about 1 µs a character)."""
    if "catch" not in src:
        return src
    toks = tokenize(src)
    match, _ = brackets(toks)
    out: list[str] = []
    last = 0  # src[last:] is not yet copied to out
    for i, t in enumerate(toks):
        if t.kind != NAME or t.text != "catch" or not _ends_try_block(toks, match, i - 1):
            continue
        for at, text in _insertions(toks, i, hook):
            out += [src[last:at], text]
            last = at
    out.append(src[last:])
    return "".join(out)


def _is(toks: list[Token], i: int, text: str) -> bool:
    return i < len(toks) and toks[i].kind == PUNCT and toks[i].text == text


def _ends_try_block(toks: list[Token], match: list[int], j: int) -> bool:
    """Whether ``toks[j]`` is the ``}`` closing the block right after ``try``."""
    if j < 0 or not _is(toks, j, "}") or not 0 < match[j] < j:
        return False
    before = toks[match[j] - 1]
    return before.kind == NAME and before.text == "try"


def _insertions(toks: list[Token], i: int, hook: str) -> list[tuple[int, str]]:
    """What to insert where for the clause whose ``catch`` is ``toks[i]``: a binding
    and the call for ``catch {``, the call after the ``{`` of ``catch (name) {``, nothing
    for others."""
    if _is(toks, i + 1, "{"):
        brace = toks[i + 1]
        return [(brace.start, "(__womlE) "), (brace.end, f"{hook}(__womlE);")]
    if (
        _is(toks, i + 1, "(")
        and i + 2 < len(toks)
        and toks[i + 2].kind == NAME
        and _is(toks, i + 3, ")")
        and _is(toks, i + 4, "{")
    ):
        return [(toks[i + 4].end, f"{hook}({toks[i + 2].text});")]
    return []
