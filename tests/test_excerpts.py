"""Bounded output (issue 24 item 4; spec §2.5, STYLE 15): whatever quotes input quotes a
window of it, the caret under the right character of the window.

Before: ``woml check`` of a 50 MB one-line file printed the whole line (52,429,089
bytes) to stderr, and an error deep in a minified one-line script rendered in the cell
(``_render_traceback_``) as 1.6-1.8 million characters: the line and the spaces before
the caret. One function, ``errors.excerpt``, does the windowing everywhere.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import woml_magic as wm
from woml_magic.errors import EXCERPT, WomlSyntaxError, excerpt, quote
from woml_magic.scan_messages import short


def caret_points_at(lines: list[str], line_text: str, column: int) -> None:
    """The last two lines of a document error: the window, and the caret under the
    character at ``column`` (1-based) of ``line_text``."""
    shown, caret = lines[-2], lines[-1]
    gutter = shown.index(" | ") + 3
    assert caret.index(" | ") + 3 == gutter
    assert len(shown) - gutter <= EXCERPT
    at = caret.index("^")
    assert shown[at] == line_text[column - 1]
    # The characters around it are the line's own, so the window is the right one.
    before = min(5, column - 1, at - gutter)
    assert line_text[column - 1 - before : column + 5] == shown[at - before : at + 6]


@given(st.text(min_size=0, max_size=400), st.integers(0, 450), st.integers(8, 200))
def test_excerpt_is_bounded_and_keeps_the_character_under_the_caret(
    text: str, at: int, width: int
) -> None:
    shown, caret = excerpt(text, at, width)
    assert len(shown) <= width
    if len(text) <= width:
        assert shown == text
    if at < len(text):
        assert shown[caret] == text[at]
    else:
        assert caret == len(shown)


def test_short_and_quote_are_windows_of_the_same_function() -> None:
    assert short("x" * 50, 10) == excerpt("x" * 50, 0, 10)[0] == "x" * 9 + "…"
    assert quote("y" * 10_000) == repr("y" * 59 + "…")
    assert quote("ok") == "'ok'"
    assert quote(-1) == "-1"
    assert quote(list(range(1000)), 20) == "[0, 1, 2, 3, 4, 5, …"


def test_woml_check_of_a_huge_one_line_file_prints_a_window_of_it(tmp_path: Path) -> None:
    path = tmp_path / "huge.woml"
    path.write_text(
        '<step id="a"><script>' + "x" * 3_000_000 + "</script></step>", encoding="utf-8"
    )
    done = subprocess.run(
        [sys.executable, "-m", "woml_magic", "check", str(path)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "over the limit of 1 MiB" in done.stderr
    assert len(done.stderr) < 800, len(done.stderr)
    caret_points_at(done.stderr.splitlines(), path.read_text(encoding="utf-8"), 1)


def test_woml_check_of_an_error_deep_in_one_line_points_into_a_window(tmp_path: Path) -> None:
    steps = '<step id="s{i}"><script>return {i};</script></step>'
    line = (
        '<workflow id="w">'
        + "".join(steps.format(i=i) for i in range(12_000))
        + '<step id="bad" retry="many"><script>return 0;</script></step></workflow>'
    )
    path = tmp_path / "deep.woml"
    path.write_text(line, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "woml_magic", "check", str(path)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    column = int(lines[0].split(":")[2])
    assert column > 500_000
    assert len(done.stderr) < 1200, len(done.stderr)
    caret_points_at(lines, line, column)


def test_a_script_error_deep_in_a_minified_line_renders_in_a_few_hundred_characters() -> None:
    script = "var a = 1;" * 100_000 + " var = ;" + "var b = 2;" * 1000
    doc = f'<step id="a"><script>{script}</script></step>'
    with pytest.raises(WomlSyntaxError) as info:
        wm.run(doc, clock="simulated")
    shown = info.value._render_traceback_()
    assert sum(map(len, shown)) < 600
    assert info.value.column > 1_000_000
    caret_points_at(shown, doc, info.value.column)
    assert doc[info.value.column - 1] == "="  # QuickJS: "variable name expected"


def test_a_line_number_of_five_digits_keeps_the_caret_under_its_column() -> None:
    doc = "\n" * 12_345 + '<step id="a" retry="lots"><script>return 1;</script></step>'
    with pytest.raises(WomlSyntaxError) as info:
        wm.parse(doc)
    assert info.value.line == 12_346
    caret_points_at(info.value._render_traceback_(), doc.splitlines()[-1], info.value.column)


def test_an_explanation_quotes_a_window_of_a_thrown_errors_name() -> None:
    # The name is the script's own (`e.name = …`); the explanation names it, bounded.
    run = wm.run(
        '<step id="a"><script>const e = new Error("m"); '
        'e.name = "N".repeat(100000); throw e;</script></step>',
        clock="simulated",
    )
    (attempt,) = run.steps["a"].attempts
    assert attempt.explanation is not None
    assert f"the script threw {'N' * 59}… on the last allowed attempt" in attempt.explanation
    assert len(attempt.explanation) < 200
