"""Where a server's echo carries a secret value, in the encodings echoes use (spec §10.1).

A server writes back what it received in the encoding of the place it writes it to: a
JSON string, an HTML error page, a ``Location`` URL, a form, a log line, an
``Authorization`` header it read. ``Finder(value, replacement)`` finds one value in
any of these forms, and ``scrub`` replaces each occurrence by ``replacement`` (the
secret's reference)::

    as is, in any letter case ...... sk_test_4eC39, SK_TEST_4EC39
    percent-encoded ................ %40 or %2f or %2F, + or %20 for a space, UTF-8
                                     bytes (encodeURIComponent, forms, RFC 3986) and
                                     JavaScript's escape() (%E9, %u20AC)
    HTML character references ...... &amp; &#38; &#x26; &#X26; &#0038; and every
                                     named reference of the character (&excl; &apos;)
    backslash escapes .............. \\" \\\\ \\/ \\n \\u0026 \\x26 (JSON, JavaScript, Python's
                                     repr), also one level deeper (JSON in a JSON
                                     string: \\\\\\" and \\\\\\\\)
    base64 ......................... of the value or of any text that holds it (such
                                     as user:value, an Authorization: Basic token),
                                     standard or URL-safe alphabet, with or without
                                     padding: the whole base64 token is replaced

The text forms are found per character, so an encoder that escapes some characters
and leaves others (``html.escape``, ``encodeURIComponent``, Go's HTML-safe JSON)
and one that escapes every character are both found, and a mix of them too.

Not found, because nothing in the echo shows they came from the value: any other
transformation — a hash, encryption, a reversed or sliced value, two encodings
stacked (base64 of a percent-encoded value, a doubly percent-encoded one), a
compressed body — and a value of 4 bytes base64-encoded at one of the three byte
offsets (only 5 bytes and more leave a whole base64 group at every offset).
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from html.entities import html5
from typing import NoReturn

#: The characters of either base64 alphabet (standard ``+/``, URL-safe ``-_``).
_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_")
#: A base64 run of the value's bytes this long is replaced even when its whole token
#: does not decode to the value (a truncated echo): 9 bytes of it are there to read.
_MIN_BARE_CORE = 12
#: Control characters JSON, JavaScript and Python write as a backslash and a letter.
_SHORT_ESCAPES = {"\n": "n", "\t": "t", "\r": "r", "\b": "b", "\f": "f", "\v": "v", "\0": "0"}


@functools.cache
def _named_references() -> dict[str, tuple[str, ...]]:
    """HTML's named character references of each single character (``&`` → ``amp;``,
    ``AMP;``), from the HTML5 table."""
    names: dict[str, list[str]] = {}
    for name, text in html5.items():
        if len(text) == 1 and name.endswith(";"):
            names.setdefault(text, []).append(name)
    return {char: tuple(sorted(found)) for char, found in names.items()}


def _hex(number: int, width: int) -> str:
    """``number`` in hexadecimal as a pattern that takes either letter case."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{number:0{width}x}")


def _char_forms(char: str) -> list[str]:
    """Patterns for ``char`` in every encoding of the module's table, escapes first."""
    code = ord(char)
    forms: list[str] = []
    if char == "\\":
        forms += [r"\\\\\\\\", r"\\\\"]  # escaped twice, once (once more below: as is)
    elif code < 0x80 and not char.isalnum():
        forms += [r"\\\\\\" + re.escape(char), r"\\" + re.escape(char)]  # \\\" and \"
    if char in _SHORT_ESCAPES:
        forms += [r"\\\\" + _SHORT_ESCAPES[char], r"\\" + _SHORT_ESCAPES[char]]
    forms.append("".join("%" + _hex(byte, 2) for byte in char.encode("utf-8", "surrogatepass")))
    if 0x80 <= code < 0x100:
        forms.append("%" + _hex(code, 2))  # escape(): Latin-1
    elif 0x100 <= code <= 0xFFFF:
        forms.append("%[uU]" + _hex(code, 4))  # escape(): %uXXXX
    forms += [f"&#0*{code};", f"&#[xX]0*{_hex(code, 1)};"]
    forms += [re.escape("&" + name) for name in _named_references().get(char, ())]
    for slash in (r"\\\\", r"\\"):  # escaped once more (JSON in a JSON string), once
        if code <= 0xFFFF:
            forms.append(slash + "u" + _hex(code, 4))
        else:
            high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
            forms += [
                slash + "u" + _hex(high, 4) + slash + "u" + _hex(low, 4),
                slash + "U" + _hex(code, 8),
            ]
        if code < 0x100:
            forms.append(slash + "x" + _hex(code, 2))
    if char == " ":
        forms.append(r"\+")
    forms.append(re.escape(char))
    return forms


def _char_pattern(char: str) -> str:
    """A pattern for ``char`` as any of its letter cases, in any of its encodings.

    No ``IGNORECASE``: spelled out, every alternative starts with a literal character,
    so the regular expression engine skips ahead to the positions where one of those
    stands instead of trying each alternative at every position (≈ 4 times faster)."""
    cases = dict.fromkeys(c for c in (char, char.lower(), char.upper()) if len(c) == 1)
    forms = [form for case in cases for form in _char_forms(case)]
    return "(?:" + "|".join(dict.fromkeys(forms)) + ")"


def _base64_cores(data: bytes) -> tuple[str, ...]:
    """The base64 text that encodes ``data`` alone wherever it stands in a longer byte
    string: for each of the three offsets modulo 3, the whole 3-byte groups of
    ``data``, in both alphabets. Any base64 of a text holding ``data`` contains one."""
    cores: list[str] = []
    for skip in (0, 1, 2):
        chunk = data[skip:]
        chunk = chunk[: len(chunk) // 3 * 3]
        if chunk:
            standard = base64.b64encode(chunk).decode("ascii")
            cores += [standard, standard.translate(str.maketrans("+/", "-_"))]
    return tuple(dict.fromkeys(cores))


def _decode_base64(text: str) -> bytes | None:
    """The bytes of a base64 token in either alphabet, padded or not; None if it is not
    one."""
    body = text.rstrip("=").translate(str.maketrans("-_", "+/"))
    if len(body) % 4 == 1:
        body = body[:-1]  # a stray last character encodes no whole byte
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


class Finder:
    """Finds one secret value in an echo and replaces it (see the module's table).

    Holds the value, so like ``Secrets`` it never shows it and is never serialised.
    """

    __slots__ = ("__bytes", "__cores", "__pattern", "__shortest", "replacement")

    def __init__(self, value: str, replacement: str) -> None:
        self.replacement = replacement
        self.__bytes = value.encode("utf-8", "surrogatepass")
        self.__pattern = re.compile("".join(_char_pattern(char) for char in value))
        cores = _base64_cores(self.__bytes)
        self.__cores = re.compile("|".join(map(re.escape, cores))) if cores else None
        # Each character's form is one character or more, each core four or more.
        self.__shortest = min([len(value), *(len(core) for core in cores)])

    def __repr__(self) -> str:
        return f"Finder({self.replacement})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a secret's finder is not serialised: its value stays in this kernel")

    def found_in(self, text: str) -> bool:
        """Is the value in ``text`` in any form of the table? (Fails closed: a base64
        run that looks like part of the value counts.)"""
        if len(text) < self.__shortest:
            return False
        cores = self.__cores
        return bool(self.__pattern.search(text) or (cores is not None and cores.search(text)))

    def scrub(self, text: str) -> str:
        """``text`` with every occurrence of the value, in any form, replaced."""
        if len(text) < self.__shortest:
            return text
        cores = self.__cores
        if cores is not None and cores.search(text):
            text = self._scrub_base64(text, cores)
        if self.__pattern.search(text) is None:
            return text
        return self.__pattern.sub(self.replacement, text)

    def _scrub_base64(self, text: str, cores: re.Pattern[str]) -> str:
        """Replace each base64 token that decodes to bytes holding the value, whole."""
        out: list[str] = []
        position = 0
        while (match := cores.search(text, position)) is not None:
            start, end = match.start(), match.end()
            while start > position and text[start - 1] in _BASE64:
                start -= 1
            while end < len(text) and text[end] in _BASE64:
                end += 1
            while end < len(text) and text[end] == "=":
                end += 1
            token = self._token_start(text[start:end])
            if token is not None:
                out += [text[position : start + token], self.replacement]
            elif len(match.group()) >= _MIN_BARE_CORE:
                out += [text[position : match.start()], self.replacement]
                end = match.end()
            else:  # no reading of the run holds the value: none of its parts does
                out.append(text[position:end])
            position = end
        out.append(text[position:])
        return "".join(out)

    def _token_start(self, run: str) -> int | None:
        """Where in the base64 ``run`` the token holding the value starts (the run may
        begin with letters that are not base64, such as a word before the token), or
        None when no reading of it holds the whole value."""
        for offset in range(min(4, len(run))):
            decoded = _decode_base64(run[offset:])
            if decoded is not None and self.__bytes in decoded:
                return offset
        return None
