"""Writing values into the timeline's HTML and SVG (spec §6.3).

Everything shown is escaped (``esc``): script output, error messages and URLs are
untrusted, and the output stays well-formed XML.
"""

from __future__ import annotations

import html
import re

# XML 1.0 forbids C0 controls other than tab/newline/CR, U+FFFE and U+FFFF; lone
# surrogates cannot be encoded. DEL is legal XML but invisible, so it goes too.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def esc(text: object) -> str:
    """``text`` safe inside HTML/XML text or a quoted attribute (untrusted input)."""
    return html.escape(_UNSAFE.sub("\ufffd", str(text)), quote=True)


def data_time(v: float) -> str:
    """A time for a data attribute: seconds, enough digits to round-trip milliseconds."""
    return repr(round(v, 6))
