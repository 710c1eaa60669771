"""Where a cursor stands in a ``%%woml`` cell being typed (spec §2.1-§2.3, §6.4).

A cell being typed is rarely a valid document, so this is not the parser: a tolerant
forward scan from the top of the document to the cursor, with the parser's lexical
rules (comments, raw script text up to the next ``</script>``, quoted attribute
values), that says what the cursor is in:

- ``Options``: the ``%%woml`` line (line 1, as the editor shows it);
- ``InTag``: a start tag — its name, an attribute's name or an attribute's value;
- ``InClosingTag``: ``</…``;
- ``InScript``: the text of a ``<script>``;
- None: anything else (a comment, text between elements, not a ``%%woml`` cell).

Offsets are indexes into the cell's text (Python ``str``: code points, as Jupyter's
``cursor_pos``). Nothing here raises on any text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..scan import MAX_BYTES

MAGIC = "%%woml"
_IS_WOML = re.compile(r"%%woml(?=\s|$)")
_NAME = r"[^\s<>/=\"']+"
_TAG_NAME = re.compile(rf"{_NAME}|")
_ATTR_DONE = re.compile(rf"\s+({_NAME})\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")
_ATTR_NAME = re.compile(rf"\s+({_NAME}|)")
_ATTR_VALUE = re.compile(rf"\s+({_NAME})\s*=\s*([\"']?)")
_ATTR_ANY = re.compile(rf"({_NAME})\s*=\s*(?:\"[^\"]*\"|'[^']*')")
_END_TAG = re.compile(rf"</({_NAME})\s*>")
_SCRIPT_END = re.compile(r"</script\s*>")
_ID = re.compile(r"""\sid\s*=\s*(?:"([^"]*)"|'([^']*)')""")


@dataclass(frozen=True)
class Options:
    """The cursor is on the ``%%woml`` line; ``line`` is that line's text."""

    line: str


@dataclass(frozen=True)
class InTag:
    """The cursor is in a start tag: ``part`` is ``name``, ``attribute`` or ``value``.

    ``start`` is where the fragment being typed begins (the text up to the cursor is
    ``cell[start:cursor]``); ``quote`` is the value's quote, "" for a value not yet
    quoted. ``used`` are the tag's other attributes, before and after the cursor.
    ``allowed`` are the elements this tag may be here (spec §2.1, §2.3).
    """

    element: str
    part: str
    start: int
    parent: str | None
    allowed: tuple[str, ...]
    attribute: str | None = None
    quote: str = ""
    used: frozenset[str] = frozenset()


@dataclass(frozen=True)
class InClosingTag:
    """The cursor is in ``</…``; ``open`` is the element it would close."""

    open: str | None
    start: int


@dataclass(frozen=True)
class InScript:
    """The cursor is in a script's text, which runs from ``body`` to ``end`` (the next
    ``</script>``, or the end of the cell); ``steps`` are the ids of the steps before
    the script's own (whose results ``context.steps`` may hold, spec §3.6)."""

    body: int
    end: int
    steps: tuple[str, ...]


Place = Options | InTag | InClosingTag | InScript


def is_woml_cell(cell: str) -> bool:
    """Whether ``cell`` is a ``%%woml`` cell: its first line starts with ``%%woml``."""
    return _IS_WOML.match(cell) is not None


def document_start(cell: str) -> int:
    """Where the document begins: after the ``%%woml`` line (the magic's ``cell``)."""
    end = cell.find("\n")
    return len(cell) if end < 0 else end + 1


def locate(cell: str, cursor: int) -> Place | None:
    """What the cursor at ``cursor`` is in (see the module docstring)."""
    if not is_woml_cell(cell) or not 0 <= cursor <= len(cell) or len(cell) > 4 * MAX_BYTES:
        return None
    line_end = cell.find("\n")
    if line_end < 0 or cursor <= line_end:
        return Options(cell if line_end < 0 else cell[:line_end])
    return _Scanner(cell, cursor).run(line_end + 1)


class _Scanner:
    """One forward pass from the document's start to the cursor."""

    def __init__(self, cell: str, cursor: int) -> None:
        self.cell, self.cursor = cell, cursor
        self.stack: list[str] = []
        self.top: list[str] = []  # top-level elements seen
        self.scripts: list[bool] = []  # per open element: it has a <script> child
        self.steps: list[str | None] = []  # each step's id, in order (None: none yet)

    def run(self, pos: int) -> Place | None:
        cell, cursor = self.cell, self.cursor
        while True:
            lt = cell.find("<", pos, cursor)
            if lt < 0:
                return None
            if cell.startswith("<!--", lt):
                end = cell.find("-->", lt + 4)
                if end < 0 or end + 3 > cursor:
                    return None
                pos = end + 3
            elif cell.startswith(("<!", "<?"), lt):
                end = cell.find(">", lt)
                if end < 0 or end >= cursor:
                    return None
                pos = end + 1
            elif cell.startswith("</", lt):
                if cursor < lt + 2:
                    return None  # between < and /
                match = _END_TAG.match(cell, lt)
                if match is None or match.end() > cursor:
                    return InClosingTag(self.stack[-1] if self.stack else None, lt + 2)
                if self.stack and self.stack[-1] == match.group(1):
                    self.stack.pop()
                    self.scripts.pop()
                pos = match.end()
            else:
                found = self._start_tag(lt)
                if not isinstance(found, int):
                    return found
                pos = found

    def _start_tag(self, lt: int) -> Place | int | None:
        """The place in the tag at ``lt`` if the cursor is in it, else where it ends."""
        cell, cursor = self.cell, self.cursor
        end = _tag_end(cell, lt + 1)
        if end >= cursor or end == len(cell):
            return self._in_tag(lt, end)
        name = _TAG_NAME.match(cell, lt + 1).group()  # type: ignore[union-attr]  # matches ""
        self._opened(name, cell[lt:end])
        if cell[end] != ">":  # a tag cut short by the next '<': go on from there
            return end
        if cell[end - 1] == "/":
            return end + 1
        if name == "script":
            close = _SCRIPT_END.search(cell, end + 1)
            if close is None or close.start() >= cursor:
                own = 1 if self.stack and self.stack[-1] == "step" else 0
                earlier = self.steps[: len(self.steps) - own]
                return InScript(end + 1, len(cell) if close is None else close.start(),
                                tuple(s for s in earlier if s is not None))
            return close.end()  # the script's own </script>: nothing to pop
        self.stack.append(name)
        self.scripts.append(False)
        return end + 1

    def _opened(self, name: str, text: str) -> None:
        if not self.stack:
            self.top.append(name)
        elif name == "script":
            self.scripts[-1] = True
        if name == "step":
            m = _ID.search(text)
            self.steps.append(None if m is None else m.group(1) if m.group(1) is not None
                              else m.group(2))

    def _allowed(self) -> tuple[str, ...]:
        """The elements a new tag may be here (spec §2.1, §2.3)."""
        if not self.stack:
            if "workflow" in self.top:
                return ()
            return ("step",) if self.top else ("step", "workflow")
        parent = self.stack[-1]
        if parent == "workflow":
            return ("step",)
        if parent == "step":
            return () if self.scripts[-1] else ("script",)
        return ()

    def _in_tag(self, lt: int, end: int) -> Place | None:
        cell, cursor = self.cell, self.cursor
        parent = self.stack[-1] if self.stack else None
        allowed = self._allowed()
        name = _TAG_NAME.match(cell, lt + 1, cursor).group()  # type: ignore[union-attr]
        i = lt + 1 + len(name)
        if i == cursor:
            return InTag(name, "name", lt + 1, parent, allowed)
        used: list[str] = []
        while (m := _ATTR_DONE.match(cell, i, cursor)) is not None:
            used.append(m.group(1))
            i = m.end()
        after = frozenset(m.group(1) for m in _ATTR_ANY.finditer(cell, cursor, end))
        m = _ATTR_NAME.match(cell, i, cursor)
        if m is not None and m.end() == cursor:
            return InTag(name, "attribute", m.start(1), parent, allowed,
                         used=frozenset(used) | after)
        m = _ATTR_VALUE.match(cell, i, cursor)
        if m is None:
            return None
        quote = m.group(2)
        rest = cell[m.end() : cursor]
        if any(c in rest for c in "\"'<>") or (not quote and rest):
            return None
        return InTag(name, "value", m.end(), parent, allowed, attribute=m.group(1),
                     quote=quote, used=frozenset(used))


def _tag_end(cell: str, i: int) -> int:
    """The index of the ``>`` ending the tag whose text starts at ``i`` (quotes
    respected), of a ``<`` that cuts it short, or ``len(cell)``."""
    quote = ""
    n = len(cell)
    while i < n:
        c = cell[i]
        if quote:
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "<>":
            return i
        i += 1
    return n
