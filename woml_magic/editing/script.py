"""What the cursor is on inside a ``<script>`` being typed (spec §3.4, §3.6, §4.1, §10.1).

The script is read with the package's JavaScript lexer (``woml_magic.javascript``), which
never fails on unfinished code. ``spot`` says whether the cursor is

- after a member access: ``services.``, ``services.http.``, ``attempt.`` (``member``,
  with the names before the dot);
- at a key of an object given to ``services.http.request``: its ``request`` (first
  argument), its ``options`` (second) or ``request.idempotency`` (``key``);
- in a string whose values are known: ``services.secret("…`` and ``method: "…``
  of a request (``string``);
- at a plain name (``name``), where the script's scope is ``context``, ``attempt``,
  ``services`` and ``console``;

or on nothing this knows (a comment, a template literal, a number: None).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from ..javascript import COMMENT, NAME, PUNCT, STR, Token, brackets, tokenize, unclosed

MEMBER, KEY, STRING, PLAIN = "member", "key", "string", "name"
#: A call is ``services.http.request(…)``, or ``http.request(…)`` after
#: ``const http = services.http`` (the alias the linter follows too).
_REQUEST_CALLEES = (("services", "http", "request"), ("http", "request"))
_DECLARING = frozenset({"const", "let", "var", "function", "class", "catch"})


@dataclass(frozen=True)
class Spot:
    """What the cursor is on: ``kind`` (the constants above), where the word being
    typed starts (an offset in the script), and what it belongs to."""

    kind: str
    start: int
    chain: tuple[str, ...] = ()  # member: the names before the dot
    role: str = ""  # key: request, options or idempotency; string: secret or method
    used: frozenset[str] = frozenset()  # key: the object's keys already written


def spot(src: str, cursor: int) -> Spot | None:
    """What the cursor at ``cursor`` (an offset in the script ``src``) is on."""
    if not 0 <= cursor <= len(src):
        return None
    toks = tokenize(src)
    _, parent = brackets(toks)
    k = bisect.bisect_left([t.end for t in toks], cursor)  # first token ending at/after it
    here = toks[k] if k < len(toks) and toks[k].start < cursor else None
    if here is not None and here.kind == STR:
        quote = src[here.start]
        closed = here.end - here.start >= 2 and src[here.end - 1] == quote
        if not (closed and cursor == here.end):
            return _in_string(toks, parent, k, here.start + 1)
        here, k = None, k + 1  # just after a closed string
    if here is not None and here.kind == PUNCT and cursor == here.end:
        here, k = None, k + 1
    if here is None:
        gap_from = toks[k - 1].end if k > 0 else 0
        if unclosed(src[gap_from:cursor]) == COMMENT:  # the gap: white space and comments
            return None
        start, before = cursor, k - 1
    elif here.kind == NAME:
        start, before = here.start, k - 1
    else:
        return None
    skip = k if here is not None else -1
    return _after(toks, parent, before, start, skip)


def _after(toks: list[Token], parent: list[int], j: int, start: int, skip: int) -> Spot | None:
    """The spot of a word at ``start`` whose previous token is ``toks[j]``."""
    prev = toks[j] if j >= 0 else None
    if prev is not None and prev.kind == PUNCT and prev.text in (".", "?."):
        chain = _chain(toks, j)
        return Spot(MEMBER, start, chain=chain) if chain else None
    if prev is not None and prev.kind == PUNCT and prev.text in ("{", ","):
        opener = j if prev.text == "{" else parent[j]
        if opener >= 0 and toks[opener].text == "{":
            role = _role(toks, parent, opener)
            if role:
                return Spot(KEY, start, role=role, used=_keys(toks, parent, opener, skip))
            return None
    if prev is not None and prev.kind == NAME and prev.text in _DECLARING:
        return None
    return Spot(PLAIN, start)


def _in_string(toks: list[Token], parent: list[int], k: int, start: int) -> Spot | None:
    """A string at ``toks[k]`` whose values are known: a secret's name, a method."""
    if k >= 2 and toks[k - 1].text == "(" and _chain(toks, k - 1) == ("services", "secret"):
        return Spot(STRING, start, role="secret")
    if k >= 2 and toks[k - 1].text == ":" and _key_text(toks[k - 2]) == "method":
        opener = parent[k - 2]
        if opener >= 0 and toks[opener].text == "{" and _role(toks, parent, opener) == "request":
            return Spot(STRING, start, role="method")
    return None


def _chain(toks: list[Token], i: int) -> tuple[str, ...]:
    """The dotted names just before ``toks[i]``: ``services.http`` before ``.`` or ``(``."""
    names: list[str] = []
    m = i - 1
    while m >= 0 and toks[m].kind == NAME:
        names.append(toks[m].text)
        if m >= 1 and toks[m - 1].kind == PUNCT and toks[m - 1].text in (".", "?."):
            m -= 2
        else:
            break
    return tuple(reversed(names))


def _role(toks: list[Token], parent: list[int], opener: int, depth: int = 0) -> str:
    """Which object of a request call the ``{`` at ``opener`` opens, or ""."""
    b = opener - 1
    if b < 0 or toks[b].kind != PUNCT or depth > 2:
        return ""
    if toks[b].text == ":":
        outer = parent[b - 1] if b >= 1 else -1
        if (b >= 1 and _key_text(toks[b - 1]) == "idempotency" and outer >= 0
                and toks[outer].text == "{"
                and _role(toks, parent, outer, depth + 1) == "request"):
            return "idempotency"
        return ""
    if toks[b].text == "(":
        paren, argument = b, 0
    elif toks[b].text == ",":
        paren = parent[b]
        if paren < 0 or toks[paren].text != "(":
            return ""
        argument = sum(1 for i in range(paren + 1, b + 1)
                       if parent[i] == paren and toks[i].text == ",")
    else:
        return ""
    callee = _chain(toks, paren)
    if not any(callee[-len(c):] == c for c in _REQUEST_CALLEES if len(callee) >= len(c)):
        return ""
    return ("request", "options")[argument] if argument < 2 else ""


def _keys(toks: list[Token], parent: list[int], opener: int, skip: int) -> frozenset[str]:
    """The keys written in the object at ``opener`` (shorthand ``{url}`` included),
    but the one at ``skip``, which is being typed."""
    found: set[str] = set()
    for i in range(opener + 1, len(toks)):
        if parent[i] != opener:
            if parent[i] < opener:
                break  # left the object
            continue
        t = toks[i]
        if i == skip or t.kind not in (NAME, STR) or toks[i - 1].text not in ("{", ","):
            continue
        following = toks[i + 1].text if i + 1 < len(toks) else ""
        if following in (":", ",", "}", "("):
            found.add(t.text)
    return frozenset(found)


def _key_text(t: Token) -> str:
    return t.text if t.kind in (NAME, STR) else ""

