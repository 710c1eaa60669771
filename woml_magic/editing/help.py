"""The help shown at a cursor in a ``%%woml`` cell: Jupyter's inspection (spec §6.4).

``help_at(cell, cursor, usage=…, flags=…)`` gives

- on the word ``%%woml`` (or between the line's words): ``usage``, the cell magic's
  usage with a line per option, as the magic's parser prints it;
- on a flag (or its value): that flag's usage and help;
- on an element, an attribute or an attribute's value: the element's or attribute's
  reference entry (its meaning, default and an example, ``entries``);
- in a script, on ``attempt``/``context``/``services``/``console`` or one of their
  members, on a key of a ``services.http.request`` object, in ``services.secret("…")``:
  that name's entry;

and None on anything else, or outside a ``%%woml`` cell.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from . import entries, script
from .entries import Entry
from .flags import Flag
from .place import MAGIC, InClosingTag, InScript, InTag, Options, locate

_XML_NAME_CHAR = re.compile(r"[\w.:-]*")
_JS_NAME_CHAR = re.compile(r"[\w$]*")
_WORD = re.compile(r"\S+")


def help_at(cell: str, cursor: int, *, usage: str = "",
            flags: Sequence[Flag] = ()) -> str | None:
    """The help text at ``cursor`` in ``cell`` (see the module docstring)."""
    place = locate(cell, cursor)
    if isinstance(place, Options):
        return _options(place.line, cursor, usage, flags)
    if place is None:
        return None
    word = _JS_NAME_CHAR if isinstance(place, InScript) else _XML_NAME_CHAR
    end = word.match(cell, cursor).end()  # type: ignore[union-attr]  # matches ""
    if end != cursor:
        place = locate(cell, end)
    entry: Entry | None = None
    if isinstance(place, InTag):
        entry = _tag(place, cell[place.start : end])
    elif isinstance(place, InClosingTag):
        entry = entries.element(place.open or cell[place.start : end])
    elif isinstance(place, InScript):
        entry = _script(cell[place.body : place.end], end - place.body)
    return None if entry is None else entry.text()


def _options(line: str, cursor: int, usage: str, flags: Sequence[Flag]) -> str | None:
    by_name = {f.name: f for f in flags}
    words = [(m.start(), m.group()) for m in _WORD.finditer(line, len(MAGIC))]
    for i, (at, word) in enumerate(words):
        if at <= cursor <= at + len(word):
            flag = by_name.get(word.partition("=")[0])
            if flag is None and i > 0:
                previous = by_name.get(words[i - 1][1])
                flag = previous if previous is not None and previous.takes_value else None
            if flag is not None:
                return f"{flag.usage}\n\n{flag.help}"
    return usage or None


def _tag(place: InTag, word: str) -> Entry | None:
    if place.part == "name":
        return entries.element(word)
    attributes = entries.attributes(place.element)
    if place.part == "attribute":
        return attributes.get(word)
    return attributes.get(place.attribute or "")


def _script(body: str, cursor: int) -> Entry | None:
    at = script.spot(body, cursor)
    if at is None:
        return None
    word = body[at.start : cursor]
    if at.kind == script.MEMBER:
        return entries.script_name(".".join((*at.chain, word)))
    if at.kind == script.KEY:
        return entries.request_keys(at.role).get(word)
    if at.kind == script.STRING:
        if at.role == "secret":
            return entries.script_name("services.secret")
        return entries.request_keys("request").get("method")
    return entries.script_name(word)
