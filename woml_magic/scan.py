"""Passes 1 and 2 of parsing a WOML cell: markup to tags (spec §2.1-§2.3, §2.5).

Scripts are raw text, as in HTML (spec §2.3), so the document cannot go straight to an
XML parser. ``scan_markup`` walks the markup with regular expressions: it records every
start tag (name, attributes, exact offsets, parent), takes each ``<script>`` body
verbatim, and rejects what WOML never allows (text outside scripts, DTDs and entity
declarations, processing instructions, unbalanced tags, the step limit). It returns the
text with every script body and the XML declaration blanked to spaces (line breaks
kept), so offsets in the blanked text equal offsets in the cell. ``check_well_formed``
then has lxml check the blanked text with entity resolution, DTD loading and network
access off. ``woml_magic.parse`` validates the tags and builds the models; the
sentences for markup WOML refuses are in ``woml_magic.scan_messages``.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from .errors import WomlSyntaxError
from .scan_messages import (
    diagnose_text,
    early_script_end_message,
    ends_inside_a_string,
    markup_declaration_message,
    processing_instruction_message,
    short,
)

#: spec §2.5: documents over 1 MiB of UTF-8 or over 10,000 steps are refused.
MAX_BYTES = 1 << 20
MAX_STEPS = 10_000
#: How deeply elements may nest. A WOML document nests three levels (<workflow>,
#: <step>, <script>); anything far deeper is a mistake, refused here with a sentence
#: before lxml would refuse it at 256 with "use XML_PARSE_HUGE option".
MAX_NESTING = 32
#: spec §2.2: a step or workflow id.
ID = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")

# Loose XML names: lxml enforces the exact XML name rules in pass 2.
_NAME = r"[^\s<>/=\"'!?&;]+"
START_TAG = re.compile(rf"<({_NAME})((?:\s+{_NAME}\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*(/?)>")
_ATTR = re.compile(rf"({_NAME})\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")
_NAME_AT = re.compile(_NAME)
_SPACE_AT = re.compile(r"\s*")
_EQUALS_AT = re.compile(r"\s*=\s*")
_BARE_VALUE_AT = re.compile(r"[^\s>/]*")
_END_TAG = re.compile(rf"</({_NAME})\s*>")
_SCRIPT_END = re.compile(r"</script\s*>")
_XML_DECL = re.compile(
    r"<\?xml\s+version\s*=\s*(\"1\.[0-9]+\"|'1\.[0-9]+')"
    r"(?:\s+encoding\s*=\s*(?:\"[A-Za-z][\w.-]*\"|'[A-Za-z][\w.-]*'))?"
    r"(?:\s+standalone\s*=\s*(?:\"(?:yes|no)\"|'(?:yes|no)'))?\s*\?>"
)
NON_SPACE = re.compile(r"[^ \t\r\n]")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_NOT_LINE_BREAK = re.compile(r"[^\r\n]")
_BAD_REFERENCE = re.compile(r"&(?!(?:amp|lt|gt|quot|apos|#[0-9]+|#x[0-9A-Fa-f]+);)")
_ATTR_DECODE = re.compile(r"&(amp|lt|gt|quot|apos);|&#([0-9]+);|&#x([0-9A-Fa-f]+);|\r\n|[\t\r\n]")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}
# Characters XML 1.0 forbids anywhere, lone surrogates included.
_BAD_CHAR = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_CDATA_OPEN, _CDATA_CLOSE = "<![CDATA[", "]]>"
_ROOT = "woml-cell"  # wraps the blanked text so top-level steps form one XML document


@dataclass
class Attr:
    name: str
    name_at: int
    value_at: int
    raw: str
    value: str = field(init=False)  # as XML reads it: references decoded, breaks as spaces

    def __post_init__(self) -> None:
        plain = not any(c in self.raw for c in "&\t\r\n")  # the common case, kept cheap
        self.value = self.raw if plain else _ATTR_DECODE.sub(_decode_reference, self.raw)

    @property
    def shown(self) -> str:
        return short(self.name, 40)


@dataclass
class Tag:
    name: str
    at: int
    parent: int  # index in Scan.tags, -1 at the top level
    attrs: dict[str, Attr]  # by name, in document order
    children: list[int] = field(default_factory=list)
    script: str = ""
    script_at: int = -1  # offset of the script text's first character

    @property
    def shown(self) -> str:
        return short(self.name, 40)

    def attr(self, name: str) -> Attr | None:
        return self.attrs.get(name)

    @property
    def valid_id(self) -> str | None:
        """The ``id`` attribute's value if it is a valid id (spec §2.2), else None."""
        attr = self.attrs.get("id")
        return attr.value if attr is not None and ID.fullmatch(attr.value) else None


@dataclass
class Scan:
    tags: list[Tag]
    blanked: str


class Locator:
    """Maps offsets to 1-based (line, column); \\r\\n, \\r and \\n end lines, as in XML."""

    def __init__(self, text: str, line_offset: int) -> None:
        self.text = text
        self.line_offset = line_offset
        self.starts = [0, *(m.end() for m in _LINE_BREAK.finditer(text))]

    def line_col(self, at: int) -> tuple[int, int]:
        index = bisect_right(self.starts, at) - 1
        return index + 1 + self.line_offset, at - self.starts[index] + 1

    def error(self, at: int, message: str) -> WomlSyntaxError:
        index = bisect_right(self.starts, at) - 1
        end = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.text)
        source = self.text[self.starts[index] : end].rstrip("\r\n")
        line, column = self.line_col(at)
        return WomlSyntaxError(message, line, column, source)

    def error_at(self, line: int, column: int, message: str) -> WomlSyntaxError:
        index = min(max(line - 1, 0), len(self.starts) - 1)
        return self.error(min(self.starts[index] + max(column - 1, 0), len(self.text)), message)


def check_size_and_characters(text: str, loc: Locator) -> None:
    """Spec §2.5: at most 1 MiB of UTF-8; spec §2.1: only characters XML allows."""
    size = len(text) if len(text) > MAX_BYTES else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise loc.error(
            0, f"the document is {size:,} bytes of UTF-8, over the limit of 1 MiB (1,048,576 bytes)"
        )
    bad = _BAD_CHAR.search(text)
    if bad is not None:
        raise loc.error(
            bad.start(),
            f"character U+{ord(bad.group()):04X} is not allowed in a WOML document; "
            "XML allows tab, line breaks and printable characters",
        )


def scan_markup(text: str, loc: Locator) -> Scan:
    """Pass 1: tags with exact offsets, raw script bodies, and the blanked text."""
    tags: list[Tag] = []
    stack: list[int] = []
    out: list[str] = []  # pieces of the blanked text
    copied = 0  # text[:copied] is already in out
    steps = 0
    pos = 0
    first_markup = True
    # The body and end of the script just closed: text right after a </script> whose
    # body ended inside a JavaScript string is most likely the rest of the script (spec
    # §2.3). Only such an error reads the body as JavaScript: a scan that finds no stray
    # text never tokenizes a script (a 1,000-step document parsed 5x faster).
    after_script: tuple[str, int] | None = None
    while True:
        lt = text.find("<", pos)
        stop = len(text) if lt < 0 else lt
        stray = NON_SPACE.search(text, pos, stop)
        if stray is not None:
            if after_script is not None and ends_inside_a_string(after_script[0]):
                raise loc.error(after_script[1], early_script_end_message())
            raise loc.error(*diagnose_text(text, stray.start(), _open_tag(tags, stack)))
        after_script = None
        if lt < 0:
            break
        if text.startswith("<!--", lt):
            end = text.find("-->", lt + 4)
            if end < 0:
                raise loc.error(lt, "this comment is never closed; end it with -->")
            pos = end + 3
            continue
        if text.startswith(_CDATA_OPEN, lt):
            raise loc.error(*diagnose_text(text, lt, _open_tag(tags, stack)))
        if text.startswith("<!", lt):
            raise loc.error(lt, markup_declaration_message(text, lt))
        if text.startswith("<?", lt):
            decl = _XML_DECL.match(text, lt) if text.startswith("<?xml", lt) else None
            if decl is None or not first_markup:
                raise loc.error(lt, processing_instruction_message(text, lt, first_markup))
            out.append(text[copied:lt] + " " * (decl.end() - lt))
            copied = pos = decl.end()
            first_markup = False
            continue
        first_markup = False
        if text.startswith("</", lt):
            pos = _close_tag(text, lt, tags, stack, loc)
            continue
        match = START_TAG.match(text, lt)
        if match is None:
            raise loc.error(*_diagnose_tag(text, lt))
        name, self_closing = match.group(1), match.group(3) == "/"
        tag = Tag(name, lt, stack[-1] if stack else -1, _attributes(match, loc))
        if name == "step":
            steps += 1
            if steps > MAX_STEPS:
                raise loc.error(
                    lt, f"this is step {steps:,}; a document holds at most {MAX_STEPS:,} steps"
                )
        if tag.parent >= 0:
            tags[tag.parent].children.append(len(tags))
        tags.append(tag)
        pos = match.end()
        if name == "script" and not self_closing:
            close = _SCRIPT_END.search(text, pos)
            if close is None:
                raise loc.error(lt, "this <script> is never closed; end the script with </script>")
            body = text[pos : close.start()]
            after_script = (body, close.start())
            tag.script, tag.script_at = _script_text(body, pos, loc)
            out.append(text[copied:pos] + _blank(body))
            copied = close.start()
            pos = close.end()
        elif not self_closing:
            stack.append(len(tags) - 1)
            if len(stack) > MAX_NESTING:
                raise loc.error(
                    lt,
                    f"elements are nested more than {MAX_NESTING} levels deep here; a WOML "
                    "document nests <workflow>, <step> and <script> only (spec §2.1)",
                )
    if stack:
        open_tag = tags[stack[-1]]
        raise loc.error(
            open_tag.at,
            f"<{open_tag.shown}> is never closed; end it with </{open_tag.shown}>",
        )
    out.append(text[copied:])
    return Scan(tags, "".join(out))


def _blank(body: str) -> str:
    """``body`` with every character but line breaks turned into a space."""
    if "\r" in body:
        return _NOT_LINE_BREAK.sub(" ", body)
    return "\n".join(" " * len(line) for line in body.split("\n"))  # ~10x faster than sub


def _attributes(match: re.Match[str], loc: Locator) -> dict[str, Attr]:
    """The attributes of a start tag, with offsets; references checked (XML 1.0 §3.3)."""
    attrs: dict[str, Attr] = {}
    base = match.start(2)
    for m in _ATTR.finditer(match.group(2)):
        quoted = 2 if m.group(2) is not None else 3
        attr = Attr(m.group(1), base + m.start(1), base + m.start(quoted), m.group(quoted))
        if attr.name in attrs:
            raise loc.error(
                attr.name_at,
                f"attribute {attr.shown} appears twice in one tag; give it once",
            )
        if "<" in attr.raw:
            raise loc.error(
                attr.value_at + attr.raw.index("<"),
                f"attribute {attr.shown} contains '<'; write it as &lt; in attribute values",
            )
        bad = _BAD_REFERENCE.search(attr.raw) if "&" in attr.raw else None
        if bad is not None:
            raise loc.error(
                attr.value_at + bad.start(),
                f"attribute {attr.shown} contains a bare '&'; write it as &amp; "
                "(only &amp; &lt; &gt; &quot; &apos; and &#…; references are allowed)",
            )
        attrs[attr.name] = attr
    return attrs


def _decode_reference(m: re.Match[str]) -> str:
    if m.group(1):
        return _ENTITIES[m.group(1)]
    if m.group(2) or m.group(3):
        code = int(m.group(2), 10) if m.group(2) else int(m.group(3), 16)
        # lxml has already refused references to characters XML forbids (pass 2).
        return chr(code) if code <= 0x10FFFF else ""
    return " "  # XML 1.0 §3.3.3: each line break or tab becomes one space


def _script_text(body: str, at: int, loc: Locator) -> tuple[str, int]:
    """Spec §2.3: raw text; one surrounding CDATA section loses its markers."""
    lead = len(body) - len(body.lstrip(" \t\r\n"))
    inner = body.strip(" \t\r\n")
    start = at
    if inner.startswith(_CDATA_OPEN):
        close = inner.find(_CDATA_CLOSE)
        if close < 0:
            raise loc.error(
                at + lead, "this <![CDATA[ section in a <script> is never closed; end it with ]]>"
            )
        if close + len(_CDATA_CLOSE) != len(inner):
            raise loc.error(
                at + lead + close,
                "a <![CDATA[ section in a <script> must hold the whole script, "
                "but text follows this ]]>",
            )
        body = inner[len(_CDATA_OPEN) : close]
        start = at + lead + len(_CDATA_OPEN)
    # XML end-of-line handling (XML 1.0 §2.11), so JS line k is cell line script_line + k - 1.
    return body.replace("\r\n", "\n").replace("\r", "\n"), start


def _open_tag(tags: list[Tag], stack: list[int]) -> Tag | None:
    """The innermost open tag, None at the top level."""
    return tags[stack[-1]] if stack else None


def _close_tag(text: str, lt: int, tags: list[Tag], stack: list[int], loc: Locator) -> int:
    match = _END_TAG.match(text, lt)
    if match is None:
        raise loc.error(lt, "malformed closing tag; write it as </name>")
    name = match.group(1)
    if not stack:
        raise loc.error(lt, f"closing tag </{short(name, 40)}> has no matching opening tag")
    open_tag = tags[stack[-1]]
    if open_tag.name != name:
        line, _ = loc.line_col(open_tag.at)
        raise loc.error(
            lt,
            f"closing tag </{short(name, 40)}> does not match <{open_tag.shown}> opened on "
            f"line {line}; close it with </{open_tag.shown}> first",
        )
    stack.pop()
    return match.end()


def _diagnose_tag(text: str, lt: int) -> tuple[int, str]:
    """Where and what is wrong with a start tag that ``START_TAG`` refused."""
    name = _NAME_AT.match(text, lt + 1)
    if name is None:
        return lt, "'<' must start a tag here; in a script write the code inside <script>…</script>"
    tag, pos = short(name.group(), 40), name.end()
    while True:
        gap = _SPACE_AT.match(text, pos)
        had_space, pos = gap.end() > pos, gap.end()  # type: ignore[union-attr]  # \s* always matches
        if pos >= len(text) or text[pos] == "<":
            return lt, f"the <{tag}> tag is never closed with '>'"
        if text[pos] in "/>":
            return (
                pos,
                f"unexpected {text[pos : pos + 2]!r} in the <{tag}> tag; end it with > or />",
            )
        attr = _NAME_AT.match(text, pos)
        if attr is None:
            return pos, f"unexpected character {text[pos]!r} in the <{tag}> tag"
        key = short(attr.group(), 40)
        if not had_space:
            return pos, f"attribute {key} in <{tag}> needs a space before it"
        eq = _EQUALS_AT.match(text, attr.end())
        if eq is None:
            return pos, f'attribute {key} in <{tag}> has no value; write {key}="…"'
        pos = eq.end()
        quote = text[pos : pos + 1]
        if quote not in ('"', "'"):
            bare = short(_BARE_VALUE_AT.match(text, pos).group(), 40)  # type: ignore[union-attr]
            return pos, f'the value of {key} must be in quotes: {key}="{bare}"'
        close = text.find(quote, pos + 1)
        if close < 0:
            return pos, f"the value of {key} in <{tag}> never ends with a closing {quote}"
        pos = close + 1


def check_well_formed(blanked: str, loc: Locator) -> None:
    """Pass 2: lxml confirms XML well-formedness; no DTD, entity or network access."""
    # Imported here so that `import woml_magic` stays cheap (lxml costs ~10 ms).
    from lxml import etree

    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )
    wrapped = f"<{_ROOT}>{blanked}</{_ROOT}>"
    try:
        etree.fromstring(wrapped.encode("utf-8"), parser)
    except etree.XMLSyntaxError as exc:
        line, column = exc.position
        if line == 1:
            column -= len(_ROOT) + 2
        detail = re.sub(r", line \d+, column \d+$", "", str(exc.msg))
        # lxml quotes the offending text, line breaks included; a message is one line.
        detail = _LINE_BREAK.sub(" ", detail)
        raise loc.error_at(
            line, column, f"the document is not well-formed XML ({detail})"
        ) from None

