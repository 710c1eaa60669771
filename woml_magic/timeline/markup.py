"""Writing values into the timeline's HTML and SVG (spec §6.3).

Everything shown is escaped (``esc``): script output, error messages and URLs are
untrusted, and the output stays well-formed XML. ``visible`` is the one place that
decides how characters that act instead of showing are written: the text timeline
(``text.clean``) and the HTML and SVG (``esc``) both use it.
"""

from __future__ import annotations

import html
import re

# What would act on the text around it, or not show at all, or not be allowed in XML 1.0:
# C0 controls but tab, newline and carriage return (which each output handles itself);
# DEL and the C1 controls; every format character (Unicode category Cf: bidirectional
# marks, embeddings, overrides and isolates, zero-width spaces, the BOM, tags) but the
# zero-width non-joiner and joiner U+200C/U+200D (Persian and Indic words and emoji
# sequences need them, and they cannot reorder or hide the words around them), as of
# Unicode 15.1, a superset of older versions' (a test checks the running Python's
# unicodedata); the line and paragraph separators U+2028/U+2029; lone surrogates (not
# encodable); the noncharacters U+FFFE and U+FFFF (not XML).
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f"
    "\u0890\u0891\u08e2\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"
    "\ud800-\udfff\ufeff\ufff9-\ufffb\ufffe\uffff\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f]"
)


def _shown(match: re.Match[str]) -> str:
    o = ord(match.group())
    if o < 0x20:
        return "^" + chr(o + 0x40)  # caret notation, as `cat -v`: ESC is ^[
    if o == 0x7F:
        return "^?"
    return f"⟨U+{o:04X}⟩"


def visible(text: str) -> str:
    """``text`` with every character that would act instead of showing written as
    harmless visible text: C0 controls in caret notation (``ESC`` → ``^[``, DEL → ``^?``),
    the rest by code point (U+202E → ``⟨U+202E⟩``), so script output can neither drive a
    terminal nor reorder the words around it on a page. Tab, newline and carriage
    return are left as they are."""
    return _INVISIBLE.sub(_shown, text)


def esc(text: object) -> str:
    """``text`` safe inside HTML/XML text or a quoted attribute (untrusted input), with
    invisible and control characters shown (``visible``)."""
    return html.escape(visible(str(text)), quote=True)


def data_time(v: float) -> str:
    """A time for a data attribute: seconds, enough digits to round-trip milliseconds."""
    return repr(round(v, 6))
