"""Characters that act instead of showing (issue 24 item 7; spec §6.3): bidirectional
overrides, other format characters and controls from scripts or servers are written as
harmless text in the HTML and SVG exactly as in the text timeline — one function,
``timeline.markup.visible`` — so they never reorder or hide the package's own words.

Before: U+202E from a script was neutralised in the text timeline but written raw into
the HTML, so `` @ line 2`` and the end of the explanation displayed reversed.
"""

from __future__ import annotations

import html
import sys
import unicodedata

import pytest
from lxml import etree

import woml_magic as wm
from woml_magic.timeline import render_html, render_text
from woml_magic.timeline.markup import esc, visible
from woml_magic.timeline.text import clean

RLO = "\u202e"
# A script that logs and throws text with a right-to-left override in it, on line 2 of
# the document, as a hostile or careless API's answer would.
DOC = f"""<step id="s"><script>
console.log("log {RLO}olleh");
throw new Error("bad {RLO}txet");
</script></step>"""


def test_a_bidi_override_from_a_script_is_shown_not_obeyed_in_the_html() -> None:
    run = wm.run(DOC, clock="simulated")
    page = render_html(run)
    assert RLO not in page
    root = etree.fromstring(page.encode())
    text = "".join(root.itertext())
    assert "bad ⟨U+202E⟩txet" in text
    assert "log ⟨U+202E⟩olleh" in text
    # The text timeline says the same, by the same function.
    assert RLO not in render_text(run)
    assert "bad ⟨U+202E⟩txet" in render_text(run)


@pytest.mark.parametrize(
    "raw",
    [
        "\u202e",
        "\u2066",
        "\u200f",
        "\u200b",
        "\ufeff",
        "\u061c",
        "\u2028",
        "\u2029",
        "\x1b",
        "\x00",
        "\x7f",
        "\x85",
        "\x9b",
        "\ud800",
        "\ufffe",
        "\U000e0041",
    ],
)
def test_html_and_text_show_each_such_character_alike(raw: str) -> None:
    shown = visible(raw)
    assert raw not in shown
    assert shown.isascii() or shown.startswith("⟨U+")
    assert esc(f"a{raw}b") == html.escape(f"a{shown}b")
    if raw not in "\u2028\u2029\x85":  # line breaks: the text timeline shows them as ⏎
        assert clean(f"a{raw}b") == f"a{shown}b"


def test_every_format_character_of_this_pythons_unicode_is_shown() -> None:
    # The class is written out (no scan of Unicode at import): it must cover every Cf,
    # Zl and Zp character of the running Python's unicodedata but the two joiners.
    missed = [
        f"U+{o:04X}"
        for o in range(sys.maxunicode + 1)
        if unicodedata.category(chr(o)) in ("Cf", "Zl", "Zp") and visible(chr(o)) == chr(o)
    ]
    assert missed == ["U+200C", "U+200D"]


def test_joiners_of_words_and_emoji_are_left_alone() -> None:
    # Persian "می‌خواهم" (a ZWNJ inside) and a family emoji (ZWJs) read as written.
    for text in ("می\u200cخواهم", "\U0001f468\u200d\U0001f469\u200d\U0001f467"):
        assert visible(text) == text
        assert esc(text) == text


def test_ordinary_text_tab_and_line_breaks_are_left_alone() -> None:
    text = "naïve café — 日本語 עברית العربية 👍\t\n\r"
    assert visible(text) == text
