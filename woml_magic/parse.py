"""Parse a WOML cell into a ``Workflow`` (spec §2.1-§2.5, the parse half of §7).

Scripts are raw text, as in HTML (spec §2.3), so the document cannot go straight to an
XML parser. Parsing runs in three passes over one coordinate system:

1. ``_scan`` walks the markup with regular expressions. It records every start tag
   (name, attributes, exact offsets, parent), takes each ``<script>`` body verbatim,
   and rejects what WOML never allows: text outside scripts, DTDs and entity
   declarations, processing instructions, unbalanced tags, the step limit. It returns
   the text with every script body and the XML declaration blanked to spaces (line
   breaks kept), so offsets in the blanked text equal offsets in the cell.
2. lxml checks that the blanked text is well-formed XML (names, characters, references)
   with entity resolution, DTD loading and network access off.
3. ``_validate`` checks elements and attributes against spec §2.1-§2.4 and builds the
   frozen models.

Every error is a ``WomlSyntaxError`` with a 1-based line and column in the cell.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import timedelta
from functools import lru_cache

from .errors import WomlSyntaxError
from .model import Step, Workflow
from .policy import MAX_DURATION, DurationError, RetryPolicy, format_duration, parse_duration

#: spec §2.5: documents over 1 MiB of UTF-8 or over 10,000 steps are refused.
MAX_BYTES = 1 << 20
MAX_STEPS = 10_000
#: spec §2.1: the id of a workflow written as top-level steps.
IMPLICIT_WORKFLOW_ID = "cell"

STEP_ATTRIBUTES = ("id", "retry", "retry-backoff", "retry-delay", "retry-max-delay", "timeout")
WORKFLOW_ATTRIBUTES = ("id",)
SCRIPT_ATTRIBUTES = ("lang",)

_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_RETRY = re.compile(r"[1-9][0-9]?")
_DEFAULT_TIMEOUT = timedelta(seconds=30)
# Documents repeat the same few durations; timedelta is immutable, errors are not cached.
_parse_duration = lru_cache(maxsize=256)(parse_duration)

# Loose XML names: lxml enforces the exact XML name rules in pass 2.
_NAME = r"[^\s<>/=\"'!?&;]+"
_START_TAG = re.compile(rf"<({_NAME})((?:\s+{_NAME}\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*(/?)>")
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
_NON_SPACE = re.compile(r"[^ \t\r\n]")
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
class _Attr:
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
        return _short(self.name, 40)


@dataclass
class _Tag:
    name: str
    at: int
    parent: int  # index in _Scan.tags, -1 at the top level
    attrs: dict[str, _Attr]  # by name, in document order
    children: list[int] = field(default_factory=list)
    script: str = ""
    script_at: int = -1  # offset of the script text's first character

    @property
    def shown(self) -> str:
        return _short(self.name, 40)

    def attr(self, name: str) -> _Attr | None:
        return self.attrs.get(name)


@dataclass
class _Scan:
    tags: list[_Tag]
    blanked: str


class _Locator:
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


def parse(
    text: str, *, line_offset: int = 0, default_timeout: timedelta | None = None
) -> Workflow:
    """Parse one WOML cell into a frozen ``Workflow`` (spec §2, §7).

    ``default_timeout`` replaces the 30s default for steps without a ``timeout``
    attribute (the magic's ``Woml.default_timeout`` setting, spec §6.1).

    ``line_offset`` is added to every reported line and to ``Step.line`` and
    ``Step.script_line``: the magic passes 1 so that lines count the ``%%woml`` line,
    as the notebook editor shows them (spec §2.3). Raises ``WomlSyntaxError`` for every
    malformed document, with the line and column of the fault (spec §2.5).
    """
    if not isinstance(text, str):
        raise TypeError(f"parse() takes the document as str, got {type(text).__name__}")
    if line_offset < 0:
        raise ValueError(f"line_offset must be 0 or more, got {line_offset}")
    loc = _Locator(text, line_offset)
    _check_size_and_characters(text, loc)
    scan = _scan(text, loc)
    _check_well_formed(scan.blanked, loc)
    if default_timeout is not None and not timedelta(0) < default_timeout <= MAX_DURATION:
        raise ValueError(f"default_timeout must be longer than 0 and at most 24h, "
                         f"got {default_timeout}")
    return _validate(text, scan, loc, default_timeout or _DEFAULT_TIMEOUT)


def _check_size_and_characters(text: str, loc: _Locator) -> None:
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


def _scan(text: str, loc: _Locator) -> _Scan:
    """Pass 1: tags with exact offsets, raw script bodies, and the blanked text."""
    tags: list[_Tag] = []
    stack: list[int] = []
    out: list[str] = []  # pieces of the blanked text
    copied = 0  # text[:copied] is already in out
    steps = 0
    pos = 0
    first_markup = True
    while True:
        lt = text.find("<", pos)
        stop = len(text) if lt < 0 else lt
        stray = _NON_SPACE.search(text, pos, stop)
        if stray is not None:
            raise _text_error(text, stray.start(), tags, stack, loc)
        if lt < 0:
            break
        if text.startswith("<!--", lt):
            end = text.find("-->", lt + 4)
            if end < 0:
                raise loc.error(lt, "this comment is never closed; end it with -->")
            pos = end + 3
            continue
        if text.startswith(_CDATA_OPEN, lt):
            raise _text_error(text, lt, tags, stack, loc)
        if text.startswith("<!", lt):
            raise loc.error(lt, _markup_declaration_message(text, lt))
        if text.startswith("<?", lt):
            decl = _XML_DECL.match(text, lt) if text.startswith("<?xml", lt) else None
            if decl is None or not first_markup:
                raise loc.error(lt, _processing_instruction_message(text, lt, first_markup))
            out.append(text[copied:lt] + " " * (decl.end() - lt))
            copied = pos = decl.end()
            first_markup = False
            continue
        first_markup = False
        if text.startswith("</", lt):
            pos = _close_tag(text, lt, tags, stack, loc)
            continue
        match = _START_TAG.match(text, lt)
        if match is None:
            raise loc.error(*_diagnose_tag(text, lt))
        name, self_closing = match.group(1), match.group(3) == "/"
        tag = _Tag(name, lt, stack[-1] if stack else -1, _attributes(match, loc))
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
            tag.script, tag.script_at = _script_text(body, pos, loc)
            out.append(text[copied:pos] + _blank(body))
            copied = close.start()
            pos = close.end()
        elif not self_closing:
            stack.append(len(tags) - 1)
    if stack:
        open_tag = tags[stack[-1]]
        raise loc.error(
            open_tag.at,
            f"<{open_tag.shown}> is never closed; end it with </{open_tag.shown}>",
        )
    out.append(text[copied:])
    return _Scan(tags, "".join(out))


def _blank(body: str) -> str:
    """``body`` with every character but line breaks turned into a space."""
    if "\r" in body:
        return _NOT_LINE_BREAK.sub(" ", body)
    return "\n".join(" " * len(line) for line in body.split("\n"))  # ~10x faster than sub


def _attributes(match: re.Match[str], loc: _Locator) -> dict[str, _Attr]:
    """The attributes of a start tag, with offsets; references checked (XML 1.0 §3.3)."""
    attrs: dict[str, _Attr] = {}
    base = match.start(2)
    for m in _ATTR.finditer(match.group(2)):
        quoted = 2 if m.group(2) is not None else 3
        attr = _Attr(m.group(1), base + m.start(1), base + m.start(quoted), m.group(quoted))
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


def _script_text(body: str, at: int, loc: _Locator) -> tuple[str, int]:
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


def _close_tag(text: str, lt: int, tags: list[_Tag], stack: list[int], loc: _Locator) -> int:
    match = _END_TAG.match(text, lt)
    if match is None:
        raise loc.error(lt, "malformed closing tag; write it as </name>")
    name = match.group(1)
    if not stack:
        raise loc.error(lt, f"closing tag </{_short(name, 40)}> has no matching opening tag")
    open_tag = tags[stack[-1]]
    if open_tag.name != name:
        line, _ = loc.line_col(open_tag.at)
        raise loc.error(
            lt,
            f"closing tag </{_short(name, 40)}> does not match <{open_tag.shown}> opened on "
            f"line {line}; close it with </{open_tag.shown}> first",
        )
    stack.pop()
    return match.end()


def _text_error(
    text: str, at: int, tags: list[_Tag], stack: list[int], loc: _Locator
) -> WomlSyntaxError:
    """Text outside scripts: WOML allows only whitespace and comments there (spec §2.1)."""
    found = re.split(r"[\r\n<]", text[at : at + 40], maxsplit=1)[0].rstrip() or text[at]
    shown = _short(found, 30)
    if not stack:
        where = "outside any element; between steps"
    else:
        where = f"inside {_describe(tags[stack[-1]])}; there"
    return loc.error(
        at,
        f"unexpected text {shown!r} {where} only whitespace, comments and elements are allowed "
        "(put code inside <script>…</script>)",
    )


def _markup_declaration_message(text: str, lt: int) -> str:
    word = re.match(r"<!([A-Za-z]*)", text[lt : lt + 20])
    kind = word.group(1).upper() if word else ""
    if kind in ("DOCTYPE", "ENTITY", "ELEMENT", "ATTLIST", "NOTATION"):
        return (
            f"<!{kind} declarations are not allowed; WOML documents cannot declare a DTD "
            "or entities (spec §2.5)"
        )
    return "unexpected '<!'; only comments <!-- … --> may appear outside scripts"


def _processing_instruction_message(text: str, lt: int, first_markup: bool) -> str:
    if text.startswith("<?xml", lt) and re.match(r"<\?xml[\s?]", text[lt : lt + 6]):
        if first_markup:
            return 'malformed XML declaration; write it as <?xml version="1.0"?>'
        return "the XML declaration <?xml …?> must come first in the cell"
    return "processing instructions <?…?> are not allowed; only an XML declaration at the top"


def _diagnose_tag(text: str, lt: int) -> tuple[int, str]:
    """Where and what is wrong with a start tag that ``_START_TAG`` refused."""
    name = _NAME_AT.match(text, lt + 1)
    if name is None:
        return lt, "'<' must start a tag here; in a script write the code inside <script>…</script>"
    tag, pos = _short(name.group(), 40), name.end()
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
        key = _short(attr.group(), 40)
        if not had_space:
            return pos, f"attribute {key} in <{tag}> needs a space before it"
        eq = _EQUALS_AT.match(text, attr.end())
        if eq is None:
            return pos, f'attribute {key} in <{tag}> has no value; write {key}="…"'
        pos = eq.end()
        quote = text[pos : pos + 1]
        if quote not in ('"', "'"):
            bare = _short(_BARE_VALUE_AT.match(text, pos).group(), 40)  # type: ignore[union-attr]
            return pos, f'the value of {key} must be in quotes: {key}="{bare}"'
        close = text.find(quote, pos + 1)
        if close < 0:
            return pos, f"the value of {key} in <{tag}> never ends with a closing {quote}"
        pos = close + 1


def _check_well_formed(blanked: str, loc: _Locator) -> None:
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
        raise loc.error_at(
            line, column, f"the document is not well-formed XML ({detail})"
        ) from None


def _validate(text: str, scan: _Scan, loc: _Locator, default_timeout: timedelta) -> Workflow:
    """Pass 3: spec §2.1 cell forms, §2.2 attributes, §2.3 children."""
    tags = scan.tags
    top = [i for i, t in enumerate(tags) if t.parent < 0]
    if not top:
        first = _NON_SPACE.search(text)
        raise loc.error(
            0 if first is None else first.start(),
            'the cell has no <step>; write <step id="…"><script>…</script></step> '
            'or a <workflow id="…"> holding steps',
        )
    head = tags[top[0]]
    if head.name == "workflow":
        if len(top) > 1:
            raise loc.error(
                tags[top[1]].at,
                f"<{tags[top[1]].name}> follows the <workflow>; a cell holds one <workflow> "
                "and nothing else",
            )
        _check_attributes(head, WORKFLOW_ATTRIBUTES, loc)
        workflow_id = _check_id(head, "workflow", loc)
        step_tags = head.children
        if not step_tags:
            raise loc.error(
                head.at, f"{_describe(head)} has no <step>; a workflow needs at least one step"
            )
    else:
        workflow_id, step_tags = IMPLICIT_WORKFLOW_ID, top
    steps: list[Step] = []
    seen: dict[str, int] = {}
    for index in step_tags:
        tag = tags[index]
        if tag.name != "step":
            raise _unexpected_element(tag, tags, loc)
        step = _step(tag, tags, loc, default_timeout)
        if step.id in seen:
            id_attr = tag.attr("id")
            assert id_attr is not None  # _step requires it
            raise loc.error(
                id_attr.value_at,
                f"step id {_quoted(step.id)} is used twice (first on line {seen[step.id]}); "
                "step ids must be unique within the workflow",
            )
        seen[step.id] = step.line
        steps.append(step)
    return Workflow(id=workflow_id, steps=tuple(steps), source=text, line_offset=loc.line_offset)


def _unexpected_element(tag: _Tag, tags: list[_Tag], loc: _Locator) -> WomlSyntaxError:
    if tag.name == "retry":
        return loc.error(tag.at, 'retry is a step attribute, not a tag: write <step retry="3" …>')
    if tag.parent < 0:
        if tag.name == "workflow":
            return loc.error(
                tag.at,
                "a <workflow> cannot follow top-level <step> elements; put every step "
                "inside one <workflow>",
            )
        where = "at the top of the cell"
        allowed: tuple[str, ...] = ("step", "workflow")
    else:
        parent = tags[tag.parent]
        where = f"inside {_describe(parent)}"
        allowed = ("step",) if parent.name == "workflow" else ("script",)
    if tag.name == "script":
        return loc.error(tag.at, f"<script> {where} must be inside a <step>")
    hint = _did_you_mean(tag.name, allowed, "<{}>")
    expected = " or ".join(f"<{a}>" for a in allowed)
    hint = hint or f"{expected} is allowed here"
    return loc.error(tag.at, f"unexpected element <{tag.shown}> {where}; {hint}")


def _step(tag: _Tag, tags: list[_Tag], loc: _Locator, default_timeout: timedelta) -> Step:
    """One ``<step>``: spec §2.2 attributes and §2.3 children."""
    _check_attributes(tag, STEP_ATTRIBUTES, loc)
    step_id = _check_id(tag, "step", loc)
    where = _describe(tag)
    attempts = 1
    retry = tag.attr("retry")
    if retry is not None:
        if not _RETRY.fullmatch(retry.value) or int(retry.value) > 10:
            raise loc.error(
                retry.value_at,
                f"retry={_quoted(retry.value)} on {where} is not allowed; retry is the total "
                "number of attempts, a whole number from 1 to 10 without sign or leading zero",
            )
        attempts = int(retry.value)
    backoff_attr = tag.attr("retry-backoff")
    backoff = "fixed" if backoff_attr is None else backoff_attr.value
    if backoff not in ("fixed", "exponential"):
        assert backoff_attr is not None
        raise loc.error(
            backoff_attr.value_at,
            f"retry-backoff={_quoted(backoff)} on {where} is not allowed; "
            'write retry-backoff="fixed" or retry-backoff="exponential"',
        )
    delay = _duration(tag, "retry-delay", timedelta(seconds=1), loc)
    max_delay = _duration(tag, "retry-max-delay", None, loc)
    if max_delay is not None and delay is not None and max_delay < delay:
        attr = tag.attr("retry-max-delay")
        assert attr is not None
        raise loc.error(
            attr.value_at,
            f"retry-max-delay={_quoted(attr.value)} on {where} is shorter than "
            f"retry-delay ({format_duration(delay)}); it must be at least retry-delay "
            "and at most 24h",
        )
    timeout = _duration(tag, "timeout", default_timeout, loc)
    if timeout is not None and timeout <= timedelta(0):
        attr = tag.attr("timeout")
        assert attr is not None
        raise loc.error(
            attr.value_at,
            f"timeout={_quoted(attr.value)} on {where} must be longer than 0; "
            "it is the time each attempt may take, at most 24h (default 30s)",
        )
    script = _one_script(tag, tags, loc)
    line, _ = loc.line_col(tag.at)
    script_line, script_column = loc.line_col(script.script_at)
    assert delay is not None  # both have defaults
    assert timeout is not None
    return Step(
        id=step_id,
        script=script.script,
        policy=RetryPolicy(attempts, backoff, delay, max_delay),  # type: ignore[arg-type]
        timeout=timeout,
        line=line,
        script_line=script_line,
        script_column=script_column,
    )


def _one_script(step: _Tag, tags: list[_Tag], loc: _Locator) -> _Tag:
    """Spec §2.3: exactly one ``<script>``, whose ``lang`` may only be ``javascript``."""
    found: _Tag | None = None
    for index in step.children:
        child = tags[index]
        if child.name != "script":
            raise _unexpected_element(child, tags, loc)
        if found is not None:
            line, _ = loc.line_col(found.at)
            raise loc.error(
                child.at,
                f"{_describe(step)} has a second <script> (the first is on line {line}); "
                "a step holds exactly one <script>",
            )
        _check_attributes(child, SCRIPT_ATTRIBUTES, loc)
        lang = child.attr("lang")
        if lang is not None and lang.value != "javascript":
            raise loc.error(
                lang.value_at,
                f"lang={_quoted(lang.value)} on the <script> of {_describe(step)} is not "
                "supported; the only script language is javascript",
            )
        found = child
    if found is None:
        raise loc.error(
            step.at,
            f"{_describe(step)} has no <script>; a step holds exactly one <script>…</script>",
        )
    if found.script_at < 0:  # <script/>: an empty script
        found.script_at = _START_TAG.match(loc.text, found.at).end()  # type: ignore[union-attr]
    return found


def _check_attributes(tag: _Tag, allowed: tuple[str, ...], loc: _Locator) -> None:
    """Spec §2.2: any attribute not in ``allowed`` is an error naming the nearest one."""
    for attr in tag.attrs.values():
        if attr.name not in allowed:
            hint = _did_you_mean(attr.name, allowed, "`{}`")
            names = ", ".join(allowed)
            raise loc.error(
                attr.name_at,
                f"unknown attribute `{attr.shown}` on {_describe(tag)}; "
                + (hint or f"the attributes of <{tag.shown}> are {names}"),
            )


def _check_id(tag: _Tag, kind: str, loc: _Locator) -> str:
    """Spec §2.2: ids match ``[A-Za-z_][A-Za-z0-9_.-]{0,63}``; the id is required."""
    attr = tag.attr("id")
    if attr is None:
        raise loc.error(tag.at, f'<{kind}> needs an id attribute, e.g. <{kind} id="charge">')
    if not _ID.fullmatch(attr.value):
        raise loc.error(
            attr.value_at,
            f"id={_quoted(attr.value)} on <{kind}> is not a valid id; an id starts with a letter "
            "or _ and continues with up to 63 letters, digits, _, . or -",
        )
    return attr.value


def _duration(tag: _Tag, name: str, default: timedelta | None, loc: _Locator) -> timedelta | None:
    """A §2.4 duration attribute, at most 24h (spec §2.2)."""
    attr = tag.attr(name)
    if attr is None:
        return default
    try:
        value = _parse_duration(attr.value)
    except DurationError as exc:
        raise loc.error(attr.value_at, f"{name} on {_describe(tag)}: {exc}") from None
    if value > MAX_DURATION:
        raise loc.error(
            attr.value_at,
            f"{name}={_quoted(attr.value)} on {_describe(tag)} is longer than the limit of 24h",
        )
    return value


def _did_you_mean(name: str, allowed: tuple[str, ...], style: str) -> str:
    """The "did you mean …?" clause for the nearest allowed name, if any is near (spec §2.2)."""
    if len(name) > 40:
        return ""
    best = min(allowed, key=lambda a: (_name_distance(name, a), a))
    if _name_distance(name, best) > max(2, len(name) // 2):
        return ""
    return f"did you mean {style.format(best)}?"


def _name_distance(a: str, b: str) -> int:
    """Edit distance that also compares hyphen-separated words as units (spec §2.2).

    ``retry-delay-max`` has the words of ``retry-max-delay`` (distance 0) but is closer
    to ``retry-delay`` by letters; the smaller of the two measures wins. When some word
    matches, a missing word costs 1, an extra word 3 and a misspelt word its letter
    distance; names with no word in common are compared by letters only.
    """
    a, b = a.lower(), b.lower()
    words_a, spare = re.split(r"[-_]", a), re.split(r"[-_]", b)
    cost, matched = 0, False
    for word in words_a:
        near = min(spare, key=lambda w: _edit_distance(word, w), default=None)
        if near is not None and _edit_distance(word, near) <= (1 if len(word) < 5 else 2):
            cost += _edit_distance(word, near)
            spare.remove(near)
            matched = True
        else:
            cost += 3
    letters = _edit_distance(a, b)
    return min(letters, cost + len(spare)) if matched else letters


def _edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: an adjacent transposition (dealy) costs 1."""
    rows = [list(range(len(b) + 1))]
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            best = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                best = min(best, rows[-2][j - 2] + 1)
            row.append(best)
        rows.append(row)
    return rows[-1][-1]


def _describe(tag: _Tag) -> str:
    """``<step id="charge">`` when the tag has a usable id, else ``<step>``."""
    attr = tag.attr("id")
    if attr is not None and _ID.fullmatch(attr.value):
        return f'<{tag.shown} id="{attr.value}">'
    return f"<{tag.shown}>"


def _short(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _quoted(value: str) -> str:
    return '"' + _short(value, 40) + '"'
