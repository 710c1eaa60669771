"""What to complete at a cursor in a ``%%woml`` cell (spec §6.4).

``complete(cell, cursor, flags=…, secrets=…)`` answers, for the cell's whole text and
the cursor's offset in it:

- on the ``%%woml`` line: the magic's flags not yet given (``flags``, read from the
  magic's own parser, ``editing.flags``), and the choices of a flag that has them
  (``--clock real|simulated``, ``--engine local|temporal``);
- in a start tag: the elements allowed there (spec §2.1, §2.3), the attributes of the
  element not yet used (spec §2.2), the values of an attribute (``fixed``/
  ``exponential``, ``1``–``10``, durations, spec §2.4); in ``</``: the open element;
- in a ``<script>``: the members of ``attempt``, ``context``, ``services``,
  ``console``; ``context.steps.`` the ids of the steps above; the keys of
  ``services.http.request``'s request, options and idempotency objects not yet written;
  ``method: "`` the methods; ``services.secret("`` the names of the secrets this
  kernel holds (``secrets``); at a plain name the script's scope (spec §4).

Each completion has a kind (``entries``' constants) and a one-line detail. None means
the cursor is not in a ``%%woml`` cell (or is on the word ``%%woml`` itself), so
IPython's completion applies; an empty ``items`` means "inside a ``%%woml`` cell,
nothing to offer".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from . import entries, script
from .entries import ELEMENT, OPTION, PROPERTY, SECRET, VALUE, Entry
from .flags import Flag
from .place import MAGIC, InClosingTag, InScript, InTag, Options, is_woml_cell, locate

_WORD = re.compile(r"\S+")
_LAST_WORD = re.compile(r"\S*\Z")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_JS_NAME = re.compile(r"[A-Za-z_$][\w$]*")
#: A detail is one line; longer descriptions are cut here (STYLE 15).
_DETAIL_CHARS = 120


@dataclass(frozen=True)
class Completion:
    """One completion: the text that replaces the fragment, its kind, a short detail."""

    text: str
    kind: str
    detail: str = ""


@dataclass(frozen=True)
class Completions:
    """Completions replacing ``cell[start:end]`` (``end`` is the cursor)."""

    start: int
    end: int
    items: tuple[Completion, ...]


def complete(cell: str, cursor: int, *, flags: Sequence[Flag] = (),
             secrets: Iterable[str] = ()) -> Completions | None:
    """The completions at ``cursor`` in ``cell`` (see the module docstring)."""
    place = locate(cell, cursor)
    if place is None:
        inside = is_woml_cell(cell) and 0 <= cursor <= len(cell)
        return Completions(cursor, cursor, ()) if inside else None
    if isinstance(place, Options):
        return _options(place.line, cursor, flags)
    if isinstance(place, InTag):
        return Completions(place.start, cursor, _tag(cell[place.start : cursor], place))
    if isinstance(place, InClosingTag):
        typed = cell[place.start : cursor]
        found = () if place.open is None or not place.open.startswith(typed) else (
            _item(place.open, entries.element(place.open), ELEMENT),)
        return Completions(place.start, cursor, found)
    return _script(cell, cursor, place, sorted(set(secrets)))


def _options(line: str, cursor: int, flags: Sequence[Flag]) -> Completions | None:
    """The ``%%woml`` line (spec §6.1): flags, and a flag's choices."""
    if cursor <= len(MAGIC):
        return None  # on %%woml itself: IPython completes magics' names
    head = line[len(MAGIC) : cursor]
    if head.count('"') % 2 or head.count("'") % 2:
        return Completions(cursor, cursor, ())  # inside a quoted value
    current = _LAST_WORD.search(head).group()  # type: ignore[union-attr]  # may be ""
    start = cursor - len(current)
    words = [(m.start(), m.group()) for m in _WORD.finditer(line, len(MAGIC))]
    others = [w for at, w in words if not at <= start <= at + len(w)]
    by_name = {f.name: f for f in flags}
    before = [w for at, w in words if at + len(w) < start]
    previous = by_name.get(before[-1]) if before else None
    if current.startswith("--") and "=" in current:
        name, _, value = current.partition("=")
        flag = by_name.get(name)
        return Completions(cursor - len(value), cursor,
                           _choices(flag, value) if flag is not None else ())
    if current.startswith("-") or (not current and not (previous and previous.takes_value)):
        used = {w.partition("=")[0] for w in others}
        found = tuple(Completion(f.name, OPTION, _short(f"{f.usage}: {f.help}"))
                      for f in flags if f.name.startswith(current)
                      and (f.repeatable or f.name not in used))
        return Completions(start, cursor, found)
    if previous is not None and previous.takes_value:
        return Completions(start, cursor, _choices(previous, current))
    return Completions(start, cursor, ())


def _choices(flag: Flag, typed: str) -> tuple[Completion, ...]:
    return tuple(Completion(c, VALUE, _short(f"{flag.name}: {flag.help}"))
                 for c in flag.choices if c.startswith(typed))


def _tag(typed: str, place: InTag) -> tuple[Completion, ...]:
    """A start tag (spec §2.1-§2.4): ``typed`` is the fragment before the cursor."""
    if place.part == "name":
        return tuple(_item(name, entries.element(name), ELEMENT)
                        for name in place.allowed if name.startswith(typed))
    attributes = entries.attributes(place.element)
    if place.part == "attribute":
        return tuple(_item(name, entry, entry.kind, default=True)
                        for name, entry in attributes.items()
                        if name.startswith(typed) and name not in place.used)
    entry = attributes.get(place.attribute or "")
    if entry is None:
        return ()
    values = list(entries.VALUES.get(entry.name, ()))
    if entry.name in entries.DURATION_ATTRIBUTES and _NUMBER.fullmatch(typed):
        values = [typed + unit for unit in entries.DURATION_UNITS] + values
    quote = "" if place.quote else '"'
    found = dict.fromkeys(v for v in values if v.startswith(typed))
    return tuple(Completion(f"{quote}{v}{quote}", VALUE, _short(entry.summary))
                    for v in found)


def _script(cell: str, cursor: int, place: InScript, secrets: list[str]) -> Completions:
    """Inside a ``<script>`` (spec §3.4, §3.6, §4)."""
    body = cell[place.body : place.end]
    at = script.spot(body, cursor - place.body)
    if at is None:
        return Completions(cursor, cursor, ())
    typed = body[at.start : cursor - place.body]
    start = place.body + at.start
    found: list[Completion]
    if at.kind == script.MEMBER:
        found = _members(at.chain, place.steps)
    elif at.kind == script.KEY:
        found = [_item(name, e, e.kind) for name, e in entries.request_keys(at.role).items()]
        found = [c for c in found if c.text not in at.used]
    elif at.kind == script.STRING and at.role == "secret":
        found = [Completion(name, SECRET, "a secret set in this kernel (spec §10.1)")
                 for name in secrets]
    elif at.kind == script.STRING:
        found = [Completion(m, VALUE, "an HTTP method") for m in entries.methods()]
        typed = typed.upper()  # methods are upper case; "po" means POST
    else:
        found = [_item(e.name, e, e.kind) for e in entries.globals_()]
    return Completions(start, cursor, tuple(c for c in found if c.text.startswith(typed)))


def _members(chain: tuple[str, ...], earlier_steps: tuple[str, ...]) -> list[Completion]:
    dotted = ".".join(chain)
    if dotted == "context.steps":
        return [Completion(s, PROPERTY, f"the result of step {s}")
                for s in dict.fromkeys(earlier_steps) if _JS_NAME.fullmatch(s)]
    return [_item(e.name.rsplit(".", 1)[-1], e, e.kind) for e in entries.members(dotted)]


def _item(text: str, entry: Entry | None, kind: str, *, default: bool = False) -> Completion:
    """A completion of ``entry`` (of ``kind`` when there is no entry), its detail the
    entry's signature and summary, with its default for an attribute."""
    if entry is None:
        return Completion(text, kind)
    detail = f"{entry.signature}: {entry.summary}" if entry.signature else entry.summary
    if default and entry.default is not None:
        detail += f" Default: {entry.default}."
    return Completion(text, entry.kind, _short(detail))


def _short(text: str) -> str:
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"
