"""Completion, help and diagnostics never fail, whatever is typed (spec §6.4).

An editor asks at every keystroke, on text that is almost never a valid document:
for any text and any cursor, ``complete`` answers None or completions that replace
text ending at the cursor, ``help_at`` answers None or text, and ``diagnostics``
answers positions inside the cell — never an exception.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from woml_magic.editing.complete import complete
from woml_magic.editing.diagnostics import diagnostics
from woml_magic.editing.flags import flags_of
from woml_magic.editing.help import help_at
from woml_magic.magic import WomlMagics

FLAGS = flags_of(WomlMagics.woml_cell.parser)
EXAMPLES = settings(
    deadline=None,
    database=None,  # no .hypothesis/ directory in the checkout
    derandomize=True,  # the same inputs on every run: CI must not turn red at random
    max_examples=600,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FRAGMENTS = [
    "%%woml", "%%woml --simulate\n", " --clock ", "--clock=", " --", "\n", "\r\n", "\r",
    "<", ">", "/>", "</", "<step", "<step id=\"a\"", "<workflow id='w'>", "</workflow>",
    "<script>", "</script>", "</step>", "<![CDATA[", "]]>", "<!--", "-->", "<?xml ?>",
    " retry=\"", " retry-backoff=", "\"", "'", "=", " ", "\t",
    "services.", "services.http.request({", "services.secret(\"", "attempt.", "context.",
    "context.steps.", "{", "}", "(", ")", ",", ":", "method: \"", "idempotency: {",
    "//", "/*", "*/", "`${", "`", "/re/", "\\", "é", "\U0001f600", "\x00", "\ud800",
]  # fmt: skip
TEXT = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=30).map(
    "".join)
CELL = st.one_of(TEXT.map(lambda t: "%%woml\n" + t), TEXT.map(lambda t: "%%woml " + t), TEXT)


@EXAMPLES
@given(cell=CELL, data=st.data())
def test_completion_and_help_never_raise(cell: str, data: st.DataObject) -> None:
    cursor = data.draw(st.integers(min_value=-2, max_value=len(cell) + 2), label="cursor")
    found = complete(cell, cursor, flags=FLAGS, secrets=("KEY",))
    if found is not None:
        assert 0 <= found.start <= found.end == cursor <= len(cell)
        assert all(c.text and c.kind for c in found.items)
    text = help_at(cell, cursor, usage="usage", flags=FLAGS)
    assert text is None or isinstance(text, str)


@EXAMPLES
@given(cell=CELL)
def test_diagnostics_never_raise_and_stand_inside_the_cell(cell: str) -> None:
    lines = max(1, cell.count("\n") + cell.count("\r") + 1)
    for d in diagnostics(cell):
        assert 1 <= d.line <= lines
        assert d.column >= 1
        assert d.message
        if d.end_line is not None:
            assert (d.end_line, d.end_column) > (d.line, d.column)
