"""What parsing says about a document WOML refuses (spec §2.1, §2.2, §2.5; STYLE 6).

Tags are named as the reader wrote them (``describe``, ``short``, ``quoted``), and
markup WOML never allows gets a sentence that says what to write instead: text
outside scripts, ``<retry>`` written as a tag, DTD declarations, processing
instructions. Functions that point somewhere other than where the scanner stands
return ``(offset, message)``; ``woml_magic.scan`` turns either into a
``WomlSyntaxError`` with its ``Locator``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .errors import excerpt

if TYPE_CHECKING:
    from .scan import Tag

_RETRY_COUNT = re.compile(r"\d{1,2}")


def short(value: str, limit: int) -> str:
    """The first ``limit`` characters of ``value``, ``…`` where cut (``errors.excerpt``)."""
    return excerpt(value, 0, limit)[0]


def quoted(value: str) -> str:
    return '"' + short(value, 40) + '"'


def describe(tag: Tag) -> str:
    """``<step id="charge">`` when the tag has a valid id, else ``<step>``."""
    if tag.valid_id is not None:
        return f'<{tag.shown} id="{tag.valid_id}">'
    return f"<{tag.shown}>"


def retry_tag_message(content: str | None = None) -> str:
    """The seed's first rule, taught where someone wrote ``<retry>`` (spec §2.2, seed:
    "Retry is a step attribute, not a tag"); ``content`` is what the tag held, if any."""
    value = content.strip() if content and _RETRY_COUNT.fullmatch(content.strip()) else "3"
    return f'retry is a step attribute, not a tag: write <step retry="{value}" …>'


def diagnose_text(text: str, at: int, inside: Tag | None) -> tuple[int, str]:
    """Text at ``at``, outside scripts, in the open tag ``inside`` (None at the top
    level): WOML allows only whitespace and comments there (spec §2.1)."""
    found = re.split(r"[\r\n<]", text[at : at + 40], maxsplit=1)[0].rstrip() or text[at]
    if inside is not None and inside.name == "retry":
        # `<retry>3</retry>`: the most natural way to get the seed's first rule wrong.
        return inside.at, retry_tag_message(found)
    shown = short(found, 30)
    if inside is None:
        where = "outside any element; between steps"
    else:
        where = f"inside {describe(inside)}; there"
    return at, (
        f"unexpected text {shown!r} {where} only whitespace, comments and elements are allowed "
        "(put code inside <script>…</script>)"
    )


def markup_declaration_message(text: str, lt: int) -> str:
    """``<!…>`` that is not a comment: DTDs and entities are refused (spec §2.5)."""
    word = re.match(r"<!([A-Za-z]*)", text[lt : lt + 20])
    kind = word.group(1).upper() if word else ""
    if kind in ("DOCTYPE", "ENTITY", "ELEMENT", "ATTLIST", "NOTATION"):
        return (
            f"<!{kind} declarations are not allowed; WOML documents cannot declare a DTD "
            "or entities (spec §2.5)"
        )
    return "unexpected '<!'; only comments <!-- … --> may appear outside scripts"


def processing_instruction_message(text: str, lt: int, first_markup: bool) -> str:
    """``<?…?>`` other than one well-formed XML declaration before any markup."""
    if text.startswith("<?xml", lt) and re.match(r"<\?xml[\s?]", text[lt : lt + 6]):
        if first_markup:
            return 'malformed XML declaration; write it as <?xml version="1.0"?>'
        return "the XML declaration <?xml …?> must come first in the cell"
    return "processing instructions <?…?> are not allowed; only an XML declaration at the top"


def ends_inside_a_string(body: str) -> bool:
    """Does JavaScript ``body`` end inside a string, a template literal or a comment?
    Then the ``</script>`` after it was meant as part of that, and ended the script
    early (spec §2.3: a script ends at the next ``</script>``)."""
    from .javascript import unclosed  # only a document with an error asks: import stays cheap

    return unclosed(body) is not None


def early_script_end_message() -> str:
    """A ``</script>`` written inside a JavaScript string ends the script there (spec
    §2.3), and what followed it is refused as text: say that, and how to write it."""
    return (
        "this </script> ends the script early: it stands inside a JavaScript string or "
        "comment, but "
        "a script ends at the first </script>, so the code after it is outside <script>; "
        'write it as <\\/script> in the string (or "<" + "/script>")'
    )
